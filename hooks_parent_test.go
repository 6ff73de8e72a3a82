package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A serve child never POSTs its http hooks: it asks its parent, naming the
// hook by its place in its settings with the URL and headers as written,
// and reads the parent's answer as it reads its own POST's. A refusal or a
// failure blocks the call (PreToolUse fails closed); nothing the child
// sends carries the variable's value, and the hook's server hears nothing
// from the child.
func TestManagedChildHTTPHookThroughParent(t *testing.T) {
	const secret = "hook-child-secret-5e1d"
	rec := newHookRecorder(t, func([]byte) string { return `{"decision":"deny","reason":"the child posted"}` })
	hook := map[string]any{"type": "http", "url": rec.url(), "headers": map[string]string{"X-Key": "$HOOK_CHILD_SECRET"}, "allowedEnvVars": []string{"HOOK_CHILD_SECRET"}}
	settings, _ := json.Marshal(map[string]any{"security": map[string]any{"allowPrivateNetworkHooks": true},
		"hooks": map[string]any{hookEventPreToolUse: []any{map[string]any{"matcher": "write_file", "hooks": []any{hook}}}}})
	// The parent answers by the content the call would write.
	answers := map[string]func() (any, *rpcError){
		"deny": func() (any, *rpcError) {
			return hookHTTPResult{Body: []byte(`{"decision":"deny","reason":"serve's hook says no"}`), JSON: true}, nil
		},
		"refuse": func() (any, *rpcError) {
			return nil, &rpcError{Code: rpcInvalidParams, Message: "not the settings' hook"}
		},
		"fail":  func() (any, *rpcError) { return hookHTTPResult{Failure: "answered status 500"}, nil },
		"allow": func() (any, *rpcError) { return hookHTTPResult{}, nil },
	}
	var mu sync.Mutex
	var hookParams []hookHTTPParams
	var rp recordingParent
	parent := rp.handler(func(method string, params json.RawMessage) (any, *rpcError) {
		switch method {
		case methodHookHTTP:
			p, err := decodeHookHTTPParams(params)
			if err != nil {
				t.Errorf("%s params: %v", methodHookHTTP, err)
				return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
			}
			mu.Lock()
			hookParams = append(hookParams, p)
			mu.Unlock()
			var in struct {
				ToolInput struct {
					Content string `json:"content"`
				} `json:"tool_input"`
			}
			json.Unmarshal(p.Input, &in)
			return answers[in.ToolInput.Content]()
		}
		return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
	})
	c := startACP(t, parent, []string{"--settings", writeSettings(t, string(settings))}, append(slices.Clone(managedEnv), "HOOK_CHILD_SECRET="+secret)...)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	for _, tc := range []struct {
		content, wantText string
		written           bool
	}{
		{"deny", "serve's hook says no", false},
		{"refuse", `was refused by serve: not the settings' hook`, false},
		{"fail", "answered status 500", false},
		{"allow", "", true},
	} {
		t.Run(tc.content, func(t *testing.T) {
			ws := t.TempDir()
			sid := newMCPSession(t, c, ws)
			c.prompt(sid, `call write_file {"file_path":"out.txt","content":"`+tc.content+`"}`, "p-"+tc.content)
			ups := c.sessionUpdates(sid)
			_, text, _ := callOutcome(ups, firstToolCall(t, ups).ToolCallID)
			if _, err := os.Stat(filepath.Join(ws, "out.txt")); (err == nil) != tc.written {
				t.Errorf("out.txt written = %v, want %v; result %q", err == nil, tc.written, text)
			}
			if !strings.Contains(text, tc.wantText) {
				t.Errorf("result = %q, want it to hold %q", text, tc.wantText)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hookParams) != len(answers) {
		t.Fatalf("%d %s requests, want %d: %q", len(hookParams), methodHookHTTP, len(answers), rp.requests())
	}
	for _, p := range hookParams {
		if p.Event != hookEventPreToolUse || p.Matcher != 0 || p.Hook != 0 || p.URL != rec.url() || p.Headers["X-Key"] != "$HOOK_CHILD_SECRET" || p.PromptID == "" {
			t.Errorf("hook request = %+v", p)
		}
	}
	for _, m := range rp.requests() {
		if strings.Contains(m, secret) {
			t.Errorf("the channel carried the hook's variable: %s", m)
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("the hook's server received %d requests from the child", n)
	}
	c.mu.Lock()
	all, _ := json.Marshal(c.updates)
	c.mu.Unlock()
	if strings.Contains(string(all), secret) {
		t.Error("a session update carried the hook's variable")
	}
}

// The decoders of the http hook request read only what they promise.
func TestHookHTTPWireDecoders(t *testing.T) {
	params := []struct{ raw, wantErr string }{
		{`{"sessionId":"s1","event":"PreToolUse","matcher":0,"hook":1,"url":"http://h/","headers":{"A":"$B"},"input":{"session_id":"s1"}}`, ""},
		{`{"sessionId":"s1","event":"PreToolUse","matcher":0,"hook":0,"url":"http://h/","input":{},"extra":1}`, `unknown field "extra"`},
		{`{"sessionId":"s 1","event":"PreToolUse","matcher":0,"hook":0,"url":"http://h/","input":{}}`, `sessionId "s 1" is not a session id`},
		{`{"sessionId":"s1","event":"PreToolUse","matcher":-1,"hook":0,"url":"http://h/","input":{}}`, "matcher -1, hook 0: a place is not negative"},
		{`{"sessionId":"s1","event":"","matcher":0,"hook":0,"url":"http://h/","input":{}}`, `event "" and url "http://h/": both are required`},
		{`{"sessionId":"s1","event":"PreToolUse","matcher":0,"hook":0,"url":"http://h/","input":[1]}`, "input:"},
		{`{"sessionId":"s1","event":"PreToolUse","matcher":0,"hook":0,"url":"http://h/","input":null}`, "input:"},
	}
	for _, tc := range params {
		_, err := decodeHookHTTPParams([]byte(tc.raw))
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("decodeHookHTTPParams(%s) = %v, want %q", tc.raw, err, tc.wantErr)
		}
	}
	big, _ := json.Marshal(hookHTTPResult{Body: make([]byte, maxHookOutputBytes+1)})
	results := []struct{ raw, wantErr string }{
		{`{"body":"e30=","json":true}`, ""},
		{`{"failure":"answered status 500"}`, ""},
		{`{}`, ""},
		{`{"failure":"x","json":true}`, "both a failure and an answer"},
		{`{"body":"e30=","body":"e30="}`, "duplicate"},
		{string(big), "more than 65536"},
		{`{"failure":"` + strings.Repeat("x", maxHookParentFailureBytes+1) + `"}`, "more than"},
	}
	for _, tc := range results {
		_, err := decodeHookHTTPResult([]byte(tc.raw))
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("decodeHookHTTPResult(%.80s) = %v, want %q", tc.raw, err, tc.wantErr)
		}
	}
}

// FuzzHookHTTPWire: the decoders of a child's http hook request (serve
// reads it) and of serve's answer (the child reads it) never accept what
// breaks their bounds, and what they accept encodes back to an equal value.
func FuzzHookHTTPWire(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s1","event":"PreToolUse","matcher":0,"hook":0,"url":"http://h/","headers":{"A":"$B"},"input":{}}`,
		`{"sessionId":"s1","promptId":"p","event":"Stop","matcher":2,"hook":3,"url":"u","input":{"a":[1]}}`,
		`{"body":"e30=","json":true}`, `{"failure":"timed out after 5 ms"}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := decodeHookHTTPParams(data); err == nil {
			if !validSessionID(p.SessionID) || p.Matcher < 0 || p.Hook < 0 || len(p.Input) > maxHookParentInputBytes {
				t.Fatalf("accepted %+v", p)
			}
			again, _ := json.Marshal(p)
			if q, err := decodeHookHTTPParams(again); err != nil || q.URL != p.URL || q.Matcher != p.Matcher || q.Hook != p.Hook {
				t.Fatalf("re-encoded %s: %v", again, err)
			}
		}
		if r, err := decodeHookHTTPResult(data); err == nil {
			if len(r.Body) > maxHookOutputBytes || len(r.Failure) > maxHookParentFailureBytes || r.Failure != "" && (len(r.Body) > 0 || r.JSON) {
				t.Fatalf("accepted %+v", r)
			}
			again, _ := json.Marshal(r)
			if q, err := decodeHookHTTPResult(again); err != nil || string(q.Body) != string(r.Body) || q.Failure != r.Failure || q.JSON != r.JSON {
				t.Fatalf("re-encoded %s: %v", again, err)
			}
		}
	})
}
