// acp_always_test.go checks what an "always allow" answer remembers: a shell
// call by the whole normalized call, never by its command text alone.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestACPAlwaysAllowKeysTheWholeShellCall: approving `rm -f victim` for
// good in directory scratch approves that call again, also spelled
// another way, but not the same text in the workspace root, in the
// background or with another timeout: each of those asks anew, and the
// user's reject there keeps the root's victim.
func TestACPAlwaysAllowKeysTheWholeShellCall(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	c := startManagedWith(t, func(method string, params json.RawMessage) (any, *rpcError) {
		switch method {
		case methodGuardPrepare:
			return map[string]any{"allowed": true}, nil
		case methodRequestPermission:
			var p struct {
				ToolCall struct {
					RawInput map[string]any `json:"rawInput"`
				} `json:"toolCall"`
			}
			_ = json.Unmarshal(params, &p)
			raw, _ := json.Marshal(p.ToolCall.RawInput)
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, string(raw))
			if len(asked) == 1 {
				return selected(optionProceedAlwaysProject), nil
			}
			return selected(optionCancel), nil
		}
		return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
	})
	dir := t.TempDir()
	scratch := filepath.Join(dir, "scratch")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "victim"), "keep me")
	sid := c.newSession(dir) // default mode: shell commands ask
	calls := []string{
		`{"command":"rm -f victim","directory":"scratch"}`,
		`{"command":"rm -f victim","directory":"scratch"}`,
		`{"command":"rm -f victim","directory":"./scratch/"}`,
		`{"command":"rm -f victim"}`,
		`{"command":"rm -f victim","directory":"."}`,
		`{"command":"rm -f victim","directory":"scratch","is_background":true}`,
		`{"command":"rm -f victim","directory":"scratch","timeout":5000}`,
	}
	var lines []string
	for _, a := range calls {
		lines = append(lines, "call run_shell_command "+a)
	}
	c.prompt(sid, strings.Join(lines, "\n"), "p1")
	want := "completed completed completed failed failed failed failed"
	var ends []string
	for _, u := range c.sessionUpdates(sid) {
		if u.SessionUpdate == "tool_call_update" && (u.Status == "completed" || u.Status == "failed") {
			ends = append(ends, u.Status)
		}
	}
	if got := strings.Join(ends, " "); got != want || agentText(c.sessionUpdates(sid)) != "" {
		t.Errorf("calls ended %q, model answer %q; want %q and none", got, agentText(c.sessionUpdates(sid)), want)
	}
	if !fileExists(filepath.Join(dir, "victim")) {
		t.Error("the workspace root's victim was removed without a new permission request")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 5 {
		t.Fatalf("permission requests = %d, want 5 (the first call, then root twice, background, timeout):\n%s", len(asked), strings.Join(asked, "\n"))
	}
}
