// hooks_test.go checks PreToolUse hooks: matchers, answers, timeouts and the
// end of every hook's process group.
package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
	h.Timeout = 2000 // long enough for the hook to write its pids on a busy machine
	out := runPreToolUseHooks(context.Background(), hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	want := `PreToolUse hook "` + dir + `/slow" timed out after 2000 ms (the call is blocked: the hook fails closed)`
	if out.Decision != hookDeny || out.Reason != want {
		t.Fatalf("got %s %q, want deny %q", out.Decision, out.Reason, want)
	}
	assertProcessesGone(t, pids)

	h.FailOpen = true
	out = runPreToolUseHooks(context.Background(), hookEntries(t, "", h), testHookInput(dir), testHookEnv)
	if out.Decision != hookNone || len(out.Ignored) != 1 || !strings.Contains(out.Ignored[0], "timed out after 2000 ms") {
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
		for range 3000 {
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
	if ts, _ := got["timestamp"].(string); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(ts) {
		t.Errorf("timestamp %q, want JavaScript's toISOString form", ts)
	}
	delete(got, "timestamp")
	want := map[string]any{
		"session_id": "sess-1", "transcript_path": "", "cwd": dir, "hook_event_name": "PreToolUse", "permission_mode": "auto_edit",
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
		case "QWEN_PROJECT_DIR", "CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR":
			if line != name+"="+dir {
				t.Errorf("hook saw %q, want the project directory %q", line, dir)
			}
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

// failOpen covers a hook's own failures, never a hook that did not run: one
// the sandbox could not confine, or a serve child's http hook that serve
// refused or that never reached serve.
func TestHookNeverRan(t *testing.T) {
	for failure, want := range map[string]bool{
		hookNotConfined + ": landlock":          true,
		hookRefusedByServe + ": not the hook":   true,
		hookNotSentToServe + ": broken channel": true,
		"timed out after 100 ms":                false,
		"answered status 500":                   false,
		"failed with exit status 1":             false,
	} {
		if got := hookNeverRan(failure); got != want {
			t.Errorf("hookNeverRan(%q) = %v, want %v", failure, got, want)
		}
	}
}
