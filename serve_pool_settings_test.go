// serve_pool_settings_test.go tests that a session on a shared child
// (serve_children.go) takes every workspace property from its own
// workspace's settings, not from the child's start directory or from the
// workspace whose session started the child (DESIGN.md §10).
package main

import (
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
