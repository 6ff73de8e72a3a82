// serve_http_qwen_test.go tests that a running serve answers each host API
// error Qwen Code 0.24.4 has a body for with its status, text and extra keys
// (DESIGN.md §7, §11), so that a host written for "qwen serve" reads them.
package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestServeQwenErrorBodies(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, MaxPendingPrompts: 1}, fakeChildEnv(""))
	id := td.newSession(t, "")
	// A full queue: one turn running, one pending.
	stream := td.openEvents(t, id, "")
	td.prompt(t, id, "wait")
	readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionUpdate })
	td.prompt(t, id, "report pid")
	q := strconv.Quote
	text := `{"prompt":[{"type":"text","text":"x"}]}`
	for _, tt := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		want, retryAfter         string
	}{
		{"foreign Host", "GET", "/health", "", []string{"Host", "evil.example"}, 403,
			`{"error":"Invalid Host header","code":"host_not_allowed"}`, ""},
		{"foreign Origin", "POST", "/session", "{}", []string{"Origin", "https://evil.example"}, 403,
			`{"error":"Request denied by CORS policy","code":"origin_not_allowed"}`, ""},
		{"bad JSON", "POST", "/session", `{"cwd":`, nil, 400,
			`{"error":"Invalid JSON in request body","code":"invalid_request"}`, ""},
		{"body too large", "POST", "/session", `{"cwd":"` + strings.Repeat("a", maxHostBody) + `"}`, nil, 413,
			`{"error":"Request body too large (max 1 MB)","code":"payload_too_large"}`, ""},
		{"relative cwd", "POST", "/session", `{"cwd":"rel"}`, nil, 400,
			`{"error":"` + "`cwd`" + ` must be an absolute path when provided","code":"workspace_mismatch"}`, ""},
		{"cwd other workspace", "POST", "/session", `{"cwd":"/"}`, nil, 400,
			`{"error":"Workspace mismatch: runtime is bound to \"` + ws + `\" but request asked for \"/\". ` +
				`Select a registered runtime for \"/\" or register it before retrying; this bridge will not fall back to the primary workspace.",` +
				`"code":"workspace_mismatch","boundWorkspace":` + q(ws) + `,"requestedWorkspace":"/"}`, ""},
		{"prompt not an array", "POST", "/session/" + id + "/prompt", `{"prompt":"x"}`, nil, 400,
			"{\"error\":\"`prompt` is required and must be a non-empty array of content blocks\",\"code\":\"invalid_request\"}", ""},
		{"prompt missing", "POST", "/session/" + id + "/prompt", "", nil, 400,
			"{\"error\":\"`prompt` is required and must be a non-empty array of content blocks\",\"code\":\"invalid_request\"}", ""},
		{"unknown session", "POST", "/session/nope/prompt", text, nil, 404,
			`{"error":"No session with id \"nope\"","code":"session_not_found","sessionId":"nope"}`, ""},
		{"unknown session DELETE", "DELETE", "/session/nope", "", nil, 404,
			`{"error":"No session with id \"nope\"","code":"session_not_found","sessionId":"nope"}`, ""},
		{"vote body invalid", "POST", "/session/" + id + "/permission/r1", `{}`, nil, 400,
			"{\"error\":\"`outcome` must be `{ outcome: \\\"cancelled\\\" }` or `{ outcome: \\\"selected\\\", optionId: string }`\",\"code\":\"invalid_request\"}", ""},
		{"vote unknown request", "POST", "/session/" + id + "/permission/r1", `{"outcome":{"outcome":"cancelled"}}`, nil, 404,
			`{"error":"No pending permission request for session","code":"permission_not_found","sessionId":` + q(id) + `,"requestId":"r1"}`, ""},
		{"prompt queue full", "POST", "/session/" + id + "/prompt", text, nil, 503,
			`{"error":"queue prompt: session \"` + id + `\" already has 1 pending prompts (--max-pending-prompts-per-session)",` +
				`"code":"prompt_queue_full","sessionId":` + q(id) + `,"limit":1,"pendingCount":1}`, "5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := td.do(t, tt.method, tt.path, tt.body, tt.header...)
			if r.status != tt.status || strings.TrimSpace(string(r.body)) != tt.want {
				t.Errorf("%s %s = %d %s\nwant %d %s", tt.method, tt.path, r.status, r.body, tt.status, tt.want)
			}
			if got := r.header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
		})
	}
	td.do(t, "POST", "/session/"+id+"/cancel", "")
}
