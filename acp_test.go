// acp_test.go drives the built binary as an ACP agent over pipes, as an
// editor would, and plays the managed parent that answers guard requests.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestACPInitializeAndErrors(t *testing.T) {
	c := startACP(t, nil, nil)
	var res struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			Meta map[string]string `json:"_meta"`
		} `json:"agentCapabilities"`
		AgentInfo struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &res)
	if res.ProtocolVersion != 1 || res.AgentInfo.Name != "acpguard" || res.AgentInfo.Version == "" {
		t.Errorf("initialize result = %+v", res)
	}
	if res.AgentCapabilities.Meta != nil {
		t.Errorf("unmanaged agent acknowledged a guard: %v", res.AgentCapabilities.Meta)
	}
	if r := c.call("no/such_method", map[string]any{}); r.Error == nil || r.Error.Code != rpcMethodNotFound {
		t.Errorf("unknown method: %+v", r)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "no/such_notification", "params": map[string]any{}})
	c.writeLine(`{"jsonrpc":"2.0","id":77,"method":`) // malformed: the agent keeps serving
	if r := c.call(methodSessionNew, map[string]any{"cwd": "relative/dir", "mcpServers": []any{}}); r.Error == nil || r.Error.Code != rpcInvalidParams || !strings.Contains(r.Error.Message, `"relative/dir"`) {
		t.Errorf("relative cwd: %+v", r)
	}
	if r := c.call(methodSessionNew, map[string]any{"cwd": "/no/such/dir", "mcpServers": []any{}}); r.Error == nil || !strings.Contains(r.Error.Message, `"/no/such/dir" is not an existing directory`) {
		t.Errorf("missing cwd: %+v", r)
	}
	sid := c.newSession(t.TempDir())
	c.mu.Lock()
	nullErrors := fmt.Sprint(c.nullErrors)
	c.mu.Unlock()
	if nullErrors != fmt.Sprint([]int{rpcParseError}) {
		t.Errorf("error responses with id null = %s, want one %d for the malformed line", nullErrors, rpcParseError)
	}
	if stop := c.prompt(sid, "hello there", ""); stop != stopEndTurn {
		t.Errorf("stopReason = %q", stop)
	}
	if got := agentText(c.sessionUpdates(sid)); got != "hello there" {
		t.Errorf("echo = %q", got)
	}
}

func TestACPPlainPathRunsTool(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	stop := c.prompt(sid, `call write_file {"file_path":"out.txt","content":"hi"}`, "")
	if stop != stopEndTurn {
		t.Fatalf("stopReason = %q", stop)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("out.txt = %q, %v", b, err)
	}
	ups := c.sessionUpdates(sid)
	tc := firstToolCall(t, ups)
	if !strings.HasPrefix(tc.ToolCallID, "call_") || tc.Status != "pending" || tc.Kind != "edit" || tc.Title == "" {
		t.Errorf("tool_call = %+v", tc)
	}
	if tc.RawInput["file_path"] != filepath.Join(dir, "out.txt") || tc.Meta["toolName"] != "write_file" {
		t.Errorf("tool_call rawInput/_meta = %v / %v", tc.RawInput, tc.Meta)
	}
	statuses, _, _ := callOutcome(ups, tc.ToolCallID)
	if strings.Join(statuses, ",") != "pending,in_progress,completed" {
		t.Errorf("statuses = %v", statuses)
	}
	if got := agentText(ups); got != "write_file: completed\n" {
		t.Errorf("model answer = %q", got)
	}
	if n := c.countRequests(methodGuardPrepare); n != 0 {
		t.Errorf("plain path sent %d guard requests", n)
	}
}

// A managed child needs no capability: nothing but serve can write to its
// socket. It still refuses a session before initialize.
func TestACPManagedInitializeWithoutCapability(t *testing.T) {
	for _, capability := range []string{"", "any-value-qwen-code-would-send"} {
		c := startACP(t, nil, nil, managedEnv...)
		if r := c.call(methodSessionNew, map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}); r.Error == nil {
			t.Fatalf("session/new before initialize succeeded: %s", r.Result)
		}
		var res struct {
			AgentCapabilities struct {
				Meta map[string]any `json:"_meta"`
			} `json:"agentCapabilities"`
		}
		c.mustCall(methodInitialize, initializeParams(capability), &res)
		if got, _ := res.AgentCapabilities.Meta[metaGuardReady].(string); got != privateGuardMarker {
			t.Errorf("capability %q: acknowledgement = %q, want %q", capability, got, privateGuardMarker)
		}
		c.newSession(t.TempDir())
	}
}

// A child that takes decisions or model output from its parent refuses to
// start unless stdin and stdout are a Unix socket: a pipe can be opened for
// writing through /proc/<pid>/fd by any process of the same user.
func TestACPManagedChildNeedsSocket(t *testing.T) {
	tests := []struct {
		name      string
		args, env []string
		stdinPipe bool // else a socket
		want      string
	}{
		{"marker, pipes", nil, managedEnv, true, `stdin is a "pipe", not a Unix socket`},
		{"marker, socket in, pipe out", nil, managedEnv, false, `stdout is a "pipe", not a Unix socket`},
		{"model parent, pipes", []string{"--model", modelParent}, nil, true, `stdin is a "pipe", not a Unix socket`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
			defer cancel()
			cmd := acpguardCmd(t, ctx, append([]string{"acp"}, tt.args...), tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var in io.WriteCloser
			if tt.stdinPipe {
				w, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				in = w
			} else {
				ends, err := newChannel()
				if err != nil {
					t.Fatal(err)
				}
				defer ends.closeAll()
				cmd.Stdin = ends.childStdin
				in = channelWriter{ends.write}
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// An initialize it would answer if it ran.
			fmt.Fprintf(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
			answer, _ := io.ReadAll(out)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
				t.Fatalf("exit = %v, want status %d", err, exitUsage)
			}
			if len(answer) != 0 {
				t.Errorf("the agent answered %q before refusing", answer)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr = %q, want it to say %q", stderr.String(), tt.want)
			}
		})
	}
}

func TestACPManagedChildRefusesUnknownMarker(t *testing.T) {
	code, _, stderr := runAcpguard(t, []string{"acp"}, envPrivateGuard+"=required-v2", envPrivateCapability+"=x")
	if code != exitUsage || !strings.Contains(stderr, `"required-v2"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestACPManagedGuardDecisions(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(map[string]any) (any, *rpcError)
		written  bool
		text     string
		modelSay string
	}{
		{"allow", allow, true, "", "write_file: completed\n"},
		{"deny with reason", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": false, "reason": "writes are frozen today"}, nil
		}, false, "writes are frozen today", "write_file: denied\n"},
		{"deny without reason", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": false}, nil
		}, false, denyDefaultReason, "write_file: denied\n"},
		{"deny with blank reason", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": false, "reason": "  "}, nil
		}, false, denyDefaultReason, "write_file: denied\n"},
		{"allowed as a string", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": "true"}, nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"unknown field", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": true, "grant": "all"}, nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"reason on an allow", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": true, "reason": "ok"}, nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"allowed in two cases", func(map[string]any) (any, *rpcError) {
			return json.RawMessage(`{"allowed":false,"Allowed":true}`), nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"null reason on an allow", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": true, "reason": nil}, nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"reason with control characters", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": false, "reason": "line1\nline2\u0007"}, nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"reason of 501 units", func(map[string]any) (any, *rpcError) {
			return map[string]any{"allowed": false, "reason": strings.Repeat("a", 501)}, nil
		}, false, guardFailedReason, "write_file: denied\n"},
		{"error response", func(map[string]any) (any, *rpcError) {
			return nil, &rpcError{Code: rpcInternalError, Message: "provider down"}
		}, false, guardFailedReason, "write_file: denied\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log prepareLog
			c := startManaged(t, &log, tt.answer)
			dir := t.TempDir()
			sid := c.newYoloSession(dir)
			if stop := c.prompt(sid, `call write_file {"file_path":"sub/../out.txt","content":"hi"}`, "prompt-1"); stop != stopEndTurn {
				t.Fatalf("stopReason = %q", stop)
			}
			target := filepath.Join(dir, "out.txt")
			if fileExists(target) != tt.written {
				t.Errorf("file written = %v, want %v", fileExists(target), tt.written)
			}
			reqs := log.all()
			if len(reqs) != 1 {
				t.Fatalf("guard requests = %d, want 1", len(reqs))
			}
			ups := c.sessionUpdates(sid)
			tc := firstToolCall(t, ups)
			want := map[string]any{"sessionId": sid, "promptId": "prompt-1", "toolCallId": tc.ToolCallID, "toolName": "write_file"}
			for k, v := range want {
				if reqs[0][k] != v {
					t.Errorf("prepare %s = %v, want %v", k, reqs[0][k], v)
				}
			}
			args, _ := reqs[0]["arguments"].(map[string]any)
			if args["file_path"] != target || args["content"] != "hi" {
				t.Errorf("prepare arguments = %v, want the normalized path %q", args, target)
			}
			statuses, text, errType := callOutcome(ups, tc.ToolCallID)
			if tt.written {
				if strings.Join(statuses, ",") != "pending,in_progress,completed" {
					t.Errorf("statuses = %v", statuses)
				}
			} else {
				if strings.Join(statuses, ",") != "pending,failed" || text != tt.text || errType != errTypeExecutionDenied {
					t.Errorf("statuses %v, text %q, errorType %q; want failed %q execution_denied", statuses, text, errType, tt.text)
				}
			}
			if got := agentText(ups); got != tt.modelSay {
				t.Errorf("model answer = %q, want %q", got, tt.modelSay)
			}
		})
	}
}

func TestACPManagedPromptWithoutIdentityRunsNoTool(t *testing.T) {
	var log prepareLog
	c := startManaged(t, &log, allow)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	c.prompt(sid, `call write_file {"file_path":"out.txt","content":"hi"}`, "")
	if fileExists(filepath.Join(dir, "out.txt")) {
		t.Error("a managed prompt without identity wrote a file")
	}
	if n := len(log.all()); n != 0 {
		t.Errorf("guard requests = %d, want 0", n)
	}
	tc := firstToolCall(t, c.sessionUpdates(sid))
	if _, text, _ := callOutcome(c.sessionUpdates(sid), tc.ToolCallID); text != guardFailedReason {
		t.Errorf("result text = %q", text)
	}
}

func TestACPManagedNestedAgentRejected(t *testing.T) {
	var log prepareLog
	c := startManaged(t, &log, allow)
	sid := c.newYoloSession(t.TempDir())
	c.prompt(sid, "call agent {\"prompt\":\"do it\"}\ncall send_message {}", "p")
	ups := c.sessionUpdates(sid)
	n := 0
	for _, u := range ups {
		if u.SessionUpdate == "tool_call_update" && u.Status == "failed" {
			n++
			if u.Text != "Managed external tool guard v1 does not support nested or delegated agent execution." {
				t.Errorf("rejection text = %q", u.Text)
			}
		}
	}
	if n != 2 {
		t.Errorf("failed calls = %d, want 2", n)
	}
	if len(log.all()) != 0 {
		t.Errorf("nested agent names reached the guard")
	}
}

func TestACPCancelDuringGuard(t *testing.T) {
	var log prepareLog
	release := make(chan struct{})
	c := startManaged(t, &log, func(map[string]any) (any, *rpcError) {
		<-release // answer only after the prompt was cancelled
		return map[string]any{"allowed": true}, nil
	})
	defer close(release)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	resp := c.start(methodSessionPrompt, promptParams(sid, `call write_file {"file_path":"out.txt","content":"hi"}`, "p1"))
	c.waitFor("the guard request", func(reqs []acpRequest, _ []json.RawMessage) bool { return len(reqs) == 1 })
	c.send(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]any{"sessionId": sid}})
	r := <-resp
	var res struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(r.Result, &res)
	if r.Error != nil || res.StopReason != stopCancelled {
		t.Fatalf("prompt answer = %+v %s", r.Error, r.Result)
	}
	release <- struct{}{} // the late allow must change nothing
	time.Sleep(100 * time.Millisecond)
	if fileExists(filepath.Join(dir, "out.txt")) {
		t.Fatal("the call ran after a cancel during its guard")
	}
	// The parent was told to stop deciding: serve then ends its provider call.
	c.mu.Lock()
	var notices string
	for _, n := range c.notices {
		notices += n.Method + " " + string(n.Params) + "\n"
	}
	c.mu.Unlock()
	if !strings.Contains(notices, rpcCancelRequest+` {"requestId":`) {
		t.Errorf("agent notifications %s, want a %s for the abandoned prepare", notices, rpcCancelRequest)
	}
}

func TestACPCancelBeforeGuard(t *testing.T) {
	var log prepareLog
	c := startManaged(t, &log, allow)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	marker := filepath.Join(dir, "started")
	resp := c.start(methodSessionPrompt, promptParams(sid,
		"call run_shell_command {\"command\":\"touch started; sleep 30\"}\ncall write_file {\"file_path\":\"second.txt\",\"content\":\"x\"}", "p1"))
	waitForFile(t, marker)
	c.send(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]any{"sessionId": sid}})
	select {
	case r := <-resp:
		if !strings.Contains(string(r.Result), stopCancelled) {
			t.Fatalf("prompt answer = %s %+v", r.Result, r.Error)
		}
	case <-time.After(testTimeout(20 * time.Second)):
		t.Fatal("cancel did not end the running shell command")
	}
	if n := len(log.all()); n != 1 {
		t.Errorf("guard requests = %d, want 1 (the second call must not reach the guard)", n)
	}
	if fileExists(filepath.Join(dir, "second.txt")) {
		t.Error("a call after the cancel ran")
	}
}

func TestACPBackgroundShellGuardedOnce(t *testing.T) {
	var log prepareLog
	c := startManaged(t, &log, allow)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	c.prompt(sid, `call run_shell_command {"command":"echo $$ > bg.pid; exec sleep 60","is_background":true}`, "p1")
	if n := len(log.all()); n != 1 {
		t.Fatalf("guard requests = %d, want 1", n)
	}
	args, _ := log.all()[0]["arguments"].(map[string]any)
	if args["is_background"] != true {
		t.Errorf("the guard did not see is_background: %v", args)
	}
	pidFile := filepath.Join(dir, "bg.pid")
	deadline := time.Now().Add(testTimeout(10 * time.Second))
	var pid int
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
			fmt.Sscan(string(b), &pid)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 || !processAlive(pid) {
		t.Fatalf("background process %d not running", pid)
	}
	c.stdin.Close() // the runtime ends its sessions' processes when stdin closes
	<-c.done
	deadline = time.Now().Add(testTimeout(5 * time.Second))
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if processAlive(pid) {
		t.Fatalf("background process %d outlived the runtime", pid)
	}
	// A client that did not ask for background reports (an editor) gets
	// none, though a background process started and ended.
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.notices {
		if n.Method == methodSessionBackground {
			t.Errorf("the client, which did not ask, got %s %s", n.Method, n.Params)
		}
	}
}

func TestACPStandaloneProvider(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit})
	c := startACP(t, nil, []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url},
		envGuardToken+"="+providerTestToken)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	c.prompt(sid, "call write_file {\"file_path\":\"ok.txt\",\"content\":\"x\"}\n"+
		"call run_shell_command {\"command\":\"sudo touch denied.txt\"}", "")
	if !fileExists(filepath.Join(dir, "ok.txt")) {
		t.Error("the allowed write did not happen")
	}
	if fileExists(filepath.Join(dir, "denied.txt")) {
		t.Error("the denied command ran")
	}
	ups := c.sessionUpdates(sid)
	if got := agentText(ups); got != "write_file: completed\nrun_shell_command: denied\n" {
		t.Errorf("model answer = %q", got)
	}
	var shellID string
	for _, u := range ups {
		if u.SessionUpdate == "tool_call" && u.Meta["toolName"] == "run_shell_command" {
			shellID = u.ToolCallID
		}
	}
	if _, text, errType := callOutcome(ups, shellID); text != "Destructive and network shell commands are not allowed by policy" || errType != errTypeExecutionDenied {
		t.Errorf("denied call: text %q, errorType %q", text, errType)
	}
	records := readProviderAudit(t, audit)
	if len(records) != 2 {
		t.Fatalf("provider decisions = %d, want 2 (exactly one per call)", len(records))
	}
	for _, r := range records {
		if r.SessionID != sid || r.PromptID == "" || !strings.HasPrefix(r.ToolCallID, "call_") {
			t.Errorf("audit identity = %+v", r)
		}
	}
}

// A provider restarted under acpguard's own user listens on a new socket:
// a standalone acp denies calls to it (identity) until SIGHUP runs the
// handshake again, as serve does.
func TestACPStandaloneSIGHUPMeetsARestartedProvider(t *testing.T) {
	first := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	c := startACP(t, nil, []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + first.url},
		envGuardToken+"="+providerTestToken)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	write := func(name string) string {
		before := len(c.sessionUpdates(sid))
		c.prompt(sid, "call write_file {\"file_path\":\""+name+"\",\"content\":\"x\"}", "")
		return agentText(c.sessionUpdates(sid)[before:])
	}
	if got := write("one.txt"); got != "write_file: completed\n" {
		t.Fatalf("first provider: %q", got)
	}
	first.stop()
	startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", Listen: mustListen(strings.TrimPrefix(first.url, "http://"))})
	if got := write("two.txt"); got != "write_file: denied\n" || fileExists(filepath.Join(dir, "two.txt")) {
		t.Fatalf("restarted provider before SIGHUP: %q, want denied and no file", got)
	}
	if err := syscall.Kill(c.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGHUP's handshake", func() bool { return strings.Contains(c.stderrText(), logHUPAccepted) })
	if got := write("three.txt"); got != "write_file: completed\n" || !fileExists(filepath.Join(dir, "three.txt")) {
		t.Fatalf("restarted provider after SIGHUP: %q, want completed", got)
	}
}

func TestACPStandaloneHandshakeFailureExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	code, stdout, stderr := runAcpguard(t, []string{"acp", "--external-tool-guard-mode=required",
		"--external-tool-guard-endpoint=http://" + addr, "--external-tool-guard-startup-wait-ms=100"}, envGuardToken+"="+providerTestToken)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != exitRuntime || stdout != "" || !strings.HasPrefix(lines[len(lines)-1], "acpguard: error: provider handshake") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if strings.Contains(stderr, providerTestToken) {
		t.Fatal("the token appeared in an error")
	}
}

// BenchmarkACPScriptedTurn times one prompt turn with one write_file call
// through the real binary: plain path, and managed with a parent that allows.
func BenchmarkACPScriptedTurn(b *testing.B) {
	for _, managed := range []bool{false, true} {
		name := "plain"
		if managed {
			name = "managed-allow"
		}
		b.Run(name, func(b *testing.B) {
			var c *acpClient
			if managed {
				c = startManaged(b, &prepareLog{}, allow)
			} else {
				c = startACP(b, nil, nil)
				c.mustCall(methodInitialize, initializeParams(""), nil)
			}
			sid := c.newYoloSession(b.TempDir())
			// The child's CPU per turn: the test process's descendants are
			// the child alone (and what it starts).
			childCPU := func() (d time.Duration) {
				for _, pid := range descendants(b, os.Getpid()) {
					if c, err := procCPU(pid); err == nil {
						d += c
					}
				}
				return d
			}
			cpu0 := childCPU()
			b.ResetTimer()
			for i := range b.N {
				c.prompt(sid, fmt.Sprintf(`call write_file {"file_path":"f%d.txt","content":"x"}`, i), "p")
			}
			b.StopTimer()
			b.ReportMetric(float64((childCPU()-cpu0).Microseconds())/float64(b.N), "child-cpu-us/op")
		})
	}
}

func TestACPOpenAIModelKeyNeverReachesTools(t *testing.T) {
	const key = "sk-test-secret-key-0123456789"
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,`+
				`"tool_calls":[{"id":"call_model_1","type":"function","function":{"name":"run_shell_command","arguments":"{\"command\":\"env > env.txt\"}"}}]}}]}`)
			return
		}
		io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"all done"}}]}`)
	}))
	defer srv.Close()
	c := startACP(t, nil, nil, envModelBaseURL+"="+srv.URL+"/v1", envModelName+"=test-model", envModelKey+"="+key)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	if stop := c.prompt(sid, "show me the environment", ""); stop != stopEndTurn {
		t.Fatalf("stopReason = %q", stop)
	}
	got, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatalf("the model's shell call did not run: %v", err)
	}
	if strings.Contains(string(got), key) || strings.Contains(string(got), envModelKey) {
		t.Fatal("the model API key reached a tool's environment")
	}
	ups := c.sessionUpdates(sid)
	if tc := firstToolCall(t, ups); tc.ToolCallID != "call_model_1" {
		t.Errorf("toolCallId = %q, want the model's id", tc.ToolCallID)
	}
	if text := agentText(ups); text != "all done" {
		t.Errorf("model text = %q", text)
	}
	if strings.Contains(c.stderrText(), key) {
		t.Error("the model API key appeared in the agent's log")
	}
}

// permissionParent answers guard requests with allow and permission
// requests with answer, counting both.
func permissionParent(log *prepareLog, perms *atomic.Int32, answer any) func(string, json.RawMessage) (any, *rpcError) {
	return func(method string, params json.RawMessage) (any, *rpcError) {
		switch method {
		case methodGuardPrepare:
			log.add(params)
			return map[string]any{"allowed": true}, nil
		case methodRequestPermission:
			perms.Add(1)
			return answer, nil
		}
		return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
	}
}

func startManagedWith(t *testing.T, handler func(string, json.RawMessage) (any, *rpcError), args ...string) *acpClient {
	c := startACP(t, handler, args, managedEnv...)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	return c
}

func selected(option string) any {
	return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": option}}
}

func TestACPPermissionRoundTrips(t *testing.T) {
	tests := []struct {
		name     string
		answer   any
		written  bool
		perms    int32 // permission requests for two identical calls
		prepares int
		modelSay string
	}{
		{"allow once", selected(optionProceedOnce), true, 2, 2, "write_file: completed\nwrite_file: completed\n"},
		// "_meta is allowed on every object": the SDK's answers may carry it.
		{"allow once with _meta", map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": optionProceedOnce, "_meta": map[string]any{"x": 1}}, "_meta": map[string]any{}},
			true, 2, 2, "write_file: completed\nwrite_file: completed\n"},
		{"allow all edits", selected(optionProceedAlways), true, 1, 2, "write_file: completed\nwrite_file: completed\n"},
		{"reject", selected(optionCancel), false, 2, 0, ""},
		// acpguard's ids before Qwen's, accepted for a release.
		{"legacy allow_once", selected("allow_once"), true, 2, 2, "write_file: completed\nwrite_file: completed\n"},
		{"legacy allow_always", selected("allow_always"), true, 1, 2, "write_file: completed\nwrite_file: completed\n"},
		{"legacy reject_once", selected("reject_once"), false, 2, 0, ""},
		// The shell's always option is not offered for an edit.
		{"option not offered", selected(optionProceedAlwaysProject), false, 2, 0, ""},
		{"unknown option", selected("allow_forever"), false, 2, 0, ""},
		{"cancelled", map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, false, 2, 0, ""},
		{"malformed", map[string]any{"outcome": "yes"}, false, 2, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log prepareLog
			var perms atomic.Int32
			c := startManagedWith(t, permissionParent(&log, &perms, tt.answer))
			dir := t.TempDir()
			sid := c.newSession(dir) // default mode: writes ask
			line := `call write_file {"file_path":"out.txt","content":"hi"}`
			c.prompt(sid, line+"\n"+line, "p1")
			if fileExists(filepath.Join(dir, "out.txt")) != tt.written {
				t.Errorf("file written = %v, want %v", !tt.written, tt.written)
			}
			if got := perms.Load(); got != tt.perms {
				t.Errorf("permission requests = %d, want %d", got, tt.perms)
			}
			if got := len(log.all()); got != tt.prepares {
				t.Errorf("guard requests = %d, want %d", got, tt.prepares)
			}
			if got := agentText(c.sessionUpdates(sid)); got != tt.modelSay {
				t.Errorf("model answer = %q, want %q", got, tt.modelSay)
			}
		})
	}
}

// TestACPPermissionOptionsAsQwen: session/request_permission offers Qwen
// Code's option ids, names and kinds: edits all at once, a shell command by
// its rule.
func TestACPPermissionOptionsAsQwen(t *testing.T) {
	var mu sync.Mutex
	var offered []string
	c := startManagedWith(t, func(method string, params json.RawMessage) (any, *rpcError) {
		switch method {
		case methodGuardPrepare:
			return map[string]any{"allowed": true}, nil
		case methodRequestPermission:
			var p struct {
				Options json.RawMessage `json:"options"`
			}
			_ = json.Unmarshal(params, &p)
			mu.Lock()
			offered = append(offered, string(p.Options))
			mu.Unlock()
			return selected(optionCancel), nil
		}
		return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
	})
	sid := c.newSession(t.TempDir())
	c.prompt(sid, `call write_file {"file_path":"out.txt","content":"hi"}`+"\n"+`call run_shell_command {"command":"touch made.txt"}`, "p1")
	want := []string{
		`[{"optionId":"proceed_always","name":"Allow All Edits","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`,
		`[{"optionId":"proceed_always_project","name":"Always Allow in project: Shell(touch made.txt)","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`,
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(offered, want) {
		t.Errorf("options offered:\n%s\nwant:\n%s", strings.Join(offered, "\n"), strings.Join(want, "\n"))
	}
}

func TestACPLayersBeforeGuardMakeNoProviderRequest(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/bash\necho 'hook says no' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSettings := func(body string) string {
		f := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name     string
		settings string
		mode     string
		prompt   string
		text     string
	}{
		{"deny rule", `{"tools":{"approvalMode":"yolo"},"permissions":{"deny":["Write(./blocked/**)"]}}`, "",
			`call write_file {"file_path":"blocked/x.txt","content":"x"}`, `tool "write_file" denied by permission rule "Write(./blocked/**)"`},
		{"plan mode", `{"tools":{"approvalMode":"plan"}}`, "",
			`call run_shell_command {"command":"touch made.txt"}`, `tool "run_shell_command" is not allowed in plan mode: only read-only tools run`},
		{"set_mode plan", `{"tools":{"approvalMode":"yolo"}}`, modePlan,
			`call write_file {"file_path":"made.txt","content":"x"}`, `tool "write_file" is not allowed in plan mode: only read-only tools run`},
		{"disabled tool", `{"tools":{"approvalMode":"yolo","disabled":["run_shell_command"]}}`, "",
			`call run_shell_command {"command":"touch made.txt"}`, `tool "run_shell_command" is disabled by settings (tools.disabled)`},
		// Refused as disabled whatever its arguments, not as invalid ones.
		{"disabled tool, bad arguments", `{"tools":{"approvalMode":"yolo","disabled":["run_shell_command"]}}`, "",
			`call run_shell_command {"cmd":"touch made.txt"}`, `tool "run_shell_command" is disabled by settings (tools.disabled)`},
		{"hook exit 2", `{"tools":{"approvalMode":"yolo"},"hooks":{"PreToolUse":[{"matcher":"run_shell_command","hooks":[{"type":"command","command":"` + hook + `"}]}]}}`, "",
			`call run_shell_command {"command":"touch made.txt"}`, "hook says no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log prepareLog
			var perms atomic.Int32
			c := startManagedWith(t, permissionParent(&log, &perms, selected(optionProceedOnce)), "--settings", writeSettings(tt.settings))
			work := t.TempDir()
			sid := c.newSession(work)
			if tt.mode != "" {
				c.mustCall(methodSessionSetMode, map[string]any{"sessionId": sid, "modeId": tt.mode}, nil)
			}
			c.prompt(sid, tt.prompt, "p1")
			if n := len(log.all()); n != 0 {
				t.Errorf("guard requests = %d, want 0", n)
			}
			if perms.Load() != 0 {
				t.Errorf("the user was asked")
			}
			for _, f := range []string{"made.txt", "blocked/x.txt"} {
				if fileExists(filepath.Join(work, f)) {
					t.Errorf("%s was created", f)
				}
			}
			ups := c.sessionUpdates(sid)
			tc := firstToolCall(t, ups)
			if _, text, errType := callOutcome(ups, tc.ToolCallID); !strings.Contains(text, tt.text) || errType != errTypeExecutionDenied {
				t.Errorf("result %q (%s), want %q (execution_denied)", text, errType, tt.text)
			}
		})
	}
}

func TestACPSlashCommands(t *testing.T) {
	settings := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(settings, []byte(`{"slashCommands":{"disabled":["tools"]}}`), 0o600)
	c := startACP(t, nil, []string{"--settings", settings})
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := c.newSession(t.TempDir())
	c.prompt(sid, "/help", "")
	c.prompt(sid, "/tools", "")
	text := agentText(c.sessionUpdates(sid))
	if !strings.Contains(text, "Slash commands: /help (this text).\n") || !strings.Contains(text, `"/tools" is disabled by settings`) {
		t.Errorf("agent text = %q (/help must not offer the disabled /tools)", text)
	}

	// The flag adds to the settings' list.
	f := startACP(t, nil, []string{"--settings", settings, "--disabled-slash-commands", "/help"})
	f.mustCall(methodInitialize, initializeParams(""), nil)
	fsid := f.newSession(t.TempDir())
	f.prompt(fsid, "/help", "")
	f.prompt(fsid, "/tools", "")
	if text := agentText(f.sessionUpdates(fsid)); !strings.Contains(text, `"/help" is disabled by settings`) || !strings.Contains(text, `"/tools" is disabled by settings`) {
		t.Errorf("with --disabled-slash-commands: agent text = %q", text)
	}

	m := startManagedWith(t, nil, "--allow-slash-command", "help")
	msid := m.newSession(t.TempDir())
	m.prompt(msid, "/help", "p1")
	m.prompt(msid, "/fork now", "p2")
	m.prompt(msid, "/tools", "p3")
	// A path is not a command: the model gets it (the scripted one echoes).
	m.prompt(msid, "/tmp/notes.txt contains the plan", "p4")
	text = agentText(m.sessionUpdates(msid))
	if !strings.Contains(text, "Slash commands: /help") || !strings.Contains(text, `"/fork" is not available in a managed session`) ||
		!strings.Contains(text, `"/tools" is not available in a managed session`) || !strings.Contains(text, "/tmp/notes.txt contains the plan") ||
		strings.Contains(text, "/tmp/notes.txt is not") || strings.Contains(text, "/tmp is not") {
		t.Errorf("managed agent text = %q", text)
	}
}

func TestACPBadLogFormatExit2(t *testing.T) {
	code, _, stderr := runAcpguard(t, []string{"acp", "--log-format", "xml"})
	if code != exitUsage || !strings.Contains(stderr, `--log-format "xml": must be text or json`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestACPBadSettingsExit2(t *testing.T) {
	tests := []struct{ settings, stderr string }{
		{`{"tools":{"aprovalMode":"yolo"}}`, `key "tools.aprovalMode": unknown key`},
		// Qwen Code's sign-in and tcp keys, which acpguard refuses by name.
		{`{"mcpServers":{"web":{"httpUrl":"http://127.0.0.1:1/mcp","oauth":{"enabled":true},"timeout":5000}}}`,
			`key "mcpServers.web.oauth": MCP server "web" uses OAuth, which acpguard does not support; remove oauth and give the token in headers ("Authorization": "Bearer $VAR")`},
		{`{"mcpServers":{"events":{"tcp":"127.0.0.1:1"}}}`,
			`key "mcpServers.events.tcp": MCP server "events" uses the tcp transport, which acpguard does not support; use httpUrl, url or command`},
	}
	for _, tt := range tests {
		f := filepath.Join(t.TempDir(), "s.json")
		os.WriteFile(f, []byte(tt.settings), 0o600)
		code, _, stderr := runAcpguard(t, []string{"acp", "--settings", f})
		if code != exitUsage || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("%s: exit %d, stderr %q", tt.settings, code, stderr)
		}
	}
}

// A settings server whose name is not a tool-name fragment runs, under the
// name session/new would give it.
func TestACPSettingsServerWithAnyName(t *testing.T) {
	h := newHelperServer(t, "my server")
	cmd, args := helperCommand(t)
	env := map[string]string{}
	for _, kv := range h.environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{h.name: map[string]any{"command": cmd, "args": args, "env": env}}})
	f := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(f, b, 0o600)
	c := startACP(t, nil, []string{"--settings", f})
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := newMCPSession(t, c, t.TempDir())
	c.prompt(sid, `call mcp__my_server__echo {"text":"hi"}`, "")
	if got := agentText(c.sessionUpdates(sid)); got != "mcp__my_server__echo: completed\n" {
		t.Errorf("model answer = %q", got)
	}
}

// TestOfficialACPSDK has the official ACP TypeScript SDK drive the agent
// (testdata/sdk/drive.mjs). .ci/run installs the SDK; elsewhere the test runs
// when `npm ci --prefix testdata/sdk` was run.
func TestOfficialACPSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	_, sdkErr := os.Stat("testdata/sdk/node_modules/@agentclientprotocol/sdk")
	if err != nil || sdkErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run this test: node %v, SDK %v", err, sdkErr)
		}
		t.Skip("node or the SDK is not installed: npm ci --prefix testdata/sdk")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(60*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drive.mjs", exe, t.TempDir())
	cmd.Dir = "testdata/sdk"
	cmd.Env = append(os.Environ(), roleEnv("main"), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok: the official ACP SDK drove acpguard acp") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestACPSessionCloseEndsItsProcesses(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	c.prompt(sid, `call run_shell_command {"command":"echo $$ > bg.pid; exec sleep 30","is_background":true}`, "")
	var pid int
	for deadline := time.Now().Add(testTimeout(10 * time.Second)); pid == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "bg.pid"))
		fmt.Sscan(string(b), &pid)
	}
	if pid == 0 {
		t.Fatal("the background process did not write bg.pid")
	}
	c.mustCall(methodSessionClose, map[string]any{"sessionId": sid}, nil)
	if !pidGone(pid, 5*time.Second) {
		t.Errorf("background process %d outlived session/close", pid)
	}
	if r := c.call(methodSessionClose, map[string]any{"sessionId": sid}); r.Error == nil || r.Error.Code != rpcNotFound {
		t.Errorf("second session/close = %+v, want -32002", r)
	}
	if r := c.call(methodSessionPrompt, promptParams(sid, "hi", "")); r.Error == nil {
		t.Errorf("prompt on a closed session succeeded")
	}
}

// TestPollableStdin: a pipe or socket on stdin is read through the poller
// (a read deadline works on it and interrupts a read with nothing to read),
// a regular file is left alone, and a file already polled is kept as is.
func TestPollableStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// os.Pipe is already polled: kept as is.
	if got := pollable(r); got != io.Reader(r) {
		t.Fatalf("an already polled pipe was replaced by %v", got)
	}
	// A blocking pipe, as a child inherits it.
	fds := make([]int, 2)
	if err := syscall.Pipe(fds); err != nil {
		t.Fatal(err)
	}
	br, bw := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "peer")
	defer bw.Close()
	if br.SetReadDeadline(time.Time{}) == nil {
		t.Fatal("the test pipe is already polled")
	}
	f, ok := pollable(br).(*os.File)
	if ok {
		defer keepOpen(br, f)()
	}
	if !ok || f.SetReadDeadline(time.Now().Add(20*time.Millisecond)) != nil {
		t.Fatalf("a blocking pipe is not read through the poller: %v", f)
	}
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on an empty polled pipe: %v, want a deadline error", err)
	}
	bw.Write([]byte("x\n"))
	f.SetReadDeadline(time.Time{})
	if b, err := bufio.NewReader(f).ReadString('\n'); b != "x\n" || err != nil {
		t.Fatalf("read %q, %v", b, err)
	}
	// A regular file: its flags may be shared, so it is left blocking.
	reg, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if got := pollable(reg); got != io.Reader(reg) {
		t.Fatalf("a regular file was replaced by %v", got)
	}
}

// pollableOriginals are files whose descriptor pollable or pollableOut
// handed to a second *os.File: kept reachable, so that their finalizers never
// close that number again once it belongs to something else.
var pollableOriginals []*os.File

// keepOpen keeps orig from closing the descriptor it shares with polled,
// and returns the one close of it.
func keepOpen(orig, polled *os.File) func() {
	pollableOriginals = append(pollableOriginals, orig)
	return func() { polled.Close() }
}

// TestPollableSocketStdout: serve hands a child one socket as stdin and
// stdout, one open file: making stdin non-blocking makes stdout so too, and
// stdout must then wait in the poller when the socket is full instead of
// failing with EAGAIN.
func TestPollableSocketStdout(t *testing.T) {
	// One socket as both stdin and stdout, as some clients start an agent.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	own, theirs := os.NewFile(uintptr(fds[0]), "client"), os.NewFile(uintptr(fds[1]), "stdin")
	defer own.Close()
	dup, err := syscall.Dup(int(theirs.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	in, out := theirs, os.NewFile(uintptr(dup), "stdout")
	polledIn, ok := pollable(in).(*os.File)
	if !ok {
		t.Fatal("stdin socket not made pollable")
	}
	defer keepOpen(in, polledIn)()
	// The original stdout now fails on a full socket...
	big := make([]byte, 8<<20)
	if _, err := out.Write(big); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("write to the shared, now non-blocking stdout: %v, want EAGAIN (the case pollableOut exists for)", err)
	}
	// ...and the one pollableOut returns waits for the reader.
	drained := make(chan int64)
	go func() {
		n, _ := io.Copy(io.Discard, own)
		drained <- n
	}()
	w, ok := pollableOut(out).(*os.File)
	if !ok || w == out {
		t.Fatal("pollableOut kept the blocking-mode stdout")
	}
	defer keepOpen(out, w)()
	if n, err := w.Write(big); err != nil || n != len(big) {
		t.Fatalf("write through pollableOut: %d, %v", n, err)
	}
	syscall.Shutdown(dup, syscall.SHUT_WR)
	select {
	case n := <-drained:
		if n < int64(len(big)) {
			t.Errorf("the reader got %d bytes, want at least %d", n, len(big))
		}
	case <-time.After(testTimeout(30 * time.Second)):
		t.Fatal("reader did not see the end")
	}
}

// TestACPCancelReadWithPrompt: a session/cancel written together with its
// session/prompt, before the prompt's handler can have started, still
// cancels it: no guard request, no tool.
func TestACPCancelReadWithPrompt(t *testing.T) {
	var log prepareLog
	c := startManaged(t, &log, allow)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	for i := range 10 {
		ch := c.startThenCancel(sid, promptParams(sid, fmt.Sprintf(`call write_file {"file_path":"ran%d.txt","content":"x"}`, i), fmt.Sprintf("p%d", i)))
		select {
		case r := <-ch:
			if r.Error != nil || !strings.Contains(string(r.Result), stopCancelled) {
				t.Fatalf("prompt %d answered %s %+v, want cancelled", i, r.Result, r.Error)
			}
		case <-time.After(testTimeout(20 * time.Second)):
			t.Fatalf("no answer to prompt %d", i)
		}
		if fileExists(filepath.Join(dir, fmt.Sprintf("ran%d.txt", i))) {
			t.Fatalf("prompt %d wrote its file after the cancel", i)
		}
	}
	if n := len(log.all()); n != 0 {
		t.Errorf("guard requests = %d, want 0", n)
	}
	// A cancel applies to prompts read before it, never to a later one.
	if got := c.prompt(sid, `call write_file {"file_path":"later.txt","content":"x"}`, "p-later"); got != stopEndTurn {
		t.Errorf("a prompt after the cancels ended %q", got)
	}
	if !fileExists(filepath.Join(dir, "later.txt")) {
		t.Error("the prompt after the cancels did not run its call")
	}
}

// TestACPToolOutcomeDetails: a failed shell command keeps its exit code in
// rawOutput beside its outcome, and a call skipped by a cancel is
// reported under its canonical name, never the model's alias.
func TestACPToolOutcomeDetails(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	c.prompt(sid, `call run_shell_command {"command":"echo out; exit 3"}`, "")
	var failed *toolUpdate
	for _, u := range c.sessionUpdates(sid) {
		if u.SessionUpdate == "tool_call_update" && u.Status == "failed" {
			failed = &u
		}
	}
	if failed == nil || failed.RawOutput["exitCode"] != float64(3) || failed.RawOutput["outcome"] != "failed" ||
		!strings.Contains(failed.Text, "Exit Code: 3") {
		t.Fatalf("failed shell call rawOutput = %+v", failed)
	}

	sid = c.newYoloSession(dir)
	resp := c.start(methodSessionPrompt, promptParams(sid, "call run_shell_command {\"command\":\"touch started; sleep 30\"}\ncall replace {\"file_path\":\"a.txt\",\"old_string\":\"a\",\"new_string\":\"b\"}", ""))
	waitForFile(t, filepath.Join(dir, "started"))
	c.send(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]any{"sessionId": sid}})
	if r := <-resp; !strings.Contains(string(r.Result), stopCancelled) {
		t.Fatalf("prompt answer = %s %+v", r.Result, r.Error)
	}
	var names []any
	for _, u := range c.sessionUpdates(sid) {
		if u.Meta != nil {
			names = append(names, u.Meta["toolName"])
		}
	}
	if want := []any{"run_shell_command", "run_shell_command", "run_shell_command", "edit", "edit"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("toolName of every update = %v, want %v", names, want)
	}
}

// TestACPSessionIDFromMeta: session/new takes the id its _meta names (serve
// generates the ids), refusing a malformed or taken one.
func TestACPSessionIDFromMeta(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	newWith := func(id any) acpResponse {
		return c.call(methodSessionNew, map[string]any{"cwd": dir, "mcpServers": []any{}, "_meta": map[string]any{metaSessionID: id}})
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if r := newWith("0123abcd"); r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.SessionID != "0123abcd" {
		t.Fatalf("session/new with a named id: %s %+v", r.Result, r.Error)
	}
	for _, id := range []any{"0123abcd", "a b", "", 7, strings.Repeat("a", maxSessionIDLen+1)} {
		if r := newWith(id); r.Error == nil || r.Error.Code != rpcInvalidParams {
			t.Errorf("session/new with id %v: %s %+v, want -32602", id, r.Result, r.Error)
		}
	}
}

// TestACPSchemaConformance: what the ACP v1 schema allows a client to send
// is taken, and what the agent advertises is what it serves.
func TestACPSchemaConformance(t *testing.T) {
	c := startACP(t, nil, nil)
	var init struct {
		AgentCapabilities map[string]json.RawMessage `json:"agentCapabilities"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &init)
	if got := string(init.AgentCapabilities["sessionCapabilities"]); got != `{"close":{}}` {
		t.Errorf("sessionCapabilities = %s, want close advertised (session/close is served)", got)
	}
	dir := t.TempDir()
	if r := c.call(methodSessionNew, map[string]any{"cwd": dir, "mcpServers": []any{}, "additionalDirectories": []any{}}); r.Error != nil {
		t.Errorf("session/new with empty additionalDirectories: %+v", r.Error)
	}
	if r := c.call(methodSessionNew, map[string]any{"cwd": dir, "mcpServers": []any{}, "additionalDirectories": []any{"/"}}); r.Error == nil || r.Error.Code != rpcInvalidParams {
		t.Errorf("session/new with a second root: %+v, want -32602 (tools work under cwd only)", r)
	}
	for m, params := range map[string]any{
		methodSessionPrompt:  promptParams("nope", "hi", ""),
		methodSessionSetMode: map[string]any{"sessionId": "nope", "modeId": modeYolo},
		methodSessionClose:   map[string]any{"sessionId": "nope"},
	} {
		if r := c.call(m, params); r.Error == nil || r.Error.Code != rpcNotFound {
			t.Errorf("%s on an unknown session: %+v, want %d", m, r.Error, rpcNotFound)
		}
	}
	// A cancel with a member the agent does not know still cancels:
	// stopping is the safe direction.
	sid := c.newYoloSession(dir)
	resp := c.start(methodSessionPrompt, promptParams(sid, `call run_shell_command {"command":"touch started; sleep 30"}`, ""))
	waitForFile(t, filepath.Join(dir, "started"))
	c.send(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]any{"sessionId": sid, "reason": "user"}})
	select {
	case r := <-resp:
		if !strings.Contains(string(r.Result), stopCancelled) {
			t.Errorf("prompt answer = %s %+v, want cancelled", r.Result, r.Error)
		}
	case <-time.After(testTimeout(20 * time.Second)):
		t.Fatal("a session/cancel with an extra member did not cancel")
	}
}

// TestACPCancelCoversAQueuedSecondPrompt: a second prompt written together
// with a cancel, while the first still runs, is answered cancelled, not
// refused as "already has a prompt running".
func TestACPCancelCoversAQueuedSecondPrompt(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	first := c.start(methodSessionPrompt, promptParams(sid, `call run_shell_command {"command":"touch started; sleep 30"}`, ""))
	waitForFile(t, filepath.Join(dir, "started"))
	second := c.startThenCancel(sid, promptParams(sid, `call write_file {"file_path":"second.txt","content":"x"}`, ""))
	for name, ch := range map[string]chan acpResponse{"first": first, "second": second} {
		select {
		case r := <-ch:
			if r.Error != nil || !strings.Contains(string(r.Result), stopCancelled) {
				t.Errorf("%s prompt answered %s %+v, want cancelled", name, r.Result, r.Error)
			}
		case <-time.After(testTimeout(20 * time.Second)):
			t.Fatalf("no answer to the %s prompt", name)
		}
	}
	if fileExists(filepath.Join(dir, "second.txt")) {
		t.Error("the second prompt ran its call after the cancel")
	}
}

// An acp that cannot start answers its editor's initialize with the reason
// (a JSON-RPC -32603 error) before it exits 2; without an initialize it
// exits as before.
func TestACPConfigErrorAnswersInitialize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"acp", "--sandbx", "off"})
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := cmd.ProcessState.ExitCode()
	msg := `unknown flag "--sandbx" (did you mean "--sandbox"?); run "acpguard acp --help"`
	want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":` + strconv.Quote(msg) + "}}\n"
	if code != exitUsage || string(out) != want || stderr.String() != "acpguard: error: "+msg+"\n" {
		t.Errorf("exit %d (%v), stdout %q, stderr %q; want 2, %q", code, err, out, stderr.String(), want)
	}
}
