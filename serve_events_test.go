// serve_events_test.go tests the event streams: the ring and its replay, the
// event memory budget, and slow or stalled readers, which are dropped and
// never stall the child.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitCounter records the limit hits of a log.
type limitCounter struct {
	mu   sync.Mutex
	hits map[string]int
}

func (c *limitCounter) hit(code string, _ ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hits == nil {
		c.hits = map[string]int{}
	}
	c.hits[code]++
}

func (c *limitCounter) count(code string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[code]
}

// smallSendBuffers gives every accepted connection a small send buffer, so
// that a host that stops reading blocks the server's writes after a few KiB.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// streamServer serves one log's event stream on loopback and reports each
// handler's return on ended.
func streamServer(t *testing.T, l *streamLog, heartbeat, writeTimeout time.Duration) (url string, ended chan struct{}) {
	t.Helper()
	ended = make(chan struct{}, 16)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamEvents(w, r, l, 0, heartbeat, writeTimeout)
		ended <- struct{}{}
	}))
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, ended
}

func waitHandlerReturn(t *testing.T, ended chan struct{}, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(testTimeout(time.Minute)):
		t.Fatalf("%s: the stream's handler has not returned after a minute", what)
	}
}

// TestEventStreamStalledReaderDropped: a host that stops reading has its
// stream dropped once its queue is full in bytes; the handler, blocked in
// a write that has no near deadline, returns at once, and the bytes its
// queue and its write held are released: only the ring's remain counted.
func TestEventStreamStalledReaderDropped(t *testing.T) {
	budget := newEventBudget(1 << 30)
	var limits limitCounter
	l := newBoundedStreamLog(defaultEventRingSize, 0, budget, limits.hit)
	url, ended := streamServer(t, l, time.Hour, time.Hour)
	if _, status := openStalledStream(t, url, "/"); status != http.StatusOK {
		t.Fatalf("stream status %d", status)
	}
	waitFor(t, "the stream to start", func() bool { return budget.runningStreams() == 1 })
	update := strings.Repeat("x", 256<<10)
	// More than the queue's byte bound and all socket buffers; far fewer
	// events than the queue's event bound.
	for i := 0; limits.count(limitSubscriberDropped) == 0; i++ {
		if i == 3*subscriberQueueBytes/len(update) {
			t.Fatalf("%d updates of %d bytes to a stalled stream and it was not dropped", i, len(update))
		}
		l.publish(eventSessionUpdate, "", update)
	}
	waitHandlerReturn(t, ended, "dropped stalled stream")
	if n := budget.runningStreams(); n != 0 {
		t.Errorf("%d stream handlers still running", n)
	}
	if held, ring := budget.heldBytes(), l.ringBytes(); held != int64(ring) {
		t.Errorf("budget counts %d bytes after the drop, want the ring's %d: the queue or the write still holds events", held, ring)
	}
	l.mu.Lock()
	subs := len(l.subs)
	l.mu.Unlock()
	if subs != 0 {
		t.Errorf("%d subscribers left", subs)
	}
	if n := limits.count(limitSubscriberDropped); n != 1 {
		t.Errorf("subscriber_dropped counted %d times, want 1", n)
	}
}

// TestEventStreamWriteDeadline: a write that does not end within the write
// timeout ends the handler, and with it what the stream held, although the
// stream's queue never filled.
func TestEventStreamWriteDeadline(t *testing.T) {
	budget := newEventBudget(1 << 30)
	var limits limitCounter
	l := newBoundedStreamLog(defaultEventRingSize, 0, budget, limits.hit)
	url, ended := streamServer(t, l, time.Hour, 200*time.Millisecond)
	if _, status := openStalledStream(t, url, "/"); status != http.StatusOK {
		t.Fatalf("stream status %d", status)
	}
	waitFor(t, "the stream to start", func() bool { return budget.runningStreams() == 1 })
	for range 3 {
		l.publish(eventSessionUpdate, "", strings.Repeat("x", 256<<10))
	}
	waitHandlerReturn(t, ended, "stalled write")
	if held, ring := budget.heldBytes(), l.ringBytes(); held != int64(ring) {
		t.Errorf("budget counts %d bytes after the write timed out, want the ring's %d", held, ring)
	}
	if n := limits.count(limitSubscriberDropped); n != 0 {
		t.Errorf("the stream was dropped (%d) rather than ended by its write deadline", n)
	}
	// Its place is free again; the log still publishes to others.
	sub := l.subscribe(0, nil)
	if evs, _, _ := takeAll(l, sub); len(evs) != 3 {
		t.Errorf("a new stream replays %d events, want 3", len(evs))
	}
	l.unsubscribe(sub)
}

// TestEventStreamIdleStalledEndsByHeartbeat: a stalled stream with nothing
// to send ends at its heartbeat's write deadline.
func TestEventStreamIdleStalledEndsByHeartbeat(t *testing.T) {
	budget := newEventBudget(1 << 30)
	l := newBoundedStreamLog(defaultEventRingSize, 0, budget, func(string, ...any) {})
	url, ended := streamServer(t, l, time.Millisecond, 200*time.Millisecond)
	if _, status := openStalledStream(t, url, "/"); status != http.StatusOK {
		t.Fatalf("stream status %d", status)
	}
	waitHandlerReturn(t, ended, "idle stalled stream")
}

// ringIDs returns the ids a new stream replays from l.
func ringIDs(l *streamLog) []int64 {
	var ids []int64
	for _, ev := range replayOf(l, 0) {
		ids = append(ids, ev.id)
	}
	return ids
}

// TestEventBudgetEvictsLargestRingFirst: over the daemon budget, the
// oldest events of the largest ring go first (of two equal rings, the
// older log's), down to a sixteenth under the budget; each eviction is
// counted; a stream that resumes before an evicted event, or that still
// had to replay one, ends with stream_dropped.
func TestEventBudgetEvictsLargestRingFirst(t *testing.T) {
	payload := strings.Repeat("x", 1<<20)
	size := len(`{"id":1,"v":1,"type":"session_update","data":"","_meta":{"serverTimestamp":1796177675667}}`) + len(payload) + streamEventOverhead
	// Ten events fit; over it, eviction goes on down to 9.4 events.
	budget := newEventBudget(int64(10*size + 100))
	var la, lb, lc limitCounter
	a := newBoundedStreamLog(defaultEventRingSize, 0, budget, la.hit)
	b := newBoundedStreamLog(defaultEventRingSize, 0, budget, lb.hit)
	c := newBoundedStreamLog(defaultEventRingSize, 0, budget, lc.hit)
	publish := func(l *streamLog, n int) {
		for range n {
			l.publish(eventSessionUpdate, "", payload)
		}
	}
	type want struct {
		ids  []int64
		hits int
	}
	check := func(step string, wa, wb, wc want) {
		t.Helper()
		for _, tt := range []struct {
			name string
			l    *streamLog
			lc   *limitCounter
			want want
		}{{"a", a, &la, wa}, {"b", b, &lb, wb}, {"c", c, &lc, wc}} {
			if got := ringIDs(tt.l); fmt.Sprint(got) != fmt.Sprint(tt.want.ids) {
				t.Errorf("%s: ring %s keeps %v, want %v", step, tt.name, got, tt.want.ids)
			}
			if n := tt.lc.count(limitEventMemory); n != tt.want.hits {
				t.Errorf("%s: ring %s: %d event_memory hits, want %d", step, tt.name, n, tt.want.hits)
			}
		}
		if held, rings := budget.heldBytes(), a.ringBytes()+b.ringBytes()+c.ringBytes(); held != int64(rings) || held > budget.limit {
			t.Errorf("%s: budget counts %d bytes, rings hold %d, limit %d", step, held, rings, budget.limit)
		}
	}
	publish(a, 6)
	publish(b, 4)
	check("within the budget", want{[]int64{1, 2, 3, 4, 5, 6}, 0}, want{[]int64{1, 2, 3, 4}, 0}, want{nil, 0})
	publish(c, 1) // 11 events: a (6) goes down to b's size (4)
	check("a largest", want{[]int64{3, 4, 5, 6}, 1}, want{[]int64{1, 2, 3, 4}, 0}, want{[]int64{1}, 0})
	publish(c, 2) // 11 events: a and b (4 each) are equal, a is older
	check("a and b equal", want{[]int64{4, 5, 6}, 2}, want{[]int64{2, 3, 4}, 1}, want{[]int64{1, 2, 3}, 0})

	// Resuming after id 1 of a needs ids 2 and 3, which the budget evicted.
	gap := a.subscribe(1, nil)
	if evs, ended, reason := takeAll(a, gap); len(evs) != 0 || !ended || reason != fmt.Sprintf(dropReasonGap, 1) {
		t.Errorf("resume after an evicted event: %d events, ended %v, notice %q", len(evs), ended, reason)
	}
	a.unsubscribe(gap)
	for _, after := range []int64{0, 3} {
		if evs := replayOf(a, after); len(evs) != 3 || evs[0].id != 4 {
			t.Errorf("resume after %d replays %d events", after, len(evs))
		}
	}
	// A stream that has yet to replay id 4 when the budget evicts it.
	pending := a.subscribe(3, nil)
	publish(a, 2) // 11 events: a (5) is the largest
	if evs, ended, reason := takeAll(a, pending); len(evs) != 0 || !ended || reason != dropReasonEvicted {
		t.Errorf("replay of an evicted event: %d events, ended %v, notice %q", len(evs), ended, reason)
	}
	a.unsubscribe(pending)
	check("a largest again", want{[]int64{6, 7, 8}, 3}, want{[]int64{2, 3, 4}, 1}, want{[]int64{1, 2, 3}, 0})

	// Closed logs give their bytes back and leave the budget.
	for _, l := range []*streamLog{a, b, c} {
		l.close()
	}
	if held := budget.heldBytes(); held != 0 {
		t.Errorf("budget counts %d bytes after every log closed", held)
	}
	budget.mu.Lock()
	logs := len(budget.logs)
	budget.mu.Unlock()
	if logs != 0 {
		t.Errorf("%d closed logs still in the budget", logs)
	}
}

// TestEventBudgetDropsStreamWhenRingsAreEmpty: events that only a queue
// still holds count too; once no ring holds anything, the stream holding
// the most is dropped and its bytes go back.
func TestEventBudgetDropsStreamWhenRingsAreEmpty(t *testing.T) {
	payload := strings.Repeat("x", 64<<10)
	budget := newEventBudget(1 << 30)
	var lq, lr limitCounter
	queued := newBoundedStreamLog(defaultEventRingSize, 0, budget, lq.hit)
	aborted := 0
	sub := queued.subscribe(0, func() { aborted++ })
	for range 2 {
		queued.publish(eventSessionUpdate, "", payload)
	}
	// Closed: its ring is freed, and the stream still has two events to write.
	queued.close()
	budget.limit = 64<<10 + 1000 // one event
	other := newBoundedStreamLog(defaultEventRingSize, 0, budget, lr.hit)
	other.publish(eventSessionUpdate, "", payload) // over the budget
	if held := budget.heldBytes(); held > budget.limit {
		t.Errorf("budget counts %d bytes, over its %d", held, budget.limit)
	}
	evs, ended, reason := takeAll(queued, sub)
	if len(evs) != 0 || !ended || reason != dropReasonBudget || aborted != 1 {
		t.Errorf("stream over the budget: %d events, ended %v, notice %q, aborted %d", len(evs), ended, reason, aborted)
	}
	if lr.count(limitEventMemory) != 1 || lq.count(limitEventMemory) != 1 {
		t.Errorf("event_memory hits: the ring %d, the stream %d; want 1 and 1", lr.count(limitEventMemory), lq.count(limitEventMemory))
	}
	if ids := ringIDs(other); len(ids) != 0 {
		t.Errorf("the ring still keeps %v", ids)
	}
	queued.unsubscribe(sub)
	if held := budget.heldBytes(); held != 0 {
		t.Errorf("budget counts %d bytes at the end", held)
	}
}

// TestStreamEventStoredAtExactSize: an event keeps its envelope in a slice
// of exactly its length, not the encoder's buffer with its spare capacity.
func TestStreamEventStoredAtExactSize(t *testing.T) {
	budget := newEventBudget(1 << 30)
	l := newBoundedStreamLog(defaultEventRingSize, 0, budget, func(string, ...any) {})
	for _, n := range []int{0, 1, 1000, 5000, 100000} {
		l.publish(eventSessionUpdate, "p1", strings.Repeat("y", n))
	}
	total := 0
	for _, ev := range replayOf(l, 0) {
		if cap(ev.data) != len(ev.data) {
			t.Errorf("event %d: %d bytes in a slice of capacity %d", ev.id, len(ev.data), cap(ev.data))
		}
		if want := fmt.Sprintf(`{"id":%d,"v":1,"type":"session_update","promptId":"p1","data":"`, ev.id); !strings.HasPrefix(string(ev.data), want) {
			t.Errorf("event %d data %.60q", ev.id, ev.data)
		}
		total += len(ev.data) + streamEventOverhead
	}
	if held := budget.heldBytes(); held != int64(total) {
		t.Errorf("budget counts %d bytes, the events and their headers are %d", held, total)
	}
}

// TestServeStalledStreamsStayWithinEventMemory runs prompts through serve,
// each with one more host that opens the session's stream and stops
// reading. Each stalled stream is dropped and its handler returns; the
// event memory serve reports stays under --max-event-memory; a resume
// before an evicted event gets stream_dropped; evictions are counted and
// logged; closing the connections gives every byte back.
func TestServeStalledStreamsStayWithinEventMemory(t *testing.T) {
	const (
		budget  = 4 << 20
		prompts = 8
		flood   = "flood 32 32768" // 1 MiB per prompt: a stalled reader blocks after some KiB
	)
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{MaxEventMemory: budget}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	metric := func(name string) float64 { return td.scrape(t)[name] }
	var stalled []net.Conn
	last := ""
	start := time.Now()
	defer func() { t.Logf("%v end", time.Since(start)) }()
	for i := range prompts {
		conn, status := openStalledStream(t, td.url, "/session/"+id+"/events")
		if status != http.StatusOK {
			t.Fatalf("prompt %d: stalled stream status %d", i, status)
		}
		stalled = append(stalled, conn)
		// A host that reads the turn, then closes its stream.
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout(time.Minute))
		req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+id+"/events", nil)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("prompt %d: reading stream: %v %v", i, err, resp)
		}
		pid := td.prompt(t, id, flood)
		evs := readSSE(t, bufio.NewReader(resp.Body), untilTurnEnd(pid))
		cancel()
		resp.Body.Close()
		if n := len(evs); n != 34 { // the echo, 32 texts, turn_complete
			t.Fatalf("prompt %d: the reading host got %d events, want 34: %v", i, n, evs[max(0, n-2):])
		}
		last = evs[len(evs)-1].id
		waitFor(t, "event memory back under the budget", func() bool {
			return metric("acpguard_serve_event_memory_bytes") <= budget
		})
		t.Logf("%v prompt %d: %v bytes held, %v streams", time.Since(start), i, metric("acpguard_serve_event_memory_bytes"), metric("acpguard_serve_event_streams"))
	}
	// Every stalled stream but the newest few (whose queues still have
	// room) was dropped and its handler returned.
	waitFor(t, "stalled streams to end", func() bool {
		return metric("acpguard_serve_event_streams") <= 2
	})
	// Each eviction is counted and logged, with the session it hit.
	evictions := strings.Count(td.stderr.String(), `msg="limit reached" code=event_memory sessionId=`+id+" ")
	if evictions == 0 {
		t.Errorf("no event_memory log line for the session; log:\n%s", td.stderr.String())
	}
	wantLimitHits(t, td, limitEventMemory, evictions)

	// The budget evicted the first events: resuming after id 1 needs them.
	stream := td.openEvents(t, id, "1")
	evs := readSSE(t, stream, func(sseEvent) bool { return false })
	if len(evs) != 1 || evs[0].typ != eventStreamDropped || evs[0].id != "" || !strings.Contains(string(evs[0].data), "--max-event-memory") {
		t.Errorf("resume after an evicted event got %v, want one id-less %s", evs, eventStreamDropped)
	}

	for _, c := range stalled {
		c.Close()
	}
	if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	waitFor(t, "every stream to end and every event byte to go back", func() bool {
		m := td.scrape(t)
		return m["acpguard_serve_event_streams"] == 0 && m["acpguard_serve_event_memory_bytes"] == 0
	})
}

func TestServeSlowSubscriberDropped(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	slow := td.openEvents(t, id, "") // never read until the turn is over
	fast := td.openEvents(t, id, "")
	const n = 2000 // 16 MB: more than the subscriber queue and the socket buffers
	pid := td.prompt(t, id, fmt.Sprintf("flood %d 8192", n))
	if got := readSSE(t, fast, untilTurnEnd(pid)); len(got) != n+2 { // with the echo and turn_complete
		t.Fatalf("reading subscriber got %d events, want %d", len(got), n+2)
	}
	// The child was not stalled by the slow reader; the slow stream was
	// cut: with a stream_dropped notice when its connection could still
	// take one, else by the connection's end in the middle of a write.
	dropped, err := collectSSE(slow, func(sseEvent) bool { return false })
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Fatalf("the slow stream ended with %v", err)
	}
	if k := len(dropped) - 1; k >= 0 && dropped[k].typ == eventStreamDropped {
		if dropped[k].id != "" {
			t.Fatalf("the %s notice has id %q", eventStreamDropped, dropped[k].id)
		}
		dropped = dropped[:k]
	}
	if len(dropped) == 0 || len(dropped) >= n+2 {
		t.Fatalf("slow subscriber got %d events before its stream ended, want some but not all", len(dropped))
	}
	// Reconnecting with Last-Event-ID loses nothing.
	rest := readSSE(t, td.openEvents(t, id, dropped[len(dropped)-1].id), untilTurnEnd(pid))
	if len(dropped)+len(rest) != n+2 {
		t.Errorf("dropped %d + replayed %d events, want %d", len(dropped), len(rest), n+2)
	}
}

// TestFaultStalledReader: a host that stops reading its event stream is cut
// off; the child, another reader of the same session and another session on
// the same child go on.
func TestFaultStalledReader(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, prov.guard(t)), quickRaceExit)
	id := td.newSession(t, "")
	other := td.newSession(t, "")
	stalled := td.openEvents(t, id, "") // never read until the end
	reader := td.openEvents(t, id, "")
	// 150 calls of 40 kB output each, which every final update carries
	// three times (content, rawOutput output and text): more events than
	// the subscriber queue holds and more bytes than the socket buffers
	// take.
	const calls = 150
	var lines []string
	for i := range calls {
		lines = append(lines, `call run_shell_command {"command":"head -c 40000 /dev/zero | tr '\\0' a; echo > big`+strconv.Itoa(i)+`.done"}`)
	}
	pid := td.prompt(t, id, strings.Join(lines, "\n"))
	got := readSSE(t, reader, untilTurnEnd(pid))
	if last := got[len(got)-1]; last.typ != eventTurnComplete {
		t.Fatalf("reading host saw %s, want turn_complete", last.typ)
	}
	for i := range calls {
		if _, err := os.Stat(filepath.Join(ws, "big"+strconv.Itoa(i)+".done")); err != nil {
			t.Errorf("call %d did not run: %v", i, err)
		}
	}
	if td.runTurn(t, other, writeCall("other.txt")); !fileExists(filepath.Join(ws, "other.txt")) {
		t.Errorf("the other session's call did not run")
	}
	if _, err := os.Stat(filepath.Join(ws, "other.txt")); err != nil {
		t.Errorf("the other session's write did not run: %v", err)
	}
	// The stalled stream was cut, not left to grow: it ends before the turn
	// does, in the middle of a write its drop cut short or after a
	// stream_dropped notice.
	cut, err := collectSSE(stalled, func(sseEvent) bool { return false })
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Errorf("the stalled stream ended with %v", err)
	}
	if n := len(cut); n == 0 || n >= len(got) {
		t.Errorf("stalled reader got %d of %d events before its stream ended, want some but not all", n, len(got))
	}
}
