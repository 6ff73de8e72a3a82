// acp_permission_timeout_test.go tests standalone acp's
// --permission-response-timeout-ms: a client that never answers gets its
// request cancelled, the call does not run, the turn goes on, and a late
// answer runs nothing.
package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestACPPermissionTimeoutCancelsTheCall(t *testing.T) {
	// The timeout also bounds the second request, which the host answers
	// at once: room for a loaded machine; the first waits it out once.
	permissionTimeout := testTimeout(1500 * time.Millisecond)
	release := make(chan struct{})
	var asked atomic.Int32
	c := startACP(t, func(method string, params json.RawMessage) (any, *rpcError) {
		if method != methodRequestPermission {
			return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
		}
		if asked.Add(1) == 1 {
			<-release // the first request is answered only after the turn
		}
		return selected(optionProceedOnce), nil
	}, []string{"--permission-response-timeout-ms", strconv.Itoa(int(permissionTimeout.Milliseconds()))})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newSession(dir) // default mode: writes ask
	start := time.Now()
	stop := c.prompt(sid, `call run_shell_command {"command":"touch marker.txt"}`+"\n"+
		`call write_file {"file_path":"second.txt","content":"x"}`, "")
	if stop != stopEndTurn {
		t.Fatalf("stopReason = %q, want %q", stop, stopEndTurn)
	}
	if elapsed := time.Since(start); elapsed < permissionTimeout {
		t.Errorf("the turn ended after %v, before the timeout", elapsed)
	}
	if fileExists(filepath.Join(dir, "marker.txt")) {
		t.Error("the call whose permission request expired ran")
	}
	if !fileExists(filepath.Join(dir, "second.txt")) {
		t.Error("the turn did not go on: the next, allowed call did not run")
	}
	ups := c.sessionUpdates(sid)
	if got := agentText(ups); got != "run_shell_command: cancelled\nwrite_file: completed\n" {
		t.Errorf("model answer = %q", got)
	}
	shell := firstToolCall(t, ups)
	if statuses, _, _ := callOutcome(ups, shell.ToolCallID); statuses[len(statuses)-1] != "failed" {
		t.Errorf("expired call statuses = %v, want it to end failed (cancelled)", statuses)
	}
	// The client is told the request was abandoned, with its id.
	c.mu.Lock()
	var cancels []string
	for _, n := range c.notices {
		if n.Method == rpcCancelRequest {
			cancels = append(cancels, string(n.Params))
		}
	}
	c.mu.Unlock()
	if len(cancels) != 1 || !strings.Contains(cancels[0], `"requestId"`) {
		t.Errorf("$/cancel_request notices = %v, want one", cancels)
	}
	if !strings.Contains(c.stderrText(), "session/request_permission unanswered: the call is cancelled") {
		t.Errorf("no log line for the expiry:\n%s", c.stderrText())
	}
	// A late allow runs nothing.
	close(release)
	time.Sleep(100 * time.Millisecond)
	if fileExists(filepath.Join(dir, "marker.txt")) {
		t.Error("a late answer ran the expired call")
	}
	if stop := c.prompt(sid, `call write_file {"file_path":"third.txt","content":"x"}`, ""); stop != stopEndTurn || !fileExists(filepath.Join(dir, "third.txt")) {
		t.Errorf("after a late answer the session does not go on: stopReason %q", stop)
	}
}

func TestACPPermissionTimeoutFlag(t *testing.T) {
	sys, _, _ := testSystem()
	for raw, want := range map[string]time.Duration{"": 0, "0": 0, "1": time.Millisecond, "86400000": 24 * time.Hour} {
		args := []string{"--permission-response-timeout-ms=" + raw}
		if raw == "" {
			args = nil
		}
		opts, err := parseACPArgs(args, sys)
		if err != nil || opts.PermissionTimeout != want {
			t.Errorf("--permission-response-timeout-ms %q = %v, %v; want %v", raw, opts.PermissionTimeout, err, want)
		}
	}
	for _, raw := range []string{"86400001", "-1", "1.5", "", "1s"} {
		_, err := parseACPArgs([]string{"--permission-response-timeout-ms=" + raw}, sys)
		want := fmt.Sprintf("--permission-response-timeout-ms %q: must be an integer from 0 through 86400000", raw)
		if exitCode(err) != exitUsage || err.Error() != want {
			t.Errorf("--permission-response-timeout-ms=%s: %v, want a usage error %q", raw, err, want)
		}
	}
}
