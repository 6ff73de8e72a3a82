// layering_test.go holds the package to its layers (DESIGN.md, the code
// map): every non-test file belongs to a group by its name, a file whose
// name no group claims fails, and the rules below forbid uses between
// groups, checked on the type-checked uses of every name (a package-level
// declaration, a field or a method). A group added later is added here, and
// its rules with it.
package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// fileGroup is a group of files, by filepath.Match patterns over names. A
// file belongs to the first group that matches it.
type fileGroup struct {
	name  string
	files []string
}

var fileGroups = []fileGroup{
	// The commands: main.go dispatches; config*.go parse flags, environment
	// and settings into each command's options; demo.go runs them together.
	{"entry", []string{"main.go", "config*.go", "demo.go"}},
	// The ACP runtime: sessions, turns, its slash commands and prompt.
	{"agent", []string{"acp*.go", "agent*.go", "slash.go"}},
	// The model clients, and the child's model over the channel.
	{"model", []string{"model*.go"}},
	// The daemon: the host API, sessions, children and the bridge.
	{"serve", []string{"serve*.go", "bridge.go"}},
	// acpguard run: the ACP client of an agent it starts in-process, its
	// output formats and budgets.
	{"run", []string{"run*.go"}},
	// The private channel's names and framing, which both ends share.
	{"channel", []string{"channel*.go"}},
	// The reference policy provider.
	{"provider", []string{"provider*.go"}},
	// The one execution boundary, and the call vocabulary beside it.
	{"boundary", []string{"guard.go"}},
	{"call", []string{"call.go"}},
	// The provider wire contract and the client that speaks it.
	{"wire", []string{"guard_*.go"}},
	// Settings, the permission rules and the hooks: the layers before the guard.
	{"rules", []string{"perms*.go", "hooks*.go", "settings*.go"}},
	// The executors: built-in tools and MCP servers.
	{"tools", []string{"tools*.go", "mcp*.go"}},
	{"sandbox", []string{"sandbox*.go"}},
	// Process groups, what /proc says, and the lifecycle of processes.
	{"proc", []string{"proc.go", "proc_stat.go", "proc_net.go", "reaper.go", "lifeline.go"}},
	// The log reader: acpguard log.
	{"log", []string{"log.go"}},
	// The setup checker: acpguard doctor.
	{"doctor", []string{"doctor*.go"}},
	// What every layer may use: the process a command is handed, strict
	// JSON, loopback, globs, the environment builder, secret files, the
	// shell parser, metrics.
	{"base", []string{"proc_system.go", "ids.go", "addr.go", "envscrub.go", "glob.go", "httpx.go", "json*.go", "metrics.go", "secret_files.go", "shell_parse.go", "slots.go"}},
}

// groupOf names the group of a file name, "" when none claims it.
func groupOf(groups []fileGroup, name string) string {
	for _, g := range groups {
		if matchesAny(g.files, name) {
			return g.name
		}
	}
	return ""
}

// layerRule forbids files of the groups From to use a name declared in a
// file of the groups To. An entry that names no group is a file pattern,
// for a rule finer than a group.
type layerRule struct {
	what     string
	from, to []string
}

// everyGroupBut lists the groups other than the ones named.
func everyGroupBut(names ...string) []string {
	var out []string
	for _, g := range fileGroups {
		if !slices.Contains(names, g.name) {
			out = append(out, g.name)
		}
	}
	return out
}

var layerRules = []layerRule{
	{"the agent uses nothing of the command entry", []string{"agent", "model"}, []string{"entry"}},
	{"serve uses nothing of the command entry", []string{"serve"}, []string{"entry"}},
	{"run uses nothing of the command entry", []string{"run"}, []string{"entry"}},
	{"run uses nothing of serve: it reaches its agent as an editor does", []string{"run"}, []string{"serve"}},
	{"the agent and serve use nothing of run: it is only a client", []string{"agent", "model", "serve"}, []string{"run"}},
	{"the commands doctor and log are leaves: only the entry uses them", everyGroupBut("entry", "doctor", "log"), []string{"doctor", "log"}},
	{"doctor and log use nothing of the command entry", []string{"doctor", "log"}, []string{"entry"}},
	{"the sandbox uses nothing of the command entry", []string{"sandbox", "proc"}, []string{"entry"}},
	{"base files use nothing above them", []string{"base"}, everyGroupBut("base")},
	{"the agent uses nothing of serve: both ends share only the channel", []string{"agent", "model"}, []string{"serve"}},
	{"serve uses nothing of the agent: both ends share only the channel", []string{"serve"}, []string{"agent", "model_parent.go"}},
	{"the channel uses nothing of either end", []string{"channel"}, []string{"agent", "serve"}},
	{"settings do not use the agent", []string{"rules"}, []string{"agent", "model"}},
	{"the model does not hold the agent", []string{"model"}, []string{"agent"}},
	{"the provider uses nothing of the tools, the agent, serve or run", []string{"provider"}, []string{"tools", "agent", "model", "serve", "run", "boundary"}},
	{"serve uses nothing of the provider: they share only the wire contract", []string{"serve"}, []string{"provider"}},
	{"the rules and hooks use nothing of the boundary", []string{"rules"}, []string{"boundary"}},
	{"the executors use nothing of the boundary, the rules or settings", []string{"tools"}, []string{"boundary", "rules"}},
	{"the boundary uses nothing of the agent, serve or run", []string{"boundary", "call"}, []string{"agent", "model", "serve", "run"}},
	{"what runs a call uses nothing of the agent, serve, run or the provider", []string{"tools", "rules", "sandbox", "proc", "wire"}, []string{"agent", "model", "serve", "run", "provider"}},
}

// inAny reports whether a file of the given name is in one of the groups or
// matches one of the file patterns named.
func inAny(groups []fileGroup, names []string, file string) bool {
	g := groupOf(groups, file)
	for _, n := range names {
		if n == g {
			return true
		}
		if !slices.ContainsFunc(groups, func(g fileGroup) bool { return g.name == n }) {
			if ok, _ := filepath.Match(n, file); ok {
				return true
			}
		}
	}
	return false
}

func matchesAny(patterns []string, name string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, _ := filepath.Match(p, name)
		return ok
	})
}

// layerViolations type-checks files (as package main) and returns, sorted,
// each use that breaks a rule: "from.go: name (to.go): rule".
func layerViolations(fset *token.FileSet, files []*ast.File, imp types.Importer, groups []fileGroup, rules []layerRule) ([]string, error) {
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check("main", fset, files, info)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for id, obj := range info.Uses {
		// Locals and parameters are declared in the file that uses them;
		// fields and methods have no parent scope and are checked.
		if obj.Pkg() != pkg || (obj.Parent() != nil && obj.Parent() != pkg.Scope()) {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		for _, r := range rules {
			if from != to && inAny(groups, r.from, from) && inAny(groups, r.to, to) {
				seen[fmt.Sprintf("%s: %s (%s): %s", from, obj.Name(), to, r.what)] = true
			}
		}
	}
	bad := make([]string, 0, len(seen))
	for b := range seen {
		bad = append(bad, b)
	}
	sort.Strings(bad)
	return bad, nil
}

// packageFiles parses the package's non-test files.
func packageFiles() (*token.FileSet, []*ast.File, error) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	return fset, files, nil
}

// exportImporter reads the compiler's export data of the files' imports,
// located by one go list: the gc importer alone runs go list per package.
func exportImporter(t *testing.T, fset *token.FileSet, files []*ast.File) types.Importer {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}"}
	for _, f := range files {
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !slices.Contains(args, path) {
				args = append(args, path)
			}
		}
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list the export data of the imports: %v", err)
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), "=")
		exports[path] = file
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(exports[path])
	})
}

func TestLayering(t *testing.T) {
	fset, files, err := packageFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(fset.Position(f.Pos()).Filename)
		if groupOf(fileGroups, name) == "" {
			t.Errorf("%s belongs to no group: name it by the group it extends, or add a group to fileGroups with its rules", name)
		}
	}
	// Every group and file pattern a rule names exists, so a renamed file
	// or group cannot silently empty a rule.
	for _, r := range layerRules {
		for _, n := range slices.Concat(r.from, r.to) {
			if !slices.ContainsFunc(files, func(f *ast.File) bool {
				return inAny(fileGroups, []string{n}, filepath.Base(fset.Position(f.Pos()).Filename))
			}) {
				t.Errorf("rule %q: %q names no file: run the test in the package directory, or update the rule", r.what, n)
			}
		}
	}
	bad, err := layerViolations(fset, files, exportImporter(t, fset, files), fileGroups, layerRules)
	if err != nil {
		t.Fatalf("type-check the package: %v", err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestLayeringCatches: a use of a type, a function, a method or a field
// across a forbidden edge is found, by group and by file pattern; a local
// of the same name and a use the rules allow are not; a file no group
// claims is named.
func TestLayeringCatches(t *testing.T) {
	const upper = `package main
type session struct{ cwd string }
func (s *session) dir() string { return s.cwd }
func newSession() *session { return &session{} }
`
	const lower = `package main
type toolEnv struct{ Cwd string }
type Decision struct{ Allowed bool }
`
	groups := []fileGroup{{"agent", []string{"acp*.go"}}, {"call", []string{"call.go"}}, {"tools", []string{"tools*.go"}}}
	tests := []struct {
		name  string
		rules []layerRule
		src   string
		bad   int
	}{
		{"clean", nil, "func run(e toolEnv) string { return e.Cwd }", 0},
		{"a type", nil, "func run(s *session) {}", 1},
		{"a function", nil, "var s = newSession()", 1},
		{"a method and a field of a value it did not name", nil, "func run() string { return newSession().dir() + newSession().cwd }", 3},
		{"a local of the same name", nil, "func run() { session := 1; _ = session }", 0},
		{"a type of an allowed group", nil, "var d Decision", 0},
		{"a file pattern", []layerRule{{"tools use nothing of call.go", []string{"tools"}, []string{"call.go"}}}, "var d Decision", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := tt.rules
			if rules == nil {
				rules = []layerRule{{"tools use nothing of the agent", []string{"tools"}, []string{"agent"}}}
			}
			fset := token.NewFileSet()
			var files []*ast.File
			for name, src := range map[string]string{"acp.go": upper, "call.go": lower, "tools_x.go": "package main\n" + tt.src} {
				f, err := parser.ParseFile(fset, name, src, 0)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			got, err := layerViolations(fset, files, nil, groups, rules)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.bad {
				t.Errorf("found %d uses %v, want %d", len(got), got, tt.bad)
			}
		})
	}
	if g := groupOf(fileGroups, "newthing.go"); g != "" {
		t.Errorf("a file of an unknown prefix is in group %q, want none", g)
	}
	for _, name := range []string{"serve_new.go", "acp_new.go", "config_new.go", "provider_new.go"} {
		if groupOf(fileGroups, name) == "" {
			t.Errorf("%s is in no group, want its prefix's", name)
		}
	}
}
