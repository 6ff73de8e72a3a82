// serve_limits_test.go hits every limit of "acpguard serve" in process:
// the host sees the status and code, the operator a log line and a metric,
// and the daemon goes on serving everyone else.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// silentChildMarker is the file whose presence, empty, in the role's
// directory ARG makes the "silent-child" role write its pid there and never
// answer anything: the first child so started is silent, the next ones are
// acpguard.
const silentChildMarker = "silent-child"

// runSilentChild is that child, or acpguard where the marker is not empty.
func runSilentChild(dir string) int {
	marker := filepath.Join(dir, silentChildMarker)
	if data, err := os.ReadFile(marker); err != nil || len(data) > 0 {
		return runAsMain()
	}
	os.WriteFile(marker, []byte(strconv.Itoa(os.Getpid())), 0o600)
	time.Sleep(time.Hour)
	return 0
}

func TestServeSessionLimit(t *testing.T) {
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{MaxSessions: 2}}, fakeChildEnv(""))
	a := td.newSession(t, "")
	b := td.newSession(t, "")
	r := td.do(t, "POST", "/session", `{"sessionScope":"thread"}`)
	wantError(t, r, http.StatusServiceUnavailable, codeSessionLimit)
	if got := r.header.Get("Retry-After"); got != sessionLimitRetryAfter {
		t.Errorf("Retry-After = %q, want %q", got, sessionLimitRetryAfter)
	}
	wantLimitHits(t, td, codeSessionLimit, 1)
	// The sessions it holds still work, and a deleted one frees a place.
	if _, evs := td.runTurn(t, a, "report pid"); len(evs) != 2 || evs[1].typ != eventTurnComplete {
		t.Errorf("turn at the session limit = %v", evs)
	}
	if r := td.do(t, "DELETE", "/session/"+b, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d", r.status)
	}
	td.newSession(t, "")
	if got := td.scrape(t)["acpguard_serve_sessions"]; got != 2 {
		t.Errorf("live sessions gauge = %v, want 2", got)
	}
}

func TestServeQueueFullIsCounted(t *testing.T) {
	td := startTestDaemon(t, serveOptions{MaxPendingPrompts: 1}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	first := td.prompt(t, id, "wait")
	readSSE(t, stream, childUpdate)
	second := td.prompt(t, id, "report pid")
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"x"}]}`), http.StatusServiceUnavailable, codeQueueFull)
	wantLimitHits(t, td, codeQueueFull, 1)
	td.do(t, "POST", "/session/"+id+"/cancel", "")
	readSSE(t, stream, untilTurnEnd(first))
	if evs := readSSE(t, stream, untilTurnEnd(second)); evs[len(evs)-1].typ != eventTurnComplete {
		t.Errorf("queued prompt after the refusal ended with %v", evs[len(evs)-1])
	}
}

func TestServeBodyAndPromptSize(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	big := `{"prompt":[{"type":"text","text":"` + strings.Repeat("x", maxHostBody) + `"}]}`
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", big), http.StatusRequestEntityTooLarge, codeTooLarge)
	wantLimitHits(t, td, codeTooLarge, 1)

	blocks := func(n int) string {
		b := make([]map[string]string, n)
		for i := range b {
			b[i] = map[string]string{"type": "text", "text": "report pid"}
		}
		body, _ := json.Marshal(map[string]any{"prompt": b})
		return string(body)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", blocks(maxPromptBlocks+1)), http.StatusRequestEntityTooLarge, codePromptTooLarge)
	wantLimitHits(t, td, codePromptTooLarge, 1)
	// Exactly the limit is accepted and runs.
	stream := td.openEvents(t, id, "")
	r := td.do(t, "POST", "/session/"+id+"/prompt", blocks(maxPromptBlocks))
	var acc promptAccepted
	if r.status != http.StatusAccepted || decodeStrict(r.body, &acc) != nil {
		t.Fatalf("prompt of %d blocks = %d %s", maxPromptBlocks, r.status, r.body)
	}
	// Its echo is as many events as a subscriber's queue holds: a host
	// the scheduler kept from reading may be dropped and resume.
	if evs := td.readSSEResuming(t, id, stream, untilTurnEnd(acc.PromptID)); evs[len(evs)-1].typ != eventTurnComplete {
		t.Errorf("prompt of %d blocks ended with %v", maxPromptBlocks, evs[len(evs)-1])
	}
}

// getEvents opens an event stream and returns its status and a function
// that closes it.
func (td *testDaemon) getEvents(t testing.TB, id string) (int, []byte, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var body []byte
	if resp.StatusCode != http.StatusOK {
		body = make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		body = body[:n]
	}
	closeFn := func() { cancel(); resp.Body.Close() }
	t.Cleanup(closeFn)
	return resp.StatusCode, body, closeFn
}

func TestServeSubscriberLimit(t *testing.T) {
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{MaxSubscribers: 2}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	other := td.newSession(t, "")
	first := td.openEvents(t, id, "")
	_, _, closeSecond := td.getEvents(t, id)
	status, body, _ := td.getEvents(t, id)
	wantError(t, hostResponse{status: status, body: body}, http.StatusTooManyRequests, codeSubscriberLimit)
	wantLimitHits(t, td, codeSubscriberLimit, 1)

	// The streams it holds still get every event; another session has
	// its own bound.
	pid := td.prompt(t, id, "report pid")
	if evs := readSSE(t, first, untilTurnEnd(pid)); len(evs) != 3 { // echo, pid, turn_complete
		t.Errorf("subscriber at the limit got %v", evs)
	}
	if _, evs := td.runTurn(t, other, "report pid"); len(evs) != 2 {
		t.Errorf("other session's turn = %v", evs)
	}
	// A closed stream frees its place once the daemon notices.
	closeSecond()
	waitFor(t, "a third stream to be accepted after the second closed", func() bool {
		status, _, closeThird := td.getEvents(t, id)
		closeThird()
		return status == http.StatusOK
	})
}

func TestServeEventRingSize(t *testing.T) {
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{EventRingSize: 3}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	pid, evs := td.runTurn(t, id, "flood 5 10")
	if len(evs) != 6 {
		t.Fatalf("turn events = %d, want 6", len(evs))
	}
	// Only the last three events are kept for replay.
	replay := readSSE(t, td.openEvents(t, id, "1"), untilTurnEnd(pid))
	if len(replay) != 3 || replay[0].id != evs[3].id {
		t.Errorf("replay after id 1 = %v, want the last 3 events", replay)
	}
}

func TestStreamLogCountsDroppedSubscriber(t *testing.T) {
	drops := 0
	l := newBoundedStreamLog(16, 0, nil, func(code string, _ ...any) {
		if code == limitSubscriberDropped {
			drops++
		}
	})
	slow := l.subscribe(0, nil)
	fast := l.subscribe(0, nil)
	got := 0
	for range subscriberQueue + 1 {
		l.publish("next", "", nil)
		evs, _, _ := takeAll(l, fast)
		got += len(evs)
	}
	if _, ended, _ := takeAll(l, slow); !ended || drops != 1 || got != subscriberQueue+1 {
		t.Errorf("slow subscriber ended %v; drops counted %d; the reading one got %d events; want true, 1, %d", ended, drops, got, subscriberQueue+1)
	}
	l.unsubscribe(fast)
}

func TestServeInitializeTimeout(t *testing.T) {
	silent, ok := t.TempDir(), t.TempDir()
	marker := filepath.Join(silent, silentChildMarker)
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The limit applies to the real child after the silent one too, and
	// the silent one must have written its pid before it is ended: both
	// start the race-built test binary, which takes seconds on a loaded
	// machine. The silent child never answers, so the test waits the limit
	// out once whatever its length.
	td := startTestDaemon(t, serveOptions{Workspaces: []string{silent, ok}, Limits: serveLimits{InitializeTimeout: testTimeout(5 * time.Second)}},
		roleEnv("silent-child", silent))
	wantError(t, td.do(t, "POST", "/session", ""), http.StatusServiceUnavailable, codeInitializeTimeout)
	wantLimitHits(t, td, codeInitializeTimeout, 1)
	data, _ := os.ReadFile(marker)
	pid, err := strconv.Atoi(string(data))
	if err != nil {
		t.Fatalf("silent child wrote pid %q", data)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the child that did not answer initialize still exists (kill 0: %v)", err)
	}
	// The next child, a real one, answers.
	td.newSession(t, `{"cwd":"`+ok+`"}`)
	m := td.scrape(t)
	if m["acpguard_serve_children_started_total"] != 2 || m["acpguard_serve_children"] != 1 || m["acpguard_serve_children_died_total"] != 0 {
		t.Errorf("children metrics = started %v, live %v, died %v; want 2, 1, 0",
			m["acpguard_serve_children_started_total"], m["acpguard_serve_children"], m["acpguard_serve_children_died_total"])
	}
}

func TestServePromptDeadline(t *testing.T) {
	// The deadline also bounds the second, real turn: room for a loaded
	// machine to run it; the first never ends and waits it out once.
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{PromptDeadline: testTimeout(2 * time.Second)}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	pid, evs := td.runTurn(t, id, "wait")
	var end turnComplete
	if last := evs[len(evs)-1]; last.typ != eventTurnComplete || decodeStrict(parseEnvelope(t, last).Data, &end) != nil || end.SessionID != id || end.StopReason != "cancelled" || end.PromptID != pid || end.PromptCancelled == nil {
		t.Errorf("turn past its deadline ended with %v, want turn_complete cancelled", last)
	}
	wantLimitHits(t, td, limitPromptDeadline, 1)
	// The next prompt gets its own deadline and runs.
	if _, evs := td.runTurn(t, id, "report pid"); len(texts(t, evs)) != 1 {
		t.Errorf("prompt after a deadline = %v", evs)
	}
}

func TestServePermissionResponseTimeout(t *testing.T) {
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{PermissionTimeout: testTimeout(200 * time.Millisecond)}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, "permission")
	var req permissionRequestEvent
	var resolved permissionResolvedEvent
	for _, ev := range evs {
		switch ev.typ {
		case eventPermissionRequest:
			decodeStrict(parseEnvelope(t, ev).Data, &req)
		case eventPermissionResolved:
			decodeStrict(parseEnvelope(t, ev).Data, &resolved)
		}
	}
	if req.RequestID == "" || resolved.RequestID != req.RequestID || resolved.Outcome.Outcome != "cancelled" {
		t.Errorf("permission events = %v", evs)
	}
	if got := texts(t, evs); len(got) != 1 || got[0] != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("child got %v, want the cancelled outcome", got)
	}
	wantLimitHits(t, td, limitPermissionTimeout, 1)
	// A vote after the timeout finds nothing to answer.
	wantError(t, td.do(t, "POST", "/session/"+id+"/permission/"+req.RequestID, `{"outcome":{"outcome":"selected","optionId":"allow"}}`), http.StatusNotFound, codePermissionUnknown)
}

func TestServeIdleSessionsReaped(t *testing.T) {
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{SessionIdleTimeout: testTimeout(time.Second)}}, fakeChildEnv(""))
	idle := td.newSession(t, "")
	busy := td.newSession(t, "")
	busyStream := td.openEvents(t, busy, "")
	busyPrompt := td.prompt(t, busy, "wait")
	readSSE(t, busyStream, childUpdate)

	evs := readSSE(t, td.openEvents(t, idle, ""), func(ev sseEvent) bool { return ev.typ == eventSessionClosed })
	last := parseEnvelope(t, evs[len(evs)-1])
	if last.Type != eventSessionClosed || !strings.Contains(string(last.Data), `"sessionId":"`+idle+`"`) {
		t.Errorf("idle session's last event = %s %s", last.Type, last.Data)
	}
	wantError(t, td.do(t, "POST", "/session/"+idle+"/prompt", `{"prompt":[{"type":"text","text":"x"}]}`), http.StatusNotFound, codeSessionNotFound)
	wantLimitHits(t, td, limitSessionIdle, 1)

	// A session with a running prompt is not idle; it still answers.
	if r := td.do(t, "POST", "/session/"+busy+"/cancel", ""); r.status != http.StatusNoContent {
		t.Errorf("cancel on the busy session = %d %s", r.status, r.body)
	}
	readSSE(t, busyStream, untilTurnEnd(busyPrompt))
	td.newSession(t, "")
}

func TestParseServeLimits(t *testing.T) {
	sys, _, _ := testSystem()
	opts, err := parseServeArgs(nil, sys)
	if err != nil {
		t.Fatal(err)
	}
	want := serveLimits{MaxSessions: 32, MaxSubscribers: 8, EventRingSize: 4096, InitializeTimeout: testTimeout(10 * time.Second), SessionIdleTimeout: testTimeout(30 * time.Minute), MaxEventMemory: 256 << 20, MaxChildren: 4}
	if opts.Limits != want || opts.LogJSON || opts.LogLevel != 0 {
		t.Errorf("defaults = %+v json=%v level=%v, want %+v", opts.Limits, opts.LogJSON, opts.LogLevel, want)
	}
	if (serveLimits{}).withDefaults() != want {
		t.Errorf("zero limits take %+v, want the flag defaults %+v", (serveLimits{}).withDefaults(), want)
	}
	opts, err = parseServeArgs([]string{"--max-sessions", "1", "--max-subscribers-per-session=3", "--event-ring-size", "16",
		"--initialize-timeout-ms", "100", "--prompt-deadline-ms", "60000", "--permission-response-timeout-ms", "5000",
		"--session-idle-timeout-ms", "1000", "--max-event-memory", "64M", "--max-children", "3", "--log-format", "json", "--log-level", "debug"}, sys)
	if err != nil {
		t.Fatal(err)
	}
	want = serveLimits{1, 3, 16, 100 * time.Millisecond, time.Minute, 5 * time.Second, time.Second, 64 << 20, 3}
	if opts.Limits != want || !opts.LogJSON || opts.LogLevel != -4 {
		t.Errorf("parsed %+v json=%v level=%v, want %+v", opts.Limits, opts.LogJSON, opts.LogLevel, want)
	}
	for raw, want := range map[string]int64{"1048576": 1 << 20, "1024K": 1 << 20, "300M": 300 << 20, "2G": 2 << 30, "1024G": 1 << 40} {
		if opts, err := parseServeArgs([]string{"--max-event-memory", raw}, sys); err != nil || opts.Limits.MaxEventMemory != want {
			t.Errorf("--max-event-memory %s = %d, %v; want %d", raw, opts.Limits.MaxEventMemory, err, want)
		}
	}
	for _, tt := range []struct{ flag, value, rule string }{
		{"max-sessions", "0", "from 1 through 10000"},
		{"max-sessions", "10001", "from 1 through 10000"},
		{"max-subscribers-per-session", "-1", "from 1 through 1000"},
		{"max-children", "0", "from 1 through 64"},
		{"max-children", "65", "from 1 through 64"},
		{"max-children", "two", "from 1 through 64"},
		{"event-ring-size", "0", "from 1 through 1048576"},
		{"initialize-timeout-ms", "99", "from 100 through 600000"},
		{"prompt-deadline-ms", "1.5", "from 0 through 86400000"},
		{"permission-response-timeout-ms", "86400001", "from 0 through 86400000"},
		{"session-idle-timeout-ms", "999", "from 1000 through 604800000"},
		{"max-event-memory", "1048575", "byte count from 1048576 (1M) through 1099511627776 (1024G)"},
		{"max-event-memory", "1023K", "byte count from 1048576"},
		{"max-event-memory", "1025G", "byte count from 1048576"},
		{"max-event-memory", "99999999999999999999", "byte count from 1048576"},
		{"max-event-memory", "64MiB", "optionally with a K, M or G suffix"},
		{"max-event-memory", "-1M", "byte count from 1048576"},
		{"max-event-memory", "", "byte count from 1048576"},
		{"log-format", "xml", "must be text or json"},
		{"log-level", "trace", "must be debug, info, warn or error"},
	} {
		_, err := parseServeArgs([]string{"--" + tt.flag + "=" + tt.value}, sys)
		want := fmt.Sprintf("--%s %q: ", tt.flag, tt.value)
		if exitCode(err) != exitUsage || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tt.rule) {
			t.Errorf("--%s=%s: %v, want a usage error %q...%q", tt.flag, tt.value, err, want, tt.rule)
		}
	}
}

// TestServeE2ELimitFlags runs "acpguard serve" with limit and log flags:
// a full daemon refuses with 503 and Retry-After and logs it as JSON; the
// idle reaper frees the place again.
func TestServeE2ELimitFlags(t *testing.T) {
	ws := t.TempDir()
	sp := startServe(t, []string{"--workspace", ws, "--max-sessions", "1", "--session-idle-timeout-ms", "1000", "--log-format", "json"})
	id := sp.newSession(t, "")
	stream := sp.openEvents(t, id, "")
	r := sp.do(t, "POST", "/session", `{"sessionScope":"thread"}`)
	wantError(t, r, http.StatusServiceUnavailable, codeSessionLimit)
	if r.header.Get("Retry-After") == "" {
		t.Error("503 session_limit_exceeded without Retry-After")
	}
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionClosed })
	if len(evs) != 1 || evs[0].typ != eventSessionClosed {
		t.Errorf("events of an idle session = %v, want session_closed", evs)
	}
	sp.newSession(t, "")
	var limitLines int
	for _, line := range strings.Split(strings.TrimSpace(sp.stderr.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue // the ACP child's own stderr
		}
		var rec struct{ Level, Msg, Code string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg == "" {
			t.Fatalf("stderr line %q is not a JSON log record: %v", line, err)
		}
		if rec.Level == "WARN" && rec.Msg == "limit reached" {
			limitLines++
			if rec.Code != codeSessionLimit && rec.Code != limitSessionIdle {
				t.Errorf("limit line with code %q", rec.Code)
			}
		}
	}
	if limitLines != 2 {
		t.Errorf("%d limit lines, want 2 (the refusal and the reap):\n%s", limitLines, sp.stderr.String())
	}
}
