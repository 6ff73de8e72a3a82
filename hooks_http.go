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
	"slices"
	"strconv"
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

// hookURLWildcard marks a pattern's "*" once a pattern is unescaped: a
// byte no URL or pattern holds.
const hookURLWildcard = '\x00'

// Classes a pattern's "*" stands for, by the part of the URL it is in: in
// the scheme and in a host label it never reaches a ".", ":", "@" or "/",
// so a pattern reaches only hosts whose every label it writes; in the port
// only digits; in the path and query anything.
const (
	hookURLSchemeStar = `[a-z0-9+.-]*`
	hookURLLabelStar  = `[a-z0-9_-]*`
	hookURLPortStar   = `[0-9]*`
	hookURLPathStar   = `.*`
)

// hookURLLabel is a host label a pattern may match: letters, digits, "-"
// and "_" (an international name in its ASCII form).
var hookURLLabel = regexp.MustCompile(`^[a-z0-9_-]+$`)

// compileHookURLPattern reads one allowedHttpHookUrls entry. Qwen Code
// reads "*" as any run of characters over the whole URL, so that
// "https://*.example.com/x" matches "https://a.evil.test/.example.com/x";
// acpguard reads the pattern by parts instead (scheme://host[:port]/path,
// any case), "*" staying in its part (hookURLSchemeStar and the others),
// and matches it against hookURLCanonical's form of a URL. A pattern that
// escapes its dots (Qwen Code's regular expressions) has each escape read
// as the byte it escapes and nothing else read as a regular expression:
// it matches what its text names or less.
func compileHookURLPattern(p string) (*regexp.Regexp, error) {
	if strings.IndexByte(p, hookURLWildcard) >= 0 {
		return nil, errors.New("holds a NUL byte")
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '*':
			b.WriteByte(hookURLWildcard)
		case c == '\\' && strings.Contains(p, `\.`) && i+1 < len(p):
			i++
			b.WriteByte(p[i])
		default:
			b.WriteByte(c)
		}
	}
	text := b.String()
	shown := func(s string) string { return strings.ReplaceAll(s, string(hookURLWildcard), "*") }
	scheme, rest, ok := strings.Cut(text, "://")
	if !ok || scheme == "" {
		return nil, errors.New(`want scheme://host/path, e.g. "https://hooks.example.com/*"`)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, path := rest[:end], rest[end:]
	if strings.Contains(authority, "@") {
		return nil, fmt.Errorf("authority %q names user info: a pattern names a host, a port and a path", shown(authority))
	}
	host, port := authority, ""
	if strings.HasPrefix(authority, "[") {
		i := strings.IndexByte(authority, ']')
		if i < 0 {
			return nil, fmt.Errorf("host %q: unclosed \"[\"", shown(authority))
		}
		a, err := netip.ParseAddr(authority[1:i])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return nil, fmt.Errorf("host %q is not an IPv6 address", shown(authority[:i+1]))
		}
		host, port = "["+a.String()+"]", authority[i+1:]
		if port != "" && port[0] != ':' {
			return nil, fmt.Errorf("authority %q: want a port after \"]\"", shown(authority))
		}
	} else if i := strings.IndexByte(authority, ':'); i >= 0 {
		host, port = authority[:i], authority[i:]
	}
	var re strings.Builder
	re.WriteString("(?i)^")
	re.WriteString(hookURLGlob(strings.ToLower(scheme), hookURLSchemeStar))
	re.WriteString("://")
	if strings.HasPrefix(host, "[") {
		re.WriteString(regexp.QuoteMeta(host))
	} else {
		labels := strings.Split(strings.TrimSuffix(strings.ToLower(host), "."), ".")
		for i, l := range labels {
			if !hookURLLabel.MatchString(strings.ReplaceAll(l, string(hookURLWildcard), "a")) {
				return nil, fmt.Errorf("host %q: want dot-separated labels of letters, digits, \"-\", \"_\" and \"*\"", shown(host))
			}
			if i > 0 {
				re.WriteString(`\.`)
			}
			re.WriteString(hookURLGlob(l, hookURLLabelStar))
		}
	}
	if port != "" {
		digits := strings.ReplaceAll(port[1:], string(hookURLWildcard), "0")
		if _, err := strconv.ParseUint(digits, 10, 16); err != nil {
			return nil, fmt.Errorf("port %q: want digits and \"*\"", shown(port[1:]))
		}
		if port[1:] != hookDefaultPort(strings.ToLower(scheme)) {
			re.WriteString(":" + hookURLGlob(port[1:], hookURLPortStar))
		}
	}
	path, _, _ = strings.Cut(path, "#") // a fragment is never sent
	if path == "" || path[0] == '?' {
		path = "/" + path
	}
	re.WriteString(hookURLGlob(path, hookURLPathStar))
	re.WriteString("$")
	return regexp.Compile(re.String())
}

// hookURLGlob is pattern text s as a regular expression, each
// hookURLWildcard the class star.
func hookURLGlob(s, star string) string {
	parts := strings.Split(s, string(hookURLWildcard))
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return strings.Join(parts, star)
}

// hookDefaultPort is the port a URL of scheme reaches when it names none.
func hookDefaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// hookURLCanonical is u as allowedHttpHookUrls patterns read it:
// lower-case scheme and host, no trailing dot, the port only when it is
// not the scheme's, the path ("/" when empty) and query as sent. ok is
// false for a URL no pattern may match: one with user info, or whose host
// is neither an IP address nor labels hookURLLabel accepts.
func hookURLCanonical(u *url.URL) (string, bool) {
	if u.User != nil || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		if a.Zone() != "" {
			return "", false
		}
		host = "[" + a.String() + "]"
	} else {
		host = strings.TrimSuffix(host, ".")
		for _, l := range strings.Split(host, ".") {
			if !hookURLLabel.MatchString(l) {
				return "", false
			}
		}
	}
	if p := u.Port(); p != "" && p != hookDefaultPort(scheme) {
		host += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		path += "?" + u.RawQuery
	}
	return scheme + "://" + host + path, true
}

// allows says whether pol lets an http hook POST to u: any URL when pol
// names no pattern, else one a pattern matches.
func (pol hookHTTPPolicy) allows(u *url.URL) bool {
	if len(pol.Allowed) == 0 {
		return true
	}
	c, ok := hookURLCanonical(u)
	if !ok {
		return false
	}
	for _, re := range pol.Allowed {
		if re.MatchString(c) {
			return true
		}
	}
	return false
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
// names the URL as configured, never its interpolated values: every value
// of a variable h's allowedEnvVars name is replaced by the variable's
// name in it (hideHookSecrets).
func runHTTPHook(ctx context.Context, h hookCommand, stdin []byte, timeout time.Duration, env *procEnv) (hookReply, string) {
	rep, failure := postHTTPHook(ctx, h, stdin, timeout, env)
	if failure != "" {
		failure = hideHookSecrets(failure, h.AllowedEnvVars, env)
	}
	return rep, failure
}

// postHTTPHook is runHTTPHook before its failure is cleaned.
func postHTTPHook(ctx context.Context, h hookCommand, stdin []byte, timeout time.Duration, env *procEnv) (hookReply, string) {
	pol := hookHTTPPolicy{}
	if h.http != nil {
		pol = *h.http
	}
	raw := interpolateHookValue(h.URL, h.AllowedEnvVars, env)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return hookReply{}, "has an invalid URL (want http:// or https:// and a host)"
	}
	if !pol.allows(u) {
		return hookReply{}, "has a URL that security.allowedHttpHookUrls does not allow"
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

// hideHookSecrets replaces in s each value of the variables names (a
// hook's allowedEnvVars) that env holds as a secret, as written and as a
// URL or a name lookup writes it, with the variable's $NAME: what a hook's
// failure says may quote the host, port or path it was sent to.
func hideHookSecrets(s string, names []string, env *procEnv) string {
	type pair struct{ from, to string }
	var ps []pair
	for _, name := range names {
		v, _ := env.secret(name)
		if v == "" {
			continue
		}
		for _, form := range []string{v, strings.ToLower(v), url.PathEscape(v), url.QueryEscape(v)} {
			ps = append(ps, pair{form, "$" + name})
		}
	}
	if len(ps) == 0 {
		return s
	}
	// One pass, the longest form first where two start at one place, so
	// that a value inside another is not replaced before the other is
	// and no $NAME written is read again.
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.from) - len(a.from) })
	oldnew := make([]string, 0, 2*len(ps))
	for _, p := range ps {
		oldnew = append(oldnew, p.from, p.to)
	}
	return strings.NewReplacer(oldnew...).Replace(s)
}
