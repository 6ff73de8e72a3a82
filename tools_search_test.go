// tools_search_test.go checks glob and grep_search over a workspace tree.
package main

import (
	"path/filepath"
	"strings"
	"testing"
)

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

func TestGrepSingleFileAndExactLimit(t *testing.T) {
	env, _ := newTestEnv(t, nil)
	mustWrite(t, filepath.Join(env.Cwd, "one.txt"), "x\nneedle\n")
	res := runArgs(t, env, "grep_search", map[string]any{"pattern": "needle", "path": "one.txt", "limit": 1})
	if res.Status != statusCompleted || !strings.Contains(res.Output, "one.txt:2:needle") || strings.Contains(res.Output, "limited") {
		t.Errorf("result = %+v", res)
	}
}
