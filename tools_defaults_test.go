// tools_defaults_test.go tests that every layer before the executor sees
// the built-in tools' final arguments, defaults filled in: the guard, the
// reference provider's path rules, the PreToolUse hooks, and the README's
// table of what is filled in.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestGuardSeesFilledDefaults: an optional argument the model left out
// reaches the guard with the value the executor uses; one it gave is kept.
// The session cwd is spelled through a symlink, so the filled-in paths must
// be the resolved folder the tools search and run in.
func TestGuardSeesFilledDefaults(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(real, "notes.txt"), "needle\n")
	mustWrite(t, filepath.Join(real, "sub", "more.txt"), "needle\n")
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(real, "sub")
	tests := []struct {
		tool string
		args string
		want map[string]any
	}{
		{"read_file", `{"file_path":"notes.txt"}`,
			map[string]any{"file_path": filepath.Join(real, "notes.txt"), "offset": int64(0), "limit": int64(readDefaultLines)}},
		{"read_file", `{"file_path":"notes.txt","offset":1,"limit":5}`,
			map[string]any{"file_path": filepath.Join(real, "notes.txt"), "offset": int64(1), "limit": int64(5)}},
		{"edit", `{"file_path":"notes.txt","old_string":"needle","new_string":"pin"}`,
			map[string]any{"file_path": filepath.Join(real, "notes.txt"), "old_string": "needle", "new_string": "pin", "replace_all": false}},
		{"glob", `{"pattern":"**/*.txt"}`, map[string]any{"pattern": "**/*.txt", "path": real}},
		{"glob", `{"pattern":"*.txt","path":"sub"}`, map[string]any{"pattern": "*.txt", "path": sub}},
		{"grep_search", `{"pattern":"needle"}`, map[string]any{"pattern": "needle", "path": real, "limit": int64(grepDefaultLimit)}},
		{"search_file_content", `{"pattern":"needle","glob":"*.txt","limit":3}`,
			map[string]any{"pattern": "needle", "glob": "*.txt", "path": real, "limit": int64(3)}},
		{"grep_search", `{"pattern":"needle","path":"sub"}`, map[string]any{"pattern": "needle", "path": sub, "limit": int64(grepDefaultLimit)}},
		{"run_shell_command", `{"command":"pwd"}`,
			map[string]any{"command": "pwd", "directory": real, "is_background": false, "timeout": int64(shellDefaultTimeoutMS)}},
		{"run_shell_command", `{"command":"pwd","directory":"sub","timeout":5000,"description":"where"}`,
			map[string]any{"command": "pwd", "directory": sub, "is_background": false, "timeout": int64(5000), "description": "where"}},
		// A background command has no timeout: none is made up for it.
		{"run_shell_command", `{"command":"exit 0","is_background":true}`,
			map[string]any{"command": "exit 0", "directory": real, "is_background": true}},
		{"write_file", `{"file_path":"out.txt","content":"x"}`, map[string]any{"file_path": filepath.Join(real, "out.txt"), "content": "x"}},
		{"list_directory", `{"path":"."}`, map[string]any{"path": real}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			// Denied, so that nothing runs and the workspace stays as set up.
			g := &countingGuard{decide: func(context.Context, GuardRequest) (Decision, error) {
				return Decision{Allowed: false, Reason: "test"}, nil
			}}
			env, rec := newTestEnv(t, g)
			env.Cwd = link
			if res := runTool(context.Background(), env, call(tt.tool, tt.args)); res.Status != statusFailed || res.Output != "test" {
				t.Fatalf("result = %+v", res)
			}
			if g.calls() != 1 || !reflect.DeepEqual(g.reqs[0].Arguments, tt.want) {
				t.Errorf("guard saw %v, want %v", g.reqs, tt.want)
			}
			if p := checkOnePending(t, rec); !reflect.DeepEqual(p.args, tt.want) {
				t.Errorf("rawInput = %v, want the guard's %v", p.args, tt.want)
			}
		})
	}
}

// TestFilledDefaultsAreWhatRuns: the executors use the filled-in values, so
// the call the guard allowed is the call that ran: with the cwd spelled
// through a symlink, a pathless grep shows the resolved folder the guard
// saw, and a shell command without a directory runs there.
func TestFilledDefaultsAreWhatRuns(t *testing.T) {
	g := &countingGuard{}
	env, _ := newTestEnv(t, g)
	real := env.Cwd
	mustWrite(t, filepath.Join(real, "notes.txt"), "needle\n")
	env.Cwd = filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, env.Cwd); err != nil {
		t.Fatal(err)
	}
	res := runTool(context.Background(), env, call("grep_search", `{"pattern":"needle"}`))
	if want := filepath.Join(real, "notes.txt") + ":1:needle"; res.Status != statusCompleted || !strings.Contains(res.Output, want) {
		t.Errorf("grep = %+v, want a match %q", res, want)
	}
	res = runTool(context.Background(), env, call("run_shell_command", `{"command":"pwd -P"}`))
	if res.Status != statusCompleted || !strings.Contains(res.Output, "\nOutput: "+real+"\n") {
		t.Errorf("pwd = %+v, want %s", res, real)
	}
	if g.calls() != 2 || g.reqs[0].Arguments["path"] != real || g.reqs[1].Arguments["directory"] != real {
		t.Errorf("guard requests = %+v, want the resolved cwd %s", g.reqs, real)
	}
}

// TestPathlessSearchMeetsFolderDeny: a reference-provider policy denies
// everything in a folder; a search with no path from a session whose cwd
// is that folder reaches the provider with the folder as its path, is
// denied, and nothing of the folder is read. A shell command without a
// directory is held the same way: the file it would write is not written.
// The PreToolUse hook is given the same final arguments.
func TestPathlessSearchMeetsFolderDeny(t *testing.T) {
	secret, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(secret, "creds.txt"), "TOKEN=hunter2\n")
	tmp := t.TempDir()
	under := "^" + regexp.QuoteMeta(secret) + "(/|$)"
	policy := map[string]any{
		"rules": []any{
			map[string]any{"tool": "*", "match": map[string]string{"/path": under}, "decision": "deny", "reason": "The secrets folder is off limits"},
			map[string]any{"tool": "*", "match": map[string]string{"/directory": under}, "decision": "deny", "reason": "The secrets folder is off limits"},
			map[string]any{"tool": "*", "decision": "allow"},
		},
	}
	policyFile := filepath.Join(tmp, "policy.json")
	b, _ := json.Marshal(policy)
	mustWrite(t, policyFile, string(b))
	hookLog := filepath.Join(tmp, "hook.jsonl")
	hook := filepath.Join(tmp, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/bash\ncat >> "+hookLog+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(tmp, "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"},"hooks":{"PreToolUse":[{"matcher":".*","hooks":[{"type":"command","command":"`+hook+`"}]}]}}`)

	audit := filepath.Join(tmp, "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: policyFile, AuditPath: audit, AuditArguments: true})
	// The hook logs beside the settings, outside the session cwd: a
	// writable path of the sandbox that required mode turns on.
	c := startACP(t, nil, []string{"--settings", settings, "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url,
		"--sandbox-write", tmp},
		envGuardToken+"="+providerTestToken)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := c.newSession(secret)
	copied := filepath.Join(tmp, "copied.txt")
	c.prompt(sid, strings.Join([]string{
		`call grep_search {"pattern":"hunter2"}`,
		`call glob {"pattern":"*.txt"}`,
		`call run_shell_command {"command":"cp creds.txt ` + copied + `"}`,
	}, "\n"), "")

	ups := c.sessionUpdates(sid)
	if got := agentText(ups); got != "grep_search: denied\nglob: denied\nrun_shell_command: denied\n" {
		t.Errorf("model answer = %q", got)
	}
	for _, u := range ups {
		if u.SessionUpdate == "tool_call_update" && (strings.Contains(u.Text, "creds.txt") || strings.Contains(u.Text, "TOKEN=")) {
			t.Errorf("the denied folder was read: %q", u.Text)
		}
		if u.SessionUpdate == "tool_call_update" && u.Status == statusFailed && u.Text != "The secrets folder is off limits" {
			t.Errorf("denied call shows %q", u.Text)
		}
	}
	if fileExists(copied) {
		t.Error("the denied shell command ran")
	}
	records := readProviderAudit(t, audit)
	if len(records) != 3 {
		t.Fatalf("provider decisions = %d, want 3", len(records))
	}
	for _, r := range records {
		var args map[string]any
		json.Unmarshal(r.Arguments, &args)
		where := args["path"]
		if r.ToolName == toolShell {
			where = args["directory"]
		}
		if r.Decision != "deny" || where != secret {
			t.Errorf("provider saw %s %s and decided %s; want the folder %s and deny", r.ToolName, r.Arguments, r.Decision, secret)
		}
	}
	raw, err := os.ReadFile(hookLog)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var hooked []hookInput
	for {
		var in hookInput
		if err := dec.Decode(&in); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("hook input %s: %v", raw, err)
		}
		hooked = append(hooked, in)
	}
	if len(hooked) != 3 || hooked[0].ToolInput["path"] != secret || hooked[1].ToolInput["path"] != secret || hooked[2].ToolInput["directory"] != secret {
		t.Errorf("hook inputs = %+v, want the folder %s filled in", hooked, secret)
	}
}

// TestPolicyReferenceListsFilledDefaults: the policy reference's table of
// built-in tools names exactly the arguments normalization fills in, tool by
// tool.
func TestPolicyReferenceListsFilledDefaults(t *testing.T) {
	readme, err := os.ReadFile(policyReferencePage)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	name := regexp.MustCompile("`/([a-z_]+)`")
	for line := range strings.Lines(string(readme)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 5 {
			continue
		}
		tool := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, ok := builtinTool(tool); !ok || !strings.Contains(cells[2], "`") {
			continue
		}
		var args []string
		for _, m := range name.FindAllStringSubmatch(cells[3], -1) {
			args = append(args, m[1])
		}
		sort.Strings(args)
		documented[tool] = args
	}
	cwd := t.TempDir()
	mustWrite(t, filepath.Join(cwd, "f"), "x")
	minimal := map[string]map[string]any{
		toolReadFile: {"file_path": "f"}, toolWriteFile: {"file_path": "f", "content": ""},
		toolEdit: {"file_path": "f", "old_string": "x", "new_string": "y"}, toolListDirectory: {"path": "."},
		toolGlob: {"pattern": "*"}, toolGrepSearch: {"pattern": "x"}, toolShell: {"command": "true"},
	}
	for _, tool := range builtinToolNames() {
		spec, _ := builtinTool(tool)
		given := maps.Clone(minimal[tool])
		args, err := spec.normalize(&toolEnv{Cwd: cwd}, maps.Clone(given))
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var filled []string
		for k := range args {
			if _, ok := given[k]; !ok {
				filled = append(filled, k)
			}
		}
		sort.Strings(filled)
		if got, ok := documented[tool]; !ok || !slices.Equal(got, filled) {
			t.Errorf("%s lists %s filled in with %v (row found %v); the code fills in %v", policyReferencePage, tool, got, ok, filled)
		}
	}
}

// TestPolicyMatchesFilledInScalars: with is_background always filled in, a
// reference-provider rule can single out background commands by the text
// "true"; a number still cannot be matched by text (1e3 is 1000), so a deny
// rule on it holds for every value and an allow rule for none.
func TestPolicyMatchesFilledInScalars(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules":[
		{"tool":"run_shell_command","match":{"/is_background":"^true$"},"decision":"deny","reason":"Background commands are not allowed"},
		{"tool":"mcp__s__n","match":{"/limit":"^5$"},"decision":"allow"},
		{"tool":"mcp__s__n","match":{"/limit":"^5$"},"decision":"deny"},
		{"tool":"mcp__s__b","match":{"/flag":"^false$"},"decision":"allow"}
	],"default":"allow"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool, args string
		rule       int
	}{
		{"run_shell_command", `{"command":"ls","is_background":true}`, 0},
		{"run_shell_command", `{"command":"ls","is_background":false}`, -1},
		{"run_shell_command", `{"command":"ls","is_background":"true"}`, 0},
		{"run_shell_command", `{"command":"ls","is_background":[true]}`, 0},
		{"mcp__s__n", `{"limit":"5"}`, 1},
		{"mcp__s__n", `{"limit":5}`, 2},
		{"mcp__s__n", `{"limit":6}`, 2},
		{"mcp__s__b", `{"flag":false}`, 3},
		{"mcp__s__b", `{"flag":true}`, -1},
		{"b", `{"flag":null}`, -1},
	} {
		var args any
		dec := json.NewDecoder(strings.NewReader(tt.args))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			t.Fatal(err)
		}
		if d := pol.decide(tt.tool, args); d.Rule != tt.rule {
			t.Errorf("%s %s: rule %d, want %d", tt.tool, tt.args, d.Rule, tt.rule)
		}
	}
}

// TestPermissionRulesSeeFilledInPath: a deny rule on a folder meets a
// pathless search from that folder through the filled-in path.
func TestPermissionRulesSeeFilledInPath(t *testing.T) {
	secret, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{toolGrepSearch, toolGlob} {
		spec, _ := builtinTool(tool)
		args, err := spec.normalize(&toolEnv{Cwd: secret}, map[string]any{"pattern": "x"})
		if err != nil {
			t.Fatal(err)
		}
		deny := mustRules(t, nil, nil, []string{"Read(/" + secret + "/**)"}) // "//abs"
		if v, rule := deny.decide(modeYolo, tool, true, args, secret, "/nonexistent"); v != verdictDeny {
			t.Errorf("%s %v under a deny on the folder: verdict %v (rule %q), want deny", tool, args, v, rule)
		}
		if args["path"] != secret {
			t.Errorf("%s %v: the path was not filled in", tool, args)
		}
	}
}
