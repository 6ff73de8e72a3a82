// acp_history_test.go checks session/load: saving after each prompt, the
// state directory's rules, replay in a new process, and reading a saved
// file back strictly.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stopACP closes the agent's stdin and waits for it to end, as an editor
// that quits does.
func stopACP(t *testing.T, c *acpClient) {
	t.Helper()
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(testTimeout(10 * time.Second)):
		t.Fatal("acp agent did not exit after stdin closed")
	}
}

func loadSessionCaps(t *testing.T, c *acpClient) bool {
	t.Helper()
	var res struct {
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &res)
	return res.AgentCapabilities.LoadSession
}

func TestACPSessionLoadReplaysWithoutRerun(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sessions")
	cwd := t.TempDir()
	marker := filepath.Join(cwd, "marker")
	script := "call run_shell_command {\"command\":\"echo ran >> marker\"}\ncall run_shell_command {\"command\":\"echo ran >> marker; echo second\"}"

	first := startACP(t, nil, []string{"--state-dir", state})
	if !loadSessionCaps(t, first) {
		t.Fatal("initialize: loadSession is not true with a state directory")
	}
	sid := first.newYoloSession(cwd)
	if stop := first.prompt(sid, script, ""); stop != stopEndTurn {
		t.Fatalf("stopReason = %q", stop)
	}
	before := first.sessionUpdates(sid)
	stopACP(t, first)
	if got := countLines(t, marker); got != 2 {
		t.Fatalf("marker has %d lines after the prompt, want 2", got)
	}
	fi, err := os.Stat(state)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, mode %v, want 0700", err, fi.Mode().Perm())
	}
	if fi, err := os.Stat(filepath.Join(state, sid+".json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("session file: %v, want mode 0600", err)
	}

	second := startACP(t, nil, []string{"--state-dir", state})
	if !loadSessionCaps(t, second) {
		t.Fatal("initialize: loadSession is not true")
	}
	var res struct {
		Modes struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	second.mustCall(methodSessionLoad, map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, &res)
	// Every replayed update came before the answer.
	replayed := second.sessionUpdates(sid)
	if res.Modes.CurrentModeID == "" {
		t.Errorf("session/load result has no modes")
	}
	var kinds []string
	calls := map[string]string{}
	for _, u := range replayed {
		kinds = append(kinds, u.SessionUpdate)
		if u.SessionUpdate == "tool_call_update" {
			calls[u.ToolCallID] = u.Status
		}
	}
	want := "user_message_chunk tool_call tool_call_update tool_call tool_call_update agent_message_chunk"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("replayed updates = %s\nwant %s", got, want)
	}
	if len(replayed) > 0 && replayed[0].Text != script {
		t.Errorf("replayed prompt = %q, want %q", replayed[0].Text, script)
	}
	if len(calls) != 2 {
		t.Errorf("replayed calls = %v, want two", calls)
	}
	for id, st := range calls {
		if st != "completed" {
			t.Errorf("replayed call %s status %q, want completed", id, st)
		}
	}
	// The replayed calls are the ones the client saw: same ids and output.
	for _, u := range replayed {
		if u.SessionUpdate != "tool_call_update" {
			continue
		}
		found := false
		for _, b := range before {
			found = found || (b.SessionUpdate == u.SessionUpdate && b.ToolCallID == u.ToolCallID && b.Status == u.Status && b.Text == u.Text)
		}
		if !found {
			t.Errorf("replayed update %+v was not sent by the first agent", u)
		}
	}
	if got := agentText(replayed); got != agentText(before) {
		t.Errorf("replayed agent text = %q, want %q", got, agentText(before))
	}
	// The loaded session goes on, and no call ran again.
	if stop := second.prompt(sid, "and now?", ""); stop != stopEndTurn {
		t.Errorf("prompt after load: stopReason = %q", stop)
	}
	if got := countLines(t, marker); got != 2 {
		t.Errorf("marker has %d lines after load and a prompt, want 2: a call ran again", got)
	}
	stopACP(t, second)

	// A third process replays the prompt the loaded session answered too.
	third := startACP(t, nil, []string{"--state-dir", state})
	loadSessionCaps(t, third)
	third.mustCall(methodSessionLoad, map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, nil)
	if got := agentText(third.sessionUpdates(sid)); !strings.HasSuffix(got, "and now?") {
		t.Errorf("third replay agent text = %q, want it to end with the loaded session's answer", got)
	}
	if got := countLines(t, marker); got != 2 {
		t.Errorf("marker has %d lines, want 2", got)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestACPSessionLoadErrors(t *testing.T) {
	state := t.TempDir()
	cwd, other := t.TempDir(), t.TempDir()
	c := startACP(t, nil, []string{"--state-dir", state})
	loadSessionCaps(t, c)
	sid := c.newSession(cwd)
	c.prompt(sid, "remember me", "")

	load := func(id, dir string) acpResponse {
		return c.call(methodSessionLoad, map[string]any{"sessionId": id, "cwd": dir, "mcpServers": []any{}})
	}
	if r := load("nosuch-session", cwd); r.Error == nil || r.Error.Code != rpcNotFound || !strings.Contains(r.Error.Message, `"nosuch-session"`) {
		t.Errorf("unknown id: %+v", r)
	}
	if r := load(sid, cwd); r.Error == nil || !strings.Contains(r.Error.Message, "already open") {
		t.Errorf("open session: %+v", r)
	}
	if r := load("../etc", cwd); r.Error == nil || r.Error.Code != rpcInvalidParams || !strings.Contains(r.Error.Message, `"../etc"`) {
		t.Errorf("bad id: %+v", r)
	}
	stopACP(t, c)

	d := startACP(t, nil, []string{"--state-dir", state})
	loadSessionCaps(t, d)
	r := d.call(methodSessionLoad, map[string]any{"sessionId": sid, "cwd": other, "mcpServers": []any{}})
	if r.Error == nil || !strings.Contains(r.Error.Message, fmt.Sprintf("%q is not the session's cwd %q", other, cwd)) {
		t.Errorf("other cwd: %+v", r)
	}
	// A file that is not a saved session is refused, never replayed.
	if err := os.WriteFile(filepath.Join(state, "bad.json"), []byte(`{"version":1,"sessionId":"bad","cwd":"/","messages":[],"extra":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := d.call(methodSessionLoad, map[string]any{"sessionId": "bad", "cwd": "/", "mcpServers": []any{}}); r.Error == nil || !strings.Contains(r.Error.Message, `"extra"`) {
		t.Errorf("bad file: %+v", r)
	}
	if n := len(d.sessionUpdates("bad")); n != 0 {
		t.Errorf("a refused file replayed %d updates", n)
	}
}

func TestACPStateDirRules(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runAcpguard(t, []string{"acp", "--state-dir", open})
	if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("state directory %q: mode 0777 lets other users write it", open)) {
		t.Errorf("group/world writable dir: exit %d, stderr %q", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "file")
	mustWrite(t, file, "x")
	if code, _, stderr := runAcpguard(t, []string{"acp", "--state-dir", file}); code != exitUsage || !strings.Contains(stderr, "--state-dir") {
		t.Errorf("a file as state dir: exit %d, stderr %q", code, stderr)
	}
	// off: nothing saved, session/load not offered.
	c := startACP(t, nil, []string{"--state-dir", "off"})
	if loadSessionCaps(t, c) {
		t.Error("--state-dir off: loadSession is true")
	}
	if r := c.call(methodSessionLoad, map[string]any{"sessionId": "x", "cwd": "/", "mcpServers": []any{}}); r.Error == nil || r.Error.Code != rpcMethodNotFound {
		t.Errorf("session/load with --state-dir off: %+v", r)
	}
}

func TestHistoryBoundsAndPrune(t *testing.T) {
	big := strings.Repeat("x", historyMaxBytes/3)
	f := &historyFile{SessionID: "s", Cwd: "/"}
	for i := range 5 {
		f.Messages = append(f.Messages,
			historyMessage{Role: roleUser, Text: fmt.Sprint(i, big)},
			historyMessage{Role: roleAssistant, Text: "ok"})
	}
	data, kept, _, err := encodeHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > historyMaxBytes {
		t.Errorf("file is %d bytes, more than %d", len(data), historyMaxBytes)
	}
	if len(kept) != 4 || kept[0].Role != roleUser || !strings.HasPrefix(kept[0].Text, "3") {
		t.Errorf("kept %d messages starting %q, want the last two exchanges", len(kept), kept[0].Text[:1])
	}
	if _, err := decodeHistory(data); err != nil {
		t.Errorf("bounded file does not read back: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "s")
	h, err := openHistoryStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for i := range historyMaxSessions + 2 {
		p := h.path(fmt.Sprintf("old-%03d", i))
		mustWrite(t, p, "{}")
		os.Chtimes(p, old, old.Add(time.Duration(i)*time.Second))
	}
	if _, _, err := h.save(&historyFile{SessionID: "new", Cwd: "/"}); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(names) != historyMaxSessions {
		t.Errorf("%d sessions after prune, want %d", len(names), historyMaxSessions)
	}
	for _, gone := range []string{"old-000", "old-001", "old-002"} {
		if fileExists(h.path(gone)) {
			t.Errorf("oldest session %s not pruned", gone)
		}
	}
	if !fileExists(h.path("new")) || !fileExists(h.path("old-003")) {
		t.Error("a recent session was pruned")
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	msgs := []message{
		{Role: roleUser, Text: "do it", Images: []promptImage{{MimeType: "image/png", Data: "aGk="}}},
		{Role: roleAssistant, Calls: []toolCall{{ID: "c1", Name: "read_file", Args: json.RawMessage(`{"path":"a"}`)}, {ID: "c2", Name: "x", Args: json.RawMessage(`not json`)}}},
		{Role: roleTool, CallID: "c1", Tool: "read_file", Result: toolResult{Status: statusCompleted, Output: "text", RawOutput: map[string]any{"secret": "not kept"}}},
		{Role: roleTool, CallID: "c2", Tool: "x", Result: toolResult{Status: statusFailed, Output: "no", ErrorType: "unknown_tool"}},
		{Role: roleAssistant, Text: "done"},
	}
	shown := map[string][]json.RawMessage{"c1": {json.RawMessage(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"read"}`)}}
	data, _, _, err := encodeHistory(&historyFile{SessionID: "s", Cwd: "/w", Messages: historyOf(msgs, shown)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "not kept") {
		t.Errorf("rawOutput reached the file: %s", data)
	}
	f, err := decodeHistory(data)
	if err != nil {
		t.Fatal(err)
	}
	back := messagesOf(f.Messages)
	if len(back) != len(msgs) || back[0].Images[0] != msgs[0].Images[0] || back[1].Calls[0].Name != "read_file" ||
		string(back[1].Calls[1].Args) != `"not json"` || back[3].Result.ErrorType != "unknown_tool" || back[4].Text != "done" {
		t.Errorf("round trip = %+v", back)
	}
}

func FuzzDecodeHistory(f *testing.F) {
	f.Add([]byte(`{"version":1,"sessionId":"s","cwd":"/w","messages":[{"role":"user","text":"hi"},{"role":"assistant","calls":[{"id":"c","name":"n","args":{}}]},{"role":"tool","callId":"c","status":"completed","shown":[{"sessionUpdate":"tool_call","toolCallId":"c","title":"t"}]}]}`))
	f.Add([]byte(`{"version":1,"sessionId":"..","cwd":"/","messages":[]}`))
	f.Add([]byte(`{"version":1,"sessionId":"s","cwd":"/","messages":[{"role":"tool","callId":"c","status":"failed","shown":[{"sessionUpdate":"plan","toolCallId":"c"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := decodeHistory(data)
		if err != nil {
			return
		}
		again, _, _, err := encodeHistory(h)
		if err != nil {
			t.Fatalf("a decoded file does not encode: %v", err)
		}
		if len(data) <= historyMaxBytes {
			if _, err := decodeHistory(again); err != nil {
				t.Fatalf("a decoded file does not read back: %v\n%s", err, again)
			}
		}
		for _, m := range h.Messages {
			for _, raw := range m.Shown {
				if _, err := shownUpdate(raw, m.CallID); err != nil {
					t.Fatalf("a checked file holds a bad update: %v", err)
				}
			}
		}
	})
}

func TestACPSessionLoadModelGoesOn(t *testing.T) {
	state, cwd := t.TempDir(), t.TempDir()
	first := startACP(t, nil, []string{"--state-dir", state})
	loadSessionCaps(t, first)
	sid := first.newYoloSession(cwd)
	first.prompt(sid, "call run_shell_command {\"command\":\"echo ran >> marker; echo first-output\"}", "")
	stopACP(t, first)

	bodies := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"I remember"}}]}`)
	}))
	defer srv.Close()
	second := startACP(t, nil, []string{"--state-dir", state}, envModelBaseURL+"="+srv.URL+"/v1", envModelName+"=test-model")
	loadSessionCaps(t, second)
	second.mustCall(methodSessionLoad, map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, nil)
	if stop := second.prompt(sid, "what did you run?", ""); stop != stopEndTurn {
		t.Fatalf("stopReason = %q", stop)
	}
	body := <-bodies
	for _, want := range []string{`echo ran \u003e\u003e marker`, "first-output", `"role":"tool"`, "what did you run?"} {
		if !strings.Contains(body, want) && !strings.Contains(body, strings.ReplaceAll(want, `\u003e`, ">")) {
			t.Errorf("the model's request after load lacks %s:\n%s", want, body)
		}
	}
	if got := countLines(t, filepath.Join(cwd, "marker")); got != 1 {
		t.Errorf("marker has %d lines, want 1", got)
	}
}

// TestHistoryEncodedOnce: a save that reuses the earlier save's encodings
// writes the bytes a save of every message writes, json.Marshal's of the
// file, and encodes nothing it was handed again.
func TestHistoryEncodedOnce(t *testing.T) {
	f := &historyFile{SessionID: "s", Cwd: "/w", Messages: []historyMessage{
		{Role: roleUser, Text: "a<b>&\u2028"},
		{Role: roleAssistant, Calls: []historyCall{{ID: "c", Name: "ls", Args: json.RawMessage(`{ "path" : "." }`)}}},
		{Role: roleTool, CallID: "c", Tool: "ls", Status: statusCompleted, Output: "x", Shown: []json.RawMessage{json.RawMessage(`{"a" : 1}`)}},
	}}
	first, kept, encoded, err := encodeHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(&historyFile{Version: historyVersion, SessionID: f.SessionID, Cwd: f.Cwd, Messages: f.Messages})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, want) {
		t.Fatalf("file\n got %s\nwant %s", first, want)
	}
	more := append(kept, historyMessage{Role: roleAssistant, Text: "done"})
	// An encoding handed in is used as it is: a marker shows it was.
	marked := append([][]byte{[]byte(`{"role":"user","text":"marker"}`)}, encoded[1:]...)
	again, _, encodedAgain, err := encodeHistory(&historyFile{SessionID: "s", Cwd: "/w", Messages: more, encoded: marked})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(again, []byte("marker")) || len(encodedAgain) != 4 || string(encodedAgain[3]) != `{"role":"assistant","text":"done"}` {
		t.Errorf("second save %s with %d encodings, want the handed encodings reused and the new one added", again, len(encodedAgain))
	}
}
