// serve_events.go owns the event streams of "acpguard serve": the events a
// host gets, each session's event log (a bounded ring for Last-Event-ID
// replay and its subscribers), the daemon-wide budget of event memory, and
// GET /session/:id/events with its SSE writer.
//
// Memory: an event is stored once, at its exact size, and counted (with a
// fixed header) in the daemon's budget (--max-event-memory) from its
// publication until the last of its holders lets it go: the session's ring, a subscriber's queue, or a
// write in progress. A subscriber's queue is bounded in events and bytes;
// every write to a stream has a deadline; a dropped subscriber's queue is
// released at once and its handler's blocked write is cut short, so a host
// that stops reading holds neither memory nor a goroutine for long.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Event types of GET /session/:id/events.
const (
	eventSessionUpdate      = "session_update"
	eventPermissionRequest  = "permission_request"
	eventPermissionResolved = "permission_resolved"
	// A vote for a request already resolved: its 404 also tells the
	// session's streams, as Qwen Code's serve does (DESIGN.md §7).
	eventPermissionAlreadyResolved = "permission_already_resolved"
	eventTurnComplete              = "turn_complete"
	eventPromptCancelled           = "prompt_cancelled"
	eventTurnError                 = "turn_error"
	eventSessionDied               = "session_died"
	eventSessionClosed             = "session_closed"
	// The last event a dropped slow subscriber gets. It carries no id, so
	// the host's Last-Event-ID still names the last event it received.
	eventStreamDropped = "stream_dropped"
)

// Reasons a stream_dropped notice gives the host.
const (
	dropReasonBehind  = "this stream fell behind (%d events, %d bytes waiting); reconnect with Last-Event-ID"
	dropReasonReplay  = "events this stream still had to replay left the ring (--event-ring-size); reconnect with Last-Event-ID"
	dropReasonEvicted = "events this stream still had to send were evicted by the daemon's --max-event-memory; reconnect without Last-Event-ID to replay what is kept"
	dropReasonBudget  = "this stream held more event memory than the daemon's --max-event-memory allows; reconnect with Last-Event-ID"
	dropReasonGap     = "events after id %d were evicted from the ring by the daemon's --max-event-memory; reconnect without Last-Event-ID to replay what is kept"
)

// errStreamAborted is the error of a write on a stream whose subscriber was
// dropped: the handler must return without writing.
var errStreamAborted = errors.New("event stream dropped")

// streamEvents writes the events after id after, then every new one, with a
// heartbeat comment whenever the stream was idle for a heartbeat interval.
// Each write and flush must end within writeTimeout; one that does not ends
// the handler, as does a drop of its subscriber.
func streamEvents(w http.ResponseWriter, r *http.Request, log *streamLog, after int64, heartbeatEvery, writeTimeout time.Duration) {
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
	sub := log.subscribe(after, sw.abort)
	if sub == nil {
		writeHostError(w, http.StatusTooManyRequests, codeSubscriberLimit, fmt.Sprintf("open event stream: the session already has %d, the limit (--max-subscribers-per-session)", log.maxSubs))
		return
	}
	defer log.unsubscribe(sub)
	if err := sw.arm(writeTimeout); errors.Is(err, errStreamAborted) {
		return // dropped already; the connection takes no more writes
	} else if err != nil {
		// Fail closed: a stream whose writes cannot be bounded could hold
		// its queue for good.
		writeHostError(w, http.StatusInternalServerError, codeInternal, fmt.Sprintf("event stream unsupported: the connection takes no write deadline: %v", err))
		return
	}
	log.budget.streamsAdd(1)
	defer log.budget.streamsAdd(-1)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	// As Qwen Code's serve (DESIGN.md §7): the log's epoch, stable for the
	// session, and a new id for this stream.
	h.Set("X-Qwen-Event-Epoch", log.epoch)
	h.Set("X-Qwen-SSE-Stream-Id", randomHex(randomIDBytes))
	// The connection ends with the stream: the write deadline left on it
	// then bounds the server's last write and meets no later request.
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	if sw.write(func() error { _, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetryMillis); return err }) != nil || sw.flush() != nil {
		return
	}
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	for {
		batch, ended, reason := log.take(sub)
		if len(batch) > 0 {
			err := sw.events(batch)
			log.release(sub, batch)
			if err != nil {
				return
			}
			continue
		}
		if ended {
			if reason != "" {
				sw.notice(reason)
			}
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			if sw.write(func() error { _, err := io.WriteString(w, ": heartbeat\n\n"); return err }) != nil || sw.flush() != nil {
				return
			}
		case <-sub.wake:
		}
	}
}

// streamWriter bounds every write of one event stream by a deadline, and
// lets the stream's log cut a blocked write short.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration

	mu      sync.Mutex // orders abort against arming the next deadline
	aborted bool
	armedAt time.Time // when the deadline in force was set

	// head is where an event's id and type lines are built: its data is
	// written as the log holds it, never copied into a frame.
	head []byte
}

// arm sets the deadline of the next write, unless the stream was aborted.
func (sw *streamWriter) arm(d time.Duration) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.aborted {
		return errStreamAborted
	}
	sw.armedAt = time.Now()
	return sw.rc.SetWriteDeadline(sw.armedAt.Add(d))
}

// abort makes a write in progress, and every later one, fail now. The log
// calls it, without its lock held, when it drops the subscriber.
func (sw *streamWriter) abort() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.aborted = true
	sw.rc.SetWriteDeadline(time.Unix(1, 0))
}

func (sw *streamWriter) write(f func() error) error {
	if err := sw.arm(sw.timeout); err != nil {
		return err
	}
	return f()
}

func (sw *streamWriter) flush() error {
	if err := sw.arm(sw.timeout); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// streamFlushShare bounds what a batch's flush may find spent of the
// deadline its last event armed: while at most 1/streamFlushShare of the
// write timeout has passed since, the flush keeps that deadline (one set
// per event, not two) and still has 15/16 of a fresh one. A last event
// that blocked longer (a big one, a slow host) has the deadline armed
// afresh for the flush.
const streamFlushShare = 16

// events writes a batch and flushes it: what queued meanwhile goes out in
// one flush (a tool call is three updates) instead of one each. Each event
// has a fresh deadline.
func (sw *streamWriter) events(batch []*streamEvent) error {
	for _, ev := range batch {
		if err := sw.event(ev); err != nil {
			return err
		}
	}
	sw.mu.Lock()
	aborted, fresh := sw.aborted, time.Since(sw.armedAt) <= sw.timeout/streamFlushShare
	sw.mu.Unlock()
	switch {
	case aborted:
		return errStreamAborted
	case fresh:
		// An abort from now on sets a past deadline: the flush fails then.
		return sw.rc.Flush()
	}
	return sw.flush()
}

// notice writes the last frame of a dropped stream. It carries no id, so
// the host's Last-Event-ID still names the last event it received. A
// stream whose blocked write was aborted cannot take it; one that was idle
// gets dropNoticeTimeout.
func (sw *streamWriter) notice(reason string) {
	data, _ := json.Marshal(struct {
		V    int    `json:"v"`
		Type string `json:"type"`
		Data any    `json:"data"`
	}{1, eventStreamDropped, map[string]string{"reason": reason}})
	sw.mu.Lock()
	sw.rc.SetWriteDeadline(time.Now().Add(dropNoticeTimeout))
	sw.mu.Unlock()
	if _, err := fmt.Fprintf(sw.w, "event: %s\ndata: %s\n\n", eventStreamDropped, data); err == nil {
		sw.rc.Flush()
	}
}

// event writes one event's frame, "id: N\nevent: T\ndata: D\n\n", into
// the response's buffer, with the write deadline armed as for any write.
func (sw *streamWriter) event(ev *streamEvent) error {
	if err := sw.arm(sw.timeout); err != nil {
		return err
	}
	h := append(sw.head[:0], "id: "...)
	h = strconv.AppendInt(h, ev.id, 10)
	h = append(h, "\nevent: "...)
	h = append(h, ev.typ...)
	h = append(h, "\ndata: "...)
	sw.head = h
	if _, err := sw.w.Write(h); err != nil {
		return err
	}
	if _, err := sw.w.Write(ev.data); err != nil {
		return err
	}
	_, err := io.WriteString(sw.w, "\n\n")
	return err
}

// streamEvent is one published event; data is its complete JSON envelope,
// in a slice of exactly its length.
type streamEvent struct {
	id   int64
	typ  string
	data []byte
	refs int // holders: the ring, queues and writes in progress; under the log's lock
}

// streamEventOverhead is what an event costs besides its data: its header
// (a 64-byte allocation) and its ring slot. Counting it keeps a ring of
// many tiny events honest in the byte bounds.
const streamEventOverhead = 72

// cost is the bytes an event counts for in the ring's, the queues' and the
// daemon's byte bounds.
func (ev *streamEvent) cost() int { return len(ev.data) + streamEventOverhead }

// streamEnvelope is an event as Qwen Code's serve frames it (DESIGN.md §7):
// _meta.serverTimestamp is the publication time in Unix milliseconds.
type streamEnvelope struct {
	ID       int64  `json:"id"`
	V        int    `json:"v"`
	Type     string `json:"type"`
	PromptID string `json:"promptId,omitempty"`
	Data     any    `json:"data"`
	// OriginatorClientID is the X-Qwen-Client-Id of the host request the
	// event answers, where it named one (DESIGN.md §7).
	OriginatorClientID string       `json:"originatorClientId,omitempty"`
	Meta               envelopeMeta `json:"_meta"`
}

type envelopeMeta struct {
	ServerTimestamp int64 `json:"serverTimestamp"`
}

// streamLog is a session's bounded ring of events and its subscribers. A
// subscriber whose queue is full is dropped, never waited for.
type streamLog struct {
	size     int // events kept for replay
	maxSubs  int // 0: no bound
	limitHit func(code string, attrs ...any)
	budget   *eventBudget // nil: none
	order    int64        // its place among the budget's logs: older first on a tie
	// epoch names this log's id sequence (X-Qwen-Event-Epoch): made once,
	// it tells a host that ids it saw are ids of this log.
	epoch string

	mu     sync.Mutex
	nextID int64
	first  int64 // id of the oldest event kept; kept ids are [first, nextID)
	bytes  int   // bytes (cost) kept in the ring
	ring   []*streamEvent
	subs   map[*streamSubscriber]struct{}
	closed bool
	// budgetEvicted is the newest id the budget evicted: a stream that
	// asks to resume before it would miss events the ring no longer has.
	budgetEvicted int64
}

// streamSubscriber is one stream's place in a log. Its fields other than
// wake and abort are guarded by the log's lock.
type streamSubscriber struct {
	wake  chan struct{} // capacity 1: something to take, or the end
	abort func()        // cuts the stream's blocked write short; may be nil

	next, liveFrom int64 // replay ids [next, liveFrom) not yet taken
	queue          []*streamEvent
	queueBytes     int
	inFlight       int   // bytes taken and not yet released
	inFlightFirst  int64 // the oldest id taken and not yet released
	aborting       int   // bytes of inFlight the budget counts as soon released: the write was cut short
	spare          []*streamEvent
	ended          bool   // nothing more enters: the log closed or the subscriber was dropped
	dropped        string // the notice of a dropped subscriber
}

// newBoundedStreamLog keeps ringSize events, accepts at most maxSubs
// subscribers (0: any number), and counts its events in budget (nil: no
// daemon bound). It calls limitHit, with the log locked, for each
// subscriber it refuses or drops and each eviction by the budget.
func newBoundedStreamLog(ringSize, maxSubs int, budget *eventBudget, limitHit func(code string, attrs ...any)) *streamLog {
	l := &streamLog{epoch: randomHex(randomIDBytes), size: ringSize, maxSubs: maxSubs, budget: budget, limitHit: limitHit, nextID: 1, first: 1, subs: map[*streamSubscriber]struct{}{}}
	budget.register(l)
	return l
}

// appendUpdateEnvelope appends the streamEnvelope of a session update,
// member for member as the encoder writes it. The update goes as received,
// not inspected: it is a member of a line rpcConn checked with json.Valid
// (or JSON serve encoded), and holds no line break.
func appendUpdateEnvelope(dst []byte, id int64, typ, promptID, originator string, u sessionUpdateEvent, millis int64) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"v":1,"type":`...)
	dst = appendJSONString(dst, typ, false)
	if promptID != "" {
		dst = append(dst, `,"promptId":`...)
		dst = appendJSONString(dst, promptID, false)
	}
	dst = append(dst, `,"data":{"sessionId":`...)
	dst = appendJSONString(dst, u.SessionID, false)
	dst = append(dst, `,"update":`...)
	dst = append(dst, u.Update...)
	dst = append(dst, '}')
	if originator != "" {
		dst = append(dst, `,"originatorClientId":`...)
		dst = appendJSONString(dst, originator, false)
	}
	dst = append(dst, `,"_meta":{"serverTimestamp":`...)
	dst = strconv.AppendInt(dst, millis, 10)
	return append(dst, '}', '}')
}

// updateEnvelopeFrame is the bytes of an update's envelope besides its
// strings and the update, a capacity hint.
const updateEnvelopeFrame = 128

// envelopeBuffers holds encoder buffers between publications; an event
// keeps an exact copy, never the buffer and its spare capacity.
var envelopeBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (l *streamLog) publish(typ, promptID string, data any) { l.publishFrom(typ, promptID, "", data) }

// publishUpdate publishes a session update, the hottest event (three per
// guarded call), typed so that nothing is boxed on its way.
func (l *streamLog) publishUpdate(promptID string, u sessionUpdateEvent) {
	l.publishEvent(eventSessionUpdate, promptID, "", &u, nil)
}

// publishFrom publishes an event whose envelope names the client the event
// answers; "" names none. A session update takes publishUpdate's way.
func (l *streamLog) publishFrom(typ, promptID, originator string, data any) {
	if u, ok := data.(sessionUpdateEvent); ok {
		l.publishEvent(typ, promptID, originator, &u, nil)
		return
	}
	l.publishEvent(typ, promptID, originator, nil, data)
}

// publishEvent publishes update, when it is a session update, else data.
// An update with content is appended, the update as received; any other
// event is encoded.
func (l *streamLog) publishEvent(typ, promptID, originator string, update *sessionUpdateEvent, data any) {
	if update != nil && len(update.Update) == 0 {
		data, update = *update, nil // encoded: its update is null
	}
	buf := envelopeBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledEnvelope {
			buf.Reset()
			envelopeBuffers.Put(buf)
		}
	}()
	var dropped []*streamSubscriber
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	var encoded []byte
	if update != nil {
		// The hottest event: built by appending, the update as received.
		u := *update
		if bytes.ContainsAny(u.Update, "\r\n") {
			// White space that would split the event's one data line.
			var compact bytes.Buffer
			if json.Compact(&compact, u.Update) != nil {
				l.mu.Unlock()
				return
			}
			u.Update = compact.Bytes()
		}
		buf.Grow(len(u.Update) + len(u.SessionID) + len(typ) + len(promptID) + len(originator) + updateEnvelopeFrame)
		encoded = appendUpdateEnvelope(buf.AvailableBuffer(), l.nextID, typ, promptID, originator, u, time.Now().UnixMilli())
	} else {
		var err error
		encoded, err = appendEncoded(buf.AvailableBuffer(), streamEnvelope{ID: l.nextID, V: 1, Type: typ, PromptID: promptID, Data: data, OriginatorClientID: originator, Meta: envelopeMeta{time.Now().UnixMilli()}})
		if err != nil {
			l.mu.Unlock()
			return
		}
	}
	ev := &streamEvent{id: l.nextID, typ: typ, data: make([]byte, len(encoded)), refs: 1}
	copy(ev.data, encoded)
	l.budget.add(ev.cost())
	l.nextID++
	// Event id N lives in slot (N-1) mod size.
	if len(l.ring) < l.size {
		l.ring = append(l.ring, ev)
	} else {
		if ev.id-l.first >= int64(l.size) {
			l.evictOldest() // the slot holds the oldest kept event
		}
		l.ring[(ev.id-1)%int64(l.size)] = ev
	}
	l.bytes += ev.cost()
	for l.bytes > eventRingBytes && l.first < ev.id {
		l.evictOldest()
	}
	for sub := range l.subs {
		if n, size := len(sub.queue), sub.queueBytes; n >= subscriberQueue || n > 0 && size+ev.cost() > subscriberQueueBytes {
			l.dropLocked(sub, fmt.Sprintf(dropReasonBehind, n, size))
			l.limitHit(limitSubscriberDropped, "queued", n, "queuedBytes", size)
			dropped = append(dropped, sub)
			continue
		}
		ev.refs++
		sub.queue = append(sub.queue, ev)
		sub.queueBytes += ev.cost()
		sub.signal()
	}
	l.mu.Unlock()
	abortAll(dropped)
	l.budget.enforce()
}

func (sub *streamSubscriber) signal() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// abortAll cuts the blocked writes of dropped subscribers short; no lock
// may be held, since a write deadline is set on the connection.
func abortAll(subs []*streamSubscriber) {
	for _, sub := range subs {
		if sub.abort != nil {
			sub.abort()
		}
	}
}

// unref lets go of one hold on ev; the last one returns its bytes to the
// budget. The log is locked.
func (l *streamLog) unref(ev *streamEvent) {
	ev.refs--
	if ev.refs == 0 {
		l.budget.add(-ev.cost())
	}
}

// evictOldest forgets the oldest kept event.
func (l *streamLog) evictOldest() {
	slot := (l.first - 1) % int64(l.size)
	ev := l.ring[slot]
	l.ring[slot] = nil
	l.first++
	if ev != nil {
		l.bytes -= ev.cost()
		l.unref(ev)
	}
}

// dropLocked ends sub and releases its queue; the caller aborts its write
// once the log is unlocked.
func (l *streamLog) dropLocked(sub *streamSubscriber, reason string) {
	delete(l.subs, sub)
	sub.ended, sub.dropped = true, reason
	sub.next = sub.liveFrom
	l.releaseQueue(sub)
	if sub.inFlight > 0 && sub.abort != nil {
		sub.aborting = sub.inFlight
		l.budget.abortingAdd(sub.aborting)
	}
	sub.signal()
}

func (l *streamLog) releaseQueue(sub *streamSubscriber) {
	for _, ev := range sub.queue {
		l.unref(ev)
	}
	clear(sub.queue)
	sub.queue, sub.queueBytes = sub.queue[:0], 0
}

// subscribe returns a subscriber that takes the retained events after id
// after, then every later one, with no gap and no duplicate between the
// two; nil when the log already has its most. abort, when not nil, must
// make the subscriber's blocked write fail now; the log calls it when it
// drops the subscriber. A subscriber that asks to resume after an id whose
// successors the budget evicted ends at once with a stream_dropped notice.
func (l *streamLog) subscribe(after int64, abort func()) *streamSubscriber {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxSubs > 0 && len(l.subs) >= l.maxSubs && !l.closed {
		l.limitHit(codeSubscriberLimit)
		return nil
	}
	sub := &streamSubscriber{wake: make(chan struct{}, 1), abort: abort, next: max(after+1, l.first), liveFrom: l.nextID}
	switch {
	case l.closed:
		sub.ended, sub.next = true, sub.liveFrom
	case after > 0 && after < l.budgetEvicted:
		sub.ended, sub.next = true, sub.liveFrom
		sub.dropped = fmt.Sprintf(dropReasonGap, after)
	default:
		l.subs[sub] = struct{}{}
	}
	return sub
}

// take hands sub what it has to write next, the replay first, and says
// whether the stream ends once that is written; a dropped stream ends with
// the notice reason. The caller writes the batch and then releases it.
func (l *streamLog) take(sub *streamSubscriber) (batch []*streamEvent, ended bool, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sub.next < sub.liveFrom {
		if sub.next < l.first {
			// The ring let go of an event this stream had yet to send.
			l.limitHit(limitSubscriberDropped, "replayNext", sub.next, "oldestKept", l.first)
			l.dropLocked(sub, dropReasonReplay)
			return nil, true, sub.dropped
		}
		batch, sub.spare = sub.spare[:0], nil
		n := 0
		for ; sub.next < sub.liveFrom && (len(batch) == 0 || n < replayBatchBytes); sub.next++ {
			ev := l.ring[(sub.next-1)%int64(l.size)]
			ev.refs++
			n += ev.cost()
			batch = append(batch, ev)
		}
		sub.inFlight, sub.inFlightFirst = n, batch[0].id
		return batch, false, ""
	}
	if len(sub.queue) > 0 {
		batch, sub.queue, sub.spare = sub.queue, sub.spare[:0], nil
		sub.inFlight, sub.inFlightFirst = sub.queueBytes, batch[0].id
		sub.queueBytes = 0
		return batch, false, ""
	}
	return nil, sub.ended, sub.dropped
}

// release lets go of a batch take returned, written or not. The budget
// may have counted on these bytes coming back: it looks again.
func (l *streamLog) release(sub *streamSubscriber, batch []*streamEvent) {
	l.mu.Lock()
	for _, ev := range batch {
		l.unref(ev)
	}
	sub.inFlight = 0
	l.budget.abortingAdd(-sub.aborting)
	sub.aborting = 0
	clear(batch)
	if sub.spare == nil {
		sub.spare = batch[:0]
	}
	l.mu.Unlock()
	l.budget.enforce()
}

// oldestNeeded is the oldest id sub holds or has yet to replay; 0: none.
func (sub *streamSubscriber) oldestNeeded() int64 {
	switch {
	case sub.inFlight > 0:
		return sub.inFlightFirst
	case sub.next < sub.liveFrom:
		return sub.next
	case len(sub.queue) > 0:
		return sub.queue[0].id
	}
	return 0
}

func (l *streamLog) unsubscribe(sub *streamSubscriber) {
	l.mu.Lock()
	delete(l.subs, sub)
	sub.ended = true
	sub.next = sub.liveFrom
	l.releaseQueue(sub)
	freed := l.freeRingIfDoneLocked()
	l.mu.Unlock()
	if freed {
		l.budget.unregister(l)
	}
}

// close ends the log: its subscribers write what they queued and end. The
// ring is freed once no stream can still replay from it.
func (l *streamLog) close() {
	l.mu.Lock()
	l.closed = true
	for sub := range l.subs {
		sub.ended = true
		sub.signal()
	}
	freed := l.freeRingIfDoneLocked()
	l.mu.Unlock()
	if freed {
		l.budget.unregister(l)
	}
}

// freeRingIfDoneLocked releases the ring of a closed log that no replay
// needs any more. It reports whether the log holds nothing more, ring or
// stream: it then leaves the budget, once unlocked.
func (l *streamLog) freeRingIfDoneLocked() bool {
	if !l.closed {
		return false
	}
	for sub := range l.subs {
		if sub.next < sub.liveFrom {
			return false
		}
	}
	for l.first < l.nextID {
		l.evictOldest()
	}
	l.ring = nil
	return len(l.subs) == 0
}

// lastID is the id of the newest event published; 0: none yet.
func (l *streamLog) lastID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextID - 1
}

// ringBytes reports the bytes (cost) kept in the ring.
func (l *streamLog) ringBytes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// evictForBudget evicts the ring's oldest events: at least one, and then
// more while the ring is larger than floor and the budget is still over. A stream that still needs an evicted
// event (queued, being written or yet to replay) is dropped, so that the
// event's bytes go back. It reports whether it evicted anything.
func (l *streamLog) evictForBudget(b *eventBudget, floor int) bool {
	l.mu.Lock()
	var dropped []*streamSubscriber
	n, size := 0, 0
	for l.first < l.nextID && (n == 0 || l.bytes > floor && b.aboveLowWater()) {
		size += l.ring[(l.first-1)%int64(l.size)].cost()
		l.budgetEvicted = l.first
		l.evictOldest()
		n++
		for sub := range l.subs {
			if id := sub.oldestNeeded(); id != 0 && id < l.first {
				l.dropLocked(sub, dropReasonEvicted)
				dropped = append(dropped, sub)
			}
		}
	}
	if n > 0 {
		l.limitHit(limitEventMemory, "evictedEvents", n, "evictedBytes", size, "droppedStreams", len(dropped), "oldestKept", l.first, "maxEventMemory", b.limit)
	}
	l.mu.Unlock()
	abortAll(dropped)
	return n > 0
}

// eventBudget bounds the bytes of events held by every session's ring,
// every subscriber's queue and every write in progress ("--max-event-memory").
// An event counts once, at its cost, while anything holds it. Over
// the bound the oldest events of the largest ring go first, and the
// streams that still needed them are dropped; when no ring holds anything,
// the stream holding the most is dropped.
type eventBudget struct {
	limit int64
	held  atomic.Int64
	// aborting is the part of held that writes cut short by a drop still
	// hold: their handlers release it soon, so it makes no more events or
	// streams go. (Some of it may still be in a ring; the release looks
	// again.)
	aborting atomic.Int64
	streams  atomic.Int64 // event stream handlers running

	mu     sync.Mutex // serializes enforce; guards logs. Taken before a log's lock.
	logs   map[*streamLog]struct{}
	nextLo int64
}

func newEventBudget(limit int64) *eventBudget {
	return &eventBudget{limit: limit, logs: map[*streamLog]struct{}{}}
}

// A nil *eventBudget bounds nothing and counts nothing.

func (b *eventBudget) add(n int) {
	if b != nil {
		b.held.Add(int64(n))
	}
}

func (b *eventBudget) abortingAdd(n int) {
	if b != nil && n != 0 {
		b.aborting.Add(int64(n))
	}
}

// over reports whether the bytes held, less those soon released, exceed
// the limit.
func (b *eventBudget) over() bool {
	return b != nil && b.held.Load()-b.aborting.Load() > b.limit
}

// aboveLowWater reports whether enforce has more to evict.
func (b *eventBudget) aboveLowWater() bool {
	return b.held.Load()-b.aborting.Load() > b.limit-b.limit/eventMemorySlack
}

// heldBytes reports the bytes of events held now.
func (b *eventBudget) heldBytes() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load()
}

// runningStreams reports the event stream handlers running now.
func (b *eventBudget) runningStreams() int64 {
	if b == nil {
		return 0
	}
	return b.streams.Load()
}

// streamsAdd counts event stream handlers that start (1) or end (-1).
func (b *eventBudget) streamsAdd(n int64) {
	if b != nil {
		b.streams.Add(n)
	}
}

func (b *eventBudget) register(l *streamLog) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.nextLo++
	l.order = b.nextLo
	b.logs[l] = struct{}{}
	b.mu.Unlock()
}

// unregister is called without l's lock: b.mu comes first.
func (b *eventBudget) unregister(l *streamLog) {
	if b == nil {
		return
	}
	b.mu.Lock()
	delete(b.logs, l)
	b.mu.Unlock()
}

// enforce brings the bytes held over the limit back to a sixteenth under
// it: the oldest events of the largest rings go first (the largest is cut
// down to the size of the next, and so on; of equal ones the older log's);
// when no ring holds anything, the streams holding the most are dropped.
// Writes in progress that a drop aborted release their bytes as their
// handlers return, and enforce runs again then.
func (b *eventBudget) enforce() {
	if !b.over() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.aboveLowWater() {
		var largest *streamLog
		top, next := 0, 0
		for l := range b.logs {
			switch n := l.ringBytes(); {
			case n > top || n == top && n > 0 && l.order < largest.order:
				largest, top, next = l, n, max(top, next)
			case n > next:
				next = n
			}
		}
		if largest != nil && largest.evictForBudget(b, next) {
			continue
		}
		if !b.dropLargestStream() {
			return
		}
	}
}

// dropLargestStream drops the subscriber holding the most bytes in its
// queue and its write in progress, and reports whether there was one.
func (b *eventBudget) dropLargestStream() bool {
	var (
		owner *streamLog
		sub   *streamSubscriber
		most  int
	)
	for l := range b.logs {
		l.mu.Lock()
		for s := range l.subs {
			if n := s.queueBytes + s.inFlight; n > most {
				owner, sub, most = l, s, n
			}
		}
		l.mu.Unlock()
	}
	if sub == nil {
		return false
	}
	owner.mu.Lock()
	_, still := owner.subs[sub]
	if still {
		owner.dropLocked(sub, dropReasonBudget)
		owner.limitHit(limitEventMemory, "droppedStreamBytes", most, "maxEventMemory", b.limit)
	}
	owner.mu.Unlock()
	if still {
		abortAll([]*streamSubscriber{sub})
	}
	return true
}

func (d *daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	// A dead child's sessions answer 410 session_died (DESIGN.md §7): a
	// stream open when the child died got the event; a new one gets the 410.
	s := d.lookup(w, r, false)
	if s == nil {
		return
	}
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("Last-Event-ID %q is not an event id", v))
			return
		}
		after = n
	}
	streamEvents(w, r, s.events, after, heartbeatInterval, streamWriteTimeout)
}

type turnComplete struct {
	SessionID  string `json:"sessionId"`
	StopReason string `json:"stopReason"`
	PromptID   string `json:"promptId"`
	// PromptCancelled is set on a turn the host, a deadline or shutdown
	// cancelled.
	PromptCancelled *promptCancelledInfo `json:"promptCancelled,omitempty"`
}

type promptCancelledInfo struct {
	CancelledAt int64 `json:"cancelledAt"` // Unix ms
	ElapsedMs   int64 `json:"elapsedMs"`   // since the turn started
}

type promptCancelledEvent struct {
	SessionID string `json:"sessionId"`
	Reason    string `json:"reason,omitempty"`
}

// userMessageChunk is the ACP session/update serve publishes to echo a
// prompt's text block at the start of its turn.
type userMessageChunk struct {
	SessionUpdate string      `json:"sessionUpdate"`
	Content       textContent `json:"content"`
	Meta          echoMeta    `json:"_meta"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type echoMeta struct {
	ServerTimestamp int64  `json:"serverTimestamp"`
	Source          string `json:"source"`
}

type turnError struct {
	SessionID string `json:"sessionId"`
	Message   string `json:"message"`
	PromptID  string `json:"promptId"`
}

type permissionRequestEvent struct {
	RequestID string                 `json:"requestId"`
	SessionID string                 `json:"sessionId"`
	ToolCall  json.RawMessage        `json:"toolCall"`
	Options   []hostPermissionOption `json:"options"`
}

type permissionResolvedEvent struct {
	RequestID     string          `json:"requestId"`
	SessionID     string          `json:"sessionId"`
	Outcome       hostVoteOutcome `json:"outcome"`
	VoterClientID string          `json:"voterClientId,omitempty"`
}

type permissionAlreadyResolvedEvent struct {
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
}

type sessionUpdateEvent struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// shellOutputEvent is a running command's live output as a host reads it:
// Qwen Code's live output update (sessionUpdateShellOutput), whose output
// a host appends to what it showed, with the call it belongs to.
type shellOutputEvent struct {
	Meta          shellOutputMeta `json:"_meta"`
	Output        string          `json:"output"`
	SessionUpdate string          `json:"sessionUpdate"`
	ToolCallID    string          `json:"toolCallId"`
}

// shellOutputMeta names the call's tool; skipped counts the bytes before
// output that the live view left out (the call's result has them).
type shellOutputMeta struct {
	Provenance string `json:"provenance"`
	Skipped    int64  `json:"skipped,omitempty"`
	ToolName   string `json:"toolName"`
}

// shellOutputUpdate is a child's live output update (liveOutputUpdatePrefix)
// as hosts are shown it: its chunk alone, the output so far being the
// chunks before it; nil when the update is not one.
func shellOutputUpdate(update json.RawMessage) json.RawMessage {
	var u struct {
		Meta struct {
			Provenance  string         `json:"provenance"`
			ShellOutput liveOutputMeta `json:"shellOutput"`
			ToolName    string         `json:"toolName"`
		} `json:"_meta"`
		ToolCallID string `json:"toolCallId"`
	}
	if json.Unmarshal(update, &u) != nil || u.ToolCallID == "" {
		return nil
	}
	out, err := json.Marshal(shellOutputEvent{
		Meta:          shellOutputMeta{Provenance: u.Meta.Provenance, Skipped: u.Meta.ShellOutput.Skipped, ToolName: u.Meta.ToolName},
		Output:        u.Meta.ShellOutput.Chunk,
		SessionUpdate: sessionUpdateShellOutput,
		ToolCallID:    u.ToolCallID,
	})
	if err != nil {
		return nil
	}
	return out
}
