// hooks_http_test.go checks what an http hook may reach and send: the
// address policy, the URL patterns, the variables of its URL and headers.
package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestHookAddrRefused(t *testing.T) {
	for _, tc := range []struct {
		addr         string
		allowPrivate bool
		refused      bool
	}{
		{"93.184.216.34", false, false},
		{"2606:2800:220:1::1", false, false},
		{"127.0.0.1", false, true},
		{"127.0.0.1", true, false},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"10.1.2.3", false, true},
		{"172.16.0.1", false, true},
		{"192.168.1.1", false, true},
		{"100.64.0.1", false, true},
		{"169.254.1.1", false, true},
		{"fe80::1", false, true},
		{"fd12::1", false, true},
		{"0.0.0.0", false, true},
		{"10.1.2.3", true, false},
		// Metadata addresses, in every form, whatever the policy.
		{"169.254.169.254", true, true},
		{"::ffff:169.254.169.254", true, true},
		{"100.100.100.200", true, true},
		{"fd00:ec2::254", true, true},
	} {
		if got := hookAddrRefused(netip.MustParseAddr(tc.addr), tc.allowPrivate) != ""; got != tc.refused {
			t.Errorf("%s (allowPrivate %v): refused %v, want %v", tc.addr, tc.allowPrivate, got, tc.refused)
		}
	}
}

// An allowedHttpHookUrls pattern reaches only the hosts it writes: its
// "*" stays in its label, port or path, whatever the URL holds.
func TestHookURLPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern, url string
		match        bool
	}{
		{"https://hooks.example.com/*", "https://hooks.example.com/pre", true},
		{"https://hooks.example.com/*", "HTTPS://HOOKS.EXAMPLE.COM/pre", true},
		{"https://hooks.example.com/*", "https://hooks.example.com./pre", true},
		{"https://hooks.example.com/*", "https://hooks.example.com:443/pre", true},
		{"https://hooks.example.com/*", "https://hooksXexample.com/pre", false},
		{"https://hooks.example.com/*", "https://evil.com/?https://hooks.example.com/", false},
		{"https://hooks.example.com/*", "https://hooks.example.com:8443/pre", false},
		{"https://hooks.example.com/*", "https://hooks.example.com@evil.test/pre", false},
		{"https://hooks.example.com/*", "https://user@hooks.example.com/pre", false},
		{"https://hooks.example.com/*", `https://hooks.example.com\@evil.test/pre`, false},
		{"https://hooks.example.com/*", "https://evil.test\thooks.example.com/pre", false},
		{"https://*.example.com/hook", "https://a.example.com/hook", true},
		{"https://*.example.com/hook", "https://a.example.com/hook/more", false},
		{"https://*.example.com/hook", "https://a.b.example.com/hook", false},
		{"https://*.example.com/hook", "https://evil.test/.example.com/hook", false},
		{"https://*.example.com/hook", "https://evil.test?.example.com/hook", false},
		{"https://*.example.com/hook", "https://evil.test#.example.com/hook", false},
		{"https://*.example.com/hook", "https://evil.test:1@a.example.com/hook", false},
		{"https://*.example.com/x", "https://hooks.example.com.evil.test/x", false},
		{"https://hooks.example.com*", "https://hooks.example.com/", true},
		{"https://hooks.example.com*", "https://hooks.example.com.evil.test/x", false},
		{"https://hooks.example.com*", "https://hooks.example.com:1@evil.test/x", false},
		{"https://hooks.example.com*", "https://hooks.example.com@evil.test/x", false},
		{"https://hooks.example.com*", "https://hooks.example.com:8443/x", false},
		{"https://hooks.example.com*/x", "https://hooks.example.com/x", true},
		{"https://hooks.example.com*/x", "https://hooks.example.com.evil.test/x", false},
		{"https://hooks.example.com/*", "https://hooks.example.com/a/../b?c=@evil.test", true},
		{"http://127.0.0.1:*/hook/*", "http://127.0.0.1:8080/hook/pre", true},
		{"http://127.0.0.1:*/hook/*", "http://127.0.0.1.evil.test:8080/hook/pre", false},
		{"http://127.0.0.1:*/hook/*", "http://127.0.0.1:8080@evil.test/hook/pre", false},
		{"http://127.0.0.*:8080/*", "http://127.0.0.9:8080/x", true},
		{"http://127.0.0.*:8080/*", "http://127.0.0.9.nip.io:8080/x", false},
		{"http://[::1]:8080/*", "http://[::1]:8080/x", true},
		{"http://[::1]:8080/*", "http://[0:0::1]:8080/x", true},
		{"http://[::1]:8080/*", "http://[::2]:8080/x", false},
		{"http*://hooks.example.com/*", "http://hooks.example.com/x", true},
		{`https://api\.example\.com/*`, "https://api.example.com/x", true},
		{`https://api\.example\.com/*`, "https://apiXexample.com/x", false},
		// Read as Qwen Code's regular expression these would reach any
		// host; acpguard reads them as the text they write.
		{`https://api\.example\.com.*`, "https://api.example.com.evil.test/x", false},
		{`https://(evil\.test|api\.example\.com)/*`, "https://evil.test/x", false},
		{`https://.*\.example\.com/*`, "https://evil.test/.example.com/x", false},
	} {
		re, err := compileHookURLPattern(tc.pattern)
		if err != nil {
			if tc.match {
				t.Errorf("%q: %v", tc.pattern, err)
			}
			continue
		}
		// A URL that does not parse is refused before any pattern is read.
		u, err := url.Parse(tc.url)
		if got := err == nil && (hookHTTPPolicy{Allowed: []*regexp.Regexp{re}}).allows(u); got != tc.match {
			t.Errorf("%q on %q: %v, want %v", tc.pattern, tc.url, got, tc.match)
		}
	}
}

// A pattern that names no host by parts is refused with the settings.
func TestHookURLPatternRefused(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"*", `want scheme://host/path, e.g. "https://hooks.example.com/*"`},
		{"hooks.example.com/*", `want scheme://host/path, e.g. "https://hooks.example.com/*"`},
		{"https://*@hooks.example.com/*", `authority "*@hooks.example.com" names user info: a pattern names a host, a port and a path`},
		{"https://hooks..example.com/*", `host "hooks..example.com": want dot-separated labels of letters, digits, "-", "_" and "*"`},
		{"https://hooks.example.com:x/*", `port "x": want digits and "*"`},
		{"https://[::1/*", `host "[::1": unclosed "["`},
	} {
		_, err := compileHookURLPattern(tc.pattern)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.pattern, err, tc.want)
		}
	}
}

func TestInterpolateHookValue(t *testing.T) {
	env := newProcEnv([]string{"HOOK_KEY=k1", "OTHER=o1", "SPLIT=a\r\nX-Evil: 1"})
	env.hideSecrets("HOOK_KEY", "SPLIT")
	for _, tc := range []struct {
		in      string
		allowed []string
		want    string
	}{
		{"Bearer $HOOK_KEY", []string{"HOOK_KEY"}, "Bearer k1"},
		{"Bearer ${HOOK_KEY}", []string{"HOOK_KEY"}, "Bearer k1"},
		{"Bearer $HOOK_KEY", nil, "Bearer "},
		// A variable not hidden as a secret is not read, allowed or not.
		{"x-$OTHER", []string{"OTHER"}, "x-"},
		{"$SPLIT", []string{"SPLIT"}, "aX-Evil: 1"},
	} {
		if got := interpolateHookValue(tc.in, tc.allowed, env); got != tc.want {
			t.Errorf("%q with %q: %q, want %q", tc.in, tc.allowed, got, tc.want)
		}
	}
	// A hidden variable is in no child's environment.
	for _, kv := range env.childEnv() {
		if strings.HasPrefix(kv, "HOOK_KEY=") || strings.HasPrefix(kv, "SPLIT=") {
			t.Errorf("child environment holds %q", kv)
		}
	}
	if env.lookup("HOOK_KEY") != "" {
		t.Error("lookup reads a hidden variable")
	}
}

// An http hook's JSON answer counts whatever media type it is sent with:
// a deny sent as text/plain denies, as a command hook's printed deny does.
func TestHTTPHookJSONAnswerAnyMediaType(t *testing.T) {
	for _, mt := range []string{"text/plain", "", "application/vnd.hook+json"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if mt != "" {
				w.Header().Set("Content-Type", mt)
			}
			io.WriteString(w, `{"decision":"deny","reason":"no"}`)
		}))
		h := hookCommand{Type: "http", URL: srv.URL + "/hook", http: &hookHTTPPolicy{AllowPrivate: true}}
		rep, failure := runHTTPHook(context.Background(), h, []byte(`{}`), testTimeout(5*time.Second), newProcEnv(nil))
		srv.Close()
		if failure != "" || !rep.JSON {
			t.Errorf("media type %q: JSON %v, failure %q; want the answer read as JSON", mt, rep.JSON, failure)
		}
	}
}

// A failing http hook is named by its URL as configured: the values of its
// allowedEnvVars (secrets) appear nowhere in what the user, the model and
// the log read, whether the URL is refused, cannot be reached or times
// out, and net/http's error (which quotes the expanded URL) is never shown.
func TestHTTPHookFailureHidesSecrets(t *testing.T) {
	closedPort := freeLoopbackPort(t)
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hold }))
	defer slow.Close()
	defer close(hold)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	slowPort, plainPort := slow.URL[strings.LastIndexByte(slow.URL, ':')+1:], plain.URL[strings.LastIndexByte(plain.URL, ':')+1:]
	const key = "s3cr3t-hook-key"
	for _, tc := range []struct {
		name, url, port string
		allowed         []string
		timeoutMS       int
		want            string
	}{
		{"metadata host", "http://$HOOK_HOST/hook?key=$HOOK_KEY", closedPort, nil, 0,
			`PreToolUse hook "http://$HOOK_HOST/hook?key=$HOOK_KEY" may not reach "$HOOK_HOST": a cloud metadata host`},
		{"refused by the allow list", "http://127.0.0.1:$HOOK_PORT/hook?key=$HOOK_KEY", closedPort, []string{"https://hooks.example.com/*"}, 0,
			`PreToolUse hook "http://127.0.0.1:$HOOK_PORT/hook?key=$HOOK_KEY" has a URL that security.allowedHttpHookUrls does not allow`},
		{"connection refused", "http://127.0.0.1:$HOOK_PORT/hook?key=$HOOK_KEY", closedPort, nil, 0,
			`PreToolUse hook "http://127.0.0.1:$HOOK_PORT/hook?key=$HOOK_KEY" could not be reached: dial tcp 127.0.0.1:$HOOK_PORT: connect: connection refused`},
		{"not TLS", "https://127.0.0.1:$HOOK_PORT/hook/$HOOK_KEY", plainPort, nil, 0,
			`PreToolUse hook "https://127.0.0.1:$HOOK_PORT/hook/$HOOK_KEY" could not be reached: http: server gave HTTP response to HTTPS client`},
		{"timeout", "http://127.0.0.1:$HOOK_PORT/hook/${HOOK_KEY}", slowPort, nil, 50,
			`PreToolUse hook "http://127.0.0.1:$HOOK_PORT/hook/${HOOK_KEY}" timed out after 50 ms`},
	} {
		env := newProcEnv([]string{"PATH=/usr/bin:/bin", "HOOK_KEY=" + key, "HOOK_PORT=" + tc.port, "HOOK_HOST=metadata.google.internal"})
		env.hideSecrets("HOOK_KEY", "HOOK_PORT", "HOOK_HOST")
		pol := &hookHTTPPolicy{AllowPrivate: true}
		for _, p := range tc.allowed {
			re, err := compileHookURLPattern(p)
			if err != nil {
				t.Fatal(err)
			}
			pol.Allowed = append(pol.Allowed, re)
		}
		h := hookCommand{Type: hookTypeHTTP, URL: tc.url, Timeout: tc.timeoutMS, AllowedEnvVars: []string{"HOOK_KEY", "HOOK_PORT", "HOOK_HOST"}, http: pol}
		if tc.timeoutMS == 0 {
			h.Timeout = int(testTimeout(5 * time.Second).Milliseconds())
		}
		out := runPreToolUseHooks(context.Background(), hookEntries(t, "*", h), testHookInput(t.TempDir()), spawnEnv{Env: env})
		want := tc.want + " (the call is blocked: the hook fails closed)"
		if out.Decision != hookDeny || out.Reason != want {
			t.Errorf("%s: %q %q, want deny %q", tc.name, out.Decision, out.Reason, want)
		}
		for _, secret := range []string{key, ":" + tc.port, "metadata.google.internal"} {
			if strings.Contains(out.Reason, secret) {
				t.Errorf("%s: %q shows the value %q", tc.name, out.Reason, secret)
			}
		}
	}
}
