// trusted_core_test.go names the trusted core (DESIGN.md §1): the code an
// auditor must trust to know that only allowed, unaltered arguments run,
// from the boundary (runTool) and from serve's prepare handler to the
// executors. It computes every function of the package reachable from
// those two in the call graph, stopping at calls through an interface or a
// function value (the executor and observer interfaces among them) and at
// the standard library, and holds that path to a list of whole files and a
// budget of code lines.
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// trustedCoreRoots are where the trusted path starts: the child's one
// execution boundary and serve's handler of a child's decision request.
var trustedCoreRoots = []string{"runTool", "daemon.prepare"}

// trustedCoreFiles are the files the trusted path may lie in, whole. A
// later change that widens the path adds the file here and says why.
var trustedCoreFiles = []string{
	"bridge.go",
	"call.go",
	"guard.go",
	"guard_client.go",
	"guard_wire.go",
	"ids.go",
	"jsonl.go",
	"jsonstrict.go",
	"jsonwrite.go",
	"metrics.go",
	"tools.go",
}

// trustedCoreBudget bounds the code lines (neither blank nor comment) of
// trustedCoreFiles together: the path is 89 functions, about 1,450 lines,
// in files of 2,272 code lines, the whole-line appender of the decision log
// (jsonl.go), which an allow waits on, among them. A change may raise it
// only with a line in its note saying why.
const trustedCoreBudget = 2300

// reachableFuncs returns the package's functions reachable from roots
// ("name" or "Type.method"), each with the file it is declared in.
func reachableFuncs(fset *token.FileSet, files []*ast.File, info *types.Info, pkg *types.Package, roots []string) (map[*types.Func]*ast.FuncDecl, error) {
	decls := map[*types.Func]*ast.FuncDecl{}
	byName := map[string]*types.Func{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fn, ok := info.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			decls[fn] = fd
			name := fn.Name()
			if recv := fn.Type().(*types.Signature).Recv(); recv != nil {
				t := recv.Type()
				if p, ok := t.(*types.Pointer); ok {
					t = p.Elem()
				}
				if n, ok := t.(*types.Named); ok {
					name = n.Obj().Name() + "." + name
				}
			}
			byName[name] = fn
		}
	}
	seen := map[*types.Func]*ast.FuncDecl{}
	var queue []*types.Func
	for _, r := range roots {
		fn := byName[r]
		if fn == nil {
			return nil, fmt.Errorf("root %q: no such function", r)
		}
		queue = append(queue, fn)
	}
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		fd := decls[fn]
		if fd == nil || seen[fn] != nil {
			continue
		}
		seen[fn] = fd
		if fd.Body == nil {
			continue
		}
		// Every function of the package the body calls. A call through an
		// interface (the observer) or a function value (the executors,
		// which the tool table holds) names no declaration: the stop.
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch fun := ast.Unparen(call.Fun).(type) {
			case *ast.Ident:
				id = fun
			case *ast.SelectorExpr:
				id = fun.Sel
			case *ast.IndexExpr: // a generic function's instance
				if x, ok := fun.X.(*ast.Ident); ok {
					id = x
				}
			}
			if id == nil {
				return true
			}
			callee, ok := info.Uses[id].(*types.Func)
			if !ok || callee.Pkg() != pkg {
				return true
			}
			if sig := callee.Type().(*types.Signature); sig.Recv() != nil {
				if _, isIface := sig.Recv().Type().Underlying().(*types.Interface); isIface {
					return true
				}
			}
			queue = append(queue, callee)
			return true
		})
	}
	return seen, nil
}

// codeLines counts the lines of path that are neither blank nor comment
// alone.
func codeLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, inBlock := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inBlock:
			if strings.Contains(line, "*/") {
				inBlock = false
			}
		case line == "", strings.HasPrefix(line, "//"):
		case strings.HasPrefix(line, "/*"):
			inBlock = !strings.Contains(line, "*/")
		default:
			n++
		}
	}
	return n
}

func TestTrustedCore(t *testing.T) {
	fset, files, err := packageFiles()
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: exportImporter(t, fset, files)}).Check("main", fset, files, info)
	if err != nil {
		t.Fatalf("type-check the package: %v", err)
	}
	reach, err := reachableFuncs(fset, files, info, pkg, trustedCoreRoots)
	if err != nil {
		t.Fatal(err)
	}
	byFile := map[string][]string{}
	pathLines := 0
	for fn, fd := range reach {
		file := fset.Position(fd.Pos()).Filename
		byFile[file] = append(byFile[file], fn.Name())
		pathLines += fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
	}
	var outside []string
	total := 0
	for file := range byFile {
		if !slices.Contains(trustedCoreFiles, file) {
			outside = append(outside, file)
		}
	}
	sort.Strings(outside)
	for _, file := range outside {
		names := byFile[file]
		sort.Strings(names)
		t.Errorf("%s holds %d functions of the trusted path (%s), but is not in trustedCoreFiles", file, len(names), strings.Join(names, ", "))
	}
	for _, file := range trustedCoreFiles {
		if byFile[file] == nil {
			t.Errorf("%s is in trustedCoreFiles but holds no function of the trusted path: drop it", file)
		}
		total += codeLines(t, file)
	}
	t.Logf("trusted path: %d functions, %d lines of them, in %d files of %d code lines (budget %d)", len(reach), pathLines, len(byFile), total, trustedCoreBudget)
	if total > trustedCoreBudget {
		t.Errorf("the trusted core's files hold %d code lines, over the budget of %d: move what is not on the path out of them", total, trustedCoreBudget)
	}
}

// TestTrustedCoreCatches: the walk follows calls of functions and methods
// across files, and stops at an interface method, a function value and the
// standard library.
func TestTrustedCoreCatches(t *testing.T) {
	src := map[string]string{
		"guard.go": `package main
import "strings"
type executor interface{ run() }
type spec struct{ exec func() }
type daemon struct{}
func runTool(e executor, s spec) { check(); var d daemon; d.prepare(); e.run(); s.exec(); _ = strings.ToUpper("x") }
`,
		"rules.go": `package main
func check() { deeper() }
func deeper() {}
func (daemon) prepare() {}
func notCalled() {}
`,
		"tools.go": `package main
type shell struct{}
func (shell) run() { notCalled() }
func execShell() {}
var table = spec{exec: execShell}
`,
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for name, s := range src {
		f, err := parser.ParseFile(fset, name, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("main", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	reach, err := reachableFuncs(fset, files, info, pkg, []string{"runTool"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for fn := range reach {
		got = append(got, fn.Name())
	}
	sort.Strings(got)
	if want := []string{"check", "deeper", "prepare", "runTool"}; !slices.Equal(got, want) {
		t.Errorf("reachable = %v, want %v", got, want)
	}
	if _, err := reachableFuncs(fset, files, info, pkg, []string{"nope"}); err == nil {
		t.Error("an unknown root was accepted")
	}
}
