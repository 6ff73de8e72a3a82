// guard_test.go tests the execution boundary: what runs, what does not, what
// the guard and the client see, and that runTool is the only executor caller.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestBoundaryDecisions(t *testing.T) {
	errBoom := errors.New("provider said 500 with secret details")
	tests := []struct {
		name       string
		decide     func(ctx context.Context, req GuardRequest) (Decision, error)
		wantOutput string // "" means allowed
	}{
		{"allow", nil, ""},
		{"deny with reason", func(context.Context, GuardRequest) (Decision, error) {
			return Decision{Reason: "writes are frozen until Monday"}, nil
		}, "writes are frozen until Monday"},
		{"deny without reason", func(context.Context, GuardRequest) (Decision, error) {
			return Decision{}, nil
		}, denyDefaultReason},
		{"deny with blank reason", func(context.Context, GuardRequest) (Decision, error) {
			return Decision{Reason: " \t\n"}, nil
		}, denyDefaultReason},
		{"guard error", func(context.Context, GuardRequest) (Decision, error) {
			return Decision{Allowed: true}, errBoom
		}, guardFailedReason},
		{"guard panic", func(context.Context, GuardRequest) (Decision, error) {
			panic("guard bug")
		}, guardFailedReason},
		// "either { allowed: true } or { allowed: false, reason? }": an
		// allow with a reason is neither, so malformed.
		{"allow with a reason", func(context.Context, GuardRequest) (Decision, error) {
			return Decision{Allowed: true, Reason: "fine, but"}, nil
		}, guardFailedReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &countingGuard{decide: tt.decide}
			env, rec := newTestEnv(t, g)
			target := filepath.Join(env.Cwd, "out.txt")
			res := runTool(context.Background(), env, call("write_file", `{"file_path":"out.txt","content":"hello"}`))
			if g.calls() != 1 {
				t.Fatalf("guard called %d times, want 1", g.calls())
			}
			checkOnePending(t, rec)
			if tt.wantOutput == "" {
				if res.Status != statusCompleted {
					t.Fatalf("result = %+v, want completed", res)
				}
				if b, err := os.ReadFile(target); err != nil || string(b) != "hello" {
					t.Fatalf("file = %q, %v; want hello", b, err)
				}
				if len(rec.running) != 1 {
					t.Errorf("toolRunning called %d times, want 1", len(rec.running))
				}
				return
			}
			want := toolResult{Status: statusFailed, ErrorType: errTypeExecutionDenied, Output: tt.wantOutput}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("result = %+v, want %+v", res, want)
			}
			if fileExists(target) {
				t.Error("file written although the call was not allowed")
			}
			if len(rec.running) != 0 {
				t.Error("toolRunning called for a call that did not run")
			}
		})
	}
}

func TestGuardSeesFinalCall(t *testing.T) {
	g := &countingGuard{}
	env, rec := newTestEnv(t, g)
	if err := os.Mkdir(filepath.Join(env.Cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The alias and the relative, uncleaned path are what the model proposed.
	res := runTool(context.Background(), env, toolCall{ID: "call_abc", Name: "replace",
		Args: json.RawMessage(`{"file_path":"sub/../new.txt","old_string":"","new_string":"x"}`)})
	if res.Status != statusCompleted {
		t.Fatalf("result = %+v", res)
	}
	want := GuardRequest{
		SessionID: "sess-1", PromptID: "prompt-1", ToolCallID: "call_abc", ToolName: "edit",
		Arguments: map[string]any{"file_path": filepath.Join(env.Cwd, "new.txt"), "old_string": "", "new_string": "x", "replace_all": false},
	}
	if !reflect.DeepEqual(g.reqs, []GuardRequest{want}) {
		t.Errorf("guard requests = %+v, want [%+v]", g.reqs, want)
	}
	p := checkOnePending(t, rec)
	if p.call.Name != "edit" || p.kind != kindEdit || p.title != "Edit "+filepath.Join(env.Cwd, "new.txt") {
		t.Errorf("pending = %+v", p)
	}
	if !reflect.DeepEqual(p.args, want.Arguments) {
		t.Errorf("rawInput = %v, want %v", p.args, want.Arguments)
	}
	if len(rec.running) != 1 || rec.running[0].Name != "edit" {
		t.Errorf("running = %+v", rec.running)
	}
}

func TestGuardMutationDoesNotChangeWhatRuns(t *testing.T) {
	g := &countingGuard{decide: func(_ context.Context, req GuardRequest) (Decision, error) {
		req.Arguments["content"] = "evil"
		req.Arguments["file_path"] = "/tmp/elsewhere.txt"
		return Decision{Allowed: true}, nil
	}}
	env, rec := newTestEnv(t, g)
	res := runTool(context.Background(), env, call("write_file", `{"file_path":"a.txt","content":"good"}`))
	if res.Status != statusCompleted {
		t.Fatalf("result = %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(env.Cwd, "a.txt")); err != nil || string(b) != "good" {
		t.Errorf("file = %q, %v; want good", b, err)
	}
	if got := checkOnePending(t, rec).args["content"]; got != "good" {
		t.Errorf("rawInput content = %v after the guard mutated its copy", got)
	}
}

// meddlingFilter lets every call through after trying to change it: the
// arguments, the session (its guard dropped) and, later, the arguments it
// kept.
type meddlingFilter struct{ kept map[string]any }

func (*meddlingFilter) disabledBy(string) string { return "" }

func (*meddlingFilter) readDenied(string) func(string) bool { return nil }

func (f *meddlingFilter) check(_ context.Context, env *toolEnv, _ toolCall, _ toolSpec, args map[string]any) (toolResult, bool) {
	args["content"] = "evil"
	env.Guard = nil
	env.Cwd = "/"
	f.kept = args
	return toolResult{}, true
}

// The layers before the guard lie outside the trusted core (DESIGN.md §1)
// because nothing they do reaches what the guard sees or what runs.
func TestFilterCannotChangeWhatRuns(t *testing.T) {
	var seen string
	g := &countingGuard{decide: func(_ context.Context, req GuardRequest) (Decision, error) {
		seen, _ = req.Arguments["content"].(string)
		return Decision{Allowed: true}, nil
	}}
	env, _ := newTestEnv(t, g)
	f := &meddlingFilter{}
	env.Policy = f
	spec := toolSpec{
		Name: "keep", Kind: kindOther,
		title:     func(map[string]any) string { return "keep" },
		normalize: func(_ *toolEnv, args map[string]any) (map[string]any, error) { return args, nil },
		exec: func(_ context.Context, e *toolEnv, args map[string]any) toolResult {
			f.kept["content"] = "late" // the filter's copy, changed after the decision
			return completed(args["content"].(string)+" in "+e.Cwd, nil)
		},
	}
	env.Extra = map[string]*toolSpec{"keep": &spec}
	res := runTool(context.Background(), env, call("keep", `{"content":"good"}`))
	if want := "good in " + env.Cwd; res.Status != statusCompleted || res.Output != want {
		t.Errorf("result = %+v, want completed %q", res, want)
	}
	if g.calls() != 1 || seen != "good" {
		t.Errorf("guard called %d times, saw content %q; want once, good", g.calls(), seen)
	}
}

func TestGuardCancellation(t *testing.T) {
	t.Run("before the guard", func(t *testing.T) {
		g := &countingGuard{}
		env, rec := newTestEnv(t, g)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res := runTool(ctx, env, call("write_file", `{"file_path":"a.txt","content":"x"}`))
		if res.Status != statusCancelled {
			t.Errorf("status = %q, want %q", res.Status, statusCancelled)
		}
		if g.calls() != 0 {
			t.Errorf("guard called %d times after cancellation", g.calls())
		}
		if fileExists(filepath.Join(env.Cwd, "a.txt")) || len(rec.running) != 0 {
			t.Error("executor ran after cancellation")
		}
		checkOnePending(t, rec)
	})
	t.Run("during the guard", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		entered := make(chan struct{})
		g := &countingGuard{decide: func(ctx context.Context, _ GuardRequest) (Decision, error) {
			close(entered)
			<-ctx.Done()
			// A late allow must not count.
			return Decision{Allowed: true}, nil
		}}
		env, rec := newTestEnv(t, g)
		go func() {
			<-entered
			cancel()
		}()
		res := runTool(ctx, env, call("write_file", `{"file_path":"a.txt","content":"x"}`))
		if res.Status != statusCancelled || res.ErrorType != errTypeExecutionDenied {
			t.Errorf("result = %+v, want cancelled execution_denied", res)
		}
		if g.calls() != 1 {
			t.Errorf("guard called %d times, want 1", g.calls())
		}
		if fileExists(filepath.Join(env.Cwd, "a.txt")) || len(rec.running) != 0 {
			t.Error("executor ran after cancellation during the guard")
		}
	})
}

func TestCloneFailureDenies(t *testing.T) {
	g := &countingGuard{}
	env, _ := newTestEnv(t, g)
	execs := 0
	env.Extra = map[string]*toolSpec{"probe": probeTool(&execs, true)}
	res := runTool(context.Background(), env, call("probe", `{"a":[1,{"b":null}]}`))
	want := toolResult{Status: statusFailed, ErrorType: errTypeExecutionDenied, Output: guardFailedReason}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	if execs != 0 || g.calls() != 0 {
		t.Errorf("executor calls = %d, guard calls = %d; want 0, 0", execs, g.calls())
	}
}

func TestCloneArgsIsDeep(t *testing.T) {
	orig := map[string]any{"a": []any{json.Number("1"), map[string]any{"b": "c"}}, "d": int64(2), "e": nil}
	v, err := cloneValue(orig)
	if err != nil {
		t.Fatal(err)
	}
	clone := v.(map[string]any)
	clone["a"].([]any)[1].(map[string]any)["b"] = "changed"
	clone["a"].([]any)[0] = "changed"
	if orig["a"].([]any)[1].(map[string]any)["b"] != "c" || orig["a"].([]any)[0] != json.Number("1") {
		t.Errorf("changing the clone changed the original: %v", orig)
	}
}

func TestNoGuardRunsDirectly(t *testing.T) {
	env, rec := newTestEnv(t, nil)
	execs := 0
	env.Extra = map[string]*toolSpec{"probe": probeTool(&execs, false)}
	res := runTool(context.Background(), env, call("probe", `{}`))
	if res.Status != statusCompleted || execs != 1 || len(rec.running) != 1 {
		t.Errorf("result = %+v, executor calls = %d, running = %d", res, execs, len(rec.running))
	}
}

func TestBuiltinWinsOverExtra(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	execs := 0
	env.Extra = map[string]*toolSpec{"write_file": probeTool(&execs, false)}
	res := runTool(context.Background(), env, call("write_file", `{"file_path":"a.txt","content":"x"}`))
	if res.Status != statusCompleted || execs != 0 || !fileExists(filepath.Join(env.Cwd, "a.txt")) {
		t.Errorf("an extra tool replaced a built-in: result %+v, probe calls %d", res, execs)
	}
}

func TestRefusedBeforeTheGuard(t *testing.T) {
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		managed  bool
		tool     string
		args     string
		errType  string
		inOutput string
		kind     string
	}{
		{"managed agent", true, "agent", `{"prompt":"x"}`, errTypeExecutionDenied, nestedAgentRefusal, kindOther},
		{"managed workflow", true, "workflow", `{}`, errTypeExecutionDenied, nestedAgentRefusal, kindOther},
		{"managed create_sub_session", true, "create_sub_session", `{}`, errTypeExecutionDenied, nestedAgentRefusal, kindOther},
		{"managed send_message", true, "send_message", `{}`, errTypeExecutionDenied, nestedAgentRefusal, kindOther},
		{"unmanaged agent", false, "agent", `{}`, errTypeToolNotRegistered, `tool "agent" is not registered`, kindOther},
		{"unknown tool", true, "delete_everything", `{"x":1}`, errTypeToolNotRegistered, `tool "delete_everything" is not registered`, kindOther},
		{"unknown argument", false, "write_file", `{"file_path":"a","content":"b","mode":"0777"}`, errTypeInvalidParams, `unknown argument "mode"`, kindOther},
		{"missing argument", false, "write_file", `{"file_path":"a"}`, errTypeInvalidParams, `missing required argument "content"`, kindOther},
		{"wrong type", false, "read_file", `{"file_path":"a","offset":"3"}`, errTypeInvalidParams, `argument "offset" must be an integer, got a string`, kindOther},
		{"fraction", false, "read_file", `{"file_path":"a","limit":1.5}`, errTypeInvalidParams, `argument "limit" must be an integer, got 1.5`, kindOther},
		{"bool type", false, "edit", `{"file_path":"a","old_string":"","new_string":"","replace_all":"yes"}`, errTypeInvalidParams, `argument "replace_all" must be a boolean`, kindOther},
		{"not an object", false, "write_file", `["a"]`, errTypeInvalidParams, "decode arguments", kindOther},
		{"null", false, "write_file", `null`, errTypeInvalidParams, "got null", kindOther},
		{"trailing", false, "write_file", `{} {}`, errTypeInvalidParams, "trailing data", kindOther},
		{"dotdot", false, "write_file", `{"file_path":"../x","content":""}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"absolute outside", false, "read_file", jsonArgs(t, map[string]any{"file_path": filepath.Join(outside, "f")}), errTypeInvalidParams, "outside the workspace", kindOther},
		{"symlink dir out", false, "write_file", `{"file_path":"out/f","content":""}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"symlink file out", false, "edit", `{"file_path":"outfile","old_string":"a","new_string":"b"}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"dangling symlink", false, "write_file", `{"file_path":"dangling","content":""}`, errTypeInvalidParams, `invalid argument "file_path"`, kindOther},
		{"list outside", false, "list_directory", `{"path":"/"}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"glob path outside", false, "glob", `{"pattern":"*","path":"out"}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"glob dotdot pattern", false, "glob", `{"pattern":"../*"}`, errTypeInvalidParams, `invalid argument "pattern"`, kindOther},
		{"glob bad pattern", false, "glob", `{"pattern":"[a"}`, errTypeInvalidParams, `invalid argument "pattern"`, kindOther},
		{"grep path outside", false, "grep_search", `{"pattern":"x","path":".."}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"grep bad regexp", false, "grep_search", `{"pattern":"("}`, errTypeInvalidParams, `invalid argument "pattern"`, kindOther},
		{"grep limit", false, "grep_search", `{"pattern":"x","limit":0}`, errTypeInvalidParams, `invalid argument "limit"`, kindOther},
		{"shell directory outside", false, "run_shell_command", `{"command":"touch x","directory":"out"}`, errTypeInvalidParams, "outside the workspace", kindOther},
		{"shell timeout too big", false, "run_shell_command", `{"command":"true","timeout":600001}`, errTypeInvalidParams, `invalid argument "timeout"`, kindOther},
		{"shell empty command", false, "run_shell_command", `{"command":"  "}`, errTypeInvalidParams, `invalid argument "command"`, kindOther},
		{"read negative offset", false, "read_file", `{"file_path":"a","offset":-1}`, errTypeInvalidParams, `invalid argument "offset"`, kindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &countingGuard{}
			env, rec := newTestEnv(t, g)
			env.Managed = tt.managed
			mustSymlink(t, outside, filepath.Join(env.Cwd, "out"))
			mustWrite(t, filepath.Join(outside, "target"), "a")
			mustSymlink(t, filepath.Join(outside, "target"), filepath.Join(env.Cwd, "outfile"))
			mustSymlink(t, filepath.Join(outside, "nothing"), filepath.Join(env.Cwd, "dangling"))
			res := runTool(context.Background(), env, call(tt.tool, tt.args))
			if res.Status != statusFailed || res.ErrorType != tt.errType || !strings.Contains(res.Output, tt.inOutput) {
				t.Errorf("result = %+v, want failed %s containing %q", res, tt.errType, tt.inOutput)
			}
			if g.calls() != 0 {
				t.Errorf("guard called %d times, want 0", g.calls())
			}
			if len(rec.running) != 0 {
				t.Error("toolRunning called")
			}
			p := checkOnePending(t, rec)
			if p.kind != tt.kind || p.title != canonicalToolName(tt.tool) {
				t.Errorf("pending kind %q title %q", p.kind, p.title)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Errorf("something was created outside the workspace: %v", ents)
			}
		})
	}
	if got := nestedAgentRefusal; got != "Managed external tool guard v1 does not support nested or delegated agent execution." {
		t.Errorf("refusal text = %q", got)
	}
}

func TestPendingCarriesRawArgsOnFailure(t *testing.T) {
	env, rec := newTestEnv(t, nil)
	runTool(context.Background(), env, call("nope", `{"file_path":"../x","n":2}`))
	p := checkOnePending(t, rec)
	want := map[string]any{"file_path": "../x", "n": json.Number("2")}
	if !reflect.DeepEqual(p.args, want) {
		t.Errorf("raw args = %#v, want %#v", p.args, want)
	}
}

func TestBackgroundShellGuardedOnce(t *testing.T) {
	g := &countingGuard{}
	env, _ := newTestEnv(t, g)
	res := runTool(context.Background(), env, call("run_shell_command", `{"command":"sleep 100","is_background":true}`))
	if res.Status != statusCompleted {
		t.Fatalf("result = %+v", res)
	}
	if g.calls() != 1 {
		t.Errorf("guard called %d times, want 1", g.calls())
	}
	if b := g.reqs[0].Arguments["is_background"]; b != true {
		t.Errorf("guard saw is_background = %v", b)
	}
	pid := res.RawOutput.(map[string]any)["pid"].(int)
	if !strings.Contains(res.Output, strconv.Itoa(pid)) {
		t.Errorf("output %q does not name pid %d", res.Output, pid)
	}
	if processGone(pid) {
		t.Fatalf("background process %d is not running", pid)
	}
	env.Background.killAll()
	waitGone(t, pid)
	// A session that ended starts nothing more.
	res = runTool(context.Background(), env, call("run_shell_command", `{"command":"sleep 100","is_background":true}`))
	if res.Status != statusFailed {
		t.Errorf("background start after killAll: %+v", res)
	}
}

// The AST check: only runTool calls a tool executor.

// findExecutorUses returns a description of every place in files, other
// than runTool, that calls or takes a toolSpec's exec field (a comparison
// "x.exec != nil" or "== nil" is allowed), or refers to a function installed
// as an exec in a spec table.
func findExecutorUses(fset *token.FileSet, files []*ast.File) []string {
	executors := map[string]bool{}
	allowed := map[*ast.Ident]bool{}
	allowedSel := map[*ast.SelectorExpr]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "exec" {
					if v, ok := n.Value.(*ast.Ident); ok {
						executors[v.Name] = true
						allowed[v] = true
					}
				}
			case *ast.FuncDecl:
				allowed[n.Name] = true
			case *ast.BinaryExpr:
				// Comparing an exec field with nil neither calls nor leaks it.
				if y, ok := n.Y.(*ast.Ident); ok && y.Name == "nil" {
					if x, ok := n.X.(*ast.SelectorExpr); ok && x.Sel.Name == "exec" {
						allowedSel[x] = true
					}
				}
			}
			return true
		})
	}
	var bad []string
	for _, f := range files {
		for _, decl := range f.Decls {
			inRunTool := false
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "runTool" {
				inRunTool = true
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if n.Sel.Name == "exec" && !inRunTool && !allowedSel[n] {
						bad = append(bad, fmt.Sprintf("%s: use of .exec outside runTool", fset.Position(n.Pos())))
					}
				case *ast.Ident:
					if executors[n.Name] && !allowed[n] {
						bad = append(bad, fmt.Sprintf("%s: reference to executor %s outside the spec table", fset.Position(n.Pos()), n.Name))
					}
				}
				return true
			})
		}
	}
	return bad
}

func parseSources(t *testing.T, sources map[string]string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for name, src := range sources {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

func TestOnlyRunToolCallsExecutors(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		sources[n] = string(b)
	}
	if _, ok := sources["guard.go"]; !ok {
		t.Fatal("guard.go not found: run the test in the package directory")
	}
	fset, files := parseSources(t, sources)
	for _, b := range findExecutorUses(fset, files) {
		t.Error(b)
	}
}

func TestExecutorCheckerCatches(t *testing.T) {
	const table = `package main
var spec = toolSpec{exec: execThing}
func execThing() {}
func runTool(s toolSpec) { s.exec() }
`
	tests := []struct {
		name string
		src  string
		bad  int
	}{
		{"clean", "", 0},
		{"field call elsewhere", "func sneaky(s toolSpec) { s.exec() }", 1},
		{"field value elsewhere", "func sneaky(s toolSpec) { f := s.exec; f() }", 1},
		{"executor called directly", "func sneaky() { execThing() }", 1},
		{"executor taken as value", "var f = execThing", 1},
		{"nil check", "func complete(s toolSpec) bool { return s.exec != nil }", 0},
		{"nil on the left is not a check", "func sneaky(s toolSpec) bool { return nil != s.exec }", 1},
		{"method named runTool", "type T struct{}\nfunc (T) runTool(s toolSpec) { s.exec() }", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset, files := parseSources(t, map[string]string{"a.go": table, "b.go": "package main\n" + tt.src})
			if got := findExecutorUses(fset, files); len(got) != tt.bad {
				t.Errorf("found %d uses %v, want %d", len(got), got, tt.bad)
			}
		})
	}
}

// The allocation proof: with no guard, runTool allocates exactly what the
// same steps without the guard step allocate.

var nopResult = toolResult{Status: statusCompleted, Output: "ok"}

func nopSpec() *toolSpec {
	return &toolSpec{
		Name: "nop", Kind: kindOther,
		title:     func(map[string]any) string { return "nop" },
		normalize: func(_ *toolEnv, args map[string]any) (map[string]any, error) { return args, nil },
		exec:      func(context.Context, *toolEnv, map[string]any) toolResult { return nopResult },
	}
}

func nopEnv(g Guard) *toolEnv {
	return &toolEnv{Cwd: "/", Guard: g, Observer: nopObserver{}, Extra: map[string]*toolSpec{"nop": nopSpec()}}
}

// runToolWithoutGuardStep is runTool with the guard step deleted: the
// baseline the no-guard path must match.
func runToolWithoutGuardStep(ctx context.Context, env *toolEnv, call toolCall) toolResult {
	spec, args, res, ok := prepareTool(env, &call)
	if !ok {
		return res
	}
	env.Observer.toolRunning(call)
	return spec.exec(ctx, env, args)
}

func allowAll(context.Context, GuardRequest) (Decision, error) { return Decision{Allowed: true}, nil }

func TestNoGuardAllocatesNothingExtra(t *testing.T) {
	ctx := context.Background()
	c := toolCall{ID: "call_1", Name: "nop", Args: json.RawMessage(`{"a":1,"b":"x"}`)}
	env := nopEnv(nil)
	base := testing.AllocsPerRun(200, func() { runToolWithoutGuardStep(ctx, env, c) })
	got := testing.AllocsPerRun(200, func() { runTool(ctx, env, c) })
	if got != base {
		t.Errorf("runTool without a guard: %v allocs/op, the same steps without the guard step: %v", got, base)
	}
	guarded := testing.AllocsPerRun(200, func() { runTool(ctx, nopEnv(allowAll), c) })
	t.Logf("allocs/op: no guard %v, baseline %v, guard allow %v (env included)", got, base, guarded)
}

func BenchmarkRunToolNoGuard(b *testing.B) {
	benchRunTool(b, nopEnv(nil))
}

func BenchmarkRunToolGuardAllow(b *testing.B) {
	benchRunTool(b, nopEnv(allowAll))
}

func benchRunTool(b *testing.B, env *toolEnv) {
	ctx := context.Background()
	c := toolCall{ID: "call_1", Name: "nop", Args: json.RawMessage(`{"a":1,"b":"x"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res := runTool(ctx, env, c); res.Status != statusCompleted {
			b.Fatal(res)
		}
	}
}

// FuzzPrepareTool feeds model-proposed names and arguments through the
// checks before the guard: no panic, exactly one toolPending, and every
// accepted path argument inside the workspace.
func FuzzPrepareTool(f *testing.F) {
	for _, name := range append(builtinToolNames(), "replace", "search_file_content", "agent", "x") {
		f.Add(name, `{}`)
	}
	f.Add("read_file", `{"file_path":"a/../../b","offset":1e3}`)
	f.Add("write_file", `{"file_path":"/etc/passwd","content":""}`)
	f.Add("glob", `{"pattern":"**/{a,b{c,d}}/*.go","path":"."}`)
	f.Add("grep_search", `{"pattern":"(?i)x+","glob":"*.{ts,tsx}","limit":5}`)
	f.Add("run_shell_command", `{"command":"ls","timeout":10,"directory":"sub"}`)
	f.Add("edit", `{"file_path":"x","old_string":"","new_string":"","replace_all":true}`)
	cwd, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(cwd, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		rec := &recorder{}
		env := &toolEnv{Cwd: cwd, Observer: rec, Managed: true}
		c := toolCall{ID: "call_f", Name: name, Args: json.RawMessage(args)}
		spec, final, _, ok := prepareTool(env, &c)
		if len(rec.pending) != 1 {
			t.Fatalf("toolPending called %d times", len(rec.pending))
		}
		if !ok {
			return
		}
		for _, p := range spec.Params {
			v, present := final[p.Name]
			if !present {
				continue
			}
			if slices.Contains([]string{"file_path", "path", "directory"}, p.Name) {
				s := v.(string)
				if !filepath.IsAbs(s) || !withinDir(cwd, s) {
					t.Fatalf("%s %q accepted outside %q", p.Name, s, cwd)
				}
			}
		}
		if _, err := cloneValue(final); err != nil {
			t.Fatalf("final arguments do not clone: %v", err)
		}
	})
}

// TestGuardSeesResolvedPaths: the guard decides over the file that will be
// opened. A symlink inside the workspace (docs -> secrets) and a session cwd
// reached through a symlink both arrive resolved, so a rule for secrets/
// cannot be dodged by spelling.
func TestGuardSeesResolvedPaths(t *testing.T) {
	g := &countingGuard{decide: func(_ context.Context, req GuardRequest) (Decision, error) {
		if strings.Contains(fmt.Sprint(req.Arguments["file_path"]), "/secrets/") {
			return Decision{Reason: "no secrets"}, nil
		}
		return Decision{Allowed: true}, nil
	}}
	env, _ := newTestEnv(t, g)
	mustWrite(t, filepath.Join(env.Cwd, "secrets", "key"), "API-KEY")
	mustSymlink(t, filepath.Join(env.Cwd, "secrets"), filepath.Join(env.Cwd, "docs"))
	link := filepath.Join(t.TempDir(), "ws-link")
	mustSymlink(t, env.Cwd, link)
	for _, tc := range []struct{ cwd, path string }{
		{env.Cwd, "docs/key"},
		{link, "secrets/key"},
		{link, filepath.Join(env.Cwd, "secrets", "key")},
	} {
		e := *env
		e.Cwd = tc.cwd
		res := runArgs(t, &e, "read_file", map[string]any{"file_path": tc.path})
		if res.Status != statusFailed || res.Output != "no secrets" {
			t.Errorf("cwd %s, read %s: %+v, want the secrets rule to deny", tc.cwd, tc.path, res)
		}
	}
	for _, req := range g.reqs {
		if got, want := req.Arguments["file_path"], filepath.Join(env.Cwd, "secrets", "key"); got != want {
			t.Errorf("guard saw file_path %v, want the resolved %s", got, want)
		}
	}
}

// TestSymlinkSwappedDuringTheGuard: a process swaps a checked directory for
// a symlink to outside the workspace while the guard decides. The executor
// opens through the workspace root, so the call fails and nothing outside
// is read or written.
func TestSymlinkSwappedDuringTheGuard(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret.txt"), "TOP-SECRET")
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"file_path": "d/pwned.txt", "content": "x"}},
		{"read_file", map[string]any{"file_path": "d/secret.txt"}},
		{"edit", map[string]any{"file_path": "d/secret.txt", "old_string": "TOP", "new_string": "OWNED"}},
		{"list_directory", map[string]any{"path": "d"}},
		{"grep_search", map[string]any{"pattern": "SECRET", "path": "d"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			var env *toolEnv
			g := &countingGuard{decide: func(context.Context, GuardRequest) (Decision, error) {
				d := filepath.Join(env.Cwd, "d")
				if err := os.Rename(d, d+".real"); err != nil {
					t.Fatal(err)
				}
				mustSymlink(t, outside, d)
				return Decision{Allowed: true}, nil
			}}
			env, _ = newTestEnv(t, g)
			mustWrite(t, filepath.Join(env.Cwd, "d", "inside.txt"), "inside")
			res := runArgs(t, env, tc.tool, tc.args)
			if g.calls() != 1 {
				t.Fatalf("guard called %d times", g.calls())
			}
			listed := tc.tool == "list_directory" && strings.Contains(res.Output, "secret.txt")
			if res.Status != statusFailed || strings.Contains(res.Output, "TOP-SECRET") || listed {
				t.Errorf("result = %+v, want a failure that shows nothing from outside", res)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "TOP-SECRET" {
				t.Errorf("outside file is now %q", b)
			}
			if fileExists(filepath.Join(outside, "pwned.txt")) {
				t.Error("a file was written outside the workspace")
			}
		})
	}
}
