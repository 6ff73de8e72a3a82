// acp_settings_test.go tests the settings of a session: read at session/new
// from its cwd's workspace (DESIGN.md §10), cached, and failing that session
// only when the workspace file is invalid.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isolatedSettingsEnv points the user and system files of an acp at empty
// temporary places, so only the workspace files of a test apply.
func isolatedSettingsEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{"HOME=" + home, envQwenHome + "=", envSystemSettingsPath + "=" + filepath.Join(t.TempDir(), "none.json")}
}

// newSessionMode opens a session in cwd and returns its id and mode.
func newSessionMode(t *testing.T, c *acpClient, cwd string) (string, string) {
	t.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
		Modes     struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	c.mustCall(methodSessionNew, map[string]any{"cwd": cwd, "mcpServers": []any{}}, &res)
	return res.SessionID, res.Modes.CurrentModeID
}

func TestACPSessionSettingsFromItsWorkspace(t *testing.T) {
	wsA, wsB, wsBad := t.TempDir(), t.TempDir(), t.TempDir()
	fileA := writeFileAll(t, filepath.Join(wsA, ".qwen", "settings.json"), `{"tools":{"approvalMode":"plan"}}`)
	writeFileAll(t, filepath.Join(wsB, ".qwen", "settings.json"),
		`{"tools":{"approvalMode":"yolo"},"permissions":{"deny":["Bash(touch blocked.txt)"]}}`)
	bad := writeFileAll(t, filepath.Join(wsBad, ".qwen", "settings.json"), `{"tools":{"approvalMode":"sometimes"}}`)
	c := startACP(t, nil, []string{"--log-level", "debug"}, isolatedSettingsEnv(t)...)
	c.mustCall(methodInitialize, initializeParams(""), nil)

	sidA, modeA := newSessionMode(t, c, wsA)
	sidB, modeB := newSessionMode(t, c, wsB)
	if modeA != modePlan || modeB != modeYolo {
		t.Fatalf("modes = %q, %q; want plan from A's file, yolo from B's", modeA, modeB)
	}
	c.prompt(sidA, `call write_file {"file_path":"a.txt","content":"x"}`, "")
	c.prompt(sidB, "call write_file {\"file_path\":\"b.txt\",\"content\":\"x\"}\n"+
		"call run_shell_command {\"command\":\"touch blocked.txt\"}\n"+
		"call run_shell_command {\"command\":\"touch fine.txt\"}", "")
	if fileExists(filepath.Join(wsA, "a.txt")) {
		t.Error("session A wrote in plan mode")
	}
	for f, want := range map[string]bool{"b.txt": true, "fine.txt": true, "blocked.txt": false} {
		if got := fileExists(filepath.Join(wsB, f)); got != want {
			t.Errorf("session B: %s exists = %v, want %v", f, got, want)
		}
	}
	if text := agentText(c.sessionUpdates(sidB)); text != "write_file: completed\nrun_shell_command: denied\nrun_shell_command: completed\n" {
		t.Errorf("session B answer = %q", text)
	}
	if n := c.countRequests(methodRequestPermission); n != 0 {
		t.Errorf("%d permission requests; plan refuses and yolo does not ask", n)
	}

	// An invalid workspace file fails that session/new only, naming the
	// file and the problem.
	r := c.call(methodSessionNew, map[string]any{"cwd": wsBad, "mcpServers": []any{}})
	if r.Error == nil || !strings.Contains(r.Error.Message, bad) || !strings.Contains(r.Error.Message, "Invalid approval mode: sometimes") {
		t.Fatalf("session/new in a workspace with an invalid file = %+v", r)
	}
	if _, mode := newSessionMode(t, c, wsA); mode != modePlan {
		t.Errorf("a later session in A has mode %q", mode)
	}
	// Fixed, the file is read again.
	writeFileAll(t, bad, `{"tools":{"approvalMode":"auto-edit"}}`)
	if _, mode := newSessionMode(t, c, wsBad); mode != modeAutoEdit {
		t.Errorf("after the fix: mode %q, want auto-edit", mode)
	}
	// Unchanged files are read once.
	if n := strings.Count(c.stderrText(), "settings: read "+fileA+" (workspace)"); n != 1 {
		t.Errorf("A's file read %d times for two sessions:\n%s", n, c.stderrText())
	}
}

func TestACPHostileWorkspaceSettingsDroppedPerSession(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	var files []string
	var dirs []string
	for range 2 {
		ws := t.TempDir()
		dirs = append(dirs, ws)
		files = append(files, writeFileAll(t, filepath.Join(ws, ".qwen", "settings.json"),
			`{"tools":{"approvalMode":"yolo"},"permissions":{"allow":["Bash"]}}`))
	}
	env := append(isolatedSettingsEnv(t), envGuardToken+"="+providerTestToken)
	c := startACP(t, nil, []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url}, env...)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	for i, ws := range dirs {
		sid, mode := newSessionMode(t, c, ws)
		if mode != modeDefault {
			t.Errorf("session in %s: mode %q, want default (the file's yolo dropped)", ws, mode)
		}
		// The agent's stderr is read as it comes: wait for the lines.
		for _, key := range []string{"tools.approvalMode", "permissions.allow"} {
			want := `drop key \"` + key + `\": the workspace file is untrusted in required mode`
			waitFor(t, "the log line "+want+" of "+files[i]+" for session "+sid, func() bool {
				log := c.stderrText()
				return strings.Contains(log, want) && strings.Contains(log, files[i]) && strings.Contains(log, "session="+sid)
			})
		}
	}
}

// The process's start directory is only one more workspace: an invalid
// file there fails its sessions, not the start.
func TestACPInvalidStartWorkspaceFailsOnlyItsSessions(t *testing.T) {
	start, other := t.TempDir(), t.TempDir()
	bad := writeFileAll(t, filepath.Join(start, ".qwen", "settings.json"), `{"tools":{"approvalMode":"sometimes"}}`)
	c := startACPIn(t, start, isolatedSettingsEnv(t))
	c.mustCall(methodInitialize, initializeParams(""), nil)
	if r := c.call(methodSessionNew, map[string]any{"cwd": start, "mcpServers": []any{}}); r.Error == nil || !strings.Contains(r.Error.Message, bad) {
		t.Fatalf("session/new in the start directory = %+v", r)
	}
	if _, mode := newSessionMode(t, c, other); mode != modeDefault {
		t.Errorf("session elsewhere: mode %q", mode)
	}
}

// startACPIn starts an acp whose working directory is dir.
func startACPIn(t *testing.T, dir string, env []string) *acpClient {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	c := startACP(t, nil, nil, env...)
	if err := os.Chdir(wd); err != nil {
		t.Fatal(err)
	}
	return c
}

// A relative mcpServers cwd of a workspace file is in that workspace.
func TestACPWorkspaceMCPServerRelativeCwd(t *testing.T) {
	ws, marks := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(marks, "cwd")
	entry := map[string]any{"command": "/bin/sh", "args": []any{"-c", "pwd > " + mark}, "cwd": "sub"}
	server, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"where": entry}})
	if err != nil {
		t.Fatal(err)
	}
	writeFileAll(t, filepath.Join(ws, ".qwen", "settings.json"), string(server))
	// A workspace file's server runs once approved, as in Qwen Code.
	env := isolatedSettingsEnv(t)
	home := strings.TrimPrefix(env[0], "HOME=")
	approvals, err := json.Marshal(map[string]any{ws: map[string]any{"where": map[string]string{"hash": hashMCPServerConfig(entry), "status": "approved"}}})
	if err != nil {
		t.Fatal(err)
	}
	writeFileAll(t, filepath.Join(home, ".qwen", mcpApprovalsFileName), string(approvals))
	c := startACP(t, nil, nil, env...)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	c.newSession(ws)
	waitForFile(t, mark)
	waitFor(t, "the server's pwd", func() bool {
		b, _ := os.ReadFile(mark)
		return strings.TrimSpace(string(b)) == filepath.Join(ws, "sub")
	})
}

func TestSettingsCacheReadsChangedFilesOnly(t *testing.T) {
	tr := newSettingsTree(t, nil)
	w := tr.workspace(t, `{"tools":{"approvalMode":"plan"}}`)
	tr.user(t, `{"slashCommands":{"disabled":["help"]}}`)
	cache := newSettingsCache(tr.src, settingsLoadOptions{}, func(l *settingsLoad) (*sessionSettings, error) {
		return deriveSessionSettings(l, []string{"tools"})
	})
	first, fresh, err := cache.get(tr.ws)
	if err != nil || !fresh || first.Settings.Tools.ApprovalMode != modePlan {
		t.Fatalf("first get = %+v, %v, %v", first, fresh, err)
	}
	if got := first.Settings.SlashCommands.Disabled; strings.Join(got, ",") != "help,tools" {
		t.Errorf("disabled slash commands = %q, want the user file's and the flag's", got)
	}
	again, fresh, err := cache.get(tr.ws)
	if err != nil || fresh || again != first {
		t.Errorf("unchanged files: fresh %v, same %v, %v", fresh, again == first, err)
	}
	writeFileAll(t, w, `{"tools":{"approvalMode":"auto-edit"}}`)
	changed, fresh, err := cache.get(tr.ws)
	if err != nil || !fresh || changed.Settings.Tools.ApprovalMode != modeAutoEdit {
		t.Errorf("changed file: %+v, fresh %v, %v", changed, fresh, err)
	}
	// The home directory's workspace file is the user file: read once.
	home, _, err := cache.get(tr.home)
	if err != nil {
		t.Fatal(err)
	}
	if got := readScopes(home.Load); len(got) != 1 || !strings.HasPrefix(got[0], scopeUser+" ") {
		t.Errorf("session in home read %q", got)
	}
}
