// helpers_test.go holds every helper that more than one test file uses,
// grouped by what it drives: acpguard and its processes, the test roles,
// rules, the boundary and tools, the agent, MCP, the provider, the sandbox, serve.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// Starting acpguard, the timeout scale, waiting for an effect, processes and files.

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

// runAcpguardIn runs acpguard with args in dir, stdin its standard input,
// to completion, as runAcpguard does; QWEN_HOME is an empty directory, so
// no user settings file is read.
func runAcpguardIn(t testing.TB, dir, stdin string, args []string, extraEnv ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, args, append([]string{envQwenHome + "=" + t.TempDir()}, extraEnv...)...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
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
	bound := testTimeout(time.Minute)
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, bound)
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
	for deadline := time.Now().Add(testTimeout(20 * time.Second)); time.Now().Before(deadline); sleepBriefly() {
		if processGone(pid) {
			return
		}
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

// shortWayDir is a fresh directory for a test that hides a path in it: under
// the shared memory directory where that is a sticky directory, else
// t.TempDir(). Hiding a path costs a Landlock rule for every entry on its
// way (sandbox_hide.go), and the temporary directory of a machine that has
// run many tests can hold more entries than maxHideEntries.
func shortWayDir(t testing.TB) string {
	t.Helper()
	var st syscall.Stat_t
	if syscall.Stat(sharedMemoryDir, &st) != nil || st.Mode&syscall.S_ISVTX == 0 {
		return t.TempDir()
	}
	d, err := os.MkdirTemp(sharedMemoryDir, "acpguard-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { removeTree(d) })
	return d
}

// pathGoneWithin reports whether nothing is at path, waiting a while for it
// to go.
func pathGoneWithin(path string, within time.Duration) bool {
	deadline := time.Now().Add(testTimeout(within))
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	// A guarded shell call on a loaded machine takes seconds.
	for deadline := time.Now().Add(testTimeout(30 * time.Second)); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("pid file %s holds %q", path, data)
			}
			return pid
		}
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

// Test roles: the environment that makes this binary a role, and the
// re-executed acpguard main.

// envTestRole is the one switch that makes a re-executed test binary
// something other than the test suite: its value is "ROLE" or "ROLE:ARG",
// ROLE a key of testRoles. Children inherit it, so the acp children of a
// serve a test starts play the role too; a later entry for the name in a
// command's environment replaces an inherited one.
const envTestRole = "ACPGUARD_TEST_ROLE"

// roleEnv is the environment entry that makes a re-executed test binary play role.
func roleEnv(role string, arg ...string) string {
	return envTestRole + "=" + strings.Join(append([]string{role}, arg...), ":")
}

// runAsMain is acpguard with the test seams of envTestRole's "main" applied.
func runAsMain() int {
	if probe := fakeLandlock(os.Getenv(envTestLandlock)); probe != nil {
		probeLandlock = probe
	}
	if os.Getenv(envTestUserNS) == "off" {
		probeMountNamespace = noUserNamespaces
	}
	setTestSandbox()
	main()
	return 0
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Command lines: a fake system to run them against, the required-guard
// arguments, listen addresses, secret files.

const testToken = "tok-b7e1c4"

func testSystem(environ ...string) (*system, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &system{env: newProcEnv(environ), stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, &stdout, &stderr
}

// required returns the guard flags of required mode with endpoint, then extra.
func required(endpoint string, extra ...string) []string {
	return append([]string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + endpoint}, extra...)
}

// assertUsageError checks that err is an exit-2 error that names what and,
// unless value is secret, quotes value, and states rule.
func assertUsageError(t *testing.T, err error, what, value, rule string, secret bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want an error naming %s", what)
	}
	if code := exitCode(err); code != exitUsage {
		t.Errorf("exit code %d for %q, want %d", code, err, exitUsage)
	}
	msg := err.Error()
	if !strings.Contains(msg, what) {
		t.Errorf("error %q does not name %s", msg, what)
	}
	if !strings.Contains(msg, rule) {
		t.Errorf("error %q does not state the rule %q", msg, rule)
	}
	if secret {
		if value != "" && strings.Contains(msg, value) {
			t.Errorf("error %q shows the secret value", msg)
		}
	} else if !strings.Contains(msg, strconv.Quote(value)) {
		t.Errorf("error %q does not quote the value %q", msg, value)
	}
}

// mustListen is parseListen for an address the test knows is valid.
func mustListen(raw string) loopbackAddr {
	a, err := parseListen(raw)
	if err != nil {
		panic(err)
	}
	return a
}

// writeSecret writes body to a new file in dir with mode perm and returns
// its path.
func writeSecret(t *testing.T, dir, name, body string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

// Rules and hooks: a fixed cwd and home, parsed permission rules, a hook's
// input and environment.

const (
	testCwd  = "/work/proj"
	testHome = "/home/alice"
)

func mustRules(t testing.TB, allow, ask, deny []string) *permissionRules {
	t.Helper()
	r, err := parsePermissionRules(allow, ask, deny)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testHookInput(dir string) hookInput {
	return hookInput{
		SessionID: "sess-1", Cwd: dir, PermissionMode: modeAutoEdit,
		ToolName: "run_shell_command", ToolInput: map[string]any{"command": "ls -la"}, ToolUseID: "call-1",
	}
}

var testHookEnv = spawnEnv{Env: newProcEnv([]string{"PATH=/usr/bin:/bin", "HOOK_TEST=1"})}

// The boundary and the tools in process: a tool environment with a counting
// guard and a recording observer, calls, table-driven tool cases.

// pendingEvent is one toolPending call as an observer saw it.
type pendingEvent struct {
	call  toolCall
	title string
	kind  string
	args  map[string]any
}

// recorder is a toolObserver that keeps what it heard.
type recorder struct {
	mu      sync.Mutex
	pending []pendingEvent
	running []toolCall
}

func (r *recorder) toolPending(call toolCall, title, kind string, args map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, pendingEvent{call, title, kind, args})
}

func (r *recorder) toolRunning(call toolCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = append(r.running, call)
}

// countingGuard records every request and answers with decide.
type countingGuard struct {
	mu     sync.Mutex
	reqs   []GuardRequest
	decide func(ctx context.Context, req GuardRequest) (Decision, error)
}

func (g *countingGuard) guard(ctx context.Context, req GuardRequest) (Decision, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.mu.Unlock()
	if g.decide == nil {
		return Decision{Allowed: true}, nil
	}
	return g.decide(ctx, req)
}

func (g *countingGuard) calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reqs)
}

// newTestEnv is a session in a fresh workspace, held open as a session
// holds it, with a recorder, a tracked background set and, when g is not
// nil, that guard.
func newTestEnv(t testing.TB, g *countingGuard) (*toolEnv, *recorder) {
	t.Helper()
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	env := &toolEnv{
		SessionID:  "sess-1",
		PromptID:   "prompt-1",
		Cwd:        cwd,
		Env:        newProcEnv([]string{"PATH=" + os.Getenv("PATH"), "ACPGUARD_TEST_MARK=visible"}),
		Background: &processSet{},
		Observer:   rec,
	}
	if g != nil {
		env.Guard = g.guard
	}
	// The workspace a session holds, as acp opens it at session/new; a
	// test that sets another Cwd resolves it per call.
	if env.Workspace, err = openWorkspace(cwd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Workspace.close)
	t.Cleanup(env.Background.killAll)
	return env, rec
}

func call(name, args string) toolCall {
	return toolCall{ID: "call_1", Name: name, Args: json.RawMessage(args)}
}

func jsonArgs(t testing.TB, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkOnePending fails unless the observer heard exactly one toolPending.
func checkOnePending(t *testing.T, rec *recorder) pendingEvent {
	t.Helper()
	if len(rec.pending) != 1 {
		t.Fatalf("toolPending called %d times, want exactly 1", len(rec.pending))
	}
	return rec.pending[0]
}

// probeTool is a test tool whose executor counts its calls and whose
// normalizer may add a value the guard's clone cannot copy.
func probeTool(execs *int, poison bool) *toolSpec {
	return &toolSpec{
		Name: "probe", Kind: kindOther,
		title: func(map[string]any) string { return "probe" },
		normalize: func(_ *toolEnv, args map[string]any) (map[string]any, error) {
			if poison {
				args["ch"] = make(chan int)
			}
			return args, nil
		},
		exec: func(context.Context, *toolEnv, map[string]any) toolResult {
			*execs++
			return toolResult{Status: statusCompleted, Output: "probed"}
		},
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

type nopObserver struct{}

func (nopObserver) toolPending(toolCall, string, string, map[string]any) {}

func (nopObserver) toolRunning(toolCall) {}

func sleepBriefly() { time.Sleep(10 * time.Millisecond) }

// runArgs runs one call with no guard and returns its result.
func runArgs(t *testing.T, env *toolEnv, name string, args map[string]any) toolResult {
	t.Helper()
	return runTool(context.Background(), env, call(name, jsonArgs(t, args)))
}

// toolCase is one call and what its result must look like.
type toolCase struct {
	name   string
	tool   string
	args   map[string]any
	status string
	// every string in want must occur in the output; none in notWant
	want, notWant []string
	// check, when set, inspects the workspace afterwards
	check func(t *testing.T, cwd string)
}

func runToolCases(t *testing.T, setup func(t *testing.T, cwd string), cases []toolCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := newTestEnv(t, nil)
			if setup != nil {
				setup(t, env.Cwd)
			}
			res := runArgs(t, env, tc.tool, tc.args)
			if res.Status != tc.status {
				t.Fatalf("status = %q, want %q; output %q", res.Status, tc.status, res.Output)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Output, strings.ReplaceAll(w, "$CWD", env.Cwd)) {
					t.Errorf("output %q does not contain %q", res.Output, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(res.Output, w) {
					t.Errorf("output %q contains %q", res.Output, w)
				}
			}
			if tc.check != nil {
				tc.check(t, env.Cwd)
			}
		})
	}
}

func fileIs(name, want string) func(t *testing.T, cwd string) {
	return func(t *testing.T, cwd string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(cwd, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
}

// Pipes, pseudo-terminals and the private channel's files.

func mustPipe(t testing.TB) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// openPTY opens a pseudo-terminal: its master, where a test types and
// reads what the terminal shows, and its slave, a child's terminal. The
// test skips where there is none.
func openPTY(t testing.TB) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock the pseudo-terminal: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("the pseudo-terminal's number: %v", e)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// channelWriter is serve's writing end of a channel as a test's stdin for a
// child: Close ends the child's input and leaves its output flowing.
type channelWriter struct{ f *os.File }

func (w channelWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (w channelWriter) Close() error { return shutdownWrite(w.f) }

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// The agent over ACP: a client on acpguard acp's stdio, its requests and
// updates, a managed start whose parent answers prepare requests.

// acpClient is a line-delimited JSON-RPC client of an acpguard acp process.
// It answers the agent's requests with onRequest.
type acpClient struct {
	t     testing.TB
	stdin io.WriteCloser
	done  chan struct{} // closed when the agent's stdout ends
	pid   int           // the agent's process

	onRequest func(method string, params json.RawMessage) (any, *rpcError)

	mu         sync.Mutex
	nextID     int
	pending    map[string]chan acpResponse
	updates    []json.RawMessage // session/update params, in arrival order
	requests   []acpRequest      // requests the agent sent us
	notices    []acpRequest      // its other notifications
	nullErrors []int             // codes of error responses with id null
	changed    chan struct{}
	stderr     strings.Builder
}

func (c *acpClient) stderrText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func (c *acpClient) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
			Result  json.RawMessage `json:"result"`
			Error   *rpcError       `json:"error"`
		}
		if err := decodeStrict(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
			c.t.Errorf("agent wrote a bad line %q: %v", sc.Text(), err)
			continue
		}
		c.mu.Lock()
		switch {
		case m.Method != "" && m.ID != nil:
			c.requests = append(c.requests, acpRequest{m.Method, m.Params})
			go c.answer(m.ID, m.Method, m.Params)
		case m.Method == methodSessionUpdate:
			c.updates = append(c.updates, m.Params)
		case m.Method != "":
			c.notices = append(c.notices, acpRequest{m.Method, m.Params})
		default:
			if ch, ok := c.pending[string(m.ID)]; ok {
				delete(c.pending, string(m.ID))
				ch <- acpResponse{m.Result, m.Error}
			} else if string(m.ID) == "null" && m.Error != nil {
				c.nullErrors = append(c.nullErrors, m.Error.Code)
			} else {
				c.t.Errorf("response to unknown id %s", m.ID)
			}
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

func (c *acpClient) answer(id json.RawMessage, method string, params json.RawMessage) {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if c.onRequest == nil {
		msg["error"] = &rpcError{Code: rpcMethodNotFound, Message: "no handler"}
	} else if res, err := c.onRequest(method, params); err != nil {
		msg["error"] = err
	} else {
		msg["result"] = res
	}
	c.send(msg)
}

func (c *acpClient) send(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.writeLine(string(b))
}

func (c *acpClient) writeLine(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.stdin, line+"\n")
}

// call sends a request and waits for its response.
func (c *acpClient) call(method string, params any) acpResponse {
	c.t.Helper()
	ch := c.start(method, params)
	select {
	case r := <-ch:
		return r
	case <-time.After(testTimeout(20 * time.Second)):
		c.t.Fatalf("no response to %s", method)
		return acpResponse{}
	}
}

// start sends a request and returns where its response will arrive.
func (c *acpClient) start(method string, params any) chan acpResponse {
	line, ch := c.request(method, params)
	c.writeLine(line)
	return ch
}

// request numbers a request and registers its answer; the caller writes it.
func (c *acpClient) request(method string, params any) (string, chan acpResponse) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan acpResponse, 1)
	c.pending[fmt.Sprint(id)] = ch
	c.mu.Unlock()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b), ch
}

// startThenCancel writes a session/prompt and a session/cancel for sid in
// one write, so the agent reads both before the prompt's handler can start.
func (c *acpClient) startThenCancel(sid string, params any) chan acpResponse {
	line, ch := c.request(methodSessionPrompt, params)
	cancel, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": methodSessionCancel, "params": map[string]any{"sessionId": sid}})
	c.writeLine(line + "\n" + string(cancel))
	return ch
}

func (c *acpClient) mustCall(method string, params any, result any) {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error != nil {
		c.t.Fatalf("%s: error %d %s", method, r.Error.Code, r.Error.Message)
	}
	if result != nil {
		if err := json.Unmarshal(r.Result, result); err != nil {
			c.t.Fatalf("%s result %s: %v", method, r.Result, err)
		}
	}
}

// waitFor waits until cond holds over the agent's requests and updates.
func (c *acpClient) waitFor(what string, cond func(reqs []acpRequest, updates []json.RawMessage) bool) {
	c.t.Helper()
	deadline := time.After(testTimeout(20 * time.Second))
	for {
		c.mu.Lock()
		ok := cond(c.requests, c.updates)
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (c *acpClient) countRequests(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.requests {
		if r.Method == method {
			n++
		}
	}
	return n
}

// sessionUpdates returns the updates of one session, decoded.
func (c *acpClient) sessionUpdates(sessionID string) []toolUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []toolUpdate
	for _, raw := range c.updates {
		var p struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}
		if err := json.Unmarshal(raw, &p); err != nil || p.SessionID != sessionID {
			continue
		}
		var u toolUpdate
		json.Unmarshal(p.Update, &u)
		var chunk struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(p.Update, &chunk) == nil {
			u.Text = chunk.Content.Text
		}
		if u.Content != nil {
			var blocks []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			json.Unmarshal(u.Content, &blocks)
			for _, b := range blocks {
				u.Text += b.Content.Text
			}
		}
		out = append(out, u)
	}
	return out
}

func (c *acpClient) newSession(cwd string) string {
	c.t.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
	}
	c.mustCall(methodSessionNew, map[string]any{"cwd": cwd, "mcpServers": []any{}}, &res)
	if res.SessionID == "" {
		c.t.Fatal("session/new returned no sessionId")
	}
	return res.SessionID
}

// newYoloSession is a session in yolo mode: the tests of the guard path
// need no permission prompts.
func (c *acpClient) newYoloSession(cwd string) string {
	c.t.Helper()
	sid := c.newSession(cwd)
	c.mustCall(methodSessionSetMode, map[string]any{"sessionId": sid, "modeId": modeYolo}, nil)
	return sid
}

func (c *acpClient) prompt(sessionID, text, promptID string) string {
	c.t.Helper()
	var res struct {
		StopReason string `json:"stopReason"`
	}
	c.mustCall(methodSessionPrompt, promptParams(sessionID, text, promptID), &res)
	return res.StopReason
}

type acpResponse struct {
	Result json.RawMessage
	Error  *rpcError
}

type acpRequest struct {
	Method string
	Params json.RawMessage
}

// startACP starts acpguard acp with args and extra environment, over pipes
// as an editor does, or over a socket pair as serve does when the agent is a
// managed child (the required-v1 marker, or --model parent).
func startACP(t testing.TB, onRequest func(string, json.RawMessage) (any, *rpcError), args []string, extraEnv ...string) *acpClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := acpguardCmd(t, ctx, append([]string{"acp"}, args...), extraEnv...)
	return driveACP(t, cmd, cancel, onRequest, managedStart(args, extraEnv))
}

// driveACP starts cmd, an acp agent, and is its client until the test
// ends; cancel ends cmd's context. A managed agent gets a socket pair.
func driveACP(t testing.TB, cmd *exec.Cmd, cancel context.CancelFunc, onRequest func(string, json.RawMessage) (any, *rpcError), managed bool) *acpClient {
	t.Helper()
	var stdin io.WriteCloser
	var stdout io.Reader
	var ends *channelEnds
	if managed {
		var err error
		if ends, err = newChannel(); err != nil {
			t.Fatal(err)
		}
		cmd.Stdin, cmd.Stdout = ends.childStdin, ends.childStdout
		stdin, stdout = channelWriter{ends.write}, ends.read
		t.Cleanup(ends.closeAll)
	} else {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if stdout, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	}
	c := &acpClient{t: t, stdin: stdin, done: make(chan struct{}), onRequest: onRequest,
		pending: map[string]chan acpResponse{}, changed: make(chan struct{})}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.stderr.Write(p)
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	if ends != nil {
		ends.closeChild()
	}
	go c.read(stdout)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.done:
		case <-time.After(testTimeout(10 * time.Second)):
			t.Errorf("acp agent did not exit after stdin closed")
		}
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("agent stderr:\n%s", c.stderrText())
		}
	})
	return c
}

// managedStart reports whether an agent started so is one of serve's
// children, which runs only on a socket pair.
func managedStart(args, env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, envPrivateGuard+"=") {
			return true
		}
	}
	for i, a := range args {
		if a == "--model="+modelParent || a == "--model" && i+1 < len(args) && args[i+1] == modelParent {
			return true
		}
	}
	return false
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// toolUpdate is the part of a tool_call / tool_call_update the tests read.
type toolUpdate struct {
	SessionUpdate string             `json:"sessionUpdate"`
	ToolCallID    string             `json:"toolCallId"`
	Title         string             `json:"title"`
	Kind          string             `json:"kind"`
	Status        string             `json:"status"`
	RawInput      map[string]any     `json:"rawInput"`
	RawOutput     map[string]any     `json:"rawOutput"`
	Meta          map[string]any     `json:"_meta"`
	Content       json.RawMessage    `json:"content"`
	Locations     []toolLocationJSON `json:"locations"`
	Text          string
}

// toolLocationJSON is an ACP location as sent; Line is null when absent.
type toolLocationJSON struct {
	Path string `json:"path"`
	Line *int64 `json:"line"`
}

// agentText is everything the agent said in agent_message_chunk updates.
func agentText(updates []toolUpdate) string {
	var b strings.Builder
	for _, u := range updates {
		if u.SessionUpdate == "agent_message_chunk" {
			b.WriteString(u.Text)
		}
	}
	return b.String()
}

// metaParentCapability is where Qwen Code's parent sends its capability;
// acpguard's serve sends none and its children ignore one.
const metaParentCapability = "qwen-code/private-parent-capability"

// managedEnv makes an agent serve's guarded child.
var managedEnv = []string{envPrivateGuard + "=" + privateGuardMarker}

func initializeParams(capability string) map[string]any {
	p := map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}
	if capability != "" {
		p["_meta"] = map[string]any{metaParentCapability: capability}
	}
	return p
}

func promptParams(sessionID, text, promptID string) map[string]any {
	p := map[string]any{"sessionId": sessionID, "prompt": []any{map[string]any{"type": "text", "text": text}}}
	if promptID != "" {
		p["_meta"] = map[string]any{metaInvocation: map[string]any{"version": 1, "sessionId": sessionID, "promptId": promptID}}
	}
	return p
}

// prepareLog records the guard requests a test parent received.
type prepareLog struct {
	mu   sync.Mutex
	reqs []map[string]any
}

func (l *prepareLog) add(params json.RawMessage) map[string]any {
	var m map[string]any
	json.Unmarshal(params, &m)
	l.mu.Lock()
	l.reqs = append(l.reqs, m)
	l.mu.Unlock()
	return m
}

func (l *prepareLog) all() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.reqs...)
}

// parentAnswering returns a request handler that answers every prepare with answer.
func parentAnswering(log *prepareLog, answer func(req map[string]any) (any, *rpcError)) func(string, json.RawMessage) (any, *rpcError) {
	return func(method string, params json.RawMessage) (any, *rpcError) {
		if method != methodGuardPrepare {
			return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
		}
		return answer(log.add(params))
	}
}

func startManaged(t testing.TB, log *prepareLog, answer func(map[string]any) (any, *rpcError), args ...string) *acpClient {
	c := startACP(t, parentAnswering(log, answer), args, managedEnv...)
	var res struct {
		AgentCapabilities struct {
			Meta map[string]any `json:"_meta"`
		} `json:"agentCapabilities"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &res)
	if got, _ := res.AgentCapabilities.Meta[metaGuardReady].(string); got != privateGuardMarker {
		t.Fatalf("initialize acknowledgement = %q, want %q", got, privateGuardMarker)
	}
	return c
}

// lastStatus returns the final status and text of a call's updates.
func callOutcome(updates []toolUpdate, callID string) (statuses []string, text string, errType string) {
	for _, u := range updates {
		if u.ToolCallID != callID {
			continue
		}
		statuses = append(statuses, u.Status)
		if u.SessionUpdate == "tool_call_update" && (u.Status == "completed" || u.Status == "failed") {
			text = u.Text
			errType, _ = u.RawOutput["errorType"].(string)
		}
	}
	return statuses, text, errType
}

func firstToolCall(t *testing.T, updates []toolUpdate) toolUpdate {
	t.Helper()
	for _, u := range updates {
		if u.SessionUpdate == "tool_call" {
			return u
		}
	}
	t.Fatalf("no tool_call update in %+v", updates)
	return toolUpdate{}
}

func allow(map[string]any) (any, *rpcError) { return map[string]any{"allowed": true}, nil }

// MCP: the helper server (this binary in a role) and sessions that use it.

// The helper server's switches, set through the server entry's env.
const (
	envHelperLog      = "MCP_HELPER_LOG"          // file: one line per event the server saw
	envHelperEnvFile  = "MCP_HELPER_ENV_FILE"     // file: the server's /proc/self/environ
	envHelperTools    = "MCP_HELPER_TOOLS"        // JSON array replacing the default tools
	envHelperChild    = "MCP_HELPER_CHILD"        // "1": start a sleeping child in the group
	envHelperNoInit   = "MCP_HELPER_NO_INIT"      // "1": never answer initialize
	envHelperNoCap    = "MCP_HELPER_NO_TOOLS_CAP" // "1": initialize declares no tools capability
	envHelperListErr  = "MCP_HELPER_LIST_ERROR"   // "1": tools/list answers a JSON-RPC error
	envHelperExtra    = "MCP_HELPER_RESULT_EXTRA" // "1": every result carries a member the schema does not name
	helperMCPPageSize = 3
)

// helperServer describes one helper MCP server and where it records what it saw.
type helperServer struct {
	name    string
	dir     string // holds its wire log: confined, it needs --sandbox-write dir
	log     string
	envFile string
	env     map[string]string
}

// writable is the flag that lets the server, confined by the default
// sandbox of required mode, write its wire log.
func (h *helperServer) writable() []string { return []string{"--" + flagSandboxWrite, h.dir} }

func (h *helperServer) environ() []string {
	env := []string{
		roleEnv("mcp-server"), // replaces the "main" role of the acpguard that starts it
		"GORACE=atexit_sleep_ms=0",
		envHelperLog + "=" + h.log,
		envHelperEnvFile + "=" + h.envFile,
	}
	for k, v := range h.env {
		env = append(env, k+"="+v)
	}
	return env
}

// acpEntry is the server as a session/new mcpServers entry.
func (h *helperServer) acpEntry(t testing.TB) map[string]any {
	cmd, args := helperCommand(t)
	var env []map[string]string
	for _, kv := range h.environ() {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, map[string]string{"name": k, "value": v})
	}
	return map[string]any{"name": h.name, "command": cmd, "args": args, "env": env}
}

func (h *helperServer) config(t testing.TB) mcpServerConfig {
	cmd, args := helperCommand(t)
	return mcpServerConfig{Name: h.name, Command: cmd, Args: args, Env: h.environ()}
}

// events returns the lines of the server's log that start with prefix.
func (h *helperServer) events(prefix string) []string {
	b, _ := os.ReadFile(h.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func (h *helperServer) pids(t *testing.T, prefix string) []int {
	var pids []int
	for _, l := range h.events(prefix + " ") {
		pid, err := strconv.Atoi(strings.TrimPrefix(l, prefix+" "))
		if err != nil {
			t.Fatalf("bad %s line %q", prefix, l)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitEvent waits until the helper server logged an event starting with prefix.
func (h *helperServer) waitEvent(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout(20 * time.Second))
	for len(h.events(prefix)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the MCP server never logged %q", prefix)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newHelperServer(t *testing.T, name string) *helperServer {
	dir := t.TempDir()
	return &helperServer{name: name, dir: dir, log: filepath.Join(dir, "wire.log"), envFile: filepath.Join(dir, "environ"), env: map[string]string{}}
}

func helperCommand(t testing.TB) (string, []string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe, []string{}
}

// newMCPSession opens a session with the given servers.
func newMCPSession(t *testing.T, c *acpClient, cwd string, servers ...map[string]any) string {
	t.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if servers == nil {
		servers = []map[string]any{}
	}
	c.mustCall(methodSessionNew, map[string]any{"cwd": cwd, "mcpServers": servers}, &res)
	// yolo: these tests are about the guard and the transport, not approval.
	c.mustCall(methodSessionSetMode, map[string]any{"sessionId": res.SessionID, "modeId": modeYolo}, nil)
	return res.SessionID
}

// parseSettingsMCPServers reads an mcpServers object the way a settings file
// is read, then converts it.
func parseSettingsMCPServers(raw json.RawMessage) ([]mcpServerConfig, error) {
	var servers map[string]mcpServerSettings
	if err := decodeStrict(raw, &servers); err != nil {
		return nil, fmt.Errorf("mcpServers: %w", err)
	}
	return mcpServersFromSettings(servers)
}

// The policy provider: the pinned client, the reference provider in process
// and as a process, wire vectors, audit records, a test CA.

const providerTestToken = "provider-test-token"

// wireResponseVector is one provider reply and what the client must make of it.
type wireResponseVector struct {
	Name        string `json:"name"`
	Route       string `json:"route"` // "prepare" or "handshake"
	Status      int    `json:"status"`
	ContentType string `json:"contentType"` // "" sends no Content-Type at all
	Body        string `json:"body"`        // "$ID" stands for the request's requestId or nonce
	PadTo       int    `json:"padTo"`       // pad the body with spaces to this many bytes
	Expect      struct {
		Allowed  *bool  `json:"allowed"`
		Reason   string `json:"reason"`
		Category string `json:"category"`
		OK       bool   `json:"ok"` // handshake succeeds
	} `json:"expect"`
}

// loadWireVectors reads every vector in testdata/wire/<dir>, strictly.
func loadWireVectors[T any](t testing.TB, dir string) map[string]T {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "wire", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no wire vectors in testdata/wire/%s: %v", dir, err)
	}
	out := make(map[string]T, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := decodeStrict(data, &v); err != nil {
			t.Fatalf("vector %s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = v
	}
	return out
}

// padWireBody pads body with trailing spaces (still one JSON value) to n bytes.
func padWireBody(body string, n int) string {
	if n > len(body) {
		body += strings.Repeat(" ", n-len(body))
	}
	return body
}

func testProviderClient(t testing.TB, endpoint string, timeout time.Duration) *providerClient {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := newProviderClient(guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: testTimeout(timeout), Token: providerTestToken})
	pinTestIdentity(c) // as a handshake would: the test may prepare without one
	// Cleanups run last-registered first: the client's idle connections
	// close before a server started earlier in the test shuts down.
	t.Cleanup(c.close)
	return c
}

var providerTestCall = prepareRequest{
	SessionID:  "sess-1",
	PromptID:   "prompt-1",
	ToolCallID: "call-1",
	ToolName:   "read_file",
	Arguments:  json.RawMessage(`{"file_path":"/tmp/a.txt"}`),
}

// pinTestIdentity records the provider listening on c's address as if a
// handshake had met it, for tests that talk to a provider without one.
// Nothing listening leaves the client without an identity.
func pinTestIdentity(c *providerClient) {
	if c.invalid != nil {
		return
	}
	v, err := viewConnection(&c.diag, c.dialAddr, netip.AddrPort{})
	if err != nil || len(v.Listeners) == 0 {
		return
	}
	id := &providerIdentity{UID: v.Listeners[0].UID}
	for _, l := range v.Listeners {
		id.Inodes = append(id.Inodes, l.Inode)
	}
	c.ident.Store(id)
}

// refProvider is a reference provider serving in the test process.
type refProvider struct {
	url            string
	stdout, stderr *syncBuffer
	stop           func() // ends it before the test does; once
}

// startRefProvider runs serveProvider until the test ends.
func startRefProvider(t testing.TB, opts providerOptions) *refProvider {
	t.Helper()
	if opts.Listen == (loopbackAddr{}) {
		opts.Listen = mustListen("127.0.0.1:0")
	}
	if opts.Token == "" {
		opts.Token = providerTestToken
	}
	p := &refProvider{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveProvider(ctx, &system{stdout: p.stdout, stderr: p.stderr}, opts, func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("provider did not start: %v", err)
	}
	p.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("provider returned %v", err)
		}
	})
	t.Cleanup(p.stop)
	return p
}

// wireRequestVector is one request and the status the provider must answer.
type wireRequestVector struct {
	Name         string `json:"name"`
	Method       string `json:"method"`
	Path         string `json:"path"`
	Auth         string `json:"auth"` // valid, none, wrong, prefix, basic, lowercase, raw
	ContentType  string `json:"contentType"`
	Body         string `json:"body"`
	PadTo        int    `json:"padTo"`
	ExpectStatus int    `json:"expectStatus"`
}

func (v wireRequestVector) send(t *testing.T, hc *http.Client, base string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(v.Method, base+v.Path, strings.NewReader(padWireBody(v.Body, v.PadTo)))
	if err != nil {
		t.Fatal(err)
	}
	switch v.Auth {
	case "valid":
		req.Header.Set("Authorization", "Bearer "+providerTestToken)
	case "none":
	case "wrong":
		req.Header.Set("Authorization", "Bearer not-the-token")
	case "prefix":
		req.Header.Set("Authorization", "Bearer "+providerTestToken[:len(providerTestToken)-1])
	case "basic":
		req.Header.Set("Authorization", "Basic "+providerTestToken)
	case "lowercase":
		req.Header.Set("Authorization", "bearer "+providerTestToken)
	case "raw":
		req.Header.Set("Authorization", providerTestToken)
	default:
		t.Fatalf("vector auth %q", v.Auth)
	}
	if v.ContentType != "" {
		req.Header.Set("Content-Type", v.ContentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readProviderAudit(t *testing.T, file string) []providerAuditRecord {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []providerAuditRecord
	for line := range strings.Lines(string(raw)) {
		var r providerAuditRecord
		if err := decodeStrict([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// providerProcess is "acpguard provider" running as a real process.
type providerProcess struct {
	url    string // as announced: scheme://host:port
	port   string
	mu     sync.Mutex
	stderr strings.Builder
}

func (pp *providerProcess) stderrText() string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.stderr.String()
}

// startProviderProcess runs the provider on examples/policy.json with args
// (listening on 127.0.0.1:0 unless args name --listen) until the test ends.
func startProviderProcess(t testing.TB, args ...string) *providerProcess {
	t.Helper()
	return startProviderProcessEnv(t, nil, args...)
}

// startProviderProcessEnv is startProviderProcess with env ("KEY=VALUE")
// added to the provider's environment.
func startProviderProcessEnv(t testing.TB, env []string, args ...string) *providerProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	full := []string{"provider", "--policy", "examples/policy.json"}
	if !slices.Contains(args, "--listen") {
		full = append(full, "--listen", "127.0.0.1:0")
	}
	cmd := acpguardCmd(t, ctx, append(full, args...), append([]string{envGuardToken + "=" + providerTestToken}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pp := &providerProcess{}
	announced := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(announced)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			pp.mu.Lock()
			pp.stderr.WriteString(sc.Text() + "\n")
			pp.mu.Unlock()
			if u, ok := strings.CutPrefix(sc.Text(), "acpguard provider: listening on "); ok {
				announced <- u
			}
		}
	})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		wg.Wait()
		if err := cmd.Wait(); err != nil {
			t.Errorf("provider after SIGTERM: %v; stderr %q", err, pp.stderrText())
		}
		cancel()
	})
	select {
	case pp.url = <-announced:
	case <-time.After(testTimeout(20 * time.Second)):
	}
	if pp.url == "" {
		t.Fatalf("provider did not announce its URL; stderr %q", pp.stderrText())
	}
	_, pp.port, _ = net.SplitHostPort(pp.url[strings.Index(pp.url, "//")+2:])
	return pp
}

// providerTestCA is a throwaway certificate authority.
type providerTestCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM, for SSL_CERT_FILE
	dir  string
}

// leaf issues a server certificate for names (DNS names or IP addresses)
// and returns its certificate and key files.
func (ca *providerTestCA) leaf(t *testing.T, name string, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writeTestPEM(t, filepath.Join(ca.dir, name+".pem"), "CERTIFICATE", der),
		writeTestPEM(t, filepath.Join(ca.dir, name+".key"), "PRIVATE KEY", pkcs8)
}

// leafKey returns the key file of a fresh leaf, to pair with another leaf.
func (ca *providerTestCA) leafKey(t *testing.T) string {
	_, key := ca.leaf(t, "stray", "localhost")
	return key
}

func newProviderTestCA(t *testing.T) *providerTestCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "acpguard test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &providerTestCA{cert: cert, key: key, dir: t.TempDir()}
	ca.file = writeTestPEM(t, filepath.Join(ca.dir, "ca.pem"), "CERTIFICATE", der)
	return ca
}

func writeTestPEM(t *testing.T, file, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Metrics: a strict parser for Prometheus text.

var (
	promStrictNameRE   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promStrictLabelRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	promStrictSampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)
	promStrictTypes    = map[string]bool{"counter": true, "gauge": true, "histogram": true, "summary": true, "untyped": true}
)

// promParseStrict parses exposition text strictly and returns every
// sample by series ("name{a=\"x\",b=\"y\"}", labels sorted). It fails on
// anything a Prometheus scraper would reject or that breaks the format's
// rules: a sample before its family's TYPE, a family split in two, a
// duplicate series, a negative counter, an inconsistent histogram.
func promParseStrict(text string) (map[string]float64, error) {
	if text == "" || !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("empty or not newline-terminated")
	}
	samples := map[string]float64{}
	types := map[string]string{}
	helps := map[string]bool{}
	closed := map[string]bool{} // families whose samples have ended
	current := ""
	type bucket struct {
		le    float64
		count float64
	}
	hists := map[string]map[string][]bucket{} // family -> other labels -> buckets
	sums := map[string]bool{}
	counts := map[string]float64{}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, a...))
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kind, rest, _ := strings.Cut(rest, " ")
			name, arg, _ := strings.Cut(rest, " ")
			if !promStrictNameRE.MatchString(name) {
				return nil, bad("bad metric name")
			}
			switch kind {
			case "HELP":
				if helps[name] || arg == "" {
					return nil, bad("repeated or empty HELP")
				}
				helps[name] = true
			case "TYPE":
				if types[name] != "" || !promStrictTypes[arg] || closed[name] {
					return nil, bad("repeated, unknown or late TYPE")
				}
				types[name] = arg
			default:
				return nil, bad("unknown comment kind")
			}
			if current != name {
				if current != "" {
					closed[current] = true
				}
				current = name
			}
			continue
		}
		m := promStrictSampleRE.FindStringSubmatch(line)
		if m == nil {
			return nil, bad("not a sample line")
		}
		name, rawLabels, rawValue := m[1], m[2], m[3]
		family, suffix := name, ""
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := strings.CutSuffix(name, s); ok && types[f] == "histogram" {
				family, suffix = f, s
			}
		}
		if family != current || types[family] == "" {
			return nil, bad("sample outside its family (current %q)", current)
		}
		labels, err := promParseLabels(rawLabels)
		if err != nil {
			return nil, bad("%v", err)
		}
		value, err := strconv.ParseFloat(rawValue, 64)
		if err != nil || math.IsNaN(value) {
			return nil, bad("bad value")
		}
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var series strings.Builder
		series.WriteString(name)
		var other strings.Builder
		if len(keys) > 0 {
			series.WriteString("{")
			for i, k := range keys {
				if i > 0 {
					series.WriteString(",")
				}
				fmt.Fprintf(&series, "%s=%q", k, labels[k])
				if k != "le" {
					fmt.Fprintf(&other, "%s=%q,", k, labels[k])
				}
			}
			series.WriteString("}")
		}
		if _, dup := samples[series.String()]; dup {
			return nil, bad("duplicate series")
		}
		samples[series.String()] = value
		switch typ := types[family]; {
		case typ == "counter" && value < 0:
			return nil, bad("negative counter")
		case typ == "histogram":
			key := other.String()
			switch suffix {
			case "_bucket":
				le, ok := labels["le"]
				if !ok {
					return nil, bad("bucket without le")
				}
				bound, err := strconv.ParseFloat(le, 64)
				if err != nil {
					return nil, bad("bad le")
				}
				if hists[family] == nil {
					hists[family] = map[string][]bucket{}
				}
				bs := hists[family][key]
				if len(bs) > 0 && (bound <= bs[len(bs)-1].le || value < bs[len(bs)-1].count) {
					return nil, bad("buckets not increasing")
				}
				hists[family][key] = append(bs, bucket{bound, value})
			case "_sum":
				sums[family+key] = true
			case "_count":
				counts[family+key] = value
			default:
				return nil, bad("bare sample of a histogram")
			}
		}
	}
	for family, byLabels := range hists {
		for key, bs := range byLabels {
			last := bs[len(bs)-1]
			if !math.IsInf(last.le, 1) {
				return nil, fmt.Errorf("histogram %s{%s} has no +Inf bucket", family, key)
			}
			if c, ok := counts[family+key]; !ok || c != last.count || !sums[family+key] {
				return nil, fmt.Errorf("histogram %s{%s}: _count %v (present %v) vs +Inf %v, _sum present %v", family, key, c, ok, last.count, sums[family+key])
			}
		}
	}
	return samples, nil
}

// promParseLabels parses {a="x",b="y"}; values may escape \\, \" and \n.
func promParseLabels(raw string) (map[string]string, error) {
	labels := map[string]string{}
	if raw == "" {
		return labels, nil
	}
	s := raw[1 : len(raw)-1]
	for s != "" {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok || !promStrictLabelRE.MatchString(name) {
			return nil, fmt.Errorf("bad label in %s", raw)
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' {
				i++
				if i == len(rest) {
					return nil, fmt.Errorf("dangling escape in %s", raw)
				}
				switch rest[i] {
				case '\\', '"':
					v.WriteByte(rest[i])
				case 'n':
					v.WriteByte('\n')
				default:
					return nil, fmt.Errorf("bad escape in %s", raw)
				}
				continue
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, fmt.Errorf("unterminated value in %s", raw)
		}
		if _, dup := labels[name]; dup {
			return nil, fmt.Errorf("duplicate label %s", name)
		}
		labels[name] = v.String()
		s = rest[i+1:]
		if s != "" {
			var ok bool
			if s, ok = strings.CutPrefix(s, ","); !ok || s == "" {
				return nil, fmt.Errorf("bad separator in %s", raw)
			}
		}
	}
	return labels, nil
}

// The sandbox: a faked Landlock probe, a test sandbox and its workspace.

// envTestLandlock makes the "main" test role (and the children it
// starts) play a kernel: "ENOSYS" has no Landlock, "EOPNOTSUPP" has it
// disabled at boot, a number is the ABI version. Only the test binary
// reads it.
const envTestLandlock = "ACPGUARD_TEST_LANDLOCK"

// fakeLandlock returns a probe playing the kernel named as envTestLandlock
// names it, or nil for "" (the real kernel).
func fakeLandlock(kernel string) func() (int, error) {
	switch kernel {
	case "":
		return nil
	case "ENOSYS":
		return func() (int, error) {
			return 0, fmt.Errorf("landlock_create_ruleset version probe: %w", syscall.ENOSYS)
		}
	case "EOPNOTSUPP":
		return func() (int, error) {
			return 0, fmt.Errorf("landlock_create_ruleset version probe: %w", syscall.EOPNOTSUPP)
		}
	}
	abi, err := strconv.Atoi(kernel)
	if err != nil {
		panic(envTestLandlock + " " + strconv.Quote(kernel) + ": want ENOSYS, EOPNOTSUPP or an ABI version")
	}
	return func() (int, error) { return abi, nil }
}

// envTestUserNS "off" makes the "main" test role (and the children it
// starts) play a system whose unprivileged user namespaces are off: the
// mount stage's probe fails as clone(CLONE_NEWUSER) does there. Only the
// test binary reads it.
const envTestUserNS = "ACPGUARD_TEST_USERNS"

// noUserNamespaces is the probe of a system with user namespaces off
// (user.max_user_namespaces=0 answers ENOSPC).
func noUserNamespaces() error {
	return fmt.Errorf("fork/exec %s: %w", stageExecutable, syscall.ENOSPC)
}

// withoutUserNamespaces makes this process play a system whose user
// namespaces are off for the rest of the test.
func withoutUserNamespaces(t *testing.T) {
	saved := probeMountNamespace
	probeMountNamespace = noUserNamespaces
	protectProbeOnce = sync.Once{}
	t.Cleanup(func() {
		probeMountNamespace = saved
		protectProbeOnce = sync.Once{}
	})
}

// withKernel makes probeLandlock play kernel for the rest of the test.
func withKernel(t *testing.T, kernel string) {
	t.Helper()
	saved := probeLandlock
	probeLandlock = fakeLandlock(kernel)
	t.Cleanup(func() { probeLandlock = saved })
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// envTestSandbox confines the tools of the "main" test role:
// "workspace", optionally followed by ",network=none" and ",unix=none".
// Children inherit it, so the acp children of a serve a test starts are
// confined too.
const envTestSandbox = "ACPGUARD_TEST_SANDBOX"

// setTestSandbox reads envTestSandbox for TestMain (main_test.go).
func setTestSandbox() {
	v := os.Getenv(envTestSandbox)
	if v == "" {
		return
	}
	parts := strings.Split(v, ",")
	cfg := workspaceConfig()
	if parts[0] != sandboxWorkspace {
		fmt.Fprintf(os.Stderr, "%s %q: want %q\n", envTestSandbox, v, sandboxWorkspace)
		os.Exit(2)
	}
	for _, p := range parts[1:] {
		switch p {
		case "network=none":
			cfg.Network = sandboxNone
		case "unix=none":
			cfg.Unix = sandboxNone
		default:
			fmt.Fprintf(os.Stderr, "%s %q: unknown option %q\n", envTestSandbox, v, p)
			os.Exit(2)
		}
	}
	sandboxTestOverride = &cfg
}

// workspaceConfig is the workspace profile with everything else at its default.
func workspaceConfig() sandboxConfig {
	return sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll}
}

func requireLandlock(t testing.TB) int {
	t.Helper()
	abi, err := probeLandlock()
	if err != nil {
		t.Skipf("the kernel has no Landlock (%v): nothing to confine with here", err)
	}
	return abi
}

// sandboxTestEnv is the environment builder of the processes tests start;
// GORACE keeps a race-enabled helper from sleeping a second at exit.
var sandboxTestEnv = newProcEnv(append(os.Environ(), "GORACE=atexit_sleep_ms=0"))

func newTestSandbox(t testing.TB, cfg sandboxConfig, cwd string) *sandboxSession {
	t.Helper()
	requireLandlock(t)
	sb, err := newSandboxSession(cfg, cwd, sandboxTestEnv)
	if err != nil {
		t.Fatalf("newSandboxSession: %v", err)
	}
	t.Cleanup(sb.close)
	// Made now, so that a test may replace the ruleset.
	if err := sb.make(); err != nil {
		t.Fatalf("sandbox make: %v", err)
	}
	return sb
}

// Process groups: shell calls that leave a background, /proc stat.

// shellCall is a scripted prompt line running command with run_shell_command.
func shellCall(command string, background bool) string {
	args, _ := json.Marshal(map[string]any{"command": command, "is_background": background})
	return "call run_shell_command " + string(args)
}

func mustProcStat(t *testing.T, pid int) procInfo {
	t.Helper()
	p, err := readProcStat(pid)
	if err != nil {
		t.Fatalf("read /proc/%d/stat: %v", pid, err)
	}
	return p
}

// serve's event streams: the stream log, a stalled reader.

// takeAll takes and releases everything sub has to write now, as a
// stream's handler would, and reports whether its stream ends after that
// and with which stream_dropped notice.
func takeAll(l *streamLog, sub *streamSubscriber) (evs []*streamEvent, ended bool, reason string) {
	for {
		batch, end, why := l.take(sub)
		if len(batch) == 0 {
			return evs, end, why
		}
		for _, ev := range batch {
			evs = append(evs, &streamEvent{id: ev.id, typ: ev.typ, data: ev.data})
		}
		l.release(sub, batch)
	}
}

// replayOf returns the events a new stream resuming after id after replays.
func replayOf(l *streamLog, after int64) []*streamEvent {
	sub := l.subscribe(after, nil)
	defer l.unsubscribe(sub)
	evs, _, _ := takeAll(l, sub)
	return evs
}

// stalledReadBuffer is the receive buffer of a host that stopped reading:
// the kernel takes a few KiB for it whatever is asked.
const stalledReadBuffer = 1024

// openStalledStream opens an event stream as a host that then stops
// reading: a real loopback TCP connection with a tiny receive buffer that
// reads the response head and nothing after it. It returns the status.
func openStalledStream(t testing.TB, base, path string, header ...string) (net.Conn, int) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, stalledReadBuffer)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	addr := strings.TrimPrefix(base, "http://")
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	// Byte by byte, so nothing past the head leaves the socket buffer.
	var head []byte
	b := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if _, err := conn.Read(b); err != nil {
			t.Fatalf("read response head %q: %v", head, err)
		}
		head = append(head, b[0])
	}
	var status int
	fmt.Sscanf(string(head), "HTTP/1.1 %d", &status)
	return conn, status
}

// newStreamLog returns a log with the default ring, no subscriber bound and
// no daemon budget.
func newStreamLog() *streamLog {
	return newBoundedStreamLog(defaultEventRingSize, 0, nil, func(string, ...any) {})
}

// serve in process: a test daemon with a fake provider, host responses, SSE
// events, sessions and turns, guarded calls, decisions.

// testDaemon is one in-process serveDaemon on a loopback port.
type testDaemon struct {
	url    string
	stderr *syncBuffer
	stop   func() error
	// token is sent as the bearer token by every request that names no
	// Authorization header of its own; "" sends none.
	token string
	// pid is serve's process, where the test started one of its own.
	pid int
}

// do sends one host request; body "" sends none.
func (td *testDaemon) do(t testing.TB, method, path, body string, header ...string) hostResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, td.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if td.token != "" {
		req.Header.Set("Authorization", "Bearer "+td.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return hostResponse{status: resp.StatusCode, header: resp.Header, body: b, closed: resp.Close}
}

// eventStreamBound bounds how long a test reads one event stream: a turn
// of a hundred guarded shell calls takes seconds alone and minutes on a
// machine loaded many times over its cores. It only ends a hung test.
var eventStreamBound = testTimeout(5 * time.Minute)

// openEvents opens a session's event stream.
func (td *testDaemon) openEvents(t testing.TB, id string, lastEventID string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventStreamBound)
	req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+id+"/events", nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if td.token != "" {
		req.Header.Set("Authorization", "Bearer "+td.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	if l, _ := br.ReadString('\n'); l != "retry: 3000\n" {
		t.Fatalf("stream starts with %q, want retry: 3000", l)
	}
	return br
}

// readSSEResuming reads stream like readSSE up to stop. A healthy host
// that the scheduler kept from reading may still fall behind a burst and
// be dropped (DESIGN.md §7): as a host does, it reconnects with the id of
// the last event it read (none: the whole ring) and reads on. The events
// come back each once, without the stream_dropped notices.
func (td *testDaemon) readSSEResuming(t testing.TB, id string, stream *bufio.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	for drops := 0; ; drops++ {
		evs := readSSE(t, stream, stop)
		if k := len(evs) - 1; k >= 0 && evs[k].typ == eventStreamDropped && evs[k].id == "" {
			evs = evs[:k]
		}
		out = append(out, evs...)
		if k := len(out) - 1; k >= 0 && stop(out[k]) {
			return out
		}
		if drops == maxStreamResumes {
			t.Fatalf("event stream dropped %d times before the end; read %v", drops+1, out)
		}
		last := ""
		for k := len(out) - 1; k >= 0 && last == ""; k-- {
			last = out[k].id
		}
		stream = td.openEvents(t, id, last)
	}
}

// maxStreamResumes bounds readSSEResuming's reconnections: each one
// follows a drop for a queue full of events the host then read, so a turn
// of a few queues' worth never needs this many.
const maxStreamResumes = 20

// startTestDaemon runs serveDaemon with opts; extraEnv ("K=V") is added to
// the environment its children inherit.
func startTestDaemon(t testing.TB, opts serveOptions, extraEnv ...string) *testDaemon {
	t.Helper()
	if opts.Hostname == (bindAddr{}) {
		opts.Hostname = bindAddr{"127.0.0.1", true}
	}
	if opts.MaxPendingPrompts == 0 {
		opts.MaxPendingPrompts = 5
	}
	if opts.Guard.Mode == "" {
		opts.Guard.Mode = guardModeOff
	}
	if len(opts.Workspaces) == 0 {
		opts.Workspaces = []string{t.TempDir()}
	}
	stderr := &syncBuffer{}
	// A role in extraEnv takes the main role's place (newProcEnv keeps a
	// name's first entry).
	env := append(os.Environ(), roleEnv("main"))
	role := len(env) - 1
	for _, kv := range extraEnv {
		if strings.HasPrefix(kv, envTestRole+"=") {
			env[role] = kv
		} else {
			env = append(env, kv)
		}
	}
	sys := &system{env: newProcEnv(env), stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr}
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serveDaemon(ctx, sys, opts, func(u string) { urls <- u }) }()
	td := &testDaemon{stderr: stderr}
	select {
	case td.url = <-urls:
	case err := <-done:
		cancel()
		t.Fatalf("serveDaemon returned before listening: %v", err)
	}
	var once sync.Once
	var stopErr error
	td.stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := td.stop(); err != nil {
			t.Errorf("serveDaemon: %v", err)
		}
	})
	return td
}

type hostResponse struct {
	status int
	header http.Header
	body   []byte
	closed bool // the server closes the connection after this answer
}

// wantError checks a host error response's status and code.
func wantError(t testing.TB, r hostResponse, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	// Qwen Code's extra keys (sessionId, ...) may follow error and code.
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not {error, code, ...}: %v", r.body, err)
	}
	if e.Code != code || e.Error == "" {
		t.Errorf("error body = %s, want code %q and a message", r.body, code)
	}
}

// readSSE reads events from an event stream until stop returns true.
type sseEvent struct {
	id, typ string
	data    json.RawMessage
}

// acpChildren returns this process's children that run "acpguard acp": the
// children an in-process daemon started.
func acpChildren(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, pid := range childPIDs(t, os.Getpid()) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == "acp" {
			out = append(out, pid)
		}
	}
	return out
}

// testProvider is a policy provider on a loopback socket that counts every
// connection and prepare, and decides with decide.
type testProvider struct {
	srv   *httptest.Server
	token string
	mu    sync.Mutex
	conns int
	calls []map[string]json.RawMessage
	// verdict decides a prepare; a status other than 200 answers that
	// status with an empty body.
	verdict func(tool string, args json.RawMessage) (status int, allowed bool, reason string)
	gate    chan struct{} // when set, prepare waits for it before answering
	inCall  chan struct{} // when set, prepare signals it on arrival
}

func (p *testProvider) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/handshake":
		fmt.Fprintf(w, `{"protocolVersion":1,"nonce":%s,"capabilities":{"prepare":true}}`, req["nonce"])
	case "/v1/prepare":
		p.mu.Lock()
		p.calls = append(p.calls, req)
		gate, inCall := p.gate, p.inCall
		p.mu.Unlock()
		if inCall != nil {
			inCall <- struct{}{}
		}
		if gate != nil {
			<-gate
		}
		var tool string
		json.Unmarshal(req["toolName"], &tool)
		status, allowed, reason := p.verdict(tool, req["arguments"])
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		res := map[string]any{"protocolVersion": 1, "requestId": req["requestId"], "allowed": allowed}
		if reason != "" {
			res["reason"] = reason
		}
		json.NewEncoder(w).Encode(res)
	default:
		http.NotFound(w, r)
	}
}

func (p *testProvider) counts() (conns, prepares int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns, len(p.calls)
}

func (p *testProvider) guard(t testing.TB) guardConfig {
	u, err := url.Parse(p.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: testTimeout(3 * time.Second), Token: p.token}
}

func newTestProvider(t testing.TB) *testProvider {
	p := &testProvider{token: "guard-token-for-tests", verdict: func(string, json.RawMessage) (int, bool, string) { return 200, true, "" }}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serveHTTP))
	p.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
		}
	}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

// newSession creates a session and returns its id: a new one each time,
// sessionScope "thread" unless body names a scope.
func (td *testDaemon) newSession(t testing.TB, body string) string {
	t.Helper()
	r := td.do(t, "POST", "/session", threadScope(t, body))
	var res newSessionResponse
	if r.status != 200 || decodeStrict(r.body, &res) != nil || res.SessionID == "" {
		t.Fatalf("POST /session %s = %d %s", body, r.status, r.body)
	}
	return res.SessionID
}

// threadScope is a POST /session body that asks for sessionScope "thread"
// unless it names a scope or is no JSON object.
func threadScope(t testing.TB, body string) string {
	t.Helper()
	fields := map[string]json.RawMessage{}
	if strings.TrimSpace(body) != "" && json.Unmarshal([]byte(body), &fields) != nil {
		return body
	}
	if _, named := fields["sessionScope"]; !named {
		fields["sessionScope"] = json.RawMessage(`"thread"`)
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prompt submits a one-block text prompt and returns its promptId.
func (td *testDaemon) prompt(t testing.TB, id, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
	r := td.do(t, "POST", "/session/"+id+"/prompt", string(body))
	var res promptAccepted
	if r.status != http.StatusAccepted || decodeStrict(r.body, &res) != nil || res.PromptID == "" {
		t.Fatalf("POST prompt = %d %s", r.status, r.body)
	}
	return res.PromptID
}

type envelope struct {
	ID       int64           `json:"id"`
	V        int             `json:"v"`
	Type     string          `json:"type"`
	PromptID string          `json:"promptId"`
	Data     json.RawMessage `json:"data"`
	// Originator is the X-Qwen-Client-Id the event answers, if named.
	Originator string       `json:"originatorClientId"`
	Meta       envelopeMeta `json:"_meta"`
}

func parseEnvelope(t testing.TB, ev sseEvent) envelope {
	t.Helper()
	var e envelope
	if err := decodeStrict(ev.data, &e); err != nil {
		t.Fatalf("event data %s: %v", ev.data, err)
	}
	if e.V != 1 || e.Type != ev.typ || strconv.FormatInt(e.ID, 10) != ev.id {
		t.Fatalf("envelope %s does not match id %s / event %s", ev.data, ev.id, ev.typ)
	}
	return e
}

// texts returns the agent_message_chunk texts of session_update events.
func texts(t testing.TB, evs []sseEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.typ != eventSessionUpdate {
			continue
		}
		var d struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct{ Type, Text string }
			} `json:"update"`
		}
		if err := json.Unmarshal(parseEnvelope(t, ev).Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Update.SessionUpdate == "user_message_chunk" {
			continue // serve's echo of the prompt, not the agent's text
		}
		out = append(out, d.Update.Content.Text)
	}
	return out
}

// untilTurnEnd stops reading at the turn_complete or turn_error of promptID.
func untilTurnEnd(promptID string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		return (ev.typ == eventTurnComplete || ev.typ == eventTurnError) && strings.Contains(string(ev.data), `"promptId":"`+promptID+`"`)
	}
}

// isEcho reports whether ev is serve's user_message_chunk echo of a prompt.
func isEcho(ev sseEvent) bool {
	return ev.typ == eventSessionUpdate && strings.Contains(string(ev.data), `"sessionUpdate":"user_message_chunk"`)
}

// childUpdate reports whether ev is a session_update the child sent: the
// sign that the child runs the prompt.
func childUpdate(ev sseEvent) bool { return ev.typ == eventSessionUpdate && !isEcho(ev) }

// runTurn prompts and returns the turn's events, up to its end, without
// serve's echo of the prompt.
func (td *testDaemon) runTurn(t testing.TB, id, text string) (string, []sseEvent) {
	t.Helper()
	stream := td.openEvents(t, id, "")
	pid := td.prompt(t, id, text)
	var evs []sseEvent
	for _, ev := range readSSE(t, stream, untilTurnEnd(pid)) {
		if parseEnvelope(t, ev).PromptID == pid && !isEcho(ev) {
			evs = append(evs, ev)
		}
	}
	return pid, evs
}

func fakeChildEnv(mode string) string { return roleEnv("fake-child", mode) }

// faultGuardTimeout is the shortest provider timeout the design allows
// ("an integer from 100 through 30000 ms") with room for a busy CI machine.
const faultGuardTimeout = 300 * time.Millisecond

// guardedYolo returns serve options in required mode against g, in the yolo
// approval mode so the guard is the only gate a call meets.
func guardedYolo(t testing.TB, ws string, g guardConfig) serveOptions {
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return serveOptions{Workspaces: []string{ws}, SettingsFile: settings, Guard: g, DecisionLog: filepath.Join(t.TempDir(), "d.jsonl")}
}

// writeCall is a scripted prompt line proposing one write_file of name.
func writeCall(name string) string {
	return `call write_file {"file_path":"` + name + `","content":"x"}`
}

// wantDeniedWrite checks that the only tool call of evs failed with the
// guard failure text and that its file does not exist.
func wantDeniedWrite(t *testing.T, evs []sseEvent, ws, name, reason string) {
	t.Helper()
	ups := toolUpdates(t, evs)
	if len(ups) == 0 {
		t.Fatalf("no tool updates in %d events", len(evs))
	}
	last := ups[len(ups)-1]
	if last.Status != "failed" || !strings.Contains(string(last.RawOutput), errTypeExecutionDenied) || !strings.Contains(string(last.RawOutput), reason) {
		t.Errorf("final update of %s = %+v, want failed %s %q", name, last, errTypeExecutionDenied, reason)
	}
	for _, u := range ups {
		if u.Status == "in_progress" {
			t.Errorf("%s reached in_progress without a decision", name)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was written without an allow (stat: %v)", name, err)
	}
}

// parentPID reads a process's parent from /proc.
func parentPID(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(fields[1])
	return n
}

// scrape fetches serve's /metrics and parses it strictly.
func (td *testDaemon) scrape(t testing.TB, header ...string) map[string]float64 {
	t.Helper()
	r := td.do(t, "GET", metricsPath, "", header...)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != prometheusTextContentType {
		t.Fatalf("GET /metrics = %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	samples, err := promParseStrict(string(r.body))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%s", err, r.body)
	}
	return samples
}

// wantLimitHits checks that the limit code was hit n times: the counter
// says so, and so many warnings were logged.
func wantLimitHits(t testing.TB, td *testDaemon, code string, n int) {
	t.Helper()
	if got := td.scrape(t)[`acpguard_serve_limit_hits_total{code="`+code+`"}`]; got != float64(n) {
		t.Errorf("limit hits %s = %v, want %d", code, got, n)
	}
	if got := strings.Count(td.stderr.String(), `level=WARN msg="limit reached" code=`+code+" "); got != n {
		t.Errorf("%d log lines for limit %s, want %d; log:\n%s", got, code, n, td.stderr.String())
	}
}

// collectSSE is readSSE for goroutines other than the test's.
func collectSSE(r *bufio.Reader, stop func(sseEvent) bool) ([]sseEvent, error) {
	var out []sseEvent
	var cur sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
				if stop(cur) {
					return out, nil
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

// decisions parses the decision log lines written so far.
func decisions(t *testing.T, log string) []decisionRecord {
	t.Helper()
	var out []decisionRecord
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !strings.HasPrefix(line, `{"time"`) {
			continue
		}
		var rec decisionRecord
		if err := decodeStrict([]byte(line), &rec); err != nil {
			t.Fatalf("decision log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// serve as a process: started, its listen line, its children, tool updates
// on its host stream, guard arguments.

const serveListenPrefix = "acpguard serve listening on "

// serveListenRe reads serve's startup line as a host of Qwen Code's serve
// does: the URL, then the mode and the workspace in parentheses.
var serveListenRe = regexp.MustCompile(`^acpguard serve listening on (https?://\S+) \(mode=([a-z-]+), workspace=(/.*)\)$`)

// serveListenURL returns the URL of serve's startup line.
func serveListenURL(line string) (string, bool) {
	m := serveListenRe.FindStringSubmatch(strings.TrimRight(line, "\n"))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// serveProcess is a running "acpguard serve".
type serveProcess struct {
	testDaemon
	cmd *exec.Cmd
}

// startServe starts acpguard serve with args (plus --port 0) and waits for
// its listening line. Its hosts send a token only where a test passes one:
// a required-mode serve given no host token gets --allow-tokenless-loopback
// instead of a generated one (TestServeGeneratesHostToken tests that default).
func startServe(t *testing.T, args []string, env ...string) *serveProcess {
	t.Helper()
	if tokenlessRequired(args, env) {
		args = append(args, "--"+flagAllowTokenlessLoopback)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
	cmd := acpguardCmd(t, ctx, append([]string{"serve", "--port", "0"}, args...), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sp := &serveProcess{cmd: cmd}
	sp.stderr = stderr
	exited := make(chan error, 1)
	var once sync.Once
	var exitErr error
	sp.stop = func() error {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			exitErr = <-exited
		})
		return exitErr
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	go func() { exited <- cmd.Wait(); cancel() }()
	url, ok := serveListenURL(line)
	if !ok {
		sp.stop()
		t.Fatalf("serve printed %q (%v), stderr:\n%s", line, err, stderr.String())
	}
	sp.url = url
	t.Cleanup(func() { sp.stop() })
	return sp
}

// childPIDs returns the processes whose parent is pid.
func childPIDs(t testing.TB, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// toolUpdates returns the tool_call and tool_call_update updates of a turn.
type hostToolUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	ToolCallID    string          `json:"toolCallId"`
	Status        string          `json:"status"`
	RawInput      json.RawMessage `json:"rawInput"`
	RawOutput     json.RawMessage `json:"rawOutput"`
	Meta          struct {
		ToolName string `json:"toolName"`
	} `json:"_meta"`
}

// toolCallUpdate returns the tool_call or tool_call_update an event's
// envelope carries and the call's key, "<promptId>/<toolCallId>"; ok is
// false for any other update.
func toolCallUpdate(e envelope) (key string, u hostToolUpdate, ok bool) {
	var d struct {
		Update hostToolUpdate `json:"update"`
	}
	json.Unmarshal(e.Data, &d)
	if !strings.HasPrefix(d.Update.SessionUpdate, "tool_call") {
		return "", d.Update, false
	}
	return e.PromptID + "/" + d.Update.ToolCallID, d.Update, true
}

// waitDecisions returns the decision records serve logged on its stderr
// once there are at least n, or what is there when testTimeout(10s) has
// passed.
func waitDecisions(t *testing.T, td *testDaemon, n int) []decisionRecord {
	t.Helper()
	recs := decisions(t, td.stderr.String())
	for deadline := time.Now().Add(testTimeout(10 * time.Second)); len(recs) < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		recs = decisions(t, td.stderr.String())
	}
	return recs
}

func toolUpdates(t *testing.T, evs []sseEvent) []hostToolUpdate {
	t.Helper()
	var out []hostToolUpdate
	for _, ev := range evs {
		if ev.typ != eventSessionUpdate {
			continue
		}
		var d struct {
			Update hostToolUpdate `json:"update"`
		}
		json.Unmarshal(parseEnvelope(t, ev).Data, &d)
		if strings.HasPrefix(d.Update.SessionUpdate, "tool_call") {
			out = append(out, d.Update)
		}
	}
	return out
}

// yoloSettings is a settings file whose approval mode asks nothing, so the
// guard is the only gate a call meets.
func yoloSettings(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func guardArgs(t *testing.T, p *testProvider, ws, logPath string) ([]string, string) {
	return []string{"--workspace", ws, "--decision-log", logPath, "--settings", yoloSettings(t),
			"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", p.srv.URL},
		envGuardToken + "=" + p.token
}

// servedLines starts cmd and returns the URL of its listening line and the
// lines of stdout after it; serve is stopped with SIGTERM when the test
// ends (stop does it earlier and waits).
func servedLines(t *testing.T, cmd *exec.Cmd) (url string, lines <-chan string, stderr *syncBuffer, stop func() error) {
	t.Helper()
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	all := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			all <- sc.Text()
		}
		close(all)
		exited <- cmd.Wait()
	}()
	stopped := false
	var exitErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			exitErr = <-exited
		}
		return exitErr
	}
	t.Cleanup(func() { stop() })
	select {
	case line, ok := <-all:
		if u, found := serveListenURL(line); ok && found {
			return u, all, stderr, stop
		}
		stop()
		t.Fatalf("serve printed %q first, stderr:\n%s", line, stderr.String())
	case <-time.After(testTimeout(time.Minute)):
		t.Fatalf("serve printed nothing in a minute, stderr:\n%s", stderr.String())
	}
	return "", nil, nil, nil
}

// tokenlessRequired reports whether serve args and env ask for required mode
// and give no host token and no --allow-tokenless-loopback.
func tokenlessRequired(args, env []string) bool {
	required := false
	for i, a := range args {
		switch {
		case a == "--"+flagGuardMode+"="+guardModeRequired,
			a == "--"+flagGuardMode && i+1 < len(args) && args[i+1] == guardModeRequired:
			required = true
		case a == "--token", strings.HasPrefix(a, "--token="), a == "--"+flagHostTokenFile,
			strings.HasPrefix(a, "--"+flagHostTokenFile+"="), a == "--"+flagAllowTokenlessLoopback:
			return false
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, envServerToken+"=") {
			return false
		}
	}
	return required
}

// Measuring separate processes: the release binary, CPU time and resident
// memory of a process tree.

// envBenchBin names a built acpguard binary the release-binary measurements
// run instead of building this tree, so two builds compare in one run.
const envBenchBin = "ACPGUARD_BENCH_BIN"

// releaseBinary returns the binary the release-binary measurements run: the
// one envBenchBin names, else this tree built as released (CGO_ENABLED=0,
// -trimpath, -ldflags='-s -w').
func releaseBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(envBenchBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s %q: %v", envBenchBin, bin, err)
		}
		return bin
	}
	bin := filepath.Join(t.TempDir(), "acpguard")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("release build: %v\n%s", err, out)
	}
	return bin
}

// clockTick is the unit of the times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 per second for user space on every architecture.
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time of a live process, user and system, its
// own and that of the children it has reaped (/proc/PID/stat fields 14-17).
func procCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: field 14 is the 12th after the comm.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 15 {
		return 0, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read /proc/%d/stat: field %q", pid, f)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// descendants returns pid's live descendants, found by their parent.
func descendants(t testing.TB, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentPID(n); pp != 0 {
			children[pp] = append(children[pp], n)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// treeCPU returns the CPU time of pid and its live descendants, with what
// each has reaped: read while the children still run, it counts them whole.
func treeCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	total, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range descendants(t, pid) {
		if d, err := procCPU(k); err == nil { // a child may end meanwhile
			total += d
		}
	}
	return total
}

// treeRSS returns the resident memory in kB of pid and its live
// descendants, and how many descendants there are.
func treeRSS(t testing.TB, pid int) (kB, procs int) {
	t.Helper()
	kids := descendants(t, pid)
	for _, p := range append([]int{pid}, kids...) {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		for line := range strings.Lines(string(data)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
				kB += n
			}
		}
	}
	return kB, len(kids)
}

// percentile returns the p-quantile (0 to 1) of d, nearest rank below.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// countingListener is a loopback TCP listener that accepts and closes every
// connection and counts them; it closes with the test.
func countingListener(t *testing.T) (net.Listener, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := new(atomic.Int64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return l, accepted
}

// payloadReceiver listens on a loopback TCP port and a loopback UDP port
// and keeps what arrives: the bytes of each TCP connection once it closes
// (a connection that sent none arrives as ""), and each datagram; both
// close with the test.
type payloadReceiver struct {
	tcp     net.Listener
	udp     net.PacketConn
	mu      sync.Mutex
	got     []string
	reading int // connections accepted and not yet read to their end
}

// payloadMax bounds what the receiver keeps of one connection or datagram.
const payloadMax = 64 << 10

func newPayloadReceiver(t *testing.T) *payloadReceiver {
	t.Helper()
	r := &payloadReceiver{}
	var err error
	if r.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tcp.Close() })
	if r.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.udp.Close() })
	go func() {
		for {
			c, err := r.tcp.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.reading++
			r.mu.Unlock()
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(io.LimitReader(c, payloadMax))
				r.mu.Lock()
				defer r.mu.Unlock()
				r.reading--
				r.got = append(r.got, strings.TrimSpace(string(b)))
			}()
		}
	}()
	go func() {
		buf := make([]byte, payloadMax)
		for {
			n, _, err := r.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got = append(r.got, strings.TrimSpace(string(buf[:n])))
			r.mu.Unlock()
		}
	}()
	return r
}

// ports returns the TCP and the UDP port.
func (r *payloadReceiver) ports() (tcp, udp int) {
	return r.tcp.Addr().(*net.TCPAddr).Port, r.udp.LocalAddr().(*net.UDPAddr).Port
}

// has reports whether payload arrived, over either transport.
func (r *payloadReceiver) has(payload string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.got, payload)
}

// received returns everything that arrived so far.
func (r *payloadReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// sync sends marker over both transports from the test itself and waits
// until both arrived and every accepted connection was read to its end. A
// connection a process made before it exited was accepted before the
// marker's, so its bytes are in; a datagram it sent was queued before the
// marker's unless the kernel still held it back.
func (r *payloadReceiver) sync(t *testing.T, marker string) {
	t.Helper()
	for _, network := range []string{"tcp", "udp"} {
		addr := r.tcp.Addr().String()
		if network == "udp" {
			addr = r.udp.LocalAddr().String()
		}
		c, err := net.Dial(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Write([]byte(network + "-" + marker))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the receiver to get the "+network+" marker", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.reading == 0 && slices.Contains(r.got, network+"-"+marker)
		})
	}
}

// procOwnCPU returns the CPU time of a live process alone, user and system
// (/proc/PID/stat fields 14-15): procCPU without the children it has
// reaped.
func procOwnCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read /proc/%d/stat: field %q", pid, f)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// treeThreads sums read of one file of every live thread of pid and of
// its live descendants (/proc/PID/task/TID/file), and of pid's own threads
// alone. /proc keeps no total for a thread or a process that has ended, so
// what one that ends between two readings did is missed: a difference of
// two readings is a floor.
func treeThreads(t testing.TB, pid int, file string, read func(data string) int64) (total, own int64) {
	t.Helper()
	own = threadsSum(pid, file, read)
	total = own
	for _, k := range descendants(t, pid) {
		total += threadsSum(k, file, read)
	}
	return total, own
}

// threadsSum sums read of one file of each live thread of pid; a thread or
// a process that ends meanwhile counts as zero.
func threadsSum(pid int, file string, read func(data string) int64) int64 {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, _ := os.ReadDir(dir)
	var n int64
	for _, task := range tasks {
		if data, err := os.ReadFile(filepath.Join(dir, task.Name(), file)); err == nil {
			n += read(string(data))
		}
	}
	return n
}

// treeCtxSwitches returns the context switches, voluntary and not, of the
// threads of pid and its descendants, and of pid's own, as treeThreads
// sums them: treeCPU's figures for switches.
func treeCtxSwitches(t testing.TB, pid int) (total, own int64) {
	t.Helper()
	return treeThreads(t, pid, "status", func(status string) int64 {
		var n int64
		for line := range strings.Lines(status) {
			name, value, ok := strings.Cut(line, ":")
			if ok && (name == "voluntary_ctxt_switches" || name == "nonvoluntary_ctxt_switches") {
				v, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
				n += v
			}
		}
		return n
	})
}

// treeRunTime returns the time on a CPU, to the nanosecond, of the threads
// of pid and its descendants, and of pid's own, as treeThreads sums them:
// the scheduler's count (schedstat's first field), where the CPU times of
// /proc/PID/stat are in clock ticks, too coarse for a turn.
func treeRunTime(t testing.TB, pid int) (total, own time.Duration) {
	t.Helper()
	ns, ownNs := treeThreads(t, pid, "schedstat", func(schedstat string) int64 {
		ran, _, _ := strings.Cut(schedstat, " ")
		v, _ := strconv.ParseInt(ran, 10, 64)
		return v
	})
	return time.Duration(ns), time.Duration(ownNs)
}

// inProcessAgent is an agent built as runACP builds one, the sandbox off
// and no settings files, for tests that open and end sessions in this
// process; the test shuts it down.
func inProcessAgent(t testing.TB) *agent {
	t.Helper()
	home := t.TempDir()
	a := &agent{
		env:      newProcEnv(os.Environ()),
		log:      newLogger(io.Discard, false, 0),
		model:    scriptedModel{},
		sessions: map[string]*session{},
		settings: defaultSettings(),
		sandbox:  sandboxConfig{Profile: sandboxOff},
	}
	a.settingsCache = newSettingsCache(settingsSources{Home: home, System: filepath.Join(home, "none.json"), SystemDefaults: filepath.Join(home, "none-defaults.json"),
		Lookup: func(string) (string, bool) { return "", false }}, settingsLoadOptions{}, func(l *settingsLoad) (*sessionSettings, error) {
		return deriveSessionSettings(l, nil)
	})
	return a
}

// Hooks of every event (hooks_events_test.go).

// hookModelCall is one call a hookModel proposes.
type hookModelCall struct{ name, args string }

// hookModel is a model service on loopback for the hook tests. A user
// message whose first word names an entry of calls gets those calls; "fail"
// gets status 500; anything else, a tool result included, gets the text
// "done". bodies are every request as received.
type hookModel struct {
	calls  map[string][]hookModelCall
	mu     sync.Mutex
	bodies []string
	URL    string
}

func startHookModel(t *testing.T, calls map[string][]hookModelCall) *hookModel {
	t.Helper()
	m := &hookModel{calls: calls}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.bodies = append(m.bodies, string(body))
		m.mu.Unlock()
		var req openAIRequest
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		word := ""
		if last.Role == roleUser && last.Content != nil {
			word, _, _ = strings.Cut(last.Content.text(), " ")
		}
		if word == "fail" {
			http.Error(w, "the model is down", http.StatusInternalServerError)
			return
		}
		var chunks []string
		for i, c := range m.calls[word] {
			chunks = append(chunks, toolChunk(i, fmt.Sprintf("call-%s-%d", word, i), c.name, c.args))
		}
		if len(chunks) == 0 {
			chunks = append(chunks, textChunk("done"))
		}
		sseReply(events(append(chunks, "[DONE]")...))(w, r)
	}))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/v1"
	return m
}

// requests returns every request body the model received.
func (m *hookModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.bodies)
}

// startHookACP starts acp against model with userSettings as the user's
// settings file (QWEN_HOME), and initializes it.
func startHookACP(t *testing.T, model *hookModel, userSettings string, onRequest func(string, json.RawMessage) (any, *rpcError)) *acpClient {
	t.Helper()
	home := t.TempDir()
	writeFileAll(t, filepath.Join(home, "settings.json"), userSettings)
	c := startACP(t, onRequest, []string{"--" + flagGuardMode + "=" + guardModeOff}, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=test-model",
		"OPENAI_API_KEY=", envQwenHome+"="+home, "HOME="+t.TempDir(), envSystemMD+"=")
	c.mustCall(methodInitialize, initializeParams(""), nil)
	return c
}

// hookLogger writes into dir a hook script that appends its input to
// hooklog/EVENT.jsonl under the project directory (its first argument is
// the event) and answers as answers says for that event; it returns the
// settings "hooks" entry for each event of events.
func hookLogger(t *testing.T, dir string, answers map[string]string, events ...string) map[string]any {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/bash\nin=$(cat)\nmkdir -p \"$QWEN_PROJECT_DIR/hooklog\"\nprintf '%s\\n' \"$in\" >> \"$QWEN_PROJECT_DIR/hooklog/$1.jsonl\"\ncase \"$1\" in\n")
	for ev, body := range answers {
		fmt.Fprintf(&b, "%s) %s ;;\n", ev, body)
	}
	b.WriteString("esac\n")
	script := filepath.Join(dir, "hooklog.sh")
	mustWrite(t, script, b.String())
	os.Chmod(script, 0o755)
	hooks := map[string]any{}
	for _, ev := range events {
		hooks[ev] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": script + " " + ev}}}}
	}
	return hooks
}

// hookLog returns the inputs the logger's hooks of event read, in order:
// the lines written whole, since a hook may be writing one now.
func hookLog(t *testing.T, cwd, event string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cwd, "hooklog", event+".jsonl"))
	if err != nil {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	var out []map[string]any
	for _, line := range lines[:len(lines)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s hook input %q: %v", event, line, err)
		}
		out = append(out, m)
	}
	return out
}

// fakeRemoteMCP is a remote MCP server on loopback for the transport tests:
// Streamable HTTP at /mcp (answers as JSON, or as an event stream when
// sseAnswers), HTTP+SSE at /sse and /message. It offers one tool, echo, and
// records every JSON-RPC message it receives with its headers.
type fakeRemoteMCP struct {
	srv        *httptest.Server
	sseAnswers bool
	// onCall, when set, answers a tools/call in place of echo: it may
	// write any HTTP answer; true means it did.
	onCall func(w http.ResponseWriter, r *http.Request) bool
	// endpoint is what the /sse stream names as its endpoint event.
	endpoint string

	mu       sync.Mutex
	received []fakeRemoteMessage
	streams  map[string]chan []byte // HTTP+SSE: session id -> its stream
	conns    map[net.Conn]bool      // connections not yet closed
	changed  chan struct{}          // a connection opened or closed
}

type fakeRemoteMessage struct {
	method  string
	header  http.Header
	message json.RawMessage
}

const fakeRemoteSession = "fake-session-1"

func newFakeRemoteMCP(t *testing.T) *fakeRemoteMCP {
	f := &fakeRemoteMCP{streams: map[string]chan []byte{}, endpoint: "/message?session=s1", conns: map[net.Conn]bool{}, changed: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", f.streamable)
	mux.HandleFunc("GET /sse", f.sseStream)
	mux.HandleFunc("POST /message", f.sseMessage)
	f.srv = httptest.NewUnstartedServer(mux) // 127.0.0.1
	f.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		f.mu.Lock()
		switch st {
		case http.StateNew:
			f.conns[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(f.conns, c)
		}
		f.mu.Unlock()
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// waitConnsClosed waits, within testTimeout, until no connection to the
// server is open, and fails t otherwise.
func (f *fakeRemoteMCP) waitConnsClosed(t *testing.T) {
	t.Helper()
	deadline := time.After(testTimeout(10 * time.Second))
	for {
		f.mu.Lock()
		n := len(f.conns)
		f.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("the server still has %d connections open", n)
		}
	}
}

// calls returns how many messages of method the server received.
func (f *fakeRemoteMCP) calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.received {
		if m.method == method {
			n++
		}
	}
	return n
}

// headersOf returns the headers of the last message of method.
func (f *fakeRemoteMCP) headersOf(method string) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.received) - 1; i >= 0; i-- {
		if f.received[i].method == method {
			return f.received[i].header
		}
	}
	return nil
}

func (f *fakeRemoteMCP) record(r *http.Request) (map[string]json.RawMessage, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, err
	}
	var method string
	json.Unmarshal(msg["method"], &method)
	if method == "" {
		method = "(answer)"
	}
	f.mu.Lock()
	f.received = append(f.received, fakeRemoteMessage{method: method, header: r.Header.Clone(), message: body})
	f.mu.Unlock()
	return msg, nil
}

// answer is the server's answer to one message, nil for a notification.
func (f *fakeRemoteMCP) answer(msg map[string]json.RawMessage) []byte {
	id, ok := msg["id"]
	if !ok || msg["method"] == nil {
		return nil
	}
	var method string
	json.Unmarshal(msg["method"], &method)
	var result any
	switch method {
	case mcpMethodInitialize:
		result = map[string]any{"protocolVersion": mcpProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]string{"name": "fake", "version": "1"}}
	case mcpMethodToolsList:
		result = map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}
	case mcpMethodToolsCall:
		var p struct {
			Arguments map[string]any `json:"arguments"`
		}
		json.Unmarshal(msg["params"], &p)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprint("echo: ", p.Arguments["text"])}}}
	default:
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32601, "message": "no such method"}})
		return b
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return b
}

func (f *fakeRemoteMCP) streamable(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	msg, err := f.record(r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var method string
	json.Unmarshal(msg["method"], &method)
	if method == mcpMethodToolsCall && f.onCall != nil && f.onCall(w, r) {
		return
	}
	if method == mcpMethodInitialize {
		w.Header().Set(mcpHeaderSessionID, fakeRemoteSession)
	} else if r.Header.Get(mcpHeaderSessionID) != fakeRemoteSession {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ans := f.answer(msg)
	switch {
	case ans == nil:
		w.WriteHeader(http.StatusAccepted)
	case f.sseAnswers:
		w.Header().Set("Content-Type", sseMediaType)
		fmt.Fprintf(w, ": a comment\nevent: message\nid: 1\ndata: %s\n\n", ans)
	default:
		w.Header().Set("Content-Type", mcpJSONMediaType)
		w.Write(ans)
	}
}

func (f *fakeRemoteMCP) sseStream(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, 16)
	f.mu.Lock()
	f.streams["s1"] = ch
	f.mu.Unlock()
	w.Header().Set("Content-Type", sseMediaType)
	fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", f.endpoint)
	w.(http.Flusher).Flush()
	for {
		select {
		case b := <-ch:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (f *fakeRemoteMCP) sseMessage(w http.ResponseWriter, r *http.Request) {
	msg, err := f.record(r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var method string
	json.Unmarshal(msg["method"], &method)
	if method == mcpMethodToolsCall && f.onCall != nil && f.onCall(w, r) {
		return
	}
	f.mu.Lock()
	ch := f.streams[r.URL.Query().Get("session")]
	f.mu.Unlock()
	if ch == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if ans := f.answer(msg); ans != nil {
		ch <- ans
	}
	w.WriteHeader(http.StatusAccepted)
}

// startRemoteForTest starts one remote server of cfg with env as acpguard's
// environment, and stops it at the test's end.
func startRemoteForTest(t *testing.T, cfg mcpServerConfig, env *procEnv) (*mcpServer, []mcpToolDef, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(20*time.Second))
	defer cancel()
	s, tools, err := startMCPServer(ctx, cfg, mcpOptions{Cwd: t.TempDir(), Env: env, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CallTimeout: testTimeout(20 * time.Second)})
	if err == nil {
		t.Cleanup(func() { s.stop(errSessionEnded) })
	}
	return s, tools, err
}

// everythingServer is @modelcontextprotocol/server-everything (pinned in
// testdata/mcpremote) in one of its HTTP modes, listening on a Unix socket
// of the test's own (it binds no other address it could be given), with a
// recording proxy on 127.0.0.1 in front: the proxy's URL is the server's.
type everythingServer struct {
	url string // the proxy's base URL

	mu       sync.Mutex
	received []everythingMessage
}

// everythingMessage is one JSON-RPC message the server received.
type everythingMessage struct {
	method string // "" for an answer
	tool   string // a tools/call's name
	body   string
	header http.Header
}

// startEverything starts the server in mode ("streamableHttp" or "sse").
func startEverything(t *testing.T, mode string) *everythingServer {
	t.Helper()
	node, err := exec.LookPath("node")
	const pkg = "testdata/mcpremote/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	_, pkgErr := os.Stat(pkg)
	if err != nil || pkgErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run this test: node %v, server %v", err, pkgErr)
		}
		t.Skip("node or server-everything is not installed: npm ci --prefix testdata/mcpremote")
	}
	sock := filepath.Join(t.TempDir(), "everything.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Base(filepath.Dir(pkg))+"/index.js", mode)
	cmd.Dir = filepath.Dir(filepath.Dir(pkg))
	// Express's listen takes a PORT that is not a number as a socket path.
	cmd.Env = append(os.Environ(), "PORT="+sock)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	deadline := time.Now().Add(testTimeout(30 * time.Second))
	for !fileExists(sock) {
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s:\n%s", sock, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := &everythingServer{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "everything"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			json.Unmarshal(body, &m)
			e.mu.Lock()
			e.received = append(e.received, everythingMessage{method: m.Method, tool: m.Params.Name, body: string(body), header: r.Header.Clone()})
			e.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// toolCalls returns the tools/call names the server received, in order.
func (e *everythingServer) toolCalls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, m := range e.received {
		if m.method == mcpMethodToolsCall {
			out = append(out, m.tool)
		}
	}
	return out
}

// headerValues returns every value of header name the server received.
func (e *everythingServer) headerValues(name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, m := range e.received {
		out = append(out, m.header.Values(name)...)
	}
	return out
}

// hookRecorder is an http hook's server on loopback: it records each POST
// (its headers and body) and answers with answer(body), a JSON body.
type hookRecorder struct {
	srv    *httptest.Server
	answer func(body []byte) string
	mu     sync.Mutex
	got    []hookRecorded
}

// hookRecorded is one POST a hookRecorder received.
type hookRecorded struct {
	Header http.Header
	Body   []byte
}

func newHookRecorder(t testing.TB, answer func(body []byte) string) *hookRecorder {
	r := &hookRecorder{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, hookRecorded{Header: req.Header.Clone(), Body: body})
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, r.answer(body))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookRecorder) url() string { return r.srv.URL + "/hook" }

func (r *hookRecorder) requests() []hookRecorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// freeLoopbackPort returns a loopback port nothing listens on at the moment.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// closedLoopbackAddr is a loopback address nothing listens on.
func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", freeLoopbackPort(t))
}

// runningPrompt makes id a session of ch in workspace ws whose running
// prompt is promptID, as serve holds it while the prompt runs, for a daemon
// built in a test; stop ends the prompt.
func runningPrompt(d *daemon, ch *acpChannel, id, ws, promptID string) (stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &hostSession{d: d, id: id, ch: ch, ws: ws, events: newStreamLog(), perms: map[string]*hostPendingPermission{}}
	s.active = &promptJob{id: promptID, ctx: ctx, stop: cancel}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions == nil {
		d.sessions = map[string]*hostSession{}
	}
	d.sessions[id] = s
	return cancel
}

// recordingParent is a managed child's parent in a test (startACP): it
// records each request as "method params", allows every prepare, and
// answers every other request with other.
type recordingParent struct {
	mu      sync.Mutex
	traffic []string
}

func (r *recordingParent) handler(other func(method string, params json.RawMessage) (any, *rpcError)) func(string, json.RawMessage) (any, *rpcError) {
	return func(method string, params json.RawMessage) (any, *rpcError) {
		r.mu.Lock()
		r.traffic = append(r.traffic, method+" "+string(params))
		r.mu.Unlock()
		if method == methodGuardPrepare {
			return map[string]any{"allowed": true}, nil
		}
		return other(method, params)
	}
}

// requests returns what the parent has received so far.
func (r *recordingParent) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.traffic)
}
