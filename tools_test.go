// tools_test.go tests the built-in tools through runTool, on real files and
// real processes in a temporary workspace.
package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

func TestReadFile(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "a.txt"), "one\ntwo\nthree\n")
		mustWrite(t, filepath.Join(cwd, "bin"), "ab\x00cd")
		mustWrite(t, filepath.Join(cwd, "dir", "x"), "")
	}
	runToolCases(t, setup, []toolCase{
		{name: "whole", tool: "read_file", args: map[string]any{"file_path": "a.txt"}, status: statusCompleted, want: []string{"one\ntwo\nthree\n"}},
		{name: "offset and limit", tool: "read_file", args: map[string]any{"file_path": "a.txt", "offset": 1, "limit": 1}, status: statusCompleted,
			want: []string{"two\n", "showing lines 2-2 of 3"}, notWant: []string{"one", "three"}},
		{name: "missing", tool: "read_file", args: map[string]any{"file_path": "nope.txt"}, status: statusFailed, want: []string{"no such file"}},
		{name: "binary", tool: "read_file", args: map[string]any{"file_path": "bin"}, status: statusFailed, want: []string{"is binary"}},
		{name: "directory", tool: "read_file", args: map[string]any{"file_path": "dir"}, status: statusFailed, want: []string{"is a directory"}},
		{name: "offset past end", tool: "read_file", args: map[string]any{"file_path": "a.txt", "offset": 9}, status: statusFailed, want: []string{"past the end"}},
		// offset+limit would overflow int64 and slice past the end.
		{name: "largest limit", tool: "read_file", args: map[string]any{"file_path": "a.txt", "offset": 1, "limit": int64(math.MaxInt64)}, status: statusCompleted,
			want: []string{"two\nthree\n"}, notWant: []string{"one", "showing lines"}},
	})
}

// TestAbsolutePathInside uses a real absolute path, which the table cannot
// spell before the workspace exists.
func TestAbsolutePathInside(t *testing.T) {
	env, rec := newTestEnv(t, nil)
	p := filepath.Join(env.Cwd, "a.txt")
	mustWrite(t, p, "abc")
	res := runArgs(t, env, "read_file", map[string]any{"file_path": p})
	if res.Status != statusCompleted || res.Output != "abc" {
		t.Errorf("result = %+v", res)
	}
	if got := checkOnePending(t, rec); got.title != "Read "+p || got.kind != kindRead {
		t.Errorf("pending = %+v", got)
	}
}

func TestWriteFile(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "old.txt"), "old")
		if err := os.Mkdir(filepath.Join(cwd, "adir"), 0o755); err != nil {
			t.Fatal(err)
		}
		// A symlink that stays inside the workspace may be written through.
		mustSymlink(t, filepath.Join(cwd, "old.txt"), filepath.Join(cwd, "link"))
	}
	runToolCases(t, setup, []toolCase{
		{name: "new nested", tool: "write_file", args: map[string]any{"file_path": "x/y/z.txt", "content": "hi"}, status: statusCompleted,
			want: []string{"Wrote 2 bytes to $CWD/x/y/z.txt"}, check: fileIs("x/y/z.txt", "hi")},
		{name: "overwrite", tool: "write_file", args: map[string]any{"file_path": "old.txt", "content": "new"}, status: statusCompleted, check: fileIs("old.txt", "new")},
		{name: "through inside symlink", tool: "write_file", args: map[string]any{"file_path": "link", "content": "via"}, status: statusCompleted, check: fileIs("old.txt", "via")},
		{name: "directory", tool: "write_file", args: map[string]any{"file_path": "adir", "content": "x"}, status: statusFailed, want: []string{"is a directory"}},
	})
}

func TestEdit(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "f.txt"), "a b a c")
	}
	runToolCases(t, setup, []toolCase{
		{name: "once", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "b", "new_string": "B"}, status: statusCompleted,
			check: fileIs("f.txt", "a B a c")},
		{name: "ambiguous", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "a", "new_string": "A"}, status: statusFailed,
			want: []string{"occurs 2 times"}, check: fileIs("f.txt", "a b a c")},
		{name: "replace all", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "a", "new_string": "A", "replace_all": true}, status: statusCompleted,
			want: []string{"Replaced 2"}, check: fileIs("f.txt", "A b A c")},
		{name: "not found", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "zzz", "new_string": "y"}, status: statusFailed,
			want: []string{"not found"}, check: fileIs("f.txt", "a b a c")},
		{name: "identical", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "b", "new_string": "b"}, status: statusFailed,
			want: []string{"identical"}},
		{name: "create missing", tool: "edit", args: map[string]any{"file_path": "new/g.txt", "old_string": "", "new_string": "fresh"}, status: statusCompleted,
			check: fileIs("new/g.txt", "fresh")},
		{name: "create existing", tool: "edit", args: map[string]any{"file_path": "f.txt", "old_string": "", "new_string": "x"}, status: statusFailed,
			want: []string{"already exists"}, check: fileIs("f.txt", "a b a c")},
		{name: "missing file", tool: "edit", args: map[string]any{"file_path": "none.txt", "old_string": "a", "new_string": "b"}, status: statusFailed,
			want: []string{"no such file"}},
		{name: "alias replace", tool: "replace", args: map[string]any{"file_path": "f.txt", "old_string": "c", "new_string": "C"}, status: statusCompleted,
			check: fileIs("f.txt", "a b a C")},
	})
}

func TestListDirectory(t *testing.T) {
	setup := func(t *testing.T, cwd string) {
		mustWrite(t, filepath.Join(cwd, "b.txt"), "")
		mustWrite(t, filepath.Join(cwd, "zdir", "inner.txt"), "")
	}
	runToolCases(t, setup, []toolCase{
		{name: "root", tool: "list_directory", args: map[string]any{"path": "."}, status: statusCompleted,
			want: []string{"Directory listing for $CWD:\n[DIR] zdir\nb.txt\n"}, notWant: []string{"inner.txt"}},
		{name: "sub", tool: "list_directory", args: map[string]any{"path": "zdir"}, status: statusCompleted, want: []string{"inner.txt"}},
		{name: "missing", tool: "list_directory", args: map[string]any{"path": "nope"}, status: statusFailed, want: []string{"no such file"}},
	})
}

func searchTree(t *testing.T, cwd string) {
	mustWrite(t, filepath.Join(cwd, "main.go"), "package main\nfunc needle() {}\n")
	mustWrite(t, filepath.Join(cwd, "a", "b", "deep.go"), "// needle here\n")
	mustWrite(t, filepath.Join(cwd, "a", "web.ts"), "const needle = 1\n")
	mustWrite(t, filepath.Join(cwd, "a", "view.tsx"), "needle\n")
	mustWrite(t, filepath.Join(cwd, ".git", "config.go"), "needle\n")
	mustWrite(t, filepath.Join(cwd, "blob.go"), "needle\x00binary\n")
}

func TestGlob(t *testing.T) {
	runToolCases(t, searchTree, []toolCase{
		{name: "doublestar", tool: "glob", args: map[string]any{"pattern": "**/*.go"}, status: statusCompleted,
			want: []string{"$CWD/main.go", "$CWD/a/b/deep.go", "$CWD/blob.go"}, notWant: []string{".git"}},
		{name: "top level only", tool: "glob", args: map[string]any{"pattern": "*.go"}, status: statusCompleted,
			want: []string{"$CWD/main.go"}, notWant: []string{"deep.go"}},
		{name: "braces", tool: "glob", args: map[string]any{"pattern": "**/*.{ts,tsx}"}, status: statusCompleted,
			want: []string{"web.ts", "view.tsx"}, notWant: []string{".go"}},
		{name: "in path", tool: "glob", args: map[string]any{"pattern": "**/*.go", "path": "a"}, status: statusCompleted,
			want: []string{"$CWD/a/b/deep.go"}, notWant: []string{"main.go"}},
		{name: "none", tool: "glob", args: map[string]any{"pattern": "*.rs"}, status: statusCompleted, want: []string{"No files found"}},
	})
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"**/*.go", "a.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"a/**/c.go", "a/c.go", true},
		{"a/**/c.go", "a/x/y/c.go", true},
		{"a/**", "a/x/y", true},
		{"*.go", "a/b.go", false},
		{"a/*/c", "a/x/y/c", false},
		{"{a,b}/*.go", "b/x.go", true},
		{"x.{go,{ts,tsx}}", "x.tsx", true},
		{"**/**/**/**/**/**/**/**/z", strings.Repeat("a/", 40) + "y", false},
	}
	for _, tt := range tests {
		m, err := compileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tt.pattern, err)
		}
		if got := m.match(tt.path); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
	for _, bad := range []string{"", "/abs/*", "a/../b", "[", "{a,b", "a}", "{" + strings.Repeat("a,", 70) + "a}"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) accepted", bad)
		}
	}
}

func TestGrepSearch(t *testing.T) {
	runToolCases(t, searchTree, []toolCase{
		{name: "all", tool: "grep_search", args: map[string]any{"pattern": "needle"}, status: statusCompleted,
			want:    []string{"$CWD/main.go:2:func needle() {}", "$CWD/a/b/deep.go:1:// needle here", "web.ts:1:"},
			notWant: []string{".git", "blob.go"}},
		{name: "glob filter by name", tool: "grep_search", args: map[string]any{"pattern": "needle", "glob": "*.{ts,tsx}"}, status: statusCompleted,
			want: []string{"web.ts:1:", "view.tsx:1:"}, notWant: []string{".go:"}},
		{name: "glob filter by path", tool: "grep_search", args: map[string]any{"pattern": "needle", "glob": "a/**/*.go"}, status: statusCompleted,
			want: []string{"deep.go:1:"}, notWant: []string{"main.go", ".ts"}},
		{name: "path", tool: "grep_search", args: map[string]any{"pattern": "needle", "path": "a/b"}, status: statusCompleted,
			want: []string{"deep.go"}, notWant: []string{"main.go"}},
		{name: "limit", tool: "grep_search", args: map[string]any{"pattern": "needle", "limit": 1}, status: statusCompleted,
			want: []string{"results limited to 1 matches"}},
		{name: "regexp", tool: "grep_search", args: map[string]any{"pattern": `^func \w+\(`}, status: statusCompleted,
			want: []string{"main.go:2:"}, notWant: []string{"deep.go"}},
		{name: "none", tool: "grep_search", args: map[string]any{"pattern": "haystack"}, status: statusCompleted, want: []string{"No matches"}},
		{name: "alias", tool: "search_file_content", args: map[string]any{"pattern": "const"}, status: statusCompleted, want: []string{"web.ts:1:"}},
	})
}

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
		{name: "timeout", tool: "run_shell_command", args: map[string]any{"command": "echo started; sleep 30", "timeout": 300}, status: statusFailed,
			want: []string{"started", "timed out after 300 ms"}},
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
		n := len(env.Background.pgids)
		env.Background.mu.Unlock()
		if n == 0 {
			return
		}
		sleepBriefly()
	}
	t.Error("exited background process still tracked")
}

func TestToolDeclarations(t *testing.T) {
	for _, name := range builtinToolNames() {
		spec, ok := builtinTool(name)
		if !ok || spec.Name != name || spec.Kind == "" || spec.Description == "" {
			t.Errorf("builtin %q: %+v, %v", name, spec, ok)
			continue
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(spec.parametersSchema(), &schema); err != nil || schema.Type != "object" || len(schema.Properties) != len(spec.Params) {
			t.Errorf("schema of %q: %s (%v)", name, spec.parametersSchema(), err)
		}
	}
	wantKinds := map[string]string{"read_file": "read", "write_file": "edit", "edit": "edit", "list_directory": "search",
		"glob": "search", "grep_search": "search", "run_shell_command": "execute"}
	for name, kind := range wantKinds {
		if spec, _ := builtinTool(name); spec.Kind != kind {
			t.Errorf("kind of %s = %q, want %q", name, spec.Kind, kind)
		}
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("**/*.{go,ts}", "a/b/c.go")
	f.Add("a/**/b/**", "a/b")
	f.Add("{a,{b,c}}*", "bx")
	f.Fuzz(func(t *testing.T, pattern, p string) {
		m, err := compileGlob(pattern)
		if err != nil {
			return
		}
		m.match(p)
	})
}

func TestGrepSingleFileAndExactLimit(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	mustWrite(t, filepath.Join(env.Cwd, "one.txt"), "x\nneedle\n")
	res := runArgs(t, env, "grep_search", map[string]any{"pattern": "needle", "path": "one.txt", "limit": 1})
	if res.Status != statusCompleted || !strings.Contains(res.Output, "one.txt:2:needle") || strings.Contains(res.Output, "limited") {
		t.Errorf("result = %+v", res)
	}
}

func TestIncompleteExtraToolNotRegistered(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	execs := 0
	spec := probeTool(&execs, false)
	spec.title = nil
	env.Extra = map[string]*toolSpec{"probe": spec}
	if res := runArgs(t, env, "probe", map[string]any{}); res.ErrorType != errTypeToolNotRegistered || execs != 0 {
		t.Errorf("result = %+v, executor calls %d", res, execs)
	}
}
