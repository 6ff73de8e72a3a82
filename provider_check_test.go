// provider_check_test.go tests "acpguard provider check" through the real
// binary: the example cases pass, the mismatch vector in testdata/check
// prints the rules that decided, and invalid inputs exit 2.
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProviderCheckExampleCasesPass(t *testing.T) {
	// The default cases file is the one beside the policy.
	code, stdout, stderr := runAcpguard(t, []string{"provider", "check", "--policy", "examples/policy.json"})
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	want := "policy \"examples/policy.json\": valid, 23 rules; cases \"examples/policy.cases.json\"\n76 passed, 0 failed\n"
	if stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
}

func TestProviderCheckMismatch(t *testing.T) {
	cases := filepath.Join("testdata", "check", "mismatch.cases.json")
	want, err := os.ReadFile(filepath.Join("testdata", "check", "mismatch.out"))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAcpguard(t, []string{"provider", "check", "--policy", "examples/policy.json", "--cases", cases})
	if code != exitRuntime {
		t.Errorf("exit %d, want %d", code, exitRuntime)
	}
	head := "policy \"examples/policy.json\": valid, 23 rules; cases \"" + cases + "\"\n"
	if stdout != head+string(want) {
		t.Errorf("stdout:\n%s\nwant:\n%s%s", stdout, head, want)
	}
	if wantErr := "acpguard: error: provider check: 3 of 4 cases of \"" + cases + "\" failed\n"; stderr != wantErr {
		t.Errorf("stderr %q, want %q", stderr, wantErr)
	}
}

func TestProviderCheckRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	badPolicy := write("bad.json", `{"rules":[{"tool":"read_file","decision":"allow"},{"tool":"glob","decision":"ask"}]}`)
	lonePolicy := write("lone.json", `{"rules":[{"tool":"read_file","decision":"allow"}]}`)
	emptyCases := write("empty.cases.json", `[]`)
	tests := []struct {
		name         string
		args         []string
		code         int
		stdout, err  string
		stdoutPrefix bool
	}{
		{name: "invalid policy, as at startup", args: []string{"--policy", badPolicy}, code: exitUsage,
			err: `acpguard: error: policy "` + badPolicy + `": rule 1: decision "ask": want "allow" or "deny"`},
		{name: "missing policy", args: []string{"--policy", filepath.Join(dir, "none.json")}, code: exitUsage, err: "no such file"},
		{name: "no policy flag", args: nil, code: exitUsage, err: `acpguard: error: --policy "": a policy file is required`},
		{name: "no cases beside the policy", args: []string{"--policy", lonePolicy}, code: exitOK,
			stdout: `policy "` + lonePolicy + `": valid, 1 rules; no cases file "` + filepath.Join(dir, "lone.cases.json") + "\"\n"},
		{name: "named cases file missing", args: []string{"--policy", lonePolicy, "--cases", filepath.Join(dir, "none.cases.json")}, code: exitUsage, err: "no such file"},
		{name: "empty cases", args: []string{"--policy", lonePolicy, "--cases", emptyCases}, code: exitUsage, err: "no cases: want a JSON array of at least one case"},
		{name: "empty cases flag", args: []string{"--policy", lonePolicy, "--cases="}, code: exitUsage, err: `--cases "": must name a file`},
		{name: "unknown flag", args: []string{"--policy", lonePolicy, "--listen", "127.0.0.1:1"}, code: exitUsage, err: `unknown flag "--listen"; run "acpguard provider check --help"`},
		{name: "help", args: []string{"--help"}, code: exitOK, stdout: "Usage: acpguard provider check --policy FILE [--cases FILE]\n", stdoutPrefix: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAcpguard(t, append([]string{"provider", "check"}, tt.args...))
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			if tt.err != "" && !strings.Contains(stderr, tt.err) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.err)
			}
			if tt.err == "" && stderr != "" {
				t.Errorf("stderr %q", stderr)
			}
			if tt.stdoutPrefix && !strings.HasPrefix(stdout, tt.stdout) || !tt.stdoutPrefix && stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout, tt.stdout)
			}
		})
	}
}

func TestParsePolicyCases(t *testing.T) {
	tests := []struct {
		name, data, err string
	}{
		{"minimal", `[{"tool":"t","arguments":{},"expect":"allow"}]`, ""},
		{"full", `[{"name":"n","tool":"t","arguments":{"a":[1,{"b":null}]},"expect":"deny","reason":"No"}]`, ""},
		{"not an array", `{"tool":"t","arguments":{},"expect":"allow"}`, "cannot unmarshal object"},
		{"null", `null`, "no cases"},
		{"empty", `[]`, "no cases"},
		{"trailing data", `[{"tool":"t","arguments":{},"expect":"allow"}] []`, "trailing data"},
		{"unknown field", `[{"tool":"t","arguments":{},"expect":"allow","rule":3}]`, `json: unknown field "rule"`},
		{"missing tool", `[{"tool":"t","arguments":{},"expect":"allow"},{"name":"x","arguments":{},"expect":"allow"}]`, `case 1 "x": missing "tool"`},
		{"missing expect", `[{"tool":"t","arguments":{}}]`, `case 0: expect "": want "allow" or "deny"`},
		{"bad expect", `[{"tool":"t","arguments":{},"expect":"ask"}]`, `case 0: expect "ask": want "allow" or "deny"`},
		{"missing arguments", `[{"tool":"t","expect":"allow"}]`, `case 0: field "arguments" is not an object`},
		{"array arguments", `[{"tool":"t","arguments":[],"expect":"allow"}]`, `case 0: field "arguments" is not an object`},
		{"null arguments", `[{"tool":"t","arguments":null,"expect":"allow"}]`, `case 0: field "arguments" is not an object`},
		{"reason on allow", `[{"tool":"t","arguments":{},"expect":"allow","reason":"x"}]`, `case 0: a reason is only expected with "expect": "deny"`},
		{"unsafe reason", `[{"tool":"t","arguments":{},"expect":"deny","reason":"a\u0007b"}]`, `case 0: reason "a\ab": control character U+0007, so no client would show it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProviderPolicyCases([]byte(tt.data))
			if tt.err == "" && err != nil {
				t.Errorf("error %v, want none", err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

// TestPolicyCaseReasons: a case compares the reason a client shows, which
// for a denial without a reason is the client's default text.
func TestPolicyCaseReasons(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"mcp__s__quiet","decision":"deny"},{"tool":"mcp__s__loud","decision":"deny","reason":"  Padded  "}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases, err := parseProviderPolicyCases([]byte(`[
		{"tool":"mcp__s__quiet","arguments":{},"expect":"deny","reason":"` + denyDefaultReason + `"},
		{"tool":"mcp__s__loud","arguments":{},"expect":"deny","reason":"Padded"},
		{"tool":"mcp__s__loud","arguments":{},"expect":"deny","reason":"  Padded  "},
		{"tool":"mcp__s__other","arguments":{},"expect":"deny","reason":"` + denyDefaultReason + `"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false, true} {
		if msg := cases[i].check(pol); (msg == "") != want {
			t.Errorf("case %d: mismatch %q, want pass=%v", i, msg, want)
		}
	}
}

func FuzzParsePolicyCases(f *testing.F) {
	for _, file := range []string{"examples/policy.cases.json", "testdata/check/mismatch.cases.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`[{"tool":"t","arguments":{"a":1e999},"expect":"deny","reason":" x "}]`))
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := parseProviderPolicyCases(data)
		if err != nil {
			return
		}
		for i := range cases {
			c := &cases[i]
			if c.Tool == "" || (c.Expect != "allow" && c.Expect != "deny") || c.args == nil {
				t.Fatalf("accepted case %+v", c)
			}
			msg := c.check(pol)
			d := pol.decide(c.Tool, c.args)
			if (msg == "") && providerDecisionName(d.Allowed) != c.Expect {
				t.Fatalf("case %+v passed against decision %+v", c, d)
			}
		}
	})
}
