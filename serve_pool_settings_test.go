// serve_pool_settings_test.go tests that a session on a shared child
// (serve_children.go) takes every workspace property from its own
// workspace's settings, not from the child's start directory or from the
// workspace whose session started the child (DESIGN.md §10).
package main

import (
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServePoolSandboxPerSession: with --max-children 1 and the workspace
// sandbox, a trusted workspace file's tools.sandboxWrite lets that
// workspace's shell write a shared directory; the same shell in another
// workspace, on the same child, is denied by the sandbox.
func TestServePoolSandboxPerSession(t *testing.T) {
	requireLandlock(t)
	shared := t.TempDir()
	wss := []string{t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[0], ".qwen", "settings.json"), `{"tools":{"sandboxWrite":[`+strconv.Quote(shared)+`]}}`)
	settings := filepath.Join(t.TempDir(), "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"}}`)
	// Off mode trusts a workspace file; the sandbox is asked for.
	td := startTestDaemon(t, serveOptions{Workspaces: wss, SettingsFile: settings, Limits: serveLimits{MaxChildren: 1},
		Sandbox: sandboxConfig{Profile: sandboxWorkspace, Explicit: true, Network: sandboxAll, Unix: sandboxAll}}, quickRaceExit)
	// The second workspace's session starts the child, so that the first
	// one's settings cannot be the child's start settings.
	ids := make([]string, len(wss))
	for _, i := range []int{1, 0} {
		ids[i] = td.sessionIn(t, wss[i])
	}
	pids := map[int]bool{}
	for i, ws := range wss {
		name := "from-" + strconv.Itoa(i) + ".txt"
		td.runTurn(t, ids[i], `call run_shell_command {"command":"echo hi > `+filepath.Join(shared, name)+`"}`)
		if got, want := fileExists(filepath.Join(shared, name)), i == 0; got != want {
			t.Errorf("session in workspace %d: writing the shared directory succeeded = %v, want %v", i, got, want)
		}
		_, pid := td.childOf(t, ids[i], ws)
		pids[pid] = true
	}
	if len(pids) != 1 {
		t.Errorf("sessions ran in children %v, want one", pids)
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 1 {
		t.Errorf("shared directory holds %d files, want the first workspace's only", len(entries))
	}
}

// TestACPSandboxPerSessionWorkspace: a standalone acp confines each session
// by its own workspace's settings too, whichever directory it started in.
func TestACPSandboxPerSessionWorkspace(t *testing.T) {
	requireLandlock(t)
	shared := t.TempDir()
	wss := []string{t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[0], ".qwen", "settings.json"), `{"tools":{"sandboxWrite":[`+strconv.Quote(shared)+`]}}`)
	c := startACP(t, nil, []string{"--" + flagGuardMode + "=" + guardModeOff, "--" + flagSandbox, sandboxWorkspace})
	for i, ws := range wss {
		sid := c.newYoloSession(ws)
		name := "from-" + strconv.Itoa(i) + ".txt"
		c.prompt(sid, `call run_shell_command {"command":"echo hi > `+filepath.Join(shared, name)+`"}`, "")
		if got, want := fileExists(filepath.Join(shared, name)), i == 0; got != want {
			t.Errorf("session in workspace %d: writing the shared directory succeeded = %v, want %v", i, got, want)
		}
	}
}

// TestACPSandboxSessionSettingsError: a workspace file whose sandbox keys
// confine nothing under the agent's flags fails that workspace's
// session/new with the file and key named; another workspace's session
// still opens.
func TestACPSandboxSessionSettingsError(t *testing.T) {
	bad, good := t.TempDir(), t.TempDir()
	file := writeFileAll(t, filepath.Join(bad, ".qwen", "settings.json"), `{"tools":{"sandboxWrite":[`+strconv.Quote(good)+`]}}`)
	c := startACP(t, nil, []string{"--" + flagGuardMode + "=" + guardModeOff})
	r := c.call(methodSessionNew, map[string]any{"cwd": bad, "mcpServers": []any{}})
	want := `settings "` + file + `": key "` + keySandboxWrite + `": confines nothing`
	if r.Error == nil || !strings.Contains(r.Error.Message, want) {
		t.Errorf("session/new in a workspace with %s and the sandbox off = %+v, want an error containing %q", keySandboxWrite, r.Error, want)
	}
	c.newSession(good)
}

// TestSystemPromptPerSessionWorkspace: a workspace file's env block names
// the replacement prompt of that workspace's sessions only, whichever
// directory acp started in.
func TestSystemPromptPerSessionWorkspace(t *testing.T) {
	prompt := filepath.Join(t.TempDir(), "ws.md")
	mustWrite(t, prompt, "PROMPT OF THE WORKSPACE")
	wss := []string{t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[0], ".qwen", "settings.json"), `{"env":{"QWEN_SYSTEM_MD":`+strconv.Quote(prompt)+`}}`)
	c, rec := startModelACP(t, nil)
	for i, ws := range wss {
		got := systemMessage(t, c, rec, ws)
		if replaced := strings.HasPrefix(got, "PROMPT OF THE WORKSPACE"); replaced != (i == 0) {
			t.Errorf("session in workspace %d: prompt replaced = %v, want %v; prompt:\n%s", i, replaced, i == 0, got)
		}
	}
}

// startParsedPool parses serve's command line over the workspaces wss
// (the first is serve's primary) with --max-children 1, an operator file
// in the yolo approval mode, a home without settings and env, then starts
// the daemon with what the parse resolved.
func startParsedPool(t *testing.T, wss []string, args []string, env ...string) *testDaemon {
	t.Helper()
	settings := filepath.Join(t.TempDir(), "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"}}`)
	full := []string{"--settings", settings, "--max-children", "1"}
	for _, ws := range wss {
		full = append(full, "--workspace", ws)
	}
	env = append([]string{"HOME=" + t.TempDir(), envQwenHome + "=", envSystemMD + "="}, env...)
	sys, _, _ := testSystem(env...)
	opts, err := parseServeArgs(append(full, args...), sys)
	if err != nil {
		t.Fatalf("parse serve %q: %v", args, err)
	}
	return startTestDaemon(t, opts, append([]string{quickRaceExit}, env...)...)
}

// TestServeSandboxWriteStaysInItsWorkspace: serve's first workspace's
// trusted tools.sandboxWrite lets that workspace's sessions write a shared
// directory; a session of the second workspace, on the same child, is
// still denied there.
func TestServeSandboxWriteStaysInItsWorkspace(t *testing.T) {
	requireLandlock(t)
	shared := t.TempDir()
	wss := []string{t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[0], ".qwen", "settings.json"), `{"tools":{"sandboxWrite":[`+strconv.Quote(shared)+`]}}`)
	td := startParsedPool(t, wss, []string{"--" + flagSandbox, sandboxWorkspace})
	for i, ws := range wss {
		id := td.sessionIn(t, ws)
		name := "from-" + strconv.Itoa(i) + ".txt"
		td.runTurn(t, id, `call run_shell_command {"command":"echo hi > `+filepath.Join(shared, name)+`"}`)
		if got, want := fileExists(filepath.Join(shared, name)), i == 0; got != want {
			t.Errorf("session in workspace %d: writing the shared directory succeeded = %v, want %v", i, got, want)
		}
	}
}

// TestServeSandboxNetworkNoneOfItsWorkspace: the second workspace's
// tools.sandboxNetwork "none" denies its sessions a loopback connection,
// although serve's first workspace says nothing and its sessions, on the
// same child, connect.
func TestServeSandboxNetworkNoneOfItsWorkspace(t *testing.T) {
	if abi := requireLandlock(t); abi < sandboxNetworkABI {
		t.Skipf("Landlock ABI %d cannot deny TCP connect", abi)
	}
	l, accepted := countingListener(t)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	wss := []string{t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[1], ".qwen", "settings.json"), `{"tools":{"sandboxNetwork":"none"}}`)
	td := startParsedPool(t, wss, []string{"--" + flagSandbox, sandboxWorkspace})
	for i, ws := range wss {
		id := td.sessionIn(t, ws)
		// A program's own connect: a /dev/tcp redirection would ask first.
		td.runTurn(t, id, shellCall(probeCommand(t, "net.txt", "connect=127.0.0.1:"+port), false))
		op := "connect=127.0.0.1:" + port
		if got, want := parseProbe(t, mustRead(t, filepath.Join(ws, "net.txt")), []string{op})[op] == "ok", i == 0; got != want {
			t.Errorf("session in workspace %d: connecting to the loopback listener succeeded = %v, want %v", i, got, want)
		}
	}
	if accepted.Load() > 1 {
		t.Errorf("the listener accepted %d connections, want the first workspace's only", accepted.Load())
	}
}

// TestServeSystemPromptOfItsWorkspace: serve's first workspace's
// env.QWEN_SYSTEM_MD replaces the prompt of that workspace's sessions only;
// the second workspace's sessions keep the built-in prompt.
func TestServeSystemPromptOfItsWorkspace(t *testing.T) {
	rec := &modelRequests{}
	srv := httptest.NewServer(rec.handler(t))
	t.Cleanup(srv.Close)
	prompt := filepath.Join(t.TempDir(), "ws.md")
	mustWrite(t, prompt, "PROMPT OF THE WORKSPACE")
	wss := []string{t.TempDir(), t.TempDir()}
	writeFileAll(t, filepath.Join(wss[0], ".qwen", "settings.json"), `{"env":{"QWEN_SYSTEM_MD":`+strconv.Quote(prompt)+`}}`)
	td := startParsedPool(t, wss, nil, "OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_MODEL=test-model", "OPENAI_API_KEY=")
	for i, ws := range wss {
		td.runTurn(t, td.sessionIn(t, ws), "hello")
		reqs, _ := rec.all()
		if len(reqs) == 0 || len(reqs[len(reqs)-1].Messages) == 0 {
			t.Fatalf("session in workspace %d: the model service received no message", i)
		}
		msgs := reqs[len(reqs)-1].Messages
		got := msgs[0].Content.text()
		if replaced := msgs[0].Role == roleSystem && strings.HasPrefix(got, "PROMPT OF THE WORKSPACE"); replaced != (i == 0) {
			t.Errorf("session in workspace %d: prompt replaced = %v, want %v; prompt:\n%s", i, replaced, i == 0, got)
		}
	}
}

// TestServeChildSandboxArgsAreTheOperators: serve gives its children the
// sandbox flags it was given and a network or Unix "none" of its operator
// file, never what its first workspace's file says.
func TestServeChildSandboxArgsAreTheOperators(t *testing.T) {
	shared, ws := t.TempDir(), t.TempDir()
	writeFileAll(t, filepath.Join(ws, ".qwen", "settings.json"), `{"tools":{"sandbox":true,"sandboxWrite":[`+strconv.Quote(shared)+`],"sandboxNetwork":"none"}}`)
	operator := writeSettings(t, `{"tools":{"sandbox":true,"sandboxUnix":"none"}}`)
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--sandbox-unix none"},
		{[]string{"--sandbox", "workspace", "--sandbox-write", shared}, "--sandbox workspace --sandbox-write " + shared + " --sandbox-unix none"},
		{[]string{"--sandbox-network", "all"}, "--sandbox-network all --sandbox-unix none"},
	}
	for _, tt := range tests {
		sys, _, _ := testSystem("HOME="+t.TempDir(), envSystemMD+"=")
		opts, err := parseServeArgs(append([]string{"--workspace", ws, "--settings", operator}, tt.args...), sys)
		if err != nil {
			t.Fatalf("serve %q: %v", tt.args, err)
		}
		d := &daemon{sys: sys, sandbox: sandboxInForce{Config: opts.Sandbox}, sandboxFlags: opts.SandboxFlags}
		var got []string
		args := d.childCommand("/bin/acpguard").Args
		for i := 0; i < len(args); i++ {
			if strings.HasPrefix(args[i], "--sandbox") {
				got = append(got, args[i], args[i+1])
				i++
			}
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("serve %q: children's sandbox flags %q, want %q", tt.args, got, tt.want)
		}
	}
}
