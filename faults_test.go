// faults_test.go injects faults into a running "acpguard serve" with real
// ACP children: a provider that dies, hangs, is slow or cuts its answer, a
// child killed mid-turn, a reader that stops, a host that walks away from a
// permission request, SIGTERM during prompts, and a decision log that cannot
// be written. The rule is always: no decision, no execution, nothing hangs.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// faultGuardTimeout is the shortest provider timeout the design allows
// ("an integer from 100 through 30000 ms") with room for a busy CI machine.
const faultGuardTimeout = 300 * time.Millisecond

// quickRaceExit keeps a race-enabled ACP child from sleeping a second at
// exit, as acpguardCmd does for the processes it starts.
const quickRaceExit = "GORACE=atexit_sleep_ms=0"

// guardedYolo returns serve options in required mode against g, in the yolo
// approval mode so the guard is the only gate a call meets.
func guardedYolo(t testing.TB, ws string, g guardConfig) serveOptions {
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return serveOptions{Workspaces: []string{ws}, SettingsFile: settings, Guard: g, DecisionLog: filepath.Join(t.TempDir(), "d.jsonl")}
}

// writeCall is a scripted prompt line proposing one write_file of name.
func writeCall(name string) string {
	return `call write_file {"file_path":"` + name + `","content":"x"}`
}

// wantDeniedWrite checks that the only tool call of evs failed with the
// guard failure text and that its file does not exist.
func wantDeniedWrite(t *testing.T, evs []sseEvent, ws, name, reason string) {
	t.Helper()
	ups := toolUpdates(t, evs)
	if len(ups) == 0 {
		t.Fatalf("no tool updates in %d events", len(evs))
	}
	last := ups[len(ups)-1]
	if last.Status != "failed" || !strings.Contains(string(last.RawOutput), errTypeExecutionDenied) || !strings.Contains(string(last.RawOutput), reason) {
		t.Errorf("final update of %s = %+v, want failed %s %q", name, last, errTypeExecutionDenied, reason)
	}
	for _, u := range ups {
		if u.Status == "in_progress" {
			t.Errorf("%s reached in_progress without a decision", name)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was written without an allow (stat: %v)", name, err)
	}
}

// pidGoneWithin waits until pid no longer runs.
func pidGoneWithin(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if processGone(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// parentPID reads a process's parent from /proc.
func parentPID(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(fields[1])
	return n
}

// readPIDFile polls for a file holding a pid, written by a shell tool.
func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	for range 500 {
		if data, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("pid file %s holds %q", path, data)
			}
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the shell tool never wrote %s", path)
	return 0
}

// faultProvider is a provider that handshakes correctly and then answers
// prepare with prepare.
func faultProvider(t *testing.T, prepare http.HandlerFunc) (*httptest.Server, guardConfig) {
	t.Helper()
	const token = "fault-provider-token"
	base := newTestProvider(t)
	base.token = token
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/prepare" {
			prepare(w, r)
			return
		}
		base.serveHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: faultGuardTimeout, Token: token}
}

func TestFaultProviderMisbehaves(t *testing.T) {
	for _, tt := range []struct {
		name    string
		prepare http.HandlerFunc
		// after is how long to keep watching for a late execution.
		after time.Duration
	}{
		{"never answers", func(w http.ResponseWriter, r *http.Request) {
			// With the body read, the server notices the daemon hanging up.
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}, 0},
		{"answers after the timeout", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				RequestID string `json:"requestId"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			time.Sleep(2 * faultGuardTimeout)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"protocolVersion":1,"requestId":` + strconv.Quote(req.RequestID) + `,"allowed":true}`))
		}, 3 * faultGuardTimeout},
		{"closes mid-body", func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 80\r\n\r\n{\"protocolVersion\":1,\"allo")
			buf.Flush()
			conn.Close()
		}, 0},
		{"resets the connection", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			conn.Close()
		}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, g := faultProvider(t, tt.prepare)
			ws := t.TempDir()
			td := startTestDaemon(t, guardedYolo(t, ws, g), quickRaceExit)
			id := td.newSession(t, "")
			_, evs := td.runTurn(t, id, writeCall("a.txt"))
			wantDeniedWrite(t, evs, ws, "a.txt", guardFailedReason)
			time.Sleep(tt.after)
			if _, err := os.Stat(filepath.Join(ws, "a.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a late answer executed the call (stat: %v)", err)
			}
			// The session survives a failed decision.
			if _, evs := td.runTurn(t, id, "hello"); len(evs) == 0 || evs[len(evs)-1].typ != eventTurnComplete {
				t.Errorf("turn after the fault = %v", evs)
			}
		})
	}
}

func TestFaultProviderKilledMidRun(t *testing.T) {
	prov := newTestProvider(t)
	g := prov.guard(t)
	g.Timeout = faultGuardTimeout
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, g), quickRaceExit)
	id := td.newSession(t, "")
	td.runTurn(t, id, writeCall("before.txt"))
	if _, err := os.Stat(filepath.Join(ws, "before.txt")); err != nil {
		t.Fatalf("allowed call before the fault: %v", err)
	}
	// Closing the server closes its listener and every connection, the
	// daemon's keep-alive connection included: the provider is gone.
	prov.srv.Close()
	for _, name := range []string{"after1.txt", "after2.txt"} {
		_, evs := td.runTurn(t, id, writeCall(name))
		wantDeniedWrite(t, evs, ws, name, guardFailedReason)
	}
	if _, calls := prov.counts(); calls != 1 {
		t.Errorf("provider recorded %d prepares, want only the one before it died", calls)
	}
}

func TestFaultDecisionLogUnwritable(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	prov := newTestProvider(t)
	ws := t.TempDir()
	opts := guardedYolo(t, ws, prov.guard(t))
	opts.DecisionLog = "/dev/full"
	td := startTestDaemon(t, opts, quickRaceExit)
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, writeCall("unaudited.txt"))
	wantDeniedWrite(t, evs, ws, "unaudited.txt", guardFailedReason)
	if _, calls := prov.counts(); calls != 1 {
		t.Errorf("provider saw %d prepares, want 1 (no retry)", calls)
	}

	// A log the daemon cannot open fails startup: no listener, no child.
	// A path under a regular file cannot be created, even by root.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAcpguard(t, []string{"serve", "--port", "0", "--workspace", ws,
		"--decision-log", filepath.Join(notDir, "d.jsonl"),
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token)
	if code != exitRuntime || strings.Contains(stdout, serveListenPrefix) || !strings.Contains(stderr, "decision log") {
		t.Errorf("serve with an unwritable decision log: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestFaultChildKilledMidTurn kills the ACP child with SIGKILL while its
// shell tool runs. The session dies visibly, later calls get 410, and the
// tool process does not outlive the child that owned it.
func TestFaultChildKilledMidTurn(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, prov.guard(t)), quickRaceExit)
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	td.prompt(t, id, `call run_shell_command {"command":"echo $$ > sleep.pid; exec sleep 30"}`)
	sleepPID := readPIDFile(t, filepath.Join(ws, "sleep.pid"))
	t.Cleanup(func() { syscall.Kill(sleepPID, syscall.SIGKILL) })
	child := parentPID(sleepPID)
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/cmdline")
	if child == 0 || parentPID(child) != os.Getpid() || !strings.Contains(string(cmdline), "acp") {
		t.Fatalf("the sleep's parent %d (%q) is not an ACP child of this daemon", child, cmdline)
	}
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	if len(evs) == 0 || evs[len(evs)-1].typ != eventSessionDied {
		t.Fatalf("stream ended without session_died: %v", evs)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"hi"}]}`), http.StatusGone, codeSessionDied)
	if !pidGoneWithin(child, 5*time.Second) {
		t.Errorf("killed ACP child %d still exists", child)
	}
	if !pidGoneWithin(sleepPID, 5*time.Second) {
		t.Errorf("tool process %d (now a child of %d) outlives its SIGKILLed ACP child %d", sleepPID, parentPID(sleepPID), child)
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
	// 150 calls of 100 kB output each: more events than the subscriber
	// queue holds and more bytes than the socket buffers take.
	const calls = 150
	var lines []string
	for i := range calls {
		lines = append(lines, `call run_shell_command {"command":"head -c 100000 /dev/zero | tr '\\0' a; echo > big`+strconv.Itoa(i)+`.done"}`)
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

// TestFaultHostLeavesPermissionRequest: in the default approval mode the
// child asks the host; the host's stream goes away mid-question. Nothing
// runs while the question is open, and a cancel ends the turn without a
// provider call.
func TestFaultHostLeavesPermissionRequest(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, Guard: prov.guard(t), DecisionLog: filepath.Join(t.TempDir(), "d.jsonl")}, quickRaceExit)
	id := td.newSession(t, "")
	stream, closeStream := openEventsClosable(t, td, id)
	pid := td.prompt(t, id, writeCall("asked.txt"))
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
	last := evs[len(evs)-1]
	closeStream()
	time.Sleep(3 * faultGuardTimeout)
	if _, err := os.Stat(filepath.Join(ws, "asked.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the call ran with its permission question unanswered (stat: %v)", err)
	}
	// The question is still there for a host that reconnects.
	replay := readSSE(t, td.openEvents(t, id, ""), func(ev sseEvent) bool { return ev.id == last.id })
	if replay[len(replay)-1].typ != eventPermissionRequest {
		t.Fatalf("reconnecting host does not see the open question")
	}
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d %s", r.status, r.body)
	}
	rest := readSSE(t, td.openEvents(t, id, last.id), untilTurnEnd(pid))
	var sawResolved bool
	for _, ev := range rest {
		sawResolved = sawResolved || ev.typ == eventPermissionResolved
	}
	if !sawResolved || rest[len(rest)-1].typ != eventTurnComplete {
		t.Errorf("events after cancel = %v, want permission_resolved then turn_complete", rest)
	}
	if _, err := os.Stat(filepath.Join(ws, "asked.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled permission question let the call run")
	}
	if _, calls := prov.counts(); calls != 0 {
		t.Errorf("provider saw %d prepares for a call the host never approved", calls)
	}
}

// openEventsClosable opens a session's event stream that the test can drop.
func openEventsClosable(t *testing.T, td *testDaemon, id string) (*bufio.Reader, func()) {
	t.Helper()
	req, _ := http.NewRequest("GET", td.url+"/session/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewReader(resp.Body), func() { resp.Body.Close() }
}

// TestFaultSIGTERMWithPromptsRunning: serve, as a real process, gets
// SIGTERM while sessions run shell tools; it exits 0 and leaves nothing.
func TestFaultSIGTERMWithPromptsRunning(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, args, tokenEnv)
	const mark = "acpguard-fault-sigterm"
	var pids []int
	for i := range 4 {
		id := sp.newSession(t, "")
		sp.prompt(t, id, `call run_shell_command {"command":"echo $$ > s`+strconv.Itoa(i)+`.pid; sleep 30; echo `+mark+`"}`)
		pids = append(pids, readPIDFile(t, filepath.Join(ws, "s"+strconv.Itoa(i)+".pid")))
	}
	children := childPIDs(t, sp.cmd.Process.Pid)
	start := time.Now()
	if err := sp.stop(); err != nil {
		t.Fatalf("serve after SIGTERM: %v, want exit 0\n%s", err, sp.stderr.String())
	}
	t.Logf("serve exited %v after SIGTERM with 4 running prompts", time.Since(start).Round(time.Millisecond))
	for _, pid := range append(children, pids...) {
		if !pidGoneWithin(pid, time.Second) {
			t.Errorf("process %d outlived serve", pid)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(cmdline), mark) {
			t.Errorf("process %s (%q) outlived serve", e.Name(), cmdline)
		}
	}
}

// TestServeDeleteEndsSessionProcesses: a host that deletes a session ends
// what the session started in the background; the child lives on for others.
func TestServeDeleteEndsSessionProcesses(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, prov.guard(t)), quickRaceExit)
	id := td.newSession(t, "")
	other := td.newSession(t, "")
	td.runTurn(t, id, `call run_shell_command {"command":"echo $$ > bg.pid; exec sleep 30","is_background":true}`)
	pid := readPIDFile(t, filepath.Join(ws, "bg.pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	if !pidGoneWithin(pid, 5*time.Second) {
		t.Errorf("background process %d outlived its deleted session", pid)
	}
	if td.runTurn(t, other, writeCall("other.txt")); !fileExists(filepath.Join(ws, "other.txt")) {
		t.Errorf("the other session on the same child no longer works")
	}
}
