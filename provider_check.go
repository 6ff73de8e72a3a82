// provider_check.go owns "acpguard provider check": unit tests for a policy.
// It validates a policy file exactly as the provider does at startup, then
// decides the example calls of a cases file and reports every mismatch with
// the rule that decided.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// providerPolicyCase is one example of a cases file: a tool name, its
// arguments and the decision expected, at a time ("at") when the policy has
// windows. Cases are decided in order as calls of one session, so they
// spend the policy's budgets as the provider would. Reason, when given, is
// the exact text a client would show for the denial.
type providerPolicyCase struct {
	Name      string          `json:"name"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Expect    string          `json:"expect"`
	Reason    string          `json:"reason"`
	At        string          `json:"at"` // RFC 3339; absent: now

	args any       // Arguments decoded as the provider decodes them
	at   time.Time // At parsed
}

// maxProviderCasesFile bounds a cases file read from disk, like a policy.
const maxProviderCasesFile = 4 << 20

// maxProviderRenderedPattern bounds a regular expression quoted in a mismatch line:
// enough to recognise the rule, short enough to keep one line per mismatch.
const maxProviderRenderedPattern = 48

// providerCheckOptions are the validated flags of "acpguard provider check".
type providerCheckOptions struct {
	PolicyFile string
	CasesFile  string
	// CasesGiven says --cases named the file: then it must exist. The
	// default file beside the policy may be absent.
	CasesGiven bool
	// Explain is one call to decide and explain instead of the cases.
	Explain      string
	ExplainGiven bool
}

func runProviderCheck(sys *system, args []string) error {
	opts, err := parseProviderCheckArgs(args, sys)
	if err != nil {
		return err
	}
	pol, err := loadProviderPolicy(opts.PolicyFile)
	if err != nil {
		return &usageError{err}
	}
	for _, w := range pol.warnings {
		fmt.Fprintf(sys.stderr, "acpguard provider check: warning: policy %q: %s\n", opts.PolicyFile, w)
	}
	if opts.ExplainGiven {
		return explainProviderCall(sys, pol, opts.Explain)
	}
	cases, err := loadProviderPolicyCases(opts.CasesFile)
	if errors.Is(err, os.ErrNotExist) && !opts.CasesGiven {
		fmt.Fprintf(sys.stdout, "policy %q: valid, %d rules; no cases file %q\n", opts.PolicyFile, len(pol.rules), opts.CasesFile)
		return nil
	}
	if err != nil {
		return &usageError{err}
	}
	fmt.Fprintf(sys.stdout, "policy %q: valid, %d rules; cases %q\n", opts.PolicyFile, len(pol.rules), opts.CasesFile)
	mismatches := 0
	for i := range cases {
		if msg := cases[i].check(pol); msg != "" {
			mismatches++
			fmt.Fprintf(sys.stdout, "FAIL %s: %s\n", cases[i].label(i), msg)
		}
	}
	fmt.Fprintf(sys.stdout, "%d passed, %d failed\n", len(cases)-mismatches, mismatches)
	if mismatches > 0 {
		return fmt.Errorf("provider check: %d of %d cases of %q failed", mismatches, len(cases), opts.CasesFile)
	}
	return nil
}

// loadProviderPolicyCases reads and validates a cases file: a non-empty JSON array
// of cases, unknown fields refused.
func loadProviderPolicyCases(file string) ([]providerPolicyCase, error) {
	return loadOperatorFile("cases", file, maxProviderCasesFile, parseProviderPolicyCases)
}

func parseProviderPolicyCases(data []byte) ([]providerPolicyCase, error) {
	var cases []providerPolicyCase
	if err := decodeStrict(data, &cases); err != nil {
		return nil, err
	}
	// A file that tests nothing must not read as a policy that passed.
	if len(cases) == 0 {
		return nil, errors.New("no cases: want a JSON array of at least one case")
	}
	for i := range cases {
		if err := cases[i].validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", cases[i].label(i), err)
		}
	}
	return cases, nil
}

func (c *providerPolicyCase) validate() error {
	if c.Tool == "" {
		return errors.New(`missing "tool"`)
	}
	switch c.Expect {
	case "allow", "deny":
	default:
		return fmt.Errorf(`expect %q: want "allow" or "deny"`, c.Expect)
	}
	if c.Reason != "" {
		if c.Expect != "deny" {
			return errors.New(`a reason is only expected with "expect": "deny"`)
		}
		if why := reasonUnsafe(c.Reason); why != "" {
			return fmt.Errorf("reason %q: %s, so no client would show it", c.Reason, why)
		}
	}
	args, err := decodeProviderArguments(c.Arguments)
	if err != nil {
		return err
	}
	c.args = args
	if c.At != "" {
		if c.at, err = time.Parse(time.RFC3339, c.At); err != nil {
			return fmt.Errorf(`at %q: want an RFC 3339 time such as "2026-01-05T10:00:00+01:00"`, c.At)
		}
	}
	return nil
}

func (c *providerPolicyCase) label(i int) string {
	if c.Name == "" {
		return fmt.Sprintf("case %d", i)
	}
	return fmt.Sprintf("case %d %q", i, c.Name)
}

// check decides the case with pol and describes a mismatch, or returns "".
// The reason compared is the one a client shows: the policy's, trimmed, or
// the client's default text for a denial without one.
func (c *providerPolicyCase) check(pol *providerPolicy) string {
	at := c.at
	if at.IsZero() {
		at = time.Now()
	}
	d := pol.decideCall(&providerCall{Tool: c.Tool, Args: c.args, At: at})
	got, reason := providerDecisionName(d.Allowed), deniedReason(d.Reason)
	if got == c.Expect && (c.Reason == "" || c.Reason == reason) {
		return ""
	}
	want := c.Expect
	if c.Reason != "" {
		want += fmt.Sprintf(" %q", c.Reason)
	}
	if !d.Allowed {
		got += fmt.Sprintf(" %q", reason)
	}
	return fmt.Sprintf("%s: want %s, got %s by %s", c.Tool, want, got, pol.describe(d.Rule))
}

// describe renders the rule that decided (-1: the default) in the shape it
// has in the policy file, its patterns shortened.
func (pol *providerPolicy) describe(rule int) string {
	if rule < 0 {
		return "the default (no rule matched)"
	}
	r := &pol.rules[rule]
	var b strings.Builder
	fmt.Fprintf(&b, "rule %d {tool %q", rule, r.tool)
	if len(r.args) > 0 {
		b.WriteString(", match {")
		for i, m := range r.args {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %q", m.raw, clipProviderText(m.re.String(), maxProviderRenderedPattern))
		}
		b.WriteString("}")
	}
	if r.shell != nil {
		b.WriteString(", " + r.shell.describe())
	}
	if r.reaches != nil {
		fmt.Fprintf(&b, ", reaches %q", r.reaches)
	}
	if r.limit != nil {
		fmt.Fprintf(&b, ", limit %q per %s", r.limit.raw, r.limit.key)
	}
	if r.window != nil {
		fmt.Fprintf(&b, ", window %q", r.window.String())
	}
	fmt.Fprintf(&b, ", %s}", providerDecisionName(r.allow))
	return b.String()
}

// explainProviderCall decides one call, now, as a call of no session, and
// prints what the shell parser saw and which rule met each simple command,
// so that a policy author sees the policy as the provider applies it.
func explainProviderCall(sys *system, pol *providerPolicy, text string) error {
	c := providerPolicyCase{Tool: shellToolName, Expect: "allow"}
	if strings.HasPrefix(strings.TrimSpace(text), "{") {
		var call struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := decodeStrict([]byte(text), &call); err != nil {
			return &usageError{fmt.Errorf("--explain %q: %w; want {\"tool\": ..., \"arguments\": {...}}", clipProviderText(text, maxProviderRenderedPattern), err)}
		}
		c.Tool, c.Arguments = call.Tool, call.Arguments
	} else {
		c.Arguments, _ = json.Marshal(map[string]string{"command": text})
	}
	if err := c.validate(); err != nil {
		return &usageError{fmt.Errorf("--explain: %w", err)}
	}
	d, verdicts := pol.decideExplained(&providerCall{Tool: c.Tool, Args: c.args, At: time.Now()}, true)
	w := sys.stdout
	m, _ := c.args.(map[string]any)
	args, _ := canonicalArguments(m)
	fmt.Fprintf(w, "call %s %s\n", c.Tool, args)
	if verdicts != nil || pol.shell && c.Tool == shellToolName {
		fmt.Fprintf(w, "parsed: %d simple commands\n", len(verdicts))
		for k, v := range verdicts {
			u := v.unit
			line := fmt.Sprintf("  %d. %q", k+1, u.argv)
			if u.notParse {
				line = fmt.Sprintf("  %d. (the command is not a string)", k+1)
			}
			var notes []string
			if len(u.wrappers) > 0 {
				notes = append(notes, fmt.Sprintf("behind %q", u.wrappers))
			}
			if len(u.assigns) > 0 {
				notes = append(notes, fmt.Sprintf("assigns %q", u.assigns))
			}
			if u.dynamic {
				notes = append(notes, "words known only when bash runs")
			}
			if u.toFile {
				notes = append(notes, "redirects to a file")
			}
			if u.network {
				notes = append(notes, "redirects to a socket, or may")
			}
			if u.complex {
				notes = append(notes, fmt.Sprintf("complex: %s", u.why))
			}
			if u.opaque {
				notes = append(notes, "behind a wrapper allow rules do not see through")
			}
			if len(notes) > 0 {
				line += " [" + strings.Join(notes, "; ") + "]"
			}
			if v.rule < 0 {
				line += " -> no shell rule"
			} else {
				line += fmt.Sprintf(" -> %s by rule %d", providerDecisionName(pol.rules[v.rule].allow), v.rule)
			}
			fmt.Fprintln(w, line)
		}
	}
	decision := providerDecisionName(d.Allowed)
	if !d.Allowed {
		decision += fmt.Sprintf(" %q", deniedReason(d.Reason))
	}
	fmt.Fprintf(w, "decision: %s by %s\n", decision, pol.describe(d.Rule))
	return nil
}
