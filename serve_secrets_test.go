package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A variable a workspace's settings come to name as a remote MCP server's
// header while serve runs leaves the environment of the tools of every
// child serve started before, not only of the child whose session reads
// the new settings: serve tells them (methodEnvHide).
func TestServeHidesLateSecretFromOlderChildren(t *testing.T) {
	const secret = "late-secret-5e21"
	f := newFakeRemoteMCP(t)
	ws := t.TempDir()
	prov := newTestProvider(t)
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	// Required mode: a child reaches remote servers only through serve,
	// which reads the workspace's settings itself.
	args = append(args, "--trust-workspace-settings", "--max-children", "2")
	sp := startServe(t, args, tokenEnv, "LATE_SECRET="+secret)
	shellEnv := func(id, out string) string {
		t.Helper()
		sp.runTurn(t, id, `call run_shell_command {"command":"env > `+out+`"}`)
		data, err := os.ReadFile(filepath.Join(ws, out))
		if err != nil {
			t.Fatalf("the shell wrote no environment: %v\n%s", err, sp.stderr.String())
		}
		return string(data)
	}
	first := sp.newSession(t, `{"cwd":"`+ws+`"}`)
	// Nothing names the variable yet: it is the operator's, as any other.
	if env := shellEnv(first, "before.env"); !strings.Contains(env, "LATE_SECRET="+secret) {
		t.Fatalf("the variable did not reach the tool before any settings named it: the test proves nothing")
	}
	settings, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"remote": map[string]any{
		"httpUrl": f.srv.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer $LATE_SECRET"}}}})
	if err := os.MkdirAll(filepath.Join(ws, ".qwen"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".qwen", "settings.json"), settings, 0o644); err != nil {
		t.Fatal(err)
	}
	// A second session goes to a second child (the first carries one),
	// which lists the new server through serve: serve reads the settings.
	sp.newSession(t, `{"cwd":"`+ws+`"}`)
	if n := f.calls(mcpMethodInitialize); n == 0 {
		t.Fatalf("serve never reached the new server: it did not read the new settings\n%s", sp.stderr.String())
	}
	if env := shellEnv(first, "after.env"); strings.Contains(env, secret) || strings.Contains(env, "LATE_SECRET=") {
		t.Errorf("a tool of the first child's session still gets the variable serve learned is a secret\n%s", sp.stderr.String())
	}
}

// Only serve hides a variable from a child's tools: a standalone agent
// ignores the notification from its editor, as any unknown one, and a
// managed child takes the name out.
func TestEnvHideOnlyFromServe(t *testing.T) {
	for _, managed := range []bool{false, true} {
		a := &agent{managed: managed, env: newProcEnv([]string{"PATH=/usr/bin:/bin", "HIDE_ME=v"}), log: slog.New(slog.DiscardHandler)}
		a.handleNotify(methodEnvHide, json.RawMessage(`{"names":["HIDE_ME"]}`))
		if hidden := a.env.hiddenName("HIDE_ME"); hidden != managed {
			t.Errorf("managed %v: HIDE_ME hidden %v, want %v", managed, hidden, managed)
		}
	}
}

// A workspace's settings that come to name a secret tell every child that
// started before as soon as serve reads them, whatever the reader then does
// with them: here a child's hook call that serve refuses (no such hook)
// still tells the other child.
func TestServeSettingsReadTellsChildren(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	hook := `{"type":"http","url":"http://127.0.0.1:1/hook","allowedEnvVars":["LATE_HOOK_SECRET"]}`
	if err := os.MkdirAll(filepath.Join(ws, ".qwen"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, ".qwen", "settings.json"), `{"hooks":{"PreToolUse":[{"hooks":[`+hook+`]}]}}`)
	d := &daemon{sys: &system{env: newProcEnv([]string{"PATH=/usr/bin:/bin", "LATE_HOOK_SECRET=v"})}, obs: newServeObserver(slog.New(slog.DiscardHandler))}
	var opts serveOptions
	opts.SessionSettings.Sources = settingsSources{Home: home, System: filepath.Join(home, "none.json"), SystemDefaults: filepath.Join(home, "none-defaults.json"),
		Lookup: func(string) (string, bool) { return "", false }}
	opts.SessionSettings.Options = settingsLoadOptions{TrustWorkspace: true}
	d.setMCP(opts)
	// An older child, on a connection whose lines the test reads.
	var toChild syncBuffer
	older := &acpChannel{d: d, done: make(chan struct{})}
	older.conn = newRPCConn(strings.NewReader(""), &toChild, rpcConfig{})
	asking := &acpChannel{d: d, done: make(chan struct{})}
	asking.conn = newRPCConn(strings.NewReader(""), io.Discard, rpcConfig{})
	d.pool = []*acpChannel{older, asking}
	d.expectMCP(asking, "s1", ws)
	defer runningPrompt(d, asking, "s1", ws, "p1")()

	raw, _ := json.Marshal(hookHTTPParams{SessionID: "s1", PromptID: "p1", Event: hookEventPreToolUse, Hook: 7, URL: "http://127.0.0.1:1/hook",
		Input: json.RawMessage(`{"session_id":"s1","hook_event_name":"PreToolUse"}`)})
	if _, err := d.hookHTTP(context.Background(), asking, raw); err == nil {
		t.Fatal("serve POSTed a hook its settings do not hold")
	}
	if !envOf(d.sys).hiddenName("LATE_HOOK_SECRET") {
		t.Fatal("serve read the settings but did not hide their variable: the test proves nothing")
	}
	if got := toChild.String(); !strings.Contains(got, methodEnvHide) || !strings.Contains(got, "LATE_HOOK_SECRET") {
		t.Errorf("the older child was told %q, want %s naming LATE_HOOK_SECRET", got, methodEnvHide)
	}
}
