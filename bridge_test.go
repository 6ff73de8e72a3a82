// bridge_test.go tests the prepare bridge: ownership and active-prompt
// checks, one provider call per guarded call, a misbehaving provider, and the decision log.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestServeOffModeDeniesPrepareWithoutProvider(t *testing.T) {
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, `prepare write_file {"file_path":"a.txt","content":"x"}`)
	got := texts(t, evs)
	if len(got) != 1 || got[0] != `{"allowed":false,"reason":"`+guardFailedReason+`"}` {
		t.Errorf("decision = %v", got)
	}
	if conns, calls := prov.counts(); conns != 0 || calls != 0 {
		t.Errorf("off mode made %d provider connections, %d prepares", conns, calls)
	}
	recs := decisions(t, td.stderr.String())
	if len(recs) != 1 || recs[0].Outcome != outcomeNotConfigured || recs[0].ToolName != "write_file" || recs[0].SessionID != id {
		t.Errorf("decision log = %+v", recs)
	}
}

func TestServeRequiredModePrepare(t *testing.T) {
	prov := newTestProvider(t)
	prov.verdict = func(tool string, _ json.RawMessage) (int, bool, string) {
		if tool == "run_shell_command" {
			return 200, false, "no shell here"
		}
		return 200, true, ""
	}
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), DecisionLog: logPath}, fakeChildEnv("ack"))
	var caps capabilitiesBody
	decodeStrict(td.do(t, "GET", "/capabilities", "").body, &caps)
	if !strings.Contains(strings.Join(caps.Features, ","), featureExternalToolGuard) {
		t.Errorf("required mode features = %v", caps.Features)
	}
	id := td.newSession(t, "")
	pid, evs := td.runTurn(t, id, "prepare write_file {\"file_path\":\"a.txt\"}\nprepare run_shell_command {\"command\":\"ls\"}")
	got := texts(t, evs)
	want := []string{`{"allowed":true}`, `{"allowed":false,"reason":"no shell here"}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("decisions = %v, want %v", got, want)
	}
	_, calls := prov.counts()
	if calls != 2 {
		t.Fatalf("provider saw %d prepares, want 2", calls)
	}
	for i, tool := range []string{"write_file", "run_shell_command"} {
		c := prov.calls[i]
		for k, v := range map[string]string{"sessionId": id, "promptId": pid, "toolCallId": "call_" + tool, "toolName": tool} {
			if string(c[k]) != strconv.Quote(v) {
				t.Errorf("prepare %d %s = %s, want %q", i, k, c[k], v)
			}
		}
	}
	data, _ := os.ReadFile(logPath)
	recs := decisions(t, string(data))
	if len(recs) != 2 || recs[0].Outcome != outcomeAllowed || recs[1].Outcome != outcomeDenied {
		t.Fatalf("decision log = %s", data)
	}
	for i, rec := range recs {
		if string(prov.calls[i]["requestId"]) != strconv.Quote(rec.RequestID) || rec.PromptID != pid || rec.SessionID != id || len(rec.ArgumentsSha256) != 64 {
			t.Errorf("decision record %+v does not match provider request %s", rec, prov.calls[i]["requestId"])
		}
	}
}

func TestServeRejectsForeignAndStalePrepare(t *testing.T) {
	prov := newTestProvider(t)
	wsA, wsB := t.TempDir(), t.TempDir()
	// With two children, a and b get one each and a2 goes beside a.
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), Workspaces: []string{wsA, wsB}, Limits: serveLimits{MaxChildren: 2}}, fakeChildEnv("ack"))
	a := td.newSession(t, `{"cwd":"`+wsA+`"}`)
	b := td.newSession(t, `{"cwd":"`+wsB+`"}`)
	a2 := td.newSession(t, `{"cwd":"`+wsA+`"}`)
	// b has an active prompt, so its identity would pass if only ids counted.
	streamB := td.openEvents(t, b, "")
	pb := td.prompt(t, b, "wait")
	readSSE(t, streamB, childUpdate)

	args := `{"command":"rm -rf /"}`
	script := strings.Join([]string{
		"forge " + b + " " + pb + " run_shell_command " + args, // another channel's session
		"forge " + a2 + " - run_shell_command " + args,         // own channel, idle session
		"forge - stale-prompt run_shell_command " + args,       // own session, wrong prompt
		"forge - - run_shell_command null",                     // not an object
	}, "\n")
	_, evs := td.runTurn(t, a, script)
	for i, got := range texts(t, evs) {
		if got != `{"allowed":false,"reason":"`+guardFailedReason+`"}` {
			t.Errorf("forged prepare %d = %s", i, got)
		}
	}
	if _, calls := prov.counts(); calls != 0 {
		t.Errorf("forged prepares reached the provider %d times", calls)
	}
	var outcomes []string
	for _, rec := range decisions(t, td.stderr.String()) {
		outcomes = append(outcomes, rec.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "identity_mismatch stale_prompt stale_prompt malformed_request" {
		t.Errorf("decision outcomes = %s", got)
	}
	td.do(t, "POST", "/session/"+b+"/cancel", "")
}

func TestServeCancelWhileProviderDecides(t *testing.T) {
	prov := newTestProvider(t)
	prov.gate, prov.inCall = make(chan struct{}), make(chan struct{}, 1)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t)}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, `prepare write_file {"file_path":"a.txt"}`)
	<-prov.inCall
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d", r.status)
	}
	close(prov.gate) // the provider allows, too late
	got := texts(t, readSSE(t, stream, untilTurnEnd(pid)))
	for _, g := range got {
		if strings.Contains(g, `"allowed":true`) {
			t.Errorf("an allow reached the child after cancel: %v", got)
		}
	}
	if _, calls := prov.counts(); calls != 1 {
		t.Errorf("provider saw %d prepares, want 1", calls)
	}
	// A cancellation, logged and counted as one, not as a stale prompt.
	recs := waitDecisions(t, td, 1)
	if len(recs) != 1 || recs[0].Outcome != failCancelled || recs[0].PromptID != pid {
		t.Errorf("decision log = %+v, want one %q for prompt %s", recs, failCancelled, pid)
	}
	m := td.scrape(t)
	for series, want := range map[string]float64{
		`acpguard_serve_decision_failures_total{category="cancelled"}`:    1,
		`acpguard_serve_decision_failures_total{category="stale_prompt"}`: 0,
		`acpguard_serve_decisions_total{outcome="allowed"}`:               0,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
}

// TestServeCancelEndsProviderRequest: a cancelled prompt stops the provider
// request made for it at once, long before the provider timeout, and the
// call is denied as a cancellation.
func TestServeCancelEndsProviderRequest(t *testing.T) {
	inCall, aborted := make(chan struct{}, 1), make(chan struct{}, 1)
	_, g := faultProvider(t, func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the server notices the daemon hanging up.
		io.Copy(io.Discard, r.Body)
		inCall <- struct{}{}
		<-r.Context().Done()
		aborted <- struct{}{}
	})
	g.Timeout = time.Hour // only the cancel can end the request
	td := startTestDaemon(t, serveOptions{Guard: g}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, `prepare write_file {"file_path":"a.txt"}`)
	<-inCall
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d", r.status)
	}
	select {
	case <-aborted:
	case <-time.After(testTimeout(10 * time.Second)):
		t.Fatal("the provider request outlived the cancelled prompt")
	}
	got := texts(t, readSSE(t, stream, untilTurnEnd(pid)))
	for _, g := range got {
		if strings.Contains(g, `"allowed":true`) {
			t.Errorf("an allow reached the child after cancel: %v", got)
		}
	}
	recs := waitDecisions(t, td, 1)
	if len(recs) != 1 || recs[0].Outcome != failCancelled || recs[0].PromptID != pid {
		t.Errorf("decision log = %+v, want one %q for prompt %s", recs, failCancelled, pid)
	}
}

// TestServePrepareForCancelledPromptIsCancelled: a prepare the child sends
// for a prompt the host cancelled, before the child answered it, is a
// cancellation before evaluation: no provider request, logged cancelled.
func TestServePrepareForCancelledPromptIsCancelled(t *testing.T) {
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t)}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	// The fake child asks after its wait ends, with the prompt's identity,
	// on a context of its own that the cancel does not end.
	pid := td.prompt(t, id, "wait\nlateprepare write_file {\"file_path\":\"a.txt\"}")
	readSSE(t, stream, childUpdate)
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d", r.status)
	}
	got := texts(t, readSSE(t, stream, untilTurnEnd(pid)))
	if want := `{"allowed":false,"reason":"` + guardFailedReason + `"}`; len(got) != 1 || got[0] != want {
		t.Errorf("child heard %v, want a denial", got)
	}
	if _, calls := prov.counts(); calls != 0 {
		t.Errorf("provider saw %d prepares, want 0", calls)
	}
	if recs := decisions(t, td.stderr.String()); len(recs) != 1 || recs[0].Outcome != failCancelled {
		t.Errorf("decision log = %+v, want one %q", recs, failCancelled)
	}
}

func TestServeUnauditedAllowIsDenied(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), DecisionLog: "/dev/full"}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, `prepare write_file {"file_path":"a.txt"}`)
	if got := texts(t, evs); len(got) != 1 || got[0] != `{"allowed":false,"reason":"`+guardFailedReason+`"}` {
		t.Errorf("decision with a failing decision log = %v", got)
	}
}

// TestServePrepareAfterPromptAnswerIsStale: the child answers its prompt
// end_turn and asks for a decision for that prompt in the same write. serve
// applies the answer before it reads the prepare, so the prepare finds the
// prompt over: no provider request, stale_prompt in the decision log. Run
// many times, since the old order lost a race only some of the time.
func TestServePrepareAfterPromptAnswerIsStale(t *testing.T) {
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t)}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	const turns = 30
	for range turns {
		pid := td.prompt(t, id, `endprepare write_file {"file_path":"a.txt","content":"x"}`)
		evs := readSSE(t, stream, untilTurnEnd(pid))
		if end := evs[len(evs)-1]; end.typ != eventTurnComplete {
			t.Fatalf("turn ended with %s", end.data)
		}
	}
	recs := waitDecisions(t, td, turns)
	if len(recs) != turns {
		t.Fatalf("decision log has %d records, want %d", len(recs), turns)
	}
	for _, rec := range recs {
		if rec.Outcome != outcomeStalePrompt || rec.ToolCallID != "call_late" {
			t.Errorf("decision %+v, want stale_prompt", rec)
		}
	}
	if _, calls := prov.counts(); calls != 0 {
		t.Errorf("stale prepares reached the provider %d times", calls)
	}
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

// A blank provider reason reaches the host as the one default text, which
// the child's boundary applies.
func TestServeBlankDenialReason(t *testing.T) {
	for _, reason := range []string{"", "   "} {
		prov := newTestProvider(t)
		prov.verdict = func(string, json.RawMessage) (int, bool, string) { return 200, false, reason }
		ws := t.TempDir()
		td := startTestDaemon(t, guardedYolo(t, ws, prov.guard(t)), quickRaceExit)
		_, evs := td.runTurn(t, td.newSession(t, ""), writeCall("a.txt"))
		wantDeniedWrite(t, evs, ws, "a.txt", denyDefaultReason)
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

func TestServeE2EForgingChild(t *testing.T) {
	prov := newTestProvider(t)
	wsA, wsB := t.TempDir(), t.TempDir()
	sp := startServe(t, []string{"--workspace", wsA, "--workspace", wsB,
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token, fakeChildEnv("ack"))
	a := sp.newSession(t, `{"cwd":"`+wsA+`"}`)
	b := sp.newSession(t, `{"cwd":"`+wsB+`"}`)
	streamB := sp.openEvents(t, b, "")
	pb := sp.prompt(t, b, "wait")
	readSSE(t, streamB, childUpdate)
	_, evs := sp.runTurn(t, a, "forge "+b+" "+pb+" write_file {}\nforge - stale write_file {}\nprepare write_file {}")
	got := texts(t, evs)
	want := []string{`{"allowed":false,"reason":"` + guardFailedReason + `"}`, `{"allowed":false,"reason":"` + guardFailedReason + `"}`, `{"allowed":true}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("decisions = %v, want %v", got, want)
	}
	if _, calls := prov.counts(); calls != 1 {
		t.Errorf("provider saw %d prepares, want 1 (only the genuine one)", calls)
	}
}

// TestDecisionRecordLine pins the decision log's line to json.Marshal of
// decisionRecord: the same members in the same order, strings escaped the
// same way, whatever a child put in its ids.
func TestDecisionRecordLine(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "<a>&b", "ctl\x00\x1f\n\t", "bad\xffutf8\xc3", "\u2028\u2029", "é✓😀", strings.Repeat("x", 300)} {
		rec := decisionRecord{Time: "2026-01-02T03:04:05.123456789Z", SessionID: s, PromptID: "p" + s, ToolCallID: s + "c",
			RequestID: "r", ToolName: s, ArgumentsSha256: "abc", Outcome: outcomeDenied, Reason: s, LatencyUs: -7 + int64(len(s)),
			Arguments: json.RawMessage(`{"content":` + string(appendJSONString(nil, s, false)) + `,"n":[1,2.5,null]}`)}
		want, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendDecisionRecord(nil, rec); string(got) != string(want)+"\n" {
			t.Errorf("decision line for %q:\n got %s\nwant %s", s, got, want)
		}
	}
	var b bytes.Buffer
	if err := newDecisionLog(&b).write(decisionRecord{Outcome: outcomeDenied}); err != nil {
		t.Fatal(err)
	}
	var back decisionRecord
	if err := decodeStrict(bytes.TrimSuffix(b.Bytes(), []byte("\n")), &back); err != nil || back.Time == "" || back.Outcome != outcomeDenied {
		t.Errorf("decision line %q read back as %+v, %v", b.Bytes(), back, err)
	}
}

// TestGuardPrepareParamsRoundTrip checks that the params a child writes for
// a prepare read back in serve as the same ids and the same argument bytes.
func TestGuardPrepareParamsRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", `q"uo\te`, "<a>&b", "ctl\x01\n", "\u2028é😀"} {
		args := []byte(`{"file_path":"/w/a.txt","content":"x<y"}`)
		req := GuardRequest{SessionID: "s" + s, PromptID: "p" + s, ToolCallID: "c" + s, ToolName: "t" + s}
		p, err := prepareParams(appendGuardPrepareParams(req, args))
		if err != nil {
			t.Fatalf("params for %q: %v", s, err)
		}
		if p.SessionID != req.SessionID || p.PromptID != req.PromptID || p.ToolCallID != req.ToolCallID || p.ToolName != req.ToolName || string(p.Arguments) != string(args) {
			t.Errorf("params for %q read back as %+v", s, p)
		}
	}
}

// TestDecisionAnswer pins the answer to a child's prepare to json.Marshal of
// Decision, byte for byte, whatever a provider put in its reason: HTML
// characters, controls, line and paragraph separators, invalid UTF-8.
func TestDecisionAnswer(t *testing.T) {
	reasons := []string{"", "plain", guardFailedReason, `q"uo\te`, "<script>&amp;</script>", "ctl\x00\x1f\n\t\r\b\f\x7f",
		"bad\xffutf8\xc3", "\xed\xa0\x80 surrogate", "\u2028line\u2029para", "é✓😀", strings.Repeat("r<", 40)}
	for _, allowed := range []bool{true, false} {
		for _, reason := range reasons {
			d := Decision{Allowed: allowed, Reason: reason}
			want, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := decisionAnswer(d).(rpcCompact)
			if !ok || string(got) != string(want) {
				t.Errorf("answer to %+v:\n got %s\nwant %s", d, got, want)
			}
		}
	}
	// The allowed answer is shared by every call: no call may change it.
	if got := decisionAnswer(Decision{Allowed: true}).(rpcCompact); string(got) != `{"allowed":true}` {
		t.Errorf("allowed answer is %s", got)
	}
}

// BenchmarkRPCPrepareAnswer is a child's prepare call over a real pipe
// pair, answered as serve answers it (decisionAnswer) and, to compare,
// with the Decision for runHandler to encode.
func BenchmarkRPCPrepareAnswer(b *testing.B) {
	args, err := canonicalArgumentBytes(map[string]any{"command": "ls -la /tmp", "description": "list the files", "timeout": 120000})
	if err != nil {
		b.Fatal(err)
	}
	req := GuardRequest{SessionID: "5f0c6a1e-8d0b-4b8e-9a53-6f6c1f0b7a11", PromptID: "p-1", ToolCallID: "call-1", ToolName: "run_shell_command"}
	for _, d := range []Decision{{Allowed: true}, {Reason: "shell commands need a review <ops@example.com>"}} {
		for _, bc := range []struct {
			name   string
			answer func(Decision) any
		}{{"appended", decisionAnswer}, {"marshal", func(d Decision) any { return d }}} {
			b.Run(fmt.Sprintf("allowed=%v/%s", d.Allowed, bc.name), func(b *testing.B) {
				pair := startPair(b, rpcConfig{}, rpcConfig{OnRequest: func(context.Context, string, json.RawMessage) (any, error) {
					return bc.answer(d), nil
				}})
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := pair.a.call(ctx, methodGuardPrepare, rpcCompact(appendGuardPrepareParams(req, args))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
