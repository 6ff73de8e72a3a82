// settings_trust_test.go tests folder trust: the rules of
// trustedFolders.json as Qwen Code decides them, and that in required mode
// they only narrow what the operator trusts.
package main

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFolderTrustRules(t *testing.T) {
	const yolo = `{"tools": {"approvalMode": "yolo"}, "permissions": {"allow": ["Bash"]}}`
	tests := []struct {
		name    string
		enabled string // security.folderTrust.enabled in the user file, "" unset
		rules   string // trustedFolders.json, {WS} and {PARENT} replaced; "" none
		opts    settingsLoadOptions
		userSet string // the user file's other keys
		wsBody  string // the workspace file, "" yolo
		// wantWS: the workspace file applied whole; wantMode the approval mode.
		wantWS   bool
		wantMode string
		warning  string // a warning that must be there, {WS} and {RULES} replaced
	}{
		{name: "disabled: rules not read", rules: `{"{WS}": "DO_NOT_TRUST"}`, wantWS: true, wantMode: modeYolo},
		{name: "trusted folder, off mode", enabled: "true", rules: `{"{WS}": "TRUST_FOLDER"}`, wantWS: true, wantMode: modeYolo},
		{name: "trusted parent", enabled: "true", rules: `{"{WS}/child": "TRUST_PARENT"}`, wantWS: true, wantMode: modeYolo},
		{name: "a trusted ancestor", enabled: "true", rules: `{"{PARENT}": "TRUST_FOLDER"}`, wantWS: true, wantMode: modeYolo},
		{name: "deeper distrust wins", enabled: "true", rules: `{"{PARENT}": "TRUST_FOLDER", "{WS}": "DO_NOT_TRUST"}`, wantMode: modeDefault,
			warning: `settings "{WS}/.qwen/settings.json": not read: the folder is not trusted: the rule "{WS}" of "{RULES}" does not trust it`},
		{name: "deeper trust wins", enabled: "true", rules: `{"{PARENT}": "DO_NOT_TRUST", "{WS}": "TRUST_FOLDER"}`, wantWS: true, wantMode: modeYolo},
		{name: "no rule: untrusted, yolo runs as default", enabled: "true", rules: `{}`, userSet: `"tools": {"approvalMode": "yolo"}`, wantMode: modeDefault,
			warning: `settings: approval mode "yolo" runs as "default" in "{WS}": the folder is not trusted`},
		{name: "no rules file: untrusted", enabled: "true", wantMode: modeDefault,
			warning: `settings "{WS}/.qwen/settings.json": not read: the folder is not trusted: security.folderTrust is enabled and no rule of "{RULES}" names the folder`},
		{name: "an untrusted folder's invalid file is not read", enabled: "true", rules: `{}`, wsBody: `{"tools": `, wantMode: modeDefault},
		{name: "untrusted keeps plan", enabled: "true", rules: `{}`, userSet: `"tools": {"approvalMode": "plan"}`, wantMode: modePlan},
		{name: "required: trust rules do not trust the workspace file", enabled: "true", rules: `{"{WS}": "TRUST_FOLDER"}`,
			opts: settingsLoadOptions{Required: true}, wantMode: modeDefault,
			warning: `settings "{WS}/.qwen/settings.json": drop key "permissions.allow": the workspace file is untrusted in required mode; give --trust-workspace-settings to apply it`},
		{name: "required with the flag: trusted as the rules say", enabled: "true", rules: `{"{WS}": "TRUST_FOLDER"}`,
			opts: settingsLoadOptions{Required: true, TrustWorkspace: true}, wantWS: true, wantMode: modeYolo},
		{name: "required with the flag: the rules narrow it", enabled: "true", rules: `{"{WS}": "DO_NOT_TRUST"}`,
			opts: settingsLoadOptions{Required: true, TrustWorkspace: true}, wantMode: modeDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newSettingsTree(t, nil)
			rulesFile := filepath.Join(tr.home, ".qwen", trustedFoldersFileName)
			repl := strings.NewReplacer("{WS}", tr.ws, "{PARENT}", filepath.Dir(tr.ws), "{RULES}", rulesFile)
			var user []string
			if tt.enabled != "" {
				user = append(user, `"security": {"folderTrust": {"enabled": `+tt.enabled+`}}`)
			}
			if tt.userSet != "" {
				user = append(user, tt.userSet)
			}
			tr.user(t, "{"+strings.Join(user, ", ")+"}")
			if tt.rules != "" {
				writeFileAll(t, rulesFile, repl.Replace(tt.rules))
			}
			tr.workspace(t, cmp.Or(tt.wsBody, yolo))
			l := tr.load(t, tt.opts)
			applied := slices.Equal(l.Settings.Permissions.Allow, []string{"Bash"})
			if applied != tt.wantWS || l.Settings.Tools.ApprovalMode != tt.wantMode {
				t.Errorf("workspace file applied %v, mode %q; want %v, %q (warnings %q)", applied, l.Settings.Tools.ApprovalMode, tt.wantWS, tt.wantMode, l.Warnings)
			}
			if w := repl.Replace(tt.warning); tt.warning != "" && !slices.Contains(l.Warnings, w) {
				t.Errorf("no warning %q in %q", w, l.Warnings)
			}
		})
	}
}

func TestFolderTrustErrors(t *testing.T) {
	tests := []struct{ name, user, rules, want string }{
		{"unknown level", `{"security": {"folderTrust": {"enabled": true}}}`, `{"{WS}": "DONT_TRUST"}`,
			`trusted folders "{RULES}": key "{WS}": want TRUST_FOLDER, TRUST_PARENT or DO_NOT_TRUST`},
		{"relative path", `{"security": {"folderTrust": {"enabled": true}}}`, `{"ws": "TRUST_FOLDER"}`,
			`trusted folders "{RULES}": key "ws": not an absolute path`},
		{"not an object", `{"security": {"folderTrust": {"enabled": true}}}`, `["{WS}"]`,
			`trusted folders "{RULES}": `},
		{"enabled not a boolean", `{"security": {"folderTrust": {"enabled": "yes"}}}`, `{}`,
			`settings "{USER}": key "security.folderTrust.enabled": want a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newSettingsTree(t, nil)
			rulesFile := filepath.Join(tr.home, ".qwen", trustedFoldersFileName)
			user := tr.user(t, tt.user)
			repl := strings.NewReplacer("{WS}", tr.ws, "{RULES}", rulesFile, "{USER}", user)
			writeFileAll(t, rulesFile, repl.Replace(tt.rules))
			_, err := loadSettingsFiles(tr.src, settingsLoadOptions{Workspace: tr.ws})
			if want := repl.Replace(tt.want); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
		})
	}
}

// TestFolderTrustRulesFileMoved: QWEN_CODE_TRUSTED_FOLDERS_PATH names the
// rules file, as in Qwen Code.
func TestFolderTrustRulesFileMoved(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	tr := newSettingsTree(t, map[string]string{envTrustedFoldersPath: rules})
	tr.user(t, `{"security": {"folderTrust": {"enabled": true}}}`)
	tr.workspace(t, `{"tools": {"approvalMode": "yolo"}}`)
	if err := os.WriteFile(rules, []byte(`{"`+tr.ws+`": "TRUST_FOLDER"} // comment`), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := tr.load(t, settingsLoadOptions{}); l.Settings.Tools.ApprovalMode != modeYolo || !l.Trust.Trusted || l.Trust.File != rules {
		t.Errorf("mode %q, trust %+v", l.Settings.Tools.ApprovalMode, l.Trust)
	}
}

// TestFolderTrustMCPServerTrust: an MCP server's trust skips the
// permission prompt in a trusted folder only, as in Qwen Code.
func TestFolderTrustMCPServerTrust(t *testing.T) {
	for _, tt := range []struct {
		rules string
		want  bool
	}{{`{}`, false}, {`{"{WS}": "TRUST_FOLDER"}`, true}} {
		tr := newSettingsTree(t, nil)
		tr.user(t, `{"security": {"folderTrust": {"enabled": true}}, "mcpServers": {"s": {"command": "/bin/true", "trust": true}}}`)
		writeFileAll(t, filepath.Join(tr.home, ".qwen", trustedFoldersFileName), strings.ReplaceAll(tt.rules, "{WS}", tr.ws))
		ss, err := deriveSessionSettings(tr.load(t, settingsLoadOptions{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss.MCP) != 1 || ss.MCP[0].Trust != tt.want {
			t.Errorf("rules %s: servers %+v, want trust %v", tt.rules, ss.MCP, tt.want)
		}
	}
}
