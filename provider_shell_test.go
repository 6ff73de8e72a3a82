// provider_shell_test.go tests the provider's shell rules over parsed commands
// (DESIGN.md §8): the pinned decisions of examples/policy.json, rule loading,
// option and prefix semantics, and provider check --explain.
package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// providerShellVector is one command of testdata/policy/decisions.json:
// what the parser saw (each simple command after its wrappers, with why it
// is complex) and what examples/policy.json decides.
type providerShellVector struct {
	Command  string   `json:"command"`
	Parsed   []string `json:"parsed"`
	Decision string   `json:"decision"`
	Rule     int      `json:"rule"`
}

func providerShellVectorOf(pol *providerPolicy, command string) providerShellVector {
	call := &providerCall{Tool: shellToolName, Args: map[string]any{"command": command}}
	d, verdicts := pol.decideExplained(call, true)
	v := providerShellVector{Command: command, Decision: providerDecisionName(d.Allowed), Rule: d.Rule, Parsed: []string{}}
	for _, vd := range verdicts {
		b, _ := json.Marshal(vd.unit.argv)
		s := string(b)
		if len(vd.unit.wrappers) > 0 {
			s += " behind " + strings.Join(vd.unit.wrappers, ",")
		}
		if len(vd.unit.assigns) > 0 {
			s += " assigns " + strings.Join(vd.unit.assigns, ",")
		}
		if vd.unit.dynamic {
			s += " dynamic"
		}
		if vd.unit.toFile {
			s += " to a file"
		}
		if vd.unit.network {
			s += " to a socket"
		}
		if vd.unit.complex {
			s += " complex: " + vd.unit.why
		}
		v.Parsed = append(v.Parsed, s)
	}
	return v
}

// TestProviderShellDecisions pins, for the shipped policy, the parser's
// reading of each command of the table and the provider's decision: plain,
// quoted, escaped, compound, subshell, substitution, redirection, wrappers.
// ACPGUARD_UPDATE_VECTORS=1 rewrites the file from the commands it holds.
func TestProviderShellDecisions(t *testing.T) {
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	const file = "testdata/policy/decisions.json"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var want []providerShellVector
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 60 {
		t.Fatalf("%s: %d commands, want at least 60", file, len(want))
	}
	var got []providerShellVector
	for _, w := range want {
		got = append(got, providerShellVectorOf(pol, w.Command))
	}
	if os.Getenv("ACPGUARD_UPDATE_VECTORS") == "1" {
		out, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(file, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for i := range want {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if string(g) != string(w) {
			t.Errorf("command %q:\n got %s\nwant %s", want[i].Command, g, w)
		}
	}
}

// TestProviderShellRuleLoad: shell fields are checked at load, each error
// naming the rule, the field and the value.
func TestProviderShellRuleLoad(t *testing.T) {
	tests := []struct{ rule, err string }{
		{`{"tool":"read_file","argv0":"rm","decision":"deny"}`, `rule 0: tool "read_file": argv, argv0, options, assigns, redirects, reads, writes and complex apply only to "run_shell_command"`},
		{`{"tool":"run_shell_command","argv":[],"decision":"allow"}`, `rule 0: argv []: want at least one word`},
		{`{"tool":"run_shell_command","argv":["git",""],"decision":"allow"}`, `rule 0: argv "": an empty word matches nothing`},
		{`{"tool":"run_shell_command","argv0":"{rm","decision":"deny"}`, `rule 0: invalid argv0 pattern "{rm"`},
		{`{"tool":"run_shell_command","argv0":"git","options":["output"],"decision":"deny"}`, `rule 0: options "output": an option starts with -`},
		{`{"tool":"run_shell_command","redirects":"deny","decision":"allow"}`, `rule 0: redirects "deny" on an allow rule`},
		{`{"tool":"run_shell_command","argv0":"ls","redirects":"allow","decision":"deny"}`, `rule 0: redirects "allow" on a deny rule`},
		{`{"tool":"run_shell_command","argv0":"ls","redirects":"yes","decision":"deny"}`, `rule 0: redirects "yes": want "deny" or "network" (deny rules), "allow" or "network" (allow rules)`},
		{`{"tool":"run_shell_command","argv0":"ls","redirects":"Network","decision":"deny"}`, `rule 0: redirects "Network": want "deny" or "network"`},
		{`{"tool":"run_shell_command","redirects":"network","decision":"deny"}`, ``},
		{`{"tool":"run_shell_command","argv0":"ls","redirects":"network","decision":"allow"}`, ``},
		{`{"tool":"run_shell_command","argv0":"ls","writes":["/tmp/**"],"redirects":"allow","decision":"allow"}`, `rule 0: writes with redirects "allow": an allow rule's writes already admit`},
		{`{"tool":"run_shell_command","argv0":"ls","writes":["tmp/**"],"decision":"allow"}`, `rule 0: invalid writes pattern "tmp/**": pattern "tmp/**" is relative; give an absolute path pattern, e.g. "/srv/work/**"`},
		{`{"tool":"run_shell_command","reads":["/srv/../etc"],"decision":"deny"}`, `rule 0: invalid reads pattern "/srv/../etc": pattern "/srv/../etc" has a "." or ".." segment`},
		{`{"tool":"run_shell_command","reads":[],"decision":"deny"}`, `rule 0: reads []: want at least one path pattern`},
		{`{"tool":"read_file","writes":["/tmp/**"],"decision":"deny"}`, `rule 0: tool "read_file": argv, argv0`},
		{`{"tool":"run_shell_command","argv0":"ls","writes":["/tmp/{a,b}/**"],"reads":["/srv/**"],"decision":"allow"}`, ``},
		{`{"tool":"run_shell_command","argv0":"ls","decision":"allow"}`, ``},
		{`{"tool":"Bash","argv":["git","log"],"options":["-{,-}[o]"],"decision":"deny"}`, ``},
	}
	for _, tt := range tests {
		_, err := parseProviderPolicy([]byte(`{"rules":[` + tt.rule + `]}`))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: error %v, want %q", tt.rule, err, tt.err)
		}
	}
	pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"run_shell_command","match":{"/command":"^ls"},"decision":"allow"}]}`))
	if err != nil || len(pol.warnings) != 1 || !strings.Contains(pol.warnings[0], `rule 0: match "/command" is a regular expression over the raw text, which quoting dodges`) {
		t.Errorf("warnings %q, err %v: want the /command regex warning", pol.warnings, err)
	}
}

// TestProviderShellRuleSemantics: options in every spelling, clusters,
// the -[o] exact form, assigns, complex and where a shell deny stands.
func TestProviderShellRuleSemantics(t *testing.T) {
	policy := `{"rules":[
	  {"tool":"run_shell_command","argv":["tar"],"complex":true,"decision":"allow"},
	  {"tool":"run_shell_command","argv":["ls"],"assigns":["LC_*"],"decision":"allow"},
	  {"tool":"run_shell_command","argv0":"rm","options":["-r"],"decision":"deny","reason":"No recursive removal"},
	  {"tool":"run_shell_command","argv0":"rm","decision":"allow"},
	  {"tool":"run_shell_command","argv0":"cp","options":["--target-directory*","-[t]"],"decision":"deny"},
	  {"tool":"run_shell_command","argv0":"cp","decision":"allow"},
	  {"tool":"run_shell_command","complex":true,"decision":"deny","reason":"Not plain words"}
	]}`
	pol, err := parseProviderPolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		command string
		allow   bool
		rule    int
	}{
		{"rm x", true, 3},
		{"rm -r x", false, 2},
		{"rm -fr x", false, 2},
		{"rm -f x", true, 3},
		{"rm --recursive x", true, 3}, // the rule names -r only
		{"rm x -- -r", false, 2},
		{"cp a --target-directory=/x", false, 4},
		{"cp a '--target-directory' /x", false, 4},
		{"cp -t /x a", false, 4},
		{"cp -at /x a", true, 5}, // -[t] is the word -t, never a cluster
		{"LC_ALL=C ls", true, 1},
		{"LANG=C ls", false, -1},
		{"tar cf - . | cat", false, -1},
		{"tar $(echo x)", false, 6}, // the complex deny stands last, and decides before the allow
		{"rm x; cp a b", true, 5},
	}
	for _, tt := range tests {
		d := pol.decide(shellToolName, map[string]any{"command": tt.command})
		if d.Allowed != tt.allow || d.Rule != tt.rule {
			t.Errorf("%q: allowed=%v by rule %d, want %v by %d", tt.command, d.Allowed, d.Rule, tt.allow, tt.rule)
		}
	}
}

// TestProviderCheckExplain: --explain prints what the parser saw and the
// rule that met each command, for a command text and for a call.
func TestProviderCheckExplain(t *testing.T) {
	code, stdout, stderr := runAcpguard(t, []string{"provider", "check", "--policy", "examples/policy.json", "--explain", "echo ok; env rm -rf x"})
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		`call run_shell_command {"command":"echo ok; env rm -rf x"}`,
		"parsed: 3 simple commands",
		`1. ["echo" "ok"] -> allow by rule 10`,
		`2. ["rm" "-rf" "x"] [behind ["env"]] -> deny by rule 8`,
		`decision: deny "Destructive and network shell commands are not allowed by policy" by rule 8 {tool "run_shell_command", argv0 "{rm,`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runAcpguard(t, []string{"provider", "check", "--policy", "examples/policy.json", "--explain", `{"tool":"run_shell_command","arguments":{"command":"echo $(id)"}}`})
	if code != exitOK || !strings.Contains(stdout, "complex: command substitution") || !strings.Contains(stdout, `decision: deny "No policy rule allows this tool call" by the default`) {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
	code, _, stderr = runAcpguard(t, []string{"provider", "check", "--policy", "examples/policy.json", "--explain", `{"tool":1}`})
	if code != exitUsage || !strings.Contains(stderr, "--explain") {
		t.Errorf("bad call: exit %d, stderr %q", code, stderr)
	}
}

// TestProviderShellExplainAgrees: --explain decides as the provider does,
// for every command of the pinned table.
func TestProviderShellExplainAgrees(t *testing.T) {
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/policy/decisions.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []providerShellVector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		call := &providerCall{Tool: shellToolName, Args: map[string]any{"command": v.Command}}
		plain := pol.decideCall(call)
		explained, _ := pol.decideExplained(call, true)
		if plain != explained {
			t.Errorf("%q: decided %+v, explained %+v", v.Command, plain, explained)
		}
	}
}

// A command the parser does not read whole (a syntax error, or more simple
// commands than its bounds) may hide any command after the point where it
// stopped: every shell deny rule meets it and no allow rule does, even one
// that takes complex commands.
func TestProviderShellUnreadCommandFailsClosed(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"default":"allow","rules":[
	  {"tool":"run_shell_command","argv0":"rm","decision":"deny","reason":"no rm"},
	  {"tool":"run_shell_command","argv":["echo"],"complex":true,"decision":"allow"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	many := strings.Repeat("echo a; ", maxShellCommands+1) + "rm -rf x"
	wrapped := strings.Repeat("env echo a; ", maxShellCommands/2+1) + "rm -rf x"
	for _, cmd := range []string{many, wrapped, "echo 'unterminated; rm x", "echo ok"} {
		d := pol.decide(shellToolName, map[string]any{"command": cmd})
		want := cmd != "echo ok"
		if d.Allowed == want || want && d.Rule != 0 {
			t.Errorf("%.40q...: allowed=%v by rule %d, want denied by rule 0: %v", cmd, d.Allowed, d.Rule, want)
		}
	}
}

// TestProviderShellRedirections: a socket bash opens for /dev/tcp and
// /dev/udp meets "redirects": "network" whatever the operator, an allow
// rule admits it only when it says "network", and reads and writes meet
// the paths redirections open, resolved against the call's directory;
// a path not known before bash runs meets every deny and no allow.
func TestProviderShellRedirections(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules":[
	  {"tool":"run_shell_command","redirects":"network","decision":"deny","reason":"No sockets"},
	  {"tool":"run_shell_command","argv0":"cat","reads":["/srv/secret/**"],"decision":"deny","reason":"No secrets"},
	  {"tool":"run_shell_command","writes":["/etc/**"],"decision":"deny","reason":"Not /etc"},
	  {"tool":"run_shell_command","argv0":"go","writes":["/srv/work/**","/tmp/*.log"],"decision":"allow"},
	  {"tool":"run_shell_command","argv0":"cat","reads":["/srv/work/**"],"decision":"allow"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		command string
		allow   bool
		rule    int
	}{
		{"cat secret.txt </dev/tcp/127.0.0.1/9 >&0", false, 0},
		{"cat f 0</dev/tcp/127.0.0.1/9 1>&0", false, 0},
		{"exec 3<>/dev/udp/127.0.0.1/53", false, 0},
		{"echo x >/dev/tcp/127.0.0.1/9", false, 0},
		{"echo x >>/dev/tcp/127.0.0.1/9", false, 0},
		{"echo x >|/dev/tcp/127.0.0.1/9", false, 0},
		{"echo x &>/dev/tcp/127.0.0.1/9", false, 0},
		{"echo x &>>/dev/udp/127.0.0.1/9", false, 0},
		{"echo x >&/dev/tcp/127.0.0.1/9", false, 0},
		{`cat f <"/dev/tc"p/127.0.0.1/9 >&0`, false, 0},
		{"{ cat f; } </dev/tcp/127.0.0.1/9 >&0", false, 0},
		{"sh -c 'cat f </dev/tcp/127.0.0.1/9 >&0'", false, 0},
		{"cat f <$T >&0", false, 0},                 // a target known only when bash runs
		{"cat f <//dev/tcp/127.0.0.1/9", false, -1}, // bash opens //dev/tcp/... as a file
		{"cat < /srv/secret/key", false, 1},
		{"cat < ../secret/key", false, 1}, // ".." is resolved by the kernel: not known
		{"cat < a.txt", true, 4},
		{"cat < /srv/work/a.txt 2>/dev/null", true, 4},
		{"cat < /srv/other/a", false, -1},
		{"go test ./... > out.txt 2>&1", true, 3},
		{"nice go test > out.txt", true, 3},
		{"go test > /tmp/t.log", true, 3},
		{"go test > /dev/null", true, 3},
		{"go test > /home/u/.bashrc", false, -1},
		{"go test > /etc/motd", false, 2},
		{"cd /etc && go test > motd", false, 2},          // after cd, a relative target is not known
		{"sh -c 'go test > out.txt'", false, 2},          // a script's relative target is not known
		{"go test > /srv/work/../../etc/motd", false, 2}, // nor one with ".."
		{"go test > /srv/work/a 2>/srv/work/../x", false, 2},
	}
	for _, tt := range tests {
		d := pol.decide(shellToolName, map[string]any{"command": tt.command, "directory": "/srv/work"})
		if d.Allowed != tt.allow || d.Rule != tt.rule {
			t.Errorf("%q: allowed=%v by rule %d, want %v by %d", tt.command, d.Allowed, d.Rule, tt.allow, tt.rule)
		}
	}
	if d := pol.decide(shellToolName, map[string]any{"command": "go test > out.txt"}); d.Allowed {
		t.Errorf("a relative target with no directory: %+v, want no allow", d)
	}
	admits, err := parseProviderPolicy([]byte(`{"rules":[
	  {"tool":"run_shell_command","argv0":"echo","redirects":"allow","decision":"allow"},
	  {"tool":"run_shell_command","argv0":"cat","redirects":"network","decision":"allow"},
	  {"tool":"run_shell_command","argv0":"ls","decision":"allow"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		command string
		allow   bool
	}{
		{"echo x > /tmp/x", true},
		{"echo x >/dev/tcp/127.0.0.1/9", false},
		{"cat f </dev/tcp/127.0.0.1/9 >&0", true},
		{"cat f > /tmp/x", true},
		{"ls </dev/tcp/127.0.0.1/9", false},
		{"ls 2>&1 </dev/null", true},
	} {
		if d := admits.decide(shellToolName, map[string]any{"command": tt.command}); d.Allowed != tt.allow {
			t.Errorf("%q: allowed=%v by rule %d, want %v", tt.command, d.Allowed, d.Rule, tt.allow)
		}
	}
}

// TestProviderServesShellDenials: the shipped policy, served, denies a
// file sent to a socket by a redirection, with its reason, and each option
// spelling testdata/policy/options.json pins as denied.
func TestProviderServesShellDenials(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	c := testProviderClient(t, p.url, testTimeout(5*time.Second))
	for _, command := range []string{"cat secret.txt </dev/tcp/127.0.0.1/9 >&0", "exec 3<>/dev/udp/127.0.0.1/53"} {
		res := c.prepare(context.Background(), shellPrepare(command))
		if res.Allowed || res.Reason != examplePolicyNetworkReason {
			t.Errorf("%q: %+v, want a deny with %q", command, res, examplePolicyNetworkReason)
		}
	}
	for _, v := range loadShellOptionVectors(t).Commands {
		if res := c.prepare(context.Background(), shellPrepare(v.Command)); res.Allowed != (v.Provider == "allow") {
			t.Errorf("%q: %+v, want %s", v.Command, res, v.Provider)
		}
	}
}

// shellOptionVectors is testdata/policy/options.json: option spellings and
// what each layer decides, the provider on examples/policy.json and the
// settings layer in yolo with the file's deny rules.
type shellOptionVectors struct {
	Settings struct {
		Deny []string `json:"deny"`
	} `json:"settings"`
	Commands []struct {
		Command      string `json:"command"`
		Provider     string `json:"provider"`
		ProviderRule int    `json:"providerRule"`
		Settings     string `json:"settings"`
	} `json:"commands"`
}

func loadShellOptionVectors(t *testing.T) shellOptionVectors {
	t.Helper()
	data, err := os.ReadFile("testdata/policy/options.json")
	if err != nil {
		t.Fatal(err)
	}
	var v shellOptionVectors
	if err := decodeStrict(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestShellOptionSpellings: a deny on a long option meets every spelling
// getopt_long, Go's flag package and npm read as it (a prefix, one dash or
// two, =value or a separate word), in the provider and in the settings
// layer; the controls stay allowed.
func TestShellOptionSpellings(t *testing.T) {
	vectors := loadShellOptionVectors(t)
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	rules := mustRules(t, nil, nil, vectors.Settings.Deny)
	for _, v := range vectors.Commands {
		args := map[string]any{"command": v.Command}
		if d := pol.decide(shellToolName, args); providerDecisionName(d.Allowed) != v.Provider || d.Rule != v.ProviderRule {
			t.Errorf("provider %q: %s by rule %d, want %s by %d", v.Command, providerDecisionName(d.Allowed), d.Rule, v.Provider, v.ProviderRule)
		}
		if got, rule := rules.decide(modeYolo, toolShell, false, args, testCwd, testHome); string(got) != v.Settings {
			t.Errorf("settings %q: %s %q, want %s", v.Command, got, rule, v.Settings)
		}
	}
	// An allow rule takes the spelling it names, no other.
	allow, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"run_shell_command","argv0":"ls","options":["--color*"],"decision":"allow"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for command, want := range map[string]bool{"ls --color=auto": true, "ls --col=auto": false, "ls -color=auto": false} {
		if d := allow.decide(shellToolName, map[string]any{"command": command}); d.Allowed != want {
			t.Errorf("allow rule, %q: allowed=%v, want %v", command, d.Allowed, want)
		}
	}
	// Past maxOptionSpellings rewritten forms, a settings rule meets the
	// command: 2^7 forms here.
	bound := mustRules(t, nil, nil, []string{"Bash(tool --aa --bb)"})
	if v, _ := bound.decide(modeYolo, toolShell, false, map[string]any{"command": "tool" + strings.Repeat(" --a", 7)}, testCwd, testHome); v != verdictDeny {
		t.Errorf("past the bound: %s, want deny", v)
	}
	if v, _ := bound.decide(modeYolo, toolShell, false, map[string]any{"command": "tool --a --b"}, testCwd, testHome); v != verdictDeny {
		t.Errorf("tool --a --b: %s, want deny", v)
	}
	if v, _ := bound.decide(modeYolo, toolShell, false, map[string]any{"command": "tool --a --c"}, testCwd, testHome); v != verdictAllow {
		t.Errorf("tool --a --c: %s, want allow", v)
	}
}

// examplePolicyNetworkReason is the reason examples/policy.json gives a
// redirection to a socket.
const examplePolicyNetworkReason = "Shell redirections to the network (/dev/tcp, /dev/udp) or to a target known only when the shell runs are not allowed by policy"
