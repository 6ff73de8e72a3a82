package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Qwen Code's approval hash, byte for byte: the vectors were computed with
// Qwen Code 0.24.4's hashMcpServerConfig.
func TestHashMCPServerConfig(t *testing.T) {
	tests := []struct{ entry, want string }{
		{`{"httpUrl":"https://mcp.example.com/mcp","headers":{"X-B":"2","Authorization":"Bearer <tok> & \u2028"},"timeout":5000,"trust":true,"scope":"project","args":["a",1.5]}`,
			"5b9dd1ceb9cc52de30a324b26abe5820cb12d52e7b80533b64716e93aa7c74cc"},
		{`{"command":"node","args":["server.js"],"env":{"K":"v"}}`, "198efea5f63968b347fd18ac594c3a895868db39c5839d0b4d882a7b4c64c5a8"},
	}
	for _, tt := range tests {
		var e map[string]any
		if err := json.Unmarshal([]byte(tt.entry), &e); err != nil {
			t.Fatal(err)
		}
		if got := hashMCPServerConfig(e); got != tt.want {
			t.Errorf("hash of %s = %s, want %s", tt.entry, got, tt.want)
		}
	}
}

// <workspace>/.mcp.json: Claude's form read as Qwen Code reads it, between
// the user file and the workspace file; its servers and the workspace
// file's run only when mcpApprovals.json approves their config, or in
// yolo; in required mode it is untrusted like the workspace file.
func TestProjectMCPJSON(t *testing.T) {
	const project = `{"mcpServers":{
		"tickets":{"type":"http","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer $T"}},
		"events":{"type":"sse","url":"https://mcp.example.com/sse"},
		"local":{"type":"stdio","command":"node","args":["server.js"]},
		"shared":{"command":"from-project"}}}`
	// Each server's entry as Qwen Code hashes it: Claude's form normalized.
	entries := map[string]string{
		"tickets": `{"httpUrl":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer $T"}}`,
		"events":  `{"url":"https://mcp.example.com/sse"}`,
		"local":   `{"command":"node","args":["server.js"]}`,
		"shared":  `{"command":"from-project"}`,
	}
	approve := func(ws string, names ...string) string {
		proj := map[string]any{}
		for _, n := range names {
			var e map[string]any
			json.Unmarshal([]byte(entries[n]), &e)
			proj[n] = map[string]string{"hash": hashMCPServerConfig(e), "status": "approved"}
		}
		b, _ := json.Marshal(map[string]any{ws: proj})
		return string(b)
	}
	tests := []struct {
		name      string
		user      string
		workspace string
		approvals func(ws string) string
		required  bool
		want      string // the servers that run: name=command or url
		warning   string
	}{
		{"no approval: none runs", `{"mcpServers":{"shared":{"command":"from-user"}}}`, "", nil, false, "[]",
			`MCP server "tickets" waits for approval`},
		{"approved, Claude's form as Qwen's", "", "", func(ws string) string { return approve(ws, "tickets", "events", "local", "shared") }, false,
			"[events=sse:https://mcp.example.com/sse local=node shared=from-project tickets=http:https://mcp.example.com/mcp]", ""},
		{"an approval of another config", "", "", func(ws string) string {
			return fmt.Sprintf(`{%q:{"local":{"hash":%q,"status":"approved"}}}`, ws, strings.Repeat("0", 64))
		}, false, "[]", `MCP server "local" waits for approval`},
		{"yolo needs no approval; the workspace file wins", `{"tools":{"approvalMode":"yolo"}}`, `{"mcpServers":{"shared":{"command":"from-workspace"}}}`, nil, false,
			"[events=sse:https://mcp.example.com/sse local=node shared=from-workspace tickets=http:https://mcp.example.com/mcp]", ""},
		{"rejected", "", "", func(ws string) string {
			return strings.ReplaceAll(approve(ws, "local"), "approved", "rejected")
		}, false, "[]", `MCP server "local" waits for approval`},
		{"required mode: untrusted", `{"tools":{"approvalMode":"yolo"},"mcpServers":{"shared":{"command":"from-user"}}}`, "", nil, true,
			"[shared=from-user]", `drop key "mcpServers": the workspace file is untrusted in required mode`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			writeFileAll(t, filepath.Join(ws, projectMCPFileName), project)
			if tt.user != "" {
				writeFileAll(t, filepath.Join(home, qwenDirName, settingsFileName), tt.user)
			}
			if tt.workspace != "" {
				writeFileAll(t, filepath.Join(ws, qwenDirName, settingsFileName), tt.workspace)
			}
			if tt.approvals != nil {
				writeFileAll(t, filepath.Join(home, qwenDirName, mcpApprovalsFileName), tt.approvals(ws))
			}
			src := settingsSources{Home: home, Lookup: func(string) (string, bool) { return "", false }}
			l, err := loadSettingsFiles(src, settingsLoadOptions{Workspace: ws, Required: tt.required})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for name, e := range l.Settings.MCPServers {
				switch {
				case e.HTTPURL != "":
					got = append(got, name+"=http:"+e.HTTPURL)
				case e.URL != "":
					got = append(got, name+"=sse:"+e.URL)
				default:
					got = append(got, name+"="+e.Command)
				}
			}
			slices.Sort(got)
			if fmt.Sprint(got) != tt.want {
				t.Errorf("servers = %v, want %s", got, tt.want)
			}
			if tt.warning != "" && !slices.ContainsFunc(l.Warnings, func(w string) bool { return strings.Contains(w, tt.warning) }) {
				t.Errorf("warnings %q lack %q", l.Warnings, tt.warning)
			}
		})
	}
}

// A workspace .mcp.json that is a FIFO never blocks the settings' reading:
// it is refused as not a regular file.
func TestProjectMCPJSONFIFORefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".mcp.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readProjectMCPLayer(path); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO .mcp.json: %v, want it refused as not a regular file", err)
		}
	case <-time.After(testTimeout(10 * time.Second)):
		t.Fatal("reading a FIFO .mcp.json blocked")
	}
}

// The approvals file is read strictly: a member given twice, a member an
// approval does not have, a value of another type refuse the whole file,
// naming it and the rule, and no project server is approved.
func TestMCPApprovalsStrict(t *testing.T) {
	const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const shape = ` (want {"<project root>": {"<server>": {"hash": "<sha-256>", "status": "approved"}}}, each member once); no project server is approved`
	for _, tt := range []struct {
		name, file, want string
	}{
		{"as Qwen Code writes it", `{"/ws": {"local": {"hash": "` + hash + `", "status": "approved"}}, "/other": {}}`, ""},
		{"with comments", "// written by qwen\n{\"/ws\": {\"local\": {\"hash\": \"" + hash + "\", \"status\": \"approved\"}}}", ""},
		{"an unknown member", `{"/ws": {"local": {"hash": "` + hash + `", "status": "approved", "approvedBy": "x"}}}`,
			`project "/ws", server "local": json: unknown field "approvedBy"` + shape},
		{"a member twice in a record", `{"/ws": {"local": {"hash": "` + hash + `", "status": "rejected", "status": "approved"}}}`,
			`duplicate field "status" in /ws.local` + shape},
		{"a server twice", `{"/ws": {"local": {"hash": "0", "status": "rejected"}, "local": {"hash": "` + hash + `", "status": "approved"}}}`,
			`duplicate field "local" in /ws` + shape},
		{"a project twice", `{"/ws": {}, "/ws": {"local": {"hash": "` + hash + `", "status": "approved"}}}`,
			`duplicate field "/ws"` + shape},
		{"a name in another case", `{"/ws": {"local": {"hash": "` + hash + `", "Status": "approved"}}}`,
			`project "/ws", server "local": unknown field "Status"` + shape},
		{"a status of another type", `{"/ws": {"local": {"hash": "` + hash + `", "status": true}}}`,
			`project "/ws", server "local": json: cannot unmarshal bool into Go struct field mcpApproval.status of type string` + shape},
		{"a project that is a list", `{"/ws": [{"local": {"hash": "` + hash + `", "status": "approved"}}]}`,
			`json: cannot unmarshal array into Go value of type map[string]json.RawMessage` + shape},
		{"a null record", `{"/ws": {"local": null}}`, `project "/ws", server "local": null, not an object` + shape},
		{"trailing data", `{"/ws": {}} {}`, `trailing data after JSON value` + shape},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), mcpApprovalsFileName)
			writeFileAll(t, path, tt.file)
			got, warning := readMCPApprovals(path, "/ws")
			if tt.want == "" {
				if warning != "" || got["local"].Status != mcpApprovalApproved {
					t.Errorf("approvals %v, warning %q; want local approved", got, warning)
				}
				return
			}
			if want := fmt.Sprintf("MCP approvals %q: %s", path, tt.want); warning != want || got != nil {
				t.Errorf("approvals %v, warning\n%q\nwant none and\n%q", got, warning, want)
			}
		})
	}
}
