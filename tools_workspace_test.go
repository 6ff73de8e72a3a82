// tools_workspace_test.go tests the session workspace (tools_fs.go): one
// root per session, closed on every end, shared by concurrent calls, and a
// workspace moved or replaced after the session started writes nothing.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A session's workspace directory renamed away and replaced, by another
// directory or by a symlink to one, after session/new: a write_file then
// writes nothing, in the old directory or the new one, and says why.
func TestWorkspaceMovedAfterSessionStartWritesNothing(t *testing.T) {
	for _, replace := range []string{"directory", "symlink"} {
		t.Run("replaced by a "+replace, func(t *testing.T) {
			base, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ws, moved, other := filepath.Join(base, "ws"), filepath.Join(base, "moved"), filepath.Join(base, "other")
			for _, d := range []string{ws, other} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			c := startACP(t, nil, nil)
			c.mustCall(methodInitialize, initializeParams(""), nil)
			sid := c.newYoloSession(ws)
			if err := os.Rename(ws, moved); err != nil {
				t.Fatal(err)
			}
			if replace == "directory" {
				err = os.Mkdir(ws, 0o755)
			} else {
				err = os.Symlink(other, ws)
			}
			if err != nil {
				t.Fatal(err)
			}
			if stop := c.prompt(sid, `call write_file {"file_path":"out.txt","content":"hi"}`, ""); stop != stopEndTurn {
				t.Fatalf("stopReason = %q", stop)
			}
			for _, d := range []string{ws, moved, other} {
				if _, err := os.Lstat(filepath.Join(d, "out.txt")); err == nil {
					t.Errorf("write_file wrote %s", filepath.Join(d, "out.txt"))
				}
			}
			ups := c.sessionUpdates(sid)
			_, text, _ := callOutcome(ups, firstToolCall(t, ups).ToolCallID)
			if want := fmt.Sprintf("workspace %q was moved or replaced since the session started; start a new session", ws); !strings.Contains(text, want) {
				t.Errorf("write_file said %q, want it to say %q", text, want)
			}
		})
	}
}

// The executor checks the workspace too: a call normalized before the
// workspace moved writes nothing when it runs after.
func TestWorkspaceMovedBetweenNormalizeAndExecution(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	p, err := resolveInWorkspace(env, "out.txt")
	if err != nil {
		t.Fatal(err)
	}
	moved := env.Cwd + ".moved"
	if err := os.Rename(env.Cwd, moved); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(moved, env.Cwd) // t.TempDir removes what it made
	if err := os.Mkdir(env.Cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(env.Cwd)
	res := execWriteFile(context.Background(), env, map[string]any{"file_path": p, "content": "hi"})
	if res.Status != statusFailed || !strings.Contains(res.Output, "was moved or replaced since the session started") {
		t.Errorf("result = %+v, want the moved error", res)
	}
	for _, d := range []string{env.Cwd, moved} {
		if _, err := os.Lstat(filepath.Join(d, "out.txt")); err == nil {
			t.Errorf("write_file wrote into %s", d)
		}
	}
}

// Every way a session ends closes the one descriptor it holds on its
// workspace: session/close, the shutdown of the process, and a session/new
// refused because its id is taken.
func TestSessionWorkspaceRootClosedOnEveryEnd(t *testing.T) {
	const sessions = 8
	a := inProcessAgent(t)
	newSession := func(dir, id string) (string, error) {
		p := map[string]any{"cwd": dir, "mcpServers": []any{}}
		if id != "" {
			p["_meta"] = map[string]any{metaSessionID: id}
		}
		raw, _ := json.Marshal(p)
		res, err := a.newSession(context.Background(), raw)
		if err != nil {
			return "", err
		}
		return res.(map[string]any)["sessionId"].(string), nil
	}
	opened := 0
	open := func(n int) (dirs, ids []string) {
		for range n {
			opened++
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			id, err := newSession(dir, fmt.Sprintf("fd-test-%d", opened))
			if err != nil {
				t.Fatal(err)
			}
			dirs, ids = append(dirs, dir), append(ids, id)
		}
		return dirs, ids
	}
	check := func(when string, dirs []string, want int) {
		t.Helper()
		for _, d := range dirs {
			if n := fdsOpenOn(t, d); n != want {
				t.Errorf("%s: %d descriptors open on the workspace %s, want %d", when, n, d, want)
			}
		}
	}

	dirs, ids := open(sessions)
	check("open", dirs, 1)
	for _, id := range ids {
		raw, _ := json.Marshal(map[string]any{"sessionId": id})
		if _, err := a.closeSession(raw); err != nil {
			t.Fatal(err)
		}
	}
	check("after session/close", dirs, 0)

	taken, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	first, firstIDs := open(1)
	if _, err := newSession(taken, firstIDs[0]); err == nil {
		t.Fatal("a second session/new with a taken id succeeded")
	}
	check("after a session/new refused", []string{taken}, 0)

	dirs, _ = open(sessions)
	a.shutdown()
	check("after shutdown", append(dirs, first...), 0)
}

// Tool calls of one session run concurrently on its one root: each writes
// and reads back its own file, lists and searches the workspace, and
// every call sees what it wrote.
func TestSessionWorkspaceConcurrentCalls(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	const workers, calls = 8, 10
	var wg sync.WaitGroup
	errs := make(chan string, workers*calls*4)
	for i := range workers {
		wg.Go(func() {
			e := *env
			e.Observer = nopObserver{}
			run := func(name string, args map[string]any) toolResult {
				b, _ := json.Marshal(args)
				return runTool(context.Background(), &e, call(name, string(b)))
			}
			for j := range calls {
				name := fmt.Sprintf("w%d/f%d.txt", i, j)
				content := fmt.Sprintf("worker %d call %d", i, j)
				if res := run(toolWriteFile, map[string]any{"file_path": name, "content": content}); res.Status != statusCompleted {
					errs <- fmt.Sprintf("write_file %s: %+v", name, res)
				}
				if res := run(toolReadFile, map[string]any{"file_path": name}); res.Status != statusCompleted || res.Output != content {
					errs <- fmt.Sprintf("read_file %s: %+v", name, res)
				}
				if res := run(toolListDirectory, map[string]any{"path": "w" + fmt.Sprint(i)}); res.Status != statusCompleted || !strings.Contains(res.Output, fmt.Sprintf("f%d.txt", j)) {
					errs <- fmt.Sprintf("list_directory w%d: %+v", i, res)
				}
				if res := run(toolGlob, map[string]any{"pattern": "**/*.txt"}); res.Status != statusCompleted || !strings.Contains(res.Output, name) {
					errs <- fmt.Sprintf("glob: %+v", res)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A caller without a session workspace resolves and opens the cwd per
// call, and closes what it opened.
func TestWorkspaceRootWithoutSessionOpensPerCall(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	env.Workspace.close()
	env.Workspace = nil
	env.Observer = nopObserver{}
	for _, c := range []struct{ name, args string }{
		{toolWriteFile, `{"file_path":"sub/f.txt","content":"hi"}`},
		{toolReadFile, `{"file_path":"sub/f.txt"}`},
		{toolGlob, `{"pattern":"**/*.txt"}`},
		{toolWriteFile, `{"file_path":"../escape.txt","content":"hi"}`},
	} {
		res := runTool(context.Background(), env, call(c.name, c.args))
		if escape := strings.HasPrefix(c.args, `{"file_path":"../`); escape != (res.Status != statusCompleted) {
			t.Errorf("%s %s: %+v", c.name, c.args, res)
		}
	}
	if b, err := os.ReadFile(filepath.Join(env.Cwd, "sub", "f.txt")); err != nil || string(b) != "hi" {
		t.Errorf("sub/f.txt = %q, %v", b, err)
	}
	if n := fdsOpenOn(t, env.Cwd); n != 0 {
		t.Errorf("%d descriptors left open on the workspace", n)
	}
}
