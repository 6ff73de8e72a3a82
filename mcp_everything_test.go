// mcp_everything_test.go drives the reference MCP server,
// @modelcontextprotocol/server-everything, over both remote transports
// through a real acpguard acp, with a recording proxy on the server's side.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// One allowed call runs once and its result reaches the client; a denied
// call sends no tools/call; the header's secret reaches the server and no
// child's environment, event or log line; from settings ($VAR expanded) and
// from session/new.
func TestRemoteMCPEverything(t *testing.T) {
	modes := []struct{ mode, transport, settingsKey, path string }{
		{"streamableHttp", mcpTransportHTTP, "httpUrl", "/mcp"},
		{"sse", mcpTransportSSE, "url", "/sse"},
	}
	for _, m := range modes {
		for _, source := range []string{"settings", "session/new", ".mcp.json"} {
			t.Run(m.mode+" from "+source, func(t *testing.T) {
				e := startEverything(t, m.mode)
				const secret = "rmcp-header-secret-5b1f0e"
				dir := t.TempDir()
				policy := filepath.Join(t.TempDir(), "policy.json")
				mustWrite(t, policy, `{"rules":[{"tool":"mcp__everything__echo","decision":"allow"},{"tool":"run_shell_command","decision":"allow"}],"default":"deny","defaultReason":"not this one"}`)
				p := startRefProvider(t, providerOptions{PolicyFile: policy})
				h := newHelperServer(t, "helper") // a stdio child whose environment is read
				args := append([]string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url}, h.writable()...)
				env := append(isolatedSettingsEnv(t), envGuardToken+"="+providerTestToken)
				entries := []map[string]any{h.acpEntry(t)}
				if source == "settings" {
					settings, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": map[string]any{
						m.settingsKey: e.url + m.path, "headers": map[string]string{"X-Test-Secret": "Bearer ${RMCP_TEST_SECRET}"}}}})
					args = append(args, "--settings", writeSettings(t, string(settings)))
					env = append(env, "RMCP_TEST_SECRET="+secret)
				} else if source == ".mcp.json" {
					// Claude's form; approved in ~/.qwen/mcpApprovals.json
					// for this config, and trusted by the operator.
					typ := map[string]string{mcpTransportHTTP: "http", mcpTransportSSE: "sse"}[m.transport]
					entry := map[string]any{"type": typ, "url": e.url + m.path, "headers": map[string]any{"X-Test-Secret": "Bearer ${RMCP_TEST_SECRET}"}}
					b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": entry}})
					mustWrite(t, filepath.Join(dir, projectMCPFileName), string(b))
					home := strings.TrimPrefix(env[0], "HOME=")
					approvals, _ := json.Marshal(map[string]any{dir: map[string]any{"everything": map[string]string{
						"hash": hashMCPServerConfig(normalizeClaudeMCPServer(entry)), "status": "approved"}}})
					writeFileAll(t, filepath.Join(home, qwenDirName, mcpApprovalsFileName), string(approvals))
					args = append(args, "--trust-workspace-settings")
					env = append(env, "RMCP_TEST_SECRET="+secret)
				} else {
					entries = append(entries, map[string]any{"type": m.transport, "name": "everything", "url": e.url + m.path,
						"headers": []map[string]string{{"name": "X-Test-Secret", "value": "Bearer " + secret}}})
				}
				c := startACP(t, nil, args, env...)
				c.mustCall(methodInitialize, initializeParams(""), nil)
				sid := newMCPSession(t, c, dir, entries...)
				c.prompt(sid, "call mcp__everything__echo {\"message\":\"hi there\"}\n"+
					"call mcp__everything__get-sum {\"a\":1,\"b\":2}\n"+
					"call run_shell_command {\"command\":\"cat /proc/self/environ > shell-environ\"}", "")

				ups := c.sessionUpdates(sid)
				if got := agentText(ups); got != "mcp__everything__echo: completed\nmcp__everything__get-sum: denied\nrun_shell_command: completed\n" {
					t.Errorf("model answer = %q", got)
				}
				if got := e.toolCalls(); !slices.Equal(got, []string{"echo"}) {
					t.Errorf("tools/call on the server's side = %q, want only echo", got)
				}
				_, text, _ := callOutcome(ups, firstToolCall(t, ups).ToolCallID)
				if !strings.Contains(text, "Echo: hi there") {
					t.Errorf("echo result = %q", text)
				}
				if got := e.headerValues("X-Test-Secret"); len(got) == 0 || slices.ContainsFunc(got, func(v string) bool { return v != "Bearer "+secret }) {
					t.Errorf("X-Test-Secret the server received = %q", got)
				}
				// Every child's environment while the session lives, the
				// environments the helper and the shell wrote, every
				// event and the agent's log.
				seen := map[string]string{}
				for _, pid := range descendants(t, c.pid) {
					b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
					seen[fmt.Sprintf("environment of child %d", pid)] = string(b)
				}
				for name, path := range map[string]string{"helper's environment": h.envFile, "shell's environment": filepath.Join(dir, "shell-environ")} {
					b, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					seen[name] = string(b)
				}
				c.mu.Lock()
				all, _ := json.Marshal(c.updates)
				c.mu.Unlock()
				seen["session updates"], seen["agent log"] = string(all), c.stderrText()
				for name, s := range seen {
					if strings.Contains(s, secret) || strings.Contains(s, "RMCP_TEST_SECRET=") {
						t.Errorf("%s holds the header's secret: %q", name, s[max(0, strings.Index(s, "RMCP")-40):min(len(s), strings.Index(s, "RMCP")+60)])
					}
				}
			})
		}
	}
}

// Under serve, a remote server's calls leave from serve: the child lists
// the tools and asks for each allowed call over its channel, serve sends
// exactly the calls the provider allowed, with the header's secret, and no
// child's environment (nor its tools') holds the secret.
func TestServeRemoteMCPThroughServe(t *testing.T) {
	const secret = "rmcp-serve-secret-77aa"
	f := newFakeRemoteMCP(t)
	prov := newTestProvider(t)
	prov.verdict = func(tool string, args json.RawMessage) (int, bool, string) {
		if tool == "mcp__remote__echo" && strings.Contains(string(args), `"no"`) {
			return 200, false, "not this text"
		}
		return 200, true, ""
	}
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	// An http hook's allowedEnvVars are secrets too: it never fires here
	// (yolo asks nothing), but its variable must reach no child.
	const hookSecret = "hook-serve-secret-88bb"
	hook := map[string]any{"type": "http", "url": "http://127.0.0.1:1/hook", "headers": map[string]string{"X-Key": "$HOOK_SERVE_SECRET"}, "allowedEnvVars": []string{"HOOK_SERVE_SECRET"}}
	settings, _ := json.Marshal(map[string]any{"tools": map[string]string{"approvalMode": "yolo"}, "mcpServers": map[string]any{"remote": map[string]any{
		"httpUrl": f.srv.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer $RMCP_SERVE_SECRET"}}},
		"hooks": map[string]any{hookEventNotification: []any{map[string]any{"hooks": []any{hook}}}}})
	i := slices.Index(args, "--settings")
	args[i+1] = writeSettings(t, string(settings)) // yolo, as guardArgs' own
	sp := startServe(t, args, tokenEnv, "RMCP_SERVE_SECRET="+secret, "HOOK_SERVE_SECRET="+hookSecret)
	r := sp.do(t, "POST", "/session", "")
	var created newSessionResponse
	if r.status != 200 || decodeStrict(r.body, &created) != nil {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	body := `{"prompt":[{"type":"text","text":"call mcp__remote__echo {\"text\":\"yes\"}\ncall mcp__remote__echo {\"text\":\"no\"}\ncall run_shell_command {\"command\":\"env > env.out\"}"}]}`
	if r := sp.do(t, "POST", "/session/"+created.SessionID+"/prompt", body); r.status != 202 {
		t.Fatalf("prompt = %d %s", r.status, r.body)
	}
	envOut := filepath.Join(ws, "env.out")
	deadline := time.Now().Add(testTimeout(30 * time.Second))
	for data, _ := os.ReadFile(envOut); len(data) == 0; data, _ = os.ReadFile(envOut) {
		if time.Now().After(deadline) {
			t.Fatalf("run_shell_command wrote no environment\n%s", sp.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := f.calls(mcpMethodToolsCall); n != 1 {
		t.Errorf("the remote server received %d tools/call, want the allowed one\n%s\nreceived: %d initialize", n, sp.stderr.String(), f.calls(mcpMethodInitialize))
	}
	if h := f.headersOf(mcpMethodToolsCall); h.Get("Authorization") != "Bearer "+secret {
		t.Errorf("Authorization the server received = %q", h.Get("Authorization"))
	}
	shellEnv, _ := os.ReadFile(envOut)
	seen := map[string]string{"the shell's environment": string(shellEnv)}
	for _, pid := range descendants(t, sp.cmd.Process.Pid) {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		seen[fmt.Sprintf("environment of %d", pid)] = string(raw)
	}
	for where, text := range seen {
		if strings.Contains(text, secret) || strings.Contains(text, "RMCP_SERVE_SECRET=") {
			t.Errorf("%s holds the header's secret", where)
		}
		if strings.Contains(text, hookSecret) {
			t.Errorf("%s holds the http hook's variable", where)
		}
	}
}

// serve's child reaches a remote server only through serve: it lists the
// tools and asks for the allowed call over its channel, never contacts the
// server itself, and nothing it sends on the channel carries the header's
// value, even with the variable in its own environment.
func TestManagedChildRemoteMCPThroughParent(t *testing.T) {
	const secret = "rmcp-child-secret-31c4"
	f := newFakeRemoteMCP(t)
	settings, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"remote": map[string]any{
		"httpUrl": f.srv.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer $RMCP_CHILD_SECRET"}}}})
	var rp recordingParent
	parent := rp.handler(func(method string, params json.RawMessage) (any, *rpcError) {
		switch method {
		case methodMCPList:
			return map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}, nil
		case methodMCPCall:
			return map[string]any{"status": statusCompleted, "output": "echo via serve"}, nil
		}
		return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
	})
	c := startACP(t, parent, []string{"--settings", writeSettings(t, string(settings))}, append(slices.Clone(managedEnv), "RMCP_CHILD_SECRET="+secret)...)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := newMCPSession(t, c, t.TempDir())
	c.prompt(sid, `call mcp__remote__echo {"text":"hi"}`, "p1")
	ups := c.sessionUpdates(sid)
	if got := agentText(ups); got != "mcp__remote__echo: completed\n" {
		t.Errorf("model answer = %q", got)
	}
	if _, text, _ := callOutcome(ups, firstToolCall(t, ups).ToolCallID); text != "echo via serve" {
		t.Errorf("result = %q", text)
	}
	if n := f.calls(mcpMethodInitialize); n != 0 {
		t.Errorf("the child contacted the remote server itself (%d initialize)", n)
	}
	traffic := rp.requests()
	var list, call int
	for _, m := range traffic {
		if strings.Contains(m, secret) {
			t.Errorf("the channel carried the header's value: %s", m)
		}
		switch {
		case strings.HasPrefix(m, methodMCPList+" "):
			list++
		case strings.HasPrefix(m, methodMCPCall+" "):
			call++
			if !strings.Contains(m, `"server":"remote"`) || !strings.Contains(m, `"tool":"echo"`) || !strings.Contains(m, `"arguments":{"text":"hi"}`) {
				t.Errorf("call = %s", m)
			}
		}
	}
	if list != 1 || call != 1 {
		t.Errorf("channel requests: %d list, %d call; want one each: %q", list, call, traffic)
	}
	c.mu.Lock()
	all, _ := json.Marshal(c.updates)
	c.mu.Unlock()
	if strings.Contains(string(all), secret) {
		t.Error("a session update carried the header's value")
	}
}
