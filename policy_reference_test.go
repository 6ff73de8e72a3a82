// policy_reference_test.go keeps docs/policy-reference.md true: a row per
// built-in tool naming every argument of its schema as a pointer, every
// example rule loading with the provider's policy loader, and what the
// page says about matching.
package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const policyReferencePage = "docs/policy-reference.md"

// TestPolicyReferenceTable: every built-in tool has a row in the policy
// reference's table, and the row names every argument of its schema as a
// JSON Pointer, so the page changes when a tool does.
func TestPolicyReferenceTable(t *testing.T) {
	b, err := os.ReadFile(policyReferencePage)
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	mustWrite(t, filepath.Join(cwd, "f"), "x")
	minimal := map[string]map[string]any{
		toolReadFile: {"file_path": "f"}, toolWriteFile: {"file_path": "f", "content": ""},
		toolEdit: {"file_path": "f", "old_string": "x", "new_string": "y"}, toolListDirectory: {"path": "."},
		toolGlob: {"pattern": "*"}, toolGrepSearch: {"pattern": "x"}, toolShell: {"command": "true"},
	}
	rows, filledRows := map[string]string{}, map[string]string{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, ok := builtinTool(name); ok {
			rows[name], filledRows[name] = cells[2], cells[3]
		}
	}
	for _, name := range builtinToolNames() {
		row, ok := rows[name]
		if !ok {
			t.Errorf("%s: no table row for tool %q", policyReferencePage, name)
			continue
		}
		spec, _ := builtinTool(name)
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(spec.parametersSchema(), &schema); err != nil {
			t.Fatal(err)
		}
		if len(schema.Properties) == 0 {
			t.Errorf("tool %q: schema has no properties", name)
		}
		for arg := range schema.Properties {
			if !strings.Contains(row, "`/"+arg+"`") {
				t.Errorf("%s: row of %q lacks the pointer `/%s`: %q", policyReferencePage, name, arg, row)
			}
		}
		given := maps.Clone(minimal[name])
		args, err := spec.normalize(&toolEnv{Cwd: cwd}, maps.Clone(given))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for arg := range args {
			if _, ok := given[arg]; !ok && !strings.Contains(filledRows[name], "`/"+arg+"`") {
				t.Errorf("%s: row of %q does not say that `/%s` is filled in: %q", policyReferencePage, name, arg, filledRows[name])
			}
		}
	}
}

// TestPolicyReferenceAliases: each alias of the page's table means the
// tools it lists there, and loads in a rule.
func TestPolicyReferenceAliases(t *testing.T) {
	b, err := os.ReadFile(policyReferencePage)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## Aliases")
	seen := 0
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		var want []string
		for _, n := range strings.Split(cells[2], ",") {
			want = append(want, strings.Trim(strings.TrimSpace(n), "`"))
		}
		slices.Sort(want)
		for _, a := range strings.Split(cells[1], ",") {
			alias := strings.Trim(strings.TrimSpace(a), "`")
			seen++
			got, ok := ruleToolNames(alias)
			got = slices.Sorted(slices.Values(got))
			if !ok || !slices.Equal(got, want) {
				t.Errorf("%s: alias %q means %v, the page says %v", policyReferencePage, alias, got, want)
			}
			if _, err := parseProviderPolicy([]byte(`{"rules": [{"tool": "` + alias + `", "decision": "allow"}]}`)); err != nil {
				t.Errorf("alias %q does not load: %v", alias, err)
			}
		}
	}
	for _, alias := range providerAliasNames {
		if !strings.Contains(section, "`"+alias+"`") {
			t.Errorf("%s: alias %q is not in the table", policyReferencePage, alias)
		}
	}
	if seen == 0 {
		t.Fatalf("%s: no alias table", policyReferencePage)
	}
}

// TestPolicyReferenceExamples: every ```json block of the policy reference
// loads with the provider's policy loader, a lone rule as a policy of that
// rule, with no warning.
func TestPolicyReferenceExamples(t *testing.T) {
	b, err := os.ReadFile(policyReferencePage)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "```json\n")
	if len(parts) < len(builtinToolNames())+1 {
		t.Fatalf("%s: %d json blocks, want one per built-in tool at least", policyReferencePage, len(parts)-1)
	}
	for i, part := range parts[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("json block %d is not closed", i)
		}
		doc := block
		if !strings.Contains(block, `"rules"`) {
			doc = `{"rules": [` + block + `]}`
		}
		pol, err := parseProviderPolicy([]byte(doc))
		if err != nil {
			t.Errorf("json block %d does not load: %v\n%s", i, err, block)
			continue
		}
		if len(pol.warnings) > 0 {
			t.Errorf("json block %d loads with warnings %q\n%s", i, pol.warnings, block)
		}
	}
}

// TestPolicyReferenceClaims: what the page says about matching holds.
func TestPolicyReferenceClaims(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(`{"rules": [
		{"tool": "Read", "match": {"/file_path": "^/srv/work/"}, "decision": "allow"},
		{"tool": "grep_search", "match": {"/limit": "^100$"}, "decision": "allow"},
		{"tool": "grep_search", "match": {"/limit": "x"}, "decision": "deny"},
		{"tool": "run_shell_command", "match": {"/is_background": "^true$"}, "decision": "deny"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool string
		args string
		rule int
	}{
		{"read_file", `{"file_path": "/srv/work/a"}`, 0},
		{"list_directory", `{"path": "/srv/work"}`, -1},
		{"grep_search", `{"pattern": "x", "path": "/srv/work", "limit": 100}`, 2},
		{"run_shell_command", `{"command": "ls", "is_background": true}`, 3},
		{"run_shell_command", `{"command": "ls", "is_background": false}`, -1},
	} {
		var args any
		if err := decodeJSONNumber(tt.args, &args); err != nil {
			t.Fatal(err)
		}
		if got := pol.decide(tt.tool, args).Rule; got != tt.rule {
			t.Errorf("%s %s: decided by rule %d, want %d", tt.tool, tt.args, got, tt.rule)
		}
	}
	shell, err := parseProviderPolicy([]byte(`{"rules": [{"tool": "run_shell_command", "argv": ["git", "{status,diff,log,show}"],
		"match": {"/directory": "^/srv/work(/|$)"}, "decision": "allow"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{"/srv/work/app": true, "/srv/other": false} {
		args := map[string]any{"command": "git status", "directory": dir}
		if got := shell.decide(toolShell, args).Rule == 0; got != want {
			t.Errorf("git status in %s: allowed by the rule %v, want %v", dir, got, want)
		}
	}
	if _, err := parseProviderPolicy([]byte(`{"rules": [{"tool": "mcp__github", "decision": "deny"}]}`)); err == nil || !strings.Contains(err.Error(), `"mcp__github__*"`) {
		t.Errorf("mcp__github: err %v, want a hint naming mcp__github__*", err)
	}
}

func decodeJSONNumber(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	return d.Decode(v)
}

// policyReferenceRule is the page's ```json block that follows the line
// starting with lead, as a policy of that one rule.
func policyReferenceRule(t testing.TB, lead string) string {
	t.Helper()
	b, err := os.ReadFile(policyReferencePage)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+lead)
	if !ok {
		t.Fatalf("%s: no line starting with %q", policyReferencePage, lead)
	}
	_, after, ok = strings.Cut(after, "```json\n")
	block, _, closed := strings.Cut(after, "```")
	if !ok || !closed {
		t.Fatalf("%s: no json block after %q", policyReferencePage, lead)
	}
	return `{"rules": [` + block + `], "default": "allow"}`
}

// TestPolicyReferenceSearchRule: the page's grep_search rule does what it
// says, no searching of the secrets folder with or without a path: a
// search from the folder, beneath it or above it is denied; one from a
// sibling, or from a folder whose name only begins like it, is not.
func TestPolicyReferenceSearchRule(t *testing.T) {
	pol, err := parseProviderPolicy([]byte(policyReferenceRule(t, "`grep_search`: no searching of the secrets folder")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path   string
		denied bool
	}{
		{"/srv/work", true}, // a search without path from the session cwd
		{"/srv/work/secrets", true},
		{"/srv/work/secrets/old", true},
		{"/", true},
		{"/srv/work/other", false},
		{"/srv/work/secrets2", false},
	} {
		d := pol.decide(toolGrepSearch, map[string]any{"pattern": "x", "path": tt.path, "limit": int64(grepDefaultLimit)})
		if d.Allowed == tt.denied {
			t.Errorf("grep_search from %s: allowed %v, want denied %v", tt.path, d.Allowed, tt.denied)
		}
		if tt.denied && d.Reason != "The secrets folder is not searchable by policy" {
			t.Errorf("grep_search from %s: reason %q", tt.path, d.Reason)
		}
	}
}

// TestPolicyReferenceSearchRuleThroughACP: the page's grep_search rule, the
// work tree moved to a temporary folder, in a reference provider that
// guards a real acp: a search without path from the work tree is denied
// and reads nothing of the secrets folder; a search of a sibling folder
// runs.
func TestPolicyReferenceSearchRuleThroughACP(t *testing.T) {
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(work, "secrets", "creds.txt"), "TOKEN=hunter2\n")
	mustWrite(t, filepath.Join(work, "other", "notes.txt"), "hunter2 is a weak password\n")
	policyFile := filepath.Join(t.TempDir(), "policy.json")
	mustWrite(t, policyFile, strings.ReplaceAll(policyReferenceRule(t, "`grep_search`: no searching of the secrets folder"), "/srv/work", work))
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: policyFile, AuditPath: audit, AuditArguments: true})
	c := startACP(t, nil, []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url},
		envGuardToken+"="+providerTestToken)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := c.newSession(work)
	c.prompt(sid, `call grep_search {"pattern":"hunter2"}`+"\n"+`call grep_search {"pattern":"hunter2","path":"other"}`, "")

	ups := c.sessionUpdates(sid)
	if got := agentText(ups); got != "grep_search: denied\ngrep_search: completed\n" {
		t.Errorf("model answer = %q", got)
	}
	for _, u := range ups {
		if strings.Contains(u.Text, "TOKEN=") || strings.Contains(u.Text, "creds.txt") {
			t.Errorf("the secrets folder was read: %q", u.Text)
		}
		if u.SessionUpdate == "tool_call_update" && u.Status == statusFailed && u.Text != "The secrets folder is not searchable by policy" {
			t.Errorf("denied call shows %q", u.Text)
		}
	}
	records := readProviderAudit(t, audit)
	if len(records) != 2 || records[0].Decision != "deny" || records[1].Decision != "allow" {
		t.Fatalf("provider decisions = %+v, want deny then allow", records)
	}
	var args map[string]any
	if err := json.Unmarshal(records[0].Arguments, &args); err != nil || args["path"] != work {
		t.Errorf("the pathless search reached the provider as %s, want the path %s", records[0].Arguments, work)
	}
}
