// provider_policy.go owns the reference provider's policy language: the
// policy file, its validation, and how its rules match a call.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The policy file of the reference provider, strict JSON:
//
//	{
//	  "rules": [
//	    {"tool": "read_file", "decision": "allow"},
//	    {"tool": "run_shell_command", "match": {"/command": "rm -rf|curl"},
//	     "decision": "deny", "reason": "Network and destructive commands are not allowed"},
//	    {"tool": "mcp__*", "decision": "deny"}
//	  ],
//	  "default": "deny",
//	  "defaultReason": "No rule allows this tool"
//	}
//
// Rules are tried in order (indexes from 0) and the first that matches
// decides; when none does, "default" decides ("allow" or "deny"; absent
// means deny). "tool" is the canonical tool name, exact or a path.Match glob
// (*, ?, [...]). "match" is optional: every entry maps an RFC 6901 JSON
// Pointer into the final arguments to a Go regular expression (RE2,
// unanchored: write ^...$ to anchor), and the rule matches only when every
// pointer selects a string (or a boolean, as "true" or "false") the
// expression matches. "reason" is allowed only on a deny: it is shown to the
// user, so it must be a safe denial reason (non-blank, at most 500 UTF-16
// code units, no control characters). A denial without a reason shows the
// client's generic text.
//
// "reaches" (deny rules of grep_search and glob, or Grep, Glob) lists
// absolute paths; the rule matches a search that could read one of them: its
// root ("/path") is the path, lies beneath it or holds it. A root that is
// missing, not a string or not absolute matches, and so does a pattern that
// could leave the root (below).
//
// "tool" is checked at load (provider_limits.go): an alias of the settings
// file (Bash, Shell, Read, Edit, Write, Grep, Glob) means the tools it means
// there. "limit" ("N/second|minute|hour|day", allow rules only) budgets the
// calls the rule allows, per "limitKey" ("session", the default, "tool" or
// "global"); over budget the rule denies, saying so. "hours" ("09:00-18:00")
// and "days" (["mon", ...]) in "timezone" (IANA; local time when absent)
// are a window outside which the rule does not match.
type providerPolicyFile struct {
	// Each rule is decoded on its own, so that an error names its index.
	Rules         []json.RawMessage `json:"rules"`
	Default       string            `json:"default"`
	DefaultReason string            `json:"defaultReason"`
}

type providerPolicyFileRule struct {
	Tool     string            `json:"tool"`
	Match    map[string]string `json:"match"`
	Decision string            `json:"decision"`
	Reason   string            `json:"reason"`
	Limit    string            `json:"limit"`
	LimitKey string            `json:"limitKey"`
	Hours    string            `json:"hours"`
	Days     []string          `json:"days"`
	Timezone string            `json:"timezone"`
	Reaches  []string          `json:"reaches"`
	// Shell fields, run_shell_command only (provider_shell.go).
	Argv      []string `json:"argv"`
	Argv0     string   `json:"argv0"`
	Options   []string `json:"options"`
	Assigns   []string `json:"assigns"`
	Redirects string   `json:"redirects"`
	Reads     []string `json:"reads"`
	Writes    []string `json:"writes"`
	Complex   bool     `json:"complex"`
}

// maxProviderPolicyFile bounds the policy read from disk.
const maxProviderPolicyFile = 4 << 20

// providerPolicy is a validated policy file.
type providerPolicy struct {
	rules         []providerPolicyRule
	defaultAllow  bool
	defaultReason string
	warnings      []string // what loading accepted but the operator should know
	budgets       providerBudgets
	shell         bool // some rule has shell fields: parse run_shell_command calls
}

type providerPolicyRule struct {
	tool   string
	names  providerRuleTool
	args   []providerArgMatch
	allow  bool
	reason string
	limit  *providerLimit     // nil: no budget
	window *providerWindow    // nil: always
	shell  *providerShellRule // nil: no shell fields
	// reaches are the cleaned absolute paths of "reaches"; nil: none.
	reaches []string
}

type providerArgMatch struct {
	raw     string   // the pointer as written, for messages
	pointer []string // unescaped reference tokens
	re      *regexp.Regexp
}

// providerDecision is what the policy says about one call; Rule is the index
// of the matching rule, -1 for the default.
type providerDecision struct {
	Decision
	Rule int
}

func loadProviderPolicy(file string) (*providerPolicy, error) {
	return loadOperatorFile("policy", file, maxProviderPolicyFile, parseProviderPolicy)
}

// loadOperatorFile reads an operator's file of at most limit bytes and
// parses it; an error names what the file is, and the file.
func loadOperatorFile[T any](what, file string, limit int, parse func([]byte) (T, error)) (T, error) {
	var v T
	f, err := os.Open(file)
	if err != nil {
		return v, fmt.Errorf("%s %q: %w", what, file, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err == nil && len(data) > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	if err == nil {
		v, err = parse(data)
	}
	if err != nil {
		return v, fmt.Errorf("%s %q: %w", what, file, err)
	}
	return v, nil
}

// parseProviderPolicy validates a policy file's content. The file is JSONC
// as a settings file is (comments, trailing commas, a byte order mark),
// checked strictly after that pre-pass, so an error's line and column point
// into the file as written.
func parseProviderPolicy(orig []byte) (*providerPolicy, error) {
	data := blankJSONC(orig)
	if err := jsonSyntaxCheck(orig, data); err != nil {
		return nil, err
	}
	var pf providerPolicyFile
	if err := decodeStrict(data, &pf); err != nil {
		return nil, nearestMember(err, &pf)
	}
	pol := &providerPolicy{defaultReason: pf.DefaultReason}
	switch pf.Default {
	case "", "deny":
	case "allow":
		pol.defaultAllow = true
	default:
		return nil, fmt.Errorf(`default %q: want "allow" or "deny"`, pf.Default)
	}
	if err := checkProviderReason(pf.DefaultReason, pol.defaultAllow); err != nil {
		return nil, fmt.Errorf("defaultReason: %w", err)
	}
	for i, raw := range pf.Rules {
		var fr providerPolicyFileRule
		if err := decodeStrict(raw, &fr); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, nearestMember(err, &fr))
		}
		r, warning, err := compileProviderRule(fr)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		if warning != "" {
			pol.warnings = append(pol.warnings, fmt.Sprintf("rule %d: %s", i, warning))
		}
		pol.shell = pol.shell || r.shell != nil
		pol.rules = append(pol.rules, r)
	}
	return pol, nil
}

// nearestMember adds to an unknown-member error of decoding into v the
// member of v nearest to the one given, as the settings files offer one.
func nearestMember(err error, v any) error {
	msg := err.Error()
	i := strings.Index(msg, `unknown field "`)
	if i < 0 {
		return err
	}
	name, _, ok := strings.Cut(msg[i+len(`unknown field "`):], `"`)
	if !ok {
		return err
	}
	var names []string
	for _, f := range jsonFields(reflect.TypeOf(v).Elem()) {
		names = append(names, f.name)
	}
	if near := closestKey(name, names); near != "" {
		return fmt.Errorf("%w (did you mean %q?)", err, near)
	}
	return err
}

func compileProviderRule(fr providerPolicyFileRule) (r providerPolicyRule, warning string, err error) {
	r = providerPolicyRule{tool: fr.Tool, reason: fr.Reason}
	if r.names, warning, err = compileProviderTool(fr.Tool); err != nil {
		return r, "", err
	}
	if r, err = compileProviderRuleRest(r, fr); err != nil {
		return r, "", err
	}
	if r.shell, err = compileProviderShellRule(fr, r.allow, r.names); err != nil {
		return r, "", err
	}
	if r.reaches, err = compileProviderReaches(fr, r.allow, r.names); err != nil {
		return r, "", err
	}
	if _, ok := fr.Match["/command"]; ok && r.names.matches(fr.Tool, shellToolName) {
		w := `match "/command" is a regular expression over the raw text, which quoting dodges; prefer argv, argv0 and options`
		if warning != "" {
			w = warning + "; " + w
		}
		warning = w
	}
	return r, warning, nil
}

func compileProviderRuleRest(r providerPolicyRule, fr providerPolicyFileRule) (providerPolicyRule, error) {
	switch fr.Decision {
	case "allow":
		r.allow = true
	case "deny":
	default:
		return r, fmt.Errorf(`decision %q: want "allow" or "deny"`, fr.Decision)
	}
	if err := checkProviderReason(fr.Reason, r.allow); err != nil {
		return r, err
	}
	pointers := make([]string, 0, len(fr.Match))
	for p := range fr.Match {
		pointers = append(pointers, p)
	}
	sort.Strings(pointers)
	for _, p := range pointers {
		tokens, err := parseJSONPointer(p)
		if err != nil {
			return r, err
		}
		re, err := regexp.Compile(fr.Match[p])
		if err != nil {
			return r, fmt.Errorf("invalid regexp for %q: %w", p, err)
		}
		r.args = append(r.args, providerArgMatch{raw: p, pointer: tokens, re: re})
	}
	var err error
	if r.limit, err = compileProviderLimit(fr.Limit, fr.LimitKey, r.allow); err != nil {
		return r, err
	}
	if r.window, err = compileProviderWindow(fr.Hours, fr.Days, fr.Timezone); err != nil {
		return r, err
	}
	return r, nil
}

// The tools "reaches" applies to: the recursive searches, by their
// canonical names, and the pointers of the patterns that could lead them
// out of their root (glob's pattern; grep_search's file filter).
const (
	providerGrepToolName = "grep_search"
	providerGlobToolName = "glob"
)

var providerSearchPatterns = map[string]string{providerGlobToolName: "pattern", providerGrepToolName: "glob"}

// compileProviderReaches checks "reaches": on a deny rule whose tool means
// only grep_search or glob, one or more absolute paths, kept cleaned. An
// allow rule cannot say it: a search that may reach a path may as well
// reach everything else.
func compileProviderReaches(fr providerPolicyFileRule, allow bool, tool providerRuleTool) ([]string, error) {
	if fr.Reaches == nil {
		return nil, nil
	}
	names, ok := ruleToolNames(fr.Tool)
	if !ok || tool.glob || slices.ContainsFunc(names, func(n string) bool { return providerSearchPatterns[n] == "" }) {
		return nil, fmt.Errorf("tool %q: reaches applies only to %q and %q (or Grep, Glob)", fr.Tool, providerGrepToolName, providerGlobToolName)
	}
	if allow {
		return nil, errors.New(`reaches on an allow rule: reaches only denies; allow a search by its root with "match" on "/path"`)
	}
	if len(fr.Reaches) == 0 {
		return nil, errors.New(`reaches []: want at least one path, e.g. ["/srv/work/secrets"]`)
	}
	out := make([]string, 0, len(fr.Reaches))
	for _, p := range fr.Reaches {
		if !path.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
			return nil, fmt.Errorf(`reaches %q: want an absolute path, e.g. "/srv/work/secrets"`, p)
		}
		out = append(out, path.Clean(p))
	}
	return out, nil
}

// reachesAny reports whether a call of toolName with args could read one
// of the paths: its root ("/path") is one of them, lies beneath one or
// holds one, compared cleaned and component by component, so that
// /srv/work/secrets2 is not beneath /srv/work/secrets. Every doubt
// reaches: a root that is missing, not a string or not absolute (the
// runtime fills in the absolute session cwd; another client may not), and
// a pattern that could leave the root, one that is absolute or holds "..".
func reachesAny(paths []string, toolName string, args any) bool {
	root, ok := selectJSONPointer(args, []string{"path"})
	s, isString := root.(string)
	if !ok || !isString || !path.IsAbs(s) {
		return true
	}
	if name := providerSearchPatterns[toolName]; name != "" {
		if v, ok := selectJSONPointer(args, []string{name}); ok {
			pat, isString := v.(string)
			if !isString || strings.HasPrefix(pat, "/") || strings.Contains(pat, "..") {
				return true
			}
		}
	}
	s = path.Clean(s)
	for _, p := range paths {
		if pathUnder(s, p) || pathUnder(p, s) {
			return true
		}
	}
	return false
}

// checkProviderReason validates a reason at load time, so the provider never
// sends a reason the client would reject.
func checkProviderReason(reason string, allow bool) error {
	if reason == "" {
		return nil
	}
	if allow {
		return errors.New("a reason is only allowed on a deny")
	}
	if why := reasonUnsafe(reason); why != "" {
		return fmt.Errorf("unsafe reason %q: %s", reason, why)
	}
	return nil
}

// parseJSONPointer splits an RFC 6901 pointer into unescaped reference tokens.
// The empty pointer (the whole arguments object) can never select a string,
// so it is refused.
func parseJSONPointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("invalid JSON Pointer %q: must start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("invalid JSON Pointer %q: ~ must be followed by 0 or 1", p)
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// selectJSONPointer returns the value tokens select in v, if any.
func selectJSONPointer(v any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[t]; !ok {
				return nil, false
			}
		case []any:
			// An array index is decimal without leading zeros; "-" selects nothing.
			if t == "" || (len(t) > 1 && t[0] == '0') || strings.TrimLeft(t, "0123456789") != "" {
				return nil, false
			}
			i, err := strconv.Atoi(t)
			if err != nil || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// matches reports whether the rule applies to the call. A boolean is
// tested as the text "true" or "false", its only spelling, so that a rule
// can single out is_background true. Any other value that is not a string
// cannot be tested by a regular expression: a deny rule then applies, an
// allow rule does not, so that {"command":["curl"]} cannot slip past a deny
// written for strings, nor 1e3 past one written for "1000".
func (r *providerPolicyRule) matches(toolName string, args any) bool {
	if !r.names.matches(r.tool, toolName) {
		return false
	}
	if r.reaches != nil && !reachesAny(r.reaches, toolName, args) {
		return false
	}
	for _, m := range r.args {
		v, ok := selectJSONPointer(args, m.pointer)
		if !ok {
			return false
		}
		s, isString := v.(string)
		if b, isBool := v.(bool); isBool {
			s, isString = strconv.FormatBool(b), true
		}
		if !isString {
			if r.allow {
				return false
			}
			continue
		}
		if !m.re.MatchString(s) {
			return false
		}
	}
	return true
}

// decide applies the policy to one call of no session, now.
func (pol *providerPolicy) decide(toolName string, args any) providerDecision {
	return pol.decideCall(&providerCall{Tool: toolName, Args: args, At: time.Now()})
}

// decideCall applies the policy to one call: the first rule that matches
// decides, else the default. A rule with a window matches only inside it. A
// rule with a limit matches, and denies with the limit's reason when its
// budget is spent; an allowed call is counted. When the default denies a
// call an allow rule would have matched inside its window, the reason says
// so.
//
// A run_shell_command call meets the rules with shell fields as the simple
// commands it is made of (provider_shell.go, parsed once per call): a deny
// rule with shell fields decides first, wherever it stands, when it matches
// any of them; an allow rule with shell fields matches the call when it
// and the shell allow rules before it together match every one of them.
func (pol *providerPolicy) decideCall(call *providerCall) providerDecision {
	d, _ := pol.decideExplained(call, false)
	return d
}

// providerShellVerdict is which rule met one simple command, for --explain.
type providerShellVerdict struct {
	unit *providerShellUnit
	rule int // -1: none
}

func (pol *providerPolicy) decideExplained(call *providerCall, explain bool) (providerDecision, []providerShellVerdict) {
	var sc *providerShellCall
	var verdicts []providerShellVerdict
	if pol.shell && call.Tool == shellToolName {
		sc = parseProviderShellCall(call.Args)
		verdicts = make([]providerShellVerdict, len(sc.units))
		for k := range sc.units {
			verdicts[k] = providerShellVerdict{&sc.units[k], -1}
		}
		for i := range pol.rules {
			r := &pol.rules[i]
			if r.shell == nil || r.allow || !r.matches(call.Tool, call.Args) || r.window != nil && !r.window.contains(call.At) {
				continue
			}
			hit := false
			for k := range sc.units {
				if r.shell.matchUnit(false, &sc.units[k]) {
					hit = true
					if verdicts[k].rule < 0 {
						verdicts[k].rule = i
					}
				}
			}
			if hit && !explain {
				return providerDecision{Decision{false, r.reason}, i}, nil
			}
		}
		// Explaining: the first deny rule in the file that met a command
		// decides, as above.
		first := -1
		for k := range verdicts {
			if r := verdicts[k].rule; r >= 0 && (first < 0 || r < first) {
				first = r
			}
		}
		if first >= 0 {
			pol.explainAllows(call, sc, verdicts)
			return providerDecision{Decision{false, pol.rules[first].reason}, first}, verdicts
		}
	}
	covered := 0
	outside := -1
	for i := range pol.rules {
		r := &pol.rules[i]
		if r.shell != nil && (sc == nil || !r.allow) {
			continue // not a shell call, or a shell deny checked above
		}
		if !r.matches(call.Tool, call.Args) {
			continue
		}
		if r.window != nil && !r.window.contains(call.At) {
			if r.allow && outside < 0 {
				outside = i
			}
			continue
		}
		if r.shell != nil {
			for k := range sc.units {
				if verdicts[k].rule < 0 && r.shell.matchUnit(true, &sc.units[k]) {
					verdicts[k].rule = i
					covered++
				}
			}
			if covered == 0 || covered < len(sc.units) {
				continue
			}
		}
		if r.limit != nil {
			if ok, wait := pol.budgets.take(i, r.limit, call); !ok {
				return providerDecision{Decision{Reason: limitReason(i, r.limit, wait)}, i}, verdicts
			}
		}
		return providerDecision{Decision{r.allow, r.reason}, i}, verdicts
	}
	if !pol.defaultAllow && outside >= 0 {
		return providerDecision{Decision{Reason: windowReason(outside, pol.rules[outside].window)}, -1}, verdicts
	}
	return providerDecision{Decision{pol.defaultAllow, pol.defaultReason}, -1}, verdicts
}

// explainAllows fills in, for --explain, the shell allow rule that meets
// each command no deny met, when a deny decided the call.
func (pol *providerPolicy) explainAllows(call *providerCall, sc *providerShellCall, verdicts []providerShellVerdict) {
	for i := range pol.rules {
		r := &pol.rules[i]
		if r.shell == nil || !r.allow || !r.matches(call.Tool, call.Args) || r.window != nil && !r.window.contains(call.At) {
			continue
		}
		for k := range sc.units {
			if verdicts[k].rule < 0 && r.shell.matchUnit(true, &sc.units[k]) {
				verdicts[k].rule = i
			}
		}
	}
}
