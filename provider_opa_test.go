// provider_opa_test.go tests "acpguard provider --opa": the URL and flag
// rules, the mapping of a fake OPA's answers (allow, deny, and every way of
// giving no decision, which denies), the input with the parsed shell
// commands, and examples/policy.rego on a real opa binary when one is on PATH.
package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseOPAURL(t *testing.T) {
	good := map[string]string{
		"http://127.0.0.1:8181/v1/data/acpguard/decision": "http://127.0.0.1:8181/v1/data/acpguard/decision",
		"http://LOCALHOST:8181/v1/data/a":                 "http://localhost:8181/v1/data/a",
		"http://[::1]:9/v1/data/fleet/v2/allow_it":        "http://[::1]:9/v1/data/fleet/v2/allow_it",
		"http://127.0.0.1/v1/data/x":                      "http://127.0.0.1:80/v1/data/x",
	}
	for raw, want := range good {
		u, err := parseOPAURL(raw)
		if err != nil || u.String() != want {
			t.Errorf("parseOPAURL(%q) = %v, %v; want %s", raw, u, err, want)
		}
	}
	bad := map[string]string{
		"http://10.0.0.5:8181/v1/data/acpguard/decision":    "host must be 127.0.0.1, localhost or [::1]",
		"http://opa.internal:8181/v1/data/acpguard":         "host must be",
		"https://127.0.0.1:8181/v1/data/acpguard":           "must be an absolute http URL",
		"127.0.0.1:8181/v1/data/acpguard":                   "not a valid URL",
		"//127.0.0.1:8181/v1/data/acpguard":                 "must be an absolute http URL",
		"http://127.0.0.1:8181/v1/data":                     "path must be /v1/data/",
		"http://127.0.0.1:8181/v1/data/":                    "path must be /v1/data/",
		"http://127.0.0.1:8181/v1/policies/acpguard":        "path must be /v1/data/",
		"http://127.0.0.1:8181/v1/data/a/../b":              "path must be /v1/data/",
		"http://127.0.0.1:8181/v1/data/a?pretty=true":       "must not have a query",
		"http://127.0.0.1:8181/v1/data/a#x":                 "must not have a fragment",
		"http://127.0.0.1:8181/v1/data/%61":                 "percent-encoding",
		"http://u:p@127.0.0.1:8181/v1/data/a":               "must not contain userinfo",
		"http://127.0.0.1:0/v1/data/a":                      "port must be 1-65535",
		"http://127.0.0.1:/v1/data/a":                       "port must not be empty",
		"http://127.0.0.1.nip.io:8181/v1/data/acpguard/dec": "host must be",
	}
	for raw, rule := range bad {
		_, err := parseOPAURL(raw)
		assertUsageError(t, err, "--opa", raw, rule, false)
		if err != nil && !strings.Contains(err.Error(), "hint: --opa "+opaExampleURL) {
			t.Errorf("error %q has no hint", err)
		}
	}
}

func TestProviderOPAArgs(t *testing.T) {
	const u = "http://127.0.0.1:8181/v1/data/acpguard/decision"
	sys, _, _ := testSystem(envGuardToken + "=" + testToken)
	got, err := parseProviderArgs([]string{"--opa", u}, sys)
	if err != nil || got.OPA == nil || got.OPA.String() != u || got.PolicyFile != "" {
		t.Fatalf("--opa: %+v, %v", got, err)
	}
	_, err = parseProviderArgs([]string{"--opa", u, "--policy", "p.json"}, sys)
	assertUsageError(t, err, "--policy", "p.json", "give one: the policy file or Open Policy Agent decides", false)
	_, err = parseProviderArgs([]string{"--opa", "http://192.168.1.2:8181/v1/data/a"}, sys)
	assertUsageError(t, err, "--opa", "http://192.168.1.2:8181/v1/data/a", "host must be", false)
	_, err = parseProviderArgs([]string{"--opa", u, "--opa", u}, sys)
	assertUsageError(t, err, `"--opa"`, "--opa", "given more than once", false)

	// The real binary exits 2 and says why.
	code, _, stderr := runAcpguard(t, []string{"provider", "--opa", u, "--policy", "examples/policy.json"}, envGuardToken+"="+testToken)
	if code != exitUsage || !strings.Contains(stderr, "give one") {
		t.Errorf("exit %d, stderr %q; want 2 naming both flags", code, stderr)
	}
}

// fakeOPA is an OPA stand-in on loopback: it records each input and answers
// with reply.
type fakeOPA struct {
	srv    *httptest.Server
	mu     sync.Mutex
	inputs []map[string]any
	reply  func(w http.ResponseWriter)
}

func startFakeOPA(t *testing.T) *fakeOPA {
	f := &fakeOPA{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var doc struct {
			Input map[string]any `json:"input"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/data/acpguard/decision" || r.Header.Get("Content-Type") != "application/json" || decodeStrict(body, &doc) != nil {
			t.Errorf("fake OPA got %s %s %q %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"), body)
		}
		f.mu.Lock()
		f.inputs = append(f.inputs, doc.Input)
		reply := f.reply
		f.mu.Unlock()
		reply(w)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOPA) answer(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reply = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func (f *fakeOPA) lastInput() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inputs[len(f.inputs)-1]
}

func startOPAProvider(t *testing.T, opaURL, audit string) (*refProvider, *providerClient) {
	u, err := parseOPAURL(opaURL)
	if err != nil {
		t.Fatal(err)
	}
	p := startRefProvider(t, providerOptions{OPA: u, AuditPath: audit})
	return p, testProviderClient(t, p.url, 10*time.Second)
}

func TestProviderOPADecides(t *testing.T) {
	f := startFakeOPA(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p, c := startOPAProvider(t, f.srv.URL+"/v1/data/acpguard/decision", audit)
	if !strings.Contains(p.stderr.String(), "deciding with Open Policy Agent at "+f.srv.URL+"/v1/data/acpguard/decision") {
		t.Errorf("stderr %q does not name the OPA URL", p.stderr.String())
	}
	shell := prepareRequest{SessionID: "s-1", PromptID: "p-1", ToolCallID: "call-1", ToolName: "run_shell_command",
		Arguments: json.RawMessage(`{"command":"git log '--output=/elsewhere/f' && echo hi >> /tmp/x 2>&1; cat $(ls)"}`)}
	tests := []struct {
		name, body string
		call       prepareRequest
		allowed    bool
		reason     string
		decisionID string
	}{
		{"allow", `{"result":{"allow":true}}`, providerTestCall, true, "", ""},
		{"allow with decision id", `{"decision_id":"4ca636c1-55e4-417a-b1d8-4aceb67960d1","result":{"allow":true}}`, providerTestCall, true, "", "4ca636c1-55e4-417a-b1d8-4aceb67960d1"},
		{"deny with reason", `{"result":{"allow":false,"reason":"  git --output writes files  "}}`, shell, false, "git --output writes files", ""},
		{"deny without reason", `{"result":{"allow":false}}`, shell, false, "", ""},
		{"deny with a blank reason", `{"result":{"allow":false,"reason":" "}}`, shell, false, "", ""},
	}
	for i, tt := range tests {
		f.answer(200, tt.body)
		res := c.prepare(context.Background(), tt.call)
		if res.Category != "" || res.Allowed != tt.allowed || res.Reason != tt.reason {
			t.Errorf("%s: answer %+v, want allowed %v reason %q", tt.name, res, tt.allowed, tt.reason)
		}
		if !tt.allowed && tt.reason == "" && deniedReason(res.Reason) != denyDefaultReason {
			t.Errorf("%s: shown %q, want the generic text", tt.name, deniedReason(res.Reason))
		}
		line := readProviderAudit(t, audit)[i]
		if line.Decision != providerDecisionName(tt.allowed) || line.Rule != -1 || line.OPADecisionID != tt.decisionID || line.OPAError != "" || line.ToolCallID != tt.call.ToolCallID {
			t.Errorf("%s: audit line %+v", tt.name, line)
		}
	}

	// The input is the prepare request as sent, plus the parsed commands.
	in := f.lastInput()
	if in["toolName"] != "run_shell_command" || in["sessionId"] != "s-1" || in["protocolVersion"] != float64(1) || in["complex"] != true {
		t.Errorf("input %v lacks the request's fields or complex", in)
	}
	if args, _ := in["arguments"].(map[string]any); args["command"] != "git log '--output=/elsewhere/f' && echo hi >> /tmp/x 2>&1; cat $(ls)" {
		t.Errorf("input arguments %v", in["arguments"])
	}
	got, _ := json.Marshal(in["commands"])
	const want = `[{"argv":["git","log","--output=/elsewhere/f"],"assigns":[],"complex":false,"redirects":[],"why":""},` +
		`{"argv":["echo","hi"],"assigns":[],"complex":false,"redirects":[{"fd":-1,"op":"\u003e\u003e","target":"/tmp/x"},{"fd":2,"op":"\u003e\u0026","target":"1"}],"why":""},` +
		`{"argv":["ls"],"assigns":[],"complex":false,"redirects":[],"why":""},` +
		`{"argv":["cat","$(ls)"],"assigns":[],"complex":true,"redirects":[],"why":"command substitution"}]`
	if string(got) != want {
		t.Errorf("input commands\n%s\nwant\n%s", got, want)
	}
	// Other tools carry no commands.
	f.answer(200, `{"result":{"allow":true}}`)
	c.prepare(context.Background(), providerTestCall)
	if in := f.lastInput(); in["commands"] != nil || in["complex"] != nil || in["toolName"] != "read_file" {
		t.Errorf("read_file input %v", in)
	}
	// Metrics count OPA's decisions as the policy's.
	metrics := scrapeOPAProviderMetrics(t, p.url)
	for _, s := range []string{"acpguard_provider_opa_failures_total 0\n", `acpguard_provider_decisions_total{outcome="allow"} 3`, `acpguard_provider_decisions_total{outcome="deny"} 3`, `acpguard_provider_policy_decisions_total{decision="deny"} 3`} {
		if !strings.Contains(metrics, s) {
			t.Errorf("metrics lack %s:\n%s", s, metrics)
		}
	}
}

func scrapeOPAProviderMetrics(t *testing.T, base string) string {
	req, _ := http.NewRequest(http.MethodGet, base+metricsPath, nil)
	req.Header.Set("Authorization", "Bearer "+providerTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestProviderOPAFailsClosed: anything but a well-formed decision is a
// denial with the provider's own reason, logged and audited with why.
func TestProviderOPAFailsClosed(t *testing.T) {
	f := startFakeOPA(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p, c := startOPAProvider(t, f.srv.URL+"/v1/data/acpguard/decision", audit)
	big := `{"result":{"allow":true}}` + strings.Repeat(" ", maxOPAResponse)
	tests := []struct {
		name, body string
		status     int
		category   string
		detail     string
	}{
		{"undefined rule", `{}`, 200, failSchema, `no "result"`},
		{"undefined rule with decision id", `{"decision_id":"d-1"}`, 200, failSchema, `no "result"`},
		{"allow is a string", `{"result":{"allow":"true"}}`, 200, failSchema, "not a JSON boolean"},
		{"allow missing", `{"result":{"reason":"x"}}`, 200, failSchema, "missing"},
		{"result is a boolean", `{"result":true}`, 200, failSchema, `"result" true`},
		{"result is a set of rules", `{"result":{"allow":true,"deny":[]}}`, 200, failSchema, `unknown field "deny"`},
		{"Allow spelled otherwise", `{"result":{"Allow":true}}`, 200, failSchema, `unknown field "Allow"`},
		{"duplicate allow", `{"result":{"allow":false,"allow":true}}`, 200, failSchema, "duplicate"},
		{"extra top-level member", `{"result":{"allow":true},"metrics":{}}`, 200, failSchema, `unknown field "metrics"`},
		{"decision id not a string", `{"result":{"allow":true},"decision_id":7}`, 200, failSchema, "decision_id"},
		{"reason on an allow", `{"result":{"allow":true,"reason":"fine"}}`, 200, failSchema, "reason\" on an allow"},
		{"reason not a string", `{"result":{"allow":false,"reason":1}}`, 200, failUnsafeReason, "not a string"},
		{"reason with a control character", `{"result":{"allow":false,"reason":"a\u001b[31mb"}}`, 200, failUnsafeReason, "control character"},
		{"reason too long", `{"result":{"allow":false,"reason":"` + strings.Repeat("x", 501) + `"}}`, 200, failUnsafeReason, "more than 500"},
		{"malformed JSON", `{"result":`, 200, failMalformedJSON, "not one valid"},
		{"trailing value", `{"result":{"allow":true}} {}`, 200, failMalformedJSON, "not one valid"},
		{"status 500", `{"code":"internal_error"}`, 500, failHTTPStatus, "status 500"},
		{"status 404", `{"result":{"allow":true}}`, 404, failHTTPStatus, "status 404"},
		{"redirect", ``, 307, failHTTPStatus, "status 307"},
		{"oversized", big, 200, failOversizeResponse, "larger than"},
	}
	for i, tt := range tests {
		f.answer(tt.status, tt.body)
		if tt.status == 307 {
			f.mu.Lock()
			f.reply = func(w http.ResponseWriter) {
				w.Header().Set("Location", "/v1/data/allow_all")
				w.WriteHeader(307)
			}
			f.mu.Unlock()
		}
		res := c.prepare(context.Background(), shellPrepare("git status"))
		if res.Category != "" || res.Allowed || res.Reason != opaFailedReason {
			t.Errorf("%s: answer %+v, want a deny with %q", tt.name, res, opaFailedReason)
		}
		line := readProviderAudit(t, audit)[i]
		if line.Decision != "deny" || line.Reason != opaFailedReason || !strings.HasPrefix(line.OPAError, tt.category+": ") || !strings.Contains(line.OPAError, tt.detail) {
			t.Errorf("%s: audit line %+v, want opaError %s: ...%s...", tt.name, line, tt.category, tt.detail)
		}
		if tt.name == "undefined rule with decision id" && line.OPADecisionID != "d-1" {
			t.Errorf("%s: audit line %+v lacks the decision id", tt.name, line)
		}
	}
	if m := scrapeOPAProviderMetrics(t, p.url); !strings.Contains(m, "acpguard_provider_opa_failures_total "+strconv.Itoa(len(tests))+"\n") {
		t.Errorf("metrics do not count %d OPA failures:\n%s", len(tests), m)
	}
	log := p.stderr.String()
	if n := strings.Count(log, "opa gave no decision, denying"); n != len(tests) {
		t.Errorf("%d failures logged, want %d:\n%s", n, len(tests), log)
	}
	if !strings.Contains(log, "category=unsafe_reason") || !strings.Contains(log, "category=http_status") {
		t.Errorf("the log does not name the categories:\n%s", log)
	}
}

func shellPrepare(command string) prepareRequest {
	args, _ := json.Marshal(map[string]string{"command": command})
	return prepareRequest{SessionID: "s-1", PromptID: "p-1", ToolCallID: "call-1", ToolName: "run_shell_command", Arguments: args}
}

// TestProviderOPAUnreachable: a slow OPA, a closed port and a connection
// cut mid-answer deny within opaTimeout, under the client's guard timeout.
func TestProviderOPAUnreachable(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, `{"result":`)
		panic(http.ErrAbortHandler)
	}))
	defer cut.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tt := range []struct{ name, base, category string }{
		{"timeout", slow.URL, failTimeout},
		{"closed port", "http://" + closed, failTransport},
		{"cut answer", cut.URL, failTransport},
	} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		_, c := startOPAProvider(t, tt.base+"/v1/data/acpguard/decision", audit)
		start := time.Now()
		res := c.prepare(context.Background(), providerTestCall)
		if res.Category != "" || res.Allowed || res.Reason != opaFailedReason {
			t.Errorf("%s: answer %+v, want a deny", tt.name, res)
		}
		if d := time.Since(start); d > opaTimeout+testTimeout(time.Second) {
			t.Errorf("%s: took %v, more than opaTimeout %v", tt.name, d, opaTimeout)
		}
		if line := readProviderAudit(t, audit)[0]; !strings.HasPrefix(line.OPAError, tt.category+": ") {
			t.Errorf("%s: audit line %+v, want category %s", tt.name, line, tt.category)
		}
	}
	if opaTimeout >= defaultGuardTimeoutMs*time.Millisecond {
		t.Errorf("opaTimeout %v is not under the default guard timeout", opaTimeout)
	}
}

// TestProviderOPARealPolicy runs examples/policy.rego in a real OPA server
// when an opa binary is on PATH.
func TestProviderOPARealPolicy(t *testing.T) {
	opa, err := exec.LookPath("opa")
	if err != nil {
		t.Skip("no opa binary on PATH: install Open Policy Agent to run examples/policy.rego")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // opa binds it again: a free port, unless something takes it first
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, opa, "run", "--server", "--addr", addr, "--log-level", "error", "examples/policy.rego")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("opa's output:\n%s", out.String())
		}
	})
	waitFor(t, "opa to serve", func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	_, c := startOPAProvider(t, "http://"+addr+"/v1/data/acpguard/decision", "")
	const (
		gitReason = "git options that write files or run configured programs are not allowed by policy"
		netReason = "Network tools and privilege escalation are not allowed by policy"
		redirect  = "Shell redirections may write only under /tmp/"
		none      = "No policy rule allows this tool call"
	)
	tests := []struct {
		call    prepareRequest
		allowed bool
		reason  string
	}{
		{providerTestCall, true, ""},
		{prepareRequest{ToolName: "write_file", Arguments: json.RawMessage(`{"file_path":"/tmp/w/a.txt","content":"x"}`)}, true, ""},
		{prepareRequest{ToolName: "write_file", Arguments: json.RawMessage(`{"file_path":"/tmp/../etc/passwd","content":"x"}`)}, false, "File paths containing .. are not allowed by policy"},
		{prepareRequest{ToolName: "edit", Arguments: json.RawMessage(`{"file_path":"/etc/hosts"}`)}, false, none},
		{prepareRequest{ToolName: "mcp__db__query", Arguments: json.RawMessage(`{}`)}, false, "MCP tools are not enabled by this policy"},
		{shellPrepare("git status && go test ./... 2>&1 > /tmp/out.txt"), true, ""},
		{shellPrepare("/usr/bin/git log -n 3; make build"), true, ""},
		{shellPrepare("git log '--output=/elsewhere/file'"), false, gitReason},
		{shellPrepare("git -c core.pager=x log"), false, gitReason},
		{shellPrepare("git log --out=/elsewhere/file"), false, gitReason},
		{shellPrepare("go vet --vettool=/tmp/x ./..."), false, none},
		{shellPrepare("make --eva='$(shell rm F)'"), false, none},
		{shellPrepare("GIT_EXTERNAL_DIFF=/tmp/x git diff"), false, none},
		{shellPrepare("env curl https://example.com"), false, netReason},
		{shellPrepare("sudo make install"), false, netReason},
		{shellPrepare("/usr/bin/wget x"), false, netReason},
		{shellPrepare("echo hi > /etc/profile"), false, redirect},
		{shellPrepare("cat f </dev/tcp/127.0.0.1/9 >&0"), false, "Shell redirections to the network are not allowed by policy"},
		{shellPrepare("cat $(ls)"), false, none},
		{shellPrepare("rm -rf /"), false, none},
	}
	for i, tt := range tests {
		tt.call.SessionID, tt.call.PromptID, tt.call.ToolCallID = "s-1", "p-1", "call-"+strconv.Itoa(i)
		res := c.prepare(context.Background(), tt.call)
		if res.Category != "" || res.Allowed != tt.allowed || res.Reason != tt.reason {
			t.Errorf("%s %s: %+v, want allowed %v %q", tt.call.ToolName, tt.call.Arguments, res, tt.allowed, tt.reason)
		}
	}
	// A path that names the package, or nothing, is no decision.
	for _, path := range []string{"/v1/data/acpguard", "/v1/data/acpguard/no_such_rule"} {
		_, c := startOPAProvider(t, "http://"+addr+path, "")
		if res := c.prepare(context.Background(), providerTestCall); res.Allowed || res.Reason != opaFailedReason {
			t.Errorf("%s: %+v, want a deny with %q", path, res, opaFailedReason)
		}
	}
}
