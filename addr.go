// addr.go owns the one definition of loopback: the rules of the guard
// endpoint, the provider's listen address and serve's bind address (whose
// flags config.go names in its errors), and the Host and Origin headers a
// loopback daemon accepts. Names are folded in ASCII only. It also owns the
// one conversion of a connection end to a netip.AddrPort.
package main

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The loopback names an origin, a listen address or a Host header may use.
// A bind address may also be any other loopback IP (bindHostname).
const (
	loopbackV4   = "127.0.0.1"
	loopbackV6   = "::1" // written [::1] in an address
	loopbackName = "localhost"
)

// loopbackHost is the one loopback rule: host, with its brackets removed
// and bracketed saying whether it had them, must be 127.0.0.1, localhost in
// any ASCII case, or [::1]. It returns the name with localhost in lower case.
func loopbackHost(host string, bracketed bool) (string, bool) {
	switch {
	case bracketed:
		return host, host == loopbackV6
	case host == loopbackV4:
		return host, true
	case asciiEqualFold(host, loopbackName):
		return loopbackName, true
	}
	return "", false
}

// isLoopbackOrigin reports whether a browser Origin names a page served from
// this machine's loopback names over http or https.
func isLoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	_, ok := loopbackHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	return ok
}

// loopbackHostHeader is the Host check of a loopback bind against DNS
// rebinding (DESIGN.md §7): the header names a loopback name or bound (the bound address as a Host header
// spells it), with port when it has one.
func loopbackHostHeader(header, port, bound string) bool {
	name := header
	if h, p, err := net.SplitHostPort(header); err == nil {
		if p != port {
			return false
		}
		name = h
		if strings.HasPrefix(header, "[") {
			name = "[" + h + "]"
		}
	}
	if asciiEqualFold(name, bound) {
		return true
	}
	inner, bracketed := strings.CutPrefix(name, "[")
	if bracketed {
		if inner, bracketed = strings.CutSuffix(inner, "]"); !bracketed {
			return false
		}
	}
	_, ok := loopbackHost(inner, bracketed)
	return ok
}

// loopbackEndpoint checks the guard endpoint raw, an origin-only loopback
// HTTP(S) endpoint (DESIGN.md §8), and returns the origin with a lower-case
// scheme and an explicit port (the scheme default when none was given), so
// the Host header is always host:port and "localhost" is spelled in lower
// case; or the rule raw breaks.
func loopbackEndpoint(raw string) (*url.URL, string) {
	switch {
	// url.Parse drops an empty fragment without a trace, so look at the text.
	case strings.Contains(raw, "#"):
		return nil, "must not have a fragment"
	// url.Parse decodes escapes in the host ("%6c" is "l"): the host must be
	// spelled out, and nothing else of an origin may carry an escape.
	case strings.Contains(raw, "%"):
		return nil, "must not contain percent-encoding"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, "not a valid URL"
	case u.Scheme == "" || u.Opaque != "" || u.Host == "":
		return nil, "must be an absolute http or https URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "scheme must be http or https"
	case u.User != nil:
		return nil, "must not contain userinfo"
	case u.ForceQuery || u.RawQuery != "":
		return nil, "must not have a query"
	case u.EscapedPath() != "" && u.EscapedPath() != "/":
		return nil, "path must be empty or /"
	}
	host, ok := loopbackHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	if !ok {
		return nil, "host must be 127.0.0.1, localhost or [::1]"
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return nil, "port must not be empty"
		}
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return nil, "port must be 1-65535"
	}
	return &url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(host, strconv.FormatUint(n, 10))}, ""
}

// asciiEqualFold is strings.EqualFold without Unicode folding, under which
// "localhoſt" (long s) would equal "localhost".
func asciiEqualFold(s, t string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return strings.EqualFold(s, t)
}

// loopbackAddr is a listen address loopbackListen accepted. Its zero value is
// no address: listening on it fails rather than binding every interface.
type loopbackAddr struct{ netip.AddrPort }

// loopbackListen checks the provider's listen address raw: only loopback
// addresses. localhost becomes 127.0.0.1, the address the client dials for
// it, so no resolver decides where the provider listens. It returns the
// address or the rule raw breaks.
func loopbackListen(raw string) (loopbackAddr, string) {
	host, port, err := net.SplitHostPort(raw)
	if err != nil {
		return loopbackAddr{}, "must be host:port"
	}
	host, ok := loopbackHost(host, strings.HasPrefix(raw, "["))
	if !ok {
		return loopbackAddr{}, "host must be 127.0.0.1, localhost or [::1]"
	}
	if host == loopbackName {
		host = loopbackV4
	}
	n, err := parsePort(port)
	if err != nil {
		return loopbackAddr{}, err.Error()
	}
	return loopbackAddr{netip.AddrPortFrom(netip.MustParseAddr(host), uint16(n))}, ""
}

// parsePort accepts a decimal port 0-65535; 0 asks the system for a free one.
func parsePort(raw string) (int, error) {
	n, ok := parseDigits[int](raw)
	if !ok || n > 65535 {
		return 0, errors.New("port must be an integer from 0 through 65535")
	}
	return n, nil
}

// bindAddr is serve's --hostname as bindHostname accepted it: an IP address
// without brackets or a host name, localhost pinned to 127.0.0.1, and
// whether it binds loopback only.
type bindAddr struct {
	host     string
	loopback bool
}

// bindHostname checks serve's bind address raw, and returns it or the rule
// it breaks. A host name other than localhost counts as non-loopback
// whatever it resolves to.
func bindHostname(raw string) (bindAddr, string) {
	h := raw
	if inner, ok := strings.CutPrefix(h, "["); ok {
		h, ok = strings.CutSuffix(inner, "]")
		if !ok {
			return bindAddr{}, "unbalanced brackets"
		}
	}
	if ip := net.ParseIP(h); ip != nil {
		return bindAddr{ip.String(), ip.IsLoopback()}, ""
	}
	if asciiEqualFold(h, loopbackName) {
		return bindAddr{loopbackV4, true}, ""
	}
	if !validHostName(h) {
		return bindAddr{}, "must be an IP address or a host name"
	}
	return bindAddr{h, false}, ""
}

// validHostName accepts letters, digits, '-' and '.' in labels of a DNS name.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// addrPortOf is a TCP connection end as an unmapped netip.AddrPort: an
// IPv4 peer of an IPv6 socket compares equal to its IPv4 form.
func addrPortOf(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	return unmapAddrPort(ap), ap.IsValid()
}

func unmapAddrPort(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
