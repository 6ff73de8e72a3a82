// bridge_child_test.go drives serveDaemon in process against a scripted fake
// ACP child (this test binary, re-executed) and a counting policy provider on
// a loopback socket: sessions, prompts, events, permissions, the prepare
// bridge's identity checks, the decision log, child death and shutdown.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// envFakeChild turns "acpguard acp" started by an in-process daemon into
// the fake child below. Its value says how it answers initialize: "ack"
// acknowledges required-v1, "badack" something else, anything else nothing;
// "ownid" also names its sessions itself instead of as serve asked.
const envFakeChild = "ACPGUARD_TEST_FAKE_CHILD"

func init() {
	if mode, ok := os.LookupEnv(envFakeChild); ok && len(os.Args) > 1 && os.Args[1] == "acp" {
		os.Exit(runFakeChild(mode))
	}
}

// runFakeChild is a minimal ACP agent whose prompt text is a script, one
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
//	                                report "model ok BYTES" or the error
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
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				mu.Lock()
				cancels[p.SessionID] = cancel
				mu.Unlock()
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
						_, err := conn.call(ctx, methodModelComplete, map[string]any{
							"sessionId": sid, "promptId": pid, "streamId": p.SessionID, "request": json.RawMessage(req)})
						if err != nil {
							say(p.SessionID, "model error: "+err.Error())
							continue
						}
						mu.Lock()
						n := replies[p.SessionID]
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

// testProvider is a policy provider on a loopback socket that counts every
// connection and prepare, and decides with decide.
type testProvider struct {
	srv   *httptest.Server
	token string
	mu    sync.Mutex
	conns int
	calls []map[string]json.RawMessage
	// verdict decides a prepare; a status other than 200 answers that
	// status with an empty body.
	verdict func(tool string, args json.RawMessage) (status int, allowed bool, reason string)
	gate    chan struct{} // when set, prepare waits for it before answering
	inCall  chan struct{} // when set, prepare signals it on arrival
}

func newTestProvider(t testing.TB) *testProvider {
	p := &testProvider{token: "guard-token-for-tests", verdict: func(string, json.RawMessage) (int, bool, string) { return 200, true, "" }}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serveHTTP))
	p.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
		}
	}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

func (p *testProvider) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/handshake":
		fmt.Fprintf(w, `{"protocolVersion":1,"nonce":%s,"capabilities":{"prepare":true}}`, req["nonce"])
	case "/v1/prepare":
		p.mu.Lock()
		p.calls = append(p.calls, req)
		gate, inCall := p.gate, p.inCall
		p.mu.Unlock()
		if inCall != nil {
			inCall <- struct{}{}
		}
		if gate != nil {
			<-gate
		}
		var tool string
		json.Unmarshal(req["toolName"], &tool)
		status, allowed, reason := p.verdict(tool, req["arguments"])
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		res := map[string]any{"protocolVersion": 1, "requestId": req["requestId"], "allowed": allowed}
		if reason != "" {
			res["reason"] = reason
		}
		json.NewEncoder(w).Encode(res)
	default:
		http.NotFound(w, r)
	}
}

func (p *testProvider) counts() (conns, prepares int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns, len(p.calls)
}

func (p *testProvider) guard(t testing.TB) guardConfig {
	u, err := url.Parse(p.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: 3 * time.Second, Token: p.token}
}

// newSession creates a session and returns its id.
func (td *testDaemon) newSession(t testing.TB, body string) string {
	t.Helper()
	r := td.do(t, "POST", "/session", body)
	var res newSessionResponse
	if r.status != 200 || decodeStrict(r.body, &res) != nil || res.SessionID == "" {
		t.Fatalf("POST /session %s = %d %s", body, r.status, r.body)
	}
	return res.SessionID
}

// prompt submits a one-block text prompt and returns its promptId.
func (td *testDaemon) prompt(t testing.TB, id, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
	r := td.do(t, "POST", "/session/"+id+"/prompt", string(body))
	var res promptAccepted
	if r.status != http.StatusAccepted || decodeStrict(r.body, &res) != nil || res.PromptID == "" {
		t.Fatalf("POST prompt = %d %s", r.status, r.body)
	}
	return res.PromptID
}

type envelope struct {
	ID       int64           `json:"id"`
	V        int             `json:"v"`
	Type     string          `json:"type"`
	PromptID string          `json:"promptId"`
	Data     json.RawMessage `json:"data"`
}

func parseEnvelope(t testing.TB, ev sseEvent) envelope {
	t.Helper()
	var e envelope
	if err := decodeStrict(ev.data, &e); err != nil {
		t.Fatalf("event data %s: %v", ev.data, err)
	}
	if e.V != 1 || e.Type != ev.typ || strconv.FormatInt(e.ID, 10) != ev.id {
		t.Fatalf("envelope %s does not match id %s / event %s", ev.data, ev.id, ev.typ)
	}
	return e
}

// texts returns the agent_message_chunk texts of session_update events.
func texts(t testing.TB, evs []sseEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.typ != eventSessionUpdate {
			continue
		}
		var d struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct{ Type, Text string }
			} `json:"update"`
		}
		if err := json.Unmarshal(parseEnvelope(t, ev).Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Update.Content.Text)
	}
	return out
}

// untilTurnEnd stops reading at the turn_complete or turn_error of promptID.
func untilTurnEnd(promptID string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		return (ev.typ == eventTurnComplete || ev.typ == eventTurnError) && strings.Contains(string(ev.data), `"promptId":"`+promptID+`"`)
	}
}

// runTurn prompts and returns the turn's events, up to its end.
func (td *testDaemon) runTurn(t testing.TB, id, text string) (string, []sseEvent) {
	t.Helper()
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, text)
	var evs []sseEvent
	for _, ev := range readSSE(t, stream, untilTurnEnd(pid)) {
		if parseEnvelope(t, ev).PromptID == pid {
			evs = append(evs, ev)
		}
	}
	return pid, evs
}

func fakeChildEnv(mode string) string { return envFakeChild + "=" + mode }

func TestServeSessionPromptEvents(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}}, fakeChildEnv(""))
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
	if evs[2].typ != eventTurnComplete || string(end.Data) != `{"promptId":"`+pid+`","stopReason":"end_turn"}` {
		t.Errorf("turn end = %s %s", evs[2].typ, evs[2].data)
	}

	// Last-Event-ID replays exactly what came after it.
	replay := readSSE(t, td.openEvents(t, id, evs[0].id), func(ev sseEvent) bool { return ev.id == evs[2].id })
	if len(replay) != 2 || replay[0].id != evs[1].id {
		t.Errorf("replay after %s = %v", evs[0].id, replay)
	}

	// A second session on the same workspace shares the child.
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

func TestServeSlowSubscriberDropped(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	slow := td.openEvents(t, id, "") // never read until the turn is over
	fast := td.openEvents(t, id, "")
	const n = 2000 // 16 MB: more than the subscriber queue and the socket buffers
	pid := td.prompt(t, id, fmt.Sprintf("flood %d 8192", n))
	if got := readSSE(t, fast, untilTurnEnd(pid)); len(got) != n+1 {
		t.Fatalf("reading subscriber got %d events, want %d", len(got), n+1)
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
	if len(dropped) == 0 || len(dropped) >= n+1 {
		t.Fatalf("slow subscriber got %d events before its stream ended, want some but not all", len(dropped))
	}
	// Reconnecting with Last-Event-ID loses nothing.
	rest := readSSE(t, td.openEvents(t, id, dropped[len(dropped)-1].id), untilTurnEnd(pid))
	if len(dropped)+len(rest) != n+1 {
		t.Errorf("dropped %d + replayed %d events, want %d", len(dropped), len(rest), n+1)
	}
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
	readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionUpdate })
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
			wantError(t, td.do(t, "POST", path, `{"outcome":{"outcome":"selected","optionId":"sudo"}}`), 400, codeBadRequest)
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

// decisions parses the decision log lines written so far.
func decisions(t *testing.T, log string) []decisionRecord {
	t.Helper()
	var out []decisionRecord
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !strings.HasPrefix(line, `{"time"`) {
			continue
		}
		var rec decisionRecord
		if err := decodeStrict([]byte(line), &rec); err != nil {
			t.Fatalf("decision log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

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
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), Workspaces: []string{wsA, wsB}}, fakeChildEnv("ack"))
	a := td.newSession(t, `{"cwd":"`+wsA+`"}`)
	a2 := td.newSession(t, `{"cwd":"`+wsA+`"}`)
	b := td.newSession(t, `{"cwd":"`+wsB+`"}`)
	// b has an active prompt, so its identity would pass if only ids counted.
	streamB := td.openEvents(t, b, "")
	pb := td.prompt(t, b, "wait")
	readSSE(t, streamB, func(ev sseEvent) bool { return ev.typ == eventSessionUpdate })

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
	var recs []decisionRecord
	for deadline := time.Now().Add(10 * time.Second); len(recs) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		recs = decisions(t, td.stderr.String())
	}
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
	readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionUpdate })
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

func TestServeRejectsUnacknowledgedChannel(t *testing.T) {
	for _, mode := range []string{"", "badack"} {
		t.Run("mode="+mode, func(t *testing.T) {
			prov := newTestProvider(t)
			td := startTestDaemon(t, serveOptions{Guard: prov.guard(t)}, fakeChildEnv(mode))
			wantError(t, td.do(t, "POST", "/session", ""), 503, codeGuardNotReady)
			if _, calls := prov.counts(); calls != 0 {
				t.Errorf("provider saw %d prepares", calls)
			}
		})
	}
}

func TestServeSlashCommands(t *testing.T) {
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), AllowSlashCommands: []string{"help"}}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	for _, text := range []string{"/fork", "  /memory add x", "/tmp", "/tools\n"} {
		body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
		wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", string(body)), 400, codeSlashRejected)
	}
	td.prompt(t, id, "/help")
	// Text that only starts with "/" is a prompt like any other.
	for _, text := range []string{"/tmp/notes.txt contains the plan; summarise it", "//127.0.0.1/x", "/ tmp", "/"} {
		td.prompt(t, id, text)
	}

	off := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	off.prompt(t, off.newSession(t, ""), "/fork")
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

func TestServeChildDeath(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	_, evs := td.runTurn(t, id, "report pid")
	pid1, _ := strconv.Atoi(texts(t, evs)[0])
	td.prompt(t, id, "die")
	evs = readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	if last := parseEnvelope(t, evs[len(evs)-1]); !strings.Contains(string(last.Data), id) {
		t.Errorf("session_died data = %s", last.Data)
	}
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"x"}]}`), 410, codeSessionDied)
	wantError(t, td.do(t, "POST", "/session/"+id+"/cancel", ""), 410, codeSessionDied)
	wantError(t, td.do(t, "GET", "/session/"+id+"/events", ""), 410, codeSessionDied)
	// DELETE says the session had died, and forgets it.
	wantError(t, td.do(t, "DELETE", "/session/"+id, ""), 410, codeSessionDied)
	wantError(t, td.do(t, "DELETE", "/session/"+id, ""), 404, codeSessionNotFound)
	if err := syscall.Kill(pid1, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("dead child %d still exists (kill 0: %v)", pid1, err)
	}
	id2 := td.newSession(t, "")
	_, evs = td.runTurn(t, id2, "report pid")
	if pid2, _ := strconv.Atoi(texts(t, evs)[0]); pid2 == pid1 || pid2 == 0 {
		t.Errorf("new session runs in child %d, old one was %d", pid2, pid1)
	}
}

func TestServeShutdownEndsChildren(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	td.prompt(t, id, "report pid\nwait")
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionUpdate })
	pid, _ := strconv.Atoi(texts(t, evs)[0])
	if err := td.stop(); err != nil {
		t.Fatalf("serveDaemon after cancel = %v, want nil", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d outlived the daemon (kill 0: %v)", pid, err)
	}
	if _, err := http.Get(td.url + "/health"); err == nil {
		t.Error("daemon still accepts connections after shutdown")
	}
}

func TestServeHandshakeFailure(t *testing.T) {
	prov := newTestProvider(t)
	g := prov.guard(t)
	g.Token = "wrong-token"
	sys := &system{env: newProcEnv(nil), stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	err := serveDaemon(context.Background(), sys, serveOptions{Hostname: "127.0.0.1", Workspaces: []string{t.TempDir()}, MaxPendingPrompts: 5, Guard: g}, func(string) {
		t.Error("listener opened after a failed handshake")
	})
	if err == nil || exitCode(err) != exitRuntime || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), g.Token) {
		t.Errorf("serveDaemon = %v, want a one-line runtime error without the token", err)
	}
}

// TestChildSchedulerSlots: the ACP runtime serve starts runs on one
// scheduler slot unless the operator set GOMAXPROCS (runACP says why).
func TestChildSchedulerSlots(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set for the whole test run")
	}
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"default", nil, "gomaxprocs=1"},
		{"operator's choice", []string{"GOMAXPROCS=3"}, "gomaxprocs=3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			td := startTestDaemon(t, serveOptions{Workspaces: []string{t.TempDir()}, LogLevel: slog.LevelDebug}, append(tt.env, quickRaceExit)...)
			td.newSession(t, "")
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(td.stderr.String(), `msg="acp runtime ready" managed=false `+tt.want+" ") {
				if time.Now().After(deadline) {
					t.Fatalf("no %q in the child's log:\n%s", tt.want, td.stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The child's start environment may hold the model key: its
			// tools, same user, must not read /proc/<child>/environ.
			if !strings.Contains(td.stderr.String(), `msg="start environment hidden from other processes" dumpable=0`) {
				t.Errorf("the child did not make itself not dumpable:\n%s", td.stderr.String())
			}
		})
	}
}

// TestServeDisabledSlashCommands: a command disabled on serve's command line
// is a 400 in every mode, before anything reaches a child.
func TestServeDisabledSlashCommands(t *testing.T) {
	td := startTestDaemon(t, serveOptions{DisabledSlashCommands: []string{"tools"}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"/tools"}]}`), http.StatusBadRequest, codeSlashRejected)
	if pid := td.prompt(t, id, "/help"); pid == "" {
		t.Error("an open slash command was refused in off mode")
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
	var recs []decisionRecord
	deadline := time.Now().Add(10 * time.Second)
	for len(recs) < turns && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		recs = decisions(t, td.stderr.String())
	}
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
