// bridge_fuzz_test.go fuzzes every decoder of another process's bytes in
// serve: host request bodies, a child's prepare requests and a child's
// session/update notifications.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fuzzDaemon is a daemon with one session "s1" on a channel that has no
// process, running prompt "p1"; it is closing, so nothing can spawn.
func fuzzDaemon(log io.Writer) (*daemon, *acpChannel, *hostSession) {
	d := &daemon{
		sys:        &system{env: newProcEnv(nil), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard},
		guarded:    true,
		decisions:  &decisionLog{w: log},
		workspaces: []string{"/nonexistent-acpguard-fuzz-workspace"},
		maxPending: 1,
		checkHost:  true,
		port:       "4170",
		runCtx:     context.Background(),
		closing:    true,
		slots:      map[string]*workspaceSlot{},
		chans:      map[*acpChannel]struct{}{},
		sessions:   map[string]*hostSession{},
	}
	ch := &acpChannel{d: d, done: make(chan struct{})}
	s := &hostSession{d: d, id: "s1", ch: ch, events: newStreamLog(), perms: map[string]*hostPendingPermission{}}
	ctx, cancel := context.WithCancel(context.Background())
	s.active = &promptJob{id: "p1", ctx: ctx, cancel: cancel}
	s.perms["r1"] = &hostPendingPermission{options: []string{"allow"}, resolved: make(chan hostVoteOutcome, 1)}
	d.sessions[s.id] = s
	return d, ch, s
}

func FuzzServeHostBody(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":[{"type":"text","text":"hi"}]}`,
		`{"prompt":[{"type":"text","text":"/fork"}],"_meta":{"qwen-code/invocation":{}}}`,
		`{"cwd":"/nonexistent-acpguard-fuzz-workspace"}`,
		`{"outcome":{"outcome":"selected","optionId":"allow"}}`,
		`{"outcome":{"outcome":"cancelled"}}`,
		``, `null`, `[]`, `{"prompt":[1]}`, `{"a":1}{"b":2}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		d, _, _ := fuzzDaemon(io.Discard)
		h := d.routes()
		for _, route := range []string{"/session", "/session/s1/prompt", "/session/s1/permission/r1"} {
			req := httptest.NewRequest("POST", route, strings.NewReader(body))
			req.Host = "127.0.0.1:4170"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK && route == "/session/s1/permission/r1" {
				continue // a valid vote
			}
			var e apiErrorBody
			if err := decodeStrict(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Error == "" {
				t.Fatalf("POST %s %q = %d %q: not an error body", route, body, rec.Code, rec.Body.Bytes())
			}
			switch rec.Code {
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable, http.StatusNotFound:
			default:
				t.Fatalf("POST %s %q = %d %s", route, body, rec.Code, rec.Body.Bytes())
			}
		}
	})
}

func FuzzServePrepareRequest(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"s1","promptId":"p1","toolCallId":"c","toolName":"write_file","arguments":{"file_path":"/x"}}`,
		`{"sessionId":"s1","promptId":"p1","toolCallId":"c","toolName":"write_file","arguments":{},"_meta":{}}`,
		`{"sessionId":"s2","promptId":"p1","toolCallId":"c","toolName":"x","arguments":{}}`,
		`{"sessionId":"s1","promptId":"p1","toolCallId":"c","toolName":"x","arguments":null}`,
		`{}`, `null`, `[]`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		var log bytes.Buffer
		d, ch, _ := fuzzDaemon(&log)
		// No provider is configured: whatever a child sends, nothing is allowed.
		dec := d.prepare(context.Background(), ch, params)
		if dec.Allowed || dec.Reason != guardFailedReason {
			t.Fatalf("prepare(%q) = %+v", params, dec)
		}
		lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
		var rec decisionRecord
		if len(lines) != 1 || decodeStrict([]byte(lines[0]), &rec) != nil || rec.Outcome == outcomeAllowed {
			t.Fatalf("decision log for %q = %q", params, log.String())
		}
	})
}

func FuzzServeSessionUpdate(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\nb"}}}`,
		`{"sessionId":"s1","update":{"x":"\u2028<\u0000>"},"_meta":{}}`,
		`{"sessionId":"s1","update":[1,2,  3]}`,
		`{"sessionId":"s2","update":{}}`,
		`{}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		_, ch, s := fuzzDaemon(io.Discard)
		ch.onNotify("session/update", params)
		for _, ev := range replayOf(s.events, 0) {
			// One event is one data line: no raw line break may split it.
			if bytes.ContainsAny(ev.data, "\r\n") || !json.Valid(ev.data) {
				t.Fatalf("update %q became streamEvent data %q", params, ev.data)
			}
			var e struct {
				Data sessionUpdateEvent `json:"data"`
			}
			if err := json.Unmarshal(ev.data, &e); err != nil || e.Data.SessionID != "s1" {
				t.Fatalf("event %q: %v", ev.data, err)
			}
		}
	})
}
