// guard_hint_test.go tests the hints of a failed provider handshake
// (DESIGN.md §11), each against a real loopback peer.
package main

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandshakeHintTexts(t *testing.T) {
	otherToken := startRefProvider(t, providerOptions{Token: "another-token", PolicyFile: "examples/policy.json"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	quiet := func(s *httptest.Server) *httptest.Server {
		s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
		t.Cleanup(s.Close)
		return s
	}
	tlsSrv := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	tlsSrv.StartTLS()
	tlsAddr := strings.TrimPrefix(tlsSrv.URL, "https://")
	plain := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	plain.Start()
	plainAddr := strings.TrimPrefix(plain.URL, "http://")
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)

	for _, tt := range []struct{ name, endpoint, hint string }{
		{"another token", otherToken.url,
			"the token differs from the provider's: QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN (or --external-tool-guard-token-file) here must equal QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN where the provider runs"},
		{"nobody listens", "http://" + closedAddr,
			`no provider listens on "` + closedAddr + `": start one with ` + "`acpguard provider --policy FILE`" + ` (with --listen ` + closedAddr + ` and the same QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN), or fix --external-tool-guard-endpoint`},
		{"nobody listens, https", "https://" + closedAddr,
			`no provider listens on "` + closedAddr + `": start one with ` + "`acpguard provider --policy FILE`" + ` (with --listen ` + closedAddr + `, --tls-cert CERT, --tls-key KEY and the same QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN), or fix --external-tool-guard-endpoint`},
		{"unknown authority", tlsSrv.URL,
			"the provider's certificate does not chain to a trusted CA: set SSL_CERT_FILE to the PEM file of the CA that signed it"},
		{"plain provider, https endpoint", "https://" + plainAddr,
			"the provider serves plain HTTP: use --external-tool-guard-endpoint http://" + plainAddr + ", or start the provider with --tls-cert and --tls-key"},
		{"TLS provider, http endpoint", "http://" + tlsAddr,
			"the provider may serve HTTPS: try --external-tool-guard-endpoint https://" + tlsAddr},
		{"name not in the certificate", "https://localhost:" + tlsPort,
			`the provider's certificate does not name "localhost:` + tlsPort + `": reissue it for that host, or use an endpoint host it names`},
	} {
		err := testProviderClient(t, tt.endpoint, 10*time.Second).handshake(context.Background())
		if err == nil || !strings.HasPrefix(err.Error(), "provider handshake: ") || !strings.HasSuffix(err.Error(), "; "+tt.hint) {
			t.Errorf("%s: handshake error\n%v\nwant it to end with\n; %s", tt.name, err, tt.hint)
		}
	}
}

// The first handshake is retried while nothing listens: a provider that
// starts after the first refusal is met; one that never starts fails the
// start naming the wait, and a provider that refuses the token is not
// retried.
func TestStartupHandshakeWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := testProviderClient(t, "http://"+addr, 10*time.Second)
	waited := 0
	err = c.startupHandshake(context.Background(), testTimeout(30*time.Second), func() {
		waited++
		startRefProvider(t, providerOptions{Listen: mustListen(addr), PolicyFile: "examples/policy.json"})
	})
	if err != nil || waited != 1 {
		t.Fatalf("handshake with a provider started after the first refusal: %v (waiting called %d times)", err, waited)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, stderr := runAcpguard(t, []string{"acp", "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=http://" + closed,
		"--external-tool-guard-startup-wait-ms=300"}, envGuardToken+"="+providerTestToken)
	if want := "; waited 300ms for it to listen (--external-tool-guard-startup-wait-ms)\n"; code != exitRuntime || !strings.HasSuffix(stderr, want) || !strings.Contains(stderr, "provider not listening yet: retrying the handshake") {
		t.Errorf("acp with no provider: exit %d, stderr %q; want 1 ending in %q", code, stderr, want)
	}

	other := startRefProvider(t, providerOptions{Token: "another-token", PolicyFile: "examples/policy.json"})
	refused := 0
	err = testProviderClient(t, other.url, 10*time.Second).startupHandshake(context.Background(), testTimeout(30*time.Second), func() { refused++ })
	if err == nil || refused != 0 || !strings.Contains(err.Error(), "the token differs") {
		t.Errorf("a provider with another token: %v, waiting called %d times; want the token error at once", err, refused)
	}
}
