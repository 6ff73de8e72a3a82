// settings_test.go tests the settings file: every key checked, errors that
// name the file, the key and the rule.
package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestLoadSettingsFull(t *testing.T) {
	s, err := loadSettings(filepath.Join("testdata", "settings", "full.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Tools.ApprovalMode != modeAutoEdit || s.Model.Name != "qwen3-coder-plus" || s.Model.MaxTurns != 20 || s.MCP.CallTimeoutMs != 60000 {
		t.Errorf("scalars: %+v %+v %+v", s.Tools, s.Model, s.MCP)
	}
	srv := s.MCPServers["github"]
	if srv.Command != "github-mcp" || !reflect.DeepEqual(srv.Args, []string{"--read-only"}) || srv.Env["GITHUB_HOST"] != "github.example" || srv.Timeout != 30000 {
		t.Errorf("mcp server: %+v", srv)
	}
	if len(s.Hooks.PreToolUse) != 2 || s.Hooks.PreToolUse[0].Hooks[0].Timeout != 5000 || !s.Hooks.PreToolUse[1].Hooks[0].FailOpen {
		t.Errorf("hooks: %+v", s.Hooks)
	}
	// The loaded rules and matchers are ready to use.
	if v, rule := s.Rules.decide(s.Tools.ApprovalMode, "run_shell_command", false, map[string]any{"command": "git status && rm -rf /"}, testCwd, testHome); v != verdictDeny || rule != "Bash(rm *)" {
		t.Errorf("rules: %s %q", v, rule)
	}
	if v, _ := s.Rules.decide(s.Tools.ApprovalMode, "read_file", false, map[string]any{"file_path": testHome + "/.ssh/id_rsa"}, testCwd, testHome); v != verdictDeny {
		t.Errorf("~ rule: %s", v)
	}
	if m, err := s.Hooks.PreToolUse[0].matchesTool("run_shell_command"); !m || err != nil {
		t.Errorf("matcher Bash|Edit on the shell: %v %v", m, err)
	}
	for tool, want := range map[string]bool{"write_file": true, "edit": false, "mcp__github__delete_repo": true, "mcp__github__issues": false} {
		if got := s.toolDisabled(tool); got != want {
			t.Errorf("toolDisabled(%s) = %v", tool, got)
		}
	}
	if !s.slashCommandDisabled("tools") || !s.slashCommandDisabled("/tools") || s.slashCommandDisabled("help") {
		t.Error("slashCommandDisabled")
	}
}

func TestSettingsDefaults(t *testing.T) {
	for _, s := range []*settings{defaultSettings(), mustLoad(t, filepath.Join("testdata", "settings", "empty-object.json"))} {
		if s.Tools.ApprovalMode != modeDefault || s.Model.MaxTurns != defaultMaxTurns || len(s.Hooks.PreToolUse) != 0 || s.Rules == nil {
			t.Errorf("defaults: %+v", s)
		}
		if v, rule := s.Rules.decide(s.Tools.ApprovalMode, "edit", false, map[string]any{"file_path": testCwd + "/a"}, testCwd, testHome); v != verdictAsk || rule != "" {
			t.Errorf("default mode on an edit: %s %q", v, rule)
		}
		if out := runPreToolUseHooks(context.Background(), s.Hooks.PreToolUse, testHookInput(t.TempDir()), testHookEnv); out.Decision != hookNone {
			t.Errorf("no hooks: %+v", out)
		}
	}
	s := mustParse(t, `{"model":{"name":"m"}}`)
	if s.Model.MaxTurns != defaultMaxTurns {
		t.Errorf("maxTurns with model.name only: %d", s.Model.MaxTurns)
	}
}

// A server name runs under its tool-name form, as in session/new: any
// characters, as long as permission rules can still tell servers apart.
func TestSettingsMCPServerNames(t *testing.T) {
	tests := []struct{ name, tool string }{
		{"my server", "mcp__my_server__echo"},
		{"files.v2", "mcp__files_v2__echo"},
		{"dépôt", "mcp__d_p_t__echo"},
		{"_private", "mcp___private__echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, `{"mcpServers":{`+strconv.Quote(tt.name)+`:{"command":"x"}}}`)
			configs, err := mcpServersFromSettings(s.MCPServers)
			if err != nil || len(configs) != 1 || configs[0].Name != tt.name {
				t.Fatalf("configs = %+v, %v", configs, err)
			}
			if got := mcpToolName(configs[0].Name, "echo"); got != tt.tool {
				t.Errorf("tool name = %q, want %q", got, tt.tool)
			}
		})
	}
}

func mustLoad(t *testing.T, path string) *settings {
	t.Helper()
	s, err := loadSettings(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustParse(t *testing.T, data string) *settings {
	t.Helper()
	s, err := parseSettings([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every error names the file, the key path and the offending value.
func TestLoadSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		json string
		want string
	}{
		{`{"tools":{"aprovalMode":"yolo"}}`, `key "tools.aprovalMode": unknown key (did you mean "tools.approvalMode"?)`},
		{`{"tool":{}}`, `key "tool": unknown key (did you mean "tools"?)`},
		{`{"hooks":{"PostToolUse":[{"hooks":[{"type":"prompt","name":"judge","prompt":"x"}]}]}}`, `key "hooks.PostToolUse[0].hooks[0].type": PostToolUse hook "judge" of type "prompt" is not supported: acpguard does not send hook input to a model; use a command or http hook that asks one`},
		{`{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"x","failMode":"closed"}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].failMode": unknown key`},
		{`{"mcpServers":{"a":{"command":"x","cwd":"/nonexistent-dir"}}}`, `key "mcpServers.a.cwd": directory "/nonexistent-dir" does not exist`},
		{`{"tools":{"approvalMode":1}}`, `key "tools.approvalMode": want a string, got number`},
		{`{"tools":{"approvalMode":null}}`, `key "tools.approvalMode": want a string, got null`},
		{`{"tools":"yolo"}`, `key "tools": want an object, got string`},
		{`{"permissions":{"allow":"Bash"}}`, `key "permissions.allow": want an array, got string`},
		{`{"permissions":{"deny":["Bash",true]}}`, `key "permissions.deny[1]": want a string, got boolean`},
		{`{"model":{"maxTurns":"10"}}`, `key "model.maxTurns": want an integer, got string`},
		{`{"model":{"maxTurns":1.5}}`, `key "model.maxTurns": want an integer, got 1.5`},
		{`{"model":{"maxTurns":1e2}}`, `key "model.maxTurns": want an integer, got 1e2`},
		{`{"model":{"maxTurns":99999999999}}`, `key "model.maxTurns": want an integer, got 99999999999`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"x","failOpen":"yes"}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].failOpen": want a boolean, got string`},
		{`{"mcpServers":{"a":{"command":"x","env":{"K":1}}}}`, `key "mcpServers.a.env.K": want a string, got number`},
		{`[]`, `want an object, got array`},
		{`null`, `want an object, got null`},
		{``, `invalid JSON at line 1, column 1: unexpected end of JSON input`},
		{`{"tools":{}`, `invalid JSON at line 1, column 12: unexpected end of JSON input`},
		{`{"tools" {}}`, `invalid JSON at line 1, column 10: invalid character '{' after object key`},
		{`{} {}`, `more than one JSON value`},
		{`{"tools":{},"tools":{}}`, `duplicate key "tools"`},
		{`{"permissions":{"deny":[],"deny":["Bash"]}}`, `duplicate key "permissions.deny"`},
		{"{\"model\":{\"name\":\"\xff\"}}", `not valid UTF-8`},
		{`{"tools":{"approvalMode":"fast"}}`, `key "tools.approvalMode": Invalid approval mode: fast. Valid values are: plan, default, auto-edit, auto, yolo`},
		{`{"tools":{"approvalMode":""}}`, `key "tools.approvalMode": Invalid approval mode: . Valid values are: plan, default, auto-edit, auto, yolo`},
		{`{"tools":{"disabled":["web_fetch","Bsh"]}}`, `key "tools.disabled[1]": unknown tool "Bsh"`},
		{`{"permissions":{"ask":["Bash(git push"]}}`, `key "permissions.ask[0]": rule "Bash(git push": missing ")" at the end`},
		{`{"permissions":{"allow":["Bash","Reed(./x)"]}}`, `key "permissions.allow[1]": rule "Reed(./x)": unknown tool "Reed"`},
		{`{"hooks":{"PreToolUse":[{"matcher":"(","hooks":[{"type":"command","command":"x"}]}]}}`, `key "hooks.PreToolUse[0].matcher": matcher "(": error parsing regexp: missing closing ): ` + "`(`"},
		{`{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[]}]}}`, `key "hooks.PreToolUse[0].hooks": no hooks`},
		{`{"hooks":{"PreToolUse":[{"matcher":"*"}]}}`, `key "hooks.PreToolUse[0].hooks": no hooks`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"http","command":"x"}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].url": invalid URL "" (want http:// or https:// and a host)`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"command":"x"}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].type": hook type "" is not supported (want "command" or "http")`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"  "}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].command": empty command`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"a\u0000b"}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].command": command contains a NUL byte`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"x","timeout":601}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].timeout": timeout 601 is not between 1 and 600 seconds (a value of 1000 or more is read as milliseconds, up to 600000)`},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"x","timeout":-1}]}]}}`, `key "hooks.PreToolUse[0].hooks[0].timeout": timeout -1 is not between 1 and 600 seconds (a value of 1000 or more is read as milliseconds, up to 600000)`},
		{`{"model":{"maxTurns":0}}`, `key "model.maxTurns": 0 is not between 1 and 1000`},
		{`{"model":{"maxTurns":1001}}`, `key "model.maxTurns": 1001 is not between 1 and 1000`},
		{`{"slashCommands":{"disabled":["/"]}}`, `key "slashCommands.disabled[0]": invalid slash command "/"`},
		{`{"slashCommands":{"disabled":["a b"]}}`, `key "slashCommands.disabled[0]": invalid slash command "a b"`},
		{`{"mcpServers":{"a__b":{"command":"x"}}}`, `key "mcpServers.a__b": MCP server name "a__b" cannot be told apart by permission rules: its tools would be named "mcp__a__b__<tool>" and a rule reads the server name up to the first "__" (with characters outside [A-Za-z0-9_-] as "_", the name must not contain "__" or end in "_")`},
		{`{"mcpServers":{"a._b":{"command":"x"}}}`, `key "mcpServers.a._b": MCP server name "a._b" cannot be told apart by permission rules: its tools would be named "mcp__a__b__<tool>" and a rule reads the server name up to the first "__" (with characters outside [A-Za-z0-9_-] as "_", the name must not contain "__" or end in "_")`},
		{`{"mcpServers":{"my server ":{"command":"x"}}}`, `key "mcpServers.my server ": MCP server name "my server " cannot be told apart by permission rules: its tools would be named "mcp__my_server___<tool>" and a rule reads the server name up to the first "__" (with characters outside [A-Za-z0-9_-] as "_", the name must not contain "__" or end in "_")`},
		{`{"mcpServers":{"":{"command":"x"}}}`, `key "mcpServers.": empty MCP server name`},
		{`{"mcpServers":{" ":{"command":"x"}}}`, `key "mcpServers. ": empty MCP server name`},
		{`{"mcpServers":{"w":{"url":"http://127.0.0.1:1/sse#top"}}}`, `key "mcpServers.w.url": MCP server "w": url "http://127.0.0.1:1/sse#top" has a fragment`},
		{`{"mcpServers":{"w":{"headers":{"Content-Type":"text/plain"},"httpUrl":"http://127.0.0.1:1/mcp"}}}`, `key "mcpServers.w.httpUrl": MCP server "w": header "Content-Type" is set by the transport itself; remove it`},
		{`{"mcpServers":{"w":{"headers":{"Bad Name":"x"},"httpUrl":"http://127.0.0.1:1/mcp"}}}`, `key "mcpServers.w.httpUrl": MCP server "w": header name "Bad Name" is not an HTTP token`},
		{`{"mcpServers":{"w":{"command":"x","headers":{}}}}`, `key "mcpServers.w.headers": MCP server "w" has headers but no url or httpUrl: headers apply only to http and sse servers`},
		{`{"mcpServers":{"w":{"httpUrl":1}}}`, `key "mcpServers.w.httpUrl": want a string, got number`},
		{`{"mcpServers":{"a":{"args":[]}}}`, `key "mcpServers.a.command": empty command; an MCP server needs httpUrl (Streamable HTTP), url (SSE) or command (stdio)`},
		{`{"mcpServers":{"a":{"command":"x","timeout":1}}}`, `key "mcpServers.a.timeout": timeout 1 ms is not between 100 and 600000`},
		{`{"mcpServers":{"a":{"command":"x","env":{"A=B":"c"}}}}`, `key "mcpServers.a.env": invalid environment variable name "A=B"`},
		{`{"mcp":{"callTimeoutMs":600001}}`, `key "mcp.callTimeoutMs": 600001 ms is not between 100 and 600000`},
	} {
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(tc.json), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadSettings(p)
		want := `settings "` + p + `": ` + tc.want
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got  %v\n want %s", tc.json, err, want)
		}
	}
}

func TestLoadSettingsFileErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := loadSettings(filepath.Join(dir, "missing.json"))
	if err == nil || !strings.Contains(err.Error(), `read settings: open `+dir+`/missing.json: no such file or directory`) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	data := `{"model":{"name":"` + strings.Repeat("x", maxSettingsBytes) + `"}}`
	if err := os.WriteFile(big, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadSettings(big)
	if want := `settings "` + big + `": larger than 1048576 bytes`; err == nil || err.Error() != want {
		t.Errorf("big file: %v", err)
	}
	_, err = parseSettings([]byte(`{"model":{"name":"` + strings.Repeat("x", maxSettingsStringBytes+1) + `"}}`))
	if want := `key "model.name": string longer than 65536 bytes`; err == nil || err.Error() != want {
		t.Errorf("long string: %v", err)
	}
}

// The walker and the Go types agree: every key of the full example is
// known, and every exported settings field has a JSON name.
func TestSettingsWalkerCoversTypes(t *testing.T) {
	var walk func(reflect.Type, string)
	walk = func(tp reflect.Type, at string) {
		switch tp.Kind() {
		case reflect.Struct:
			for i := range tp.NumField() {
				f := tp.Field(i)
				if !f.IsExported() {
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "" {
					t.Errorf("%s.%s has no json tag", at, f.Name)
				}
				if tag != "-" {
					walk(f.Type, at+"."+tag)
				}
			}
		case reflect.Slice, reflect.Map:
			walk(tp.Elem(), at+"[]")
		case reflect.Pointer:
			walk(tp.Elem(), at)
		case reflect.String, reflect.Int, reflect.Bool:
		default:
			t.Errorf("%s: the walker does not know %s", at, tp)
		}
	}
	walk(reflect.TypeFor[settings](), "settings")
}

func FuzzParseSettings(f *testing.F) {
	full, err := os.ReadFile(filepath.Join("testdata", "settings", "full.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(full), `{}`, `{"tools":{"approvalMode":"plan"}}`, `{"permissions":{"deny":["Read(**/*.{a,b})"]}}`, `{"a":1}`, `[`, `{"model":{"maxTurns":5}}`,
		`{"mcpServers":{"my server":{"command":"x"},"w":{"url":"http://127.0.0.1:1/sse","headers":{"A":"b"}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseSettings(data)
		if err != nil {
			if s != nil {
				t.Fatal("settings returned with an error")
			}
			return
		}
		switch s.Tools.ApprovalMode {
		case modePlan, modeDefault, modeAutoEdit, modeYolo:
		default:
			t.Fatalf("accepted approval mode %q", s.Tools.ApprovalMode)
		}
		if s.Rules == nil || s.Model.MaxTurns < 1 || s.Model.MaxTurns > maxMaxTurns {
			t.Fatalf("accepted %+v", s)
		}
		// Each server has a way to reach it, headers only when remote, and
		// a name rules can tell apart.
		for name, srv := range s.MCPServers {
			remote := srv.URL != "" || srv.HTTPURL != ""
			if sanitized := mcpSanitize(name); !remote && srv.Command == "" || !remote && srv.Headers != nil ||
				strings.Contains(sanitized, "__") || strings.HasSuffix(sanitized, "_") {
				t.Fatalf("accepted MCP server %q: %+v", name, srv)
			}
		}
		for _, m := range s.Hooks.PreToolUse {
			if _, err := m.matchesTool("edit"); err != nil {
				t.Fatalf("accepted matcher %q: %v", m.Matcher, err)
			}
			for _, h := range m.Hooks {
				if h.Type != "command" || strings.TrimSpace(h.Command) == "" {
					t.Fatalf("accepted hook %+v", h)
				}
			}
		}
	})
}
