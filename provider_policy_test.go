// provider_policy_test.go tests the reference provider's policy language:
// validation of a policy file, rule matching, and the example policy.
package main

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name, providerPolicy, err string
	}{
		{"minimal", `{}`, ""},
		{"comments and trailing commas", "\uFEFF// the team's policy\n{\"rules\":[{\"tool\":\"read_file\",\"decision\":\"deny\", /* for now */},],\"default\":\"allow\",}", ""},
		{"a comment left open", "{\"default\":\"allow\"} /* open", "trailing data"},
		{"full", `{"rules":[{"tool":"mcp__*","match":{"/a/0":"^x$","/b~1c":"y"},"decision":"deny","reason":"No"}],"default":"allow"}`, ""},
		{"unknown top field", `{"rule":[]}`, `json: unknown field "rule" (did you mean "rules"?)`},
		{"a member misspelt in a rule", `{"rules":[{"tool":"read_file","desicion":"deny"}]}`, `rule 0: json: unknown field "desicion" (did you mean "decision"?)`},
		{"unknown rule field", `{"rules":[{"tool":"mcp__s__x","decision":"allow"},{"tool":"mcp__s__x","decision":"allow","why":"x"}]}`, `rule 1: json: unknown field "why"`},
		{"rule field of another type", `{"rules":[{"tool":5,"decision":"allow"}]}`, `rule 0: json: cannot unmarshal number`},
		// encoding/json alone lets the last of two members win.
		{"decision given twice", `{"rules":[{"tool":"read_file","decision":"deny"},{"tool":"read_file","decision":"deny","decision":"allow"}]}`, `duplicate field "decision" in rules[1]`},
		{"rules given twice", `{"rules":[{"tool":"mcp__s__x","decision":"deny"}],"rules":[]}`, `duplicate field "rules"`},
		{"decision given twice in two cases", `{"rules":[{"tool":"read_file","decision":"deny","Decision":"allow"}]}`, `rule 0: unknown field "Decision"`},
		{"rule not an object", `{"rules":["read_file"]}`, `rule 0: json: cannot unmarshal string`},
		{"trailing data", `{} {}`, "trailing data"},
		{"not json", `rules:`, "invalid character"},
		{"bad default", `{"default":"maybe"}`, `default "maybe": want "allow" or "deny"`},
		{"default reason on allow", `{"default":"allow","defaultReason":"x"}`, "defaultReason: a reason is only allowed on a deny"},
		{"unsafe default reason", `{"defaultReason":"a\nb"}`, `defaultReason: unsafe reason "a\nb": control character U+000A`},
		{"missing tool", `{"rules":[{"decision":"allow"}]}`, `rule 0: missing "tool"`},
		{"bad glob", `{"rules":[{"tool":"mcp__s__x","decision":"allow"},{"tool":"mcp__[","decision":"deny"}]}`, `rule 1: invalid tool pattern "mcp__[": syntax error in pattern`},
		{"missing decision", `{"rules":[{"tool":"mcp__s__x"}]}`, `rule 0: decision "": want "allow" or "deny"`},
		{"bad decision", `{"rules":[{"tool":"mcp__s__x","decision":"ask"}]}`, `rule 0: decision "ask": want "allow" or "deny"`},
		{"reason on allow", `{"rules":[{"tool":"mcp__s__x","decision":"allow","reason":"ok"}]}`, "rule 0: a reason is only allowed on a deny"},
		{"blank reason", `{"rules":[{"tool":"mcp__s__x","decision":"deny","reason":"  "}]}`, `rule 0: unsafe reason "  ": blank`},
		{"long reason", `{"rules":[{"tool":"mcp__s__x","decision":"deny","reason":"` + strings.Repeat("a", 501) + `"}]}`, "rule 0: unsafe reason"},
		{"u2028 reason", `{"rules":[{"tool":"mcp__s__x","decision":"deny","reason":"a\u2028b"}]}`, "control character U+2028"},
		{"pointer without slash", `{"rules":[{"tool":"mcp__s__x","match":{"command":"x"},"decision":"deny"}]}`, `rule 0: invalid JSON Pointer "command": must start with /`},
		{"empty pointer", `{"rules":[{"tool":"mcp__s__x","match":{"":"x"},"decision":"deny"}]}`, `rule 0: invalid JSON Pointer "": must start with /`},
		{"bad escape", `{"rules":[{"tool":"mcp__s__x","match":{"/a~2":"x"},"decision":"deny"}]}`, `rule 0: invalid JSON Pointer "/a~2": ~ must be followed by 0 or 1`},
		{"bad regexp", `{"rules":[{"tool":"mcp__s__x","match":{"/a":"x"}, "decision":"deny"},{"tool":"mcp__s__y","match":{"/b":"ok","/a":"[z"},"decision":"deny"}]}`, `rule 1: invalid regexp for "/a": error parsing regexp: missing closing ]: ` + "`[z`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProviderPolicy([]byte(tt.providerPolicy))
			if tt.err == "" && err != nil {
				t.Errorf("error %v, want none", err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestPolicyDecide(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules":[
		{"tool":"mcp__s__t","match":{"/a~1b/0":"^yes$"},"decision":"allow"},
		{"tool":"mcp__s__t","match":{"/m~0n":"go","/x":"."},"decision":"allow"},
		{"tool":"mcp__s__t","match":{"/arr/10":"ten"},"decision":"allow"},
		{"tool":"mcp__g?b_*","decision":"deny","reason":"glob"}
	],"default":"allow"}`))
	if err != nil {
		t.Fatal(err)
	}
	arr := `["0","1","2","3","4","5","6","7","8","9","ten"]`
	tests := []struct {
		tool, args string
		rule       int
	}{
		{"mcp__s__t", `{"a/b":["yes"]}`, 0},
		{"mcp__s__t", `{"a/b":["yes!"]}`, -1},
		{"mcp__s__t", `{"a/b":"yes"}`, -1},
		{"mcp__s__t", `{"a/b":[true]}`, -1},
		{"mcp__s__t", `{"m~n":"golang","x":"1"}`, 1},
		{"mcp__s__t", `{"m~n":"golang"}`, -1},
		{"mcp__s__t", `{"arr":` + arr + `}`, 2},
		{"mcp__s__t", `{"arr":{"10":"ten"}}`, 2},
		{"mcp__s__t", `{"arr":{"010":"ten"}}`, -1},
		{"mcp__s__T", `{"a/b":["yes"]}`, -1},
		{"mcp__gib_x", `{}`, 3},
		{"mcp__gb_x", `{}`, -1},
	}
	for _, tt := range tests {
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
	for _, p := range []string{"/arr/010", "/arr/-", "/arr/", "/arr/+1", "/arr/99"} {
		tokens, _ := parseJSONPointer(p)
		var args any
		json.Unmarshal([]byte(`{"arr":`+arr+`}`), &args)
		if v, ok := selectJSONPointer(args, tokens); ok {
			t.Errorf("pointer %s selected %v", p, v)
		}
	}
}

func TestExamplePolicyLoads(t *testing.T) {
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	if pol.defaultAllow || len(pol.rules) == 0 {
		t.Errorf("example policy: default allow %v, %d rules", pol.defaultAllow, len(pol.rules))
	}
	if _, err := loadProviderPolicy("examples/none.json"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParsePolicy(f *testing.F) {
	example, err := os.ReadFile("examples/policy.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example, "run_shell_command", []byte(`{"command":"ls -la"}`))
	f.Add([]byte(`{"rules":[{"tool":"mcp__t*","match":{"/a~1b/0":"^x$"},"decision":"deny","reason":"No"}],"default":"allow"}`), "mcp__tx", []byte(`{"a/b":["x"]}`))
	f.Add([]byte(`{"rules":[{"tool":"[","decision":"allow"}]}`), "x", []byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte, tool string, rawArgs []byte) {
		pol, err := parseProviderPolicy(data)
		if err != nil {
			return
		}
		args, err := decodeProviderArguments(rawArgs)
		if err != nil {
			return
		}
		d := pol.decide(tool, args)
		if d.Rule < -1 || d.Rule >= len(pol.rules) {
			t.Fatalf("rule index %d of %d", d.Rule, len(pol.rules))
		}
		if d.Reason != "" && (d.Allowed || reasonUnsafe(d.Reason) != "") {
			t.Fatalf("decision %+v: the provider would send a reason the client rejects", d)
		}
	})
}

// TestPolicyReaches: a "reaches" deny rule matches a search rooted at the
// path, beneath it or above it, and one whose root or pattern leaves
// doubt; not a sibling, nor a path that only begins with the same letters.
func TestPolicyReaches(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules":[
		{"tool":"grep_search","reaches":["/srv/work/secrets"],"decision":"deny","reason":"No"},
		{"tool":"Glob","reaches":["/srv/work/secrets/","/srv/other/../keys"],"decision":"deny","reason":"No"}
	],"default":"allow"}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool, args string
		rule             int
	}{
		{"the parent", "grep_search", `{"pattern":"x","path":"/srv/work"}`, 0},
		{"the root", "grep_search", `{"pattern":"x","path":"/"}`, 0},
		{"the folder", "grep_search", `{"pattern":"x","path":"/srv/work/secrets"}`, 0},
		{"beneath it", "grep_search", `{"pattern":"x","path":"/srv/work/secrets/old/x"}`, 0},
		{"spelled unclean", "grep_search", `{"pattern":"x","path":"/srv/work/other/../secrets/"}`, 0},
		{"a sibling", "grep_search", `{"pattern":"x","path":"/srv/work/other"}`, -1},
		{"a prefix lookalike", "grep_search", `{"pattern":"x","path":"/srv/work/secrets2"}`, -1},
		{"a sibling with a filter", "grep_search", `{"pattern":"x","path":"/srv/work/other","glob":"*.go"}`, -1},
		{"a filter that leaves the root", "grep_search", `{"pattern":"x","path":"/srv/work/other","glob":"../secrets/*"}`, 0},
		{"an absolute filter", "grep_search", `{"pattern":"x","path":"/srv/work/other","glob":"/srv/work/secrets/*"}`, 0},
		{"a filter not a string", "grep_search", `{"pattern":"x","path":"/srv/work/other","glob":["*"]}`, 0},
		{"no path", "grep_search", `{"pattern":"x"}`, 0},
		{"a relative path", "grep_search", `{"pattern":"x","path":"other"}`, 0},
		{"an empty path", "grep_search", `{"pattern":"x","path":""}`, 0},
		{"a path not a string", "grep_search", `{"pattern":"x","path":["/srv/work/other"]}`, 0},
		{"another tool", "list_directory", `{"path":"/srv/work"}`, -1},
		{"glob, its trailing slash cleaned", "glob", `{"pattern":"*","path":"/srv/work/secrets"}`, 1},
		{"glob from the parent", "glob", `{"pattern":"secrets/**","path":"/srv/work"}`, 1},
		{"glob from the parent, any pattern", "glob", `{"pattern":"src/**","path":"/srv/work"}`, 1},
		{"glob, the second path cleaned", "glob", `{"pattern":"*","path":"/srv/keys/a"}`, 1},
		{"glob from a sibling", "glob", `{"pattern":"**","path":"/srv/work/other"}`, -1},
		{"glob leaving its root", "glob", `{"pattern":"../secrets/**","path":"/srv/work/other"}`, 1},
		{"glob with an absolute pattern", "glob", `{"pattern":"/srv/work/secrets/**","path":"/srv/work/other"}`, 1},
		{"glob with no pattern", "glob", `{"path":"/srv/work/other"}`, -1},
	}
	// provider check names the rule as the policy file has it, paths cleaned.
	if got, want := pol.describe(1), `rule 1 {tool "Glob", reaches ["/srv/work/secrets" "/srv/keys"], deny}`; got != want {
		t.Errorf("describe = %s, want %s", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args any
			if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
				t.Fatal(err)
			}
			if got := pol.decide(tt.tool, args).Rule; got != tt.rule {
				t.Errorf("%s %s: decided by rule %d, want %d", tt.tool, tt.args, got, tt.rule)
			}
		})
	}
}

// TestPolicyReachesRefused: "reaches" loads only on a deny rule of the
// searches, with absolute paths; the error names the rule and the tool.
func TestPolicyReachesRefused(t *testing.T) {
	tests := []struct {
		name, rule, err string
	}{
		{"read_file", `{"tool":"read_file","reaches":["/s"],"decision":"deny"}`,
			`rule 1: tool "read_file": reaches applies only to "grep_search" and "glob" (or Grep, Glob)`},
		{"Read, which means read_file too", `{"tool":"Read","reaches":["/s"],"decision":"deny"}`,
			`rule 1: tool "Read": reaches applies only to "grep_search" and "glob" (or Grep, Glob)`},
		{"a tool glob", `{"tool":"g*","reaches":["/s"],"decision":"deny"}`,
			`rule 1: tool "g*": reaches applies only to "grep_search" and "glob" (or Grep, Glob)`},
		{"the shell", `{"tool":"run_shell_command","reaches":["/s"],"decision":"deny"}`,
			`rule 1: tool "run_shell_command": reaches applies only to "grep_search" and "glob" (or Grep, Glob)`},
		{"an MCP tool", `{"tool":"mcp__s__grep","reaches":["/s"],"decision":"deny"}`,
			`rule 1: tool "mcp__s__grep": reaches applies only to "grep_search" and "glob" (or Grep, Glob)`},
		{"an allow rule", `{"tool":"grep_search","reaches":["/s"],"decision":"allow"}`,
			`rule 1: reaches on an allow rule: reaches only denies; allow a search by its root with "match" on "/path"`},
		{"no path", `{"tool":"glob","reaches":[],"decision":"deny"}`,
			`rule 1: reaches []: want at least one path, e.g. ["/srv/work/secrets"]`},
		{"a relative path", `{"tool":"grep_search","reaches":["/s","secrets"],"decision":"deny"}`,
			`rule 1: reaches "secrets": want an absolute path, e.g. "/srv/work/secrets"`},
		{"an empty path", `{"tool":"grep_search","reaches":[""],"decision":"deny"}`,
			`rule 1: reaches "": want an absolute path, e.g. "/srv/work/secrets"`},
		{"not a list", `{"tool":"grep_search","reaches":"/s","decision":"deny"}`,
			`rule 1: json: cannot unmarshal string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"read_file","decision":"allow"},` + tt.rule + `]}`))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
	for _, tool := range []string{"grep_search", "glob", "Grep", "Glob", "search_file_content", "GrepTool", "FindFiles"} {
		if _, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"` + tool + `","reaches":["/s"],"decision":"deny"}]}`)); err != nil {
			t.Errorf("reaches under %q: %v", tool, err)
		}
	}
}
