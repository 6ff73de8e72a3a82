// provider_args_test.go tests the operator flags of "acpguard provider"
// added for operations (shadow, logs, TLS) and of "acpguard provider check".
package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
)

func TestProviderOpsArgs(t *testing.T) {
	base := providerOptions{Listen: mustListen("127.0.0.1:8787"), PolicyFile: "p.json", Token: testToken}
	with := func(f func(*providerOptions)) providerOptions {
		o := base
		f(&o)
		return o
	}
	tests := []struct {
		name                       string
		args                       []string
		want                       providerOptions
		errWhat, errValue, errRule string
	}{
		{name: "defaults: enforcing, text, info, plain HTTP", args: nil, want: base},
		{name: "shadow", args: []string{"--shadow"}, want: with(func(o *providerOptions) { o.Shadow = true })},
		{name: "json debug", args: []string{"--log-format", "json", "--log-level=debug"},
			want: with(func(o *providerOptions) { o.LogJSON, o.LogLevel = true, slog.LevelDebug })},
		{name: "text warn", args: []string{"--log-format=text", "--log-level", "warn"}, want: with(func(o *providerOptions) { o.LogLevel = slog.LevelWarn })},
		{name: "error level", args: []string{"--log-level", "error"}, want: with(func(o *providerOptions) { o.LogLevel = slog.LevelError })},
		{name: "tls", args: []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, want: with(func(o *providerOptions) { o.TLSCert, o.TLSKey = "c.pem", "k.pem" })},
		{name: "log format upper case", args: []string{"--log-format", "JSON"}, errWhat: "--log-format", errValue: "JSON", errRule: "must be text or json"},
		{name: "log format empty", args: []string{"--log-format="}, errWhat: "--log-format", errValue: "", errRule: "must be text or json"},
		{name: "log level number", args: []string{"--log-level", "-4"}, errWhat: "--log-level", errValue: "-4", errRule: "must be debug, info, warn or error"},
		{name: "log level twice", args: []string{"--log-level", "debug", "--log-level", "error"}, errWhat: `"--log-level"`, errValue: "--log-level", errRule: "given more than once"},
		{name: "cert only", args: []string{"--tls-cert", "c.pem"}, errWhat: "--tls-key", errValue: "c.pem", errRule: "give both to serve HTTPS, or neither"},
		{name: "key only", args: []string{"--tls-key", "k.pem"}, errWhat: "--tls-cert", errValue: "k.pem", errRule: "give both"},
		{name: "empty key", args: []string{"--tls-cert", "c.pem", "--tls-key="}, errWhat: "--tls-key", errValue: "c.pem", errRule: "give both"},
		{name: "shadow with a value", args: []string{"--shadow=perhaps"}, errWhat: `flag "--shadow": invalid boolean value`, errValue: "perhaps", errRule: "acpguard provider --help"},
		{name: "no insecure switch", args: []string{"--tls-insecure-skip-verify"}, errWhat: "unknown flag", errValue: "--tls-insecure-skip-verify", errRule: "acpguard provider --help"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys, _, _ := testSystem(envGuardToken + "=" + testToken)
			got, err := parseProviderArgs(append([]string{"--policy", "p.json"}, tt.args...), sys)
			if tt.errWhat != "" {
				assertUsageError(t, err, tt.errWhat, tt.errValue, tt.errRule, false)
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if got != tt.want {
				t.Errorf("options %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProviderCheckArgs(t *testing.T) {
	tests := []struct {
		args []string
		want providerCheckOptions
	}{
		{[]string{"--policy", "examples/policy.json"}, providerCheckOptions{PolicyFile: "examples/policy.json", CasesFile: "examples/policy.cases.json"}},
		{[]string{"--policy", "/etc/acpguard/policy"}, providerCheckOptions{PolicyFile: "/etc/acpguard/policy", CasesFile: "/etc/acpguard/policy.cases.json"}},
		{[]string{"--policy", "p.json", "--cases", "c.json"}, providerCheckOptions{PolicyFile: "p.json", CasesFile: "c.json", CasesGiven: true}},
	}
	for _, tt := range tests {
		sys, _, _ := testSystem()
		got, err := parseProviderCheckArgs(tt.args, sys)
		if err != nil || got != tt.want {
			t.Errorf("%q: %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

// A port in use is named with the process that holds it, and the flag that
// chooses another.
func TestListenPortInUseNamesTheHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	holder := fmt.Sprintf("process %d (%s)", os.Getpid(), strings.TrimSpace(string(comm)))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"provider", "--policy", "examples/policy.json", "--listen", addr},
			fmt.Sprintf("acpguard: error: listen on %q: port %s is in use by %s: stop it, or choose another port with --listen\n", addr, port, holder)},
		{[]string{"serve", "--port", port},
			fmt.Sprintf("acpguard: error: listen on %q: port %s is in use by %s: stop it, or choose another port with --port\n", addr, port, holder)},
	} {
		code, _, stderr := runAcpguard(t, tt.args, envGuardToken+"="+providerTestToken)
		if lines := strings.SplitAfter(stderr, "\n"); code != exitRuntime || len(lines) < 2 || lines[len(lines)-2] != tt.want {
			t.Errorf("%v: exit %d, stderr %q; want 1 ending in %q", tt.args, code, stderr, tt.want)
		}
	}
}
