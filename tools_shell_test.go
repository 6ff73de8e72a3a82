// tools_shell_test.go checks run_shell_command: output, timeouts, and that
// its process group ends with the command, in the foreground or background.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestShell(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		if err := os.Mkdir(filepath.Join(cwd, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runToolCases(t, setup, []toolCase{
		{name: "stdout and stderr", tool: "run_shell_command", args: map[string]any{"command": "echo out; echo err >&2"}, status: statusCompleted,
			want: []string{"out\n", "err\n", "Exit Code: 0"}},
		{name: "exit code", tool: "run_shell_command", args: map[string]any{"command": "echo partial; exit 3"}, status: statusFailed,
			want: []string{"partial", "Exit Code: 3"}},
		{name: "cwd", tool: "run_shell_command", args: map[string]any{"command": "pwd"}, status: statusCompleted, want: []string{"$CWD\n"}},
		{name: "directory", tool: "run_shell_command", args: map[string]any{"command": "pwd", "directory": "sub"}, status: statusCompleted, want: []string{"$CWD/sub\n"}},
		{name: "scrubbed environment", tool: "run_shell_command", args: map[string]any{"command": "echo mark=$ACPGUARD_TEST_MARK home=$HOME"}, status: statusCompleted,
			want: []string{"mark=visible home=\n"}},
		{name: "empty stdin", tool: "run_shell_command", args: map[string]any{"command": "cat; echo done"}, status: statusCompleted, want: []string{"done"}},
		{name: "timeout", tool: "run_shell_command", args: map[string]any{"command": "echo started; sleep 30", "timeout": 2000}, status: statusFailed,
			want: []string{"Command timed out after 2000ms before it could complete. Below is the output before it timed out:\nstarted"}},
		{name: "bounded output", tool: "run_shell_command", args: map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' x"}, status: statusCompleted,
			want: []string{"[output truncated at 1048576 bytes; 1951424 bytes dropped]"}},
		{name: "side effect", tool: "run_shell_command", args: map[string]any{"command": "echo made > made.txt"}, status: statusCompleted, check: fileIs("made.txt", "made\n")},
	})
}

// TestShellQwenResult: the text the model and the host see, and the
// rawOutput, are Qwen Code's, and exit 1 of grep and the like is no failure.
func TestShellQwenResult(t *testing.T) {
	intp := func(n int) *int { return &n }
	strp := func(s string) *string { return &s }
	for _, tt := range []struct {
		name    string
		args    map[string]any
		status  string
		text    string // with <pgid> for the process group id
		rawText string
		outcome string
		code    *int
		signal  *string
		dir     string
	}{
		{name: "echo", args: map[string]any{"command": "echo hello"}, status: statusCompleted,
			text:    "Command: echo hello\nDirectory: (root)\nOutput: hello\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: <pgid>",
			rawText: "hello", outcome: "completed", code: intp(0)},
		{name: "grep exit 1", args: map[string]any{"command": "grep nomatch /dev/null"}, status: statusCompleted,
			text:    "Command: grep nomatch /dev/null\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 1\nSignal: (none)\nProcess Group PGID: <pgid>",
			rawText: "Command exited with code: 1", outcome: "completed", code: intp(1)},
		{name: "test exit 1", args: map[string]any{"command": "LC_ALL=C [ -e missing ]"}, status: statusCompleted,
			rawText: "Command exited with code: 1", outcome: "completed", code: intp(1)},
		{name: "false exit 1", args: map[string]any{"command": "false"}, status: statusFailed,
			text:    "Command: false\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 1\nSignal: (none)\nProcess Group PGID: <pgid>",
			rawText: "Command exited with code: 1", outcome: "failed", code: intp(1)},
		{name: "exit 2", args: map[string]any{"command": "echo partial; exit 2"}, status: statusFailed,
			text:    "Command: echo partial; exit 2\nDirectory: (root)\nOutput: partial\nError: (none)\nExit Code: 2\nSignal: (none)\nProcess Group PGID: <pgid>",
			rawText: "partial", outcome: "failed", code: intp(2)},
		{name: "signal", args: map[string]any{"command": "kill -9 $$"}, status: statusFailed,
			text:    "Command: kill -9 $$\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: (none)\nSignal: 9\nProcess Group PGID: <pgid>",
			rawText: "Command terminated by signal: SIGKILL", outcome: "failed", signal: strp("SIGKILL")},
		{name: "timeout", args: map[string]any{"command": "sleep 30", "timeout": 300}, status: statusFailed,
			text:    "Command timed out after 300ms before it could complete. There was no output before it timed out.",
			rawText: "Command timed out after 300ms before it could complete.", outcome: "timed_out", signal: strp("SIGKILL")},
		{name: "empty output", args: map[string]any{"command": "true"}, status: statusCompleted,
			text:    "Command: true\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: <pgid>",
			outcome: "completed", code: intp(0)},
		{name: "directory", args: map[string]any{"command": "echo in sub", "directory": "sub/deeper"}, status: statusCompleted,
			text:    "Command: echo in sub\nDirectory: sub/deeper\nOutput: in sub\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: <pgid>",
			rawText: "in sub", outcome: "completed", code: intp(0), dir: "sub/deeper"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := newTestEnv(t, nil)
			if err := os.MkdirAll(filepath.Join(env.Cwd, "sub", "deeper"), 0o755); err != nil {
				t.Fatal(err)
			}
			res := runArgs(t, env, "run_shell_command", tt.args)
			raw, ok := res.RawOutput.(shellRawOutput)
			if !ok {
				t.Fatalf("rawOutput = %#v, want a shell_result", res.RawOutput)
			}
			if res.Status != tt.status {
				t.Errorf("status = %q, want %q", res.Status, tt.status)
			}
			if want := strings.ReplaceAll(tt.text, "<pgid>", strconv.Itoa(raw.PID)); tt.text != "" && res.Output != want {
				t.Errorf("text =\n%s\nwant\n%s", res.Output, want)
			}
			wantDir := filepath.Join(env.Cwd, tt.dir)
			if raw.Type != "shell_result" || raw.Version != 1 || raw.Text != tt.rawText || raw.Outcome != tt.outcome ||
				raw.Directory != wantDir || raw.PID <= 0 || raw.Error != nil || raw.Truncated ||
				raw.Notices == nil || raw.OutputFiles == nil {
				t.Errorf("rawOutput = %+v, want text %q outcome %q directory %q", raw, tt.rawText, tt.outcome, wantDir)
			}
			if fmt.Sprint(deref(raw.ExitCode)) != fmt.Sprint(deref(tt.code)) || fmt.Sprint(deref(raw.Signal)) != fmt.Sprint(deref(tt.signal)) {
				t.Errorf("exitCode, signal = %v, %v; want %v, %v", deref(raw.ExitCode), deref(raw.Signal), deref(tt.code), deref(tt.signal))
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestShellTruncatedRawOutput(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	res := runArgs(t, env, "run_shell_command", map[string]any{"command": "head -c 2000000 /dev/zero | tr '\\0' x"})
	raw := res.RawOutput.(shellRawOutput)
	if res.Status != statusCompleted || !raw.Truncated || !strings.Contains(raw.Output, "[output truncated at") {
		t.Errorf("result %q, truncated %v", res.Status, raw.Truncated)
	}
}

// TestServeShellRawOutput: a host reading the stream of `serve` finds a
// finished shell call's rawOutput with exactly Qwen Code's shell_result keys.
func TestServeShellRawOutput(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "decisions.jsonl"))
	sp := startServe(t, args, tokenEnv)
	id := sp.newSession(t, "")
	_, evs := sp.runTurn(t, id, `call run_shell_command {"command":"echo hello"}`)
	ups := toolUpdates(t, evs)
	if len(ups) == 0 || ups[len(ups)-1].Status != "completed" {
		t.Fatalf("shell call updates = %+v", ups)
	}
	var raw map[string]any
	if err := json.Unmarshal(ups[len(ups)-1].RawOutput, &raw); err != nil {
		t.Fatalf("rawOutput %s: %v", ups[len(ups)-1].RawOutput, err)
	}
	keys := slices.Sorted(maps.Keys(raw))
	want := []string{"directory", "error", "exitCode", "notices", "outcome", "output", "outputFiles", "pid", "signal", "text", "truncated", "type", "version"}
	if !slices.Equal(keys, want) {
		t.Errorf("rawOutput keys = %v, want %v", keys, want)
	}
	if raw["type"] != "shell_result" || raw["version"] != float64(1) || raw["output"] != "hello" || raw["text"] != "hello" ||
		raw["directory"] != ws || raw["exitCode"] != float64(0) || raw["signal"] != nil || raw["error"] != nil || raw["outcome"] != "completed" {
		t.Errorf("rawOutput = %s", ups[len(ups)-1].RawOutput)
	}
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
	if res.Status != statusCancelled || res.Output != "Command was cancelled by user before it could complete. There was no output before it was cancelled." ||
		res.RawOutput.(shellRawOutput).Outcome != shellOutcomeCancelled {
		t.Errorf("cancelled result = %q %q %+v", res.Status, res.Output, res.RawOutput)
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
	pid, err := strconv.Atoi(strings.TrimSpace(res.RawOutput.(shellRawOutput).Output))
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

// liveCommand prints a line, waits for the test's signal on the FIFO go1,
// prints a second, and waits on go2: each line can only be shown while the
// command runs, and the test sees it before letting the next be printed.
const liveCommand = `echo line-one; read x < go1; echo line-two; read x < go2`

// liveFIFOs makes the two FIFOs of liveCommand in dir and returns the
// function that lets it past one.
func liveFIFOs(t *testing.T, dir string) func(name string) {
	t.Helper()
	for _, name := range []string{"go1", "go2"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return func(name string) {
		t.Helper()
		// Opening for writing waits for the command's read to open it.
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("go\n")
		f.Close()
	}
}

// An ACP client sees a running command's output as it is printed: each
// line arrives in a tool_call_update in_progress while the command waits
// before the next; the final result is the whole output, as before.
func TestShellLiveOutputACP(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	signal := liveFIFOs(t, dir)
	sid := c.newYoloSession(dir)
	done := c.start(methodSessionPrompt, promptParams(sid, shellCall(liveCommand, false), ""))
	// live is what the live updates showed: the chunks and the last
	// content (the end of the output so far).
	live := func() (chunks, content string) {
		for _, u := range c.sessionUpdates(sid) {
			so, ok := u.Meta[metaShellOutput].(map[string]any)
			if !ok {
				continue
			}
			if u.SessionUpdate != "tool_call_update" || u.Status != "in_progress" {
				t.Errorf("live output in %s %s", u.SessionUpdate, u.Status)
			}
			chunk, _ := so["chunk"].(string)
			chunks, content = chunks+chunk, u.Text
		}
		return chunks, content
	}
	for _, step := range []struct{ want, next, signal string }{
		{"line-one\n", "line-two", "go1"},
		{"line-one\nline-two\n", "", "go2"},
	} {
		c.waitFor("live output "+strconv.Quote(step.want), func(_ []acpRequest, updates []json.RawMessage) bool {
			chunks := ""
			for _, raw := range updates {
				var p struct {
					Update struct {
						Meta struct {
							ShellOutput liveOutputMeta `json:"shellOutput"`
						} `json:"_meta"`
					} `json:"update"`
				}
				json.Unmarshal(raw, &p)
				chunks += p.Update.Meta.ShellOutput.Chunk
			}
			return chunks == step.want
		})
		if chunks, content := live(); content != step.want || step.next != "" && strings.Contains(chunks, step.next) {
			t.Errorf("live output before %s: chunks %q, content %q, want %q", step.signal, chunks, content, step.want)
		}
		signal(step.signal)
	}
	if r := <-done; r.Error != nil {
		t.Fatalf("prompt: %v", r.Error)
	}
	ups := c.sessionUpdates(sid)
	last := ups[len(ups)-1]
	for _, u := range slices.Backward(ups) {
		if u.SessionUpdate == "tool_call_update" {
			last = u
			break
		}
	}
	if last.Status != "completed" || last.RawOutput["output"] != "line-one\nline-two" {
		t.Errorf("final update = %s %v, want completed with the whole output", last.Status, last.RawOutput)
	}
}

// A serve host sees a running command's output as Qwen Code's live output
// events: session_update shell_output, whose output chunks it appends,
// each line before the next is printed.
func TestShellLiveOutputServe(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "decisions.jsonl"))
	sp := startServe(t, args, tokenEnv)
	signal := liveFIFOs(t, ws)
	id := sp.newSession(t, "")
	stream := sp.openEvents(t, id, "")
	promptID := sp.prompt(t, id, shellCall(liveCommand, false))
	var shown strings.Builder
	liveUntil := func(want string) func(sseEvent) bool {
		return func(ev sseEvent) bool {
			if ev.typ != eventSessionUpdate {
				return false
			}
			var d struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
					Output        string `json:"output"`
					ToolCallID    string `json:"toolCallId"`
					Meta          struct {
						ToolName    string `json:"toolName"`
						ShellOutput any    `json:"shellOutput"`
					} `json:"_meta"`
				} `json:"update"`
			}
			if err := json.Unmarshal(parseEnvelope(t, ev).Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Update.Meta.ShellOutput != nil {
				t.Errorf("a host was sent the child's live update: %s", ev.data)
			}
			if d.Update.SessionUpdate != sessionUpdateShellOutput {
				return false
			}
			if d.Update.ToolCallID == "" || d.Update.Meta.ToolName != toolShell {
				t.Errorf("shell_output = %s, want its call and tool", ev.data)
			}
			shown.WriteString(d.Update.Output)
			return shown.String() == want
		}
	}
	readSSE(t, stream, liveUntil("line-one\n"))
	signal("go1")
	readSSE(t, stream, liveUntil("line-one\nline-two\n"))
	signal("go2")
	evs := readSSE(t, stream, untilTurnEnd(promptID))
	ups := toolUpdates(t, evs)
	if len(ups) == 0 || ups[len(ups)-1].Status != "completed" || !strings.Contains(string(ups[len(ups)-1].RawOutput), `"output":"line-one\nline-two"`) {
		t.Errorf("final update = %+v, want completed with the whole output", ups)
	}
}

// liveRecorder keeps what a live view handed over.
type liveRecorder struct {
	chunks, tails []string
	skipped       []int64
}

func (r *liveRecorder) toolOutput(chunk, tail string, skipped int64) {
	r.chunks, r.tails, r.skipped = append(r.chunks, chunk), append(r.tails, tail), append(r.skipped, skipped)
}

// The live view never hands over more than liveOutputBytes, counts what it
// left out, and never splits a rune: a rune's first bytes wait for the rest.
func TestShellLiveOutputBounds(t *testing.T) {
	big := strings.Repeat("é", liveOutputBytes) // twice the bound, in two-byte runes
	for _, tt := range []struct {
		name        string
		writes      []string
		wantChunks  []string
		wantSkipped []int64
	}{
		{"small", []string{"a\n", "b\n"}, []string{"a\n", "b\n"}, []int64{0, 0}},
		{"over the bound keeps the end", []string{"x" + big}, []string{big[len(big)-liveOutputBytes:]}, []int64{liveOutputBytes + 1}},
		{"a split rune waits", []string{"a\xc3", "\xa9b"}, []string{"a", "éb"}, []int64{0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &liveRecorder{}
			l := &liveOutput{obs: rec, wake: make(chan struct{}, 1)}
			for _, w := range tt.writes {
				l.Write([]byte(w))
				l.handOver()
			}
			if !slices.Equal(rec.chunks, tt.wantChunks) || !slices.Equal(rec.skipped, tt.wantSkipped) {
				t.Errorf("chunks %d %q..., skipped %v; want %d, skipped %v", len(rec.chunks), firstBytes(rec.chunks, 16), rec.skipped, len(tt.wantChunks), tt.wantSkipped)
			}
			for i, tail := range rec.tails {
				if len(tail) > liveOutputBytes || !utf8.ValidString(tail) || !utf8.ValidString(rec.chunks[i]) {
					t.Errorf("hand-over %d: tail of %d bytes (valid %v), chunk valid %v", i, len(tail), utf8.ValidString(tail), utf8.ValidString(rec.chunks[i]))
				}
			}
		})
	}
}

// firstBytes is the first n bytes of each text, for an error message.
func firstBytes(texts []string, n int) []string {
	var out []string
	for _, s := range texts {
		out = append(out, s[:min(n, len(s))])
	}
	return out
}
