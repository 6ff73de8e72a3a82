// tools_shell_test.go checks run_shell_command: output, timeouts, and that
// its process group ends with the command, in the foreground or background.
package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestShell(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		if err := os.Mkdir(filepath.Join(cwd, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runToolCases(t, setup, []toolCase{
		{name: "stdout and stderr", tool: "run_shell_command", args: map[string]any{"command": "echo out; echo err >&2"}, status: statusCompleted,
			want: []string{"out\n", "err\n", "[exit code 0]"}},
		{name: "exit code", tool: "run_shell_command", args: map[string]any{"command": "echo partial; exit 3"}, status: statusFailed,
			want: []string{"partial", "[exit code 3]"}},
		{name: "cwd", tool: "run_shell_command", args: map[string]any{"command": "pwd"}, status: statusCompleted, want: []string{"$CWD\n"}},
		{name: "directory", tool: "run_shell_command", args: map[string]any{"command": "pwd", "directory": "sub"}, status: statusCompleted, want: []string{"$CWD/sub\n"}},
		{name: "scrubbed environment", tool: "run_shell_command", args: map[string]any{"command": "echo mark=$ACPGUARD_TEST_MARK home=$HOME"}, status: statusCompleted,
			want: []string{"mark=visible home=\n"}},
		{name: "empty stdin", tool: "run_shell_command", args: map[string]any{"command": "cat; echo done"}, status: statusCompleted, want: []string{"done"}},
		{name: "timeout", tool: "run_shell_command", args: map[string]any{"command": "echo started; sleep 30", "timeout": 2000}, status: statusFailed,
			want: []string{"started", "timed out after 2000 ms"}},
		{name: "bounded output", tool: "run_shell_command", args: map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' x"}, status: statusCompleted,
			want: []string{"[output truncated at 1048576 bytes; 1951424 bytes dropped]"}},
		{name: "side effect", tool: "run_shell_command", args: map[string]any{"command": "echo made > made.txt"}, status: statusCompleted, check: fileIs("made.txt", "made\n")},
	})
}

func TestShellNoEnvFailsClosed(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	env.Env = nil
	res := runArgs(t, env, "run_shell_command", map[string]any{"command": "echo x > x.txt"})
	if res.Status != statusFailed || fileExists(filepath.Join(env.Cwd, "x.txt")) {
		t.Errorf("ran without a scrubbed environment: %+v", res)
	}
	env.Env = newProcEnv(nil)
	env.Background = nil
	res = runArgs(t, env, "run_shell_command", map[string]any{"command": "echo x > x.txt", "is_background": true})
	if res.Status != statusFailed || fileExists(filepath.Join(env.Cwd, "x.txt")) {
		t.Errorf("background ran with no process set: %+v", res)
	}
}

// readPIDs waits for a file of whitespace-separated pids written by a shell.
func readPIDs(t *testing.T, p string, n int) []int {
	t.Helper()
	for range 1000 {
		b, _ := os.ReadFile(p)
		if f := strings.Fields(string(b)); len(f) == n {
			pids := make([]int, n)
			for i, s := range f {
				pid, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("pid %q: %v", s, err)
				}
				pids[i] = pid
			}
			return pids
		}
		sleepBriefly()
	}
	t.Fatalf("%s never held %d pids", p, n)
	return nil
}

func TestShellCancelKillsProcessGroup(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan toolResult, 1)
	go func() {
		done <- runTool(ctx, env, call("run_shell_command", `{"command":"sleep 100 & echo $$ $! > pids.tmp; mv pids.tmp pids; sleep 100"}`))
	}()
	pids := readPIDs(t, filepath.Join(env.Cwd, "pids"), 2)
	for _, pid := range pids {
		if processGone(pid) {
			t.Fatalf("process %d not running before cancel", pid)
		}
	}
	cancel()
	res := <-done
	if res.Status != statusCancelled {
		t.Errorf("status = %q, want cancelled", res.Status)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

func TestShellLeftoversEndWithCommand(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	res := runArgs(t, env, "run_shell_command", map[string]any{"command": "sleep 100 & echo $!"})
	if res.Status != statusCompleted {
		t.Fatalf("result = %+v", res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(res.Output, "\n", 2)[0]))
	if err != nil {
		t.Fatalf("output %q: %v", res.Output, err)
	}
	waitGone(t, pid)
}

func TestBackgroundExitsByItself(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	res := runArgs(t, env, "run_shell_command", map[string]any{"command": "sleep 100 & echo $! > child; exit 0", "is_background": true})
	if res.Status != statusCompleted {
		t.Fatalf("result = %+v", res)
	}
	leader := res.RawOutput.(map[string]any)["pid"].(int)
	child := readPIDs(t, filepath.Join(env.Cwd, "child"), 1)[0]
	// The leader exited by itself: it is reaped, and what it left in its
	// group ends with it.
	waitGone(t, leader)
	waitGone(t, child)
	for range 1000 {
		env.Background.mu.Lock()
		n := len(env.Background.groups)
		env.Background.mu.Unlock()
		if n == 0 {
			return
		}
		sleepBriefly()
	}
	t.Error("exited background process still tracked")
}
