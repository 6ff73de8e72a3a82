// provider_limits_test.go tests the checks of a rule's tool name, budgets
// and time windows of the reference provider's policy, through the policy,
// "provider check" and a provider on loopback.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPolicyToolNames(t *testing.T) {
	tests := []struct {
		tool, err, warning string
	}{
		{tool: "write_fil", err: `rule 0: unknown tool "write_fil" (did you mean "write_file"?)`},
		{tool: "shell", err: `rule 0: unknown tool "shell" (did you mean "Shell"?)`},
		{tool: "Bsh", err: `rule 0: unknown tool "Bsh" (did you mean "Bash"?)`},
		{tool: "frobnicate", err: `rule 0: unknown tool "frobnicate"`},
		{tool: "mcp__github", err: `rule 0: tool "mcp__github": an MCP tool is named mcp__<server>__<tool>; for every tool of a server write "mcp__github__*"`},
		{tool: "mcp__github__", err: `write "mcp__github__*"`},
		{tool: "B*", err: `rule 0: tool pattern "B*" matches no tool`},
		{tool: "Bash"}, {tool: "Shell"}, {tool: "Read"}, {tool: "Edit"}, {tool: "Write"}, {tool: "Grep"}, {tool: "Glob"},
		{tool: "run_shell_command"}, {tool: "replace"}, {tool: "mcp__github__create_issue"},
		{tool: "mcp__*"}, {tool: "mcp__github__*"}, {tool: "*_file"}, {tool: "*"},
		{tool: "web_fetch", warning: `rule 0: tool "web_fetch" (web_fetch) is a Qwen Code tool acpguard does not have`},
		{tool: "TodoWrite", warning: `rule 0: tool "TodoWrite" (task_list) is a Qwen Code tool`},
		{tool: "web_*", warning: `rule 0: tool pattern "web_*" matches only Qwen Code tools acpguard does not have`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"` + tt.tool + `","decision":"deny"}]}`))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warnings := strings.Join(pol.warnings, "\n")
			if tt.warning == "" && warnings != "" || !strings.Contains(warnings, tt.warning) {
				t.Errorf("warnings %q, want %q", warnings, tt.warning)
			}
		})
	}
}

// TestPolicyAliasesMatch: an alias means the tools it means in the
// settings file, so a deny on Bash fires under "default": "allow".
func TestPolicyAliasesMatch(t *testing.T) {
	tests := []struct {
		alias string
		match []string
		miss  []string
	}{
		{"Bash", []string{"run_shell_command"}, []string{"read_file", "bash"}},
		{"Shell", []string{"run_shell_command"}, []string{"edit"}},
		{"Read", []string{"read_file", "list_directory", "glob", "grep_search"}, []string{"write_file", "run_shell_command"}},
		{"Edit", []string{"edit", "write_file"}, []string{"read_file"}},
		{"Write", []string{"write_file"}, []string{"edit"}},
		{"Grep", []string{"grep_search"}, []string{"glob"}},
		{"Glob", []string{"glob"}, []string{"grep_search"}},
		{"replace", []string{"edit", "replace"}, []string{"write_file"}},
		{"web_fetch", []string{"web_fetch"}, []string{"read_file"}},
	}
	for _, tt := range tests {
		pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"` + tt.alias + `","decision":"deny","reason":"No ` + tt.alias + `"}],"default":"allow"}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tt.match {
			if d := pol.decide(tool, map[string]any{"command": "rm -rf /"}); d.Allowed || d.Rule != 0 || d.Reason != "No "+tt.alias {
				t.Errorf("rule on %q, call of %q: %+v, want the rule's deny", tt.alias, tool, d)
			}
		}
		for _, tool := range tt.miss {
			if d := pol.decide(tool, map[string]any{}); !d.Allowed {
				t.Errorf("rule on %q, call of %q: %+v, want the default allow", tt.alias, tool, d)
			}
		}
	}
}

func TestPolicyLimitAndWindowRefusals(t *testing.T) {
	tests := []struct{ name, rule, err string }{
		{"limit on deny", `"decision":"deny","limit":"5/minute"`, `rule 0: limit "5/minute" on a deny rule: a deny refuses every call already`},
		{"unknown unit", `"decision":"allow","limit":"5/week"`, `rule 0: limit "5/week": want N/second, N/minute, N/hour or N/day, N from 1 to 1000000`},
		{"zero", `"decision":"allow","limit":"0/minute"`, `limit "0/minute": want`},
		{"no slash", `"decision":"allow","limit":"20"`, `limit "20": want`},
		{"plus", `"decision":"allow","limit":"+2/day"`, `limit "+2/day": want`},
		{"too many", `"decision":"allow","limit":"1000001/day"`, `limit "1000001/day": want`},
		{"bad key", `"decision":"allow","limit":"2/day","limitKey":"user"`, `rule 0: limitKey "user": want "session", "tool" or "global"`},
		{"key alone", `"decision":"allow","limitKey":"tool"`, `rule 0: limitKey "tool" without "limit"`},
		{"bad hours", `"decision":"allow","hours":"9-18"`, `rule 0: hours "9-18": want HH:MM-HH:MM`},
		{"empty hours range", `"decision":"allow","hours":"09:00-09:00"`, `hours "09:00-09:00": want`},
		{"24 as start", `"decision":"allow","hours":"24:00-06:00"`, `hours "24:00-06:00": want`},
		{"minute 60", `"decision":"allow","hours":"09:60-10:00"`, `hours "09:60-10:00": want`},
		{"bad day", `"decision":"allow","days":["monday"]`, `rule 0: days: "monday" is not a day: want sun, mon, tue, wed, thu, fri, sat`},
		{"no days", `"decision":"allow","days":[]`, `rule 0: days []: name at least one day`},
		{"unknown zone", `"decision":"allow","hours":"09:00-18:00","timezone":"Europe/Berlinn"`, `rule 0: timezone "Europe/Berlinn": unknown time zone`},
		{"zone alone", `"decision":"allow","timezone":"UTC"`, `rule 0: timezone "UTC" without "hours" or "days"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"read_file",` + tt.rule + `}]}`))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestPolicyBudgets(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	type call struct {
		session, tool string
		at            time.Duration // after t0
		allow         bool
		reason        string
	}
	tests := []struct {
		name  string
		rule  string
		calls []call
	}{
		{"per session", `"limit":"3/minute"`, []call{
			{"a", "read_file", 0, true, ""},
			{"a", "read_file", 5 * time.Second, true, ""},
			{"b", "read_file", 10 * time.Second, true, ""},
			{"a", "read_file", 10 * time.Second, true, ""},
			{"a", "read_file", 19 * time.Second, false, "rate limit 3/minute of rule 0 reached; try again in 41s"},
			{"a", "read_file", 59*time.Second + time.Millisecond, false, "rate limit 3/minute of rule 0 reached; try again in 1s"},
			{"b", "read_file", 20 * time.Second, true, ""},
			{"a", "read_file", 60 * time.Second, true, ""},
		}},
		{"per tool", `"limit":"1/hour","limitKey":"tool"`, []call{
			{"a", "read_file", 0, true, ""},
			{"b", "read_file", time.Minute, false, "rate limit 1/hour of rule 0 reached for this tool; try again in 3540s"},
			{"b", "glob", time.Minute, true, ""},
		}},
		{"global", `"limit":"2/second","limitKey":"global"`, []call{
			{"a", "read_file", 0, true, ""},
			{"b", "glob", 100 * time.Millisecond, true, ""},
			{"c", "grep_search", 200 * time.Millisecond, false, "rate limit 2/second of rule 0 reached for all sessions; try again in 1s"},
			{"c", "grep_search", time.Second, true, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"Read","decision":"allow",` + tt.rule + `}],"default":"deny"}`))
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range tt.calls {
				d := pol.decideCall(&providerCall{Tool: c.tool, Args: map[string]any{}, Session: c.session, At: t0.Add(c.at)})
				if d.Allowed != c.allow || d.Reason != c.reason || d.Rule != 0 {
					t.Errorf("call %d (%s %s at +%s): %+v, want allow %v reason %q by rule 0", i, c.session, c.tool, c.at, d, c.allow, c.reason)
				}
			}
		})
	}
}

// TestPolicyBudgetsBounded: the counters never exceed their bound; the
// window that ends first is the one dropped.
func TestPolicyBudgetsBounded(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"read_file","decision":"allow","limit":"1/day"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for i := range maxProviderLimitKeys + 10 {
		d := pol.decideCall(&providerCall{Tool: "read_file", Session: fmt.Sprint("s", i), At: t0.Add(time.Duration(i) * time.Millisecond)})
		if !d.Allowed {
			t.Fatalf("session %d: %+v", i, d)
		}
	}
	if n := len(pol.budgets.keys); n > maxProviderLimitKeys {
		t.Errorf("%d counters, want at most %d", n, maxProviderLimitKeys)
	}
	at := t0.Add(time.Hour)
	if d := pol.decideCall(&providerCall{Tool: "read_file", Session: fmt.Sprint("s", maxProviderLimitKeys+9), At: at}); d.Allowed {
		t.Errorf("the newest session's spent budget was dropped: %+v", d)
	}
	// Ended windows go first when room is needed.
	later := t0.Add(25 * time.Hour)
	pol.decideCall(&providerCall{Tool: "read_file", Session: "fresh", At: later})
	if n := len(pol.budgets.keys); n != 1 {
		t.Errorf("%d counters after every window ended, want 1", n)
	}
}

func TestPolicyWindows(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no zoneinfo for Europe/Berlin:", err)
	}
	pol, err := parseProviderPolicy([]byte(`{"rules":[
		{"tool":"run_shell_command","decision":"allow","hours":"09:00-18:00","days":["mon","tue","wed","thu","fri"],"timezone":"Europe/Berlin"},
		{"tool":"read_file","decision":"deny","reason":"No reading at night","hours":"22:00-06:00","timezone":"Europe/Berlin"},
		{"tool":"Read","decision":"allow"},
		{"tool":"write_file","decision":"allow","days":["sat"],"timezone":"UTC"}
	],"default":"deny","defaultReason":"No policy rule allows this tool call"}`))
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-02 is a Monday.
	at := func(day, hour, minute int) time.Time { return time.Date(2026, 3, day, hour, minute, 0, 0, berlin) }
	outsideShell := "outside the time window of rule 0 (09:00-18:00 mon,tue,wed,thu,fri Europe/Berlin), which allows this call"
	tests := []struct {
		tool   string
		at     time.Time
		allow  bool
		rule   int
		reason string
	}{
		{"run_shell_command", at(2, 9, 0), true, 0, ""},
		{"run_shell_command", at(2, 17, 59), true, 0, ""},
		{"run_shell_command", at(2, 18, 0), false, -1, outsideShell},
		{"run_shell_command", at(2, 8, 59), false, -1, outsideShell},
		{"run_shell_command", at(7, 10, 0), false, -1, outsideShell}, // Saturday
		{"run_shell_command", at(2, 8, 30).UTC(), false, -1, outsideShell},
		{"read_file", at(2, 23, 0), false, 1, "No reading at night"},
		{"read_file", at(3, 5, 59), false, 1, "No reading at night"},
		{"read_file", at(3, 6, 0), true, 2, ""},
		{"read_file", at(2, 21, 59), true, 2, ""},
		{"write_file", time.Date(2026, 3, 7, 23, 30, 0, 0, time.UTC), true, 3, ""},
		{"write_file", time.Date(2026, 3, 8, 0, 30, 0, 0, time.UTC), false, -1, "outside the time window of rule 3 (sat UTC), which allows this call"},
		{"edit", at(2, 10, 0), false, -1, "No policy rule allows this tool call"},
	}
	for _, tt := range tests {
		d := pol.decideCall(&providerCall{Tool: tt.tool, Args: map[string]any{}, At: tt.at})
		if d.Allowed != tt.allow || d.Rule != tt.rule || d.Reason != tt.reason {
			t.Errorf("%s at %s: %+v, want allow %v by rule %d reason %q", tt.tool, tt.at, d, tt.allow, tt.rule, tt.reason)
		}
	}
}

// TestProviderCheckAt: a case names its time, so windows are testable from
// the command line; a warning goes to stderr and the check still runs.
func TestProviderCheckAt(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	policy := write("p.json", `{"rules":[
		{"tool":"Bash","decision":"allow","hours":"09:00-18:00","timezone":"UTC"},
		{"tool":"web_fetch","decision":"deny"}]}`)
	cases := write("p.cases.json", `[
		{"name":"office","tool":"run_shell_command","arguments":{"command":"ls"},"expect":"allow","at":"2026-03-02T10:00:00+01:00"},
		{"name":"night","tool":"run_shell_command","arguments":{"command":"ls"},"expect":"allow","at":"2026-03-02T23:00:00Z"}]`)
	code, stdout, stderr := runAcpguard(t, []string{"provider", "check", "--policy", policy})
	if code != exitRuntime {
		t.Errorf("exit %d, want %d", code, exitRuntime)
	}
	wantOut := fmt.Sprintf("policy %q: valid, 2 rules; cases %q\n", policy, cases) +
		`FAIL case 1 "night": run_shell_command: want allow, got deny "outside the time window of rule 0 (09:00-18:00 UTC), which allows this call" by the default (no rule matched)` + "\n" +
		"1 passed, 1 failed\n"
	if stdout != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, wantOut)
	}
	if want := fmt.Sprintf("acpguard provider check: warning: policy %q: rule 1: tool \"web_fetch\" (web_fetch) is a Qwen Code tool acpguard does not have", policy); !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}

	bad := write("bad.cases.json", `[{"tool":"read_file","arguments":{},"expect":"deny","at":"2026-03-02 10:00"}]`)
	code, _, stderr = runAcpguard(t, []string{"provider", "check", "--policy", policy, "--cases", bad})
	if want := `case 0: at "2026-03-02 10:00": want an RFC 3339 time such as "2026-01-05T10:00:00+01:00"`; code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q, want exit %d and %q", code, stderr, exitUsage, want)
	}

	typo := write("typo.json", `{"rules":[{"tool":"write_fil","decision":"deny"}]}`)
	code, _, stderr = runAcpguard(t, []string{"provider", "check", "--policy", typo})
	if want := `rule 0: unknown tool "write_fil" (did you mean "write_file"?)`; code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q, want exit %d and %q", code, stderr, exitUsage, want)
	}
}

// TestProviderRateLimit: over loopback, the call over a session's budget
// is denied with a reason that says so; another session has its own.
func TestProviderRateLimit(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(policy, []byte(`{"rules":[{"tool":"Read","decision":"allow","limit":"2/hour"}]}`), 0o600)
	p := startRefProvider(t, providerOptions{PolicyFile: policy})
	c := testProviderClient(t, p.url, 10*time.Second)
	for i, want := range []bool{true, true, false} {
		res := c.prepare(context.Background(), providerTestCall)
		if res.Category != "" || res.Allowed != want {
			t.Fatalf("call %d: %+v, want allowed %v", i, res, want)
		}
		if !want && !strings.HasPrefix(res.Reason, "rate limit 2/hour of rule 0 reached; try again in ") {
			t.Errorf("reason %q", res.Reason)
		}
	}
	other := providerTestCall
	other.SessionID = "sess-2"
	if res := c.prepare(context.Background(), other); !res.Allowed {
		t.Errorf("another session: %+v", res)
	}
}

// TestProviderStartupWarning: a rule on a Qwen Code tool acpguard lacks is
// loaded, with a warning at start whatever the log level.
func TestProviderStartupWarning(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(policy, []byte(`{"rules":[{"tool":"read_file","decision":"allow"},{"tool":"web_search","decision":"deny"}]}`), 0o600)
	p := startRefProvider(t, providerOptions{PolicyFile: policy, LogLevel: slog.LevelError})
	want := fmt.Sprintf("acpguard provider: warning: policy %q: rule 1: tool \"web_search\" (web_search) is a Qwen Code tool acpguard does not have: the rule matches only calls from another client\n", policy)
	if !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr %q, want %q", p.stderr.String(), want)
	}
}
