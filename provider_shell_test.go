package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
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
