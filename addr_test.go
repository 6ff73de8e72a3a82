// addr_test.go checks the one loopback rule and every place that applies it.
package main

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:8787", "https://localhost", "http://[::1]:1/", "HTTP://LOCALHOST:80",
		"http://10.0.0.1", "http://127.0.0.1:8787?", "http://127.0.0.1#", "http://u@127.0.0.1",
		"http://[::1%25lo]:1", "http://%6cocalhost", "http:127.0.0.1", "http://127.0.0.1:",
		"http://127.0.0.1:0", "http://localhoſt", "http://[::ffff:127.0.0.1]", "//127.0.0.1", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := parseEndpoint(raw)
		if err != nil {
			if exitCode(err) != exitUsage || !strings.Contains(err.Error(), strconv.Quote(raw)) {
				t.Fatalf("error %q for %q is not a usage error quoting the value", err, raw)
			}
			return
		}
		// Accepted: an origin, and the text it came from holds nothing else.
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("%q: scheme %q", raw, u.Scheme)
		}
		if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Path != "" || u.Opaque != "" {
			t.Fatalf("%q: not an origin: %#v", raw, u)
		}
		if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
			t.Fatalf("%q: host %q", raw, h)
		}
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			t.Fatalf("%q: port %q", raw, u.Port())
		}
		if strings.ContainsAny(raw, "#%@?") {
			t.Fatalf("%q accepted with a fragment, escape, userinfo or query", raw)
		}
		again, err := url.Parse(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("%q: result %q does not round-trip: %v", raw, u, err)
		}
	})
}

// TestLoopbackRule checks each loopback check on the same spellings: folding
// is ASCII only, so "localhoſt" (long s) is not localhost.
func TestLoopbackRule(t *testing.T) {
	for _, tt := range []struct {
		host, origin, header string
		loopback             bool
	}{
		{"127.0.0.1", "http://127.0.0.1:3000", "127.0.0.1:4170", true},
		{"LocalHost", "https://LOCALHOST", "LOCALHOST:4170", true},
		{"[::1]", "http://[::1]:1", "[::1]:4170", true},
		{"localhoſt", "http://localhoſt", "localhoſt:4170", false},
		{"example.com", "http://example.com", "example.com:4170", false},
		{"10.0.0.1", "http://10.0.0.1", "10.0.0.1:4170", false},
	} {
		if got, _ := parseHostname(tt.host); got.loopback != tt.loopback {
			t.Errorf("parseHostname(%q) loopback = %v, want %v", tt.host, got.loopback, tt.loopback)
		}
		if got := isLoopbackOrigin(tt.origin); got != tt.loopback {
			t.Errorf("isLoopbackOrigin(%q) = %v, want %v", tt.origin, got, tt.loopback)
		}
		if got := loopbackHostHeader(tt.header, "4170", "127.0.0.2"); got != tt.loopback {
			t.Errorf("loopbackHostHeader(%q) = %v, want %v", tt.header, got, tt.loopback)
		}
		_, err := parseListen(strings.Replace(tt.header, "4170", "0", 1))
		if (err == nil) != tt.loopback {
			t.Errorf("parseListen(%q): %v, want loopback %v", tt.header, err, tt.loopback)
		}
	}
	for header, want := range map[string]bool{
		"127.0.0.1:1": false, "localhost": true, "[::1]": true, "::1": false, "[::1": false,
		"127.0.0.2:4170": true, "127.0.0.2": true, "[127.0.0.1]:4170": false, "[localhost]": false,
	} {
		if got := loopbackHostHeader(header, "4170", "127.0.0.2"); got != want {
			t.Errorf("loopbackHostHeader(%q) = %v, want %v", header, got, want)
		}
	}
	for _, origin := range []string{"file:///etc", "null", "http://127.0.0.1.example.com", "ws://localhost"} {
		if isLoopbackOrigin(origin) {
			t.Errorf("isLoopbackOrigin(%q) = true", origin)
		}
	}
	if got, err := parseListen("LOCALHOST:8787"); err != nil || got.String() != "127.0.0.1:8787" {
		t.Errorf("parseListen(LOCALHOST:8787) = %v, %v", got, err)
	}
	if got, err := parseListen("[::1]:8787"); err != nil || got.String() != "[::1]:8787" {
		t.Errorf("parseListen([::1]:8787) = %v, %v", got, err)
	}
	for _, raw := range []string{"[127.0.0.1]:8787", "127.0.0.2:8787", "localhoſt:8787", "0.0.0.0:0", ":0", "192.0.2.1:8787", "example.com:8787", "127.0.0.1"} {
		if _, err := parseListen(raw); err == nil {
			t.Errorf("parseListen(%q) accepted", raw)
		}
	}
}
