// serve_qwen_e2e_test.go owns the end-to-end test of serve as a drop-in for
// Qwen Code's host API (DESIGN.md §7): a real "acpguard serve" in required
// mode, driven with a Qwen host's request sequence, its answers and event
// sequences compared with Qwen Code 0.24.4's.
package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// qwenSequences are the event type sequences of Qwen Code 0.24.4's turns,
// with the frames it sends optionally or in no fixed order removed (usage
// chunks, available_commands_update, usage_update) and runs of
// agent_message_chunk counted as one.
var qwenSequences = map[string][]string{
	"allowed": {"user_message_chunk", "tool_call", "tool_call_update in_progress", "tool_call_update completed",
		"agent_message_chunk", "turn_complete"},
	"denied": {"user_message_chunk", "tool_call", "tool_call_update in_progress", "tool_call_update failed",
		"agent_message_chunk", "turn_complete"},
	"allow": {"user_message_chunk", "tool_call", "permission_request", "permission_resolved", "tool_call_update completed",
		"agent_message_chunk", "turn_complete"},
	"reject": {"user_message_chunk", "tool_call", "permission_request", "permission_resolved", "tool_call_update failed",
		"turn_complete"},
	"cancel": {"user_message_chunk", "tool_call", "permission_request", "prompt_cancelled", "permission_resolved",
		"tool_call_update failed", "turn_complete"},
}

// qwenFailedTexts are the texts of Qwen Code 0.24.4's failed
// tool_call_update in each turn that has one.
var qwenFailedTexts = map[string]string{
	"denied": "denied by the e2e policy", // the guard's reason verbatim
	"reject": `Tool "run_shell_command" was canceled by the user.`,
	"cancel": "Tool call was cancelled before execution.",
}

// qwenKnownDifferences are where acpguard's turns differ from Qwen Code's
// on purpose or for now (README.md lists them): the sequence and failed
// text acpguard sends instead, nil or "" where it sends Qwen's.
var qwenKnownDifferences = map[string]struct {
	sequence []string
	text     string
	why      string
}{
	"denied": {
		sequence: []string{"user_message_chunk", "tool_call", "tool_call_update failed", "agent_message_chunk", "turn_complete"},
		why:      "a call reaches in_progress only once the guard allowed it (DESIGN.md §1)",
	},
	"allow": {
		sequence: []string{"user_message_chunk", "tool_call", "permission_request", "permission_resolved",
			"tool_call_update in_progress", "tool_call_update completed", "agent_message_chunk", "turn_complete"},
		why: "an allowed call announces in_progress before it runs, as in yolo",
	},
}

// eventKind is an event's type, with a session_update's sessionUpdate and a
// tool_call_update's status; "" for a frame Qwen Code sends optionally.
func eventKind(t *testing.T, ev sseEvent) string {
	t.Helper()
	if ev.typ != eventSessionUpdate {
		return ev.typ
	}
	var d struct {
		Update struct {
			SessionUpdate string          `json:"sessionUpdate"`
			Status        string          `json:"status"`
			Content       json.RawMessage `json:"content"`
		} `json:"update"`
	}
	if err := json.Unmarshal(parseEnvelope(t, ev).Data, &d); err != nil {
		t.Fatal(err)
	}
	u := d.Update
	var text struct {
		Text string `json:"text"`
	}
	if u.SessionUpdate == "agent_message_chunk" {
		json.Unmarshal(u.Content, &text)
	}
	switch {
	case u.SessionUpdate == "available_commands_update", u.SessionUpdate == "usage_update",
		u.SessionUpdate == sessionUpdateShellOutput, // a running command's output, as it comes
		u.SessionUpdate == "agent_message_chunk" && text.Text == "":
		return ""
	case u.SessionUpdate == "tool_call_update":
		return u.SessionUpdate + " " + u.Status
	}
	return u.SessionUpdate
}

// kinds is the comparable sequence of a turn's events.
func kinds(t *testing.T, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		k := eventKind(t, ev)
		if k == "" || k == "agent_message_chunk" && len(out) > 0 && out[len(out)-1] == k {
			continue
		}
		out = append(out, k)
	}
	return out
}

// qwenEnvelope is an event's envelope with the originator Qwen Code names.
type qwenEnvelope struct {
	Type       string          `json:"type"`
	PromptID   string          `json:"promptId"`
	Data       json.RawMessage `json:"data"`
	Originator string          `json:"originatorClientId"`
}

func originator(t *testing.T, evs []sseEvent, typ string) (qwenEnvelope, bool) {
	t.Helper()
	for _, ev := range evs {
		if ev.typ == typ {
			var e qwenEnvelope
			if err := json.Unmarshal(ev.data, &e); err != nil {
				t.Fatal(err)
			}
			return e, true
		}
	}
	return qwenEnvelope{}, false
}

// bodyKeys is the set of keys of a JSON object reply.
func bodyKeys(t *testing.T, r hostResponse) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("reply %d %q is no JSON object: %v", r.status, r.body, err)
	}
	return slices.Sorted(maps.Keys(m))
}

// wantReply checks a reply's status and its body's exact key set: no keys
// is no body, and the one key "" is the empty object {}.
func wantReply(t *testing.T, what string, r hostResponse, status int, keys ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s = %d %s, want %d", what, r.status, r.body, status)
	}
	if keys == nil {
		if len(strings.TrimSpace(string(r.body))) != 0 {
			t.Errorf("%s body = %q, want none", what, r.body)
		}
		return
	}
	keys = slices.DeleteFunc(slices.Sorted(slices.Values(keys)), func(k string) bool { return k == "" })
	if got := bodyKeys(t, r); !slices.Equal(got, keys) {
		t.Errorf("%s keys = %v, want %v (body %s)", what, got, keys, r.body)
	}
}

func TestServeQwenHostSequence(t *testing.T) {
	prov := newTestProvider(t)
	prov.verdict = func(tool string, args json.RawMessage) (int, bool, string) {
		if strings.Contains(string(args), "deny-me") {
			return 200, false, "denied by the e2e policy"
		}
		return 200, true, ""
	}
	ws := t.TempDir()
	args, env := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, args, env)
	const hostA, hostB = "host-a", "host:b.2"
	asA := []string{headerClientID, hostA}
	asB := []string{headerClientID, hostB}

	// POST /session: new, then attach, with Qwen's exact key sets.
	r := sp.do(t, "POST", "/session", "", asA...)
	wantReply(t, "POST /session (new)", r, 200, "sessionId", "workspaceCwd", "attached", "clientId", "createdAt")
	var created newSessionResponse
	json.Unmarshal(r.body, &created)
	if created.Attached || created.ClientID != hostA {
		t.Errorf("new session = %s, want attached false and clientId %q", r.body, hostA)
	}
	r = sp.do(t, "POST", "/session", `{"modelServiceId":"m","sourceType":"cli","sourceId":"x","branch":"main","worktree":"w"}`)
	wantReply(t, "POST /session (attach)", r, 200, "sessionId", "workspaceCwd", "attached", "clientId", "createdAt",
		"hasActivePrompt", "hasRunningBackgroundTasks")
	var attached newSessionResponse
	json.Unmarshal(r.body, &attached)
	if !attached.Attached || attached.SessionID != created.SessionID || !strings.HasPrefix(attached.ClientID, "client_") {
		t.Errorf("attach = %s, want session %s attached with a client_ id", r.body, created.SessionID)
	}
	for _, body := range []string{`{"branch":1}`, `{"worktree":null,"modelServiceId":{}}`, `{"sourceKind":"cli"}`} {
		wantError(t, sp.do(t, "POST", "/session", body), 400, codeBadRequest)
	}
	yolo := created.SessionID
	stream := sp.openEvents(t, yolo, "")

	// The documents a host reads first: Qwen Code's keys, acpguard's own
	// beside them.
	wantHas := func(what string, r hostResponse, keys ...string) {
		t.Helper()
		got := bodyKeys(t, r)
		for _, k := range keys {
			if !slices.Contains(got, k) {
				t.Errorf("%s lacks Qwen Code's %q (keys %v)", what, k, got)
			}
		}
	}
	caps := sp.do(t, "GET", "/capabilities", "")
	wantHas("GET /capabilities", caps, "v", "protocolVersions", "qwenCodeVersion", "mode", "features", "modelServices",
		"workspaceCwd", "transports", "policy", "limits", "workspaces", "supportedLanguages")
	var c struct {
		Features   []string                     `json:"features"`
		Limits     map[string]json.RawMessage   `json:"limits"`
		Workspaces []map[string]json.RawMessage `json:"workspaces"`
	}
	json.Unmarshal(caps.body, &c)
	if !slices.Contains(c.Features, "permission_vote") || len(c.Workspaces) != 1 || c.Limits["maxSessionsPerWorkspace"] == nil {
		t.Errorf("GET /capabilities = %s, want permission_vote, one workspace, Qwen Code's limit names", caps.body)
	}
	for _, w := range c.Workspaces {
		if got := slices.Sorted(maps.Keys(w)); !slices.Equal(got, []string{"cwd", "id", "primary", "removable", "trusted", "workflowsEnabled"}) {
			t.Errorf("workspace keys = %v, want Qwen Code's", got)
		}
	}
	wantHas("GET /daemon/status", sp.do(t, "GET", "/daemon/status", ""), "v", "detail", "generatedAt", "status", "issues",
		"daemon", "security", "limits", "capabilities", "runtime")

	// turn runs one prompt as hostA and returns its events, after the echo.
	turn := func(t *testing.T, stream *bufio.Reader, id, text string, during func(evs []sseEvent) bool, act func(evs []sseEvent)) (string, []sseEvent) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
		r := sp.do(t, "POST", "/session/"+id+"/prompt", string(body), asA...)
		wantReply(t, "POST prompt", r, http.StatusAccepted, "promptId", "lastEventId", "eventEpoch")
		var acc promptAccepted
		json.Unmarshal(r.body, &acc)
		var evs []sseEvent
		if during != nil {
			evs = readSSE(t, stream, func(ev sseEvent) bool { return during([]sseEvent{ev}) })
			act(evs)
		}
		evs = append(evs, readSSE(t, stream, untilTurnEnd(acc.PromptID))...)
		var out []sseEvent
		for _, ev := range evs {
			if ev.typ != eventPermissionAlreadyResolved && parseEnvelope(t, ev).PromptID == acc.PromptID {
				out = append(out, ev)
			}
		}
		return acc.PromptID, out
	}
	check := func(t *testing.T, name string, evs []sseEvent) {
		t.Helper()
		want, text := qwenSequences[name], qwenFailedTexts[name]
		d := qwenKnownDifferences[name]
		if d.sequence != nil {
			want = d.sequence
		}
		if d.text != "" {
			text = d.text
		}
		if got := kinds(t, evs); !slices.Equal(got, want) {
			t.Errorf("%s: sequence\n got %q\nwant %q (known difference: %s)", name, got, want, cmpOr(d.why, "none"))
		}
		if got := failedText(t, evs); got != text {
			t.Errorf("%s: failed tool_call_update text %q, want %q (known difference: %s)", name, got, text, cmpOr(d.why, "none"))
		}
	}
	isRequest := func(evs []sseEvent) bool { return evs[0].typ == eventPermissionRequest }

	t.Run("allowed yolo", func(t *testing.T) {
		_, evs := turn(t, stream, yolo, shellCall("echo hello > peer-marker.txt", false), nil, nil)
		check(t, "allowed", evs)
		if !fileExists(filepath.Join(ws, "peer-marker.txt")) {
			t.Error("the allowed command did not run")
		}
		ups := turnUpdates(t, evs)
		for _, kind := range []string{"tool_call", "tool_call_update in_progress", "tool_call_update completed"} {
			wantQwenKeys(t, kind, ups[kind])
		}
	})
	t.Run("file tool yolo", func(t *testing.T) {
		_, evs := turn(t, stream, yolo, `call write_file {"file_path":"qwen-file.txt","content":"x\n"}`, nil, nil)
		check(t, "allowed", evs)
		ups := turnUpdates(t, evs)
		for _, kind := range []string{"tool_call", "tool_call_update in_progress", "tool_call_update completed"} {
			wantQwenKeys(t, kind, ups[kind])
		}
		path := filepath.Join(ws, "qwen-file.txt")
		var call struct {
			Locations []toolLocationJSON `json:"locations"`
			Meta      map[string]string  `json:"_meta"`
		}
		json.Unmarshal(ups["tool_call"], &call)
		if len(call.Locations) != 1 || call.Locations[0].Path != path || call.Meta["provenance"] != "builtin" || call.Meta["phase"] != "preparing" {
			t.Errorf("tool_call = %s, want the file's location, provenance builtin, phase preparing", ups["tool_call"])
		}
		var done struct {
			Content   json.RawMessage            `json:"content"`
			RawOutput map[string]json.RawMessage `json:"rawOutput"`
		}
		json.Unmarshal(ups["tool_call_update completed"], &done)
		for _, k := range qwenFileResultKeys {
			if _, ok := done.RawOutput[k]; !ok {
				t.Errorf("completed rawOutput lacks Qwen Code's %q: %s", k, ups["tool_call_update completed"])
			}
		}
		if d := diffsOf(t, done.Content); len(d) != 1 || *d[0].OldText != "" || d[0].NewText != "x\n" {
			t.Errorf("completed diff = %+v, want a new file's: oldText \"\"", d)
		}
	})
	t.Run("denied by the guard yolo", func(t *testing.T) {
		_, evs := turn(t, stream, yolo, shellCall("echo deny-me > denied.txt", false), nil, nil)
		check(t, "denied", evs)
		if fileExists(filepath.Join(ws, "denied.txt")) {
			t.Error("the denied command ran")
		}
		ups := toolUpdates(t, evs)
		if last := ups[len(ups)-1]; !strings.Contains(string(last.RawOutput), "denied by the e2e policy") {
			t.Errorf("denied update = %+v, want the guard's reason", last)
		}
	})

	r = sp.do(t, "POST", "/session", `{"sessionScope":"thread","approvalMode":"auto"}`, asA...)
	wantReply(t, "POST /session (thread)", r, 200, "sessionId", "workspaceCwd", "attached", "clientId", "createdAt")
	var asked newSessionResponse
	json.Unmarshal(r.body, &asked)
	perm := asked.SessionID
	permStream := sp.openEvents(t, perm, "")
	var requestID string
	requestOf := func(t *testing.T, evs []sseEvent) {
		var req permissionRequestEvent
		if err := json.Unmarshal(parseEnvelope(t, evs[len(evs)-1]).Data, &req); err != nil || req.RequestID == "" {
			t.Fatalf("permission_request = %s", evs[len(evs)-1].data)
		}
		requestID = req.RequestID
	}

	t.Run("permission round allow", func(t *testing.T) {
		_, evs := turn(t, permStream, perm, shellCall("echo allowed > voted.txt", false), isRequest, func(evs []sseEvent) {
			requestOf(t, evs)
			var req permissionRequestEvent
			json.Unmarshal(parseEnvelope(t, evs[len(evs)-1]).Data, &req)
			wantQwenKeys(t, "permission_request toolCall", req.ToolCall)
			// The session-less route, as another client.
			wantReply(t, "POST /permission/:requestId", sp.do(t, "POST", "/permission/"+requestID, `{"outcome":{"outcome":"selected","optionId":"proceed_once"}}`, asB...), 200, "")
		})
		check(t, "allow", evs)
		if e, _ := originator(t, evs, eventPermissionRequest); e.Originator != hostA {
			t.Errorf("permission_request originator = %q, want the prompt sender %q", e.Originator, hostA)
		}
		e, _ := originator(t, evs, eventPermissionResolved)
		var res permissionResolvedEvent
		json.Unmarshal(e.Data, &res)
		if e.Originator != hostB || res.VoterClientID != hostB || res.Outcome.OptionID != "proceed_once" {
			t.Errorf("permission_resolved = %s, originator %q, want voter %q", e.Data, e.Originator, hostB)
		}
		if !fileExists(filepath.Join(ws, "voted.txt")) {
			t.Error("the allowed command did not run")
		}
		// A late vote: Qwen's 404, and the stream is told.
		r := sp.do(t, "POST", "/session/"+perm+"/permission/"+requestID, `{"outcome":{"outcome":"cancelled"}}`, asA...)
		wantError(t, r, 404, codePermissionUnknown)
		late := readSSE(t, permStream, func(ev sseEvent) bool { return ev.typ == eventPermissionAlreadyResolved })
		if e, _ := originator(t, late, eventPermissionAlreadyResolved); e.Originator != hostA || !strings.Contains(string(e.Data), requestID) {
			t.Errorf("permission_already_resolved = %+v, want request %s from %q", e, requestID, hostA)
		}
		wantError(t, sp.do(t, "POST", "/permission/no-such-request", `{"outcome":{"outcome":"cancelled"}}`), 404, codePermissionUnknown)
	})
	t.Run("permission round reject", func(t *testing.T) {
		_, evs := turn(t, permStream, perm, shellCall("echo rejected > rejected.txt", false), isRequest, func(evs []sseEvent) {
			requestOf(t, evs)
			wantReply(t, "vote", sp.do(t, "POST", "/session/"+perm+"/permission/"+requestID, `{"outcome":{"outcome":"selected","optionId":"cancel"}}`), 200, "")
		})
		check(t, "reject", evs)
		if fileExists(filepath.Join(ws, "rejected.txt")) {
			t.Error("the rejected command ran")
		}
		if e, _ := originator(t, evs, eventPermissionResolved); e.Originator != "" || strings.Contains(string(e.Data), "voterClientId") {
			t.Errorf("permission_resolved of a vote with no client id = %+v, want no originator", e)
		}
	})
	t.Run("cancel during a permission round", func(t *testing.T) {
		_, evs := turn(t, permStream, perm, shellCall("echo cancelled > cancelled.txt", false), isRequest, func(evs []sseEvent) {
			requestOf(t, evs)
			wantReply(t, "POST cancel", sp.do(t, "POST", "/session/"+perm+"/cancel", "", asB...), http.StatusNoContent)
		})
		check(t, "cancel", evs)
		if e, _ := originator(t, evs, eventPromptCancelled); e.Originator != hostA {
			t.Errorf("prompt_cancelled originator = %q, want the prompt sender %q", e.Originator, hostA)
		}
		if e, _ := originator(t, evs, eventPermissionResolved); e.Originator != "" || !strings.Contains(string(e.Data), `"outcome":{"outcome":"cancelled"}`) {
			t.Errorf("permission_resolved of a cancel = %+v, want cancelled with no voter", e)
		}
		e, _ := originator(t, evs, eventTurnComplete)
		if !strings.Contains(string(e.Data), `"stopReason":"cancelled"`) {
			t.Errorf("turn_complete = %s, want stopReason cancelled", e.Data)
		}
		if fileExists(filepath.Join(ws, "cancelled.txt")) {
			t.Error("the cancelled command ran")
		}
	})

	t.Run("client ids", func(t *testing.T) {
		for _, path := range []string{"/session/" + perm + "/prompt", "/session/" + perm + "/cancel", "/permission/x", "/session/" + perm + "/permission/x"} {
			wantError(t, sp.do(t, "POST", path, `{}`, headerClientID, "bad id"), 400, codeInvalidClientID)
		}
		wantError(t, sp.do(t, "DELETE", "/session/"+perm, "", headerClientID, strings.Repeat("x", 129)), 400, codeInvalidClientID)
		// A client id a prompt named is the session's: an attach naming it keeps it.
		r := sp.do(t, "POST", "/session", "", asB...)
		var res newSessionResponse
		json.Unmarshal(r.body, &res)
		if res.ClientID != hostB {
			t.Errorf("attach as %q = %s", hostB, r.body)
		}
	})

	t.Run("delete", func(t *testing.T) {
		wantReply(t, "DELETE", sp.do(t, "DELETE", "/session/"+perm, "", asA...), http.StatusNoContent)
		closed := readSSE(t, permStream, func(ev sseEvent) bool { return ev.typ == eventSessionClosed })
		if e, _ := originator(t, closed, eventSessionClosed); !strings.Contains(string(e.Data), perm) {
			t.Errorf("session_closed = %s", e.Data)
		}
		for _, req := range [][2]string{{"DELETE", "/session/" + perm}, {"POST", "/session/" + perm + "/prompt"}, {"POST", "/session/" + perm + "/cancel"}} {
			r := sp.do(t, req[0], req[1], "")
			wantError(t, r, 404, codeSessionNotFound)
			wantReply(t, req[0]+" "+req[1]+" after DELETE", r, 404, "error", "code", "sessionId")
		}
	})
	if t.Failed() {
		t.Logf("serve stderr:\n%s", sp.stderr.String())
	}
}

// qwenUpdateKeys are the members of Qwen Code 0.24.4's tool updates and
// of a permission request's toolCall, and of their _meta, as recorded.
var qwenUpdateKeys = map[string]struct{ keys, meta []string }{
	"tool_call":                    {[]string{"_meta", "content", "kind", "locations", "rawInput", "sessionUpdate", "status", "title", "toolCallId"}, []string{"phase", "provenance", "toolName"}},
	"tool_call_update in_progress": {[]string{"_meta", "content", "kind", "locations", "rawInput", "sessionUpdate", "status", "title", "toolCallId"}, []string{"provenance", "toolName"}},
	"tool_call_update completed":   {[]string{"_meta", "content", "rawOutput", "sessionUpdate", "status", "toolCallId"}, []string{"provenance", "toolName"}},
	"permission_request toolCall":  {[]string{"_meta", "content", "kind", "locations", "rawInput", "status", "title", "toolCallId"}, []string{"toolName"}},
}

// qwenFileResultKeys are the keys of Qwen Code's file result in a
// completed write_file's or edit's rawOutput.
var qwenFileResultKeys = []string{"fileDiff", "fileName", "filePath", "originalContent", "newContent", "diffStat"}

// wantQwenKeys checks that obj, a tool update or a toolCall, has exactly
// the members Qwen Code's of kind has, and its _meta at least Qwen's.
func wantQwenKeys(t *testing.T, kind string, obj json.RawMessage) {
	t.Helper()
	want := qwenUpdateKeys[kind]
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatalf("%s %s: %v", kind, obj, err)
	}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want.keys) {
		t.Errorf("%s keys = %v, want Qwen Code's %v", kind, got, want.keys)
	}
	var meta map[string]json.RawMessage
	json.Unmarshal(m["_meta"], &meta)
	for _, k := range want.meta {
		if _, ok := meta[k]; !ok {
			t.Errorf("%s _meta = %s, lacks Qwen Code's %q", kind, m["_meta"], k)
		}
	}
}

// turnUpdates are the raw updates of a turn's session_update events, by
// eventKind, the first of each kind.
func turnUpdates(t *testing.T, evs []sseEvent) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for _, ev := range evs {
		k := eventKind(t, ev)
		if ev.typ != eventSessionUpdate || k == "" || out[k] != nil {
			continue
		}
		var d struct {
			Update json.RawMessage `json:"update"`
		}
		json.Unmarshal(parseEnvelope(t, ev).Data, &d)
		out[k] = d.Update
	}
	return out
}

// failedText is the text of the turn's failed tool_call_update, "" when
// no call failed.
func failedText(t *testing.T, evs []sseEvent) string {
	t.Helper()
	for _, ev := range evs {
		var d struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Status        string `json:"status"`
				Content       []struct {
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"content"`
			} `json:"update"`
		}
		if ev.typ != eventSessionUpdate || json.Unmarshal(parseEnvelope(t, ev).Data, &d) != nil {
			continue
		}
		if u := d.Update; u.SessionUpdate == "tool_call_update" && u.Status == "failed" && len(u.Content) > 0 {
			return u.Content[0].Content.Text
		}
	}
	return ""
}
