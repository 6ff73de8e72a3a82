// serve_events.go owns the event streams of "acpguard serve": each
// session's event log (a bounded ring for Last-Event-ID replay and its
// subscribers) and the SSE writer of GET /session/:id/events.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Limits of the event streams.
const (
	// "Honour Last-Event-ID from a bounded ring": the ring of a log that
	// newStreamLog builds; sessions get --event-ring-size.
	eventRingSize = defaultEventRingSize
	// "a slow subscriber is dropped, never allowed to stall the child"
	subscriberQueue = 256
	// The ring is also bounded in bytes: a tool update may be large, and
	// --event-ring-size events of it must not hold gigabytes per session.
	// The oldest events leave the ring first; the newest always stays.
	eventRingBytes = 64 << 20
	// "Heartbeat comments keep the stream alive."
	heartbeatInterval = 15 * time.Second
	// "Qwen Code starts the stream with retry: 3000"
	sseRetryMillis = 3000
)

// streamEvents writes the events after id after, then every new one, with a
// heartbeat comment whenever the stream was idle for a heartbeat interval.
func streamEvents(w http.ResponseWriter, r *http.Request, log *streamLog, after int64, heartbeatEvery time.Duration) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeHostError(w, http.StatusInternalServerError, codeInternal, "streaming unsupported")
		return
	}
	replay, sub := log.subscribe(after)
	if sub == nil {
		writeHostError(w, http.StatusTooManyRequests, codeSubscriberLimit, fmt.Sprintf("The session already has %d event streams, its limit", log.maxSubs))
		return
	}
	defer log.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", sseRetryMillis)
	for _, ev := range replay {
		writeEvent(w, ev)
	}
	flusher.Flush()
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			io.WriteString(w, ": heartbeat\n\n")
		case ev, ok := <-sub.ch:
			if !ok {
				// The session ended, or this subscriber fell behind: the
				// host reconnects with Last-Event-ID and replays the ring.
				if log.wasDropped(sub) {
					fmt.Fprintf(w, "event: %s\ndata: {\"v\":1,\"type\":%q,\"data\":{\"reason\":\"this stream fell %d events behind; reconnect with Last-Event-ID\"}}\n\n",
						eventStreamDropped, eventStreamDropped, subscriberQueue)
					flusher.Flush()
				}
				return
			}
			writeEvent(w, ev)
			// What queued meanwhile goes out in the same flush: one write
			// for a burst (a tool call is three updates) instead of one each.
			// Only this goroutine receives, and a closed channel still
			// yields what it buffered.
			for range len(sub.ch) {
				writeEvent(w, <-sub.ch)
			}
		}
		flusher.Flush()
	}
}

func writeEvent(w io.Writer, ev streamEvent) {
	fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.id, ev.typ, ev.data)
}

// streamEvent is one published event; data is its complete JSON envelope.
type streamEvent struct {
	id   int64
	typ  string
	data []byte
}

type streamEnvelope struct {
	ID       int64  `json:"id"`
	V        int    `json:"v"`
	Type     string `json:"type"`
	PromptID string `json:"promptId,omitempty"`
	Data     any    `json:"data"`
}

// streamLog is a session's bounded ring of events and its subscribers. A
// subscriber whose queue is full is dropped, never waited for.
type streamLog struct {
	size     int // events kept for replay
	maxSubs  int // 0: no bound
	limitHit func(code string)

	mu     sync.Mutex
	nextID int64
	first  int64 // id of the oldest event kept; kept ids are [first, nextID)
	bytes  int   // data bytes kept
	ring   []streamEvent
	subs   map[*streamSubscriber]struct{}
	closed bool
}

type streamSubscriber struct {
	ch      chan streamEvent // closed when the log closes or the subscriber is dropped
	dropped bool             // set, under the log's lock, before ch is closed for falling behind
}

// newStreamLog returns a log with the default ring and no subscriber bound.
func newStreamLog() *streamLog {
	return newBoundedStreamLog(eventRingSize, 0, func(string) {})
}

// newBoundedStreamLog keeps ringSize events and accepts at most maxSubs
// subscribers (0: any number). It calls limitHit, with the log locked,
// for each subscriber it refuses or drops.
func newBoundedStreamLog(ringSize, maxSubs int, limitHit func(code string)) *streamLog {
	return &streamLog{size: ringSize, maxSubs: maxSubs, limitHit: limitHit, nextID: 1, first: 1, subs: map[*streamSubscriber]struct{}{}}
}

func (l *streamLog) publish(typ, promptID string, data any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if err := enc.Encode(streamEnvelope{ID: l.nextID, V: 1, Type: typ, PromptID: promptID, Data: data}); err != nil {
		return
	}
	ev := streamEvent{id: l.nextID, typ: typ, data: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}
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
	l.bytes += len(ev.data)
	for l.bytes > eventRingBytes && l.first < ev.id {
		l.evictOldest()
	}
	for sub := range l.subs {
		select {
		case sub.ch <- ev:
		default:
			delete(l.subs, sub)
			sub.dropped = true
			close(sub.ch)
			l.limitHit(limitSubscriberDropped)
		}
	}
}

// evictOldest forgets the oldest kept event.
func (l *streamLog) evictOldest() {
	slot := (l.first - 1) % int64(l.size)
	l.bytes -= len(l.ring[slot].data)
	l.ring[slot] = streamEvent{}
	l.first++
}

// subscribe returns the retained events after id after and a subscriber
// for every later one, with no gap and no duplicate between the two; the
// subscriber is nil when the log already has its most.
func (l *streamLog) subscribe(after int64) ([]streamEvent, *streamSubscriber) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxSubs > 0 && len(l.subs) >= l.maxSubs && !l.closed {
		l.limitHit(codeSubscriberLimit)
		return nil, nil
	}
	var replay []streamEvent
	for id := max(after+1, l.first); id < l.nextID; id++ {
		replay = append(replay, l.ring[(id-1)%int64(l.size)])
	}
	sub := &streamSubscriber{ch: make(chan streamEvent, subscriberQueue)}
	if l.closed {
		close(sub.ch)
	} else {
		l.subs[sub] = struct{}{}
	}
	return replay, sub
}

// wasDropped reports whether sub was cut for falling behind.
func (l *streamLog) wasDropped(sub *streamSubscriber) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sub.dropped
}

func (l *streamLog) unsubscribe(sub *streamSubscriber) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[sub]; ok {
		delete(l.subs, sub)
		close(sub.ch)
	}
}

func (l *streamLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for sub := range l.subs {
		delete(l.subs, sub)
		close(sub.ch)
	}
}
