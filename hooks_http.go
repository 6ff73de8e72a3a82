// hooks_http.go owns the http hooks: the POST of a hook's input, the
// variables its URL and headers may name (allowedEnvVars, secrets of the
// environment: envscrub.go), the URL allow list and the address checks of
// security.allowedHttpHookUrls and security.allowPrivateNetworkHooks, and
// the reading of its answer, as Qwen Code 0.24.4 does (DESIGN.md §10).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// hookHTTPDefaultTimeoutMS is Qwen Code's default timeout of an http hook
// (600 seconds); hookMaxTimeoutMS bounds a configured one.
const hookHTTPDefaultTimeoutMS = 600000

// hookHTTPPolicy is where http hooks may send their input: the URL
// patterns of security.allowedHttpHookUrls (empty: any URL) and whether
// security.allowPrivateNetworkHooks opens private, link-local and loopback
// addresses. Both are read from user and system settings only
// (settings_files.go drops them from a workspace file).
type hookHTTPPolicy struct {
	Allowed      []*regexp.Regexp
	AllowPrivate bool
}

// compileHookURLPattern reads one allowedHttpHookUrls entry as Qwen Code
// does: the whole URL, any case, "*" any run of characters; a pattern that
// already escapes its dots is taken as a regular expression.
func compileHookURLPattern(p string) (*regexp.Regexp, error) {
	var expr string
	if strings.Contains(p, `\.`) {
		expr = strings.ReplaceAll(p, "*", ".*")
	} else {
		expr = strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, ".*")
	}
	return regexp.Compile("(?i)^(?:" + expr + ")$")
}

// hookBlockedHosts are cloud metadata names, never reached whatever the
// policy; hookMetadataAddrs their addresses.
var (
	hookBlockedHosts  = []string{"metadata.google.internal", "metadata.azure.internal", "metadata", "instance-data"}
	hookMetadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("100.100.100.200"), netip.MustParseAddr("fd00:ec2::254")}
)

// hookAddrRefused says why an http hook may not connect to a, "" if it may:
// a metadata address never; a private, shared, link-local, loopback or
// unspecified one only with allowPrivateNetworkHooks. Loopback is private
// here (Qwen Code allows it by default): a hook's input holds tool
// arguments, and a local port is whatever runs on this machine.
func hookAddrRefused(a netip.Addr, allowPrivate bool) string {
	a = a.Unmap()
	for _, m := range hookMetadataAddrs {
		if a == m {
			return "a cloud metadata address"
		}
	}
	if allowPrivate {
		return ""
	}
	cgnat := netip.MustParsePrefix("100.64.0.0/10")
	switch {
	case a.IsLoopback(), a.IsPrivate(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsUnspecified(), a.IsMulticast(), cgnat.Contains(a):
		return "a private, loopback or link-local address (security.allowPrivateNetworkHooks in user or system settings opens these)"
	}
	return ""
}

// hookHeaderVar is a $NAME or ${NAME} reference in an http hook's URL or
// header value.
var hookHeaderVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// interpolateHookValue replaces each variable reference in v with its
// value when allowed names it and env holds it, else with nothing, as Qwen
// Code does; CR, LF and NUL are removed so a value cannot add a header.
func interpolateHookValue(v string, allowed []string, env *procEnv) string {
	v = hookHeaderVar.ReplaceAllStringFunc(v, func(ref string) string {
		name := hookHeaderVar.FindStringSubmatch(ref)[1]
		for _, a := range allowed {
			if a == name {
				val, _ := env.secret(name)
				return val
			}
		}
		return ""
	})
	return strings.NewReplacer("\r", "", "\n", "", "\x00", "").Replace(v)
}

// runHTTPHook POSTs stdin (the hook's input) to h.URL and returns the body
// of a 2xx answer. Anything else is a failure: a URL the policy refuses, an
// address it refuses (checked on every address connected to, so a name
// that resolves elsewhere later is refused too), a redirect (never
// followed), another status, the timeout. No proxy is used. A failure
// names the URL as configured, never its interpolated values.
func runHTTPHook(ctx context.Context, h hookCommand, stdin []byte, timeout time.Duration, env *procEnv) (hookReply, string) {
	pol := hookHTTPPolicy{}
	if h.http != nil {
		pol = *h.http
	}
	raw := interpolateHookValue(h.URL, h.AllowedEnvVars, env)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return hookReply{}, "has an invalid URL (want http:// or https:// and a host)"
	}
	if len(pol.Allowed) > 0 {
		ok := false
		for _, re := range pol.Allowed {
			ok = ok || re.MatchString(raw)
		}
		if !ok {
			return hookReply{}, "has a URL that security.allowedHttpHookUrls does not allow"
		}
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, b := range hookBlockedHosts {
		if host == b {
			return hookReply{}, fmt.Sprintf("may not reach %q: a cloud metadata host", host)
		}
	}
	dialer := &net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("address %q: %w", address, err)
		}
		if why := hookAddrRefused(ap.Addr(), pol.AllowPrivate); why != "" {
			return &hookAddrError{addr: ap.Addr(), why: why}
		}
		return nil
	}}
	client := &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, ForceAttemptHTTP2: true, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(stdin))
	if err != nil {
		return hookReply{}, "has an invalid URL"
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h.Headers {
		req.Header.Set(k, interpolateHookValue(v, h.AllowedEnvVars, env))
	}
	resp, err := client.Do(req)
	if err != nil {
		var ae *hookAddrError
		switch {
		case errors.As(err, &ae):
			return hookReply{}, fmt.Sprintf("may not reach %s: %s", ae.addr, ae.why)
		case ctx.Err() == context.DeadlineExceeded:
			return hookReply{}, fmt.Sprintf("timed out after %d ms", timeout.Milliseconds())
		case ctx.Err() != nil:
			return hookReply{}, "was cancelled"
		}
		return hookReply{}, "could not be reached: " + hookHTTPErrorText(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHookOutputBytes+1))
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return hookReply{}, fmt.Sprintf("timed out after %d ms", timeout.Milliseconds())
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return hookReply{}, fmt.Sprintf("answered status %d", resp.StatusCode)
	case err != nil:
		return hookReply{}, "answer could not be read: " + hookHTTPErrorText(err)
	case len(body) > maxHookOutputBytes:
		return hookReply{}, fmt.Sprintf("answered more than %d bytes", maxHookOutputBytes)
	}
	// An answer is read as JSON when it says so, or when it is an object
	// whatever its media type: a deny sent as text/plain still denies, as
	// the same text printed by a command hook does.
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json") || bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))
	return hookReply{Stdout: body, HTTP: true, JSON: isJSON}, ""
}

// hookAddrError is a connection the policy refused.
type hookAddrError struct {
	addr netip.Addr
	why  string
}

func (e *hookAddrError) Error() string { return fmt.Sprintf("%s is %s", e.addr, e.why) }

// hookHTTPErrorText is a transport error without the URL net/http puts in
// it: the URL may carry an interpolated secret.
func hookHTTPErrorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
