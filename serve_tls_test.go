// serve_tls_test.go proves serve's half of the HTTPS provider path with
// real processes: "acpguard serve" in required mode, real "acpguard acp"
// children, and the reference provider serving HTTPS with a certificate
// from a throwaway CA that serve trusts through SSL_CERT_FILE (Go loads
// the system roots once per process, so the variable is set for the serve
// process itself).
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeHTTPSProviderEndToEnd: one allowed and one denied call through
// the host API, decided by the HTTPS provider at https://localhost:PORT,
// which observed ServerName "localhost"; /metrics counted both.
func TestServeHTTPSProviderEndToEnd(t *testing.T) {
	ca := newProviderTestCA(t)
	cert, key := ca.leaf(t, "loopback", "localhost", "127.0.0.1", "::1")
	pp := startProviderProcess(t, "--tls-cert", cert, "--tls-key", key, "--log-level", "debug")
	ws := t.TempDir()
	if !strings.HasPrefix(ws, "/tmp/") {
		t.Skipf("workspace %s is outside /tmp, where examples/policy.json allows writes", ws)
	}
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	sp := startServe(t, []string{"--workspace", ws, "--settings", yoloSettings(t), "--decision-log", logPath,
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", "https://localhost:" + pp.port},
		envGuardToken+"="+providerTestToken, "SSL_CERT_FILE="+ca.file)
	id := sp.newSession(t, "")
	_, evs := sp.runTurn(t, id, `call write_file {"file_path":"a.txt","content":"x"}`+"\n"+
		`call run_shell_command {"command":"sudo touch denied.txt"}`)

	if !fileExists(filepath.Join(ws, "a.txt")) {
		t.Error("the allowed write did not happen")
	}
	if fileExists(filepath.Join(ws, "denied.txt")) {
		t.Error("the denied command ran")
	}
	var got []string
	for _, u := range toolUpdates(t, evs) {
		if u.Status == "completed" || u.Status == "failed" {
			got = append(got, u.Meta.ToolName+" "+u.Status)
			if u.Status == "failed" && !strings.Contains(string(u.RawOutput), "Destructive and network shell commands are not allowed by policy") {
				t.Errorf("denied call's output %s does not carry the provider's reason", u.RawOutput)
			}
		}
	}
	if strings.Join(got, ", ") != "write_file completed, run_shell_command failed" {
		t.Errorf("tool call ends = %v", got)
	}
	data, _ := os.ReadFile(logPath)
	var outcomes []string
	for _, rec := range decisions(t, string(data)) {
		outcomes = append(outcomes, rec.Outcome)
	}
	if strings.Join(outcomes, " ") != "allowed denied" {
		t.Errorf("decision log outcomes = %v", outcomes)
	}

	log := pp.stderrText()
	if !strings.Contains(log, `msg="tls client hello" serverName=localhost`) || strings.Contains(log, `serverName=""`) || strings.Contains(log, "TLS handshake error") {
		t.Errorf("provider log %q does not show every TLS client sending ServerName localhost", log)
	}

	m := sp.scrape(t)
	for series, want := range map[string]float64{
		`acpguard_serve_decisions_total{outcome="allowed"}`:                              1,
		`acpguard_serve_decisions_total{outcome="denied"}`:                               1,
		`acpguard_serve_provider_request_duration_seconds_count`:                         2,
		`acpguard_serve_tool_executions_total{status="completed",tool="write_file"}`:     1,
		`acpguard_serve_tool_executions_total{status="failed",tool="run_shell_command"}`: 1,
		`acpguard_serve_prompts_total{result="end_turn"}`:                                1,
		`acpguard_serve_children_started_total`:                                          1,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
}

// TestServeHTTPSWrongName: a provider certificate for another name fails
// the startup handshake, so serve exits 1 before it listens.
func TestServeHTTPSWrongName(t *testing.T) {
	ca := newProviderTestCA(t)
	cert, key := ca.leaf(t, "other", "example.invalid")
	pp := startProviderProcess(t, "--tls-cert", cert, "--tls-key", key, "--log-level", "debug")
	code, stdout, stderr := runAcpguard(t, []string{"serve", "--port", "0", "--workspace", t.TempDir(),
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", "https://localhost:" + pp.port},
		envGuardToken+"="+providerTestToken, "SSL_CERT_FILE="+ca.file)
	if code != exitRuntime || stdout != "" || !strings.Contains(stderr, "certificate is valid for example.invalid, not localhost") {
		t.Errorf("serve: exit %d, stdout %q, stderr %q; want exit 1 naming the certificate's name", code, stdout, stderr)
	}
	if strings.Contains(stderr, providerTestToken) {
		t.Error("the token appeared in an error")
	}
	if log := pp.stderrText(); strings.Contains(log, "msg=handshake") {
		t.Errorf("provider answered a handshake: %q", log)
	}
}
