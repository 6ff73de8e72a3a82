package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	testCwd  = "/work/proj"
	testHome = "/home/alice"
)

func mustRules(t testing.TB, allow, ask, deny []string) *permissionRules {
	t.Helper()
	r, err := parsePermissionRules(allow, ask, deny)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

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
		{"run_shell_command", modeYolo, "Bash(rm *)", `Tool "run_shell_command" denied by permission rule "Bash(rm *)"`},
		{"edit", modePlan, "", `Tool "edit" is not allowed in plan mode: only read-only tools run`},
		{"edit", "fast", "", `Tool "edit" denied: unknown approval mode "fast"`},
	} {
		if got := permissionDenialText(tc.tool, tc.mode, tc.rule); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestShellCommandPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern, command string
		want             bool
	}{
		{"*", "anything at all", true},
		{"git *", "git", true},
		{"git *", "git status", true},
		{"git *", "gitk", false},
		{"git*", "gitk", true},
		{"git commit", "git commit", true},
		{"git commit", "git commit -m x", true},
		{"git commit", "git commitx", false},
		{"git commit", "git", false},
		{"git:*", "git log", true},
		{"npm run *", "npm run test", true},
		{"npm run *", "npm install", false},
		{"* --version", "go --version", true},
		{"* --version", "go --version x", false},
		{"rm *", "rm\t-rf   x", true},
		{"ls", "ls\n", true},
	} {
		re, err := compileCommandPattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		parts, _ := splitShellCommand(tc.command)
		got := len(parts) == 1 && re.MatchString(parts[0])
		if got != tc.want {
			t.Errorf("pattern %q, command %q: %v, want %v", tc.pattern, tc.command, got, tc.want)
		}
	}
}

func TestSplitShellCommand(t *testing.T) {
	for _, tc := range []struct {
		command string
		parts   []string
		complex bool
	}{
		{"git status && rm -rf /", []string{"git status", "rm -rf /"}, false},
		{"a || b; c | d |& e & f\ng", []string{"a", "b", "c", "d", "e", "f", "g"}, false},
		{`echo 'a && b' "c; d"`, []string{`echo 'a && b' "c; d"`}, false},
		{`echo a\;b`, []string{`echo a\;b`}, false},
		{"make 2>&1 >&2 >/dev/null 2>> /dev/null >&-", []string{"make 2>&1 >&2 >/dev/null 2>> /dev/null >&-"}, false},
		{"make &>log", []string{"make &>log"}, true},
		{"echo x > ~/.bashrc", []string{"echo x > ~/.bashrc"}, true},
		{"echo x >>out", []string{"echo x >>out"}, true},
		{"echo x >&out", []string{"echo x >&out"}, true},
		{`echo "a (b) > c" 'd > e'`, []string{`echo "a (b) > c" 'd > e'`}, false},
		{`echo "$(cat "f")" x`, []string{`echo "`, `cat "f"`, `" x`}, true},
		{"echo $(rm -rf /)", []string{"echo", "rm -rf /"}, true},
		{`echo "x $(rm -rf /) y"`, []string{`echo "x`, "rm -rf /", `y"`}, true},
		{"echo `rm -rf /`", []string{"echo", "rm -rf /"}, true},
		{"(cd x; rm y)", []string{"cd x", "rm y"}, true},
		{"diff <(ls a) >(ls b)", []string{"diff", "ls a", "ls b"}, true},
		{"{ rm x; }", []string{"{ rm x", "}"}, true},
		{"cat <<EOF\nrm x\nEOF", []string{"cat <<EOF", "rm x", "EOF"}, true},
		{"echo $'a\\'b'", []string{`echo $'a\'b'`}, true},
		{`echo "unterminated`, []string{`echo "unterminated`}, true},
		{`echo x\`, []string{`echo x\`}, true},
		{"  ", nil, false},
	} {
		parts, complex := splitShellCommand(tc.command)
		if strings.Join(parts, "\x00") != strings.Join(tc.parts, "\x00") || complex != tc.complex {
			t.Errorf("%q: %q complex=%v, want %q complex=%v", tc.command, parts, complex, tc.parts, tc.complex)
		}
	}
}

// The example that matters: `git status && rm -rf /` is not `git *`.
func TestCompoundShellCommands(t *testing.T) {
	r := mustRules(t, []string{"Bash(git *)", "Bash(ls)"}, []string{"Bash(npm publish)"}, []string{"Bash(rm *)"})
	for _, tc := range []struct {
		command string
		want    verdict
		rule    string
	}{
		{"git status", verdictAllow, "Bash(git *)"},
		{"git status && git log", verdictAllow, "Bash(git *)"},
		{"git status | ls", verdictAllow, "Bash(git *), Bash(ls)"},
		{"git status && curl x | sh", verdictAsk, ""}, // not every part is allowed: the default asks
		{"git status && rm -rf /", verdictDeny, "Bash(rm *)"},
		{"git status; rm -rf /", verdictDeny, "Bash(rm *)"},
		{"git status & rm -rf /", verdictDeny, "Bash(rm *)"},
		{"git status\nrm -rf /", verdictDeny, "Bash(rm *)"},
		{"git log $(rm -rf /)", verdictDeny, "Bash(rm *)"},
		{"git log `rm -rf /`", verdictDeny, "Bash(rm *)"},
		{`git log "$(rm -rf /)"`, verdictDeny, "Bash(rm *)"},
		{"FOO=1 BAR='a b' rm -rf /", verdictDeny, "Bash(rm *)"},
		{"git log $(date)", verdictAsk, ""}, // too complex to allow
		{"(git status)", verdictAsk, ""},
		{`git commit -m "a && rm b"`, verdictAllow, "Bash(git *)"},
		{"git status && npm publish", verdictAsk, "Bash(npm publish)"}, // any asked part asks
		{"ls", verdictAllow, "Bash(ls)"},
		{"git log > /etc/motd", verdictAsk, ""}, // writes a file
		{"git log 2>/dev/null", verdictAllow, "Bash(git *)"},
	} {
		v, rule := r.decide(modeDefault, "run_shell_command", false, map[string]any{"command": tc.command}, testCwd, testHome)
		if v != tc.want || rule != tc.rule {
			t.Errorf("%q: %s %q, want %s %q", tc.command, v, rule, tc.want, tc.rule)
		}
	}
	// In yolo, a command that is not fully allowed still runs unless denied.
	if v, _ := r.decide(modeYolo, "run_shell_command", false, map[string]any{"command": "git status && echo $(rm -rf /)"}, testCwd, testHome); v != verdictDeny {
		t.Errorf("yolo with a denied substitution: %s", v)
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
	r := mustRules(t, []string{"Edit(~/notes/**)"}, nil, []string{"Read(~/.ssh/**)"})
	if v, _ := r.decide(modeDefault, "read_file", false, map[string]any{"file_path": "/x"}, testCwd, ""); v != verdictDeny {
		t.Errorf("unanchored ~ deny rule: %s", v)
	}
	if v, _ := r.decide(modeDefault, "edit", false, map[string]any{"file_path": "/x/notes/a"}, testCwd, ""); v != verdictAsk {
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

func TestGlobSegmentsModes(t *testing.T) {
	seg := func(p string) []string { return pathSegments(p) }
	for _, tc := range []struct {
		pat, name      string
		full, any, all bool
	}{
		{"/a/**", "/a", true, true, true},
		{"/a/**", "/a/b/c", true, true, true},
		{"/a/*", "/a", false, true, false},
		{"/a/*", "/a/b", true, true, false},
		{"/a/**/x", "/a", false, true, false},
		{"/**/x/**", "/q/x", true, true, true},
		{"/b/**", "/a", false, false, false},
		{"/**", "/", true, true, true},
	} {
		if got := globSegments(seg(tc.pat), seg(tc.name), globFull); got != tc.full {
			t.Errorf("full %s %s: %v", tc.pat, tc.name, got)
		}
		if got := globSegments(seg(tc.pat), seg(tc.name), globAnyBelow); got != tc.any {
			t.Errorf("any %s %s: %v", tc.pat, tc.name, got)
		}
		if got := globSegments(seg(tc.pat), seg(tc.name), globAllBelow); got != tc.all {
			t.Errorf("all %s %s: %v", tc.pat, tc.name, got)
		}
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

func BenchmarkDecideShell(b *testing.B) {
	r := mustRules(b, []string{"Bash(git *)", "Bash(npm run *)"}, []string{"Bash(npm publish)"}, []string{"Bash(rm *)", "Bash(curl *)"})
	args := map[string]any{"command": "git status && git diff --stat | head -n 20; npm run test"}
	b.ReportAllocs()
	for b.Loop() {
		r.decide(modeDefault, "run_shell_command", false, args, testCwd, testHome)
	}
}

// Hooks.

// hookScript writes an executable bash script into dir and returns a
// hook entry that runs it.
func hookScript(t *testing.T, dir, name, body string) hookCommand {
	t.Helper()
	p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
	if err := os.WriteFile(p, []byte("#!/bin/bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return hookCommand{Type: "command", Command: p}
}

func hookEntries(t *testing.T, matcher string, hooks ...hookCommand) []hookMatcher {
	t.Helper()
	m := hookMatcher{Matcher: matcher, Hooks: hooks}
	if err := m.compile(); err != nil {
		t.Fatal(err)
	}
	return []hookMatcher{m}
}

func testHookInput(dir string) hookInput {
	return hookInput{
		SessionID: "sess-1", Cwd: dir, PermissionMode: modeAutoEdit,
		ToolName: "run_shell_command", ToolInput: map[string]any{"command": "ls -la"}, ToolUseID: "call-1",
	}
}

var testHookEnv = spawnEnv{Env: newProcEnv([]string{"PATH=/usr/bin:/bin", "HOOK_TEST=1"})}

func TestPreToolUseHookAnswers(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		body     string
		failOpen bool
		want     hookDecision
		reason   string
	}{
		{"silent exit 0", "exit 0", false, hookNone, ""},
		{"whitespace only", "echo; echo '  '", false, hookNone, ""},
		{"allow", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine"}}'`, false, hookAllow, "fine"},
		{"ask", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"check this"}}'`, false, hookAsk, "check this"},
		{"deny", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no shell on Fridays"}}'`, false,
			hookDeny, `PreToolUse hook HOOK denied the call: no shell on Fridays`},
		{"deny without reason", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"}}'`, false,
			hookDeny, `PreToolUse hook HOOK denied the call: no reason given`},
		{"legacy block decision", `echo '{"decision":"block","reason":"legacy"}'`, false,
			hookDeny, `PreToolUse hook HOOK denied the call: legacy`},
		{"legacy approve decision", `echo '{"decision":"approve","systemMessage":"hi","suppressOutput":true}'`, false, hookAllow, ""},
		{"continue false stops", `echo '{"continue":false,"stopReason":"halt"}'`, false,
			hookDeny, `PreToolUse hook HOOK denied the call: halt`},
		{"without hookEventName", `echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}'`, false, hookDeny, `PreToolUse hook HOOK denied the call: no`},
		{"allow without hookEventName", `echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'`, false, hookAllow, ""},
		{"additional context", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","additionalContext":"fyi"}}'`, false, hookAllow, ""},
		{"specific output wins over decision", `echo '{"decision":"deny","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`, false, hookAllow, ""},
		{"exit 2 blocks with stderr", "echo 'rm is not allowed here' >&2; echo ignored; exit 2", false,
			hookDeny, `PreToolUse hook HOOK denied the call: rm is not allowed here`},
		{"exit 2 blocks even when failOpen", "exit 2", true,
			hookDeny, `PreToolUse hook HOOK denied the call: no reason given`},
		{"crash exit 1", "echo boom >&2; exit 1", false,
			hookDeny, `PreToolUse hook HOOK failed with exit status 1 (the call is blocked: the hook fails closed)`},
		{"crash by signal", "kill -SEGV $$", false,
			hookDeny, `PreToolUse hook HOOK crashed: signal: segmentation fault (the call is blocked: the hook fails closed)`},
		{"invalid JSON", "echo 'not json'", false,
			hookDeny, `PreToolUse hook HOOK printed an invalid answer: invalid character 'o' in literal null (expecting 'u') (the call is blocked: the hook fails closed)`},
		{"unknown key", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{}}}'`, false,
			hookDeny, `PreToolUse hook HOOK printed an invalid answer: hookSpecificOutput: json: unknown field "updatedInput" (the call is blocked: the hook fails closed)`},
		// encoding/json would match names ignoring case and let the last win.
		{"decision in another case", `echo '{"decision":"deny","Decision":"allow"}'`, false,
			hookDeny, `PreToolUse hook HOOK printed an invalid answer: unknown field "Decision" (the call is blocked: the hook fails closed)`},
		{"permissionDecision in another case", `echo '{"hookSpecificOutput":{"permissionDecision":"deny","PermissionDecision":"allow"}}'`, false,
			hookDeny, `PreToolUse hook HOOK printed an invalid answer: hookSpecificOutput: unknown field "PermissionDecision" (the call is blocked: the hook fails closed)`},
		{"wrong event", `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse"}}'`, false,
			hookDeny, `PreToolUse hook HOOK printed an invalid answer: hookEventName "PostToolUse" is not "PreToolUse" (the call is blocked: the hook fails closed)`},
		{"two values", `echo '{} {}'`, false,
			hookDeny, `PreToolUse hook HOOK printed an invalid answer: trailing data after JSON value (the call is blocked: the hook fails closed)`},
		{"endless output", "yes", false,
			hookDeny, `PreToolUse hook HOOK printed more than 65536 bytes (the call is blocked: the hook fails closed)`},
		{"crash with failOpen", "exit 1", true, hookNone, ""},
		{"invalid JSON with failOpen", "echo nope", true, hookNone, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hookScript(t, dir, tc.name, tc.body)
			h.FailOpen = tc.failOpen
			out := runPreToolUseHooks(context.Background(), hookEntries(t, "*", h), testHookInput(dir), testHookEnv)
			want := strings.ReplaceAll(tc.reason, "HOOK", strconv.Quote(h.Command))
			if out.Decision != tc.want || out.Reason != want {
				t.Errorf("got %s %q, want %s %q", out.Decision, out.Reason, tc.want, want)
			}
			if tc.failOpen && tc.want == hookNone && len(out.Ignored) != 1 {
				t.Errorf("failOpen failure not reported: %q", out.Ignored)
			}
		})
	}
}

// A hook that outlives its timeout is killed with its whole process group.
func TestPreToolUseHookTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	h := hookScript(t, dir, "slow", "sleep 60 & echo $! > "+pids+"; echo $$ >> "+pids+"; wait\n")
	h.Timeout = 300
	out := runPreToolUseHooks(context.Background(), hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	want := `PreToolUse hook "` + dir + `/slow" timed out after 300 ms (the call is blocked: the hook fails closed)`
	if out.Decision != hookDeny || out.Reason != want {
		t.Fatalf("got %s %q, want deny %q", out.Decision, out.Reason, want)
	}
	assertProcessesGone(t, pids)

	h.FailOpen = true
	out = runPreToolUseHooks(context.Background(), hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	if out.Decision != hookNone || len(out.Ignored) != 1 || !strings.Contains(out.Ignored[0], "timed out after 300 ms") {
		t.Fatalf("failOpen timeout: %+v", out)
	}
	assertProcessesGone(t, pids)
}

// Even a hook that exits at once leaves nothing running behind it.
func TestPreToolUseHookLeftoversKilled(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	h := hookScript(t, dir, "leaver", "sleep 60 >/dev/null 2>&1 & echo $! > "+pids+"\nexit 0\n")
	out := runPreToolUseHooks(context.Background(), hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	if out.Decision != hookNone {
		t.Fatalf("got %+v", out)
	}
	assertProcessesGone(t, pids)
}

func assertProcessesGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		// Killed processes of the group may stay zombies of init for a
		// moment; a signal 0 to a reaped pid fails with ESRCH.
		gone := false
		for range 200 {
			if err := syscall.Kill(pid, 0); err == syscall.ESRCH || processIsZombie(pid) {
				gone = true
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !gone {
			t.Errorf("process %d of the hook is still running", pid)
		}
	}
}

func processIsZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestPreToolUseHookCancelled(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	h := hookScript(t, dir, "slow", "echo $$ > "+pids+"; sleep 60\n")
	h.FailOpen = true // cancellation is never a failOpen pass
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(pids); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	out := runPreToolUseHooks(ctx, hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	if out.Decision != hookDeny || out.Reason != "PreToolUse hooks cancelled" {
		t.Fatalf("got %+v", out)
	}
	assertProcessesGone(t, pids)

	ran := filepath.Join(dir, "ran")
	h = hookScript(t, dir, "marker", "touch "+ran)
	out = runPreToolUseHooks(ctx, hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	if out.Decision != hookDeny {
		t.Fatalf("already cancelled: %+v", out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a hook started after cancellation")
	}
}

// The hook reads Qwen Code's input on stdin, runs in the session cwd and
// sees exactly the environment it was given.
func TestPreToolUseHookInputAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	h := hookScript(t, dir, "record", "cat > stdin.json; env > env.txt; pwd > pwd.txt\n")
	in := testHookInput(dir)
	in.HookEventName = "SomethingElse"
	in.ToolInput = nil
	if out := runPreToolUseHooks(context.Background(), hookEntries(t, "Bash", h), in, testHookEnv); out.Decision != hookNone {
		t.Fatalf("got %+v", out)
	}
	var got map[string]any
	data, err := os.ReadFile(filepath.Join(dir, "stdin.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"session_id": "sess-1", "cwd": dir, "hook_event_name": "PreToolUse", "permission_mode": "auto_edit",
		"tool_name": "run_shell_command", "tool_input": map[string]any{}, "tool_use_id": "call-1",
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("stdin %s, want %s", g, w)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		name, _, _ := strings.Cut(line, "=")
		switch name {
		case "PATH", "HOOK_TEST", "PWD", "SHLVL", "_", "OLDPWD":
		default:
			t.Errorf("hook saw variable %q it was not given", line)
		}
	}
	if !strings.Contains(string(env), "HOOK_TEST=1") {
		t.Error("hook did not get its environment")
	}
	pwd, _ := os.ReadFile(filepath.Join(dir, "pwd.txt"))
	if strings.TrimSpace(string(pwd)) != dir {
		t.Errorf("hook ran in %q, want %q", pwd, dir)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// One hook costs a bash start; measure it.
func BenchmarkPreToolUseHook(b *testing.B) {
	dir := b.TempDir()
	hooks := []hookMatcher{{Matcher: "Bash", Hooks: []hookCommand{{Type: "command",
		Command: `cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`}}}}
	in := testHookInput(dir)
	b.ReportAllocs()
	for b.Loop() {
		if out := runPreToolUseHooks(context.Background(), hooks, in, testHookEnv); out.Decision != hookAllow {
			b.Fatal(out)
		}
	}
}

func TestHookMatchers(t *testing.T) {
	for _, tc := range []struct {
		matcher string
		tool    string
		want    bool
	}{
		{"", "edit", true},
		{"*", "mcp__s__t", true},
		{".*", "edit", true},
		{"run_shell_command", "run_shell_command", true},
		{"Bash", "run_shell_command", true},
		{"Shell", "run_shell_command", true},
		{"Bash", "edit", false},
		{"Edit|Write", "write_file", true},
		{"Edit|Write", "edit", true},
		{"Edit | Write", "read_file", false},
		{"edit", "edit", true},
		{"read", "read_file", true}, // unanchored, as in Qwen Code
		{"^read$", "read_file", false},
		{"mcp__github__.*", "mcp__github__issues", true},
		{"mcp__github__.*", "mcp__gitlab__issues", false},
		{"|", "edit", false},
		{"grep|*", "edit", true},
		{"(edit|write_file)", "write_file", true},
	} {
		m := hookMatcher{Matcher: tc.matcher}
		if err := m.compile(); err != nil {
			t.Fatalf("%q: %v", tc.matcher, err)
		}
		got, err := m.matchesTool(tc.tool)
		if err != nil || got != tc.want {
			t.Errorf("matcher %q, tool %s: %v %v, want %v", tc.matcher, tc.tool, got, err, tc.want)
		}
	}
	m := hookMatcher{Matcher: "(?<=x)y"}
	if err := m.compile(); err == nil {
		t.Error("a matcher Go cannot compile was accepted")
	}
	// Built by hand without compile: it matches everything and denies.
	out := runPreToolUseHooks(context.Background(), []hookMatcher{{Matcher: "(", Hooks: []hookCommand{{Type: "command", Command: "true"}}}}, testHookInput(t.TempDir()), testHookEnv)
	if out.Decision != hookDeny || !strings.HasPrefix(out.Reason, `PreToolUse hook matcher "(": error parsing regexp`) {
		t.Errorf("uncompilable matcher: %+v", out)
	}
}

func TestSeveralHooks(t *testing.T) {
	dir := t.TempDir()
	answer := func(name, d string) hookCommand {
		return hookScript(t, dir, name, `touch `+name+`.ran; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"`+d+`","permissionDecisionReason":"`+name+`"}}'`)
	}
	none := hookScript(t, dir, "none", "touch none.ran")
	ran := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name+".ran"))
		os.Remove(filepath.Join(dir, name+".ran"))
		return err == nil
	}
	in := testHookInput(dir)
	ctx := context.Background()

	out := runPreToolUseHooks(ctx, []hookMatcher{
		hookEntries(t, "*", answer("allow1", "allow"), none)[0],
		hookEntries(t, "Bash", answer("ask1", "ask"))[0],
		hookEntries(t, "Edit", answer("deny0", "deny"))[0], // does not match
		hookEntries(t, "run_shell", answer("allow2", "allow"))[0],
	}, in, testHookEnv)
	if out.Decision != hookAsk || out.Reason != "ask1" {
		t.Errorf("ask over allow: %+v", out)
	}
	if !ran("allow1") || !ran("none") || !ran("ask1") || ran("deny0") || !ran("allow2") {
		t.Error("the wrong hooks ran")
	}

	out = runPreToolUseHooks(ctx, hookEntries(t, "*", answer("allow3", "allow"), answer("deny1", "deny"), answer("ask2", "ask")), in, testHookEnv)
	if out.Decision != hookDeny || !strings.HasSuffix(out.Reason, "denied the call: deny1") {
		t.Errorf("deny wins: %+v", out)
	}
	if !ran("allow3") || !ran("deny1") || ran("ask2") {
		t.Error("a hook after the deny ran")
	}

	out = runPreToolUseHooks(ctx, hookEntries(t, "*", none), in, testHookEnv)
	if out.Decision != hookNone {
		t.Errorf("no decision: %+v", out)
	}
	out = runPreToolUseHooks(ctx, nil, in, testHookEnv)
	if out.Decision != hookNone {
		t.Errorf("no hooks: %+v", out)
	}
}

func TestParseHookOutputReasonBounded(t *testing.T) {
	long := strings.Repeat("é", maxHookReasonBytes)
	d, reason, err := parseHookOutput([]byte(`{"decision":"deny","reason":"` + long + `"}`))
	if err != nil || d != hookDeny {
		t.Fatal(d, err)
	}
	if len(reason) > maxHookReasonBytes+len("...") || !strings.HasSuffix(reason, "...") || !utf8Valid(reason) {
		t.Errorf("reason not bounded: %d bytes", len(reason))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

func FuzzParseHookOutput(f *testing.F) {
	for _, s := range []string{
		"", "{}", `{"decision":"allow"}`, `{"continue":false}`,
		`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"x"}}`,
		`{"hookSpecificOutput":null}`, `[1]`, `{"decision":"deny"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, reason, err := parseHookOutput(data)
		if err != nil {
			if d != "" || reason != "" {
				t.Fatalf("an error with a decision %q %q", d, reason)
			}
			return
		}
		switch d {
		case hookNone, hookAllow, hookAsk, hookDeny:
		default:
			t.Fatalf("unknown decision %q", d)
		}
		if len(reason) > maxHookReasonBytes+len("...")+3 {
			t.Fatalf("reason of %d bytes", len(reason))
		}
	})
}

func FuzzDecideShell(f *testing.F) {
	for _, s := range []string{"git status && rm -rf /", "echo $(rm x)", "a|b", `"'`, "rm\t-rf", "(rm)"} {
		f.Add(s)
	}
	r := mustRules(f, []string{"Bash(git *)", "Bash(echo *)"}, nil, []string{"Bash(rm *)"})
	f.Fuzz(func(t *testing.T, command string) {
		v, _ := r.decide(modeYolo, "run_shell_command", false, map[string]any{"command": command}, testCwd, testHome)
		parts, _ := splitShellCommand(command)
		if v == verdictAllow {
			for _, p := range parts {
				if strings.HasPrefix(p, "rm ") || p == "rm" {
					t.Fatalf("%q allowed with part %q", command, p)
				}
			}
		}
	})
}

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
