// provider_shadow_test.go tests the provider's shadow mode and its log:
// a shadow provider sends allow and logs the deny it would have sent; logs
// follow --log-format and --log-level and never hold the token or, without
// --audit-arguments, the raw arguments.
package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// providerShadowDeniedCall is a call examples/policy.json denies by rule 8.
var providerShadowDeniedCall = prepareRequest{SessionID: "s-1", PromptID: "p-1", ToolCallID: "call-1", ToolName: "run_shell_command",
	Arguments: json.RawMessage(`{"command":"sudo touch /etc/shadow-marker"}`)}

func TestProviderShadowAllowsAndLogsWouldDeny(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit, Shadow: true})
	if !strings.HasPrefix(p.stderr.String(), providerShadowWarning) {
		t.Errorf("stderr %q does not start with the shadow warning", p.stderr.String())
	}
	c := testProviderClient(t, p.url, 5*time.Second)
	res := c.prepare(context.Background(), providerShadowDeniedCall)
	if !res.Allowed || res.Category != "" || res.Reason != "" {
		t.Fatalf("shadow answer %+v, want a plain allow", res)
	}
	allowed := providerTestCall // a call the policy allows too
	if res := c.prepare(context.Background(), allowed); !res.Allowed {
		t.Fatalf("shadow answer %+v, want allow", res)
	}
	lines := readProviderAudit(t, audit)
	if len(lines) != 2 {
		t.Fatalf("%d audit lines, want 2", len(lines))
	}
	const reason = "Destructive and network shell commands are not allowed by policy"
	if l := lines[0]; l.Decision != "allow" || !l.Shadow || l.WouldDecide != "deny" || l.Reason != reason || l.Rule != 8 || len(l.RequestID) != 32 {
		t.Errorf("audit line %+v, want decision allow, shadow, wouldDecide deny by rule 8", l)
	}
	if l := lines[1]; l.Decision != "allow" || !l.Shadow || l.WouldDecide != "allow" || l.Rule != 0 {
		t.Errorf("audit line %+v, want decision allow, shadow, wouldDecide allow", l)
	}
	// The log says it too, loudly, at the default level.
	log := p.stderr.String()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "wouldDecide=deny") || !strings.Contains(log, "toolCallId=call-1") {
		t.Errorf("stderr %q does not log the would-be deny", log)
	}
	if strings.Contains(log, "shadow-marker") {
		t.Error("the log holds raw arguments without --audit-arguments")
	}
}

// TestProviderShadowProcess: the real binary warns before it listens.
func TestProviderShadowProcess(t *testing.T) {
	pp := startProviderProcess(t, "--shadow")
	if got := pp.stderrText(); !strings.Contains(got, strings.TrimSuffix(providerShadowWarning, "\n")) {
		t.Errorf("stderr %q lacks the shadow warning", got)
	}
	if res := testProviderClient(t, pp.url, 5*time.Second).prepare(context.Background(), providerShadowDeniedCall); !res.Allowed {
		t.Errorf("shadow process answered %+v", res)
	}
}

func TestProviderNotShadowByDefault(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit})
	if res := testProviderClient(t, p.url, 5*time.Second).prepare(context.Background(), providerShadowDeniedCall); res.Allowed {
		t.Fatalf("answer %+v, want deny", res)
	}
	if strings.Contains(p.stderr.String(), "WARNING") {
		t.Errorf("stderr %q warns without --shadow", p.stderr.String())
	}
	raw := readProviderAudit(t, audit)
	if raw[0].Shadow || raw[0].WouldDecide != "" {
		t.Errorf("audit line %+v carries shadow fields", raw[0])
	}
}

func TestProviderLogFormatAndLevel(t *testing.T) {
	tests := []struct {
		name     string
		opts     providerOptions
		decision bool // a debug decision line is logged
		args     bool // the raw arguments are logged
	}{
		{"json debug", providerOptions{LogJSON: true, LogLevel: -4}, true, false},
		{"json debug with arguments", providerOptions{LogJSON: true, LogLevel: -4, AuditArguments: true}, true, true},
		{"json info", providerOptions{LogJSON: true}, false, false},
		{"json error", providerOptions{LogJSON: true, LogLevel: 8}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.PolicyFile = "examples/policy.json"
			p := startRefProvider(t, tt.opts)
			c := testProviderClient(t, p.url, 5*time.Second)
			if err := c.handshake(context.Background()); err != nil {
				t.Fatal(err)
			}
			c.prepare(context.Background(), providerShadowDeniedCall)
			wrong := testProviderClient(t, p.url, 5*time.Second)
			wrong.token = "wrong-token"
			wrong.prepare(context.Background(), providerShadowDeniedCall)
			var sawDecision, sawHandshake, sawListening bool
			for line := range strings.Lines(p.stderr.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Errorf("log line %q is not JSON: %v", line, err)
					continue
				}
				if rec["level"] == nil || rec["msg"] == nil || rec["time"] == nil {
					t.Errorf("log line %q lacks time, level or msg", line)
				}
				sawDecision = sawDecision || (rec["msg"] == "decision" && rec["decision"] == "deny" && rec["rule"] == 8.0 && rec["toolCallId"] == "call-1")
				sawHandshake = sawHandshake || rec["msg"] == "handshake"
				sawListening = sawListening || (rec["msg"] == "listening" && rec["url"] == p.url)
			}
			if !sawListening {
				t.Errorf("no listening record, whatever the level: %q", p.stderr.String())
			}
			log := p.stderr.String()
			if sawDecision != tt.decision {
				t.Errorf("decision logged %v, want %v: %q", sawDecision, tt.decision, log)
			}
			if sawHandshake != (tt.opts.LogLevel <= 0) {
				t.Errorf("handshake logged %v at level %v: %q", sawHandshake, tt.opts.LogLevel, log)
			}
			if strings.Contains(log, "shadow-marker") != tt.args {
				t.Errorf("raw arguments logged = %v, want %v: %q", !tt.args, tt.args, log)
			}
			if strings.Contains(log, providerTestToken) || strings.Contains(log, "wrong-token") {
				t.Errorf("a token appears in the log: %q", log)
			}
		})
	}
}
