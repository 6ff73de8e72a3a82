// serve_session_create_test.go tests POST /session as Qwen Code answers it:
// the single and thread scopes, a host's session id, X-Qwen-Client-Id, the
// approval mode on create and on attach, and the keys of the answer.
package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// createSession POSTs body to /session and decodes the answer.
func createSession(t *testing.T, td *testDaemon, body string, header ...string) (newSessionResponse, map[string]json.RawMessage) {
	t.Helper()
	r := td.do(t, "POST", "/session", body, header...)
	var res newSessionResponse
	var keys map[string]json.RawMessage
	if r.status != http.StatusOK || decodeStrict(r.body, &res) != nil || json.Unmarshal(r.body, &keys) != nil {
		t.Fatalf("POST /session %s = %d %s", body, r.status, r.body)
	}
	return res, keys
}

var clientIDMinted = regexp.MustCompile(`^client_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestServeSessionScopeSingleAttaches(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}}, fakeChildEnv(""))
	before := time.Now().Add(-time.Second)
	first, keys := createSession(t, td, "")
	if first.Attached || first.WorkspaceCwd != ws || !clientIDMinted.MatchString(first.ClientID) {
		t.Errorf("first POST /session = %+v", first)
	}
	if _, ok := keys["hasActivePrompt"]; ok {
		t.Errorf("a new session's answer has hasActivePrompt: %v", keys)
	}
	created, err := time.Parse(time.RFC3339Nano, first.CreatedAt)
	if err != nil || !strings.HasSuffix(first.CreatedAt, "Z") || len(first.CreatedAt) != len(createdAtLayout) ||
		created.Before(before) || created.After(time.Now()) {
		t.Errorf("createdAt = %q (%v), want ISO 8601 UTC with ms, now", first.CreatedAt, err)
	}

	again, keys := createSession(t, td, `{}`)
	if again.SessionID != first.SessionID || !again.Attached || again.ClientID == first.ClientID ||
		!clientIDMinted.MatchString(again.ClientID) || again.CreatedAt != first.CreatedAt {
		t.Errorf("second POST /session = %+v, want an attach to %+v", again, first)
	}
	if string(keys["hasActivePrompt"]) != "false" || string(keys["hasRunningBackgroundTasks"]) != "false" {
		t.Errorf("attach answer = %v, want hasActivePrompt and hasRunningBackgroundTasks false", keys)
	}
	if single, _ := createSession(t, td, `{"sessionScope":"single"}`); single.SessionID != first.SessionID || !single.Attached {
		t.Errorf("sessionScope single = %+v, want an attach", single)
	}
	thread, _ := createSession(t, td, `{"sessionScope":"thread"}`)
	if thread.SessionID == first.SessionID || thread.Attached {
		t.Errorf("sessionScope thread = %+v, want a new session", thread)
	}
	// A thread session never becomes the default.
	if single, _ := createSession(t, td, ""); single.SessionID != first.SessionID {
		t.Errorf("POST after a thread = %s, want the default %s", single.SessionID, first.SessionID)
	}

	// An attach while a prompt runs says so.
	stream := td.openEvents(t, first.SessionID, "")
	pid := td.prompt(t, first.SessionID, "wait")
	readSSE(t, stream, func(ev sseEvent) bool { return strings.Contains(string(ev.data), "waiting") })
	if _, keys := createSession(t, td, ""); string(keys["hasActivePrompt"]) != "true" {
		t.Errorf("attach during a prompt = %v, want hasActivePrompt true", keys)
	}
	td.do(t, "POST", "/session/"+first.SessionID+"/cancel", "")
	readSSE(t, stream, untilTurnEnd(pid))
}

func TestServeDefaultSessionRecreatedAfterDelete(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	first, _ := createSession(t, td, "")
	if r := td.do(t, "DELETE", "/session/"+first.SessionID, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	next, _ := createSession(t, td, "")
	if next.SessionID == first.SessionID || next.Attached {
		t.Errorf("POST after DELETE of the default = %+v, want a new session", next)
	}
	if again, _ := createSession(t, td, ""); again.SessionID != next.SessionID || !again.Attached {
		t.Errorf("POST after that = %+v, want an attach to %s", again, next.SessionID)
	}
	if _, evs := td.runTurn(t, next.SessionID, "report pid"); len(evs) != 2 {
		t.Errorf("turn on the new default = %v", evs)
	}
}

func TestServeSessionIDFromHost(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	def, _ := createSession(t, td, "")
	const id = "2d5256b6-1c2e-4f4a-9b1d-0a9c3e7f5b21"
	named, _ := createSession(t, td, `{"sessionId":"`+id+`"}`)
	if named.SessionID != id || named.Attached {
		t.Errorf("POST with sessionId = %+v, want a new session %s", named, id)
	}
	if _, evs := td.runTurn(t, id, "report invocation"); len(evs) != 2 || !strings.Contains(texts(t, evs)[0], id) {
		t.Errorf("turn on the host's id = %v", evs)
	}
	r := td.do(t, "POST", "/session", `{"sessionId":"`+id+`"}`)
	wantError(t, r, http.StatusBadRequest, codeInvalidSessionID)
	if !strings.Contains(string(r.body), id) {
		t.Errorf("reuse of a session id = %s, want the id named", r.body)
	}
	// The host's id did not take the default's place.
	if again, _ := createSession(t, td, ""); again.SessionID != def.SessionID {
		t.Errorf("POST after a named session = %s, want the default %s", again.SessionID, def.SessionID)
	}
}

func TestServeSessionCreateRefusals(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	for _, tt := range []struct {
		name, body string
		header     []string
		code, want string
	}{
		{"bad scope", `{"sessionScope":"shared"}`, nil, codeInvalidSessionScope,
			`{"error":"` + "`sessionScope`" + ` must be \"single\" or \"thread\" when provided","code":"invalid_session_scope"}`},
		{"bad approval mode", `{"approvalMode":"always"}`, nil, codeInvalidApprovalMode, `"allowed":["plan","default","auto-edit","auto","yolo"]`},
		{"session id not a UUID", `{"sessionId":"../etc"}`, nil, codeInvalidSessionID, `\"../etc\"`},
		{"session id UUID v7", `{"sessionId":"01890a5d-ac96-774b-bcce-b302099a8057"}`, nil, codeInvalidSessionID, "UUID"},
		{"client id with a space", "", []string{headerClientID, "my client"}, codeInvalidClientID, `\"my client\"`},
		{"client id too long", "", []string{headerClientID, strings.Repeat("a", 129)}, codeInvalidClientID, "128"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := td.do(t, "POST", "/session", tt.body, tt.header...)
			wantError(t, r, http.StatusBadRequest, tt.code)
			if !strings.Contains(string(r.body), tt.want) {
				t.Errorf("body = %s, want %s", r.body, tt.want)
			}
		})
	}
	// No refusal created a session.
	if r := td.do(t, "GET", "/daemon/status", ""); !strings.Contains(string(r.body), `"sessions":{"active":0}`) {
		t.Errorf("status after refusals = %s", r.body)
	}
	const named = "host-7:tab.2_a"
	first, _ := createSession(t, td, "", headerClientID, named)
	again, _ := createSession(t, td, "", headerClientID, named)
	if first.ClientID != named || again.ClientID != named || !again.Attached {
		t.Errorf("X-Qwen-Client-Id %q: %+v then %+v", named, first, again)
	}
}

// TestServeSessionApprovalMode runs the real child in yolo by settings: a
// session created in plan refuses a write, an attach asking for yolo
// switches the live session back, and a session in auto asks.
func TestServeSessionApprovalMode(t *testing.T) {
	ws := t.TempDir()
	settings := filepath.Join(t.TempDir(), "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"}}`)
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: settings})
	plan, _ := createSession(t, td, `{"approvalMode":"plan"}`)
	td.runTurn(t, plan.SessionID, writeCall("plan.txt"))
	if fileExists(filepath.Join(ws, "plan.txt")) {
		t.Error("a session created in plan wrote a file")
	}
	yolo, _ := createSession(t, td, `{"approvalMode":"yolo"}`)
	if yolo.SessionID != plan.SessionID || !yolo.Attached {
		t.Fatalf("attach = %+v, want %s", yolo, plan.SessionID)
	}
	td.runTurn(t, plan.SessionID, writeCall("yolo.txt"))
	if b, err := os.ReadFile(filepath.Join(ws, "yolo.txt")); err != nil || string(b) != "x" {
		t.Errorf("after an attach in yolo the write gave %q, %v", b, err)
	}

	// The child has no classifier: "auto" asks, as default does.
	auto, _ := createSession(t, td, `{"sessionScope":"thread","approvalMode":"auto"}`)
	stream := td.openEvents(t, auto.SessionID, "")
	pid := td.prompt(t, auto.SessionID, writeCall("auto.txt"))
	evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
	var req permissionRequestEvent
	if err := json.Unmarshal(parseEnvelope(t, evs[len(evs)-1]).Data, &req); err != nil || req.RequestID == "" {
		t.Fatalf("permission_request = %s (%v)", evs[len(evs)-1].data, err)
	}
	if r := td.do(t, "POST", "/session/"+auto.SessionID+"/permission/"+req.RequestID, `{"outcome":{"outcome":"cancelled"}}`); r.status != http.StatusOK {
		t.Fatalf("vote = %d %s", r.status, r.body)
	}
	readSSE(t, stream, untilTurnEnd(pid))
	if fileExists(filepath.Join(ws, "auto.txt")) {
		t.Error("a write rejected in auto ran")
	}
}

// An attach says hasRunningBackgroundTasks true while a background shell
// process of the session runs, and false once it ended by itself.
func TestServeAttachSeesBackgroundTasks(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "decisions.jsonl"))
	sp := startServe(t, args, tokenEnv)
	if err := syscall.Mkfifo(filepath.Join(ws, "bg-go"), 0o600); err != nil {
		t.Fatal(err)
	}
	attach := func() bool {
		t.Helper()
		res, _ := createSession(t, &sp.testDaemon, "")
		if res.HasRunningBackgroundTasks == nil {
			t.Fatalf("attach without hasRunningBackgroundTasks: %+v", res)
		}
		return *res.HasRunningBackgroundTasks
	}
	created, _ := createSession(t, &sp.testDaemon, "")
	if attach() {
		t.Error("hasRunningBackgroundTasks true before any background process")
	}
	_, evs := sp.runTurn(t, created.SessionID, shellCall("read x < bg-go", true))
	if ups := toolUpdates(t, evs); len(ups) == 0 || ups[len(ups)-1].Status != "completed" {
		t.Fatalf("background call updates = %+v", ups)
	}
	if !attach() {
		t.Error("hasRunningBackgroundTasks false while the background process waits")
	}
	f, err := os.OpenFile(filepath.Join(ws, "bg-go"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
	deadline := time.Now().Add(testTimeout(30 * time.Second))
	for attach() {
		if time.Now().After(deadline) {
			t.Fatal("hasRunningBackgroundTasks still true after the background process ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
