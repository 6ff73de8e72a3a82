// provider_tls_test.go proves the HTTPS provider path end to end with real
// processes: a throwaway CA trusted through SSL_CERT_FILE (Go loads the
// system roots once per process, so only a fresh process sees it), the
// reference provider serving HTTPS, and "acpguard acp" in required mode.
package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProviderHTTPSEndToEnd: "acpguard acp" in required mode against an
// HTTPS provider at https://localhost:PORT, trusting a private CA through
// SSL_CERT_FILE: one allowed and one denied call, and the provider saw
// ServerName "localhost".
func TestProviderHTTPSEndToEnd(t *testing.T) {
	ca := newProviderTestCA(t)
	cert, key := ca.leaf(t, "loopback", "localhost", "127.0.0.1", "::1")
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	pp := startProviderProcess(t, "--tls-cert", cert, "--tls-key", key, "--log-level", "debug", "--audit", audit)
	if !strings.HasPrefix(pp.url, "https://127.0.0.1:") {
		t.Fatalf("provider announced %q, want https://127.0.0.1:PORT", pp.url)
	}
	c := startACP(t, nil, []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=https://localhost:" + pp.port},
		envGuardToken+"="+providerTestToken, "SSL_CERT_FILE="+ca.file)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	sid := c.newYoloSession(dir)
	c.prompt(sid, "call write_file {\"file_path\":\"a.txt\",\"content\":\"x\"}\n"+
		"call run_shell_command {\"command\":\"sudo touch denied.txt\"}", "")
	if !fileExists(filepath.Join(dir, "a.txt")) {
		t.Error("the allowed write did not happen")
	}
	if fileExists(filepath.Join(dir, "denied.txt")) {
		t.Error("the denied command ran")
	}
	if got := agentText(c.sessionUpdates(sid)); got != "write_file: completed\nrun_shell_command: denied\n" {
		t.Errorf("model answer = %q", got)
	}
	if records := readProviderAudit(t, audit); len(records) != 2 || records[0].Decision != "allow" || records[1].Decision != "deny" {
		t.Errorf("audit %+v, want one allow then one deny", records)
	}
	log := pp.stderrText()
	if !strings.Contains(log, "msg=\"tls client hello\" serverName=localhost") {
		t.Errorf("provider log %q does not show ServerName localhost", log)
	}
	if strings.Contains(log, "serverName=\"\"") || strings.Contains(log, "TLS handshake error") {
		t.Errorf("provider log %q shows a handshake without SNI or a failed one", log)
	}
}

// TestProviderHTTPSIPAddresses: https://127.0.0.1 and https://[::1] verify
// the certificate's IP SANs; the handshake at startup succeeds, and acp
// exits 0 when its stdin ends.
func TestProviderHTTPSIPAddresses(t *testing.T) {
	ca := newProviderTestCA(t)
	cert, key := ca.leaf(t, "loopback", "localhost", "127.0.0.1", "::1")
	listens := []string{"127.0.0.1:0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		listens = append(listens, "[::1]:0")
	} else {
		t.Logf("no IPv6 loopback, [::1] not tested: %v", err)
	}
	for _, listen := range listens {
		t.Run(listen, func(t *testing.T) {
			pp := startProviderProcess(t, "--listen", listen, "--tls-cert", cert, "--tls-key", key, "--log-level", "debug")
			code, _, stderr := runAcpguard(t, []string{"acp", "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + pp.url},
				envGuardToken+"="+providerTestToken, "SSL_CERT_FILE="+ca.file)
			if code != exitOK {
				t.Fatalf("acp against %s: exit %d, stderr %q", pp.url, code, stderr)
			}
			if log := pp.stderrText(); !strings.Contains(log, "msg=handshake") {
				t.Errorf("provider log %q shows no handshake", log)
			}
		})
	}
}

// TestProviderHTTPSVerificationFails: a certificate for another name, or
// one from a CA the client does not trust, fails the TLS handshake, so
// "acpguard acp" exits 1 and the provider never sees a request.
func TestProviderHTTPSVerificationFails(t *testing.T) {
	ca := newProviderTestCA(t)
	other, otherKey := ca.leaf(t, "other", "example.invalid")
	good, goodKey := ca.leaf(t, "loopback", "localhost", "127.0.0.1", "::1")
	tests := []struct {
		name, cert, key, sslCertFile, host, inErr string
	}{
		{"certificate for another name", other, otherKey, ca.file, "localhost", "certificate is valid for example.invalid, not localhost"},
		{"another name, by IP", other, otherKey, ca.file, "127.0.0.1", "doesn't contain any IP SANs"},
		{"untrusted CA", good, goodKey, filepath.Join(ca.dir, "none.pem"), "localhost", "certificate signed by unknown authority"},
		{"plain HTTP to an HTTPS provider", good, goodKey, ca.file, "", "http_status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pp := startProviderProcess(t, "--tls-cert", tt.cert, "--tls-key", tt.key)
			endpoint := "https://" + tt.host + ":" + pp.port
			if tt.host == "" {
				endpoint = "http://127.0.0.1:" + pp.port
			}
			code, stdout, stderr := runAcpguard(t, []string{"acp", "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + endpoint},
				envGuardToken+"="+providerTestToken, "SSL_CERT_FILE="+tt.sslCertFile)
			if code != exitRuntime || stdout != "" || !strings.HasPrefix(stderr, "acpguard: error: provider handshake") || !strings.Contains(stderr, tt.inErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming %q", code, stdout, stderr, tt.inErr)
			}
			if strings.Contains(stderr, providerTestToken) {
				t.Error("the token appeared in an error")
			}
			if log := pp.stderrText(); strings.Contains(log, "msg=handshake") {
				t.Errorf("provider answered a handshake: %q", log)
			}
		})
	}
}

func TestProviderTLSStartupRefusals(t *testing.T) {
	ca := newProviderTestCA(t)
	cert, key := ca.leaf(t, "loopback", "localhost")
	garbage := filepath.Join(ca.dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	tests := []struct {
		name  string
		args  []string
		inErr string
	}{
		{"cert without key", []string{"--tls-cert", cert}, `--tls-cert "` + cert + `", --tls-key "": give both to serve HTTPS, or neither`},
		{"key without cert", []string{"--tls-key", key}, `give both to serve HTTPS, or neither`},
		{"missing cert", []string{"--tls-cert", filepath.Join(ca.dir, "none.pem"), "--tls-key", key}, "no such file"},
		{"garbage cert", []string{"--tls-cert", garbage, "--tls-key", key}, `--tls-cert "` + garbage + `"`},
		{"key of another certificate", []string{"--tls-cert", cert, "--tls-key", ca.leafKey(t)}, "private key does not match public key"},
		{"bad log format", []string{"--log-format", "xml"}, `--log-format "xml": must be text or json`},
		{"bad log level", []string{"--log-level", "trace"}, `--log-level "trace": must be debug, info, warn or error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"provider", "--listen", "127.0.0.1:0", "--policy", "examples/policy.json"}, tt.args...)
			code, _, stderr := runAcpguard(t, args, envGuardToken+"="+providerTestToken)
			if code != exitUsage || !strings.Contains(stderr, tt.inErr) || strings.Contains(stderr, "listening") {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tt.inErr)
			}
		})
	}
}
