// settings_qwen_test.go tests that Qwen Code 0.24.4's settings files load:
// the keys acpguard ignores, the ones it honours, and a file of typos
// refused with every problem listed.
package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// qwenSettingsWarn are the files of testdata/settings/qwen that load with
// a warning: approval mode auto, hooks of events acpguard never fires.
var qwenSettingsWarn = map[string]bool{"hooks.json": true, "approval-auto.json": true}

// qwenSettingsChecks check what the files of testdata/settings/qwen that
// cover each key group load as (TestLoadQwenSettingsFiles loads them all).
var qwenSettingsChecks = map[string]func(t *testing.T, s *settings){
	"cli-and-telemetry.json": func(t *testing.T, s *settings) {
		for _, k := range []string{"general", "ui", "telemetry", "security.auth", "model.baseUrl", "model.generationConfig", "modelProviders", "context.includeDirectories", "context.fileFiltering", "env", "proxy", "omni"} {
			if !slices.Contains(s.Ignored, k) {
				t.Errorf("ignored keys %q lack %q", s.Ignored, k)
			}
		}
		if !slices.Equal(s.Context.FileName, []string{"QWEN.md", "AGENTS.md"}) {
			t.Errorf("context.fileName %q", s.Context.FileName)
		}
		if s.Model.Name != "qwen3-coder-plus" || s.Model.MaxTurns != maxMaxTurns {
			t.Errorf("model: %+v", s.Model)
		}
	},
	"mcp-servers.json": func(t *testing.T, s *settings) {
		configs, err := mcpServersFromSettings(s.MCPServers)
		if err != nil {
			t.Fatal(err)
		}
		if len(configs) != 2 || configs[0].Name != "nodeServer" || configs[1].Name != "pythonTools" {
			t.Fatalf("servers (experimental is excluded): %+v", configs)
		}
		node, py := configs[0], configs[1]
		if !node.Trust || node.Cwd != "/" || !reflect.DeepEqual(node.ExcludeTools, []string{"dangerous_tool"}) {
			t.Errorf("nodeServer: %+v", node)
		}
		if py.Trust || py.Cwd != "./mcp-servers/python" || py.CallTimeout != 15*time.Second || py.StartupTimeout != 20*time.Second ||
			!py.offersTool("query") || !py.offersTool("describe_table") || py.offersTool("drop_table") || py.offersTool("other") {
			t.Errorf("pythonTools: %+v", py)
		}
		if !slices.Equal(s.SkippedMCP, []string{"experimental"}) || !slices.Contains(s.Ignored, "mcpServers.pythonTools.description") {
			t.Errorf("skipped %q, ignored %q", s.SkippedMCP, s.Ignored)
		}
	},
	"hooks.json": func(t *testing.T, s *settings) {
		pre := s.Hooks.PreToolUse
		if len(pre) != 1 || len(pre[0].Hooks) != 2 {
			t.Fatalf("hooks: %+v", pre)
		}
		// 30 is seconds; 5000 is the older milliseconds.
		if h := pre[0].Hooks[0]; h.Name != "security-check" || h.Timeout != 30000 || h.Env["CHECK_LEVEL"] != "strict" {
			t.Errorf("first hook: %+v", h)
		}
		if h := pre[0].Hooks[1]; h.Timeout != 5000 {
			t.Errorf("second hook: %+v", h)
		}
		if len(s.Hooks.Stop) != 1 || len(s.Hooks.Notification) != 1 || len(s.Hooks.SessionStart) != 1 || len(s.Hooks.TodoCreated) != 1 {
			t.Errorf("hooks of the other events: %+v", s.Hooks)
		}
		if want := "settings: hooks for TodoCreated load but never fire: acpguard has none of the features that fire them (the README lists each event)"; !slices.Equal(s.Warnings, []string{want}) {
			t.Errorf("warnings %q, want %q", s.Warnings, want)
		}
	},
	"approval-auto.json": func(t *testing.T, s *settings) {
		if s.Tools.ApprovalMode != modeDefault || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], `"auto" runs as "default"`) {
			t.Errorf("approval auto: %q %q", s.Tools.ApprovalMode, s.Warnings)
		}
		// tools.core registers only what it names; tools.exclude takes away.
		for tool, disabled := range map[string]bool{"read_file": false, "run_shell_command": false, "edit": false, "write_file": true, "grep_search": true, "mcp__x__y": true} {
			if got := s.toolDisabled(tool); got != disabled {
				t.Errorf("toolDisabled(%s) = %v", tool, got)
			}
		}
		// tools.allowed is an allow rule.
		if v, rule := s.Rules.decide(s.Tools.ApprovalMode, "run_shell_command", false, map[string]any{"command": "git status"}, testCwd, testHome); v != verdictAllow || rule != "run_shell_command(git status)" {
			t.Errorf("tools.allowed: %s %q", v, rule)
		}
	},
	"hooks-disabled.json": func(t *testing.T, s *settings) {
		if len(s.Hooks.PreToolUse) != 0 || s.Tools.ApprovalMode != modeAutoEdit {
			t.Errorf("disableAllHooks: %+v %q", s.Hooks.PreToolUse, s.Tools.ApprovalMode)
		}
	},
}

// A file of typos is refused with every problem, one per line, in file
// order; the ignored keys' odd values are not problems.
func TestLoadQwenSettingsTypos(t *testing.T) {
	p := filepath.Join("testdata", "settings", "qwen-typos.json")
	_, err := loadSettings(p)
	if err == nil {
		t.Fatal("loaded")
	}
	want := []string{
		`key "tools.aprovalMode": unknown key (did you mean "tools.approvalMode"?)`,
		`key "tools.exlude": unknown key (did you mean "tools.exclude"?)`,
		`key "permisions": unknown key (did you mean "permissions"?)`,
		`key "mcpServers.db.Cwd": unknown key (did you mean "mcpServers.db.cwd"?)`,
		`key "mcpServers.db.timeout": want an integer, got string`,
		`key "hooks.PreToolUse[0].hooks[0].timout": unknown key (did you mean "hooks.PreToolUse[0].hooks[0].timeout"?)`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if w = `settings "` + p + `": ` + w; lines[i] != w {
			t.Errorf("line %d:\n got  %s\n want %s", i, lines[i], w)
		}
	}
}

func TestSettingsApprovalModes(t *testing.T) {
	for in, want := range map[string]string{"plan": modePlan, "PLAN": modePlan, "Default": modeDefault, "auto-edit": modeAutoEdit,
		"autoEdit": modeAutoEdit, "auto_edit": modeAutoEdit, "AUTO_EDIT": modeAutoEdit, "YOLO": modeYolo, "auto": modeDefault, "Auto": modeDefault} {
		if s := mustParse(t, `{"tools":{"approvalMode":"`+in+`"}}`); s.Tools.ApprovalMode != want {
			t.Errorf("%q -> %q, want %q", in, s.Tools.ApprovalMode, want)
		}
	}
}

// Problems of every kind are reported together; values are checked only
// once every key is known.
func TestSettingsProblems(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"Tools":{},"modle":{}}`, "key \"Tools\": unknown key (did you mean \"tools\"?)\nkey \"modle\": unknown key (did you mean \"model\"?)"},
		{`{"tools":{"approvalMode":"x","disabled":["Bsh"]},"mcp":{"allowed":["["]}}`,
			"key \"tools.approvalMode\": Invalid approval mode: x. Valid values are: plan, default, auto-edit, auto, yolo\nkey \"tools.disabled[0]\": unknown tool \"Bsh\"\nkey \"mcp.allowed[0]\": invalid server name pattern \"[\" (want a name with * and ?)"},
		{`{"tools":{"allowed":["Reed"]}}`, `key "tools.allowed[0]": rule "Reed": unknown tool "Reed"`},
		{`{"hooks":{"Stop":[{"hooks":[{"type":"http","url":"ftp://x"}]}],"security":{}},"security":{"allowedHttpHookUrls":["("]}}`,
			"key \"hooks.security\": unknown key"},
		{`{"hooks":{"Stop":[{"hooks":[{"type":"http","url":"ftp://x","headers":{"A":"b\r\nX: y"}}]}]},"stopHookBlockingCap":-1}`,
			"key \"stopHookBlockingCap\": -1 is not 1 or more\nkey \"hooks.Stop[0].hooks[0].url\": invalid URL \"ftp://x\" (want http:// or https:// and a host)\nkey \"hooks.Stop[0].hooks[0].headers\": invalid header \"A\""},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"prompt","prompt":"is it safe?"}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].type": PreToolUse hook of type "prompt" is not supported: acpguard does not send hook input to a model; use a command or http hook that asks one`},
		{`{"mcpServers":{"a":{"httpUrl":"https://mcp.example.com/mcp","oauth":{"enabled":true}}}}`, `key "mcpServers.a.oauth": MCP server "a" uses OAuth, which acpguard does not support; remove oauth and give the token in headers ("Authorization": "Bearer $VAR")`},
		{`{"mcpServers":{"a":{"httpUrl":"https://mcp.example.com/mcp","authProviderType":"google_credentials"}}}`, `key "mcpServers.a.authProviderType": MCP server "a" names an auth provider, which acpguard does not support; remove authProviderType and give the credentials in headers`},
		{`{"mcpServers":{"a":{"tcp":"127.0.0.1:9000"}}}`, `key "mcpServers.a.tcp": MCP server "a" uses the tcp transport, which acpguard does not support; use httpUrl, url or command`},
		{`{"mcpServers":{"a":{"command":"x","headers":{"X":"y"}}}}`, `key "mcpServers.a.headers": MCP server "a" has headers but no url or httpUrl: headers apply only to http and sse servers`},
		{`{"mcpServers":{"a":{"httpUrl":"ftp://mcp.example.com"}}}`, `key "mcpServers.a.httpUrl": MCP server "a": url "ftp://mcp.example.com": want http:// or https:// and a host`},
		{`{"mcpServers":{"a":{"url":"https://u:p@mcp.example.com/sse"}}}`, `key "mcpServers.a.url": MCP server "a": the url for host "mcp.example.com" holds credentials: put them in headers`},
		{`{"mcpServers":{"a":{"httpUrl":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer $OPENAI_API_KEY"}}}}`, `key "mcpServers.a.httpUrl": MCP server "a": header "Authorization" names variable "OPENAI_API_KEY", which acpguard keeps from every server; give the server its own variable`},
		{`{"mcpServers":{"a":{}}}`, `key "mcpServers.a.command": empty command; an MCP server needs httpUrl (Streamable HTTP), url (SSE) or command (stdio)`},
		{`{"mcpServers":{"a":{"command":"x","discoveryTimeoutMs":50}}}`, `key "mcpServers.a.discoveryTimeoutMs": 50 ms is not between 100 and 300000`},
		{`{"mcpServers":{"a":{"command":"x","includeTools":[""]}}}`, `key "mcpServers.a.includeTools[0]": empty tool name`},
	} {
		_, err := parseSettings([]byte(tc.json))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got  %v\n want %s", tc.json, err, tc.want)
		}
	}
}

// The ignored keys are named once, at debug level.
func TestSettingsIgnoredKeysLogged(t *testing.T) {
	s := mustParse(t, `{"ui":{"theme":1},"general":{},"tools":{"shell":{"pager":"less"}},"mcp":{"excluded":["x*"]},"mcpServers":{"x1":{"command":"x"}}}`)
	var buf bytes.Buffer
	warnSettings(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), s)
	out := buf.String()
	if strings.Count(out, "settings: ignoring Qwen Code keys: ui, general, tools.shell") != 1 || !strings.Contains(out, "server=x1") {
		t.Errorf("log:\n%s", out)
	}
	if len(s.MCPServers) != 0 {
		t.Errorf("excluded server kept: %+v", s.MCPServers)
	}
}

// A server starts in its cwd and offers only the tools includeTools and
// excludeTools leave; a cwd that is not there fails that server only.
func TestSettingsMCPServerCwdAndToolFilters(t *testing.T) {
	h := newHelperServer(t, "h")
	cfg := h.config(t)
	for i, kv := range cfg.Env {
		if strings.HasPrefix(kv, envHelperLog+"=") {
			cfg.Env[i] = envHelperLog + "=wire.log" // relative: written in the server's cwd
		}
	}
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "srv"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Cwd = filepath.Join(work, "srv")
	cfg.IncludeTools = []string{"echo", "fail(anything)"}
	cfg.ExcludeTools = []string{"fail"}
	bad := h.config(t)
	bad.Name, bad.Cwd = "gone", "no-such-dir"
	s := startTestMCP(t, mcpOptions{}, cfg, bad)
	var names []string
	for n := range s.set.extra() {
		names = append(names, n)
	}
	if !slices.Equal(names, []string{"mcp__h__echo"}) {
		t.Errorf("tools = %q", names)
	}
	if _, err := os.Stat(filepath.Join(work, "srv", "wire.log")); err != nil {
		t.Errorf("the server did not run in its cwd: %v", err)
	}
	if n := strings.Join(s.set.takeNotices(), "\n"); !strings.Contains(n, `MCP server "gone" failed to start`) || !strings.Contains(n, "no-such-dir\" is not a directory") {
		t.Errorf("notices: %s", n)
	}
}

// trust skips the default prompt only: a deny rule still denies, and the
// call still goes on to the guard.
func TestSettingsMCPTrustSkipsOnlyThePrompt(t *testing.T) {
	s := mustParse(t, `{"permissions":{"deny":["mcp__h__drop"]}}`)
	asked := 0
	env := &toolEnv{Cwd: t.TempDir(), Policy: &callPolicy{Settings: s, Mode: modeDefault,
		Ask: func(context.Context, toolCall, *toolSpec, map[string]any) permissionOutcome {
			asked++
			return permissionRejected
		}}}
	for _, tc := range []struct {
		name    string
		trusted bool
		ok      bool
		asked   int
	}{{"mcp__h__echo", true, true, 0}, {"mcp__h__drop", true, false, 0}, {"mcp__h__echo", false, false, 1}} {
		asked = 0
		_, ok := env.Policy.check(context.Background(), env, toolCall{ID: "c", Name: tc.name}, toolSpec{Name: tc.name, Trusted: tc.trusted}, map[string]any{})
		if ok != tc.ok || asked != tc.asked {
			t.Errorf("%s trusted=%v: ok=%v asked=%d", tc.name, tc.trusted, ok, asked)
		}
	}
}
