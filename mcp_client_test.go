// mcp_client_test.go drives real stdio MCP servers: the test binary itself plays
// the server (the "mcp-server" test role), started by a real acpguard acp or by the
// session code in process.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperTools are the default tools, listed helperMCPPageSize per page.
var helperTools = []map[string]any{
	{"name": "write", "description": "Writes content to path (relative to the cwd).", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}},
	{"name": "crash", "description": "Exits in the middle of the call.", "inputSchema": map[string]any{"type": "object"}},
	{"name": "hang", "description": "Never answers.", "inputSchema": map[string]any{"type": "object"}},
	{"name": "fail", "description": "Answers isError.", "inputSchema": map[string]any{"type": "object"}},
	{"name": "garbage", "description": "Answers a line that is not JSON.", "inputSchema": map[string]any{"type": "object"}},
	{"name": "reject", "description": "Answers a JSON-RPC error.", "inputSchema": map[string]any{"type": "object"}},
	{"name": "echo", "title": "Echo", "description": "Returns text.", "annotations": map[string]any{"readOnlyHint": true}, "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
}

// serveHelperMCP is a stdio MCP server that returns when in ends.
func serveHelperMCP(in io.Reader, out io.Writer) int {
	logf := func(format string, a ...any) {
		f, err := os.OpenFile(os.Getenv(envHelperLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, format+"\n", a...)
		f.Close()
	}
	logf("start %d", os.Getpid())
	if p := os.Getenv(envHelperEnvFile); p != "" {
		b, _ := os.ReadFile("/proc/self/environ")
		os.WriteFile(p, b, 0o600)
	}
	if os.Getenv(envHelperChild) == "1" {
		child := exec.Command("sleep", "60")
		child.Env = []string{} // the helper is not acpguard: no scrubbing rule applies
		if child.Start() == nil {
			logf("child %d", child.Process.Pid)
		}
	}
	tools := helperTools
	if raw := os.Getenv(envHelperTools); raw != "" {
		tools = nil
		json.Unmarshal([]byte(raw), &tools)
	}
	send := func(msg map[string]any) {
		msg["jsonrpc"] = "2.0"
		if res, ok := msg["result"].(map[string]any); ok && os.Getenv(envHelperExtra) == "1" {
			res["vendorExtra"] = map[string]any{"build": 7}
		}
		b, _ := json.Marshal(msg)
		out.Write(append(b, '\n'))
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			logf("unreadable %q", sc.Text())
			continue
		}
		switch m.Method {
		case "":
			var r struct {
				Roots []struct{ URI string } `json:"roots"`
			}
			json.Unmarshal(m.Result, &r)
			for _, root := range r.Roots {
				logf("root %s", root.URI)
			}
		case mcpMethodInitialize:
			var p struct {
				ProtocolVersion string            `json:"protocolVersion"`
				ClientInfo      map[string]string `json:"clientInfo"`
			}
			json.Unmarshal(m.Params, &p)
			logf("initialize %s %s", p.ProtocolVersion, p.ClientInfo["name"])
			if os.Getenv(envHelperNoInit) == "1" {
				continue
			}
			caps := map[string]any{"tools": map[string]any{}, "x-custom": map[string]any{}}
			if os.Getenv(envHelperNoCap) == "1" {
				delete(caps, "tools")
			}
			send(map[string]any{"id": m.ID, "result": map[string]any{"protocolVersion": p.ProtocolVersion,
				"capabilities": caps, "serverInfo": map[string]any{"name": "helper", "version": "1"}}})
		case mcpMethodInitialized:
			logf("initialized")
			send(map[string]any{"id": "roots-1", "method": mcpMethodRootsList})
		case mcpMethodCancelled:
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
				Reason    string          `json:"reason"`
			}
			json.Unmarshal(m.Params, &p)
			logf("cancelled %s %t", p.RequestID, p.Reason != "")
		case mcpMethodToolsList:
			var p struct {
				Cursor string `json:"cursor"`
			}
			json.Unmarshal(m.Params, &p)
			logf("tools/list %q", p.Cursor)
			if os.Getenv(envHelperListErr) == "1" {
				send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
				continue
			}
			start, _ := strconv.Atoi(p.Cursor)
			end := min(start+helperMCPPageSize, len(tools))
			res := map[string]any{"tools": tools[start:end]}
			if end < len(tools) {
				res["nextCursor"] = strconv.Itoa(end)
			}
			send(map[string]any{"id": m.ID, "result": res})
		case mcpMethodToolsCall:
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			json.Unmarshal(m.Params, &p)
			logf("tools/call %s %s", p.Name, p.Arguments)
			var args map[string]any
			json.Unmarshal(p.Arguments, &args)
			text := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
			switch p.Name {
			case "write":
				path, _ := args["path"].(string)
				content, _ := args["content"].(string)
				os.WriteFile(path, []byte(content), 0o600)
				send(map[string]any{"id": m.ID, "result": map[string]any{"content": text("wrote " + path)}})
			case "crash":
				return 3
			case "hang":
			case "fail":
				send(map[string]any{"id": m.ID, "result": map[string]any{"content": text("it went wrong"), "isError": true}})
			case "garbage":
				out.Write([]byte("this is not json\n"))
			case "reject":
				send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32602, "message": "bad arguments"}})
			default:
				s, _ := args["text"].(string)
				send(map[string]any{"id": m.ID, "result": map[string]any{"content": text("echo: " + s), "structuredContent": map[string]any{"text": s}}})
			}
		default:
			logf("other %s", m.Method)
			if m.ID != nil {
				send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32601, "message": "no"}})
			}
		}
	}
	return 0
}

func callByTool(t *testing.T, updates []toolUpdate, tool string) []toolUpdate {
	t.Helper()
	var out []toolUpdate
	for _, u := range updates {
		if u.SessionUpdate == "tool_call" && u.Meta["toolName"] == tool {
			out = append(out, u)
		}
	}
	return out
}

func TestMCPManagedGuardDecisions(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(map[string]any) (any, *rpcError)
		calls    int
		modelSay string
	}{
		{"allow", allow, 1, "mcp__helper__write: completed\n"},
		{"deny", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": false, "reason": "no MCP writes"}, nil
		}, 0, "mcp__helper__write: denied\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log prepareLog
			h := newHelperServer(t, "helper")
			c := startManaged(t, &log, tt.answer, h.writable()...)
			dir := t.TempDir()
			sid := newMCPSession(t, c, dir, h.acpEntry(t))
			target := filepath.Join(dir, "out.txt")
			c.prompt(sid, fmt.Sprintf(`call mcp__helper__write {"path":%q,"content":"hi"}`, target), "p1")

			if got := len(h.events("tools/call")); got != tt.calls {
				t.Errorf("tools/call on the wire = %d, want %d", got, tt.calls)
			}
			if fileExists(target) != (tt.calls == 1) {
				t.Errorf("file written = %v, want %v", fileExists(target), tt.calls == 1)
			}
			reqs := log.all()
			if len(reqs) != 1 {
				t.Fatalf("guard requests = %d, want 1", len(reqs))
			}
			args, _ := reqs[0]["arguments"].(map[string]any)
			if reqs[0]["toolName"] != "mcp__helper__write" || args["path"] != target || args["content"] != "hi" {
				t.Errorf("prepare request = %v", reqs[0])
			}
			ups := c.sessionUpdates(sid)
			if got := agentText(ups); got != tt.modelSay {
				t.Errorf("model answer = %q, want %q", got, tt.modelSay)
			}
			tc := firstToolCall(t, ups)
			if tc.Kind != kindOther || tc.Title != "write (MCP server helper)" {
				t.Errorf("tool_call kind %q title %q", tc.Kind, tc.Title)
			}
			_, text, errType := callOutcome(ups, tc.ToolCallID)
			if tt.calls == 1 && text != "wrote "+target {
				t.Errorf("result text = %q", text)
			}
			if tt.calls == 0 && (text != "no MCP writes" || errType != errTypeExecutionDenied) {
				t.Errorf("denied: text %q, errorType %q", text, errType)
			}
			// The handshake: one start, the current protocol, every page listed, roots answered.
			if got := h.events("initialize "); fmt.Sprint(got) != fmt.Sprint([]string{"initialize " + mcpProtocolVersion + " acpguard"}) {
				t.Errorf("initialize events = %q", got)
			}
			if got := len(h.events("tools/list")); got != 3 {
				t.Errorf("tools/list pages = %d, want 3", got)
			}
			if got := h.events("root "); fmt.Sprint(got) != fmt.Sprint([]string{"root file://" + dir}) {
				t.Errorf("roots the server received = %q", got)
			}
		})
	}
}

func TestMCPCrashMidCallIsNotRetried(t *testing.T) {
	var log prepareLog
	h := newHelperServer(t, "helper")
	c := startManaged(t, &log, allow, h.writable()...)
	dir := t.TempDir()
	sid := newMCPSession(t, c, dir, h.acpEntry(t))
	c.prompt(sid, "call mcp__helper__crash {}\ncall mcp__helper__echo {\"text\":\"after\"}", "p1")
	c.prompt(sid, `call mcp__helper__echo {"text":"later"}`, "p2")

	if got := h.events("tools/call"); len(got) != 1 || !strings.HasPrefix(got[0], "tools/call crash") {
		t.Errorf("tools/call on the wire = %q, want exactly the crashing one", got)
	}
	if got := len(h.events("start")); got != 1 {
		t.Errorf("server starts = %d, want 1 (no reconnect)", got)
	}
	if got := len(log.all()); got != 1 {
		t.Errorf("guard requests = %d, want 1 (calls to a broken server ask nobody)", got)
	}
	ups := c.sessionUpdates(sid)
	crash := callByTool(t, ups, "mcp__helper__crash")
	if len(crash) != 1 {
		t.Fatalf("crash calls = %d", len(crash))
	}
	statuses, text, errType := callOutcome(ups, crash[0].ToolCallID)
	if strings.Join(statuses, ",") != "pending,in_progress,failed" || errType != errTypeExecutionFailed ||
		!strings.Contains(text, `MCP server "helper" failed during tools/call "crash"`) ||
		!strings.Contains(text, "the outcome is unknown and the call was not retried") {
		t.Errorf("crash call: statuses %v, errorType %q, text %q", statuses, errType, text)
	}
	echoes := callByTool(t, ups, "mcp__helper__echo")
	if len(echoes) != 2 {
		t.Fatalf("echo calls = %d, want 2", len(echoes))
	}
	for _, e := range echoes {
		statuses, text, _ := callOutcome(ups, e.ToolCallID)
		if strings.Join(statuses, ",") != "pending,failed" || !strings.Contains(text, `MCP server "helper" is unavailable for the rest of this session`) {
			t.Errorf("call after the crash: statuses %v, text %q", statuses, text)
		}
	}
}

// TestMCPStandaloneProvider runs MCP calls under the reference provider in
// standalone required mode: one decision per call, and only the allowed one
// reaches the server.
func TestMCPStandaloneProvider(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	mustWrite(t, policy, `{"rules":[{"tool":"mcp__helper__echo","decision":"allow"}],"default":"deny","defaultReason":"not this one"}`)
	audit := filepath.Join(dir, "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: policy, AuditPath: audit})
	h := newHelperServer(t, "helper")
	c := startACP(t, nil, append([]string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url}, h.writable()...),
		envGuardToken+"="+providerTestToken)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := newMCPSession(t, c, t.TempDir(), h.acpEntry(t))
	target := filepath.Join(dir, "out.txt")
	c.prompt(sid, fmt.Sprintf("call mcp__helper__echo {\"text\":\"hi\"}\ncall mcp__helper__write {\"path\":%q,\"content\":\"x\"}", target), "")
	if got := agentText(c.sessionUpdates(sid)); got != "mcp__helper__echo: completed\nmcp__helper__write: denied\n" {
		t.Errorf("model answer = %q", got)
	}
	if got := h.events("tools/call"); len(got) != 1 || !strings.HasPrefix(got[0], "tools/call echo") {
		t.Errorf("tools/call on the wire = %q, want only echo", got)
	}
	if fileExists(target) {
		t.Error("the denied MCP call wrote its file")
	}
	records := readProviderAudit(t, audit)
	if len(records) != 2 || records[0].ToolName != "mcp__helper__echo" || records[0].Decision != "allow" ||
		records[1].ToolName != "mcp__helper__write" || records[1].Decision != "deny" {
		t.Errorf("provider decisions = %+v, want one allow for echo and one deny for write", records)
	}
}

func TestMCPServerEnvironmentIsScrubbed(t *testing.T) {
	const guardToken, apiKey = "guard-token-must-not-leak", "sk-model-key-must-not-leak"
	c := startACP(t, nil, nil, envGuardToken+"="+guardToken, envServerToken+"=server-token", "OPENAI_API_KEY="+apiKey)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	h := newHelperServer(t, "helper")
	entry := h.acpEntry(t)
	entry["env"] = append(entry["env"].([]map[string]string),
		map[string]string{"name": envGuardToken, "value": "reintroduced"},
		map[string]string{"name": "LD_PRELOAD", "value": "/reintroduced.so"},
		map[string]string{"name": "MCP_OWN_SETTING", "value": "kept"})
	newMCPSession(t, c, t.TempDir(), entry)
	b, err := os.ReadFile(h.envFile)
	if err != nil {
		t.Fatalf("the server wrote no environment: %v", err)
	}
	environ := strings.Split(string(b), "\x00")
	has := func(prefix string) bool {
		for _, kv := range environ {
			if strings.HasPrefix(kv, prefix) {
				return true
			}
		}
		return false
	}
	if !has("MCP_OWN_SETTING=kept") {
		t.Errorf("the entry's own variable is missing: %q", environ)
	}
	for _, prefix := range append(removedEnvNames[:], removedEnvPrefix) {
		if prefix != removedEnvPrefix {
			prefix += "="
		}
		if has(prefix) {
			t.Errorf("the server's environment has %s", prefix)
		}
	}
	if bytes.Contains(b, []byte(guardToken)) || bytes.Contains(b, []byte("reintroduced")) {
		t.Errorf("a secret or a reintroduced name reached the server: %q", environ)
	}
	t.Run("model API key", func(t *testing.T) {
		if !removedEnvName("OPENAI_API_KEY") {
			t.Skip("envscrub.go does not scrub OPENAI_API_KEY yet (the model client issue adds it)")
		}
		if bytes.Contains(b, []byte(apiKey)) {
			t.Errorf("the model API key reached the server")
		}
	})
}

func TestMCPServersEndWithTheRuntime(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	h := newHelperServer(t, "helper")
	h.env[envHelperChild] = "1"
	sid := newMCPSession(t, c, t.TempDir(), h.acpEntry(t))
	pids := append(h.pids(t, "start"), h.pids(t, "child")...)
	if len(pids) != 2 {
		t.Fatalf("server and child pids = %v", pids)
	}
	for _, pid := range pids {
		if !processAlive(pid) {
			t.Fatalf("process %d is not running", pid)
		}
	}
	// A call the server never answers is running when stdin closes.
	c.start(methodSessionPrompt, promptParams(sid, "call mcp__helper__hang {}", ""))
	h.waitEvent(t, "tools/call hang")
	c.stdin.Close()
	<-c.done
	for _, pid := range pids {
		deadline := time.Now().Add(testTimeout(30 * time.Second))
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if processAlive(pid) {
			t.Errorf("process %d outlived the runtime", pid)
		}
	}
}

func TestMCPCancelDuringCall(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	h := newHelperServer(t, "helper")
	sid := newMCPSession(t, c, t.TempDir(), h.acpEntry(t))
	resp := c.start(methodSessionPrompt, promptParams(sid, "call mcp__helper__hang {}", ""))
	h.waitEvent(t, "tools/call hang")
	c.send(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]any{"sessionId": sid}})
	if r := <-resp; !strings.Contains(string(r.Result), stopCancelled) {
		t.Fatalf("prompt answer = %s %+v", r.Result, r.Error)
	}
	ups := c.sessionUpdates(sid)
	hang := callByTool(t, ups, "mcp__helper__hang")
	if len(hang) != 1 {
		t.Fatalf("hang calls = %d", len(hang))
	}
	if _, text, _ := callOutcome(ups, hang[0].ToolCallID); !strings.Contains(text, "was cancelled while running; its outcome is unknown") {
		t.Errorf("cancelled call text = %q", text)
	}
	// A cancel is not a transport failure: the server keeps serving, and
	// the cancelled call is not sent again.
	c.prompt(sid, `call mcp__helper__echo {"text":"next"}`, "")
	if got := agentText(c.sessionUpdates(sid)); !strings.HasSuffix(got, "mcp__helper__echo: completed\n") {
		t.Errorf("model answers = %q", got)
	}
	if got := len(h.events("tools/call hang")); got != 1 {
		t.Errorf("hang sent %d times", got)
	}
	// The server was told the client stopped waiting, once.
	if got := h.events("cancelled"); len(got) != 1 || !strings.HasSuffix(got[0], " true") {
		t.Errorf("notifications/cancelled seen %q, want one with a reason", got)
	}
}

func TestMCPRefusedAndFailedServersAreReported(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	h := newHelperServer(t, "helper")
	sid := newMCPSession(t, c, dir,
		map[string]any{"type": "websocket", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []any{}},
		map[string]any{"type": "stdio", "name": "missing", "command": filepath.Join(dir, "no-such-server"), "args": []any{}},
		// Its tools would be mcp__helper__evil__<tool>, which a rule for the
		// server "helper" would match.
		map[string]any{"type": "stdio", "name": "helper__evil", "command": filepath.Join(dir, "no-such-server"), "args": []any{}},
		h.acpEntry(t))
	// The first prompt shows the notices even when it is a slash command,
	// and /tools lists the MCP tools the session has.
	c.prompt(sid, "/tools", "")
	if text := agentText(c.sessionUpdates(sid)); !strings.Contains(text, `MCP server "missing" failed to start`) {
		t.Errorf("the notices did not come with the first prompt, /tools: %q", text)
	}
	c.prompt(sid, `call mcp__helper__echo {"text":"hi"}`, "")
	text := agentText(c.sessionUpdates(sid))
	for _, want := range []string{
		`MCP server "web" was refused: transport "websocket" is not supported`,
		`MCP server "missing" failed to start and its tools are not available`,
		`MCP server "helper__evil" was refused: MCP server name "helper__evil" cannot be told apart by permission rules`,
		"run_shell_command, mcp__helper__",
		"mcp__helper__echo: completed\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("agent text %q lacks %q", text, want)
		}
	}
	c.prompt(sid, "hello", "")
	if got := agentText(c.sessionUpdates(sid)); strings.Count(got, `"web" was refused`) != 1 {
		t.Errorf("the notice was not shown exactly once: %q", got)
	}
	if !strings.Contains(c.stderrText(), `MCP server \"web\" was refused`) {
		t.Errorf("the refusal was not logged: %s", c.stderrText())
	}
	// A malformed entry is refused on its own; the session starts.
	if r := c.call(methodSessionNew, map[string]any{"cwd": dir, "mcpServers": []any{map[string]any{"name": "x", "command": "y", "args": []any{}, "bogus": 1}}}); r.Error != nil {
		t.Errorf("malformed entry failed the whole session/new: %+v", r.Error)
	}
}

// In-process sessions: the session code with a short call timeout, real
// server processes, and runTool with no guard.

type mcpTestSession struct {
	set  *mcpSet
	env  *toolEnv
	logs *syncBuffer
}

func startTestMCP(t *testing.T, opts mcpOptions, configs ...mcpServerConfig) *mcpTestSession {
	t.Helper()
	logs := &syncBuffer{}
	opts.Cwd = t.TempDir()
	opts.Env = newProcEnv(os.Environ())
	opts.Log = slog.New(slog.NewTextHandler(logs, nil))
	set := startMCPServers(context.Background(), configs, opts, nil)
	t.Cleanup(set.close)
	return &mcpTestSession{set: set, logs: logs, env: &toolEnv{
		SessionID: "s", PromptID: "p", Cwd: opts.Cwd, Env: opts.Env, Observer: nopObserver{}, Extra: set.extra(),
	}}
}

func (s *mcpTestSession) run(name, args string) toolResult {
	return runTool(context.Background(), s.env, toolCall{ID: "call_1", Name: name, Args: json.RawMessage(args)})
}

func TestMCPCallOutcomes(t *testing.T) {
	tests := []struct {
		tool    string
		status  string
		text    string
		broken  bool
		errType string
	}{
		{"echo", statusCompleted, "echo: x", false, ""},
		{"fail", statusFailed, "it went wrong", false, errTypeExecutionFailed},
		{"reject", statusFailed, `MCP server "h" answered tools/call "reject" with error -32602: bad arguments`, false, errTypeExecutionFailed},
		{"hang", statusFailed, `MCP server "h" failed during tools/call "hang" (no answer within 2s); the outcome is unknown and the call was not retried`, true, errTypeExecutionFailed},
		{"garbage", statusFailed, `MCP server "h" failed during tools/call "garbage" (it sent a message that is not JSON-RPC); the outcome is unknown and the call was not retried`, true, errTypeExecutionFailed},
		{"crash", statusFailed, "the outcome is unknown and the call was not retried", true, errTypeExecutionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			h := newHelperServer(t, "h")
			s := startTestMCP(t, mcpOptions{CallTimeout: testTimeout(2 * time.Second)}, h.config(t)) // hang waits it out
			res := s.run("mcp__h__"+tt.tool, `{"text":"x"}`)
			if res.Status != tt.status || !strings.Contains(res.Output, tt.text) || res.ErrorType != tt.errType {
				t.Errorf("result = %+v, want %s %q %q", res, tt.status, tt.text, tt.errType)
			}
			next := s.run("mcp__h__echo", `{"text":"y"}`)
			if tt.broken {
				if next.Status != statusFailed || next.ErrorType != errTypeInvalidParams || !strings.Contains(next.Output, `MCP server "h" is unavailable for the rest of this session`) {
					t.Errorf("call after a transport failure = %+v", next)
				}
			} else if next.Status != statusCompleted || next.Output != "echo: y" {
				t.Errorf("call after a definite answer = %+v", next)
			}
			wantCalls := 2
			if tt.broken {
				wantCalls = 1
			}
			if got := len(h.events("tools/call")); got != wantCalls {
				t.Errorf("tools/call on the wire = %d, want %d", got, wantCalls)
			}
			if got := len(h.events("start")); got != 1 {
				t.Errorf("server starts = %d, want 1", got)
			}
		})
	}
}

func TestMCPEchoResult(t *testing.T) {
	h := newHelperServer(t, "h")
	s := startTestMCP(t, mcpOptions{}, h.config(t))
	spec := s.set.tools["mcp__h__echo"]
	if spec == nil || spec.Kind != kindRead || !spec.ReadOnly || spec.Description != "Returns text." {
		t.Fatalf("echo spec = %+v", spec)
	}
	if schema := spec.parametersSchema(); !strings.Contains(string(schema), `"text":{"type":"string"}`) {
		t.Errorf("input schema = %s", schema)
	}
	res := s.run("mcp__h__echo", `{"text":"hi","n":1.50}`)
	raw, _ := json.Marshal(res.RawOutput)
	if res.Output != "echo: hi" || !strings.Contains(string(raw), `"structuredContent":{"text":"hi"}`) {
		t.Errorf("result %q, raw output %s", res.Output, raw)
	}
	if got := h.events("tools/call"); fmt.Sprint(got) != `[tools/call echo {"n":1.50,"text":"hi"}]` {
		t.Errorf("the server got %q: arguments must arrive as given", got)
	}
	if res := s.run("mcp__h__echo", `[1]`); res.ErrorType != errTypeInvalidParams {
		t.Errorf("non-object arguments = %+v", res)
	}
}

func TestMCPStartupFailures(t *testing.T) {
	noInit := newHelperServer(t, "slow")
	noInit.env[envHelperNoInit] = "1"
	badTools := newHelperServer(t, "bad")
	badTools.env[envHelperTools] = `[{"name":"x","inputSchema":{"type":"object"},"unknownField":1}]`
	good := newHelperServer(t, "good")
	// The slow server waits out the whole bound, so it is long enough for
	// the others to start on a busy machine and short enough for the suite.
	s := startTestMCP(t, mcpOptions{StartupTimeout: testTimeout(5 * time.Second)},
		noInit.config(t), badTools.config(t), good.config(t), mcpServerConfig{Name: "nameless-command"})
	notices := strings.Join(s.set.takeNotices(), "\n")
	for _, want := range []string{
		`MCP server "slow" failed to start and its tools are not available: initialize: no answer within the startup timeout of 5s`,
		`MCP server "bad" failed to start and its tools are not available: tools/list: malformed result: json: unknown field "unknownField"`,
		`MCP server "nameless-command" failed to start and its tools are not available: MCP server "nameless-command" has no command`,
	} {
		if !strings.Contains(notices, want) {
			t.Errorf("notices lack %q:\n%s", want, notices)
		}
	}
	if len(s.set.tools) != len(helperTools) {
		t.Errorf("tools = %d, want the good server's %d", len(s.set.tools), len(helperTools))
	}
	if len(s.set.takeNotices()) != 0 {
		t.Error("notices were returned twice")
	}
	for _, pid := range append(noInit.pids(t, "start"), badTools.pids(t, "start")...) {
		waitGone(t, pid)
	}
}

// A server that declares no tools capability is still asked for its tools;
// refusing the list then means it has none, not that it failed.
func TestMCPServerWithoutToolsCapability(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		tools       int
		notice, log string
	}{
		{"undeclared, lists tools", map[string]string{envHelperNoCap: "1"}, len(helperTools), "", ""},
		{"undeclared, refuses the list", map[string]string{envHelperNoCap: "1", envHelperListErr: "1"}, 0, "",
			`msg="MCP server offers no tools: it declares no tools capability and answered tools/list with an error" server=h code=-32601 message="Method not found"`},
		{"declared, refuses the list", map[string]string{envHelperListErr: "1"}, 0,
			`MCP server "h" failed to start and its tools are not available: tools/list: json-rpc error -32601: Method not found`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHelperServer(t, "h")
			maps.Copy(h.env, tt.env)
			s := startTestMCP(t, mcpOptions{}, h.config(t))
			if got := len(s.set.tools); got != tt.tools {
				t.Errorf("tools = %d, want %d", got, tt.tools)
			}
			if got := len(h.events("tools/list")); got == 0 {
				t.Error("tools/list was never sent")
			}
			notices := s.set.takeNotices()
			if tt.notice == "" && len(notices) != 0 || tt.notice != "" && (len(notices) != 1 || notices[0] != tt.notice) {
				t.Errorf("notices = %q, want %q", notices, tt.notice)
			}
			if tt.log != "" && !strings.Contains(s.logs.String(), tt.log) {
				t.Errorf("log lacks %s:\n%s", tt.log, s.logs.String())
			}
		})
	}
}

// A server whose results carry members the schema does not name (its Result
// has an index signature) starts, lists its tools and answers calls.
func TestMCPResultsWithExtraMembers(t *testing.T) {
	h := newHelperServer(t, "h")
	h.env[envHelperExtra] = "1"
	s := startTestMCP(t, mcpOptions{}, h.config(t))
	if notices := s.set.takeNotices(); len(notices) != 0 || len(s.set.tools) != len(helperTools) {
		t.Fatalf("tools = %d, notices %q", len(s.set.tools), notices)
	}
	for _, tt := range []struct{ tool, status, output string }{
		{"echo", statusCompleted, "echo: x"},
		{"fail", statusFailed, "it went wrong"},
		{"echo", statusCompleted, "echo: x"}, // the server is not broken
	} {
		if res := s.run("mcp__h__"+tt.tool, `{"text":"x"}`); res.Status != tt.status || res.Output != tt.output {
			t.Errorf("%s = %s %q, want %s %q", tt.tool, res.Status, res.Output, tt.status, tt.output)
		}
	}
}

// Only the top level of a result is open: what the client reads, and
// everything nested in it, stays strict.
func TestDecodeMCPResultMembers(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"initialize": func(b []byte) error { _, err := decodeInitializeResult(b); return err },
		"tools/list": func(b []byte) error { _, err := decodeToolsList(b); return err },
		"tools/call": func(b []byte) error { _, err := decodeCallResult(b); return err },
	}
	const initOK = `"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}`
	tests := []struct {
		decoder, raw, err string
	}{
		{"initialize", `{` + initOK + `,"vendorExtra":1}`, ""},
		{"initialize", `{` + initOK + `,"ProtocolVersion":"1999-01-01"}`, ""}, // names are exact: this one is extra
		{"initialize", `{` + initOK + `,"protocolVersion":"2025-06-18"}`, `duplicate field "protocolVersion"`},
		{"initialize", `{"protocolVersion":2025,"capabilities":{}}`, "cannot unmarshal number"},
		{"initialize", `null`, "the result is null, not an object"},
		{"tools/list", `{"tools":[{"name":"a","inputSchema":{}}],"vendorExtra":{"x":[1]}}`, ""},
		{"tools/list", `{"tools":[{"name":"a","inputSchema":{},"handler":"x"}],"vendorExtra":1}`, `unknown field "handler"`},
		{"tools/list", `{"tools":[{"name":"a","inputSchema":{},"annotations":{"safe":true}}],"vendorExtra":1}`, `unknown field "safe"`},
		{"tools/list", `{"tools":[],"vendorExtra":{"a":1,"a":2}}`, `duplicate field "a" in vendorExtra`},
		{"tools/list", `{"tools":{},"vendorExtra":1}`, "cannot unmarshal object"},
		{"tools/list", `{"Tools":[{"name":"a","inputSchema":{}}]}`, "no tools array"},
		{"tools/call", `{"content":[{"type":"text","text":"x"}],"vendorExtra":1}`, ""},
		{"tools/call", `{"content":[{"type":"text","text":"x","color":"red"}],"vendorExtra":1}`, `content 0: json: unknown field "color"`},
		{"tools/call", `{"content":[],"isError":"yes","vendorExtra":1}`, "cannot unmarshal string"},
		{"tools/call", `{"content":[],"content":[{"type":"text","text":"x"}]}`, `duplicate field "content"`},
		{"tools/call", `{"content":[]} {}`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.decoder+" "+tt.raw, func(t *testing.T) {
			err := decoders[tt.decoder]([]byte(tt.raw))
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

// mcpVector is one server result from testdata/mcp and what decoding it gives.
type mcpVector struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
	Status string          `json:"status"` // call results
	Output string          `json:"output"` // call results
	Tools  int             `json:"tools"`  // tools/list results
	Cursor string          `json:"cursor"` // tools/list results
	Error  string          `json:"error"`  // a substring of the error, when decoding fails
}

func loadMCPVectors(t *testing.T, file string) []mcpVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "mcp", file))
	if err != nil {
		t.Fatal(err)
	}
	var vs []mcpVector
	if err := decodeStrict(b, &vs); err != nil || len(vs) == 0 {
		t.Fatalf("%s: %v", file, err)
	}
	return vs
}

func checkVectorError(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
	return true
}

func TestDecodeCallResultVectors(t *testing.T) {
	for _, v := range loadMCPVectors(t, "call-results.json") {
		t.Run(v.Name, func(t *testing.T) {
			res, err := decodeCallResult(v.Result)
			if checkVectorError(t, err, v.Error) {
				return
			}
			if res.Status != v.Status || res.Output != v.Output {
				t.Errorf("= %s %q, want %s %q", res.Status, res.Output, v.Status, v.Output)
			}
			if v.Status == statusFailed && res.ErrorType != errTypeExecutionFailed {
				t.Errorf("error type %q", res.ErrorType)
			}
		})
	}
}

func TestDecodeToolsListVectors(t *testing.T) {
	for _, v := range loadMCPVectors(t, "tools-list-results.json") {
		t.Run(v.Name, func(t *testing.T) {
			res, err := decodeToolsList(v.Result)
			if checkVectorError(t, err, v.Error) {
				return
			}
			cursor := ""
			if res.NextCursor != nil {
				cursor = *res.NextCursor
			}
			if len(res.Tools) != v.Tools || cursor != v.Cursor {
				t.Errorf("%d tools, cursor %q; want %d, %q", len(res.Tools), cursor, v.Tools, v.Cursor)
			}
		})
	}
}

func TestMCPToolKindAndTitle(t *testing.T) {
	tests := []struct {
		def      string
		kind     string
		readOnly bool
		title    string
	}{
		{`{"name":"t","inputSchema":{}}`, kindOther, false, "t (MCP server s)"},
		{`{"name":"t","title":"Nice","inputSchema":{},"annotations":{"title":"Hint","readOnlyHint":true}}`, kindRead, true, "Nice (MCP server s)"},
		{`{"name":"t","inputSchema":{},"annotations":{"title":"Hint","readOnlyHint":true,"openWorldHint":true}}`, mcpKindFetch, true, "Hint (MCP server s)"},
		{`{"name":"t","inputSchema":{},"annotations":{"readOnlyHint":false,"openWorldHint":true}}`, kindOther, false, "t (MCP server s)"},
	}
	for _, tt := range tests {
		var def mcpToolDef
		if err := decodeStrict([]byte(tt.def), &def); err != nil {
			t.Fatal(err)
		}
		spec := (&mcpServer{name: "s"}).spec("mcp__s__t", def)
		if spec.Kind != tt.kind || spec.ReadOnly != tt.readOnly || spec.title(nil) != tt.title || spec.Params != nil {
			t.Errorf("%s: kind %q readOnly %v title %q params %v", tt.def, spec.Kind, spec.ReadOnly, spec.title(nil), spec.Params)
		}
	}
}

// FuzzMCPDecoders feeds bytes to every MCP decoder: a server's initialize,
// tools/list and tools/call results, a session/new mcpServers entry, and the
// settings' mcpServers object. No panic, and what is accepted is well-formed.
func FuzzMCPDecoders(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"2"}`,
		`{"tools":[{"name":"a","title":"A","inputSchema":{},"annotations":{"readOnlyHint":true,"openWorldHint":false},"icons":[],"execution":{"taskSupport":"forbidden"},"_meta":{}}]}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1},"isError":true}`,
		`{"content":[{"type":"resource","resource":{"uri":"u","blob":"AA=="}}]}`,
		`{"content":[{"type":"audio","data":"","mimeType":"audio/wav","annotations":{"priority":1}}]}`,
		`{"tools":null}`, `null`, `{"content":[null]}`,
		`{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"},"instructions":"x"}`,
		`{"name":"a","command":"/bin/a","args":["x"],"env":[{"name":"K","value":"v"}]}`,
		`{"type":"sse","name":"w","url":"http://127.0.0.1:1","headers":[{"name":"h","value":"v"}]}`,
		`{"a":{"command":"x","args":[],"env":{"K":"v"},"timeout":60000}}`,
		`{"content":[{"type":"text","text":"x"}],"vendorExtra":{"a":[1]}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"},"vendorExtra":1}`,
		`{"w":{"httpUrl":"http://127.0.0.1:1/mcp","headers":{"A":"b"}},"my server":{"command":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	for _, file := range []string{"call-results.json", "tools-list-results.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mcp", file))
		if err != nil {
			f.Fatal(err)
		}
		var vs []mcpVector
		if err := json.Unmarshal(b, &vs); err != nil {
			f.Fatal(err)
		}
		for _, v := range vs {
			f.Add([]byte(v.Result))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if init, err := decodeInitializeResult(data); err == nil && !slices.Contains(mcpAcceptedVersions, init.ProtocolVersion) {
			t.Fatalf("accepted protocol version %q", init.ProtocolVersion)
		}
		for _, c := range parseACPMCPServers([]json.RawMessage{data}).configs {
			if c.validate() != nil {
				t.Fatalf("accepted an invalid server %+v", c)
			}
		}
		if configs, err := parseSettingsMCPServers(data); err == nil {
			for _, c := range configs {
				if c.validate() != nil {
					t.Fatalf("accepted an invalid settings server %+v", c)
				}
			}
		}
		if res, err := decodeToolsList(data); err == nil {
			for _, tool := range res.Tools {
				if tool.Name == "" || len(tool.InputSchema) == 0 || tool.InputSchema[0] != '{' {
					t.Fatalf("accepted a tool without name or object schema: %+v", tool)
				}
			}
		}
		res, err := decodeCallResult(data)
		if err != nil {
			return
		}
		if res.Status != statusCompleted && res.Status != statusFailed {
			t.Fatalf("status %q", res.Status)
		}
		if len(res.Output) > maxToolOutput+200 {
			t.Fatalf("output of %d bytes", len(res.Output))
		}
		if _, err := json.Marshal(res.RawOutput); err != nil {
			t.Fatalf("raw output cannot be encoded: %v", err)
		}
	})
}

// BenchmarkMCPCall measures one guarded-path-free MCP tool call through
// runTool: one tools/call round trip to a real server process.
func BenchmarkMCPCall(b *testing.B) {
	h := &helperServer{name: "h", log: filepath.Join(b.TempDir(), "wire.log"), env: map[string]string{}}
	logs := &syncBuffer{}
	set := startMCPServers(context.Background(), []mcpServerConfig{h.config(b)}, mcpOptions{
		Cwd: b.TempDir(), Env: newProcEnv(os.Environ()), Log: slog.New(slog.NewTextHandler(logs, nil)),
	}, nil)
	defer set.close()
	env := &toolEnv{Cwd: "/", Observer: nopObserver{}, Extra: set.extra()}
	call := toolCall{ID: "call_1", Name: "mcp__h__echo", Args: json.RawMessage(`{"text":"x"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res := runTool(context.Background(), env, call); res.Status != statusCompleted {
			b.Fatalf("%+v", res)
		}
	}
}
