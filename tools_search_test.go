// tools_search_test.go checks glob and grep_search over a workspace tree.
package main

import (
	"fmt"
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

// deniedTree is a workspace with a folder that settings keep from
// read_file, paths the sandbox hides, a sibling folder, and links into the
// denied folder.
func deniedTree(t *testing.T, cwd string) {
	mustWrite(t, filepath.Join(cwd, "secrets", "key.txt"), "needle in secrets\n")
	mustWrite(t, filepath.Join(cwd, "secrets", "deep", "more.txt"), "needle deep in secrets\n")
	mustWrite(t, filepath.Join(cwd, "public", "a.txt"), "needle in public\n")
	mustWrite(t, filepath.Join(cwd, "top.txt"), "needle on top\n")
	mustWrite(t, filepath.Join(cwd, "vault", "token.txt"), "needle in the vault\n")
	mustWrite(t, filepath.Join(cwd, "loose.txt"), "needle loose\n")
	mustSymlink(t, "secrets", filepath.Join(cwd, "public", "link"))
	mustSymlink(t, "../secrets/key.txt", filepath.Join(cwd, "public", "key.txt"))
}

// TestSearchSkipsDeniedAndHidden: grep_search and glob read nothing a
// settings deny rule keeps from read_file nor anything the sandbox hides,
// with or without a path, follow no link into them, still search a sibling
// folder, and say how many paths they skipped, a directory once.
func TestSearchSkipsDeniedAndHidden(t *testing.T) {
	const denied = "in secrets"
	tests := []struct {
		name    string
		deny    []string // settings permissions.deny
		hide    []string // sandbox-hidden, relative to the cwd
		tool    string
		args    map[string]any
		want    []string
		notWant []string
		skipped int
	}{
		{name: "pathless grep", deny: []string{"ReadFile(./secrets/**)"}, tool: "grep_search", args: map[string]any{"pattern": "needle"},
			want: []string{"$CWD/public/a.txt:1:needle in public", "$CWD/top.txt:1:", "$CWD/vault/token.txt:1:"}, notWant: []string{denied}, skipped: 1},
		{name: "absolute rule", deny: []string{"ReadFile(/$CWD/secrets/**)"}, tool: "grep_search", args: map[string]any{"pattern": "needle"},
			want: []string{"$CWD/public/a.txt:1:"}, notWant: []string{denied}, skipped: 1},
		{name: "pathless glob", deny: []string{"ReadFile(./secrets/**)"}, tool: "glob", args: map[string]any{"pattern": "**/*.txt"},
			want: []string{"$CWD/public/a.txt", "$CWD/top.txt"}, notWant: []string{"/secrets/", "/link/", "public/key.txt"}, skipped: 1},
		{name: "files one by one", deny: []string{"ReadFile(./secrets/*)"}, tool: "grep_search", args: map[string]any{"pattern": "needle"},
			want: []string{"$CWD/public/a.txt:1:"}, notWant: []string{denied}, skipped: 2},
		{name: "a sibling folder", deny: []string{"ReadFile(./secrets/**)"}, tool: "grep_search", args: map[string]any{"pattern": "needle", "path": "public"},
			want: []string{"$CWD/public/a.txt:1:needle in public"}, notWant: []string{denied, "skipped"}},
		{name: "the folder itself", deny: []string{"ReadFile(./secrets/**)"}, tool: "grep_search", args: map[string]any{"pattern": "needle", "path": "secrets"},
			want: []string{`No matches for "needle" in $CWD/secrets`}, notWant: []string{denied}, skipped: 1},
		{name: "a denied file as the root", deny: []string{"ReadFile(./secrets/*)"}, tool: "grep_search", args: map[string]any{"pattern": "needle", "path": "secrets/key.txt"},
			want: []string{"No matches"}, notWant: []string{denied}, skipped: 1},
		{name: "hidden by the sandbox", hide: []string{"vault", "loose.txt"}, tool: "grep_search", args: map[string]any{"pattern": "needle"},
			want: []string{"$CWD/secrets/key.txt:1:needle in secrets", "$CWD/top.txt:1:"}, notWant: []string{"vault", "loose"}, skipped: 2},
		{name: "hidden, glob", hide: []string{"vault", "loose.txt"}, tool: "glob", args: map[string]any{"pattern": "**/*.txt"},
			want: []string{"$CWD/secrets/key.txt"}, notWant: []string{"vault", "loose"}, skipped: 2},
		{name: "both", deny: []string{"ReadFile(./secrets/**)"}, hide: []string{"vault", "loose.txt"}, tool: "grep_search", args: map[string]any{"pattern": "needle"},
			want: []string{"$CWD/top.txt:1:"}, notWant: []string{denied, "vault", "loose"}, skipped: 3},
		{name: "truncated and skipped", deny: []string{"ReadFile(./secrets/**)"}, tool: "grep_search", args: map[string]any{"pattern": "top|vault", "limit": 1},
			want: []string{"[results limited to 1 matches]\n"}, notWant: []string{denied}, skipped: 1},
		{name: "nothing denied", deny: []string{"ReadFile(./elsewhere/**)"}, tool: "grep_search", args: map[string]any{"pattern": "needle"},
			want: []string{"$CWD/secrets/key.txt:1:", "$CWD/vault/token.txt:1:"}, notWant: []string{"skipped", "link/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := newTestEnv(t, nil)
			deniedTree(t, env.Cwd)
			deny := make([]string, len(tt.deny))
			for i, r := range tt.deny {
				deny[i] = fmt.Sprintf("%q", strings.ReplaceAll(r, "$CWD", env.Cwd))
			}
			env.Policy = &callPolicy{Settings: mustParse(t, `{"permissions":{"deny":[`+strings.Join(deny, ",")+`]}}`), Mode: modeDefault}
			if tt.hide != nil {
				cfg := sandboxConfig{Profile: sandboxWorkspace}
				for _, h := range tt.hide {
					cfg.Hide = append(cfg.Hide, filepath.Join(env.Cwd, h))
				}
				env.Sandbox = &sandboxSession{cfg: cfg}
			}
			res := runArgs(t, env, tt.tool, tt.args)
			if res.Status != statusCompleted {
				t.Fatalf("result = %+v", res)
			}
			want := tt.want
			if tt.skipped > 0 {
				want = append(want, fmt.Sprintf("\n[skipped %d path(s) denied by settings or hidden by the sandbox]", tt.skipped))
				if !strings.HasSuffix(res.Output, "by the sandbox]") {
					t.Errorf("output %q does not end with the skipped paths", res.Output)
				}
			}
			for _, w := range want {
				if !strings.Contains(res.Output, strings.ReplaceAll(w, "$CWD", env.Cwd)) {
					t.Errorf("output %q does not contain %q", res.Output, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(res.Output, w) {
					t.Errorf("output %q contains %q", res.Output, w)
				}
			}
		})
	}
}

// TestSearchUnderReadDenyRule: a settings Read rule, which names the search
// tools, refuses a search whose tree holds what it covers before anything
// is read; ReadFile names read_file alone, and the search skips instead.
func TestSearchUnderReadDenyRule(t *testing.T) {
	for rule, want := range map[string]string{
		"Read(./secrets/**)":     `tool "grep_search" denied by permission rule "Read(./secrets/**)"`,
		"ReadFile(./secrets/**)": "[skipped 1 path(s) denied by settings or hidden by the sandbox]",
	} {
		env, _ := newTestEnv(t, nil)
		deniedTree(t, env.Cwd)
		env.Policy = &callPolicy{Settings: mustParse(t, `{"permissions":{"deny":["`+rule+`"]}}`), Mode: modeDefault}
		res := runArgs(t, env, "grep_search", map[string]any{"pattern": "needle"})
		if !strings.HasSuffix(res.Output, want) || strings.Contains(res.Output, "in secrets") {
			t.Errorf("%s: result %+v, want it to end with %q", rule, res, want)
		}
	}
}
