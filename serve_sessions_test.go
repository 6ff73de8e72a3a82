// serve_sessions_test.go drives serveDaemon in process against a scripted
// fake ACP child (this test binary, re-executed) and a counting policy
// provider on a loopback socket: sessions, prompts, the queue, permissions,
// and a host that walks away from a permission request.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runFakeChild is the "fake-child" role. mode says how it answers
// initialize: "ack" acknowledges required-v1, "badack" something else,
// anything else nothing; "ownid" also names its sessions itself instead of
// as serve asked.
//
// It is a minimal ACP agent whose prompt text is a script, one
// command per line; it reports what it saw as agent_message_chunk text.
//
//	report pid|env|invocation       report a fact about itself
//	prepare TOOL JSON               ask the parent for a decision, report it
//	endprepare TOOL JSON            answer the prompt end_turn and, in the same
//	                                write, ask for a decision for it
//	forge SESSION PROMPT TOOL JSON  ask with another identity ("-": own)
//	lateprepare TOOL JSON           prepare, even after session/cancel
//	permission                      ask the parent for a permission, report it
//	model SESSION PROMPT [MODEL]    ask the parent for a model call ("-": own),
//	                                report "model ok BYTES" (the chunks'
//	                                and the answer's) or the error
//	wait                            report "waiting", wait for session/cancel
//	flood N SIZE                    report N texts of SIZE bytes
//	fail                            answer the prompt with an error
//	die                             exit at once
func runFakeChild(mode string) int {
	var conn *rpcConn
	var mu sync.Mutex
	cancels := map[string]context.CancelFunc{}
	replies := map[string]int{} // model reply bytes, by streamId
	sessions := 0
	say := func(sessionID, text string) {
		conn.notify("session/update", map[string]any{"sessionId": sessionID, "update": map[string]any{
			"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}}})
	}
	out := &fakeChildOut{w: os.Stdout}
	conn = newRPCConn(os.Stdin, out, rpcConfig{
		OnNotify: func(method string, params json.RawMessage) {
			if method == methodModelChunk {
				var c modelChunk
				json.Unmarshal(params, &c)
				mu.Lock()
				replies[c.StreamID] += len(c.Data)
				mu.Unlock()
				return
			}
			var p struct{ SessionID string }
			json.Unmarshal(params, &p)
			mu.Lock()
			if c := cancels[p.SessionID]; c != nil && method == "session/cancel" {
				c()
			}
			mu.Unlock()
		},
		// A prompt is cancellable from the moment it is read: a
		// session/cancel read right after it stops it.
		OnAdmit: func(ctx context.Context, method string, params json.RawMessage) context.Context {
			if method != "session/prompt" {
				return ctx
			}
			var p struct{ SessionID string }
			json.Unmarshal(params, &p)
			ctx, cancel := context.WithCancel(ctx)
			mu.Lock()
			cancels[p.SessionID] = cancel
			mu.Unlock()
			return ctx
		},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			switch method {
			case "initialize":
				var p struct {
					Meta map[string]string `json:"_meta"`
				}
				json.Unmarshal(params, &p)
				// The channel is private; serve sends no secret over it.
				if _, sent := p.Meta[metaParentCapability]; sent || os.Getenv(envPrivateCapability) != "" {
					return nil, &rpcError{Code: rpcInvalidRequest, Message: "serve sent a parent capability"}
				}
				caps := map[string]any{"loadSession": false}
				switch mode {
				case "badack":
					caps["_meta"] = map[string]string{"qwen-code/external-tool-guard-ready": "required-v0"}
				case "ack":
					caps["_meta"] = map[string]string{"qwen-code/external-tool-guard-ready": "required-v1"}
				}
				return map[string]any{"protocolVersion": 1, "agentCapabilities": caps, "authMethods": []any{}}, nil
			case "session/new":
				var p struct {
					Meta map[string]string `json:"_meta"`
				}
				json.Unmarshal(params, &p)
				mu.Lock()
				sessions++
				own := fmt.Sprintf("fake-%d-%d", os.Getpid(), sessions)
				mu.Unlock()
				if mode == "ownid" {
					return map[string]string{"sessionId": own}, nil
				}
				return map[string]string{"sessionId": p.Meta[metaSessionID]}, nil
			case "session/prompt":
				var p struct {
					SessionID string
					Prompt    []struct{ Type, Text string }
					Meta      map[string]json.RawMessage `json:"_meta"`
				}
				json.Unmarshal(params, &p)
				var inv struct{ SessionID, PromptID string }
				json.Unmarshal(p.Meta["qwen-code/invocation"], &inv)
				for _, line := range strings.Split(p.Prompt[0].Text, "\n") {
					f := strings.SplitN(line, " ", 5)
					switch f[0] {
					case "report":
						switch f[1] {
						case "pid":
							say(p.SessionID, strconv.Itoa(os.Getpid()))
						case "env":
							say(p.SessionID, strings.Join(os.Environ(), "\n"))
						case "invocation":
							say(p.SessionID, string(p.Meta["qwen-code/invocation"]))
						}
					case "prepare", "forge", "lateprepare":
						sid, pid, tool, args := inv.SessionID, inv.PromptID, f[1], strings.Join(f[2:], " ")
						callCtx := ctx
						if f[0] == "lateprepare" {
							callCtx = context.WithoutCancel(ctx)
						}
						if f[0] == "forge" {
							if f[1] != "-" {
								sid = f[1]
							}
							if f[2] != "-" {
								pid = f[2]
							}
							tool, args = f[3], f[4]
						}
						res, err := conn.call(callCtx, "_qwen/control/external_tool_guard/prepare", map[string]any{
							"sessionId": sid, "promptId": pid, "toolCallId": "call_" + tool, "toolName": tool, "arguments": json.RawMessage(args)})
						if err != nil {
							say(p.SessionID, "error: "+err.Error())
							continue
						}
						say(p.SessionID, string(res))
					case "model":
						sid, pid := f[1], f[2]
						if sid == "-" {
							sid = inv.SessionID
						}
						if pid == "-" {
							pid = inv.PromptID
						}
						name := ""
						if len(f) > 3 {
							name = f[3]
						}
						mu.Lock()
						replies[p.SessionID] = 0
						mu.Unlock()
						req, _ := json.Marshal(map[string]any{"model": name, "stream": true,
							"messages": []map[string]string{{"role": "user", "content": "hello"}}})
						res, err := conn.call(ctx, methodModelComplete, map[string]any{
							"sessionId": sid, "promptId": pid, "streamId": p.SessionID, "request": json.RawMessage(req)})
						if err != nil {
							say(p.SessionID, "model error: "+err.Error())
							continue
						}
						last, err := decodeModelChunk(res)
						if err != nil {
							say(p.SessionID, "model error: "+err.Error())
							continue
						}
						mu.Lock()
						n := replies[p.SessionID] + len(last.Data) // the result holds the last bytes
						mu.Unlock()
						say(p.SessionID, fmt.Sprintf("model ok %d", n))
					case "permission":
						// As ACP asks: after session/cancel the client still answers
						// a pending permission request, with the cancelled outcome.
						res, err := conn.call(context.WithoutCancel(ctx), "session/request_permission", map[string]any{
							"sessionId": p.SessionID,
							"toolCall":  map[string]string{"toolCallId": "call_perm", "title": "Write a.txt"},
							"options": []map[string]string{
								{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
								{"optionId": "reject", "name": "Reject", "kind": "reject_once"}},
						})
						if err != nil {
							say(p.SessionID, "error: "+err.Error())
							continue
						}
						say(p.SessionID, string(res))
					case "endprepare":
						// Sent with the answer: serve reads both at once.
						line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "late-" + inv.PromptID,
							"method": "_qwen/control/external_tool_guard/prepare", "params": map[string]any{
								"sessionId": inv.SessionID, "promptId": inv.PromptID, "toolCallId": "call_late",
								"toolName": f[1], "arguments": json.RawMessage(strings.Join(f[2:], " "))}})
						out.withNextAnswer(append(line, '\n'))
					case "wait":
						say(p.SessionID, "waiting")
						<-ctx.Done()
					case "die":
						os.Exit(3)
					case "flood":
						n, _ := strconv.Atoi(f[1])
						size, _ := strconv.Atoi(f[2])
						for range n {
							say(p.SessionID, strings.Repeat("x", size))
						}
					case "fail":
						return nil, &rpcError{Code: rpcInternalError, Message: "scripted failure"}
					}
				}
				if ctx.Err() != nil {
					return map[string]string{"stopReason": "cancelled"}, nil
				}
				return map[string]string{"stopReason": "end_turn"}, nil
			}
			return nil, &rpcError{Code: rpcMethodNotFound, Message: "no " + method}
		},
	})
	conn.serve(context.Background())
	return 0
}

// fakeChildOut is the fake child's stdout. It can append one line to the
// next prompt answer, in the same write.
type fakeChildOut struct {
	mu    sync.Mutex
	w     io.Writer
	after []byte
}

func (o *fakeChildOut) withNextAnswer(line []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.after = line
}

func (o *fakeChildOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.after != nil && bytes.Contains(p, []byte(`"stopReason":"end_turn"`)) {
		_, err := o.w.Write(append(slices.Clip(p), o.after...))
		o.after = nil
		return len(p), err
	}
	return o.w.Write(p)
}

func TestServeSessionPromptEvents(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, Limits: serveLimits{MaxChildren: 1}}, fakeChildEnv(""))
	r := td.do(t, "POST", "/session", "")
	var created newSessionResponse
	if err := decodeStrict(r.body, &created); err != nil || r.status != 200 || created.WorkspaceCwd != ws {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	id := created.SessionID
	pid, evs := td.runTurn(t, id, "report invocation\nreport pid")
	if len(evs) != 3 {
		t.Fatalf("events = %v", evs)
	}
	got := texts(t, evs)
	var inv invocation
	if err := decodeStrict([]byte(got[0]), &inv); err != nil || inv != (invocation{Version: 1, SessionID: id, PromptID: pid}) {
		t.Errorf("child saw invocation %s, want version 1, session %s, prompt %s", got[0], id, pid)
	}
	for _, ev := range evs[:2] {
		e := parseEnvelope(t, ev)
		if e.PromptID != pid || !strings.HasPrefix(string(e.Data), `{"sessionId":"`+id+`","update":{`) {
			t.Errorf("session_update envelope = %s", ev.data)
		}
	}
	end := parseEnvelope(t, evs[2])
	if evs[2].typ != eventTurnComplete || string(end.Data) != `{"sessionId":"`+id+`","stopReason":"end_turn","promptId":"`+pid+`"}` {
		t.Errorf("turn end = %s %s", evs[2].typ, evs[2].data)
	}

	// Last-Event-ID replays exactly what came after it.
	replay := readSSE(t, td.openEvents(t, id, evs[0].id), func(ev sseEvent) bool { return ev.id == evs[2].id })
	if len(replay) != 2 || replay[0].id != evs[1].id {
		t.Errorf("replay after %s = %v", evs[0].id, replay)
	}

	// With --max-children 1, a second session shares the child.
	id2 := td.newSession(t, `{"cwd":"`+ws+`"}`)
	_, evs2 := td.runTurn(t, id2, "report pid")
	if a, b := texts(t, evs)[1], texts(t, evs2)[0]; a != b {
		t.Errorf("sessions of one workspace ran in children %s and %s", a, b)
	}

	// DELETE ends the session's streams with session_closed.
	stream := td.openEvents(t, id, evs[2].id)
	if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Errorf("DELETE = %d %s", r.status, r.body)
	}
	if closed := readSSE(t, stream, func(sseEvent) bool { return false }); len(closed) != 1 || closed[0].typ != eventSessionClosed {
		t.Errorf("events after DELETE = %v", closed)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"x"}]}`), 404, codeSessionNotFound)
}

func TestServeTurnError(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	pid, evs := td.runTurn(t, id, "fail")
	var te turnError
	if len(evs) != 1 || evs[0].typ != eventTurnError || decodeStrict(parseEnvelope(t, evs[0]).Data, &te) != nil ||
		te.PromptID != pid || !strings.Contains(te.Message, "scripted failure") {
		t.Errorf("events of a failed turn = %v", evs)
	}
	// The session still works.
	if _, evs := td.runTurn(t, id, "report pid"); len(evs) != 2 || evs[1].typ != eventTurnComplete {
		t.Errorf("turn after a failure = %v", evs)
	}
}

func TestServeCallerMetaStripped(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	forged := `{"prompt":[{"type":"text","text":"report invocation"}],"_meta":{"qwen-code/invocation":{"version":1,"sessionId":"other","promptId":"forged"}}}`
	r := td.do(t, "POST", "/session/"+id+"/prompt", forged)
	var acc promptAccepted
	if r.status != 202 || decodeStrict(r.body, &acc) != nil {
		t.Fatalf("POST prompt = %d %s", r.status, r.body)
	}
	got := texts(t, readSSE(t, stream, untilTurnEnd(acc.PromptID)))
	want := fmt.Sprintf(`{"version":1,"sessionId":%q,"promptId":%q}`, id, acc.PromptID)
	if len(got) != 1 || got[0] != want {
		t.Errorf("child saw %v, want %s", got, want)
	}
}

func TestServePromptValidation(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	for _, body := range []string{
		`{}`, `{"prompt":[]}`, `{"prompt":null}`, `{"prompt":["text"]}`, `{"prompt":[{}]}`,
		`{"prompt":[{"type":"text","text":"x"}],"extra":true}`, `not json`,
	} {
		wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", body), 400, codeBadRequest)
	}
}

func TestServeQueueFull(t *testing.T) {
	td := startTestDaemon(t, serveOptions{MaxPendingPrompts: 2}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	first := td.prompt(t, id, "wait")
	readSSE(t, stream, childUpdate)
	second := td.prompt(t, id, "report pid")
	third := td.prompt(t, id, "report pid")
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"x"}]}`), 503, codeQueueFull)
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d %s", r.status, r.body)
	}
	// FIFO: the cancelled turn ends first, then the queued ones in order.
	var ends []string
	readSSE(t, stream, func(ev sseEvent) bool {
		if ev.typ == eventTurnComplete {
			var d turnComplete
			json.Unmarshal(parseEnvelope(t, ev).Data, &d)
			ends = append(ends, d.PromptID+"/"+d.StopReason)
		}
		return len(ends) == 3
	})
	want := []string{first + "/cancelled", second + "/end_turn", third + "/end_turn"}
	if strings.Join(ends, " ") != strings.Join(want, " ") {
		t.Errorf("turn ends = %v, want %v", ends, want)
	}
}

func TestServePermissionRelay(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, "permission\npermission")
	var reqIDs []string
	var all []sseEvent
	for range 2 {
		evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
		all = append(all, evs...)
		var req permissionRequestEvent
		e := parseEnvelope(t, evs[len(evs)-1])
		if err := decodeStrict(e.Data, &req); err != nil || req.SessionID != id || len(req.Options) != 2 || e.PromptID != pid {
			t.Fatalf("permission_request = %s", evs[len(evs)-1].data)
		}
		reqIDs = append(reqIDs, req.RequestID)
		path := "/session/" + id + "/permission/" + req.RequestID
		if len(reqIDs) == 1 {
			// Qwen Code's body: requestId and optionId beside error and code.
			if r := td.do(t, "POST", path, `{"outcome":{"outcome":"selected","optionId":"sudo"}}`); r.status != 400 ||
				!strings.Contains(string(r.body), `"code":"invalid_option_id","requestId":"`+req.RequestID+`","optionId":"sudo"}`) {
				t.Errorf("vote for an option not offered = %d %s", r.status, r.body)
			}
			wantError(t, td.do(t, "POST", path, `{"outcome":{"outcome":"selected"}}`), 400, codeBadRequest)
			wantError(t, td.do(t, "POST", "/session/"+id+"/permission/nope", `{"outcome":{"outcome":"cancelled"}}`), 404, codePermissionUnknown)
			r := td.do(t, "POST", path, `{"outcome":{"outcome":"selected","optionId":"allow"}}`)
			if r.status != 200 || strings.TrimSpace(string(r.body)) != "{}" {
				t.Fatalf("vote = %d %s", r.status, r.body)
			}
			wantError(t, td.do(t, "POST", path, `{"outcome":{"outcome":"cancelled"}}`), 404, codePermissionUnknown)
		} else {
			td.do(t, "POST", path, `{"outcome":{"outcome":"cancelled"}}`)
		}
	}
	all = append(all, readSSE(t, stream, untilTurnEnd(pid))...)
	resolved := 0
	for _, ev := range all {
		if ev.typ == eventPermissionResolved {
			resolved++
		}
	}
	if resolved != 2 {
		t.Errorf("%d permission_resolved events, want 2", resolved)
	}
	got := texts(t, all)
	want := []string{`{"outcome":{"outcome":"selected","optionId":"allow"}}`, `{"outcome":{"outcome":"cancelled"}}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("child got %v, want %v", got, want)
	}
}

func TestServeCancelResolvesPendingPermission(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, "permission")
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
	var req permissionRequestEvent
	decodeStrict(parseEnvelope(t, evs[len(evs)-1]).Data, &req)
	if r := td.do(t, "POST", "/session/"+id+"/cancel", ""); r.status != http.StatusNoContent {
		t.Fatalf("cancel = %d", r.status)
	}
	got := texts(t, readSSE(t, stream, untilTurnEnd(pid)))
	if len(got) != 1 || got[0] != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("child got %v, want the cancelled outcome", got)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/permission/"+req.RequestID, `{"outcome":{"outcome":"selected","optionId":"allow"}}`), 404, codePermissionUnknown)
	wantError(t, td.do(t, "GET", "/session/"+id+"/events", "", "Last-Event-ID", "abc"), 400, codeBadRequest)
}

// TestServeGeneratesSessionIDs: "sessionId is generated by the daemon". A
// child that names a session otherwise gets no session.
func TestServeGeneratesSessionIDs(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	a, b := td.newSession(t, ""), td.newSession(t, "")
	if len(a) != 32 || len(b) != 32 || a == b {
		t.Errorf("session ids %q and %q, want two fresh 32-digit hex ids", a, b)
	}
	own := startTestDaemon(t, serveOptions{}, fakeChildEnv("ownid"))
	wantError(t, own.do(t, "POST", "/session", ""), http.StatusServiceUnavailable, codeChildUnavailable)
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
	// The child may end the turn before the relay publishes the resolution:
	// the contract orders neither before the other, so wait for both.
	turnEnd, resolved, end := untilTurnEnd(pid), false, sseEvent{}
	rest := readSSE(t, td.openEvents(t, id, last.id), func(ev sseEvent) bool {
		resolved = resolved || ev.typ == eventPermissionResolved
		if turnEnd(ev) {
			end = ev
		}
		return resolved && end.typ != ""
	})
	if !resolved || end.typ != eventTurnComplete {
		t.Errorf("events after cancel = %v, want permission_resolved and turn_complete, in either order", rest)
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

// A prompt's params are the bytes the wire's encoder writes for the map
// serve sent before, blocks compacted as json.RawMessage is.
func TestAppendPromptParams(t *testing.T) {
	for _, job := range []*promptJob{
		{id: "p1", blocks: []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}},
		{id: `p"<&>` + "\u2028\xff", blocks: []json.RawMessage{json.RawMessage("{ \"type\" : \"text\",\n \"text\" : \"a<b>&\\u2028\u2029\" }"), json.RawMessage(`{"type":"image","data":"AAAA","mimeType":"image/png"}`)}},
		{id: "p3", blocks: []json.RawMessage{}},
		{id: "p4"},
	} {
		want, err := appendEncoded(nil, map[string]any{
			"sessionId": "s\u2028<1>",
			"prompt":    job.blocks,
			"_meta":     map[string]any{metaInvocation: invocation{Version: invocationVersion, SessionID: "s\u2028<1>", PromptID: job.id}},
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendPromptParams(nil, "s\u2028<1>", job)
		if err != nil || string(got) != string(want) {
			t.Errorf("params of %q = %s, %v; want %s", job.id, got, err, want)
		}
	}
	if _, err := appendPromptParams(nil, "s1", &promptJob{id: "p1", blocks: []json.RawMessage{json.RawMessage(`{"type":`)}}); err == nil {
		t.Error("a block that is not JSON made params")
	}
}
