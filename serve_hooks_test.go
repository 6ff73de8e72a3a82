package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Under serve, a child's http hooks leave from serve: the hook's server
// receives the header with the variable's value, from a session's start
// (in session/new) to its delete (in session/close, after the host no
// longer sees it); a PreToolUse hook's deny stops the call (no file
// written) while its allow lets it through; no child's environment (nor
// its tools') holds the value.
func TestServeHTTPHookThroughServe(t *testing.T) {
	const secret = "hook-serve-secret-4f2a"
	rec := newHookRecorder(t, func(body []byte) string {
		if strings.Contains(string(body), `"content":"no"`) {
			return `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"the hook says no"}}`
		}
		return `{}`
	})
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	hook := map[string]any{"type": "http", "url": rec.url(), "headers": map[string]string{"X-Key": "$HOOK_SECRET"}, "allowedEnvVars": []string{"HOOK_SECRET"}}
	settings, _ := json.Marshal(map[string]any{"tools": map[string]string{"approvalMode": "yolo"},
		"security": map[string]any{"allowPrivateNetworkHooks": true},
		"hooks": map[string]any{hookEventPreToolUse: []any{map[string]any{"matcher": "write_file", "hooks": []any{hook}}},
			hookEventSessionStart: []any{map[string]any{"hooks": []any{hook}}}, hookEventSessionEnd: []any{map[string]any{"hooks": []any{hook}}},
			hookEventSessionDelete: []any{map[string]any{"hooks": []any{hook}}}}})
	i := slices.Index(args, "--settings")
	args[i+1] = writeSettings(t, string(settings)) // yolo, as guardArgs' own
	sp := startServe(t, args, tokenEnv, "HOOK_SECRET="+secret)
	id := sp.newSession(t, "")
	for _, tc := range []struct {
		content, wantText string
		written           bool
	}{
		{"yes", "", true},
		{"no", "the hook says no", false},
	} {
		_, evs := sp.runTurn(t, id, `call write_file {"file_path":"`+tc.content+`.txt","content":"`+tc.content+`"}`)
		if _, err := os.Stat(filepath.Join(ws, tc.content+".txt")); (err == nil) != tc.written {
			t.Errorf("%s.txt written = %v, want %v\n%s", tc.content, err == nil, tc.written, sp.stderr.String())
		}
		var all strings.Builder
		for _, ev := range evs {
			all.Write(ev.data)
		}
		if !strings.Contains(all.String(), tc.wantText) {
			t.Errorf("the turn of %q does not say %q: %s", tc.content, tc.wantText, all.String())
		}
	}
	for _, pid := range descendants(t, sp.cmd.Process.Pid) {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if strings.Contains(string(raw), secret) {
			t.Errorf("the environment of %d holds the hook's variable", pid)
		}
	}
	if r := sp.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	events := func() []string {
		var out []string
		for _, r := range rec.requests() {
			var in struct {
				Event string `json:"hook_event_name"`
			}
			json.Unmarshal(r.Body, &in)
			out = append(out, in.Event)
			if got := r.Header.Get("X-Key"); got != secret {
				t.Errorf("X-Key the %s hook's server received = %q", in.Event, got)
			}
		}
		return out
	}
	waitFor(t, "the SessionDelete hook", func() bool { return slices.Contains(events(), hookEventSessionDelete) })
	want := []string{hookEventSessionStart, hookEventPreToolUse, hookEventPreToolUse, hookEventSessionEnd, hookEventSessionDelete}
	if got := events(); !slices.Equal(got, want) {
		t.Errorf("the hook's server received %q, want %q\n%s", got, want, sp.stderr.String())
	}
}

// serve POSTs only the hook of its own reading of the session's settings
// that the child names, with the URL and headers the child saw, for a
// session of the asking channel and an input of that session and event;
// anything else is refused and nothing is sent.
func TestServeHookHTTPRefusesAnotherHook(t *testing.T) {
	const secret = "hook-unit-secret-0c9e"
	rec := newHookRecorder(t, func([]byte) string { return `{"decision":"allow"}` })
	hook, _ := json.Marshal(map[string]any{"type": "http", "url": rec.url(), "headers": map[string]string{"X-Key": "$HOOK_UNIT_SECRET"}, "allowedEnvVars": []string{"HOOK_UNIT_SECRET"}})
	st, err := parseSettings([]byte(`{"security":{"allowPrivateNetworkHooks":true},"hooks":{"PreToolUse":[{"hooks":[` + string(hook) + `]}],"SessionEnd":[{"hooks":[` + string(hook) + `]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{sys: &system{env: newProcEnv([]string{"PATH=/usr/bin:/bin", "HOOK_UNIT_SECRET=" + secret})}, hookStart: st}
	ch, other := &acpChannel{d: d}, &acpChannel{d: d}
	ws := t.TempDir()
	d.expectMCP(ch, "s1", ws)
	d.expectMCP(other, "s2", ws)
	stop := runningPrompt(d, ch, "s1", ws, "p1")
	notRunning := func(event, prompt string) string {
		return fmt.Sprintf("http hook %q refused by serve: %s hooks fire in a running prompt, and prompt %q is not the running prompt of session %q", rec.url(), event, prompt, "s1")
	}
	notHook := func(event string, hook int, url string) string {
		return fmt.Sprintf("http hook %q refused by serve: the %s hook %d in matcher entry 0 of workspace %q's settings is not an http hook with url %q and these headers; it was not sent", url, event, hook, ws, url)
	}
	for _, tc := range []struct {
		name    string
		edit    func(p *hookHTTPParams)
		wantErr string
	}{
		{"the settings' hook", func(*hookHTTPParams) {}, ""},
		{"another url", func(p *hookHTTPParams) { p.URL = "http://127.0.0.1:1/elsewhere" }, notHook("PreToolUse", 0, "http://127.0.0.1:1/elsewhere")},
		{"other headers", func(p *hookHTTPParams) { p.Headers = map[string]string{"X-Key": "$OTHER"} }, notHook("PreToolUse", 0, rec.url())},
		{"no headers", func(p *hookHTTPParams) { p.Headers = nil }, notHook("PreToolUse", 0, rec.url())},
		{"no such hook", func(p *hookHTTPParams) { p.Hook = 1 },
			fmt.Sprintf("http hook %q refused by serve: the settings of workspace %q have no PreToolUse hook 1 in matcher entry 0; it was not sent", rec.url(), ws)},
		{"another prompt", func(p *hookHTTPParams) { p.PromptID = "p0" }, notRunning("PreToolUse", "p0")},
		{"no prompt", func(p *hookHTTPParams) { p.PromptID = "" }, notRunning("PreToolUse", "")},
		{"another event", func(p *hookHTTPParams) {
			p.Event = hookEventPostToolUse
			p.Input = json.RawMessage(`{"session_id":"s1","hook_event_name":"PostToolUse"}`)
		}, fmt.Sprintf("http hook %q refused by serve: the settings of workspace %q have no PostToolUse hook 0 in matcher entry 0; it was not sent", rec.url(), ws)},
		{"another channel's session", func(p *hookHTTPParams) {
			p.SessionID = "s2"
			p.Input = json.RawMessage(`{"session_id":"s2","hook_event_name":"PreToolUse"}`)
		}, fmt.Sprintf("http hook %q refused by serve: unknown session %q", rec.url(), "s2")},
		{"an input of another session", func(p *hookHTTPParams) {
			p.Input = json.RawMessage(`{"session_id":"s2","hook_event_name":"PreToolUse"}`)
		},
			fmt.Sprintf("http hook %q refused by serve: its input is for session %q and event %q, not %q and %q; it was not sent", rec.url(), "s2", "PreToolUse", "s1", "PreToolUse")},
		// encoding/json would read the second name as session_id, last.
		{"an input of another session, its own spelled otherwise after it", func(p *hookHTTPParams) {
			p.Input = json.RawMessage(`{"session_id":"s2","SESSION_ID":"s1","hook_event_name":"PreToolUse"}`)
		},
			fmt.Sprintf("http hook %q refused by serve: its input is for session %q and event %q, not %q and %q; it was not sent", rec.url(), "s2", "PreToolUse", "s1", "PreToolUse")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := hookHTTPParams{SessionID: "s1", PromptID: "p1", Event: hookEventPreToolUse, URL: rec.url(),
				Headers: map[string]string{"X-Key": "$HOOK_UNIT_SECRET"}, Input: json.RawMessage(`{"session_id":"s1","hook_event_name":"PreToolUse"}`)}
			tc.edit(&p)
			raw, _ := json.Marshal(p)
			before := len(rec.requests())
			res, err := d.hookHTTP(context.Background(), ch, raw)
			sent := rec.requests()[before:]
			if tc.wantErr != "" {
				var rerr *rpcError
				if !errors.As(err, &rerr) || rerr.Message != tc.wantErr {
					t.Errorf("error = %v\nwant    %s", err, tc.wantErr)
				}
				if len(sent) != 0 {
					t.Errorf("a refused hook was POSTed %d times", len(sent))
				}
				return
			}
			r, ok := res.(hookHTTPResult)
			if err != nil || !ok || string(r.Body) != `{"decision":"allow"}` || !r.JSON || r.Failure != "" {
				t.Fatalf("answer = %+v, %v", res, err)
			}
			if len(sent) != 1 || sent[0].Header.Get("X-Key") != secret || string(sent[0].Body) != string(p.Input) {
				t.Errorf("the hook's server received %+v", sent)
			}
		})
	}
	// The prompt's hook is refused once the prompt ended.
	stop()
	raw, _ := json.Marshal(hookHTTPParams{SessionID: "s1", PromptID: "p1", Event: hookEventPreToolUse, URL: rec.url(),
		Headers: map[string]string{"X-Key": "$HOOK_UNIT_SECRET"}, Input: json.RawMessage(`{"session_id":"s1","hook_event_name":"PreToolUse"}`)})
	before := len(rec.requests())
	if _, err := d.hookHTTP(context.Background(), ch, raw); err == nil || !strings.Contains(err.Error(), notRunning("PreToolUse", "p1")) {
		t.Errorf("an ended prompt's hook: %v, want %q", err, notRunning("PreToolUse", "p1"))
	}
	if n := len(rec.requests()) - before; n != 0 {
		t.Errorf("an ended prompt's hook was POSTed %d times", n)
	}
	// A session whose session/close the child handles fires its hooks
	// through serve until the child answers.
	done := d.closingHooks(&hostSession{id: "s3", ch: ch, ws: ws})
	p := hookHTTPParams{SessionID: "s3", Event: hookEventSessionEnd, URL: rec.url(), Headers: map[string]string{"X-Key": "$HOOK_UNIT_SECRET"},
		Input: json.RawMessage(`{"session_id":"s3","hook_event_name":"SessionEnd"}`)}
	raw, _ = json.Marshal(p)
	if _, err := d.hookHTTP(context.Background(), other, raw); err == nil {
		t.Error("another channel fired a closing session's hook")
	}
	if res, err := d.hookHTTP(context.Background(), ch, raw); err != nil || res.(hookHTTPResult).Failure != "" {
		t.Errorf("a closing session's hook = %+v, %v", res, err)
	}
	done()
	if _, err := d.hookHTTP(context.Background(), ch, raw); err == nil {
		t.Error("a closed session's hook was sent")
	}
}

// A hook serve POSTs for its child and that fails names its variables,
// never their values from serve's environment: the failure the child
// shows the user and the model holds no secret.
func TestServeHookHTTPFailureHidesSecrets(t *testing.T) {
	port := freeLoopbackPort(t)
	const key, url = "hook-unit-secret-71d2", "http://$HOOK_HOST/hook?key=${HOOK_KEY}"
	hook, _ := json.Marshal(map[string]any{"type": "http", "url": url, "allowedEnvVars": []string{"HOOK_HOST", "HOOK_KEY"}})
	st, err := parseSettings([]byte(`{"security":{"allowPrivateNetworkHooks":true},"hooks":{"PreToolUse":[{"hooks":[` + string(hook) + `]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{sys: &system{env: newProcEnv([]string{"PATH=/usr/bin:/bin", "HOOK_HOST=127.0.0.1:" + port, "HOOK_KEY=" + key})}, hookStart: st}
	ch := &acpChannel{d: d}
	ws := t.TempDir()
	d.expectMCP(ch, "s1", ws)
	defer runningPrompt(d, ch, "s1", ws, "p1")()
	raw, _ := json.Marshal(hookHTTPParams{SessionID: "s1", PromptID: "p1", Event: hookEventPreToolUse, URL: url, Input: json.RawMessage(`{"session_id":"s1","hook_event_name":"PreToolUse"}`)})
	res, err := d.hookHTTP(context.Background(), ch, raw)
	r, ok := res.(hookHTTPResult)
	if want := "could not be reached: dial tcp $HOOK_HOST: connect: connection refused"; err != nil || !ok || r.Failure != want {
		t.Errorf("answer = %+v, %v; want the failure %q", res, err, want)
	}
}

// A prompt's hook that serve POSTs ends with the prompt: stopped while the
// hook's server has not answered, the POST ends and the child is told the
// hook was cancelled.
func TestServeHookHTTPEndsWithItsPrompt(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	rec := newHookRecorder(t, func([]byte) string {
		close(arrived)
		<-release
		return `{}`
	})
	hook, _ := json.Marshal(map[string]any{"type": "http", "url": rec.url()})
	st, err := parseSettings([]byte(`{"security":{"allowPrivateNetworkHooks":true},"hooks":{"PreToolUse":[{"hooks":[` + string(hook) + `]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{sys: &system{env: newProcEnv([]string{"PATH=/usr/bin:/bin"})}, hookStart: st}
	ch, ws := &acpChannel{d: d}, t.TempDir()
	d.expectMCP(ch, "s1", ws)
	stop := runningPrompt(d, ch, "s1", ws, "p1")
	raw, _ := json.Marshal(hookHTTPParams{SessionID: "s1", PromptID: "p1", Event: hookEventPreToolUse, URL: rec.url(),
		Input: json.RawMessage(`{"session_id":"s1","hook_event_name":"PreToolUse"}`)})
	type answer struct {
		res any
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := d.hookHTTP(context.Background(), ch, raw)
		got <- answer{res, err}
	}()
	select {
	case <-arrived:
	case <-time.After(testTimeout(10 * time.Second)):
		t.Fatal("the hook's POST never arrived")
	}
	stop()
	select {
	case a := <-got:
		if r, ok := a.res.(hookHTTPResult); a.err != nil || !ok || r.Failure != "was cancelled" {
			t.Errorf("answer = %+v, %v; want the failure %q", a.res, a.err, "was cancelled")
		}
	case <-time.After(testTimeout(10 * time.Second)):
		t.Fatal("the hook's POST outlived its prompt")
	}
}
