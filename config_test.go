// config_test.go checks every configuration rule of the three subcommands:
// what is accepted, what is rejected with exit 2, and what each error says.
package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestGuardConfig(t *testing.T) {
	const (
		mode     = "--" + flagGuardMode
		endpoint = "--" + flagGuardEndpoint
		timeout  = "--" + flagGuardTimeout
	)
	hostRule := "host must be 127.0.0.1, localhost or [::1]"
	tokenEnv := envGuardToken + "=" + testToken
	tests := []struct {
		name string
		args []string
		env  []string // default: a valid token
		// accepted
		wantMode     string
		wantEndpoint string
		wantTimeout  time.Duration
		// rejected
		errWhat, errValue, errRule string
	}{
		// Mode.
		{name: "default off", args: nil, wantMode: guardModeOff},
		{name: "explicit off", args: []string{"--external-tool-guard-mode=off"}, wantMode: guardModeOff},
		{name: "off with separate value", args: []string{mode, "off"}, wantMode: guardModeOff},
		{name: "off ignores bad endpoint, timeout and token", args: []string{mode + "=off", endpoint + "=http://10.0.0.1", timeout + "=abc"},
			env: []string{envGuardToken + "=\x01"}, wantMode: guardModeOff},
		{name: "off ignores a missing token", args: []string{mode + "=off"}, env: []string{}, wantMode: guardModeOff},
		{name: "mode on", args: []string{mode + "=on"}, errWhat: mode, errValue: "on", errRule: "must be off or required"},
		{name: "mode capitalised", args: []string{mode + "=Required"}, errWhat: mode, errValue: "Required", errRule: "must be off or required"},
		{name: "mode empty", args: []string{mode + "="}, errWhat: mode, errValue: "", errRule: "must be off or required"},
		{name: "mode true", args: []string{mode + "=true"}, errWhat: mode, errValue: "true", errRule: "must be off or required"},
		{name: "mode twice, off last", args: []string{mode + "=required", mode + "=off"}, errWhat: mode, errValue: mode, errRule: "given more than once"},

		// Endpoint, accepted.
		{name: "127.0.0.1 with port", args: required("http://127.0.0.1:8787"), wantEndpoint: "http://127.0.0.1:8787"},
		{name: "http default port", args: required("http://127.0.0.1"), wantEndpoint: "http://127.0.0.1:80"},
		{name: "https default port", args: required("https://127.0.0.1"), wantEndpoint: "https://127.0.0.1:443"},
		{name: "localhost", args: required("http://localhost:8787"), wantEndpoint: "http://localhost:8787"},
		{name: "localhost any case", args: required("https://LocalHost:9"), wantEndpoint: "https://localhost:9"},
		{name: "ipv6 loopback", args: required("http://[::1]:8787"), wantEndpoint: "http://[::1]:8787"},
		{name: "root path", args: required("http://127.0.0.1:8787/"), wantEndpoint: "http://127.0.0.1:8787"},
		{name: "upper-case scheme", args: required("HTTP://127.0.0.1:8787"), wantEndpoint: "http://127.0.0.1:8787"},
		{name: "highest port", args: required("http://127.0.0.1:65535"), wantEndpoint: "http://127.0.0.1:65535"},
		{name: "leading zero port", args: required("http://127.0.0.1:08787"), wantEndpoint: "http://127.0.0.1:8787"},

		// Endpoint, rejected.
		{name: "endpoint missing", args: []string{mode + "=required"}, errWhat: endpoint, errValue: "", errRule: "required when"},
		{name: "endpoint empty", args: required(""), errWhat: endpoint, errValue: "", errRule: "required when"},
		{name: "private address", args: required("http://10.0.0.1:8787"), errWhat: endpoint, errValue: "http://10.0.0.1:8787", errRule: hostRule},
		{name: "other 127 address", args: required("http://127.0.0.2:8787"), errWhat: endpoint, errValue: "http://127.0.0.2:8787", errRule: hostRule},
		{name: "short 127 form", args: required("http://127.1:8787"), errWhat: endpoint, errValue: "http://127.1:8787", errRule: hostRule},
		{name: "decimal address", args: required("http://2130706433:8787"), errWhat: endpoint, errValue: "http://2130706433:8787", errRule: hostRule},
		{name: "any address", args: required("http://0.0.0.0:8787"), errWhat: endpoint, errValue: "http://0.0.0.0:8787", errRule: hostRule},
		{name: "mapped ipv4", args: required("http://[::ffff:127.0.0.1]:8787"), errWhat: endpoint, errValue: "http://[::ffff:127.0.0.1]:8787", errRule: hostRule},
		{name: "long ipv6 loopback", args: required("http://[0:0:0:0:0:0:0:1]:8787"), errWhat: endpoint, errValue: "http://[0:0:0:0:0:0:0:1]:8787", errRule: hostRule},
		{name: "ipv6 zone", args: required("http://[::1%25lo]:8787"), errWhat: endpoint, errValue: "http://[::1%25lo]:8787", errRule: "percent-encoding"},
		{name: "escaped host", args: required("http://%6cocalhost:8787"), errWhat: endpoint, errValue: "http://%6cocalhost:8787", errRule: "percent-encoding"},
		{name: "host name", args: required("http://example.com"), errWhat: endpoint, errValue: "http://example.com", errRule: hostRule},
		{name: "localhost with dot", args: required("http://localhost.:8787"), errWhat: endpoint, errValue: "http://localhost.:8787", errRule: hostRule},
		{name: "localhost with long s", args: required("http://localhoſt:8787"), errWhat: endpoint, errValue: "http://localhoſt:8787", errRule: hostRule},
		{name: "localhost subdomain", args: required("http://a.localhost:8787"), errWhat: endpoint, errValue: "http://a.localhost:8787", errRule: hostRule},
		{name: "user", args: required("http://user@127.0.0.1:8787"), errWhat: endpoint, errValue: "http://user@127.0.0.1:8787", errRule: "userinfo"},
		{name: "user and password", args: required("http://u:p@127.0.0.1:8787"), errWhat: endpoint, errValue: "http://u:p@127.0.0.1:8787", errRule: "userinfo"},
		{name: "empty userinfo", args: required("http://@127.0.0.1:8787"), errWhat: endpoint, errValue: "http://@127.0.0.1:8787", errRule: "userinfo"},
		{name: "empty query", args: required("http://127.0.0.1:8787?"), errWhat: endpoint, errValue: "http://127.0.0.1:8787?", errRule: "query"},
		{name: "query", args: required("http://127.0.0.1:8787/?a=b"), errWhat: endpoint, errValue: "http://127.0.0.1:8787/?a=b", errRule: "query"},
		{name: "empty fragment", args: required("http://127.0.0.1:8787#"), errWhat: endpoint, errValue: "http://127.0.0.1:8787#", errRule: "fragment"},
		{name: "fragment", args: required("http://127.0.0.1:8787/#x"), errWhat: endpoint, errValue: "http://127.0.0.1:8787/#x", errRule: "fragment"},
		{name: "path", args: required("http://127.0.0.1:8787/v1"), errWhat: endpoint, errValue: "http://127.0.0.1:8787/v1", errRule: "path must be empty or /"},
		{name: "double slash path", args: required("http://127.0.0.1:8787//"), errWhat: endpoint, errValue: "http://127.0.0.1:8787//", errRule: "path must be empty or /"},
		{name: "ftp", args: required("ftp://127.0.0.1"), errWhat: endpoint, errValue: "ftp://127.0.0.1", errRule: "scheme must be http or https"},
		{name: "ws", args: required("ws://127.0.0.1:8787"), errWhat: endpoint, errValue: "ws://127.0.0.1:8787", errRule: "scheme must be http or https"},
		{name: "no scheme", args: required("127.0.0.1:8787"), errWhat: endpoint, errValue: "127.0.0.1:8787", errRule: "not a valid URL"},
		{name: "scheme-relative", args: required("//127.0.0.1:8787"), errWhat: endpoint, errValue: "//127.0.0.1:8787", errRule: "absolute"},
		{name: "opaque", args: required("http:127.0.0.1"), errWhat: endpoint, errValue: "http:127.0.0.1", errRule: "absolute"},
		{name: "no host", args: required("http:///"), errWhat: endpoint, errValue: "http:///", errRule: "absolute"},
		{name: "port zero", args: required("http://127.0.0.1:0"), errWhat: endpoint, errValue: "http://127.0.0.1:0", errRule: "port must be 1-65535"},
		{name: "port too high", args: required("http://127.0.0.1:65536"), errWhat: endpoint, errValue: "http://127.0.0.1:65536", errRule: "port must be 1-65535"},
		{name: "port overflow", args: required("http://127.0.0.1:99999999999999999999"), errWhat: endpoint, errValue: "http://127.0.0.1:99999999999999999999", errRule: "port must be 1-65535"},
		{name: "port not numeric", args: required("http://127.0.0.1:abc"), errWhat: endpoint, errValue: "http://127.0.0.1:abc", errRule: "not a valid URL"},
		{name: "port empty", args: required("http://127.0.0.1:"), errWhat: endpoint, errValue: "http://127.0.0.1:", errRule: "port must not be empty"},
		{name: "leading space", args: required(" http://127.0.0.1"), errWhat: endpoint, errValue: " http://127.0.0.1", errRule: "not a valid URL"},
		{name: "newline", args: required("http://127.0.0.1\n"), errWhat: endpoint, errValue: "http://127.0.0.1\n", errRule: "not a valid URL"},
		{name: "endpoint twice", args: required("http://127.0.0.1:1", endpoint+"=http://127.0.0.1:2"), errWhat: endpoint, errValue: endpoint, errRule: "given more than once"},

		// Timeout.
		{name: "timeout default", args: required("http://127.0.0.1:1"), wantTimeout: 3000 * time.Millisecond},
		{name: "timeout lowest", args: required("http://127.0.0.1:1", timeout+"=100"), wantTimeout: 100 * time.Millisecond},
		{name: "timeout highest", args: required("http://127.0.0.1:1", timeout+"=30000"), wantTimeout: testTimeout(30 * time.Second)},
		{name: "timeout leading zero", args: required("http://127.0.0.1:1", timeout, "01500"), wantTimeout: 1500 * time.Millisecond},
		{name: "timeout fraction", args: required("http://127.0.0.1:1", timeout+"=1500.5"), errWhat: timeout, errValue: "1500.5", errRule: "must be an integer from 100 through 30000"},
		{name: "timeout letters", args: required("http://127.0.0.1:1", timeout+"=abc"), errWhat: timeout, errValue: "abc", errRule: "must be an integer"},
		{name: "timeout zero", args: required("http://127.0.0.1:1", timeout+"=0"), errWhat: timeout, errValue: "0", errRule: "must be an integer"},
		{name: "timeout negative", args: required("http://127.0.0.1:1", timeout+"=-1"), errWhat: timeout, errValue: "-1", errRule: "must be an integer"},
		{name: "timeout plus sign", args: required("http://127.0.0.1:1", timeout+"=+200"), errWhat: timeout, errValue: "+200", errRule: "must be an integer"},
		{name: "timeout empty", args: required("http://127.0.0.1:1", timeout+"="), errWhat: timeout, errValue: "", errRule: "must be an integer"},
		{name: "timeout below", args: required("http://127.0.0.1:1", timeout+"=99"), errWhat: timeout, errValue: "99", errRule: "must be an integer"},
		{name: "timeout above", args: required("http://127.0.0.1:1", timeout+"=30001"), errWhat: timeout, errValue: "30001", errRule: "must be an integer"},
		{name: "timeout space", args: required("http://127.0.0.1:1", timeout+"= 200"), errWhat: timeout, errValue: " 200", errRule: "must be an integer"},
		{name: "timeout exponent", args: required("http://127.0.0.1:1", timeout+"=1e3"), errWhat: timeout, errValue: "1e3", errRule: "must be an integer"},
		{name: "timeout hex", args: required("http://127.0.0.1:1", timeout+"=0x64"), errWhat: timeout, errValue: "0x64", errRule: "must be an integer"},
		{name: "timeout overflow", args: required("http://127.0.0.1:1", timeout+"=99999999999999999999999"), errWhat: timeout, errValue: "99999999999999999999999", errRule: "must be an integer"},

		// Token (the value is never shown, so errValue is what must not appear).
		{name: "token missing", args: required("http://127.0.0.1:1"), env: []string{}, errWhat: envGuardToken, errRule: "must be set"},
		{name: "token empty", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "="}, errWhat: envGuardToken, errRule: "must not be blank"},
		{name: "token blank", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=  \u00a0\u3000\ufeff"}, errWhat: envGuardToken, errRule: "must not be blank"},
		{name: "token tab", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=\tsecretA"}, errWhat: envGuardToken, errValue: "secretA", errRule: "control character"},
		{name: "token newline", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secretB\n"}, errWhat: envGuardToken, errValue: "secretB", errRule: "control character"},
		{name: "token DEL", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secret\x7fC"}, errWhat: envGuardToken, errValue: "secret", errRule: "control character"},
		{name: "token C1", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secret\u0085D"}, errWhat: envGuardToken, errValue: "secret", errRule: "control character"},
		{name: "token C1 last", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secret\u009fE"}, errWhat: envGuardToken, errValue: "secret", errRule: "control character"},
		{name: "token line separator", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secret\u2028F"}, errWhat: envGuardToken, errValue: "secret", errRule: "control character"},
		{name: "token paragraph separator", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secret\u2029G"}, errWhat: envGuardToken, errValue: "secret", errRule: "control character"},
		{name: "token invalid UTF-8", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=secret\xffH"}, errWhat: envGuardToken, errValue: "secret", errRule: "valid UTF-8"},
		{name: "token too long", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=" + strings.Repeat("s", 8193)}, errWhat: envGuardToken, errValue: strings.Repeat("s", 8193), errRule: "at most 8192 UTF-16 code units"},
		{name: "token too long in UTF-16", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=" + strings.Repeat("😀", 4097)}, errWhat: envGuardToken, errValue: "😀😀", errRule: "at most 8192 UTF-16 code units"},
		{name: "token longest", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=" + strings.Repeat("s", 8192)}, wantTimeout: testTimeout(3 * time.Second)},
		{name: "token longest in UTF-16", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=" + strings.Repeat("😀", 4096)}, wantTimeout: testTimeout(3 * time.Second)},
		{name: "token long before trimming", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=  " + strings.Repeat("s", 8192) + "  "}, wantTimeout: testTimeout(3 * time.Second)},
		{name: "token with inner space", args: required("http://127.0.0.1:1"), env: []string{envGuardToken + "=a b"}, wantTimeout: testTimeout(3 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = []string{tokenEnv}
			}
			sys, stdout, _ := testSystem(env...)
			opts, err := parseACPArgs(tt.args, sys)
			if tt.errWhat != "" {
				assertUsageError(t, err, tt.errWhat, tt.errValue, tt.errRule, tt.errWhat == envGuardToken)
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if stdout.Len() > 0 {
				t.Errorf("parsing printed %q", stdout)
			}
			g := opts.Guard
			if tt.wantMode == guardModeOff {
				if g != (guardConfig{Mode: guardModeOff}) {
					t.Errorf("off mode config = %+v, want only the mode", g)
				}
				return
			}
			if g.Mode != guardModeRequired || !g.required() {
				t.Fatalf("mode = %q, want required", g.Mode)
			}
			if tt.wantEndpoint != "" && g.Endpoint.String() != tt.wantEndpoint {
				t.Errorf("endpoint = %q, want %q", g.Endpoint, tt.wantEndpoint)
			}
			if tt.wantTimeout != 0 && g.Timeout != tt.wantTimeout {
				t.Errorf("timeout = %v, want %v", g.Timeout, tt.wantTimeout)
			}
			if g.Token == "" || g.Token != strings.TrimSpace(g.Token) {
				t.Errorf("token %q is empty or untrimmed", g.Token)
			}
		})
	}
}

func TestParseTokenTrims(t *testing.T) {
	for raw, want := range map[string]string{
		"  abc  ":                 "abc",
		"\u00a0abc\u3000":         "abc",
		"\ufeffabc\u2003":         "abc",
		"a b":                     "a b",
		"ab\u00a0":                "ab",
		strings.Repeat("😀", 4096): strings.Repeat("😀", 4096),
	} {
		got, err := parseToken(raw)
		if err != nil || got != want {
			t.Errorf("parseToken(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestTokenNeverInErrors(t *testing.T) {
	const secret = "SeCrEt-5150-do-not-print"
	bad := []string{secret + "\x00", "\t" + secret, secret + "\u2028", secret + "\xfe", strings.Repeat(secret, 400)}
	var errs []error
	for _, tok := range bad {
		sys, _, _ := testSystem(envGuardToken+"="+tok, envServerToken+"="+tok)
		_, err := parseACPArgs(required("http://127.0.0.1:1"), sys)
		errs = append(errs, err)
		_, err = parseProviderArgs([]string{"--policy", "p.json"}, sys)
		errs = append(errs, err)
		_, err = parseServeArgs([]string{"--workspace", t.TempDir()}, sys) // QWEN_SERVER_TOKEN
		errs = append(errs, err)
		sys, _, _ = testSystem()
		_, err = parseServeArgs([]string{"--workspace", t.TempDir(), "--token", tok}, sys)
		errs = append(errs, err)
	}
	sys, _, _ := testSystem()
	_, err := parseServeArgs([]string{"--token", secret, "--token", secret}, sys)
	errs = append(errs, err)
	_, err = parseServeArgs([]string{"--token", secret, "--hostname", "0.0.0.0", "--port", "x"}, sys)
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d accepted a bad token", i)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "SeCrEt") {
			t.Errorf("case %d: error shows the token: %q", i, err)
		}
	}

	// And through the binary: stderr and stdout of a failed start.
	code, stdout, stderr := runAcpguard(t, []string{"serve", "--workspace", t.TempDir(), "--external-tool-guard-mode=required",
		"--external-tool-guard-endpoint=http://127.0.0.1:1"}, envGuardToken+"="+secret+"\x01")
	if code != exitUsage {
		t.Errorf("exit code %d, want %d (stderr %q)", code, exitUsage, stderr)
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Errorf("output shows the token: stdout %q stderr %q", stdout, stderr)
	}
	if !strings.Contains(stderr, "acpguard: error: "+envGuardToken+": must not contain a control character") {
		t.Errorf("stderr %q lacks the token error", stderr)
	}
}

func TestProviderArgs(t *testing.T) {
	tokenEnv := envGuardToken + "=" + testToken
	tests := []struct {
		name                       string
		args                       []string
		env                        []string
		want                       providerOptions
		errWhat, errValue, errRule string
	}{
		{name: "defaults", args: []string{"--policy", "p.json"},
			want: providerOptions{Listen: mustListen("127.0.0.1:8787"), PolicyFile: "p.json", Token: testToken}},
		{name: "all flags", args: []string{"--listen=[::1]:0", "--policy=p.json", "--audit", "-", "--audit-arguments"},
			want: providerOptions{Listen: mustListen("[::1]:0"), PolicyFile: "p.json", AuditPath: "-", AuditArguments: true, Token: testToken}},
		{name: "localhost pinned", args: []string{"--listen", "LocalHost:9", "--policy", "p"},
			want: providerOptions{Listen: mustListen("127.0.0.1:9"), PolicyFile: "p", Token: testToken}},
		{name: "audit file", args: []string{"--policy", "p", "--audit", "a.log"},
			want: providerOptions{Listen: mustListen("127.0.0.1:8787"), PolicyFile: "p", AuditPath: "a.log", Token: testToken}},
		{name: "token trimmed", args: []string{"--policy", "p"}, env: []string{envGuardToken + "= t "},
			want: providerOptions{Listen: mustListen("127.0.0.1:8787"), PolicyFile: "p", Token: "t"}},
		{name: "any address", args: []string{"--listen", "0.0.0.0:8787", "--policy", "p"}, errWhat: "--listen", errValue: "0.0.0.0:8787", errRule: "host must be 127.0.0.1, localhost or [::1]"},
		{name: "all interfaces", args: []string{"--listen", ":8787", "--policy", "p"}, errWhat: "--listen", errValue: ":8787", errRule: "host must be"},
		{name: "other loopback", args: []string{"--listen", "127.0.0.2:1", "--policy", "p"}, errWhat: "--listen", errValue: "127.0.0.2:1", errRule: "host must be"},
		{name: "host name", args: []string{"--listen", "example.com:80", "--policy", "p"}, errWhat: "--listen", errValue: "example.com:80", errRule: "host must be"},
		{name: "no port", args: []string{"--listen", "127.0.0.1", "--policy", "p"}, errWhat: "--listen", errValue: "127.0.0.1", errRule: "must be host:port"},
		{name: "bare ipv6", args: []string{"--listen", "::1:80", "--policy", "p"}, errWhat: "--listen", errValue: "::1:80", errRule: "must be host:port"},
		{name: "empty port", args: []string{"--listen", "127.0.0.1:", "--policy", "p"}, errWhat: "--listen", errValue: "127.0.0.1:", errRule: "port must be an integer from 0 through 65535"},
		{name: "port too high", args: []string{"--listen", "127.0.0.1:65536", "--policy", "p"}, errWhat: "--listen", errValue: "127.0.0.1:65536", errRule: "port must be"},
		{name: "named port", args: []string{"--listen", "127.0.0.1:http", "--policy", "p"}, errWhat: "--listen", errValue: "127.0.0.1:http", errRule: "port must be"},
		{name: "policy missing", args: nil, errWhat: "--policy", errValue: "", errRule: "a policy file is required"},
		{name: "token missing", args: []string{"--policy", "p"}, env: []string{}, errWhat: envGuardToken, errRule: "must be set"},
		{name: "token blank", args: []string{"--policy", "p"}, env: []string{envGuardToken + "= "}, errWhat: envGuardToken, errRule: "must not be blank"},
		{name: "unknown flag", args: []string{"--policy", "p", "--bogus"}, errWhat: `unknown flag "--bogus"`, errValue: "--bogus", errRule: `run "acpguard provider --help"`},
		{name: "flag without value", args: []string{"--policy"}, errWhat: `flag "--policy" needs a value`, errValue: "--policy", errRule: "acpguard provider --help"},
		{name: "extra argument", args: []string{"--policy", "p", "extra"}, errWhat: "unexpected argument", errValue: "extra", errRule: "acpguard provider --help"},
		{name: "bool with value", args: []string{"--policy", "p", "--audit-arguments=maybe"}, errWhat: `flag "--audit-arguments": invalid boolean value`, errValue: "maybe", errRule: "acpguard provider --help"},
		{name: "listen twice", args: []string{"--policy", "p", "--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"}, errWhat: `"--listen"`, errValue: "--listen", errRule: "given more than once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = []string{tokenEnv}
			}
			sys, _, _ := testSystem(env...)
			got, err := parseProviderArgs(tt.args, sys)
			if tt.errWhat != "" {
				assertUsageError(t, err, tt.errWhat, tt.errValue, tt.errRule, tt.errWhat == envGuardToken)
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestServeArgs(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	file := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ws := []string{"--workspace", dir}
	tests := []struct {
		name                       string
		args                       []string
		env                        []string
		check                      func(t *testing.T, o serveOptions)
		errWhat, errValue, errRule string
	}{
		{name: "defaults", args: nil, check: func(t *testing.T, o serveOptions) {
			want := serveOptions{Hostname: bindAddr{"127.0.0.1", true}, Port: 4170, Workspaces: []string{wd},
				Guard: guardConfig{Mode: guardModeOff}, MaxPendingPrompts: 5}
			if !equalServe(o, want) {
				t.Errorf("got %+v, want %+v", o, want)
			}
		}},
		{name: "workspaces absolute, cleaned, deduplicated", args: []string{"--workspace", dir + "/./", "--workspace", other, "--workspace", dir},
			check: func(t *testing.T, o serveOptions) {
				if want := []string{dir, other}; !slices.Equal(o.Workspaces, want) {
					t.Errorf("workspaces = %q, want %q", o.Workspaces, want)
				}
			}},
		{name: "relative workspace", args: []string{"--workspace", "."}, check: func(t *testing.T, o serveOptions) {
			if !slices.Equal(o.Workspaces, []string{wd}) {
				t.Errorf("workspaces = %q, want [%q]", o.Workspaces, wd)
			}
		}},
		{name: "port zero", args: append([]string{"--port", "0"}, ws...), check: func(t *testing.T, o serveOptions) {
			if o.Port != 0 {
				t.Errorf("port = %d", o.Port)
			}
		}},
		{name: "token flag wins over env", args: append([]string{"--token", " flagtok "}, ws...), env: []string{envServerToken + "=envtok"},
			check: func(t *testing.T, o serveOptions) {
				if o.Token != "flagtok" {
					t.Errorf("token = %q, want the trimmed flag value", o.Token)
				}
			}},
		{name: "token from env", args: ws, env: []string{envServerToken + "=envtok"}, check: func(t *testing.T, o serveOptions) {
			if o.Token != "envtok" {
				t.Errorf("token = %q, want envtok", o.Token)
			}
		}},
		{name: "non-loopback with token", args: append([]string{"--hostname", "0.0.0.0", "--token", "t"}, ws...), check: func(t *testing.T, o serveOptions) {
			if o.Hostname != (bindAddr{"0.0.0.0", false}) || o.Token != "t" {
				t.Errorf("got %+v", o)
			}
		}},
		{name: "loopback names", args: append([]string{"--hostname", "LOCALHOST"}, ws...), check: func(t *testing.T, o serveOptions) {
			if o.Hostname != (bindAddr{"127.0.0.1", true}) {
				t.Errorf("hostname = %+v, want localhost pinned to 127.0.0.1", o.Hostname)
			}
		}},
		{name: "ipv6 loopback in brackets", args: append([]string{"--hostname", "[::1]"}, ws...), check: func(t *testing.T, o serveOptions) {
			if o.Hostname != (bindAddr{"::1", true}) {
				t.Errorf("hostname = %+v", o.Hostname)
			}
		}},
		{name: "required guard", args: append(required("http://localhost:8787", "--external-tool-guard-timeout-ms", "500"), ws...),
			env: []string{envGuardToken + "=g"}, check: func(t *testing.T, o serveOptions) {
				if !o.Guard.required() || o.Guard.Endpoint.String() != "http://localhost:8787" || o.Guard.Timeout != 500*time.Millisecond || o.Guard.Token != "g" {
					t.Errorf("guard = %+v", o.Guard)
				}
			}},
		{name: "everything else", args: append([]string{"--settings", file, "--decision-log", "d.log", "--max-pending-prompts-per-session", "1",
			"--allow-slash-command", "/compress", "--allow-slash-command", "stats", "--allow-slash-command", "compress"}, ws...),
			check: func(t *testing.T, o serveOptions) {
				if o.SettingsFile != file || o.DecisionLog != "d.log" || o.MaxPendingPrompts != 1 ||
					!slices.Equal(o.AllowSlashCommands, []string{"compress", "stats"}) {
					t.Errorf("got %+v", o)
				}
			}},
		{name: "require auth with token", args: append([]string{"--require-auth"}, ws...), env: []string{envServerToken + "=envtok"},
			check: func(t *testing.T, o serveOptions) {
				if !o.RequireAuth || o.Token != "envtok" {
					t.Errorf("got %+v", o)
				}
			}},
		{name: "require auth without token", args: append([]string{"--require-auth"}, ws...), errWhat: "--require-auth", errValue: "127.0.0.1", errRule: "no host token is given; set --token, --token-file or QWEN_SERVER_TOKEN"},
		{name: "any address without token", args: append([]string{"--hostname", "0.0.0.0"}, ws...), errWhat: "--hostname", errValue: "0.0.0.0", errRule: "a non-loopback address requires --token, --token-file or QWEN_SERVER_TOKEN"},
		{name: "host name without token", args: append([]string{"--hostname", "example.com"}, ws...), errWhat: "--hostname", errValue: "example.com", errRule: "non-loopback"},
		{name: "bad hostname", args: append([]string{"--hostname", "a b"}, ws...), errWhat: "--hostname", errValue: "a b", errRule: "must be an IP address or a host name"},
		{name: "empty hostname", args: append([]string{"--hostname", ""}, ws...), errWhat: "--hostname", errValue: "", errRule: "must be an IP address or a host name"},
		{name: "ipv6 zone", args: append([]string{"--hostname", "fe80::1%eth0", "--token", "t"}, ws...), errWhat: "--hostname", errValue: "fe80::1%eth0", errRule: "must be an IP address"},
		{name: "port letters", args: append([]string{"--port", "http"}, ws...), errWhat: "--port", errValue: "http", errRule: "port must be an integer from 0 through 65535"},
		{name: "port too high", args: append([]string{"--port", "65536"}, ws...), errWhat: "--port", errValue: "65536", errRule: "port must be"},
		{name: "port negative", args: append([]string{"--port", "-1"}, ws...), errWhat: "--port", errValue: "-1", errRule: "port must be"},
		{name: "workspace missing", args: []string{"--workspace", filepath.Join(dir, "nope")}, errWhat: "--workspace", errValue: filepath.Join(dir, "nope"), errRule: "no such directory"},
		{name: "workspace is a file", args: []string{"--workspace", file}, errWhat: "--workspace", errValue: file, errRule: "not a directory"},
		{name: "workspace empty", args: []string{"--workspace", ""}, errWhat: "--workspace", errValue: "", errRule: "must name a directory"},
		{name: "settings missing", args: append([]string{"--settings", filepath.Join(dir, "none.json")}, ws...), errWhat: "--settings", errValue: filepath.Join(dir, "none.json"), errRule: "no such file"},
		{name: "settings is a directory", args: append([]string{"--settings", dir}, ws...), errWhat: "--settings", errValue: dir, errRule: "not a regular file"},
		{name: "token blank", args: append([]string{"--token", "  "}, ws...), errWhat: "--token", errRule: "must not be blank"},
		{name: "env token blank", args: ws, env: []string{envServerToken + "="}, errWhat: envServerToken, errRule: "must not be blank"},
		{name: "token control character", args: append([]string{"--token", "x\ny"}, ws...), errWhat: "--token", errValue: "x\ny", errRule: "control character"},
		{name: "max pending zero", args: append([]string{"--max-pending-prompts-per-session", "0"}, ws...), errWhat: "--max-pending-prompts-per-session", errValue: "0", errRule: "must be an integer from 1 through 1000"},
		{name: "max pending huge", args: append([]string{"--max-pending-prompts-per-session", "1001"}, ws...), errWhat: "--max-pending-prompts-per-session", errValue: "1001", errRule: "from 1 through 1000"},
		{name: "max pending letters", args: append([]string{"--max-pending-prompts-per-session", "five"}, ws...), errWhat: "--max-pending-prompts-per-session", errValue: "five", errRule: "must be an integer"},
		{name: "slash command fork", args: append([]string{"--allow-slash-command", "/fork"}, ws...), errWhat: "--allow-slash-command", errValue: "/fork", errRule: "nested agent"},
		{name: "slash command empty", args: append([]string{"--allow-slash-command", "/"}, ws...), errWhat: "--allow-slash-command", errValue: "/", errRule: "must be a command name"},
		{name: "slash command with space", args: append([]string{"--allow-slash-command", "a b"}, ws...), errWhat: "--allow-slash-command", errValue: "a b", errRule: "must be a command name"},
		{name: "bad guard mode", args: append([]string{"--external-tool-guard-mode", "yes"}, ws...), errWhat: "--external-tool-guard-mode", errValue: "yes", errRule: "must be off or required"},
		{name: "required without token", args: append(required("http://127.0.0.1:1"), ws...), env: []string{}, errWhat: envGuardToken, errRule: "must be set"},
		{name: "unknown flag", args: []string{"--listen", "x"}, errWhat: `unknown flag "--listen"`, errValue: "--listen", errRule: `run "acpguard serve --help"`},
		{name: "extra argument", args: append(ws, "now"), errWhat: "unexpected argument", errValue: "now", errRule: "acpguard serve --help"},
		{name: "port twice", args: append([]string{"--port", "1", "--port", "2"}, ws...), errWhat: `"--port"`, errValue: "--port", errRule: "given more than once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys, _, _ := testSystem(tt.env...)
			got, err := parseServeArgs(tt.args, sys)
			if tt.errWhat != "" {
				secret := tt.errWhat == envGuardToken || tt.errWhat == envServerToken || tt.errWhat == "--token"
				assertUsageError(t, err, tt.errWhat, tt.errValue, tt.errRule, secret)
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			tt.check(t, got)
		})
	}
}

func equalServe(a, b serveOptions) bool {
	return a.Hostname == b.Hostname && a.Port == b.Port && slices.Equal(a.Workspaces, b.Workspaces) &&
		a.SettingsFile == b.SettingsFile && a.Token == b.Token && a.Guard == b.Guard && a.DecisionLog == b.DecisionLog &&
		a.MaxPendingPrompts == b.MaxPendingPrompts && slices.Equal(a.AllowSlashCommands, b.AllowSlashCommands)
}

// TestHelp runs the binary: each subcommand's --help and -h exit 0 and list
// every flag and every environment variable the subcommand reads.
func TestHelp(t *testing.T) {
	guard := []string{"--external-tool-guard-mode", "--external-tool-guard-endpoint", "--external-tool-guard-timeout-ms", "--external-tool-guard-token-file", "--model-key-file"}
	tests := []struct {
		cmd  string
		want []string
	}{
		{"provider", []string{"--listen", "--policy", "--audit", "--audit-arguments", "--help", envGuardToken, envServerToken}},
		{"acp", append(guard, "--help", "--state-dir", envGuardToken, envServerToken, envPrivateCapability, envPrivateGuard)},
		{"serve", append(guard, "--hostname", "--port", "--workspace", "--settings", "--token", "--decision-log",
			"--max-pending-prompts-per-session", "--allow-slash-command", "--help", envServerToken, envGuardToken,
			"--token-file", "--allow-tokenless-loopback", "--require-auth", envModelKey)},
	}
	for _, tt := range tests {
		for _, flagName := range []string{"--help", "-h"} {
			t.Run(tt.cmd+flagName, func(t *testing.T) {
				// The race detector otherwise sleeps a second before every exit 0.
				code, stdout, stderr := runAcpguard(t, []string{tt.cmd, flagName}, "GORACE=atexit_sleep_ms=0")
				if code != exitOK {
					t.Errorf("exit code %d, want 0 (stderr %q)", code, stderr)
				}
				if stderr != "" {
					t.Errorf("stderr %q, want nothing", stderr)
				}
				if !strings.HasPrefix(stdout, "Usage: acpguard "+tt.cmd) {
					t.Errorf("stdout does not start with the usage line:\n%s", stdout)
				}
				for _, w := range tt.want {
					if !strings.Contains(stdout, w) {
						t.Errorf("usage does not list %s:\n%s", w, stdout)
					}
				}
			})
		}
	}
}

// TestHelpListsEveryFlag keeps the usage texts in step with the flag sets:
// every flag a subcommand defines is accepted by name and appears in its usage.
func TestHelpListsEveryFlag(t *testing.T) {
	usages := map[string]string{"provider": providerUsage, "acp": acpUsage, "serve": serveUsage}
	for cmd, usage := range usages {
		for _, line := range strings.Split(usage, "\n") {
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(name, " ")
			if name == "help" {
				continue
			}
			// A flag the usage lists must exist: parsing it must not say "unknown flag".
			sys, _, _ := testSystem()
			var err error
			args := []string{"--" + name + "=x"}
			switch cmd {
			case "provider":
				_, err = parseProviderArgs(args, sys)
			case "acp":
				_, err = parseACPArgs(args, sys)
			case "serve":
				_, err = parseServeArgs(args, sys)
			}
			if err != nil && strings.Contains(err.Error(), "unknown flag") {
				t.Errorf("%s usage lists --%s, which the flag set does not define: %v", cmd, name, err)
			}
		}
	}
	// And the other way: a flag the usage does not list is unknown.
	sys, _, _ := testSystem()
	if _, err := parseACPArgs([]string{"--policy", "p"}, sys); err == nil || !strings.Contains(err.Error(), `unknown flag "--policy"`) {
		t.Errorf("acp accepted --policy: %v", err)
	}
}

// TestBadConfigExitCode runs the binary: a configuration error exits 2 with
// one "acpguard: error:" line naming the flag, before anything starts.
func TestBadConfigExitCode(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"acp", "--external-tool-guard-mode=bogus"}, `acpguard: error: --external-tool-guard-mode "bogus": must be off or required`},
		{[]string{"serve", "--external-tool-guard-mode", "bogus"}, `--external-tool-guard-mode "bogus": must be off or required`},
		{[]string{"acp", "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=http://10.0.0.1:8787"},
			`acpguard: error: --external-tool-guard-endpoint "http://10.0.0.1:8787": host must be 127.0.0.1, localhost or [::1]`},
		{[]string{"acp", "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=http://127.0.0.1:1", "--external-tool-guard-timeout-ms=1500.5"},
			`--external-tool-guard-timeout-ms "1500.5": must be an integer from 100 through 30000`},
		{[]string{"provider", "--listen", "0.0.0.0:8787", "--policy", "p.json"}, `--listen "0.0.0.0:8787": host must be`},
		{[]string{"provider", "--bogus"}, `unknown flag "--bogus"; run "acpguard provider --help"`},
		{[]string{"serve", "--sandbx", "off"}, `acpguard: error: unknown flag "--sandbx" (did you mean "--sandbox"?); run "acpguard serve --help"`},
		{[]string{"acp", "--external-tool-guard-mod=required"}, `unknown flag "--external-tool-guard-mod" (did you mean "--external-tool-guard-mode"?)`},
		{[]string{"serve", "--disabled-slash-commands", "help,a b"}, `acpguard: error: --disabled-slash-commands "help,a b": "a b" is not a command name`},
		{[]string{"acp", "--disabled-slash-commands", ","}, `acpguard: error: --disabled-slash-commands ",": "" is not a command name`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runAcpguard(t, tt.args, envGuardToken+"="+testToken)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d (stderr %q)", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tt.want) || strings.Count(stderr, "acpguard: error:") != 1 {
				t.Errorf("stderr %q, want one error line containing %q", stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		"tok", " tok ", "", "   ", "\t", "a\nb", "\x7f", "\u0085", "\u2028", "\u2029", "\xff",
		"\ufeffx", "\u00a0x\u3000", strings.Repeat("a", 8192), strings.Repeat("😀", 4097),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tok, err := parseToken(raw)
		if err != nil {
			if exitCode(err) != exitUsage || !strings.HasPrefix(err.Error(), envGuardToken+": ") {
				t.Fatalf("error %q is not a usage error naming the variable", err)
			}
			rest := strings.TrimPrefix(err.Error(), envGuardToken+": ")
			if len(raw) > 0 && strings.Contains(rest, raw) && !strings.Contains(tokenErrorWords, raw) {
				t.Fatalf("error %q shows the token %q", err, raw)
			}
			return
		}
		if tok == "" || !utf8.ValidString(tok) || strings.IndexFunc(tok, isControl) >= 0 {
			t.Fatalf("accepted %q as %q", raw, tok)
		}
		if !strings.Contains(raw, tok) || strings.TrimSpace(tok) != tok {
			t.Fatalf("accepted %q as %q: not the trimmed input", raw, tok)
		}
		units := 0
		for _, r := range tok {
			units += utf16Len(r)
		}
		if units > maxTokenUTF16 {
			t.Fatalf("accepted %d UTF-16 code units", units)
		}
	})
}

// tokenErrorWords are the fixed words of the token errors; a fuzzed token that
// happens to be one of their substrings is not a leak.
const tokenErrorWords = "must be valid UTF-8 (value not shown) must not contain a control character " +
	"must not be blank must be at most 8192 UTF-16 code units, got 0123456789"

func TestFlagErrorsAreUsageErrors(t *testing.T) {
	sys, _, _ := testSystem()
	_, err := parseACPArgs([]string{"--nope"}, sys)
	var u *usageError
	if !errors.As(err, &u) {
		t.Fatalf("unknown flag error %v is not a usage error", err)
	}
}
