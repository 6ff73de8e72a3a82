// hooks_events_test.go checks the hooks of every event acpguard fires, with
// real hook commands and real http hooks on loopback, through a real acp
// and a model service on loopback: what each hook reads, what its answer
// changes (the model's next request, a call, a prompt), and that the
// events that can stop something fail closed.
package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hookEventsFired are the events acpguard fires, each tested here.
var hookEventsFired = []string{
	hookEventSessionStart, hookEventInstructionsLoaded, hookEventUserPromptSubmit, hookEventPreToolUse,
	hookEventPermissionRequest, hookEventNotification, hookEventPostToolUse, hookEventPostToolUseFailure,
	hookEventPermissionDenied, hookEventPostToolBatch, hookEventStop, hookEventStopFailure,
	hookEventSessionEnd, hookEventSessionDelete,
}

func TestHookEventsFire(t *testing.T) {
	cwd := t.TempDir()
	mustWrite(t, filepath.Join(cwd, "AGENTS.md"), "Be brief.\n")
	model := startHookModel(t, map[string][]hookModelCall{
		"batch": {
			{toolShell, `{"command":"echo hi"}`},
			{toolReadFile, `{"file_path":"` + cwd + `/missing.txt"}`},
			{toolWriteFile, `{"file_path":"` + cwd + `/blocked/x.txt","content":"x"}`},
		},
		"ask": {{toolWriteFile, `{"file_path":"` + cwd + `/asked.txt","content":"x"}`}},
	})
	hooks := hookLogger(t, t.TempDir(), map[string]string{
		hookEventUserPromptSubmit:  `echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"CTX-UPS"}}'`,
		hookEventPostToolUse:       `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"FEEDBACK-PTU <b>"}}'`,
		hookEventPermissionRequest: `echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'`,
	}, hookEventsFired...)
	// The PermissionRequest hook answers for shell calls only: the write
	// of "ask" goes to the client, which rejects it.
	hooks[hookEventPermissionRequest].([]any)[0].(map[string]any)["matcher"] = "Bash"
	// An event of a feature acpguard lacks loads, named once at the start.
	hooks["TodoCreated"] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": "false"}}}}
	c := startHookACP(t, model, mustJSON(t, map[string]any{
		"tools":       map[string]any{"approvalMode": "default"},
		"permissions": map[string]any{"deny": []string{"Write(./blocked/**)"}},
		"hooks":       hooks,
	}), nil)
	sid := c.newSession(cwd)
	if stop := c.prompt(sid, "batch of three calls", ""); stop != stopEndTurn {
		t.Fatalf("batch: stop reason %q", stop)
	}
	if stop := c.prompt(sid, "ask for a write", ""); stop != stopEndTurn {
		t.Fatalf("ask: stop reason %q", stop)
	}
	if r := c.call(methodSessionPrompt, promptParams(sid, "fail now", "")); r.Error == nil {
		t.Fatalf("fail: the prompt did not fail: %s", r.Result)
	}
	c.mustCall(methodSessionClose, map[string]any{"sessionId": sid, "_meta": map[string]any{metaSessionDeleted: true}}, nil)

	if n := strings.Count(c.stderrText(), "hooks for TodoCreated load but never fire"); n != 1 {
		t.Errorf("the start named TodoCreated's hooks %d times, want once:\n%s", n, c.stderrText())
	}
	if fileExists(filepath.Join(cwd, "blocked", "x.txt")) || fileExists(filepath.Join(cwd, "asked.txt")) {
		t.Error("a denied or rejected write was made")
	}
	// What the model read: the UserPromptSubmit context after the prompt,
	// the PostToolUse feedback after the shell call's output, escaped.
	reqs := model.requests()
	if len(reqs) < 2 || !strings.Contains(reqs[0], `"batch of three calls\n\n\u003cqwen:user-prompt-submit-context\u003e\nCTX-UPS\n\u003c/qwen:user-prompt-submit-context\u003e"`) {
		t.Errorf("first model request lacks the prompt's hook context: %.600s", reqs)
	}
	if len(reqs) < 2 || !strings.Contains(reqs[1], `\n\nFEEDBACK-PTU \u0026lt;b\u0026gt;","tool_call_id":"call-batch-0"`) {
		t.Errorf("the model's request after the batch lacks the PostToolUse feedback: %s", reqs[1])
	}

	one := func(ev string, want map[string]any) {
		t.Helper()
		logs := hookLog(t, cwd, ev)
		if len(logs) == 0 {
			t.Errorf("%s: no hook ran", ev)
			return
		}
		in := logs[0]
		if in["hook_event_name"] != ev || in["session_id"] != sid || in["cwd"] != cwd || in["timestamp"] == "" {
			t.Errorf("%s: common fields %v", ev, in)
		}
		for k, v := range want {
			if got := mustJSON(t, in[k]); got != mustJSON(t, v) {
				t.Errorf("%s: %s = %s, want %s", ev, k, got, mustJSON(t, v))
			}
		}
	}
	one(hookEventSessionStart, map[string]any{"source": "startup", "model": "test-model", "permission_mode": "default"})
	one(hookEventInstructionsLoaded, map[string]any{"file_path": filepath.Join(cwd, "AGENTS.md"), "memory_type": "project", "load_reason": "session_start"})
	one(hookEventUserPromptSubmit, map[string]any{"prompt": "batch of three calls"})
	one(hookEventPreToolUse, map[string]any{"tool_name": toolShell})
	one(hookEventPermissionRequest, map[string]any{"tool_name": toolShell})
	one(hookEventNotification, map[string]any{"notification_type": "permission_prompt", "message": "acpguard needs your permission to use write_file"})
	one(hookEventPostToolUse, map[string]any{"tool_name": toolShell, "tool_use_id": "call-batch-0"})
	// tool_input is the normalized arguments, as PreToolUse hooks read them.
	for _, ev := range []string{hookEventPreToolUse, hookEventPostToolUse} {
		if in := hookLog(t, cwd, ev); len(in) == 0 || mustJSON(t, in[0]["tool_input"]) != mustJSON(t, map[string]any{"command": "echo hi", "directory": cwd, "is_background": false, "timeout": 120000}) {
			t.Errorf("%s tool_input: %v", ev, in)
		}
	}
	one(hookEventPostToolUseFailure, map[string]any{"tool_name": toolReadFile, "is_interrupt": false})
	one(hookEventPermissionDenied, map[string]any{"tool_name": toolWriteFile, "tool_use_id": "call-batch-2"})
	one(hookEventStop, map[string]any{"stop_hook_active": false, "last_assistant_message": "done"})
	one(hookEventStopFailure, map[string]any{"error": "server_error"})
	one(hookEventSessionEnd, map[string]any{"reason": "other"})
	one(hookEventSessionDelete, map[string]any{"deleted_session_id": sid})
	if b := hookLog(t, cwd, hookEventPostToolBatch); len(b) == 0 || len(b[0]["tool_calls"].([]any)) != 3 {
		t.Errorf("PostToolBatch: %v", b)
	} else if calls := mustJSON(t, b[0]["tool_calls"]); !strings.Contains(calls, `"status":"success"`) || !strings.Contains(calls, `"status":"error"`) {
		t.Errorf("PostToolBatch tool_calls %s", calls)
	}
	// The rejected write of "ask" is a denial too.
	if d := hookLog(t, cwd, hookEventPermissionDenied); len(d) != 2 {
		t.Errorf("PermissionDenied ran %d times, want 2 (the deny rule, the user's reject)", len(d))
	}
	if o := hookLog(t, cwd, hookEventPostToolUse); len(o) != 1 {
		t.Errorf("PostToolUse ran %d times, want once", len(o))
	}
}

// The events that can stop something stop it when a hook says so or fails;
// the others go on.
func TestHookEventsStop(t *testing.T) {
	for _, tc := range []struct {
		name, event, answer, prompt string
		wantStop                    string
		wantText                    string // in the agent's text
		wantModelCalls              int
		wantFile                    bool // echo > made.txt ran
	}{
		{"UserPromptSubmit blocks", hookEventUserPromptSubmit, `echo '{"decision":"block","reason":"no secrets"}'`, "write", stopEndTurn,
			"\u2717 **UserPromptSubmit blocked**: no secrets", 0, false},
		{"UserPromptSubmit exit 2", hookEventUserPromptSubmit, `echo 'not today' >&2; exit 2`, "write", stopEndTurn,
			"\u2717 **UserPromptSubmit blocked**: not today", 0, false},
		{"UserPromptSubmit crash fails closed", hookEventUserPromptSubmit, `exit 1`, "write", stopEndTurn,
			`failed with exit status 1 (stopped: the hook fails closed)`, 0, false},
		{"PermissionRequest deny", hookEventPermissionRequest, `echo '{"hookSpecificOutput":{"decision":{"behavior":"deny","message":"not here"}}}'`, "write", stopEndTurn,
			"not here", 2, false},
		{"PermissionRequest crash fails closed", hookEventPermissionRequest, `kill -9 $$`, "write", stopEndTurn,
			"crashed: signal: killed (stopped: the hook fails closed)", 2, false},
		{"PostToolUse crash fails open", hookEventPostToolUse, `exit 1`, "write", stopEndTurn, "done", 2, true},
		{"Stop crash fails open", hookEventStop, `exit 1`, "write", stopEndTurn, "done", 2, true},
		{"Stop blocks until the cap", hookEventStop, `echo '{"decision":"block","reason":"keep going"}'`, "write", stopEndTurn,
			"Stop hook blocked continuation 2 consecutive times; overriding and ending the turn.", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cwd := t.TempDir()
			model := startHookModel(t, map[string][]hookModelCall{
				"write": {{toolShell, `{"command":"echo x > made.txt"}`}},
			})
			hooks := hookLogger(t, t.TempDir(), map[string]string{tc.event: tc.answer}, tc.event)
			c := startHookACP(t, model, mustJSON(t, map[string]any{
				"tools":               map[string]any{"approvalMode": "default"},
				"stopHookBlockingCap": 2,
				"hooks":               hooks,
			}), func(method string, _ json.RawMessage) (any, *rpcError) {
				return map[string]any{"outcome": map[string]string{"outcome": outcomeSelected, "optionId": optionProceedOnce}}, nil
			})
			sid := c.newSession(cwd)
			if stop := c.prompt(sid, "write a file", ""); stop != tc.wantStop {
				t.Fatalf("stop reason %q, want %q", stop, tc.wantStop)
			}
			ups := c.sessionUpdates(sid)
			_, result, _ := callOutcome(ups, "call-write-0")
			if got := agentText(ups); !strings.Contains(got, tc.wantText) && !strings.Contains(result, tc.wantText) {
				t.Errorf("agent text %q and call result %q lack %q", got, result, tc.wantText)
			}
			if n := len(model.requests()); n != tc.wantModelCalls {
				t.Errorf("model calls = %d, want %d", n, tc.wantModelCalls)
			}
			if made := fileExists(filepath.Join(cwd, "made.txt")); made != tc.wantFile {
				t.Errorf("made.txt written: %v, want %v", made, tc.wantFile)
			}
		})
	}
}

// http hooks on loopback, opened by allowPrivateNetworkHooks in the user's
// settings: a PostToolUse hook whose feedback the model reads, with a
// header whose value comes from an allowed variable no tool can see; a
// PreToolUse hook that times out denies the call.
func TestHTTPHooks(t *testing.T) {
	var gotAuth []string
	feedback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Other"))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"HTTP-FEEDBACK"}}`))
	}))
	t.Cleanup(feedback.Close)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })

	cwd := t.TempDir()
	model := startHookModel(t, map[string][]hookModelCall{
		"env":   {{toolShell, `{"command":"env > env.txt"}`}},
		"write": {{toolWriteFile, `{"file_path":"` + cwd + `/made.txt","content":"x"}`}},
	})
	t.Setenv("HOOK_TEST_TOKEN", "s3cret-token")
	t.Setenv("HOOK_TEST_OTHER", "not-allowed") // set, and not in allowedEnvVars
	c := startHookACP(t, model, mustJSON(t, map[string]any{
		"tools":    map[string]any{"approvalMode": "yolo"},
		"security": map[string]any{"allowPrivateNetworkHooks": true},
		"hooks": map[string]any{
			hookEventPostToolUse: []any{map[string]any{"matcher": "Bash", "hooks": []any{map[string]any{
				"type": "http", "url": feedback.URL + "/post", "headers": map[string]string{"Authorization": "Bearer $HOOK_TEST_TOKEN", "X-Other": "[$HOOK_TEST_OTHER]"},
				"allowedEnvVars": []string{"HOOK_TEST_TOKEN"}}}}},
			hookEventPreToolUse: []any{map[string]any{"matcher": "write_file", "hooks": []any{map[string]any{
				"type": "http", "url": slow.URL + "/pre", "timeout": 1}}}},
		},
	}), nil)
	sid := c.newSession(cwd)
	c.prompt(sid, "env", "")
	reqs := model.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1], `\n\nHTTP-FEEDBACK"`) {
		t.Errorf("the model's second request lacks the http hook's feedback: %q", reqs)
	}
	if len(gotAuth) != 1 || gotAuth[0] != "Bearer s3cret-token|[]" {
		t.Errorf("Authorization headers %q", gotAuth)
	}
	env, err := os.ReadFile(filepath.Join(cwd, "env.txt"))
	if err != nil || strings.Contains(string(env), "HOOK_TEST_TOKEN") || strings.Contains(string(env), "s3cret") {
		t.Errorf("the tool's environment holds the hook's secret (or was not written: %v)", err)
	}
	if strings.Contains(c.stderrText(), "s3cret") {
		t.Error("the agent logged the hook's secret")
	}

	c.prompt(sid, "write", "")
	if fileExists(filepath.Join(cwd, "made.txt")) {
		t.Error("the write ran though its PreToolUse hook timed out")
	}
	if _, text, errType := callOutcome(c.sessionUpdates(sid), "call-write-0"); !strings.Contains(text, `PreToolUse hook "`+slow.URL+`/pre" timed out after 1000 ms (the call is blocked: the hook fails closed)`) || errType != errTypeExecutionDenied {
		t.Errorf("result %q (%s), want the hook's timeout", text, errType)
	}
}

// An http hook may reach loopback only when the user's settings say so, and
// a workspace's settings cannot say so.
func TestHTTPHookAddressRefused(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	t.Cleanup(srv.Close)
	cwd := t.TempDir()
	writeFileAll(t, filepath.Join(cwd, ".qwen", "settings.json"), `{"security":{"allowPrivateNetworkHooks":true}}`)
	model := startHookModel(t, map[string][]hookModelCall{"write": {{toolWriteFile, `{"file_path":"` + cwd + `/made.txt","content":"x"}`}}})
	c := startHookACP(t, model, mustJSON(t, map[string]any{
		"tools": map[string]any{"approvalMode": "yolo"},
		"hooks": map[string]any{hookEventPreToolUse: []any{map[string]any{"hooks": []any{map[string]any{"type": "http", "url": srv.URL}}}}},
	}), nil)
	sid := c.newSession(cwd)
	c.prompt(sid, "write", "")
	if hit || fileExists(filepath.Join(cwd, "made.txt")) {
		t.Errorf("hook reached: %v; file written: %v", hit, fileExists(filepath.Join(cwd, "made.txt")))
	}
	if _, text, _ := callOutcome(c.sessionUpdates(sid), "call-write-0"); !strings.Contains(text, "may not reach 127.0.0.1: a private, loopback or link-local address") {
		t.Errorf("result %q", text)
	}
}

// Under serve, a host's DELETE fires the child's SessionEnd and
// SessionDelete hooks.
func TestServeSessionDeleteHook(t *testing.T) {
	ws := t.TempDir()
	hooks := hookLogger(t, t.TempDir(), nil, hookEventSessionEnd, hookEventSessionDelete)
	settings := filepath.Join(t.TempDir(), "settings.json")
	mustWrite(t, settings, mustJSON(t, map[string]any{"hooks": hooks}))
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: settings})
	id := td.newSession(t, `{"cwd":"`+ws+`"}`)
	if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	waitFor(t, "the SessionDelete hook", func() bool { return len(hookLog(t, ws, hookEventSessionDelete)) == 1 })
	if d := hookLog(t, ws, hookEventSessionDelete)[0]; d["deleted_session_id"] != id || d["session_id"] != id {
		t.Errorf("SessionDelete input %v", d)
	}
	if e := hookLog(t, ws, hookEventSessionEnd); len(e) != 1 || e[0]["reason"] != "other" {
		t.Errorf("SessionEnd inputs %v", e)
	}
}

// The answers of the other events' hooks, as runEventHooks combines them:
// matchers (ignored where Qwen Code has none), blocks, stops, context, and
// failures, closed or open by event.
func TestEventHookAnswers(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, event, target, matcher, body string
		want                               hookAnswer
	}{
		{"context", hookEventPostToolUse, toolShell, "Bash", `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"a <tag>"}}'`,
			hookAnswer{Context: []string{"a &lt;tag&gt;"}}},
		{"matcher misses", hookEventPostToolUse, toolShell, "read_file", `echo '{"decision":"block"}'`, hookAnswer{}},
		{"matcher ignored on Stop", hookEventStop, "", "nothing", `echo '{"decision":"block","reason":"more"}'`,
			hookAnswer{Blocked: true, Reason: "more"}},
		{"continue false", hookEventPostToolUse, toolShell, "", `echo '{"continue":false,"stopReason":"halt","reason":"r"}'`,
			hookAnswer{Stop: true, Reason: "halt"}},
		{"exit 2", hookEventStop, "", "", `echo because >&2; exit 2`, hookAnswer{Blocked: true, Reason: "because"}},
		{"block without reason", hookEventUserPromptSubmit, "", "", `echo '{"decision":"deny"}'`, hookAnswer{Blocked: true, Reason: "No reason provided"}},
		{"plain text is context on SessionStart", hookEventSessionStart, "startup", "startup", `echo hello`, hookAnswer{Context: []string{"hello"}}},
		{"plain text is a message elsewhere", hookEventStop, "", "", `echo hello`, hookAnswer{Messages: []string{"hello"}}},
		{"permission decision", hookEventPermissionRequest, toolShell, "", `echo '{"hookSpecificOutput":{"decision":{"behavior":"deny","message":"no"}}}'`,
			hookAnswer{Behavior: "deny", Message: "no"}},
		{"decision on another event", hookEventStop, "", "", `echo '{"hookSpecificOutput":{"decision":{"behavior":"allow"}}}'`,
			hookAnswer{Failures: []string{`Stop hook HOOK printed an invalid answer: hookSpecificOutput.decision is a PermissionRequest answer`}}},
		{"unknown key fails open", hookEventPostToolUse, toolShell, "", `echo '{"hookSpecificOutput":{"updatedInput":{}}}'`,
			hookAnswer{Failures: []string{`PostToolUse hook HOOK printed an invalid answer: hookSpecificOutput: json: unknown field "updatedInput"`}}},
		{"crash fails open", hookEventSessionEnd, "other", "", `exit 3`,
			hookAnswer{Failures: []string{`SessionEnd hook HOOK failed with exit status 3`}}},
		{"crash fails closed", hookEventUserPromptSubmit, "", "", `exit 3`,
			hookAnswer{Blocked: true, Reason: `UserPromptSubmit hook HOOK failed with exit status 3 (stopped: the hook fails closed)`}},
		{"bad JSON fails closed", hookEventPermissionRequest, toolShell, "", `echo '{nope'`,
			hookAnswer{Blocked: true, Reason: `PermissionRequest hook HOOK printed an invalid answer: invalid character 'n' looking for beginning of object key string (stopped: the hook fails closed)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hookScript(t, dir, tc.name, tc.body)
			got := runEventHooks(t.Context(), hookEntries(t, tc.matcher, h), hookFiring{Event: tc.event, Target: tc.target, Common: hookCommon{Cwd: dir}}, testHookEnv)
			want := tc.want
			label := strconv.Quote(h.Command)
			want.Reason = strings.ReplaceAll(want.Reason, "HOOK", label)
			for i := range want.Failures {
				want.Failures[i] = strings.ReplaceAll(want.Failures[i], "HOOK", label)
			}
			if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}
