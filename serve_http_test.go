// serve_http_test.go tests the host HTTP API of "acpguard serve": routing,
// host auth, the Host check, body limits, error shapes and slash-command
// rules in process, and malformed and hostile requests to a running serve in
// required mode (a 4xx each, no child started, no tool run).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestServeHealthAndCapabilities(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}})
	r := td.do(t, "GET", "/health", "")
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
		t.Errorf("GET /health = %d %s", r.status, r.body)
	}
	r = td.do(t, "GET", "/capabilities", "")
	var caps capabilitiesBody
	if err := decodeStrict(r.body, &caps); err != nil || r.status != 200 {
		t.Fatalf("GET /capabilities = %d %s: %v", r.status, r.body, err)
	}
	if caps.V != 1 || caps.Mode != "http-bridge" || caps.WorkspaceCwd != ws {
		t.Errorf("capabilities = %+v", caps)
	}
	for _, f := range caps.Features {
		if f == featureExternalToolGuard {
			t.Errorf("off mode advertises %q", f)
		}
	}
	if len(caps.Features) != len(baseFeatures) {
		t.Errorf("features = %v, want %v", caps.Features, baseFeatures)
	}
}

func TestServeHostAuth(t *testing.T) {
	td := startTestDaemon(t, serveOptions{Token: "s3cret-host-token"})
	var unauthorized []string
	for _, tt := range []struct {
		name   string
		header []string
		ok     bool
	}{
		{"none", nil, false},
		{"wrong token", []string{"Authorization", "Bearer s3cret-host-tokeN"}, false},
		{"prefix of token", []string{"Authorization", "Bearer s3cret"}, false},
		{"token plus suffix", []string{"Authorization", "Bearer s3cret-host-token2"}, false},
		{"basic scheme", []string{"Authorization", "Basic s3cret-host-token"}, false},
		{"bare token", []string{"Authorization", "s3cret-host-token"}, false},
		{"empty bearer", []string{"Authorization", "Bearer "}, false},
		{"right", []string{"Authorization", "Bearer s3cret-host-token"}, true},
		{"scheme case", []string{"Authorization", "bearer s3cret-host-token"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/capabilities", "/session/x/events", "/nope"} {
				r := td.do(t, "GET", path, "", tt.header...)
				if tt.ok {
					if r.status == http.StatusUnauthorized {
						t.Errorf("GET %s with %v = 401", path, tt.header)
					}
					continue
				}
				wantError(t, r, http.StatusUnauthorized, codeUnauthorized)
				// A client without the token keeps no connection open.
				if !r.closed {
					t.Errorf("401 to GET %s keeps the connection open", path)
				}
				unauthorized = append(unauthorized, string(r.body))
			}
			// The same header gets the same answer on every route.
			for _, b := range unauthorized {
				if b != unauthorized[0] {
					t.Errorf("401 bodies differ: %q vs %q", b, unauthorized[0])
				}
			}
			unauthorized = unauthorized[:0]
		})
	}
}

// TestServeHealthWithoutToken: on a loopback bind GET /health is answered
// without the host token, as Qwen Code does, and nothing else is; with
// --require-auth, or on a non-loopback bind, it needs the token too.
func TestServeHealthWithoutToken(t *testing.T) {
	const token = "s3cret-host-token"
	open := startTestDaemon(t, serveOptions{Token: token})
	for _, tt := range []struct{ method, path string }{{"GET", "/health"}, {"GET", "/health?deep=1"}, {"HEAD", "/health"}} {
		r := open.do(t, tt.method, tt.path, "")
		if r.status != 200 || (tt.method == "GET" && strings.TrimSpace(string(r.body)) != `{"status":"ok"}`) {
			t.Errorf("%s %s without the token = %d %s, want 200 {\"status\":\"ok\"}", tt.method, tt.path, r.status, r.body)
		}
	}
	wantError(t, open.do(t, "POST", "/health", ""), http.StatusUnauthorized, codeUnauthorized)
	wantError(t, open.do(t, "GET", "/health/x", ""), http.StatusUnauthorized, codeUnauthorized)

	strict := startTestDaemon(t, serveOptions{Token: token, RequireAuth: true})
	wantError(t, strict.do(t, "GET", "/health", ""), http.StatusUnauthorized, codeUnauthorized)
	if r := strict.do(t, "GET", "/health", "", "Authorization", "Bearer "+token); r.status != 200 {
		t.Errorf("--require-auth: GET /health with the token = %d %s", r.status, r.body)
	}

	// A non-loopback bind: the routes as serve builds them, reached here
	// over loopback.
	d := &daemon{token: token, checkHost: false}
	srv := httptest.NewServer(d.routes())
	t.Cleanup(srv.Close)
	remote := &testDaemon{url: srv.URL}
	wantError(t, remote.do(t, "GET", "/health", ""), http.StatusUnauthorized, codeUnauthorized)
	if r := remote.do(t, "GET", "/health", "", "Authorization", "Bearer "+token); r.status != 200 {
		t.Errorf("non-loopback: GET /health with the token = %d %s", r.status, r.body)
	}
}

func TestServeHostHeader(t *testing.T) {
	td := startTestDaemon(t, serveOptions{})
	port := td.url[strings.LastIndex(td.url, ":")+1:]
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"127.0.0.1", true},
		{"localhost:" + port, true},
		{"LocalHost", true},
		{"[::1]:" + port, true},
		{"[::1]", true},
		{"evil.example:" + port, false},
		{"evil.example", false},
		{"127.0.0.2:" + port, false},
		{"localhost.evil.example", false},
		{"127.0.0.1:1", false},
		{"::1", false},
	} {
		t.Run(tt.host, func(t *testing.T) {
			r := td.do(t, "GET", "/health", "", "Host", tt.host)
			if tt.ok && r.status != 200 {
				t.Errorf("Host %q refused: %d %s", tt.host, r.status, r.body)
			}
			if !tt.ok {
				wantError(t, r, http.StatusForbidden, codeHostNotAllowed)
			}
		})
	}
}

func TestServeRequestErrors(t *testing.T) {
	td := startTestDaemon(t, serveOptions{})
	big := `{"cwd":"` + strings.Repeat("a", maxHostBody) + `"}`
	for _, tt := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/nope", "", 404, codeNotFound},
		{"PUT", "/health", "", 404, codeMethodNotAllowed},
		{"GET", "/session", "", 404, codeMethodNotAllowed},
		{"GET", "/session/x", "", 404, codeMethodNotAllowed},
		{"POST", "/session/missing/prompt", `{"prompt":[{"type":"text","text":"hi"}]}`, 404, codeSessionNotFound},
		{"GET", "/session/missing/events", "", 404, codeSessionNotFound},
		{"POST", "/session/missing/cancel", "", 404, codeSessionNotFound},
		{"POST", "/session/missing/permission/r1", `{"outcome":{"outcome":"cancelled"}}`, 404, codeSessionNotFound},
		{"DELETE", "/session/missing", "", 404, codeSessionNotFound},
		{"POST", "/session", `{"cwd":"/definitely/not/a/workspace"}`, 400, codeWorkspaceMismatch},
		{"POST", "/session", `{"cwd":"relative"}`, 400, codeWorkspaceMismatch},
		{"POST", "/session", `{"cwd":"/"}`, 400, codeWorkspaceMismatch},
		{"POST", "/session", `{"cwd":`, 400, codeBadRequest},
		{"POST", "/session", `{"cwd":"/x","extra":1}`, 400, codeBadRequest},
		{"POST", "/session", `{} {}`, 400, codeBadRequest},
		{"POST", "/session", `[]`, 400, codeBadRequest},
		{"POST", "/session", big, 413, codeTooLarge},
	} {
		t.Run(tt.method+tt.path+tt.body[:min(len(tt.body), 30)], func(t *testing.T) {
			wantError(t, td.do(t, tt.method, tt.path, tt.body), tt.status, tt.code)
		})
	}
}

func TestServeRefusesNonLoopbackWithoutToken(t *testing.T) {
	sys := &system{env: newProcEnv(nil), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	err := serveDaemon(context.Background(), sys, serveOptions{Hostname: bindAddr{"0.0.0.0", false}, Workspaces: []string{t.TempDir()}, MaxPendingPrompts: 5, Guard: guardConfig{Mode: guardModeOff}}, func(string) {
		t.Error("listener opened")
	})
	if exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), `"0.0.0.0"`) {
		t.Errorf("serveDaemon = %v (exit %d), want a usage error naming the host", err, exitCode(err))
	}
}

func TestSlashCommand(t *testing.T) {
	for _, tt := range []struct {
		text, name string
		slash      bool
	}{
		{"hello", "", false},
		{"call write_file {}", "", false},
		{"a /b", "", false},
		// A slash command: "/", a command word, then white space or the end.
		{"/compress", "compress", true},
		{"  /memory add x", "memory", true},
		{"\n/fork\nmore", "fork", true},
		{"/help", "help", true},
		{"/help me", "help", true},
		{"/help\n", "help", true},
		{"/help\tnow", "help", true},
		{"/fork", "fork", true},
		{"/a-b_c", "a-b_c", true},
		{"/A9", "A9", true},
		{"/tmp", "tmp", true},
		{"/help\u00a0me", "help", true}, // any Unicode white space ends the word
		// Paths, URLs and other text that starts with "/": for the model.
		{"/", "", false},
		{"/tmp/notes.txt contains the plan; summarise it", "", false},
		{"/tmp/x", "", false},
		{"//host", "", false},
		{"//host/path", "", false},
		{"/ tmp", "", false},
		{"/1abc", "", false},
		{"/-x", "", false},
		{"/_x", "", false},
		{"/help.", "", false},
		{"/help:me", "", false},
		{"/help/", "", false},
		{"/héllo", "", false},
		{"/*comment*/", "", false},
	} {
		name, slash := slashCommand(tt.text)
		if name != tt.name || slash != tt.slash {
			t.Errorf("slashCommand(%q) = %q, %v; want %q, %v", tt.text, name, slash, tt.name, tt.slash)
		}
	}
}

func TestEventLogReplayAndRing(t *testing.T) {
	l := newStreamLog()
	for i := range defaultEventRingSize + 10 {
		l.publish("t", "", map[string]int{"n": i})
	}
	sub := l.subscribe(0, nil)
	defer l.unsubscribe(sub)
	replay, _, _ := takeAll(l, sub)
	if len(replay) != defaultEventRingSize || replay[0].id != 11 || replay[len(replay)-1].id != defaultEventRingSize+10 {
		t.Fatalf("replay from 0: %d events, ids %d..%d", len(replay), replay[0].id, replay[len(replay)-1].id)
	}
	if replay2 := replayOf(l, defaultEventRingSize+5); len(replay2) != 5 || replay2[0].id != defaultEventRingSize+6 {
		t.Fatalf("replay after %d: %d events", defaultEventRingSize+5, len(replay2))
	}
	l.publish("next", "p1", map[string]string{"k": "v"})
	evs, _, _ := takeAll(l, sub)
	want := fmt.Sprintf(`{"id":%d,"v":1,"type":"next","promptId":"p1","data":{"k":"v"},"_meta":{"serverTimestamp":`, defaultEventRingSize+11)
	if len(evs) != 1 || !strings.HasPrefix(string(evs[0].data), want) {
		t.Errorf("live events = %v, want one with data %s", evs, want)
	}
}

func TestEventLogDropsSlowSubscriber(t *testing.T) {
	l := newStreamLog()
	aborted := 0
	slow := l.subscribe(0, func() { aborted++ })
	// publish must never block on a subscriber that reads nothing.
	for range subscriberQueue * 4 {
		l.publish("t", "", nil)
	}
	// Dropped: its queue is gone, its write was cut short, and its stream
	// ends with the notice.
	evs, ended, reason := takeAll(l, slow)
	if len(evs) != 0 || !ended || !strings.Contains(reason, "fell behind") || aborted != 1 {
		t.Errorf("slow subscriber: %d events, ended %v, notice %q, aborted %d times; want 0, true, fell behind, 1", len(evs), ended, reason, aborted)
	}
	// The dropped host reconnects with Last-Event-ID and loses nothing.
	if replay := replayOf(l, 0); len(replay) != subscriberQueue*4 || replay[0].id != 1 {
		t.Errorf("replay after 0: %d events", len(replay))
	}
}

func TestEventStreamHeartbeat(t *testing.T) {
	l := newStreamLog()
	l.publish("t", "", nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamEvents(w, r, l, 0, time.Millisecond, time.Minute)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 8 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended after %q: %v", lines, err)
		}
		lines = append(lines, line)
	}
	resp.Body.Close()
	// The server's clock is the one part of the frame a test cannot know.
	lines[4] = regexp.MustCompile(`"serverTimestamp":\d+`).ReplaceAllString(lines[4], `"serverTimestamp":0`)
	want := []string{"retry: 3000\n", "\n", "id: 1\n", "event: t\n", `data: {"id":1,"v":1,"type":"t","data":null,"_meta":{"serverTimestamp":0}}` + "\n", "\n", ": heartbeat\n", "\n"}
	if strings.Join(lines, "") != strings.Join(want, "") {
		t.Errorf("stream = %q, want %q", lines, want)
	}
	l.close()
}

func TestStreamLogBoundedInBytes(t *testing.T) {
	l := newBoundedStreamLog(4096, 0, nil, func(string, ...any) {})
	big := strings.Repeat("x", 1<<20)
	const n = 80 // 80 MiB published, more than eventRingBytes
	for range n {
		l.publish(eventSessionUpdate, "", big)
	}
	replay := replayOf(l, 0)
	kept := 0
	for _, ev := range replay {
		kept += len(ev.data)
	}
	if kept > eventRingBytes || kept < eventRingBytes-2<<20 {
		t.Errorf("ring keeps %d bytes, want at most %d and close to it", kept, eventRingBytes)
	}
	if last := replay[len(replay)-1].id; last != n {
		t.Errorf("newest kept event = %d, want %d", last, n)
	}
	for i := 1; i < len(replay); i++ {
		if replay[i].id != replay[i-1].id+1 {
			t.Fatalf("replay has a gap at %d", replay[i].id)
		}
	}
	// One event larger than the whole bound is still kept: the newest stays.
	l.publish(eventSessionUpdate, "", strings.Repeat("y", eventRingBytes+1))
	if replay := replayOf(l, n); len(replay) != 1 || replay[0].id != n+1 {
		t.Errorf("after an oversized event the ring replays %d events", len(replay))
	}
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
		{"wrong method on session", "PUT", "/session", `{}`, nil, 404, codeMethodNotAllowed},
		{"wrong method on health", "DELETE", "/health", "", nil, 404, codeMethodNotAllowed},
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
		{"image block of an unsupported type", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"image","data":"AA==","mimeType":"image/svg+xml"},`, `]}`), nil, 400, codeBadRequest},
		{"embedded resource", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"resource","resource":{"uri":"file:///x","text":"y"}},`, `]}`), nil, 400, codeBadRequest},
		{"resource_link without uri", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"resource_link","name":"x"},`, `]}`), nil, 400, codeBadRequest},
		{"unknown block field", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[{"type":"text","text":"a","colour":"red"},`, `]}`), nil, 400, codeBadRequest},
		{"unknown top-level field", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"promptId":"mine","prompt":[`, `]}`), nil, 400, codeBadRequest},
		{"huge prompt array", "POST", "/session/" + id + "/prompt", `{"prompt":[` + huge + `{"type":"text","text":"x"}]}`, nil, 413, codeTooLarge},
		{"oversized cancel body", "POST", "/session/" + id + "/cancel", strings.Repeat(" ", maxHostBody+1), nil, 413, codeTooLarge},
		{"trailing garbage", "POST", "/session/" + id + "/prompt", pwnedPrompt(`{"prompt":[`, `]}x`), nil, 400, codeBadRequest},
		{"slash command", "POST", "/session/" + id + "/prompt", `{"prompt":[{"type":"text","text":"/fork"}]}`, nil, 400, codeSlashRejected},
		{"wrong method on prompt", "GET", "/session/" + id + "/prompt", "", nil, 404, codeMethodNotAllowed},
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
	if len(all) != len(evs)+1 { // runTurn leaves out the prompt's echo
		t.Errorf("the event stream holds %d events, %d of them from the valid turn", len(all), len(evs)+1)
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

func TestServeSlashCommands(t *testing.T) {
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), AllowSlashCommands: []string{"help"}}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	for _, text := range []string{"/fork", "  /memory add x", "/tmp", "/tools\n"} {
		body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
		wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", string(body)), 400, codeSlashRejected)
	}
	td.prompt(t, id, "/help")
	// Text that only starts with "/" is a prompt like any other.
	for _, text := range []string{"/tmp/notes.txt contains the plan; summarise it", "//127.0.0.1/x", "/ tmp", "/"} {
		td.prompt(t, id, text)
	}

	off := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	off.prompt(t, off.newSession(t, ""), "/fork")
}

// TestServeDisabledSlashCommands: a command disabled on serve's command line
// is a 400 in every mode, before anything reaches a child.
func TestServeDisabledSlashCommands(t *testing.T) {
	td := startTestDaemon(t, serveOptions{DisabledSlashCommands: []string{"tools"}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	wantError(t, td.do(t, "POST", "/session/"+id+"/prompt", `{"prompt":[{"type":"text","text":"/tools"}]}`), http.StatusBadRequest, codeSlashRejected)
	if pid := td.prompt(t, id, "/help"); pid == "" {
		t.Error("an open slash command was refused in off mode")
	}
}

// hostileRequest is one host request that must be refused.
type hostileRequest struct {
	name, method, path, body string
	header                   []string
	status                   int
	code                     string
}

// A refused host request says which part of its Authorization header is
// wrong, never echoing it, and serve counts it by that reason.
func TestServeAuthFailureHints(t *testing.T) {
	const token = "s3cret-host-token"
	td := startTestDaemon(t, serveOptions{Token: token})
	for _, tt := range []struct {
		header []string
		reason string
	}{
		{nil, authNoHeader},
		{[]string{"Authorization", "Basic " + token}, authScheme},
		{[]string{"Authorization", token}, authScheme},
		{[]string{"Authorization", "Bearer not-" + token}, authToken},
		{[]string{"Authorization", "bearer " + token + "x"}, authToken},
	} {
		r := td.do(t, "GET", "/capabilities", "", tt.header...)
		wantError(t, r, http.StatusUnauthorized, codeUnauthorized)
		var e errorBody
		if err := json.Unmarshal(r.body, &e); err != nil || e.Error != "Unauthorized" || e.Hint != hostAuthHints[tt.reason] {
			t.Errorf("%v: body %s, want error Unauthorized and hint %q", tt.header, r.body, hostAuthHints[tt.reason])
		}
		if strings.Contains(string(r.body), token) {
			t.Errorf("%v: the body %s echoes the token", tt.header, r.body)
		}
	}
	got := td.scrape(t, "Authorization", "Bearer "+token)
	for reason, want := range map[string]float64{authNoHeader: 1, authScheme: 2, authToken: 2} {
		if series := `acpguard_serve_auth_failures_total{reason="` + reason + `"}`; got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}
