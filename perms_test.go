// perms_test.go checks permission rules under each approval mode: aliases,
// priority, path anchors and symlinks.
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePermissionRulesErrors(t *testing.T) {
	for _, tc := range []struct {
		deny []string
		want string
	}{
		{[]string{""}, `key "permissions.deny[0]": empty rule`},
		{[]string{"Bash", "  "}, `key "permissions.deny[1]": empty rule`},
		{[]string{"Bash(git *"}, `key "permissions.deny[0]": rule "Bash(git *": missing ")" at the end`},
		{[]string{"Bash()"}, `key "permissions.deny[0]": rule "Bash()": empty specifier`},
		{[]string{"Bash)"}, `key "permissions.deny[0]": rule "Bash)": ")" without "("`},
		{[]string{"Rread"}, `key "permissions.deny[0]": rule "Rread": unknown tool "Rread"`},
		{[]string{"WebFetch(domain:x.com)", "Fetch"}, `key "permissions.deny[1]": rule "Fetch": unknown tool "Fetch"`},
		{[]string{"mcp__s(x)"}, `key "permissions.deny[0]": rule "mcp__s(x)": MCP rules take no specifier`},
		{[]string{"mcp__"}, `key "permissions.deny[0]": rule "mcp__": missing server name`},
		{[]string{"mcp__a*b"}, `key "permissions.deny[0]": rule "mcp__a*b": "*" is allowed only at the end of an MCP rule`},
		{[]string{"mcp__a b"}, `key "permissions.deny[0]": rule "mcp__a b": character ' ' is not allowed in an MCP tool name`},
		{[]string{"Read(./{a,b)"}, `key "permissions.deny[0]": rule "Read(./{a,b)": unbalanced "{" in "./{a,b"`},
		{[]string{"Read(./a})"}, `key "permissions.deny[0]": rule "Read(./a})": unbalanced "}" in "./a}"`},
		{[]string{"Read(./[a)"}, `key "permissions.deny[0]": rule "Read(./[a)": bad path pattern "./[a": syntax error in pattern`},
		{[]string{"Read(" + strings.Repeat("{a,b}", 7) + ")"}, "expands to more than 64 patterns"},
		{[]string{strings.Repeat("a", maxRuleBytes+1)}, `key "permissions.deny[0]": rule longer than 4096 bytes`},
	} {
		_, err := parsePermissionRules(nil, nil, tc.deny)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("deny %q: got error %v, want %q", tc.deny, err, tc.want)
		}
	}
	_, err := parsePermissionRules([]string{"Bash", "Read("}, nil, nil)
	if err == nil || !strings.HasPrefix(err.Error(), `key "permissions.allow[1]": `) {
		t.Errorf("allow error %v does not name permissions.allow[1]", err)
	}
}

// A rule names tools by alias or canonical name; each covers exactly its tools.
func TestRuleAliases(t *testing.T) {
	all := []string{"read_file", "write_file", "edit", "list_directory", "glob", "grep_search", "run_shell_command", "mcp__s__t"}
	for _, tc := range []struct {
		rule  string
		tools []string
	}{
		{"Bash", []string{"run_shell_command"}},
		{"Shell", []string{"run_shell_command"}},
		{"run_shell_command", []string{"run_shell_command"}},
		{"Read", []string{"read_file", "grep_search", "glob", "list_directory"}},
		{"Edit", []string{"edit", "write_file"}},
		{"Write", []string{"write_file"}},
		{"read_file", []string{"read_file"}},
		{"write_file", []string{"write_file"}},
		{"edit", []string{"edit"}},
		{"replace", []string{"edit"}},
		{"list_directory", []string{"list_directory"}},
		{"glob", []string{"glob"}},
		{"Grep", []string{"grep_search"}},
		{"grep_search", []string{"grep_search"}},
		{"mcp__s", []string{"mcp__s__t"}},
		{"mcp__s__t", []string{"mcp__s__t"}},
		{"mcp__s__*", []string{"mcp__s__t"}},
		{"mcp__*", []string{"mcp__s__t"}},
		{"mcp__x", nil},
		{"mcp__s__u", nil},
		// Qwen Code's tools this runtime lacks: accepted, matching nothing.
		{"WebFetch", nil},
		{"WebFetch(domain:example.com)", nil},
		{"TodoWrite", nil},
		{"agent", nil},
	} {
		r := mustRules(t, nil, nil, []string{tc.rule})
		for _, tool := range all {
			args := map[string]any{"file_path": testCwd + "/f", "path": testCwd, "command": "ls"}
			v, rule := r.decide(modeYolo, tool, false, args, testCwd, testHome)
			want := false
			for _, w := range tc.tools {
				want = want || w == tool
			}
			if got := v == verdictDeny; got != want {
				t.Errorf("deny %q on %s: verdict %s, want deny=%v", tc.rule, tool, v, want)
			}
			if v == verdictDeny && rule != tc.rule {
				t.Errorf("deny %q on %s: rule text %q", tc.rule, tool, rule)
			}
		}
	}
}

func TestMCPServerRuleDoesNotCoverLongerServerName(t *testing.T) {
	r := mustRules(t, nil, nil, []string{"mcp__git"})
	for tool, want := range map[string]verdict{
		"mcp__git__status":    verdictDeny,
		"mcp__github__issues": verdictAllow,
	} {
		if v, _ := r.decide(modeYolo, tool, false, nil, testCwd, testHome); v != want {
			t.Errorf("%s: %s, want %s", tool, v, want)
		}
	}
}

// Every approval mode with every kind of tool, no rules.
func TestApprovalModes(t *testing.T) {
	type tool struct {
		name     string
		readOnly bool
	}
	tools := []tool{
		{"read_file", false}, {"list_directory", false}, {"glob", false}, {"grep_search", false},
		{"edit", false}, {"write_file", false}, {"run_shell_command", false},
		{"mcp__s__ro", true}, {"mcp__s__rw", false},
		{"read_file", true}, {"run_shell_command", true}, // readOnly means nothing for built-ins
		{"some_future_tool", false},
	}
	want := map[string][]verdict{
		modePlan:     {"allow", "allow", "allow", "allow", "deny", "deny", "deny", "allow", "deny", "allow", "deny", "deny"},
		modeDefault:  {"allow", "allow", "allow", "allow", "ask", "ask", "ask", "ask", "ask", "allow", "ask", "ask"},
		modeAutoEdit: {"allow", "allow", "allow", "allow", "allow", "allow", "ask", "ask", "ask", "allow", "ask", "ask"},
		modeYolo:     {"allow", "allow", "allow", "allow", "allow", "allow", "allow", "allow", "allow", "allow", "allow", "allow"},
		"":           {"deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny"},
		"auto_edit":  {"deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny", "deny"},
	}
	var r *permissionRules // nil: no rules
	for mode, verdicts := range want {
		for i, tl := range tools {
			args := map[string]any{"file_path": testCwd + "/a", "path": testCwd, "command": "ls"}
			v, rule := r.decide(mode, tl.name, tl.readOnly, args, testCwd, testHome)
			if v != verdicts[i] || rule != "" {
				t.Errorf("mode %q, %s (readOnly %v): %s %q, want %s", mode, tl.name, tl.readOnly, v, rule, verdicts[i])
			}
		}
	}
}

func TestRulePriority(t *testing.T) {
	args := map[string]any{"command": "git push"}
	for _, tc := range []struct {
		name             string
		allow, ask, deny []string
		mode             string
		want             verdict
		wantRule         string
	}{
		{"deny beats ask and allow", []string{"Bash"}, []string{"Bash(git *)"}, []string{"Bash(git push)"}, modeYolo, verdictDeny, "Bash(git push)"},
		{"ask beats allow", []string{"Bash(git *)"}, []string{"Bash(git push)"}, nil, modeDefault, verdictAsk, "Bash(git push)"},
		{"ask beats yolo", nil, []string{"Bash"}, nil, modeYolo, verdictAsk, "Bash"},
		{"allow beats default", []string{"Bash(git *)"}, nil, nil, modeDefault, verdictAllow, "Bash(git *)"},
		{"plan refuses even an allowed shell", []string{"Bash"}, nil, nil, modePlan, verdictDeny, ""},
		{"plan refuses even an asked shell", nil, []string{"Bash"}, nil, modePlan, verdictDeny, ""},
		{"deny names its rule in plan too", nil, nil, []string{"Shell"}, modePlan, verdictDeny, "Shell"},
		{"unmatched rules leave the default", []string{"Bash(npm *)"}, nil, []string{"Bash(rm *)"}, modeAutoEdit, verdictAsk, ""},
	} {
		r := mustRules(t, tc.allow, tc.ask, tc.deny)
		v, rule := r.decide(tc.mode, "run_shell_command", false, args, testCwd, testHome)
		if v != tc.want || rule != tc.wantRule {
			t.Errorf("%s: %s %q, want %s %q", tc.name, v, rule, tc.want, tc.wantRule)
		}
	}
	r := mustRules(t, nil, []string{"Read(./secret/**)"}, nil)
	if v, rule := r.decide(modePlan, "read_file", false, map[string]any{"file_path": testCwd + "/secret/k"}, testCwd, testHome); v != verdictAsk || rule != "Read(./secret/**)" {
		t.Errorf("plan, asked read: %s %q", v, rule)
	}
}

func TestPermissionDenialText(t *testing.T) {
	for _, tc := range []struct{ tool, mode, rule, want string }{
		{"run_shell_command", modeYolo, "Bash(rm *)", `tool "run_shell_command" denied by permission rule "Bash(rm *)"`},
		{"edit", modePlan, "", `tool "edit" is not allowed in plan mode: only read-only tools run`},
		{"edit", "fast", "", `tool "edit" denied: unknown approval mode "fast"`},
	} {
		if got := permissionDenialText(tc.tool, tc.mode, tc.rule); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestMissingArgumentsFailClosed(t *testing.T) {
	r := mustRules(t, []string{"Bash(ls)", "Read(./**)"}, nil, []string{"Bash(rm *)", "Edit(./locked/**)"})
	for _, tc := range []struct {
		tool string
		args map[string]any
		mode string
		want verdict
	}{
		{"run_shell_command", map[string]any{}, modeYolo, verdictDeny},
		{"run_shell_command", map[string]any{"command": 7}, modeYolo, verdictDeny},
		{"write_file", map[string]any{}, modeYolo, verdictDeny},
		{"write_file", map[string]any{"file_path": "relative/x"}, modeYolo, verdictDeny},
		{"read_file", map[string]any{}, modePlan, verdictAllow}, // the mode default, not the allow rule
	} {
		v, rule := r.decide(tc.mode, tc.tool, false, tc.args, testCwd, testHome)
		if v != tc.want {
			t.Errorf("%s %v: %s %q, want %s", tc.tool, tc.args, v, rule, tc.want)
		}
		if tc.want == verdictAllow && rule != "" {
			t.Errorf("%s %v: allowed by rule %q without a path", tc.tool, tc.args, rule)
		}
	}
}

func TestPathAnchors(t *testing.T) {
	for _, tc := range []struct {
		spec, file string
		want       bool
	}{
		{"//etc/passwd", "/etc/passwd", true},
		{"//etc/**", "/etc/ssh/sshd_config", true},
		{"//etc/*", "/etc/ssh/sshd_config", false},
		{"~/.ssh/**", testHome + "/.ssh/id_ed25519", true},
		{"~/.ssh/**", testCwd + "/.ssh/id_ed25519", false},
		{"/src/**/*.ts", testCwd + "/src/a/b/c.ts", true},
		{"/src/**/*.ts", testCwd + "/src/c.ts", true},
		{"/src/**/*.ts", "/src/c.ts", false}, // "/path" is the project root, not the file system root
		{"./secrets/**", testCwd + "/secrets/k", true},
		{"./secrets/**", testCwd + "/other/secrets/k", false},
		{"secrets/**", testCwd + "/secrets/a/b", true},
		{"*.env", testCwd + "/.env", true},
		{"*.env", testCwd + "/sub/.env", false},
		{"**/*.env", testCwd + "/sub/prod.env", true},
		{"**/*.{env,pem}", testCwd + "/a/key.pem", true},
		{"**/*.{env,pem}", testCwd + "/a/key.pub", false},
		{"./a/../b/*", testCwd + "/b/x", true},
	} {
		r := mustRules(t, nil, nil, []string{"Read(" + tc.spec + ")"})
		v, _ := r.decide(modeYolo, "read_file", false, map[string]any{"file_path": tc.file}, testCwd, testHome)
		if got := v == verdictDeny; got != tc.want {
			t.Errorf("Read(%s) on %s: %v, want %v", tc.spec, tc.file, got, tc.want)
		}
	}
	// Without a home directory a "~/" rule cannot be anchored: deny and ask
	// rules then match, allow rules do not.
	r := mustRules(t, []string{"Edit(~/drafts/**)"}, nil, []string{"Read(~/.ssh/**)"})
	if v, _ := r.decide(modeDefault, "read_file", false, map[string]any{"file_path": "/x"}, testCwd, ""); v != verdictDeny {
		t.Errorf("unanchored ~ deny rule: %s", v)
	}
	if v, _ := r.decide(modeDefault, "edit", false, map[string]any{"file_path": "/x/drafts/a"}, testCwd, ""); v != verdictAsk {
		t.Errorf("unanchored ~ allow rule: %s", v)
	}
}

// Directory tools read a whole tree: a deny rule on anything inside it
// denies them; an allow rule must cover all of it.
func TestPathRulesOnDirectoryTools(t *testing.T) {
	deny := mustRules(t, nil, nil, []string{"Read(./secrets/**)"})
	allow := mustRules(t, []string{"Read(/src/**)"}, nil, nil)
	for _, tc := range []struct {
		tool      string
		args      map[string]any
		denied    bool
		allowed   bool
		allowRule bool
	}{
		{"grep_search", map[string]any{"pattern": "x"}, true, false, false}, // the cwd holds secrets/
		{"grep_search", map[string]any{"pattern": "x", "path": testCwd + "/secrets"}, true, false, false},
		{"grep_search", map[string]any{"pattern": "x", "path": testCwd + "/src"}, false, true, true},
		{"glob", map[string]any{"pattern": "*", "path": testCwd + "/src/a"}, false, true, true},
		{"glob", map[string]any{"pattern": "*", "path": testCwd}, true, false, false},
		{"list_directory", map[string]any{"path": testCwd + "/secrets/deep"}, true, false, false},
		{"list_directory", map[string]any{"path": testCwd + "/docs"}, false, false, false},
	} {
		v, _ := deny.decide(modeYolo, tc.tool, false, tc.args, testCwd, testHome)
		if (v == verdictDeny) != tc.denied {
			t.Errorf("deny rule, %s %v: %s", tc.tool, tc.args, v)
		}
		v, rule := allow.decide(modePlan, tc.tool, false, tc.args, testCwd, testHome)
		if v != verdictAllow || (rule != "") != tc.allowRule {
			t.Errorf("allow rule, %s %v: %s %q, want rule %v", tc.tool, tc.args, v, rule, tc.allowRule)
		}
	}
	edits := mustRules(t, []string{"Edit(/src/**)"}, nil, nil)
	for file, want := range map[string]verdict{testCwd + "/src/a.go": verdictAllow, testCwd + "/main.go": verdictAsk} {
		if v, _ := edits.decide(modeDefault, "write_file", false, map[string]any{"file_path": file, "content": ""}, testCwd, testHome); v != want {
			t.Errorf("Edit(/src/**) on %s: %s, want %s", file, v, want)
		}
	}
}

// A symlink in the workspace neither escapes a deny rule nor borrows an
// allow rule; a symlinked cwd keeps its rules.
func TestPathRulesFollowSymlinks(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	for _, d := range []string{"secrets", "public", "src"} {
		if err := os.MkdirAll(filepath.Join(real, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cwd := filepath.Join(root, "cwd") // the session cwd is itself a link
	for link, target := range map[string]string{
		cwd:                                  real,
		filepath.Join(real, "link"):          "secrets",
		filepath.Join(real, "public", "key"): "../secrets/key",
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRules(t, []string{"Edit(./public/**)", "Edit(/src/**)"}, nil, []string{"Read(./secrets/**)"})
	for _, tc := range []struct {
		tool, file string
		want       verdict
	}{
		{"read_file", cwd + "/secrets/key", verdictDeny},
		{"read_file", cwd + "/link/key", verdictDeny},
		{"read_file", cwd + "/link/new/deeper", verdictDeny},
		{"read_file", cwd + "/public/key", verdictDeny},
		{"read_file", cwd + "/public/other", verdictAllow},
		{"write_file", cwd + "/public/key", verdictAsk},
		{"write_file", cwd + "/public/new.txt", verdictAllow},
		{"write_file", cwd + "/src/a/b.go", verdictAllow},
	} {
		if v, rule := r.decide(modeDefault, tc.tool, false, map[string]any{"file_path": tc.file}, cwd, testHome); v != tc.want {
			t.Errorf("%s %s: %s %q, want %s", tc.tool, tc.file, v, rule, tc.want)
		}
	}
	if v, _ := r.decide(modeYolo, "grep_search", false, map[string]any{"path": cwd + "/link"}, cwd, testHome); v != verdictDeny {
		t.Errorf("grep through a link to secrets: %s", v)
	}
}

// A deep path from the model against a rule with many "**" stays cheap.
func BenchmarkDecidePathDeep(b *testing.B) {
	r := mustRules(b, []string{"Read(**/a/**/b/**/c/**/d/**/*.go)"}, nil, []string{"Read(**/x/**/y/**/z/**)"})
	deep := testCwd + strings.Repeat("/a", 1500)
	args := map[string]any{"file_path": deep}
	b.ReportAllocs()
	for b.Loop() {
		r.decide(modeDefault, "read_file", false, args, testCwd, testHome)
	}
}

// Hooks.

// TestRulesUnderASymlinkedCwd: normalization hands the rules resolved paths.
// With the session cwd reached through a symlink, a rule anchored at the cwd
// as written still allows, and a deny written for the real location still
// denies.
func TestRulesUnderASymlinkedCwd(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(real, "src", "a.go"), "package a")
	mustWrite(t, filepath.Join(real, "secrets", "key"), "k")
	link := filepath.Join(t.TempDir(), "ws-link")
	mustSymlink(t, real, link)
	for _, tc := range []struct {
		allow, deny []string
		file        string
		want        verdict
	}{
		{[]string{"Edit(./src/**)"}, nil, "src/a.go", verdictAllow},
		{[]string{"Edit(/src/**)"}, nil, "src/a.go", verdictAllow},
		{[]string{"Edit"}, []string{"Edit(//" + strings.TrimPrefix(real, "/") + "/secrets/**)"}, "secrets/key", verdictDeny},
		{[]string{"Edit"}, []string{"Edit(./secrets/**)"}, "secrets/key", verdictDeny},
	} {
		p, err := resolveWorkspacePath(link, tc.file)
		if err != nil {
			t.Fatal(err)
		}
		r := mustRules(t, tc.allow, nil, tc.deny)
		if v, _ := r.decide(modeDefault, "edit", false, map[string]any{"file_path": p}, link, testHome); v != tc.want {
			t.Errorf("allow %q deny %q, edit %s under cwd %s: %s, want %s", tc.allow, tc.deny, p, link, v, tc.want)
		}
	}
}
