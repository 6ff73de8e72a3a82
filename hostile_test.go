// hostile_test.go sends malformed and hostile host API requests to a running
// "acpguard serve" in required mode and checks that each gets a 4xx, that no
// ACP child is started for it and that no tool runs because of it.
package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hostileRequest is one host request that must be refused.
type hostileRequest struct {
	name, method, path, body string
	header                   []string
	status                   int
	code                     string
}

// acpChildren returns this process's children that run "acpguard acp": the
// children an in-process daemon started.
func acpChildren(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, pid := range childPIDs(t, os.Getpid()) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == "acp" {
			out = append(out, pid)
		}
	}
	return out
}

// pwnedPrompt is a prompt body whose text, were it ever run, writes pwned.txt.
func pwnedPrompt(prefix, suffix string) string {
	return prefix + `{"type":"text","text":"call write_file {\"file_path\":\"pwned.txt\",\"content\":\"x\"}"}` + suffix
}

func TestHostileHostRequests(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, prov.guard(t)), quickRaceExit)
	huge := strings.Repeat(`{"type":"text","text":"call write_file {\"file_path\":\"pwned.txt\",\"content\":\"x\"}"},`, maxHostBody/80+1)

	// Before any session exists: none of these may start a child.
	for _, tt := range []hostileRequest{
		{"cwd number", "POST", "/session", `{"cwd":1}`, nil, 400, codeBadRequest},
		{"cwd null scope object", "POST", "/session", `{"sessionScope":{}}`, nil, 400, codeBadRequest},
		{"cwd traversal", "POST", "/session", `{"cwd":"/../../etc"}`, nil, 400, codeWorkspaceMismatch},
		{"cwd traversal out of workspace", "POST", "/session", `{"cwd":` + strconv.Quote(ws+"/../../etc") + `}`, nil, 400, codeWorkspaceMismatch},
		{"cwd parent of workspace", "POST", "/session", `{"cwd":` + strconv.Quote(ws+"/..") + `}`, nil, 400, codeWorkspaceMismatch},
		{"cwd below workspace", "POST", "/session", `{"cwd":` + strconv.Quote(filepath.Join(ws, "sub")) + `}`, nil, 400, codeWorkspaceMismatch},
		{"cwd invalid UTF-8", "POST", "/session", "{\"cwd\":\"" + ws + "\xff\"}", nil, 400, codeBadRequest},
		{"cwd NUL", "POST", "/session", `{"cwd":"` + ws + `\u0000"}`, nil, 400, codeWorkspaceMismatch},
		{"unknown field", "POST", "/session", `{"cwd":` + strconv.Quote(ws) + `,"model":"x"}`, nil, 400, codeBadRequest},
		{"two values", "POST", "/session", `{}{}`, nil, 400, codeBadRequest},
		{"array body", "POST", "/session", `[{"cwd":"/"}]`, nil, 400, codeBadRequest},
		{"truncated body", "POST", "/session", `{"cwd":"`, nil, 400, codeBadRequest},
		{"oversized body", "POST", "/session", `{"cwd":"` + strings.Repeat("a", maxHostBody) + `"}`, nil, 413, codeTooLarge},
		// The size is checked before the session is looked up.
		{"oversized body, unknown session", "POST", "/session/nope/prompt", `{"prompt":"` + strings.Repeat("a", maxHostBody) + `"}`, nil, 413, codeTooLarge},
		{"unknown route", "POST", "/sessions", `{}`, nil, 404, codeNotFound},
		{"provider route on the daemon", "POST", "/v1/prepare", `{}`, nil, 404, codeNotFound},
		{"deep unknown route", "POST", "/session/x/prompt/y", pwnedPrompt(`{"prompt":[`, `]}`), nil, 404, codeNotFound},
		{"encoded traversal in id", "POST", "/session/..%2f..%2fetc/prompt", pwnedPrompt(`{"prompt":[`, `]}`), nil, 404, codeSessionNotFound},
		{"wrong method on session", "PUT", "/session", `{}`, nil, 405, codeMethodNotAllowed},
		{"wrong method on health", "DELETE", "/health", "", nil, 405, codeMethodNotAllowed},
		{"foreign Host", "POST", "/session", `{}`, []string{"Host", "attacker.example"}, 403, codeHostNotAllowed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, td.do(t, tt.method, tt.path, tt.body, tt.header...), tt.status, tt.code)
		})
	}
	if kids := acpChildren(t); len(kids) != 0 {
		t.Fatalf("refused requests started ACP children %v", kids)
	}

	// With a live session: none of these may queue a prompt or run a tool.
	id := td.newSession(t, "")
	kids := acpChildren(t)
	for _, tt := range []hostileRequest{
		{"prompt string", "POST", "/session/" + id + "/prompt", `{"prompt":"call write_file {}"}`, nil, 400, codeBadRequest},
		{"prompt object", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":`, `}`), nil, 400, codeBadRequest},
		{"prompt empty", "POST", "/session/" + id + "/prompt", `{"prompt":[]}`, nil, 400, codeBadRequest},
		{"prompt null", "POST", "/session/" + id + "/prompt", `{"prompt":null}`, nil, 400, codeBadRequest},
		{"prompt missing", "POST", "/session/" + id + "/prompt", `{}`, nil, 400, codeBadRequest},
		{"block number", "POST", "/session/" + id + "/prompt", `{"prompt":[1]}`, nil, 400, codeBadRequest},
		{"block without type", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"text":"a"},`, `]}`), nil, 400, codeBadRequest},
		{"block type number", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":7},`, `]}`), nil, 400, codeBadRequest},
		// Blocks the child could not read: refused here, not after a 202.
		{"text block without text", "POST", "/session/" + id + "/prompt", `{"prompt":[{"type":"text"}]}`, nil, 400, codeBadRequest},
		{"blank text", "POST", "/session/" + id + "/prompt", `{"prompt":[{"type":"text","text":"  "}]}`, nil, 400, codeBadRequest},
		{"image block", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"image","data":"AA==","mimeType":"image/png"},`, `]}`), nil, 400, codeBadRequest},
		{"embedded resource", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"resource","resource":{"uri":"file:///x","text":"y"}},`, `]}`), nil, 400, codeBadRequest},
		{"resource_link without uri", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"resource_link","name":"x"},`, `]}`), nil, 400, codeBadRequest},
		{"unknown block field", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"text","text":"a","colour":"red"},`, `]}`), nil, 400, codeBadRequest},
		{"unknown top-level field", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"promptId":"mine","prompt":[`, `]}`), nil, 400, codeBadRequest},
		{"huge prompt array", "POST", "/session/" + id + "/prompt", `{"prompt":[` + huge + `{"type":"text","text":"x"}]}`, nil, 413, codeTooLarge},
		{"oversized cancel body", "POST", "/session/" + id + "/cancel", strings.Repeat(" ", maxHostBody+1), nil, 413, codeTooLarge},
		{"trailing garbage", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[`, `]}x`), nil, 400, codeBadRequest},
		{"slash command", "POST", "/session/" + id + "/prompt", `{"prompt":[{"type":"text","text":"/fork"}]}`, nil, 400, codeSlashRejected},
		{"wrong method on prompt", "GET", "/session/" + id + "/prompt", "", nil, 405, codeMethodNotAllowed},
		{"vote for unknown request", "POST", "/session/" + id + "/permission/nope", `{"outcome":{"outcome":"selected","optionId":"proceed_always"}}`, nil, 404, codePermissionUnknown},
		{"vote wrong type", "POST", "/session/" + id + "/permission/nope", `{"outcome":"allow"}`, nil, 400, codeBadRequest},
		{"vote without outcome", "POST", "/session/" + id + "/permission/nope", `{}`, nil, 400, codeBadRequest},
		{"bad Last-Event-ID", "GET", "/session/" + id + "/events", "", []string{"Last-Event-ID", "-1"}, 400, codeBadRequest},
		{"non-numeric Last-Event-ID", "GET", "/session/" + id + "/events", "", []string{"Last-Event-ID", "1e3"}, 400, codeBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, td.do(t, tt.method, tt.path, tt.body, tt.header...), tt.status, tt.code)
		})
	}
	if after := acpChildren(t); len(after) != len(kids) {
		t.Errorf("ACP children went from %v to %v", kids, after)
	}
	// The first turn the session runs is the valid one below: no refused
	// prompt was queued ahead of it.
	pid, evs := td.runTurn(t, id, "hello")
	all := readSSE(t, td.openEvents(t, id, ""), untilTurnEnd(pid))
	if len(all) != len(evs) {
		t.Errorf("the event stream holds %d events, %d of them from the valid turn", len(all), len(evs))
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused request ran a tool (stat: %v)", err)
	}
	if _, calls := prov.counts(); calls != 0 {
		t.Errorf("refused requests caused %d provider calls", calls)
	}
}

// TestHostileContentType: a browser page may POST text/plain cross-origin
// without a preflight, and its Host header is then a loopback name; on a
// loopback daemon without a host token only a Content-Type or Origin check
// can stop a web page from starting ACP children.
func TestHostileContentType(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, quickRaceExit)
	r := td.do(t, "POST", "/session", `{}`, "Content-Type", "text/plain", "Origin", "http://attacker.example")
	wantError(t, r, http.StatusForbidden, codeOriginNotAllowed)
	if kids := acpChildren(t); len(kids) != 0 {
		t.Errorf("refused request started ACP children %v", kids)
	}
}

// TestHostileInvalidUTF8Prompt: the issue lists invalid UTF-8 among the
// inputs a host request must be refused for; prompt blocks travel to the
// child as raw JSON, so serve itself must check them.
func TestHostileInvalidUTF8Prompt(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, prov.guard(t)), quickRaceExit)
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	body := "{\"prompt\":[{\"type\":\"text\",\"text\":\"call write_file {\\\"file_path\\\":\\\"utf8.txt\\\",\\\"content\\\":\\\"a\xffb\\\"}\"}]}"
	r := td.do(t, "POST", "/session/"+id+"/prompt", body)
	if r.status/100 == 4 {
		if _, calls := prov.counts(); calls != 0 {
			t.Errorf("a refused prompt reached the provider")
		}
		return
	}
	var acc promptAccepted
	if decodeStrict(r.body, &acc) != nil {
		t.Fatalf("prompt = %d %s", r.status, r.body)
	}
	readSSE(t, stream, untilTurnEnd(acc.PromptID))
	written, _ := os.ReadFile(filepath.Join(ws, "utf8.txt"))
	_, calls := prov.counts()
	t.Errorf("a prompt with invalid UTF-8 was accepted (%d) and ran (%d provider calls, file holds %q)", r.status, calls, written)
}
