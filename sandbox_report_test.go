// sandbox_report_test.go tests what acp and serve say about the sandbox in
// force, with real processes: exit statuses and the one warning on kernels
// without Landlock, the ACP initialize _meta, the startup log lines, serve's
// /capabilities and /metrics, and the flags serve gives a real child.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// realLandlock returns this kernel's Landlock ABI, or skips: the test
// reports what the kernel says, and says so when it says nothing.
func realLandlock(t *testing.T) int {
	t.Helper()
	abi, err := probeLandlock()
	if err != nil || abi < 1 {
		t.Skipf("this kernel has no Landlock (%v, ABI %d); the kernels without it are played by %s", err, abi, envTestLandlock)
	}
	return abi
}

// TestSandboxStartExitCodes runs acp and serve as processes on played
// kernels: a sandbox asked for that the kernel cannot give is exit 1
// naming the kernel's answer, before anything listens; a bad value is
// exit 2; a default the kernel cannot give starts with one warning line.
func TestSandboxStartExitCodes(t *testing.T) {
	guardEnv := envGuardToken + "=" + testToken
	const noLandlock = "acpguard: error: confine tools with --sandbox workspace: the kernel has no Landlock (landlock_create_ruleset version probe: function not implemented); enable it (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter) or pass --sandbox off\n"
	const oldABI = "acpguard: error: confine tools with --sandbox-network none: the kernel's Landlock ABI is 3 and denying TCP bind and connect needs ABI 4 (Linux 6.7); pass --sandbox-network all or run on a newer kernel\n"
	docker := writeSettings(t, `{"tools":{"sandbox":"docker"}}`)
	enabled := writeSettings(t, `{"tools":{"sandbox":true}}`)
	serve := []string{"serve", "--port", "0", "--workspace", t.TempDir()}
	acpWarn, serveWarn := "acpguard acp: "+unguardedWarningText+"\n", "acpguard serve: "+unguardedWarningText+"\n"
	tests := []struct {
		name   string
		args   []string
		env    []string
		code   int
		stderr string // exact; "" for a check of the warning only
		warns  int
	}{
		{name: "acp workspace without landlock", args: []string{"acp", "--sandbox", "workspace"}, env: []string{envTestLandlock + "=ENOSYS"}, code: exitRuntime, stderr: acpWarn + noLandlock},
		{name: "acp settings true without landlock", args: []string{"acp", "--settings", enabled}, env: []string{envTestLandlock + "=ENOSYS"}, code: exitRuntime, stderr: acpWarn + noLandlock},
		{name: "acp network none on ABI 3", args: []string{"acp", "--sandbox", "workspace", "--sandbox-network", "none"}, env: []string{envTestLandlock + "=3"}, code: exitRuntime, stderr: acpWarn + oldABI},
		{name: "acp container", args: []string{"acp", "--sandbox", "docker"}, code: exitUsage, stderr: "acpguard: error: --sandbox \"docker\": must be off or workspace\n"},
		{name: "acp settings container", args: []string{"acp", "--settings", docker}, code: exitUsage,
			stderr: fmt.Sprintf("acpguard: error: settings %q: key \"tools.sandbox\": \"docker\" is a container sandbox, which acpguard does not run: acpguard confines tools with Landlock; set tools.sandbox to true or pass --sandbox workspace\n", docker)},
		{name: "managed child default without landlock", args: []string{"acp"}, env: append([]string{envTestLandlock + "=ENOSYS"}, managedEnv...), code: exitOK, warns: 1},
		{name: "managed child off without landlock", args: []string{"acp", "--sandbox", "off"}, env: append([]string{envTestLandlock + "=ENOSYS"}, managedEnv...), code: exitOK, stderr: ""},
		{name: "off mode without landlock", args: []string{"acp"}, env: []string{envTestLandlock + "=ENOSYS"}, code: exitOK, stderr: acpWarn},
		{name: "serve required workspace without landlock", args: append(slices.Concat(serve, required("http://127.0.0.1:1")), "--sandbox", "workspace"),
			env: []string{guardEnv, envTestLandlock + "=ENOSYS"}, code: exitRuntime, stderr: noLandlock},
		{name: "serve network none on ABI 3", args: append(slices.Clone(serve), "--sandbox", "workspace", "--sandbox-network", "none"),
			env: []string{envTestLandlock + "=3"}, code: exitRuntime, stderr: serveWarn + oldABI},
		{name: "serve read in off mode", args: append(slices.Clone(serve), "--sandbox-read", "/usr"), code: exitUsage,
			stderr: "acpguard: error: --sandbox-read \"/usr\": confines nothing: the sandbox is off by default with --external-tool-guard-mode off; add --sandbox workspace\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runAcpguard(t, tt.args, tt.env...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if tt.warns > 0 {
				if n := strings.Count(stderr, "\n"); n != tt.warns || !strings.Contains(stderr, `level=WARN msg="sandbox off: the kernel has no Landlock`) ||
					!strings.Contains(stderr, `probe="landlock_create_ruleset version probe: function not implemented"`) {
					t.Errorf("stderr:\n%s\nwant %d warning line naming the kernel's answer", stderr, tt.warns)
				}
				return
			}
			if stderr != tt.stderr {
				t.Errorf("stderr = %q\nwant     %q", stderr, tt.stderr)
			}
		})
	}
}

// initializeSandbox runs initialize on a real acp and returns its
// agentCapabilities._meta (nil when absent).
func initializeSandbox(t *testing.T, args []string, env ...string) (map[string]json.RawMessage, *acpClient) {
	t.Helper()
	c := startACP(t, nil, args, env...)
	var res struct {
		AgentCapabilities struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"agentCapabilities"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &res)
	return res.AgentCapabilities.Meta, c
}

// TestACPInitializeReportsSandbox: the ACP initialize result says what
// confines tools under agentCapabilities._meta["acpguard/sandbox"], and the
// ready log line carries the same; off mode with the sandbox off answers as
// it always did.
// sansProtected is a sandbox report's JSON with its protected list, which
// names this machine's home and settings directories, left out; "" for
// none. A list there must be one.
func sansProtected(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var r sandboxReport
	if err := decodeStrict(raw, &r); err != nil {
		t.Fatalf("sandbox report %s: %v", raw, err)
	}
	if r.Protected == nil {
		t.Errorf("sandbox report %s: protected is not a list", raw)
	}
	r.Protected = nil
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestACPInitializeReportsSandbox(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want string // the report's JSON, "" for none
		log  string // in the ready line at debug level
	}{
		{name: "off mode", want: "", log: "sandbox.profile=off sandbox.landlockAbi=5 sandbox.network=all sandbox.unix=all",
			env: []string{envTestLandlock + "=5"}},
		{name: "workspace asked in off mode", args: []string{"--sandbox", "workspace", "--sandbox-network", "none", "--sandbox-unix", "none", "--sandbox-read", "/"},
			env:  []string{envTestLandlock + "=5"},
			want: `{"profile":"workspace","landlockAbi":5,"network":"none","unix":"none","protect":"mount-namespace","protected":null}`,
			log:  "sandbox.profile=workspace sandbox.landlockAbi=5 sandbox.network=none sandbox.unix=none"},
		{name: "managed child default", env: append([]string{envTestLandlock + "=6"}, managedEnv...),
			want: `{"profile":"workspace","landlockAbi":6,"network":"all","unix":"all","protect":"mount-namespace","protected":null}`,
			log:  "sandbox.profile=workspace sandbox.landlockAbi=6 sandbox.network=all sandbox.unix=all sandbox.protect=mount-namespace"},
		{name: "managed child without landlock", env: append([]string{envTestLandlock + "=ENOSYS"}, managedEnv...),
			want: `{"profile":"off","landlockAbi":0,"network":"all","unix":"all","protect":"off","protected":null}`,
			log:  "sandbox.profile=off sandbox.landlockAbi=0"},
		{name: "managed child off", args: []string{"--sandbox", "off"}, env: append([]string{envTestLandlock + "=7"}, managedEnv...),
			want: `{"profile":"off","landlockAbi":7,"network":"all","unix":"all","protect":"off","protected":null}`,
			log:  "sandbox.profile=off sandbox.landlockAbi=7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, c := initializeSandbox(t, append([]string{"--log-level", "debug"}, tt.args...), tt.env...)
			got := sansProtected(t, meta[metaSandbox])
			if got != tt.want {
				t.Errorf("_meta[%q] = %s, want %s", metaSandbox, got, cmpOr(tt.want, "none"))
			}
			if tt.want == "" && meta != nil {
				t.Errorf("off mode with the sandbox off has _meta %v, want none (off mode answers as before)", meta)
			}
			if managed := slices.Contains(tt.env, managedEnv[0]); managed && string(meta[metaGuardReady]) != `"`+privateGuardMarker+`"` {
				t.Errorf("managed child lost its guard acknowledgement: %v", meta)
			}
			// The agent logs it before it reads initialize; stderr arrives
			// through a pipe of its own.
			ready := ""
			for deadline := time.Now().Add(testTimeout(10 * time.Second)); ready == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				for _, line := range strings.Split(c.stderrText(), "\n") {
					if strings.Contains(line, `msg="acp runtime ready"`) {
						ready = line
					}
				}
			}
			if !strings.Contains(ready, tt.log) {
				t.Errorf("ready line %q does not carry %q", ready, tt.log)
			}
		})
	}
}

// TestServeChildGetsTheSandbox: the command serve starts a child with,
// run as a real process, answers initialize with the sandbox serve has in
// force, whatever the child's settings file says.
func TestServeChildGetsTheSandbox(t *testing.T) {
	dir := t.TempDir()
	// Settings that would choose otherwise: the flags serve gives win.
	settingsFile := writeSettings(t, `{"tools":{"sandbox":false}}`)
	tests := []struct {
		name    string
		cfg     sandboxConfig
		guarded bool
		want    string
	}{
		{name: "workspace with everything", cfg: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Read: []string{"/", dir}, Write: []string{dir},
			Network: sandboxNone, NetworkExplicit: true, Unix: sandboxNone},
			want: `{"profile":"workspace","landlockAbi":%d,"network":"none","unix":"none","protect":"mount-namespace","protected":null}`},
		{name: "workspace default in required mode", cfg: sandboxConfig{Profile: sandboxWorkspace, Network: sandboxAll, Unix: sandboxAll}, guarded: true,
			want: `{"profile":"workspace","landlockAbi":%d,"network":"all","unix":"all","protect":"mount-namespace","protected":null}`},
		{name: "off in required mode", cfg: sandboxConfig{Profile: sandboxOff, Explicit: true}, guarded: true,
			want: `{"profile":"off","landlockAbi":%d,"network":"all","unix":"all","protect":"off","protected":null}`},
	}
	abi := realLandlock(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inForce, err := startSandbox(tt.cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			d := &daemon{sys: &system{env: newProcEnv(append(os.Environ(), roleEnv("main"), "GORACE=atexit_sleep_ms=0"))},
				guarded: tt.guarded, sandbox: inForce, settingsFile: settingsFile}
			cmd := d.childCommand(exe)
			cmd.Dir = dir
			// As serve starts it: on its socket pairs.
			ends, err := newChannel()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdin, cmd.Stdout = ends.childStdin, ends.childStdout
			var stderr syncBuffer
			cmd.Stderr = &stderr
			err = cmd.Start()
			ends.closeChild()
			if err != nil {
				t.Fatal(err)
			}
			stdin, stdout := channelWriter{ends.write}, ends.read
			defer func() {
				stdin.Close()
				cmd.Wait()
				ends.closeAll()
			}()
			req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": methodInitialize, "params": initializeParams("")})
			if _, err := stdin.Write(append(req, '\n')); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(stdout).ReadString('\n')
				lines <- line
				io.Copy(io.Discard, stdout)
			}()
			var line string
			select {
			case line = <-lines:
			case <-time.After(testTimeout(30 * time.Second)):
				t.Fatalf("no initialize answer; stderr:\n%s", stderr.String())
			}
			var resp struct {
				Result struct {
					AgentCapabilities struct {
						Meta map[string]json.RawMessage `json:"_meta"`
					} `json:"agentCapabilities"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(line), &resp); err != nil {
				t.Fatalf("initialize answer %q: %v; stderr:\n%s", line, err, stderr.String())
			}
			if got, want := sansProtected(t, resp.Result.AgentCapabilities.Meta[metaSandbox]), fmt.Sprintf(tt.want, abi); got != want {
				t.Errorf("child reports %s, want %s (args %q)", got, want, cmd.Args[1:])
			}
		})
	}
}

// TestServeReportsSandbox runs serve as a process: /capabilities, /metrics
// and the listening line say what is in force, and the child serve starts
// for a session runs with the flags that confine as reported.
func TestServeReportsSandbox(t *testing.T) {
	abi := realLandlock(t)
	ws, cache := t.TempDir(), t.TempDir()
	sp := startServe(t, []string{"--workspace", ws, "--sandbox", "workspace", "--sandbox-read", "/", "--sandbox-write", cache,
		"--sandbox-network", "none", "--sandbox-unix", "none"})
	var caps capabilitiesBody
	if err := decodeStrict(sp.do(t, "GET", "/capabilities", "").body, &caps); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	want := sandboxReport{Profile: sandboxWorkspace, LandlockABI: abi, Network: sandboxNone, Unix: sandboxNone, Protect: protectMountNamespace}
	if caps.Sandbox != nil {
		want.Protected = caps.Sandbox.Protected
	}
	if caps.Sandbox == nil || !reflect.DeepEqual(*caps.Sandbox, want) || !slices.Contains(want.Protected, filepath.Join(home, ".*")) {
		t.Errorf("capabilities sandbox = %+v, want %+v with the home's dot entries protected", caps.Sandbox, want)
	}
	if caps.WorkspaceCwd != ws || len(caps.Features) != len(baseFeatures) {
		t.Errorf("capabilities lost a member: %+v", caps)
	}
	m := sp.scrape(t)
	if m["acpguard_serve_sandbox_enabled"] != 1 || m["acpguard_serve_sandbox_landlock_abi"] != float64(abi) {
		t.Errorf("sandbox gauges = %v, %v; want 1, %d", m["acpguard_serve_sandbox_enabled"], m["acpguard_serve_sandbox_landlock_abi"], abi)
	}
	wantLog := fmt.Sprintf("sandbox.profile=workspace sandbox.landlockAbi=%d sandbox.network=none sandbox.unix=none", abi)
	if !strings.Contains(sp.stderr.String(), `msg=listening`) || !strings.Contains(sp.stderr.String(), wantLog) {
		t.Errorf("listening line does not carry %q:\n%s", wantLog, sp.stderr.String())
	}
	sp.newSession(t, "")
	children := childPIDs(t, sp.cmd.Process.Pid)
	if len(children) != 1 {
		t.Fatalf("children = %v", children)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", children[0]))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"), " ")
	if w := "--sandbox workspace --sandbox-read / --sandbox-write " + cache + " --sandbox-network none --sandbox-unix none"; !strings.Contains(args, w) {
		t.Errorf("child args %q do not carry %q", args, w)
	}
}

// TestServeWithoutLandlock: serve in required mode on a kernel without
// Landlock starts, warns once and each child it starts once more, and
// reports the sandbox as off everywhere; a session in a workspace whose
// trusted file asks for the sandbox is refused, never run unconfined.
func TestServeWithoutLandlock(t *testing.T) {
	prov := newTestProvider(t)
	ws, asks := t.TempDir(), t.TempDir()
	writeFileAll(t, filepath.Join(asks, ".qwen", "settings.json"), `{"tools":{"sandbox":true}}`)
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "decisions.log"))
	args = append(args, "--workspace", asks, "--max-children", "1", "--"+flagTrustWorkspaceSettings)
	sp := startServe(t, args, tokenEnv, envTestLandlock+"=ENOSYS")
	var caps capabilitiesBody
	if err := decodeStrict(sp.do(t, "GET", "/capabilities", "").body, &caps); err != nil {
		t.Fatal(err)
	}
	want := sandboxReport{Profile: sandboxOff, LandlockABI: 0, Network: sandboxAll, Unix: sandboxAll, Protect: protectOff, Protected: []string{}}
	if caps.Sandbox == nil || !reflect.DeepEqual(*caps.Sandbox, want) || !slices.Contains(caps.Features, featureExternalToolGuard) {
		t.Errorf("capabilities = %+v, sandbox %+v; want the guard and sandbox %+v", caps, caps.Sandbox, want)
	}
	m := sp.scrape(t)
	if m["acpguard_serve_sandbox_enabled"] != 0 || m["acpguard_serve_sandbox_landlock_abi"] != 0 {
		t.Errorf("sandbox gauges = %v, %v; want 0, 0", m["acpguard_serve_sandbox_enabled"], m["acpguard_serve_sandbox_landlock_abi"])
	}
	id := sp.newSession(t, "")
	sp.runTurn(t, id, "hello")
	r := sp.do(t, "POST", "/session", `{"cwd":`+strconv.Quote(asks)+`}`)
	if r.status == http.StatusOK || !strings.Contains(string(r.body), "Landlock") {
		t.Errorf("session in a workspace that asks for the sandbox = %d %s, want refused naming Landlock", r.status, r.body)
	}
	sp.stop()
	log := sp.stderr.String()
	if n := strings.Count(log, "sandbox off: the kernel has no Landlock"); n != 2 {
		t.Errorf("%d warnings, want 2 (serve's and its one child's):\n%s", n, log)
	}
	if !strings.Contains(log, "sandbox.profile=off sandbox.landlockAbi=0") {
		t.Errorf("listening line does not report the sandbox off:\n%s", log)
	}
}

// TestServeCapabilitiesSandboxInProcess: off mode with the sandbox off
// answers /capabilities as before (no sandbox member); the gauges say off
// and the kernel's ABI.
func TestServeCapabilitiesSandboxInProcess(t *testing.T) {
	withKernel(t, "6")
	off := startTestDaemon(t, serveOptions{})
	r := off.do(t, "GET", "/capabilities", "")
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &caps); err != nil {
		t.Fatal(err)
	}
	if _, ok := caps["sandbox"]; ok {
		t.Errorf("off mode capabilities carry a sandbox: %s", r.body)
	}
	m := off.scrape(t)
	if m["acpguard_serve_sandbox_enabled"] != 0 || m["acpguard_serve_sandbox_landlock_abi"] != 6 {
		t.Errorf("off gauges = %v, %v; want 0, 6", m["acpguard_serve_sandbox_enabled"], m["acpguard_serve_sandbox_landlock_abi"])
	}

	on := startTestDaemon(t, serveOptions{Sandbox: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxAll, Unix: sandboxNone}})
	r = on.do(t, "GET", "/capabilities", "")
	if err := json.Unmarshal(r.body, &caps); err != nil {
		t.Fatal(err)
	}
	if got, want := sansProtected(t, caps["sandbox"]), `{"profile":"workspace","landlockAbi":6,"network":"all","unix":"none","protect":"mount-namespace","protected":null}`; got != want {
		t.Errorf("capabilities sandbox = %s, want %s", got, want)
	}
	if m := on.scrape(t); m["acpguard_serve_sandbox_enabled"] != 1 {
		t.Errorf("enabled gauge = %v, want 1", m["acpguard_serve_sandbox_enabled"])
	}

	// A sandbox asked for that the kernel cannot give: nothing listens.
	withKernel(t, "ENOSYS")
	sys, _, _ := testSystem()
	err := serveDaemon(context.Background(), sys, serveOptions{Hostname: bindAddr{"127.0.0.1", true}, Workspaces: []string{t.TempDir()}, MaxPendingPrompts: 1,
		Guard: guardConfig{Mode: guardModeOff}, Sandbox: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxAll, Unix: sandboxAll}},
		func(string) { t.Error("serve listened with a sandbox the kernel cannot give") })
	if err == nil || exitCode(err) != exitRuntime || !strings.Contains(err.Error(), "the kernel has no Landlock") {
		t.Errorf("serveDaemon = %v, want exit 1 naming the kernel", err)
	}
}

// TestWarnUserServices: one warning, naming the socket, when the sandbox
// lets tools use Unix sockets and the user's service manager or session bus
// listens in the runtime directory; none otherwise.
func TestWarnUserServices(t *testing.T) {
	for _, name := range userServiceSockets {
		if fi, err := os.Stat(filepath.Join(userRuntimeDirs, strconv.Itoa(os.Geteuid()), name)); err == nil && fi.Mode().Type() == fs.ModeSocket {
			t.Skip("this user's own service manager listens: every case would warn")
		}
	}
	withSocket := func(name string) string {
		dir := t.TempDir()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return dir
	}
	withFile := func(name string) string {
		dir := t.TempDir()
		mustWrite(t, filepath.Join(dir, name), "")
		return dir
	}
	on := sandboxInForce{Config: workspaceConfig(), ABI: 1}
	unixNone := on
	unixNone.Config.Unix = sandboxNone
	tests := []struct {
		name    string
		sandbox sandboxInForce
		runtime string
		warn    string // the socket named, "" no warning
	}{
		{"session bus", on, withSocket("bus"), "bus"},
		{"service manager", on, withSocket("systemd/private"), "systemd/private"},
		{"a file named bus", on, withFile("bus"), ""},
		{"unix none", unixNone, withSocket("bus"), ""},
		{"sandbox off", sandboxInForce{Config: sandboxConfig{Profile: sandboxOff}}, withSocket("bus"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			warnUserServices(tt.sandbox, newProcEnv([]string{envRuntimeDir + "=" + tt.runtime}), slog.New(slog.NewTextHandler(&buf, nil)))
			n := strings.Count(buf.String(), "tools may use Unix sockets and the user's service manager listens on one")
			switch {
			case tt.warn == "" && n != 0:
				t.Errorf("warned:\n%s", buf.String())
			case tt.warn != "" && (n != 1 || !strings.Contains(buf.String(), "socket="+filepath.Join(tt.runtime, tt.warn)) || !strings.Contains(buf.String(), "pass --sandbox-unix none")):
				t.Errorf("want one warning naming %s:\n%s", tt.warn, buf.String())
			}
		})
	}
}
