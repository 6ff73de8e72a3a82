// guard_handshake.go owns the provider client's startup handshake: the
// authenticated, versioned first exchange (DESIGN.md §8) that records the
// provider every later connection must reach, and the hint that names the
// fix when it fails.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Retrying the startup handshake while nothing listens: a provider started
// together with serve or acp (the quickstart pasted as one block, two
// units started at once) is not listening yet.
const (
	handshakeRetryFirst = 100 * time.Millisecond
	handshakeRetryMax   = time.Second
)

// startupHandshake runs the handshake until it succeeds, fails for another
// reason than a refused connection, or wait has passed; the last error then
// says how long it waited. waiting hears the first refusal, once. It fails
// closed as the handshake does: nothing listens or runs before it returns
// nil.
func (c *providerClient) startupHandshake(ctx context.Context, wait time.Duration, waiting func()) error {
	deadline := time.Now().Add(wait)
	delay := handshakeRetryFirst
	for first := true; ; first = false {
		err := c.handshake(ctx)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			return err
		}
		if first {
			waiting()
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return fmt.Errorf("%w; waited %v for it to listen (--%s)", err, wait, flagGuardStartupWait)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, handshakeRetryMax)
	}
}

// handshake performs the startup handshake; any error means the provider is
// unusable. The error (a *wireError) names the failure category. A
// successful handshake records the provider it met: later connections must
// reach that one. A failed one leaves the identity recorded before.
func (c *providerClient) handshake(ctx context.Context) error {
	nonce := randomHex(randomIDBytes)
	body, err := json.Marshal(handshakeRequest{ProtocolVersion: wireProtocolVersion, Nonce: nonce, Client: wireClientName})
	if err != nil {
		return fmt.Errorf("provider handshake: %w", err)
	}
	var seen atomic.Pointer[providerIdentity]
	resp, werr := c.post(ctx, c.handshakeClient(&seen), wirePathHandshake, body)
	if werr == nil {
		werr = decodeHandshakeResponse(resp, nonce)
	}
	if werr == nil {
		werr = c.acceptIdentity(&seen)
	}
	if werr == nil {
		return nil
	}
	if hint := c.handshakeHint(werr); hint != "" {
		return fmt.Errorf("provider handshake: %w; %s", c.redact(werr), hint)
	}
	return fmt.Errorf("provider handshake: %w", c.redact(werr))
}

// handshakeHint is the fix for a failed handshake when it is known, else ""
// (DESIGN.md §11): a 401 is a token that differs, a refused connection is
// a provider not started, a certificate that does not verify is a CA to
// trust through SSL_CERT_FILE, and a scheme that is not the provider's is
// the other scheme.
func (c *providerClient) handshakeHint(werr *wireError) string {
	https := strings.HasPrefix(c.origin, "https://")
	certErr, badCert := errors.AsType[*tls.CertificateVerificationError](werr)
	switch {
	case werr.Status == http.StatusUnauthorized:
		return fmt.Sprintf("the token differs from the provider's: %s (or --%s) here must equal %s where the provider runs",
			envGuardToken, flagGuardTokenFile, envGuardToken)
	case errors.Is(werr, syscall.ECONNREFUSED):
		with := "--listen " + c.hostPort
		if https {
			with += ", --tls-cert CERT, --tls-key KEY"
		}
		return fmt.Sprintf("no provider listens on %q: start one with `acpguard provider --policy FILE` (with %s and the same %s), or fix --%s",
			c.hostPort, with, envGuardToken, flagGuardEndpoint)
	case badCert:
		if _, ok := errors.AsType[x509.HostnameError](certErr); ok {
			return fmt.Sprintf("the provider's certificate does not name %q: reissue it for that host, or use an endpoint host it names", c.hostPort)
		}
		return "the provider's certificate does not chain to a trusted CA: set SSL_CERT_FILE to the PEM file of the CA that signed it"
	case https && strings.Contains(werr.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("the provider serves plain HTTP: use --%s http://%s, or start the provider with --tls-cert and --tls-key", flagGuardEndpoint, c.hostPort)
	case !https && werr.Status == http.StatusBadRequest:
		return fmt.Sprintf("the provider may serve HTTPS: try --%s https://%s", flagGuardEndpoint, c.hostPort)
	}
	return ""
}

// The log messages of a SIGHUP's handshake; the demo waits for them.
const (
	logHUPAccepted = "provider handshake on SIGHUP accepted"
	logHUPFailed   = "provider handshake on SIGHUP failed: the provider of the last successful handshake stays the only one accepted"
)

// handshakeOnSIGHUP catches SIGHUP until the returned stop is called and
// re-runs the handshake for each one, until ctx ends; wg owns the
// goroutine. It is the one way to make a running serve or acp accept a
// provider that now listens on another socket (restarted under the same
// uid): until then every call to it fails with category identity, and a
// failed handshake keeps the provider of the last successful one.
func (c *providerClient) handshakeOnSIGHUP(ctx context.Context, log *slog.Logger, wg *sync.WaitGroup) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				c.rehandshake(ctx, log)
			}
		}
	})
	return func() { signal.Stop(hup) }
}

// rehandshake runs one handshake and logs its result.
func (c *providerClient) rehandshake(ctx context.Context, log *slog.Logger) {
	before := c.identity()
	if err := c.handshake(ctx); err != nil {
		log.Error(logHUPFailed, "provider", before.String(), "err", err)
		return
	}
	after := c.identity()
	log.Info(logHUPAccepted, "provider", after.String(), "changed", !before.same(after))
}
