// perms_shell_test.go checks Bash(...) rules: command patterns and the
// splitting of compound commands.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

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
		command   string
		parts     []string
		allowable bool
	}{
		{"git status && rm -rf /", []string{"git status", "rm -rf /"}, true},
		{"a || b; c | d |& e & f\ng", []string{"a", "b", "c", "d", "e", "f", "g"}, true},
		{`echo 'a && b' "c; d"`, []string{`echo 'a && b' 'c; d'`}, true},
		{`echo a\;b`, []string{`echo a;b`}, true},
		{"make 2>&1 >&2 >/dev/null 2>> /dev/null >&-", []string{"make"}, true},
		{"make &>log", []string{"make"}, false},
		{"echo x > ~/.bashrc", []string{"echo x"}, false},
		{"echo x >>out", []string{"echo x"}, false},
		{"echo x >&out", []string{"echo x"}, false},
		{`echo "a (b) > c" 'd > e'`, []string{`echo 'a (b) > c' 'd > e'`}, true},
		{`echo "$(cat "f")" x`, []string{"cat f", `echo '$(cat "f")' x`}, false},
		{"echo $(rm -rf /)", []string{"rm -rf /", "echo '$(rm -rf /)'"}, false},
		{`echo "x $(rm -rf /) y"`, []string{"rm -rf /", "echo 'x $(rm -rf /) y'"}, false},
		{"echo `rm -rf /`", []string{"rm -rf /", "echo '`rm -rf /`'"}, false},
		{"(cd x; rm y)", []string{"cd x", "rm y"}, true},
		{"diff <(ls a) >(ls b)", []string{"ls a", "ls b", "diff '<(ls a)' '>(ls b)'"}, false},
		{"{ rm x; }", []string{"rm x"}, true},
		{"cat <<EOF\nrm x\nEOF", []string{"cat"}, false},
		{"echo $'a\\'b'", []string{"echo a'b"}, true},
		{`echo "unterminated`, nil, false},
		{`echo x\`, []string{`echo x\`}, true},
		{"/bin/rm -rf x", []string{"rm -rf x"}, true},
		{"sudo rm x", []string{"sudo rm x"}, true},
		{"  ", nil, true},
	} {
		parts, _ := splitShellCommand(tc.command)
		v := viewShellCommand(tc.command)
		allowable := !v.complex && !slices.ContainsFunc(v.allow, func(f []string) bool { return f == nil })
		if strings.Join(parts, "\x00") != strings.Join(tc.parts, "\x00") || allowable != tc.allowable {
			t.Errorf("%q: %q allowable=%v, want %q allowable=%v", tc.command, parts, allowable, tc.parts, tc.allowable)
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
		{"(git status)", verdictAllow, "Bash(git *)"},
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

func BenchmarkDecideShell(b *testing.B) {
	r := mustRules(b, []string{"Bash(git *)", "Bash(npm run *)"}, []string{"Bash(npm publish)"}, []string{"Bash(rm *)", "Bash(curl *)"})
	args := map[string]any{"command": "git status && git diff --stat | head -n 20; npm run test"}
	b.ReportAllocs()
	for b.Loop() {
		r.decide(modeDefault, "run_shell_command", false, args, testCwd, testHome)
	}
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

// The spellings of issue #17 that ran past a deny rule: each is one
// simple command bash runs as touch.
var touchBypasses = []string{
	"echo hi #'\ntouch F1\n#'",
	"{touch,F2}",
	"'touch' F3",
	`\touch F4`,
	"t''ouch F5",
	"command touch F6",
	"exec touch F7",
	"env touch F8",
	"X=1 {touch,F9}",
}

func TestShellDenySeesThroughSpellings(t *testing.T) {
	r := mustRules(t, []string{"Bash(echo *)"}, nil, []string{"Bash(touch *)"})
	extra := []string{"/usr/bin/touch x", "sudo -u root touch x", "nice -n 5 touch x", "nohup touch x", "timeout 5 touch x",
		"xargs touch", "doas touch x", "stdbuf -oL touch x", "time touch x", "su -c 'touch x'", "find . -exec touch {} ;",
		"bash -c 'touch x'", "sh -c \"echo a; touch x\"", "echo $(touch x)", "echo ok && (cd /; touch x)", "if true; then touch x; fi"}
	for _, cmd := range append(slices.Clone(touchBypasses), extra...) {
		for _, mode := range []string{modeYolo, modeDefault} {
			if v, rule := r.decide(mode, "run_shell_command", false, map[string]any{"command": cmd}, testCwd, testHome); v != verdictDeny || rule != "Bash(touch *)" {
				t.Errorf("%s %q: %s %q, want deny by Bash(touch *)", mode, cmd, v, rule)
			}
		}
	}
	// The comment trick no longer passes as one echo allowed by Bash(echo *).
	allowOnly := mustRules(t, []string{"Bash(echo *)"}, nil, nil)
	for _, tc := range []struct {
		cmd  string
		want verdict
	}{
		{"echo hi #'\ntouch X\n#'", verdictAsk},
		{"echo hi # a comment", verdictAllow},
		{"echo $(touch x)", verdictAsk},
		{"sudo echo x", verdictAsk}, // the wrapper itself is not allowed
		{"eval echo x", verdictAsk},
	} {
		if v, _ := allowOnly.decide(modeDefault, "run_shell_command", false, map[string]any{"command": tc.cmd}, testCwd, testHome); v != tc.want {
			t.Errorf("default %q: %s, want %s", tc.cmd, v, tc.want)
		}
	}
	// A complex command asks in the modes that ask, runs in yolo, is
	// refused in plan.
	for mode, want := range map[string]verdict{modeDefault: verdictAsk, modeAutoEdit: verdictAsk, modeYolo: verdictAllow, modePlan: verdictDeny} {
		if v, _ := allowOnly.decide(mode, "run_shell_command", false, map[string]any{"command": "echo `date`"}, testCwd, testHome); v != want {
			t.Errorf("%s, complex command: %s, want %s", mode, v, want)
		}
	}
}

// The same spellings through the real agent in yolo mode: none creates
// its file, and a command no rule denies still runs.
func TestACPShellDenyInYolo(t *testing.T) {
	var log prepareLog
	var perms atomic.Int32
	c := startManagedWith(t, permissionParent(&log, &perms, selected(optionProceedOnce)), "--settings",
		writeSettings(t, `{"tools":{"approvalMode":"yolo"},"permissions":{"deny":["Bash(touch *)"]}}`))
	work := t.TempDir()
	sid := c.newSession(work)
	var prompt, want strings.Builder
	for _, cmd := range append(slices.Clone(touchBypasses), "echo ok > control.txt") {
		b, _ := json.Marshal(map[string]string{"command": cmd})
		fmt.Fprintf(&prompt, "call run_shell_command %s\n", b)
	}
	c.prompt(sid, strings.TrimSuffix(prompt.String(), "\n"), "p1")
	for i := range touchBypasses {
		if f := fmt.Sprintf("F%d", i+1); fileExists(filepath.Join(work, f)) {
			t.Errorf("%q created %s", touchBypasses[i], f)
		}
		want.WriteString("run_shell_command: denied\n")
	}
	if !fileExists(filepath.Join(work, "control.txt")) {
		t.Error("the command no rule denies did not run")
	}
	want.WriteString("run_shell_command: completed\n")
	if got := agentText(c.sessionUpdates(sid)); got != want.String() {
		t.Errorf("model answer = %q, want %q", got, want.String())
	}
	if perms.Load() != 0 {
		t.Error("the user was asked in yolo mode")
	}
}

// A command the parser stopped reading (a syntax error, or past its bounds)
// meets every deny rule with a command pattern, in yolo as in every mode:
// what was not read may be the denied command.
func TestShellUnreadCommandMeetsDenyRules(t *testing.T) {
	r := mustRules(t, nil, nil, []string{"Bash(touch *)"})
	hidden := strings.Repeat("true; ", maxShellCommands+1) + "touch x"
	for _, cmd := range []string{hidden, "echo 'unterminated\ntouch x"} {
		if v, rule := r.decide(modeYolo, "run_shell_command", false, map[string]any{"command": cmd}, testCwd, testHome); v != verdictDeny || rule != "Bash(touch *)" {
			t.Errorf("yolo %.30q...: %s %q, want deny by Bash(touch *)", cmd, v, rule)
		}
	}
	if v, _ := r.decide(modeYolo, "run_shell_command", false, map[string]any{"command": "echo ok"}, testCwd, testHome); v != verdictAllow {
		t.Errorf("yolo echo ok: %s, want allow", v)
	}
}

// TestShellNetworkRedirectionAsks: a command that opens a socket by a
// redirection, or may, is allowed by no rule and no mode: it asks (plan
// refuses it, a deny rule still denies), and where nobody can answer it
// does not run.
func TestShellNetworkRedirectionAsks(t *testing.T) {
	r := mustRules(t, []string{"Bash(cat *)", "Bash(exec *)", "Bash(echo *)"}, nil, []string{"Bash(echo no *)"})
	commands := []string{
		"cat secret.txt </dev/tcp/127.0.0.1/9 >&0", "cat f 0</dev/tcp/127.0.0.1/9 1>&0", "exec 3<>/dev/udp/127.0.0.1/53",
		"echo x >/dev/tcp/127.0.0.1/9", "echo x &>/dev/tcp/127.0.0.1/9", "{ cat f; } </dev/tcp/127.0.0.1/9 >&0",
		"sh -c 'cat f </dev/tcp/127.0.0.1/9 >&0'", "cat f <$T >&0",
	}
	for _, cmd := range commands {
		for mode, want := range map[string]verdict{modeYolo: verdictAsk, modeAutoEdit: verdictAsk, modeDefault: verdictAsk, modePlan: verdictDeny} {
			if v, rule := r.decide(mode, toolShell, false, map[string]any{"command": cmd}, testCwd, testHome); v != want || rule != "" {
				t.Errorf("%s %q: %s %q, want %s", mode, cmd, v, rule, want)
			}
		}
	}
	if v, rule := r.decide(modeYolo, toolShell, false, map[string]any{"command": "echo no >/dev/tcp/127.0.0.1/9"}, testCwd, testHome); v != verdictDeny || rule != "Bash(echo no *)" {
		t.Errorf("a denied network command: %s %q, want deny", v, rule)
	}
	// A command not read whole may hide one.
	if v, _ := mustRules(t, []string{"Bash(echo *)"}, nil, nil).decide(modeYolo, toolShell, false, map[string]any{"command": "echo 'unterminated"}, testCwd, testHome); v != verdictAsk {
		t.Errorf("yolo, a command not read whole: %s, want ask", v)
	}
	for _, cmd := range []string{"cat f </dev/null", "cat f <//dev/tcp/127.0.0.1/9", "echo x 2>&1"} {
		if v, _ := r.decide(modeDefault, toolShell, false, map[string]any{"command": cmd}, testCwd, testHome); v != verdictAllow {
			t.Errorf("default %q: %s, want allow", cmd, v)
		}
	}
	// Nobody to ask: the call is declined as the user's reject.
	s := mustParse(t, `{"tools":{"approvalMode":"yolo"},"permissions":{"allow":["Bash(cat *)"]}}`)
	env := &toolEnv{Cwd: t.TempDir(), Policy: &callPolicy{Settings: s, Mode: modeYolo}}
	spec, _ := builtinTool(toolShell)
	res, ok := env.Policy.check(context.Background(), env, toolCall{ID: "c", Name: toolShell}, spec, map[string]any{"command": commands[0]})
	if ok || res.Output != canceledByUserText(toolShell) || res.ErrorType != errTypeExecutionDenied {
		t.Errorf("no one to ask: ok=%v %+v, want declined", ok, res)
	}
}

// TestACPNetworkRedirectionNeverSent: in yolo, with an allow rule for cat,
// the settings layer asks before a file is sent to a loopback socket by a
// redirection; a reject ends it there, and an allow meets the shipped
// policy's deny at the provider. The listener receives nothing.
func TestACPNetworkRedirectionNeverSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	settings := writeSettings(t, `{"tools":{"approvalMode":"yolo"},"permissions":{"allow":["Bash(cat *)"]}}`)
	for _, tt := range []struct {
		answer any
		text   string
	}{
		{selected(optionCancel), canceledByUserText(toolShell)},
		{selected(optionProceedOnce), examplePolicyNetworkReason},
	} {
		var perms atomic.Int32
		c := startACP(t, func(method string, _ json.RawMessage) (any, *rpcError) {
			if method == methodRequestPermission {
				perms.Add(1)
				return tt.answer, nil
			}
			return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
		}, []string{"--settings", settings, "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url},
			envGuardToken+"="+providerTestToken)
		c.mustCall(methodInitialize, initializeParams(""), nil)
		work := t.TempDir()
		mustWrite(t, filepath.Join(work, "secret.txt"), "s3cret")
		sid := c.newSession(work)
		b, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("cat secret.txt </dev/tcp/127.0.0.1/%d >&0", port)})
		c.prompt(sid, "call run_shell_command "+string(b), "")
		ups := c.sessionUpdates(sid)
		if _, text, _ := callOutcome(ups, firstToolCall(t, ups).ToolCallID); text != tt.text || perms.Load() != 1 {
			t.Errorf("answer %v: text %q after %d questions, want %q after 1", tt.answer, text, perms.Load(), tt.text)
		}
	}
	// Connections are accepted in the order they were made: the first one
	// is this probe's unless the command connected before it.
	probe, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if first.RemoteAddr().String() != probe.LocalAddr().String() {
		t.Errorf("the denied command connected from %s", first.RemoteAddr())
	}
}
