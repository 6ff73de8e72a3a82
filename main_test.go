// main_test.go holds the end-to-end harness: the test binary re-executes
// itself as acpguard, so tests drive real processes without a separate build.
package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// testRoles is every role, each one line on what it is. A role made with
// asACPChild plays its part only when started as "acpguard acp" and is
// acpguard itself otherwise (the serve that starts such children).
var testRoles = map[string]func(arg string) int{
	// acpguard itself; ACPGUARD_TEST_LANDLOCK plays a kernel (fakeLandlock),
	// ACPGUARD_TEST_SANDBOX confines its tools (setTestSandbox).
	"main": func(string) int { return runAsMain() },
	// a scripted ACP agent, ARG its initialize mode (serve_sessions_test.go)
	"fake-child": asACPChild(runFakeChild),
	// never answers where silentChildMarker is (serve_limits_test.go)
	"silent-child": asACPChild(runSilentChild),
	// writes "SIGTERM" to file ARG when signalled (lifeline_test.go)
	"death-signal-child": asACPChild(runDeathSignalChild),
	// races acp children, keeps its loot in directory ARG (channel_race_test.go)
	"channel-attacker": runChannelAttacker,
	// an allow-all provider on address ARG (guard_identity_test.go)
	"squatter": runSquatter,
	// BenchmarkGuardHopFloor's relay (perf_test.go)
	"hop-relay": runHopRelay,
	// a host asking GET /health of serve URL ARG (serve_peer_test.go)
	"peer-client": runPeerClient,
	// holds a connection to address ARG until stdin ends (serve_peer_test.go)
	"peer-hold": runPeerHold,
	// tries the operations ARG, prints their errnos (sandbox_test.go)
	"sandbox-probe": runSandboxProbe,
	// attacks new acp children's environ (sandbox_test.go)
	"sandbox-racer": runSandboxRacer,
	// confines itself to directories ARG, execs its last argument (sandbox_bench_test.go)
	"sandbox-reexec": runSandboxReexec,
	// appends log records on a full tmpfs at ARG (jsonl_test.go)
	"full-disk-log": runFullDiskLog,
	// a terminal's shell: runs its arguments as acpguard, Ctrl-C being theirs (run_terminal_test.go)
	"tty-shell": runTTYShell,
	// a stdio MCP server (mcp_client_test.go)
	"mcp-server": func(string) int { return serveHelperMCP(os.Stdin, os.Stdout) },
}

// asACPChild is run when the binary is started as "acpguard acp", acpguard otherwise.
func asACPChild(run func(arg string) int) func(string) int {
	return func(arg string) int {
		if len(os.Args) > 1 && os.Args[1] == "acp" {
			return run(arg)
		}
		return runAsMain()
	}
}

// TestMain runs the tests, or with envTestRole set plays that role and exits
// with its code; an unknown role exits 2.
func TestMain(m *testing.M) {
	runSandboxStageIfAsked()
	if v, ok := os.LookupEnv(envTestRole); ok {
		name, arg, _ := strings.Cut(v, ":")
		run := testRoles[name]
		if run == nil {
			fmt.Fprintf(os.Stderr, "%s %q: unknown role\n", envTestRole, v)
			os.Exit(2)
		}
		os.Exit(run(arg))
	}
	// The agents the tests start save their sessions here, never in the
	// user's state directory.
	state, err := os.MkdirTemp("", "acpguard-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(envStateHome, state)
	code := m.Run()
	os.RemoveAll(state)
	os.Exit(code)
}

func TestCommandDispatch(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, exitUsage, "", "acpguard: error: no command given"},
		{[]string{"bogus"}, exitUsage, "", `acpguard: error: unknown command "bogus"`},
		{[]string{"help"}, exitOK, "acpguard serve", ""},
		{[]string{"version"}, exitOK, "acpguard ", ""},
		{[]string{"version", "extra"}, exitUsage, "", `version takes no arguments, got "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			code, stdout, stderr := runAcpguard(t, tt.args)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			if !strings.Contains(stdout, tt.inStdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.inStdout)
			}
			if !strings.Contains(stderr, tt.inStderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.inStderr)
			}
		})
	}
}
