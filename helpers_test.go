// helpers_test.go holds what many test files share: starting acpguard, the
// timeout scale, waiting for an effect, processes and files, the fake provider.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// envTimeoutScale multiplies every test timeout, deadline and poll limit
// (testTimeout): a positive number, 1 when unset, more on a slow or busy machine.
const envTimeoutScale = "ACPGUARD_TEST_TIMEOUT_SCALE"

var timeoutScale = func() float64 {
	f, err := strconv.ParseFloat(os.Getenv(envTimeoutScale), 64)
	if err != nil || f <= 0 {
		return 1
	}
	return f
}()

// testTimeout is d scaled by envTimeoutScale.
func testTimeout(d time.Duration) time.Duration {
	return time.Duration(float64(d) * timeoutScale)
}

// acpguardCmd returns a command that runs acpguard with args. extraEnv
// entries ("K=V") are added to the test's own environment.
func acpguardCmd(t testing.TB, ctx context.Context, args []string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	// The race detector otherwise sleeps a second at every exit.
	cmd.Env = append(append(os.Environ(), roleEnv("main"), "GORACE=atexit_sleep_ms=0"), extraEnv...)
	cmd.WaitDelay = testTimeout(5 * time.Second)
	return cmd
}

// syncBuffer is an io.Writer that tests may read while a server writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// runAcpguard runs acpguard to completion and returns its exit code and output.
func runAcpguard(t testing.TB, args []string, extraEnv ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, args, extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stderr = &errb
	var err error
	if managedStart(args, extraEnv) {
		// serve's child runs only on its socket pairs; empty ones here.
		ends, perr := newChannel()
		if perr != nil {
			t.Fatal(perr)
		}
		defer ends.closeAll()
		channelWriter{ends.write}.Close()
		cmd.Stdin, cmd.Stdout = ends.childStdin, ends.childStdout
		copied := make(chan struct{})
		go func() { io.Copy(&out, ends.read); close(copied) }()
		err = cmd.Start()
		ends.closeChild()
		if err == nil {
			err = cmd.Wait()
		}
		<-copied
	} else {
		cmd.Stdout = &out
		err = cmd.Run()
	}
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run acpguard %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

// quickRaceExit keeps a race-enabled ACP child from sleeping a second at
// exit, as acpguardCmd does for the processes it starts.
const quickRaceExit = "GORACE=atexit_sleep_ms=0"

func testExe(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// waitFor polls cond with a generous bound; it is no timing assertion.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 3000 {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitForFile waits until a tool call created path.
func waitForFile(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout(20 * time.Second))
	for !fileExists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not created", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processGone reports whether pid no longer runs: absent, or a zombie
// waiting for a parent that is not us.
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// waitGone waits until pid is gone; the kernel needs a moment to deliver
// SIGKILL to a process that is not our child.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 1000 {
		if processGone(pid) {
			return
		}
		sleepBriefly()
	}
	t.Errorf("process %d still runs", pid)
}

// pidGone waits until pid no longer runs (gone or a zombie).
func pidGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(testTimeout(within))
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// pidGoneWithin waits until pid no longer runs.
func pidGoneWithin(pid int, within time.Duration) bool {
	deadline := time.Now().Add(testTimeout(within))
	for time.Now().Before(deadline) {
		if processGone(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// readPIDFile polls for a file holding a pid, written by a shell tool.
func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	for range 500 {
		if data, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("pid file %s holds %q", path, data)
			}
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the shell tool never wrote %s", path)
	return 0
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func mustWrite(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSettings writes a settings file and returns its path.
func writeSettings(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readSSE(t testing.TB, r *bufio.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("read event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
				if stop(cur) {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = json.RawMessage(line[6:])
		}
	}
}
