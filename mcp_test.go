// mcp_test.go checks MCP server configuration from settings and session/new,
// and the names and collisions of MCP tools.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMCPToolName(t *testing.T) {
	long := strings.Repeat("a", 40)
	tests := []struct{ server, tool, want string }{
		{"files", "read", "mcp__files__read"},
		{"my.server", "do it/now", "mcp__my_server__do_it_now"},
		{"ü", "tool-ä_1", "mcp_____tool-__1"},
		{"s", "\xff\xfe", "mcp__s____"},
		{"s", strings.Repeat("b", 55), "mcp__s__" + strings.Repeat("b", 55)}, // exactly 63
		{"s", strings.Repeat("b", 56), "mcp__s__" + strings.Repeat("b", 56)}, // exactly 64
		{"s", strings.Repeat("b", 57), "mcp__s__" + strings.Repeat("b", 47) + "_" + toolHash(strings.Repeat("b", 57))},
		{long, long + "XYZ", "mcp__" + long + "__aaaaaaaa_" + toolHash(long+"XYZ")},
		{"acme-production-database", "execute_arbitrary_sql_statement_in_transaction",
			"mcp__acme-production-database__execute_arbitrary_sql_st_" + toolHash("execute_arbitrary_sql_statement_in_transaction")},
	}
	for _, tt := range tests {
		got := mcpToolName(tt.server, tt.tool)
		if got != tt.want {
			t.Errorf("mcpToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
		if len(got) > mcpMaxToolName {
			t.Errorf("mcpToolName(%q, %q) is %d characters", tt.server, tt.tool, len(got))
		}
	}
}

func TestMCPCollisionsRefuseBoth(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		name    string
		offers  [][2]string // server, tool
		offered []string
		refused string
	}{
		{"distinct", [][2]string{{"a", "t"}, {"b", "t"}}, []string{"mcp__a__t", "mcp__b__t"}, ""},
		{"sanitized alike", [][2]string{{"a", "t.x"}, {"a", "t_x"}, {"a", "u"}}, []string{"mcp__a__u"}, `MCP tools "t.x" of server "a", "t_x" of server "a" all map to the name "mcp__a__t_x"; all of them are refused`},
		{"across servers", [][2]string{{"a__b", "c"}, {"a", "b__c"}}, nil, `"c" of server "a__b", "b__c" of server "a" all map to the name "mcp__a__b__c"`},
		{"shortened apart", [][2]string{{"s", long + "1"}, {"s", long + "2"}}, []string{mcpToolName("s", long+"1"), mcpToolName("s", long+"2")}, ""},
		{"listed twice", [][2]string{{"a", "t"}, {"a", "t"}}, nil, `"t" of server "a", "t" of server "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &mcpSet{tools: map[string]*toolSpec{}}
			servers := map[string]*mcpServer{}
			var offers []mcpOffer
			for _, o := range tt.offers {
				if servers[o[0]] == nil {
					servers[o[0]] = &mcpServer{name: o[0]}
				}
				offers = append(offers, mcpOffer{srv: servers[o[0]], def: mcpToolDef{Name: o[1], InputSchema: json.RawMessage(`{"type":"object"}`)}})
			}
			notices := addMCPTools(set, offers)
			var names []string
			for n := range set.tools {
				names = append(names, n)
			}
			if len(names) != len(tt.offered) {
				t.Errorf("offered %v, want %v", names, tt.offered)
			}
			for _, n := range tt.offered {
				if set.tools[n] == nil {
					t.Errorf("%s not offered (offered %v)", n, names)
				}
			}
			if tt.refused == "" && len(notices) != 0 || tt.refused != "" && (len(notices) != 1 || !strings.Contains(notices[0], tt.refused)) {
				t.Errorf("notices = %q, want one with %q", notices, tt.refused)
			}
		})
	}
}

func TestParseACPMCPServers(t *testing.T) {
	tests := []struct {
		name    string
		entries string
		configs string // fmt of the configs
		notices []string
	}{
		{"stdio without type or env", `[{"name":"a","command":"/bin/a","args":["-x"]}]`, `[{a  /bin/a [-x] []  [] 0s  false [] [] 0s}]`, nil},
		{"stdio typed with env", `[{"type":"stdio","name":"a","command":"a","args":[],"env":[{"name":"K","value":"v=1"}]}]`, `[{a  a [] [K=v=1]  [] 0s  false [] [] 0s}]`, nil},
		{"http", `[{"type":"http","name":"w","url":"http://127.0.0.1:1","headers":[{"name":"Authorization","value":"Bearer $TOKEN"}]}]`, `[{w http  [] [] http://127.0.0.1:1 [{Authorization Bearer $TOKEN true}] 0s  false [] [] 0s}]`, nil},
		{"sse", `[{"type":"sse","name":"w","url":"https://example.com/sse","headers":[]}]`, `[{w sse  [] [] https://example.com/sse [] 0s  false [] [] 0s}]`, nil},
		{"unknown type refused", `[{"type":"ws","name":"w","url":"http://127.0.0.1:1","headers":[]}]`, `[]`, []string{`MCP server "w" was refused: transport "ws" is not supported; use "stdio", "http" or "sse"`}},
		{"http without url", `[{"type":"http","name":"w","url":"","headers":[]}]`, `[]`, []string{`MCP server "w" was refused: MCP server "w" has no url`}},
		{"http to another scheme", `[{"type":"http","name":"w","url":"file:///etc/passwd","headers":[]}]`, `[]`, []string{`url "file:///etc/passwd": want http:// or https:// and a host`}},
		{"http with a header the transport sets", `[{"type":"http","name":"w","url":"http://127.0.0.1:1","headers":[{"name":"mcp-session-id","value":"x"}]}]`, `[]`, []string{`header "mcp-session-id" is set by the transport itself`}},
		{"http with a header value on two lines", `[{"type":"http","name":"w","url":"http://127.0.0.1:1","headers":[{"name":"X-Key","value":"a\nb"}]}]`, `[]`, []string{`the value of header "X-Key" holds a character not allowed in an HTTP header`}},
		{"no command", `[{"name":"a","args":[]}]`, `[]`, []string{`MCP server "a" was refused: MCP server "a" has no command`}},
		{"duplicate names", `[{"name":"a","command":"x","args":[]},{"name":"b","command":"y","args":[]},{"name":"a","command":"z","args":[]}]`, `[{b  y [] []  [] 0s  false [] [] 0s}]`, []string{`MCP server "a" was refused: session/new names it 2 times`}},
		// One bad entry is refused; the others still run (the schema's
		// x-deserialize-skip-invalid-items).
		{"unknown field", `[{"name":"a","command":"x","args":[],"cwd":"/"},{"name":"b","command":"y","args":[]}]`, `[{b  y [] []  [] 0s  false [] [] 0s}]`, []string{`MCP server entry 0 ("a") was refused: json: unknown field "cwd"`}},
		{"env name with =", `[{"name":"a","command":"x","args":[],"env":[{"name":"A=B","value":"v"}]}]`, `[]`, []string{`MCP server "a" was refused: environment variable name "A=B" is invalid`}},
		{"stdio with url", `[{"name":"a","command":"x","args":[],"url":"http://127.0.0.1"}]`, `[]`, []string{"carries url or headers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var entries []json.RawMessage
			if err := json.Unmarshal([]byte(tt.entries), &entries); err != nil {
				t.Fatal(err)
			}
			req := parseACPMCPServers(entries)
			configs, notices := req.configs, req.notices
			if got := fmt.Sprint(configs); got != tt.configs {
				t.Errorf("configs = %s, want %s", got, tt.configs)
			}
			if len(notices) != len(tt.notices) {
				t.Fatalf("notices = %q, want %q", notices, tt.notices)
			}
			for i := range notices {
				if !strings.Contains(notices[i], tt.notices[i]) {
					t.Errorf("notice %q lacks %q", notices[i], tt.notices[i])
				}
			}
		})
	}
}

func TestMergeMCPServers(t *testing.T) {
	settings := []mcpServerConfig{{Name: "a", Command: "settings-a"}, {Name: "b", Command: "settings-b", CallTimeout: testTimeout(time.Second)}, {Name: "web", Command: "settings-web"}}
	var entries []json.RawMessage
	json.Unmarshal([]byte(`[{"name":"c","command":"session-c","args":[]},{"name":"b","command":"session-b","args":[]},
		{"type":"http","name":"web","url":"http://127.0.0.1:1","headers":[]}]`), &entries)
	req := parseACPMCPServers(entries)
	var got []string
	for _, c := range mergeMCPServers(settings, req) {
		got = append(got, fmt.Sprintf("%s=%s/%v", c.Name, c.Command, c.CallTimeout))
	}
	// b is replaced whole (its settings timeout goes too), and web by the
	// session's remote server of that name, in the settings' order.
	if want := "[a=settings-a/0s b=session-b/0s web=/0s c=session-c/0s]"; fmt.Sprint(got) != want {
		t.Errorf("merged = %v, want %s", got, want)
	}
}

func TestParseSettingsMCPServers(t *testing.T) {
	tests := []struct {
		name, raw, want, err string
	}{
		{"qwen format", `{"zeta":{"command":"z"},"alpha":{"command":"/bin/a","args":["-v"],"env":{"B":"2","A":"1"},"timeout":1500}}`,
			"[{alpha stdio /bin/a [-v] [A=1 B=2]  [] 1.5s  false [] [] 0s} {zeta stdio z [] []  [] 0s  false [] [] 0s}]", ""},
		{"empty", `{}`, "[]", ""},
		{"any name", `{"my server":{"command":"x"}}`, "[{my server stdio x [] []  [] 0s  false [] [] 0s}]", ""},
		{"unknown key", `{"a":{"command":"x","cwdir":"/"}}`, "", `mcpServers: json: unknown field "cwdir"`},
		{"http", `{"a":{"headers":{"K":"v $X"},"httpUrl":"http://127.0.0.1","url":"http://127.0.0.1/sse","trust":true}}`, "[{a http  [] [] http://127.0.0.1 [{K v $X false}] 0s  true [] [] 0s}]", ""},
		// Qwen Code's order: httpUrl, then url, then command.
		{"sse before command", `{"a":{"command":"x","url":"http://127.0.0.1"}}`, "[{a sse  [] [] http://127.0.0.1 [] 0s  false [] [] 0s}]", ""},
		{"stdio with headers", `{"a":{"command":"x","headers":{}}}`, "", `key "mcpServers.a.headers": MCP server "a" has headers but no url or httpUrl`},
		{"no command", `{"a":{"args":[]}}`, "", `key "mcpServers.a": MCP server "a" has no command`},
		{"negative timeout", `{"a":{"command":"x","timeout":-5}}`, "", `key "mcpServers.a.timeout": -5 ms is not between 1 and 86400000`},
		{"bad env name", `{"a":{"command":"x","env":{"A=B":"v"}}}`, "", `key "mcpServers.a.env": variable name "A=B" is invalid`},
		{"not an object", `[]`, "", "mcpServers: json: cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSettingsMCPServers(json.RawMessage(tt.raw))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != tt.want {
				t.Errorf("= %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestACPSessionMergesSettingsServers(t *testing.T) {
	settingsOnly, replaced, fromSession := newHelperServer(t, "keep"), newHelperServer(t, "shared"), newHelperServer(t, "shared")
	logs := &syncBuffer{}
	a := &agent{
		env:         newProcEnv(os.Environ()),
		log:         slog.New(slog.NewTextHandler(logs, nil)),
		sessions:    map[string]*session{},
		settings:    defaultSettings(),
		mcpSettings: []mcpServerConfig{settingsOnly.config(t), replaced.config(t)},
	}
	params, _ := json.Marshal(map[string]any{"cwd": t.TempDir(), "mcpServers": []any{fromSession.acpEntry(t)}})
	res, err := a.newSession(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	s := a.session(res.(map[string]any)["sessionId"].(string))
	defer a.shutdown()
	if s.mcp.extra()["mcp__keep__echo"] == nil || s.mcp.extra()["mcp__shared__echo"] == nil {
		t.Errorf("session tools = %v", slices.Collect(maps.Keys(s.mcp.extra())))
	}
	starts := []int{len(settingsOnly.events("start")), len(replaced.events("start")), len(fromSession.events("start"))}
	if fmt.Sprint(starts) != "[1 0 1]" {
		t.Errorf("starts of settings-only, replaced settings, session entry = %v, want [1 0 1]", starts)
	}
	pids := append(settingsOnly.pids(t, "start"), fromSession.pids(t, "start")...)
	a.shutdown()
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

func toolHash(tool string) string {
	sum := sha256.Sum256([]byte(tool))
	return hex.EncodeToString(sum[:])[:mcpToolHashLen]
}

// TestMCPServerNameTooLongIsRefused: a server name that leaves no room for
// its tools within 64 characters is refused, from the settings file at
// start and from session/new, naming the server and the limit.
func TestMCPServerNameTooLongIsRefused(t *testing.T) {
	fits, over := strings.Repeat("s", mcpMaxServerName), strings.Repeat("s", mcpMaxServerName+1)
	if mcpMaxServerName != 40 {
		t.Fatalf("mcpMaxServerName = %d, want 40", mcpMaxServerName)
	}
	if err := (mcpServerConfig{Name: fits, Command: "x"}).validate(); err != nil {
		t.Errorf("a %d-character name is refused: %v", len(fits), err)
	}
	want := fmt.Sprintf(`MCP server name %q is too long: it has 41 characters, at most 40 leave room for a tool in a name "mcp__<server>__<tool>" of at most 64 characters; give the server a shorter name`, over)
	_, err := loadSettings(writeSettings(t, `{"mcpServers":{"`+over+`":{"command":"x"}}}`))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("settings with a 41-character server name: %v, want %q", err, want)
	}
	got := parseACPMCPServers([]json.RawMessage{json.RawMessage(`{"name":"` + over + `","command":"x","args":[],"env":[]}`)})
	if len(got.configs) != 0 || len(got.notices) != 1 || got.notices[0] != fmt.Sprintf("MCP server %q was refused: %s", over, want) {
		t.Errorf("session/new with a 41-character server name: %+v", got)
	}
	for _, tool := range []string{"t", strings.Repeat("t", 200)} {
		if n := mcpToolName(fits, tool); len(n) > mcpMaxToolName || !strings.HasPrefix(n, "mcp__"+fits+"__") {
			t.Errorf("mcpToolName(%q, %q) = %q", fits, tool, n)
		}
	}
}

// TestMCPLongToolNameKeepsItsServer: a tool of acme-production-database
// whose name is shortened keeps mcp__acme-production-database__, so a
// settings deny rule on the server and a provider deny rule on
// mcp__acme-production-database__* both catch it.
func TestMCPLongToolNameKeepsItsServer(t *testing.T) {
	const server = "acme-production-database"
	for _, tool := range []string{"execute_arbitrary_sql_statement", "execute_arbitrary_sql_statement_in_transaction"} {
		name := mcpToolName(server, tool)
		if !strings.HasPrefix(name, "mcp__"+server+"__execute_") || len(name) > mcpMaxToolName {
			t.Errorf("mcpToolName(%q, %q) = %q", server, tool, name)
		}
		s, err := loadSettings(writeSettings(t, `{"tools":{"approvalMode":"yolo"},"permissions":{"deny":["mcp__`+server+`"]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if v, rule := s.Rules.decide(s.Tools.ApprovalMode, name, false, map[string]any{}, testCwd, testHome); v != verdictDeny || rule != "mcp__"+server {
			t.Errorf("settings rule on the server, tool %q: %s %q", name, v, rule)
		}
		pol, err := parseProviderPolicy([]byte(`{"rules":[{"tool":"mcp__` + server + `__*","decision":"deny","reason":"Not the production database"}],"default":"allow"}`))
		if err != nil {
			t.Fatal(err)
		}
		if d := pol.decide(name, map[string]any{}); d.Allowed {
			t.Errorf("provider rule on the server, tool %q: %+v", name, d)
		}
	}
}

// TestMCPLongToolNameDeniedEndToEnd: a real server named
// acme-production-database offers a tool whose name is shortened; a deny
// rule on the server, in the settings file (yolo mode) or in the reference
// provider's policy (required mode), keeps every call from reaching it.
func TestMCPLongToolNameDeniedEndToEnd(t *testing.T) {
	const server, tool = "acme-production-database", "execute_arbitrary_sql_statement_in_transaction"
	name := mcpToolName(server, tool)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	mustWrite(t, policy, `{"rules":[{"tool":"mcp__`+server+`__*","decision":"deny","reason":"Not the production database"}],"default":"allow"}`)
	p := startRefProvider(t, providerOptions{PolicyFile: policy})
	settings := writeSettings(t, `{"permissions":{"deny":["mcp__`+server+`"]}}`)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		conf bool // required mode confines the server: it needs its log writable
	}{
		{"settings rule", []string{"--settings", settings}, nil, false},
		{"provider rule", []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url}, []string{envGuardToken + "=" + providerTestToken}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHelperServer(t, server)
			h.env[envHelperTools] = `[{"name":"` + tool + `","inputSchema":{"type":"object"}}]`
			args := tc.args
			if tc.conf {
				args = append(args, h.writable()...)
			}
			c := startACP(t, nil, args, tc.env...)
			c.mustCall(methodInitialize, initializeParams(""), nil)
			sid := newMCPSession(t, c, t.TempDir(), h.acpEntry(t))
			c.prompt(sid, "call "+name+` {"text":"DROP TABLE users"}`, "")
			if got := agentText(c.sessionUpdates(sid)); got != name+": denied\n" {
				t.Errorf("model answer = %q, want %q", got, name+": denied\n")
			}
			if got := h.events("tools/call"); len(got) != 0 {
				t.Errorf("tools/call reached the server: %q", got)
			}
		})
	}
}
