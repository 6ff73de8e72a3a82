// examples_test.go tests the files under examples/: the settings file and its
// hook load and run, the Python provider answers the handshake and prepare,
// and the systemd units verify, pass the security review and start the stack.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The files under examples/ are what a newcomer copies: each test here
// loads or runs one as the README tells the user to.

// TestExampleSettings loads examples/settings.json with acpguard's loader
// and runs its PreToolUse hook, the script in examples/hooks, on a call it
// lets through and one it blocks.
func TestExampleSettings(t *testing.T) {
	s, err := loadSettings("examples/settings.json")
	if err != nil {
		t.Fatalf("load examples/settings.json: %v", err)
	}
	if s.Tools.ApprovalMode != modeDefault {
		t.Errorf("approval mode = %q, want %q", s.Tools.ApprovalMode, modeDefault)
	}
	servers, err := mcpServersFromSettings(s.MCPServers)
	if err != nil || len(servers) != 1 || servers[0].Name != "time" {
		t.Fatalf("MCP servers = %+v, %v; want the one stdio server \"time\"", servers, err)
	}
	if len(s.Hooks.PreToolUse) != 1 || len(s.Hooks.PreToolUse[0].Hooks) != 1 {
		t.Fatalf("PreToolUse hooks = %+v, want one matcher with one hook", s.Hooks.PreToolUse)
	}
	hooks := s.Hooks.PreToolUse
	h := &hooks[0].Hooks[0]
	if h.Timeout != 5000 {
		t.Errorf("hook timeout = %d ms, want 5000 (5 seconds in the file)", h.Timeout)
	}
	// Copied as the file says: the hook in ~/.qwen/hooks of a home of
	// the test's own, the command run as written.
	if want := `"$HOME/.qwen/hooks/deny-secrets.sh"`; h.Command != want {
		t.Fatalf("hook command = %q, want %q", h.Command, want)
	}
	home := t.TempDir()
	script, err := os.ReadFile("examples/hooks/deny-secrets.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".qwen", "hooks"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".qwen", "hooks", "deny-secrets.sh"), script, 0o700); err != nil {
		t.Fatal(err)
	}
	testHookEnv := spawnEnv{Env: newProcEnv([]string{"PATH=/usr/bin:/bin", "HOME=" + home})}

	dir := t.TempDir()
	in := testHookInput(dir)
	in.ToolName, in.ToolInput = "read_file", map[string]any{"file_path": filepath.Join(dir, "notes.txt")}
	if out := runPreToolUseHooks(context.Background(), hooks, in, testHookEnv); out.Decision != hookNone {
		t.Errorf("read_file notes.txt: hook decided %q (%s), want no decision", out.Decision, out.Reason)
	}
	in.ToolInput = map[string]any{"file_path": filepath.Join(dir, ".env")}
	out := runPreToolUseHooks(context.Background(), hooks, in, testHookEnv)
	want := `PreToolUse hook "deny-secrets" denied the call: deny-secrets: the call names a secret file`
	if out.Decision != hookDeny || !strings.HasPrefix(out.Reason, want) {
		t.Errorf("read_file .env: hook decided %q with %q, want deny starting %q", out.Decision, out.Reason, want)
	}
	in.ToolName, in.ToolInput = "run_shell_command", map[string]any{"command": "cat ~/.ssh/id_rsa"}
	if out := runPreToolUseHooks(context.Background(), hooks, in, testHookEnv); out.Decision != hookDeny {
		t.Errorf("cat ~/.ssh/id_rsa: hook decided %q, want deny", out.Decision)
	}
}

// TestExamplePythonProvider runs examples/provider.py as its header says:
// without the token it explains and exits 2; with it, acpguard's own
// provider client completes a handshake and two prepares against it.
func TestExamplePythonProvider(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	src, err := os.ReadFile("examples/provider.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"python3 examples/provider.py", "DEFAULT_PORT = 8790"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("examples/provider.py lacks %q", want)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "examples/provider.py", "0")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("without the token: %v, output %q; want exit status 2", err, out)
	}
	if !strings.Contains(string(out), "QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN is not set") || strings.Contains(string(out), "Traceback") {
		t.Errorf("without the token the output is %q, want the variable named and no traceback", out)
	}

	cmd = exec.CommandContext(ctx, py, "examples/provider.py", "0")
	cmd.Env = append(env, "QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN="+providerTestToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	origin, ok := strings.CutPrefix(strings.TrimSpace(line), "provider listening on ")
	if err != nil || !ok {
		t.Fatalf("first line %q, %v; want \"provider listening on URL\"", line, err)
	}
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	c := newProviderClient(guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: testTimeout(5 * time.Second), Token: providerTestToken})
	defer c.close()
	if err := c.handshake(ctx); err != nil {
		t.Fatalf("handshake with examples/provider.py: %v", err)
	}
	if res := c.prepare(ctx, providerTestCall); res.Err != nil || !res.Allowed {
		t.Errorf("prepare read_file = %+v, want allowed", res)
	}
	shell := providerTestCall
	shell.ToolName, shell.Arguments = "run_shell_command", json.RawMessage(`{"command":"ls"}`)
	if res := c.prepare(ctx, shell); res.Err != nil || res.Allowed || res.Reason != "Shell commands are not allowed here" {
		t.Errorf("prepare run_shell_command = %+v, want denied with the example's reason", res)
	}
}

// exampleUnits are the systemd units of a managed deployment.
var exampleUnits = []string{"acpguard-provider.service", "acpguard-serve.service"}

// installedUnits copies the example units into a temporary directory with
// ExecStart's binary replaced by this test's own, so that systemd-analyze
// finds an executable.
func installedUnits(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, name := range exampleUnits {
		data, err := os.ReadFile(filepath.Join("examples/systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		mustWrite(t, p, strings.ReplaceAll(string(data), "/usr/local/bin/acpguard", testExe(t)))
		paths = append(paths, p)
	}
	return paths
}

// TestExampleSystemdUnits checks the units with systemd-analyze: verify
// has nothing to say, and the offline security review rates each 4.5 or
// lower, the figure each unit's header states.
func TestExampleSystemdUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found")
	}
	serve, err := os.ReadFile("examples/systemd/acpguard-serve.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nRequires=acpguard-provider.service\n", "\nAfter=network.target acpguard-provider.service\n"} {
		if !strings.Contains(string(serve), want) {
			t.Errorf("acpguard-serve.service lacks %q", strings.TrimSpace(want))
		}
	}
	units := installedUnits(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(60*time.Second))
	defer cancel()
	out, err := exec.CommandContext(ctx, sa, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	overall := regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d)`)
	stated := regexp.MustCompile("`systemd-analyze security \\S+`: (\\d+\\.\\d) OK")
	for _, p := range units {
		out, err := exec.CommandContext(ctx, sa, "security", "--offline=true", "--no-pager", p).CombinedOutput()
		m := overall.FindSubmatch(out)
		if err != nil || m == nil {
			t.Logf("systemd-analyze security --offline=true %s: %v (no offline review here)\n%s", filepath.Base(p), err, out)
			continue
		}
		score, _ := strconv.ParseFloat(string(m[1]), 64)
		if score > 4.5 {
			t.Errorf("%s: exposure %.1f, want 4.5 or lower", filepath.Base(p), score)
		}
		data, _ := os.ReadFile(p)
		if s := stated.FindSubmatch(data); s == nil || string(s[1]) != string(m[1]) {
			t.Errorf("%s: header states %q, systemd-analyze says %s", filepath.Base(p), s, m[1])
		}
	}
}

// execStart returns the arguments of a unit's ExecStart=, continuation
// lines joined.
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("%s has no ExecStart=", unit)
	return nil
}

// TestExampleUnitsStartTheStack runs both units' command lines, with their
// paths moved into a temporary directory and free ports, the way systemd
// would: the provider on examples/policy.json, then serve in required mode
// with examples/settings.json; serve completes its handshake, listens and
// creates the host token file.
func TestExampleUnitsStartTheStack(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"etc/acpguard/hooks", "srv/work", "var/lib/acpguard", "var/log/acpguard", "var/log/acpguard-provider"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range [][2]string{{"examples/policy.json", "etc/acpguard/policy.json"}, {"examples/settings.json", "etc/acpguard/settings.json"}} {
		data, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		// The unit's install step: the settings' hook in /etc/acpguard/hooks.
		text := strings.ReplaceAll(string(data), "$HOME/.qwen/hooks", "/etc/acpguard/hooks")
		if f[0] == "examples/settings.json" && !strings.Contains(text, `"\"/etc/acpguard/hooks/deny-secrets.sh\""`) {
			t.Fatalf("the unit's sed leaves the hook command elsewhere:\n%s", text)
		}
		mustWrite(t, filepath.Join(root, f[1]), text)
	}
	provPort, servePort := freeLoopbackPort(t), freeLoopbackPort(t)
	moved := func(args []string) []string {
		var out []string
		for _, a := range args[1:] { // args[0] is the binary
			a = strings.ReplaceAll(a, "127.0.0.1:8787", "127.0.0.1:"+provPort)
			if a == "4170" {
				a = servePort
			}
			for _, d := range []string{"/etc/", "/srv/", "/var/"} {
				if i := strings.Index(a, d); i >= 0 && (i == 0 || a[i-1] == '=') {
					a = a[:i] + root + a[i:]
				}
			}
			out = append(out, a)
		}
		return out
	}
	token := "QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN=" + providerTestToken
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(60*time.Second))
	t.Cleanup(cancel)

	prov := acpguardCmd(t, ctx, moved(execStart(t, "examples/systemd/acpguard-provider.service")), token)
	provErr, err := prov.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := prov.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); prov.Wait() })
	sc := bufio.NewScanner(provErr)
	var provLog strings.Builder
	for sc.Scan() && !strings.Contains(sc.Text(), "acpguard provider: listening on http://127.0.0.1:"+provPort) {
		provLog.WriteString(sc.Text() + "\n")
	}
	if sc.Err() != nil || ctx.Err() != nil {
		t.Fatalf("provider did not listen on port %s: %v; stderr:\n%s", provPort, sc.Err(), provLog.String())
	}
	go io.Copy(io.Discard, provErr)

	serve := acpguardCmd(t, ctx, moved(execStart(t, "examples/systemd/acpguard-serve.service")), token)
	serveOut, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serveErr := &syncBuffer{}
	serve.Stderr = serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); serve.Wait() })
	line, err := bufio.NewReader(serveOut).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "acpguard serve listening on http://127.0.0.1:"+servePort) {
		t.Fatalf("serve's first line %q, %v; stderr: %s", line, err, serveErr)
	}
	// The log line follows the listening line, on the other stream.
	waitFor(t, "serve's listening log line", func() bool { return strings.Contains(serveErr.String(), "msg=listening") })
	if !strings.Contains(serveErr.String(), "guarded=true") {
		t.Errorf("serve is not guarded; stderr: %s", serveErr)
	}
	tokenFile := filepath.Join(root, "var/lib/acpguard/host-token")
	waitForFile(t, tokenFile)
	resp, err := http.Get("http://127.0.0.1:" + servePort + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health: %s", resp.Status)
	}
}

// examples/settings.json and examples/policy.json agree on MCP tools: every
// tool of the example's servers that the settings let run without a
// question, the policy allows too, so the example does not offer a tool
// whose every call the guard then denies.
func TestExampleSettingsAgreeWithThePolicy(t *testing.T) {
	s, err := loadSettings("examples/settings.json")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	servers, err := mcpServersFromSettings(s.MCPServers)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, srv := range servers {
		if len(srv.IncludeTools) == 0 {
			t.Errorf("server %q lists no includeTools: the test cannot know its tools", srv.Name)
		}
		for _, tool := range srv.IncludeTools {
			name := "mcp__" + srv.Name + "__" + tool
			v, rule := s.Rules.decide(modeDefault, name, false, map[string]any{}, t.TempDir(), t.TempDir())
			if v != verdictAllow {
				continue
			}
			checked++
			if d := pol.decide(name, map[string]any{}); !d.Allowed {
				t.Errorf("%s: settings allow it (rule %q), the policy denies it: %q", name, rule, d.Reason)
			}
		}
	}
	if checked == 0 {
		t.Error("the example settings allow no MCP tool: nothing was checked")
	}
}
