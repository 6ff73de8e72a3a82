// envscrub_test.go proves that no secret, private marker or loader variable
// reaches a child, with real processes, that every exec.Cmd in the package
// takes its Env from the one builder, and that every process a tool, a hook
// or an MCP server runs starts through the one launcher.
package main

import (
	"bufio"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNewProcEnv(t *testing.T) {
	tests := []struct {
		name     string
		environ  []string
		want     procEnv
		snapshot []string
	}{
		{
			name:     "nothing secret",
			environ:  []string{"HOME=/home/u", "PATH=/bin"},
			snapshot: []string{"HOME=/home/u", "PATH=/bin"},
		},
		{
			name: "secrets and markers captured and gone from the snapshot",
			environ: []string{
				"A=1", envGuardToken + "=gt", envServerToken + "=st",
				envPrivateCapability + "=cap", envPrivateGuard + "=required-v1", "B=2",
			},
			want: procEnv{
				guardToken: "gt", guardTokenSet: true, serverToken: "st", serverTokenSet: true,
				privateCapability: "cap", privateGuard: "required-v1",
			},
			snapshot: []string{"A=1", "B=2"},
		},
		{
			name:     "set but empty tokens are set",
			environ:  []string{envGuardToken + "=", envServerToken + "="},
			want:     procEnv{guardTokenSet: true, serverTokenSet: true},
			snapshot: nil,
		},
		{
			name: "loader variables and exported functions removed",
			environ: []string{
				"LD_PRELOAD=/x.so", "LD_LIBRARY_PATH=/l", "LD_AUDIT=/a.so", "BASH_ENV=/e",
				"ENV=/e", "BASH_FUNC_f%%=() { :; }", "BASH_FUNC_=x", "KEEP=1",
			},
			snapshot: []string{"KEEP=1"},
		},
		{
			name:     "near names are ordinary",
			environ:  []string{"LD_PRELOAD_X=1", "MY_ENV=2", "bash_func_f=3", "QWEN_SERVER_TOKEN_FILE=4"},
			snapshot: []string{"LD_PRELOAD_X=1", "MY_ENV=2", "bash_func_f=3", "QWEN_SERVER_TOKEN_FILE=4"},
		},
		{
			name:     "first of a duplicate wins, as os.Getenv",
			environ:  []string{envGuardToken + "=first", "A=1", envGuardToken + "=second", "A=2"},
			want:     procEnv{guardToken: "first", guardTokenSet: true},
			snapshot: []string{"A=1"},
		},
		{
			name:     "malformed entries dropped",
			environ:  []string{"NOEQUALS", "=C:=\\", "OK=a=b"},
			snapshot: []string{"OK=a=b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newProcEnv(tt.environ)
			if !slices.Equal(got.snapshot, tt.snapshot) {
				t.Errorf("snapshot = %q, want %q", got.snapshot, tt.snapshot)
			}
			got.snapshot, got.hidden = nil, nil
			if fmt.Sprint(*got) != fmt.Sprint(tt.want) {
				t.Errorf("newProcEnv = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestChildEnv(t *testing.T) {
	base := newProcEnv([]string{"PATH=/bin", envGuardToken + "=secret", "HOME=/h", "LD_PRELOAD=/x.so"})
	tests := []struct {
		name string
		add  []string
		want []string
	}{
		{"snapshot only", nil, []string{"PATH=/bin", "HOME=/h"}},
		{"new key appended", []string{"X=1"}, []string{"PATH=/bin", "HOME=/h", "X=1"}},
		{"add replaces snapshot in place", []string{"HOME=/other"}, []string{"PATH=/bin", "HOME=/other"}},
		{"later add wins", []string{"X=1", "X=2"}, []string{"PATH=/bin", "HOME=/h", "X=2"}},
		{"removed names never re-introduced", []string{
			envGuardToken + "=again", envServerToken + "=s", envPrivateCapability + "=c",
			envPrivateGuard + "=required-v1", "LD_PRELOAD=/y.so", "LD_LIBRARY_PATH=/l",
			"LD_AUDIT=/a", "BASH_ENV=/b", "ENV=/e", "BASH_FUNC_ls%%=() { evil; }",
		}, []string{"PATH=/bin", "HOME=/h"}},
		{"malformed add dropped", []string{"NOEQUALS", "=v"}, []string{"PATH=/bin", "HOME=/h"}},
		{"empty value kept", []string{"EMPTY="}, []string{"PATH=/bin", "HOME=/h", "EMPTY="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := base.childEnv(tt.add...); !slices.Equal(got, tt.want) {
				t.Errorf("childEnv(%q) = %q, want %q", tt.add, got, tt.want)
			}
		})
	}
}

func TestChildEnvNeverNil(t *testing.T) {
	// A nil Env makes exec.Cmd inherit the whole process environment.
	for _, e := range []*procEnv{{}, newProcEnv(nil), newProcEnv([]string{envGuardToken + "=x"})} {
		if got := e.childEnv(); got == nil {
			t.Errorf("childEnv() of %+v is nil", *e)
		}
	}
}

func TestChildEnvFiltersHandBuiltSnapshot(t *testing.T) {
	e := &procEnv{snapshot: []string{envGuardToken + "=leak", "A=1", "BASH_FUNC_x%%=() { :; }"}}
	if got, want := e.childEnv(), []string{"A=1"}; !slices.Equal(got, want) {
		t.Errorf("childEnv() = %q, want %q", got, want)
	}
}

// serve's children hold no secret in either mode: required mode adds only
// the marker, off mode nothing at all to the scrubbed environment.
func TestManagedChildEnv(t *testing.T) {
	e := newProcEnv([]string{"PATH=/bin", envPrivateCapability + "=inherited", envPrivateGuard + "=inherited",
		envModelKey + "=sk-model-key", envGuardToken + "=provider-token"})
	got := e.acpChildEnv(true, "X=1", envPrivateCapability+"=forged", envPrivateGuard+"=off")
	want := []string{"PATH=/bin", "X=1", envPrivateGuard + "=" + privateGuardMarker}
	if !slices.Equal(got, want) {
		t.Errorf("acpChildEnv(required) = %q, want %q", got, want)
	}
	if got, want := e.acpChildEnv(false), e.childEnv(); !slices.Equal(got, want) {
		t.Errorf("acpChildEnv(off) = %q, want the scrubbed environment %q", got, want)
	}
	if got := e.childEnv(); slices.ContainsFunc(got, func(kv string) bool { return strings.HasPrefix(kv, "QWEN_CODE_PRIVATE_") }) {
		t.Errorf("childEnv() carries a private marker: %q", got)
	}
}

func TestCaptureEnvUnsetsSecrets(t *testing.T) {
	for _, k := range []string{envGuardToken, envServerToken, envPrivateCapability, envPrivateGuard} {
		t.Setenv(k, "value-of-"+k)
	}
	t.Setenv("ACPGUARD_ORDINARY", "kept")
	e := captureEnv()
	for _, k := range []string{envGuardToken, envServerToken, envPrivateCapability, envPrivateGuard} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s still in the process environment after captureEnv: %q", k, v)
		}
	}
	if os.Getenv("ACPGUARD_ORDINARY") != "kept" {
		t.Error("captureEnv removed an ordinary variable from the process environment")
	}
	if e.guardToken != "value-of-"+envGuardToken || !e.guardTokenSet ||
		e.serverToken != "value-of-"+envServerToken || !e.serverTokenSet ||
		e.privateCapability != "value-of-"+envPrivateCapability || e.privateGuard != "value-of-"+envPrivateGuard {
		t.Errorf("captureEnv did not keep the values in memory: %+v", *e)
	}
}

// TestChildProcessEnvironment starts real children through the builder while
// the parent holds the token, and reads each child's own environment twice:
// what the kernel recorded at exec (/proc/PID/environ) and what `env` prints.
func TestChildProcessEnvironment(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc on this system")
	}
	const secret = "tok-9f2c7e1d-never-in-a-child"
	t.Setenv(envGuardToken, secret)
	t.Setenv(envServerToken, "srv-"+secret)
	t.Setenv("BASH_FUNC_evil%%", "() { echo "+secret+"; }")
	t.Setenv("LD_AUDIT", "")
	t.Setenv("ACPGUARD_ORDINARY", "visible-4711")
	e := captureEnv()

	tests := []struct {
		name    string
		env     []string
		present []string
	}{
		{"childEnv", e.childEnv("ADDED=yes", envGuardToken+"="+secret),
			[]string{"ACPGUARD_ORDINARY=visible-4711", "ADDED=yes"}},
		{"acpChildEnv", e.acpChildEnv(true, envServerToken+"="+secret),
			[]string{"ACPGUARD_ORDINARY=visible-4711", envPrivateGuard + "=required-v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procEnviron, envOutput := childEnvironment(t, tt.env)
			for _, seen := range []struct{ where, text string }{
				{"/proc/PID/environ", procEnviron}, {"env output", envOutput},
			} {
				for _, bad := range []string{secret, envGuardToken, envServerToken, "BASH_FUNC_", "LD_AUDIT"} {
					if strings.Contains(seen.text, bad) {
						t.Errorf("%s of the child contains %q:\n%s", seen.where, bad, seen.text)
					}
				}
				for _, good := range tt.present {
					if !strings.Contains(seen.text, good) {
						t.Errorf("%s of the child lacks %q:\n%s", seen.where, good, seen.text)
					}
				}
			}
		})
	}
}

// childEnvironment runs a shell with env, lets it print its environment, and
// reads /proc/PID/environ while it is still waiting on stdin.
func childEnvironment(t *testing.T, env []string) (procEnviron, envOutput string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "env; echo READY-MARK; read x")
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "READY-MARK" {
		out.WriteString(sc.Text() + "\n")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read the child's environ: %v", err)
	}
	return strings.ReplaceAll(string(raw), "\x00", "\n"), out.String()
}

// processStarters are the only functions of the package that may start a
// process, each with its reason; cmdStartViolations reports every other.
var processStarters = map[string]string{
	"sandbox.go:sandboxSession.start":            "the launcher, sandbox off: a plain start",
	"sandbox.go:sandboxSession.startOnOwnThread": "the launcher, sandbox on: from the restricted thread",
	"sandbox_stage.go:startStaged":               "the launcher, protected paths in reach: acpguard's own mount stage, which confines itself and execs the command",
	"sandbox_stage.go:runSandboxStage":           "the mount stage: execs the command from its confined thread",
	"lifeline.go:startOnLifeline":                "serve's acp children, from the thread that never exits: acpguard itself, whose tools the launcher confines",
	"serve_console.go:openConsole":               "serve --open's system browser, once: the operator's own program, no tool's",
}

// TestEveryCmdEnvFromBuilder enforces that every exec.Cmd of the package's
// own non-test source takes its Env from the builder (DESIGN.md §4), and
// that every process starts in one of processStarters, so that every tool,
// hook and MCP server goes through the launcher; each starter must still
// start something.
func TestEveryCmdEnvFromBuilder(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	used := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, v := range cmdEnvViolations(fset, f) {
			t.Error(v)
		}
		bad, starters := cmdStartViolations(fset, f, processStarters)
		for _, v := range bad {
			t.Error(v)
		}
		for _, s := range starters {
			used[s] = true
		}
	}
	if checked == 0 {
		t.Fatal("no source file checked")
	}
	for s := range processStarters {
		if !used[s] {
			t.Errorf("process starter %s starts nothing: remove it from processStarters", s)
		}
	}
}

// cmdStartViolations reports, as "file:line: problem", every process start
// in f outside the functions named in starters ("file:Func" or
// "file:Recv.Func"), and returns the starters it saw start one. A start is
// a call of Start, Run, Output or CombinedOutput with no argument (the
// exec.Cmd methods), a method value of Start, Run or CombinedOutput,
// os.StartProcess, syscall.ForkExec, StartProcess or Exec, or a use of the
// fork, clone and exec system call numbers.
func cmdStartViolations(fset *token.FileSet, f *ast.File, starters map[string]string) (out []string, used []string) {
	file := filepath.Base(fset.Position(f.Package).Filename)
	banned := map[string][]string{
		"os":      {"StartProcess"},
		"syscall": {"ForkExec", "StartProcess", "Exec", "SYS_EXECVE", "SYS_EXECVEAT", "SYS_CLONE", "SYS_CLONE3", "SYS_FORK", "SYS_VFORK"},
	}
	pkgs := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := banned[path]; !ok {
			continue
		}
		name := path
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "." {
			out = append(out, fmt.Sprintf("%s: dot import of %s hides process starts from this check", fset.Position(imp.Pos()), path))
			continue
		}
		pkgs[name] = path
	}
	check := func(scope string, root ast.Node) {
		called := map[*ast.SelectorExpr]bool{} // selector -> called without arguments
		ast.Inspect(root, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
					called[sel] = len(x.Args) == 0
				}
			case *ast.SelectorExpr:
				start := ""
				if id, ok := x.X.(*ast.Ident); ok && slices.Contains(banned[pkgs[id.Name]], x.Sel.Name) {
					start = pkgs[id.Name] + "." + x.Sel.Name
				}
				noArgs, isCall := called[x]
				switch x.Sel.Name {
				case "Start", "Run", "CombinedOutput":
					if !isCall || noArgs {
						start = types.ExprString(x)
					}
				case "Output": // also a field name: only the call counts
					if isCall && noArgs {
						start = types.ExprString(x)
					}
				}
				if start == "" {
					break
				}
				if _, ok := starters[scope]; ok {
					if !slices.Contains(used, scope) {
						used = append(used, scope)
					}
					break
				}
				out = append(out, fmt.Sprintf("%s: %s starts a process outside the launcher: start it with sandboxSession.start", fset.Position(x.Pos()), start))
			}
			return true
		})
	}
	for _, decl := range f.Decls {
		scope := file + ":"
		if fn, ok := decl.(*ast.FuncDecl); ok {
			scope += fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					scope = file + ":" + id.Name + "." + fn.Name.Name
				}
			}
		}
		check(scope, decl)
	}
	return out, used
}

func TestCmdStartChecker(t *testing.T) {
	starters := map[string]string{"case.go:launch": "", "case.go:T.start": ""}
	tests := []struct {
		name  string
		src   string
		lines []int // lines of the expected violations
		used  []string
	}{
		{"launcher", "func launch(c *exec.Cmd) error {\n\treturn c.Start()\n}", nil, []string{"case.go:launch"}},
		{"launcher method", "func (t *T) start(c *exec.Cmd) error {\n\treturn c.Start()\n}", nil, []string{"case.go:T.start"}},
		{"closure in the launcher", "func launch(c *exec.Cmd) {\n\tgo func() { c.Run() }()\n}", nil, []string{"case.go:launch"}},
		{"Start elsewhere", "func run(c *exec.Cmd) error {\n\treturn c.Start()\n}", []int{7}, nil},
		{"Run", "func run(c *exec.Cmd) error {\n\treturn c.Run()\n}", []int{7}, nil},
		{"Output", "func run(c *exec.Cmd) {\n\tc.Output()\n}", []int{7}, nil},
		{"CombinedOutput", "func run(c *exec.Cmd) {\n\tc.CombinedOutput()\n}", []int{7}, nil},
		{"method value", "func run(c *exec.Cmd) func() error {\n\treturn c.Start\n}", []int{7}, nil},
		{"method of another receiver", "func (u *U) start(c *exec.Cmd) error {\n\treturn c.Start()\n}", []int{7}, nil},
		{"package-level", "var _ = exec.Command(\"x\").Run()", []int{6}, nil},
		{"os.StartProcess", "func run() {\n\tos.StartProcess(\"x\", nil, nil)\n}", []int{7}, nil},
		{"syscall.Exec", "func run() {\n\tsyscall.Exec(\"x\", nil, nil)\n}", []int{7}, nil},
		{"syscall.ForkExec", "func run() {\n\tsyscall.ForkExec(\"x\", nil, nil)\n}", []int{7}, nil},
		{"raw clone", "func run() {\n\tsyscall.RawSyscall(syscall.SYS_CLONE, 0, 0, 0)\n}", []int{7}, nil},
		{"Output field", "func run(r result) string {\n\treturn r.Output\n}", nil, nil},
		{"Start with arguments", "func run(s server) {\n\ts.Start(1)\n}", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\n\nimport (\"os\"; \"os/exec\"; \"syscall\")\n\nvar _, _, _ = os.Args, exec.Command, syscall.Getpid\n" + tt.src + "\n"
			assertStartViolations(t, src, starters, tt.lines, tt.used)
		})
	}
	t.Run("renamed import", func(t *testing.T) {
		src := "package p\n\nimport sc \"syscall\"\n\nfunc run() { sc.Exec(\"x\", nil, nil) }\n"
		assertStartViolations(t, src, starters, []int{5}, nil)
	})
	t.Run("dot import", func(t *testing.T) {
		src := "package p\n\nimport . \"syscall\"\n\nfunc run() { Exec(\"x\", nil, nil) }\n"
		assertStartViolations(t, src, starters, []int{3}, nil)
	})
}

func assertStartViolations(t *testing.T, src string, starters map[string]string, lines []int, used []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "case.go", src, 0)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	got, gotUsed := cmdStartViolations(fset, f, starters)
	var gotLines []int
	for _, v := range got {
		var line int
		if _, err := fmt.Sscanf(v, "case.go:%d:", &line); err != nil {
			t.Fatalf("violation %q does not start with file:line", v)
		}
		gotLines = append(gotLines, line)
	}
	if !slices.Equal(gotLines, lines) || !slices.Equal(gotUsed, used) {
		t.Errorf("violations at lines %v (starters %v), want %v (%v):\n%s\nsource:\n%s", gotLines, gotUsed, lines, used, strings.Join(got, "\n"), src)
	}
}

func TestCmdEnvChecker(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		lines []int // lines of the expected violations
	}{
		{"childEnv", `cmd := exec.Command("x")
	cmd.Env = sys.env.childEnv()`, nil},
		{"acpChildEnv with context", `c := exec.CommandContext(ctx, "x")
	c.Env = e.acpChildEnv(required, "A=1")`, nil},
		{"struct field", `c := s.child
	s.child.cmd = exec.Command("x")
	s.child.cmd.Env = e.childEnv()
	_ = c`, nil},
		{"literal with Env", `c := &exec.Cmd{Path: "x", Env: e.childEnv()}
	_ = c`, nil},
		{"var then assign", `var c *exec.Cmd
	c = exec.Command("x")
	c.Env = e.childEnv()`, nil},
		{"no Env", `cmd := exec.Command("x")
	cmd.Run()`, []int{6}},
		{"Env from os.Environ", `cmd := exec.Command("x")
	cmd.Env = os.Environ()`, []int{6, 7}},
		{"builder wrapped in append", `cmd := exec.Command("x")
	cmd.Env = append(e.childEnv(), "LD_PRELOAD=x")`, []int{6, 7}},
		{"Env extended after the builder", `cmd := exec.Command("x")
	cmd.Env = e.childEnv()
	cmd.Env = append(cmd.Env, "X=1")`, []int{8}},
		{"Env element overwritten", `cmd := exec.Command("x")
	cmd.Env = e.childEnv()
	cmd.Env[0] = "LD_PRELOAD=x"`, []int{8}},
		{"Env nil", `cmd := exec.Command("x")
	cmd.Env = nil`, []int{6, 7}},
		{"returned unassigned", `return exec.Command("x")`, []int{6}},
		{"passed unassigned", `run(exec.CommandContext(ctx, "x"))`, []int{6}},
		{"literal without Env", `c := exec.Cmd{Path: "x"}
	c.Run()`, []int{6}},
		{"literal with Env from elsewhere", `c := &exec.Cmd{Path: "x", Env: os.Environ()}
	c.Run()`, []int{6}},
		{"zero Cmd declared", `var c exec.Cmd
	c.Run()`, []int{6}},
		{"new Cmd", `c := new(exec.Cmd)
	c.Run()`, []int{6}},
		{"second command without Env", `a := exec.Command("a")
	b := exec.Command("b")
	a.Env = e.childEnv()
	b.Run()`, []int{7}},
		{"in a closure", `go func() {
		c := exec.Command("x")
		c.Run()
	}()`, []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\n\nimport \"os/exec\"\n\nfunc f() {\n\t" + tt.src + "\n}\n"
			assertViolationLines(t, src, tt.lines)
		})
	}

	t.Run("renamed import", func(t *testing.T) {
		src := "package p\n\nimport x \"os/exec\"\n\nfunc f() { c := x.Command(\"a\"); c.Run() }\n"
		assertViolationLines(t, src, []int{5})
	})
	t.Run("package-level command", func(t *testing.T) {
		src := "package p\n\nimport \"os/exec\"\n\nvar c = exec.Command(\"a\")\n"
		assertViolationLines(t, src, []int{5})
	})
	t.Run("dot import", func(t *testing.T) {
		src := "package p\n\nimport . \"os/exec\"\n\nfunc f() { c := Command(\"a\"); c.Run() }\n"
		assertViolationLines(t, src, []int{3})
	})
	t.Run("other package named exec", func(t *testing.T) {
		src := "package p\n\nimport \"example.com/exec\"\n\nfunc f() { c := exec.Command(\"a\"); c.Run() }\n"
		assertViolationLines(t, src, nil)
	})
}

func assertViolationLines(t *testing.T, src string, lines []int) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "case.go", src, 0)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	got := cmdEnvViolations(fset, f)
	var gotLines []int
	for _, v := range got {
		var line int
		if _, err := fmt.Sscanf(v, "case.go:%d:", &line); err != nil {
			t.Fatalf("violation %q does not start with file:line", v)
		}
		gotLines = append(gotLines, line)
	}
	if !slices.Equal(gotLines, lines) {
		t.Errorf("violations at lines %v, want %v:\n%s\nsource:\n%s", gotLines, lines, strings.Join(got, "\n"), src)
	}
}

// cmdEnvViolations reports, as "file:line: problem", every exec.Cmd created in
// f whose Env is not assigned directly from childEnv or acpChildEnv in the
// same top-level declaration, and every later change to such an Env.
func cmdEnvViolations(fset *token.FileSet, f *ast.File) []string {
	pkg := ""
	type violation struct {
		pos token.Pos
		msg string
	}
	var found []violation
	report := func(n ast.Node, format string, a ...any) {
		found = append(found, violation{n.Pos(), fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, a...))})
	}
	var out []string
	for _, imp := range f.Imports {
		if imp.Path.Value != `"os/exec"` {
			continue
		}
		pkg = "exec"
		if imp.Name != nil {
			pkg = imp.Name.Name
		}
		if pkg == "." {
			report(imp, "dot import of os/exec hides exec.Cmd from this check")
			return []string{found[0].msg}
		}
	}
	if pkg == "" || pkg == "_" {
		return out
	}
	isExec := func(e ast.Expr, names ...string) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == pkg && slices.Contains(names, sel.Sel.Name)
	}
	isBuilderCall := func(e ast.Expr) bool {
		call, ok := e.(*ast.CallExpr)
		if !ok {
			return false
		}
		switch fn := call.Fun.(type) {
		case *ast.SelectorExpr:
			return fn.Sel.Name == "childEnv" || fn.Sel.Name == "acpChildEnv"
		case *ast.Ident:
			return fn.Name == "childEnv" || fn.Name == "acpChildEnv"
		}
		return false
	}
	// creation returns the node that makes a new exec.Cmd, if e is one, and
	// whether it already carries its Env.
	creation := func(e ast.Expr) (ast.Node, bool) {
		for {
			switch x := e.(type) {
			case *ast.ParenExpr:
				e = x.X
				continue
			case *ast.UnaryExpr:
				if x.Op == token.AND {
					e = x.X
					continue
				}
			case *ast.CallExpr:
				if isExec(x.Fun, "Command", "CommandContext") {
					return x, false
				}
				if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 && isExec(x.Args[0], "Cmd") {
					return x, false
				}
			case *ast.CompositeLit:
				if isExec(x.Type, "Cmd") {
					for _, el := range x.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Env" {
								return x, isBuilderCall(kv.Value)
							}
						}
					}
					return x, false
				}
			}
			return nil, false
		}
	}
	for _, decl := range f.Decls {
		bound := map[ast.Node]string{} // creation -> the expression it is stored in
		envOK := map[string]bool{}     // expressions whose Env came from the builder
		var creations []ast.Node
		var envWrites []*ast.AssignStmt
		ast.Inspect(decl, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for i, rhs := range x.Rhs {
					if c, _ := creation(rhs); c != nil && len(x.Lhs) == len(x.Rhs) {
						bound[c] = types.ExprString(x.Lhs[i])
					}
				}
				envWrites = append(envWrites, x)
			case *ast.ValueSpec:
				for i, v := range x.Values {
					if c, _ := creation(v); c != nil && len(x.Names) == len(x.Values) {
						bound[c] = x.Names[i].Name
					}
				}
				if len(x.Values) == 0 && isExec(x.Type, "Cmd") {
					creations = append(creations, x)
				}
			case ast.Expr:
				if c, _ := creation(x); c == n {
					creations = append(creations, c)
				}
			}
			return true
		})
		// Env writes: the first direct builder assignment is the only one allowed.
		for _, as := range envWrites {
			for i, lhs := range as.Lhs {
				target, direct := envTarget(lhs)
				if target == "" {
					continue
				}
				if direct && len(as.Lhs) == len(as.Rhs) && isBuilderCall(as.Rhs[i]) && !envOK[target] {
					envOK[target] = true
					continue
				}
				if envOK[target] || isBoundName(bound, target) {
					report(as, "Env of %s changed other than by one direct childEnv or acpChildEnv call", target)
				}
			}
		}
		for _, c := range creations {
			if e, ok := c.(ast.Expr); ok {
				if _, hasEnv := creation(e); hasEnv {
					continue
				}
			}
			name, isBound := bound[c]
			if !isBound {
				if vs, ok := c.(*ast.ValueSpec); ok && len(vs.Names) == 1 {
					name, isBound = vs.Names[0].Name, true
				}
			}
			switch {
			case !isBound:
				report(c, "exec.Cmd is not stored in a variable whose Env is set from childEnv or acpChildEnv")
			case !envOK[name]:
				report(c, "exec.Cmd %s never gets Env from childEnv or acpChildEnv", name)
			}
		}
	}
	slices.SortFunc(found, func(a, b violation) int { return int(a.pos - b.pos) })
	for _, v := range found {
		out = append(out, v.msg)
	}
	return out
}

// envTarget returns the expression whose Env lhs writes, and whether the write
// replaces Env as a whole (x.Env = ...) rather than an element of it.
func envTarget(lhs ast.Expr) (string, bool) {
	direct := true
	if ix, ok := lhs.(*ast.IndexExpr); ok {
		lhs, direct = ix.X, false
	}
	sel, ok := lhs.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Env" {
		return "", false
	}
	return types.ExprString(sel.X), direct
}

func isBoundName(bound map[ast.Node]string, name string) bool {
	for _, n := range bound {
		if n == name {
			return true
		}
	}
	return false
}

// BenchmarkChildEnv measures building one child environment from a typical
// 60-variable environment with a few additions.
func BenchmarkChildEnv(b *testing.B) {
	environ := []string{envGuardToken + "=t", "LD_PRELOAD=/x.so"}
	for i := range 60 {
		environ = append(environ, fmt.Sprintf("VAR_%02d=value-%d", i, i))
	}
	e := newProcEnv(environ)
	b.ReportAllocs()
	for b.Loop() {
		e.childEnv("PWD=/w", "VAR_07=other", envGuardToken+"=again")
	}
}
