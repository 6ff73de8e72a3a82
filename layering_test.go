// layering_test.go pins the few dependency rules that keep a tool call's path
// one way (agent, boundary, rules and hooks, executor): the base and the
// executors know neither the agent, serve nor the provider; the provider
// knows neither the tools nor the agent; the rules and hooks know nothing of
// the boundary.
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

// layerRule forbids files matching From to use a name (a package-level
// declaration, a field or a method) declared in a file matching To. Patterns
// are filepath.Match patterns over file names.
type layerRule struct {
	what     string
	from, to []string
}

// config*.go are not base: they parse each command's options into that
// command's types, and sit with main.go above the commands.
var layerRules = []layerRule{
	{
		"the base and the executors use nothing of the agent, serve or the provider",
		[]string{"jsonstrict.go", "jsonrpc.go", "envscrub.go", "proc.go", "addr.go", "call.go", "glob.go", "tools*.go", "mcp_client.go"},
		[]string{"acp.go", "serve*.go", "bridge.go", "provider*.go"},
	},
	{
		"the provider uses nothing of the tools or the agent",
		[]string{"provider*.go"},
		[]string{"tools*.go", "acp.go"},
	},
	{
		"the provider and serve share only the wire contract and the base",
		[]string{"provider*.go"},
		[]string{"serve*.go", "bridge.go"},
	},
	{
		"serve and the provider share only the wire contract and the base",
		[]string{"serve*.go", "bridge.go"},
		[]string{"provider*.go"},
	},
	{
		"the rules and hooks use nothing of the boundary",
		[]string{"perms*.go", "hooks.go"},
		[]string{"guard.go"},
	},
	{
		"the executors use nothing of the boundary, the rules or settings",
		[]string{"tools*.go", "mcp.go", "mcp_client.go"},
		[]string{"guard.go", "perms*.go", "hooks.go", "settings.go"},
	},
	{
		"the agent uses nothing of serve: both ends share only channel*.go",
		[]string{"acp*.go", "agent*.go", "model*.go"},
		[]string{"serve*.go", "bridge.go"},
	},
	{
		"serve uses nothing of the agent: both ends share only channel*.go",
		[]string{"serve*.go", "bridge.go"},
		[]string{"acp*.go", "agent*.go", "model_parent.go"},
	},
	{
		"the boundary uses nothing of the agent",
		[]string{"guard.go"},
		[]string{"acp.go"},
	},
}

func matchesAny(patterns []string, name string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, _ := filepath.Match(p, name)
		return ok
	})
}

// layerViolations type-checks files (as package main) and returns, sorted,
// each use that breaks a rule: "from.go: name (to.go): rule".
func layerViolations(fset *token.FileSet, files []*ast.File, imp types.Importer, rules []layerRule) ([]string, error) {
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
			if from != to && matchesAny(r.from, from) && matchesAny(r.to, to) {
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
	// Every pattern names at least one file, so a renamed file cannot
	// silently empty a rule.
	for _, r := range layerRules {
		for _, p := range slices.Concat(r.from, r.to) {
			if !slices.ContainsFunc(files, func(f *ast.File) bool {
				ok, _ := filepath.Match(p, filepath.Base(fset.Position(f.Pos()).Filename))
				return ok
			}) {
				t.Errorf("rule %q: pattern %q names no file: run the test in the package directory, or update the rule", r.what, p)
			}
		}
	}
	bad, err := layerViolations(fset, files, exportImporter(t, fset, files), layerRules)
	if err != nil {
		t.Fatalf("type-check the package: %v", err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

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
	tests := []struct {
		name string
		src  string
		bad  int
	}{
		{"clean", "func run(e toolEnv) string { return e.Cwd }", 0},
		{"a type", "func run(s *session) {}", 1},
		{"a function", "var s = newSession()", 1},
		{"a method and a field of a value it did not name", "func run() string { return newSession().dir() + newSession().cwd }", 3},
		{"a local of the same name", "func run() { session := 1; _ = session }", 0},
		{"a type of another file", "var d Decision", 0},
	}
	rules := []layerRule{{"tools use nothing of the agent", []string{"tools*.go"}, []string{"acp.go"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			var files []*ast.File
			for name, src := range map[string]string{"acp.go": upper, "call.go": lower, "tools_x.go": "package main\n" + tt.src} {
				f, err := parser.ParseFile(fset, name, src, 0)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			got, err := layerViolations(fset, files, nil, rules)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.bad {
				t.Errorf("found %d uses %v, want %d", len(got), got, tt.bad)
			}
		})
	}
}
