// serve_fuzz_test.go fuzzes every decoder of another process's bytes in
// serve: host request bodies, a child's prepare requests, session/update
// notifications and model calls, the child's reading of serve's model reply
// chunks, the redaction of a reply cut anywhere, and the /proc text that
// links serve to its descendants.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fuzzDaemon is a daemon with one session "s1" on a channel that has no
// process, running prompt "p1"; it is closing, so nothing can spawn.
func fuzzDaemon(log io.Writer) (*daemon, *acpChannel, *hostSession) {
	d := &daemon{
		sys:         &system{env: newProcEnv(nil), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard},
		guarded:     true,
		decisions:   newDecisionLog(log),
		workspaces:  []string{"/nonexistent-acpguard-fuzz-workspace"},
		maxPending:  1,
		checkHost:   true,
		port:        "4170",
		runCtx:      context.Background(),
		closing:     true,
		poolChanged: make(chan struct{}),
		chans:       map[*acpChannel]struct{}{},
		sessions:    map[string]*hostSession{},
	}
	ch := &acpChannel{d: d, done: make(chan struct{})}
	s := &hostSession{d: d, id: "s1", ch: ch, events: newStreamLog(), perms: map[string]*hostPendingPermission{}}
	ctx, cancel := context.WithCancel(context.Background())
	s.active = &promptJob{id: "p1", ctx: ctx, stop: cancel}
	s.perms["r1"] = &hostPendingPermission{options: []hostPermissionOption{{OptionID: "allow", Kind: kindAllowOnce}}, resolved: make(chan permissionVote, 1)}
	d.sessions[s.id] = s
	return d, ch, s
}

func FuzzServeHostBody(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":[{"type":"text","text":"hi"}]}`,
		`{"prompt":[{"type":"text","text":"/fork"}],"_meta":{"qwen-code/invocation":{}}}`,
		`{"prompt":[{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="}]}`,
		`{"prompt":[{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo"},{"type":"image","mimeType":"image/tiff","data":"AA=="}]}`,
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
			var e errorBody
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
		if !json.Valid(params) {
			return // rpcConn answers a line that is not valid JSON, never passes it on
		}
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

// A child's model call either is refused or leaves serve as a chat
// completions request with serve's model name and only the members serve
// knows.
func FuzzModelCompleteParams(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"","messages":[{"role":"user","content":"hi"}],"stream":true}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"gpt-4o","messages":[],"stream":true}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}],"stream":true}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x","detail":"high"}}]}]}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[],"stream":true,"Model":"x"}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[],"base_url":"http://evil"}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"","request":{}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"","model":"x"}}`,
		`{"sessionId":"s1","promptId":"p1","StreamId":"x","request":{"messages":[]}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[]},"_meta":{}} x`,
		`{"sessionId":"s\u0031","promptId":null,"streamId":"x","request":{"messages":[]}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[],"model":"","stream":true}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"stream":true , "model":null}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{ "model" : "" , "mess\u0061ges" : [ ] } }`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{ }}`,
		`null`, `[]`, `{}`,
	} {
		f.Add(seed)
	}
	// What a session keeps of its last accepted request (modelChecked)
	// changes no verdict, no error and no byte sent.
	const kept = `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`
	f.Add(`{"sessionId":"s1","promptId":"p1","streamId":"x","request":` + kept + `}`)
	f.Fuzz(func(t *testing.T, params string) {
		p, body, err := decodeModelComplete(json.RawMessage(params), "serve-model")
		if p, derr := decodeModelCall(json.RawMessage(params)); derr == nil {
			var c modelChecked
			if _, err := checkModelRequest(json.RawMessage(kept), "serve-model", &c); err != nil {
				t.Fatal(err)
			}
			cbody, cerr := checkModelRequest(p.Request, "serve-model", &c)
			if (cerr == nil) != (err == nil) || cerr != nil && cerr.Error() != err.Error() || string(cbody) != string(body) {
				t.Fatalf("with the kept request: %v %s, without: %v %s", cerr, cbody, err, body)
			}
		}
		// serve's one walk of a call of a session it knows reads what the
		// two steps read, and refuses what they refuse.
		var one modelChecked
		fp, fbody, ferr := readModelCall(json.RawMessage(params), func(string) (string, *modelChecked, bool) { return "serve-model", &one, true })
		switch {
		case ferr != nil && (err == nil || !strings.HasPrefix(err.Error(), ferr.Error())):
			t.Fatalf("one walk refused the call (%v), the two steps said %v", ferr, err)
		case fbody != nil && err != nil:
			t.Fatalf("one walk accepted a call the two steps refuse (%v)", err)
		case fbody != nil && (string(fbody) != string(body) || fp.SessionID != p.SessionID || fp.PromptID != p.PromptID || fp.StreamID != p.StreamID ||
			string(fp.Request) != string(p.Request) || string(fp.Meta) != string(p.Meta)):
			t.Fatalf("one walk read %+v %s, the two steps %+v %s", fp, fbody, p, body)
		}
		if err != nil {
			return
		}
		if p.StreamID == "" || len(p.StreamID) > maxModelStreamID {
			t.Fatalf("accepted streamId %q", p.StreamID)
		}
		var req openAIRequest
		if err := decodeStrict(body, &req); err != nil {
			t.Fatalf("serve would send a body it cannot read back: %v: %s", err, body)
		}
		if req.Model != "serve-model" {
			t.Fatalf("serve would send model %q", req.Model)
		}
		// serve's check accepts nothing the strict decode of a request
		// refuses, and what it forwards means what the child sent.
		var sent openAIRequest
		if err := decodeStrict(p.Request, &sent); err != nil {
			t.Fatalf("serve forwards a request the strict decode refuses: %v: %s", err, p.Request)
		}
		sent.Model = req.Model
		if !reflect.DeepEqual(sent, req) {
			t.Fatalf("serve would send %+v for the child's %+v", req, sent)
		}

		// The same params on a daemon without a model service: refused,
		// whatever they say, and nothing panics.
		d, ch, _ := fuzzDaemon(io.Discard)
		if res, err := d.modelComplete(context.Background(), ch, json.RawMessage(params)); err == nil {
			t.Fatalf("a daemon without a model answered %v", res)
		}
	})
}

// Whatever serve's chunks say, delivering them never blocks the child's
// reading of its channel and never hands the reply reader more than the
// bytes of well-formed chunks after the content type.
func FuzzModelChunk(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"streamId":"s","contentType":"text/event-stream"}`, `{"streamId":"s","data":"ZGF0YTogW0RPTkVdCgo="}`},
		{`{"streamId":"s","data":"eA=="}`, `{"streamId":"s","contentType":"application/json"}`},
		{`{"streamId":"s","contentType":"a"}`, `{"streamId":"s","contentType":"b"}`},
		{`{"streamId":"other","data":"eA=="}`, `{"streamId":"s","data":"not base64"}`},
		{`null`, `{"streamId":"s","data":"eA==","extra":1}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, first, second string) {
		m := newParentModel(nil)
		pr, pw := io.Pipe()
		st := &modelStream{mediaType: make(chan string, 1), pr: pr, pw: pw}
		m.streams["s"] = st
		var got bytes.Buffer
		read := make(chan struct{})
		go func() {
			defer close(read)
			io.Copy(&got, pr)
		}()
		delivered := make(chan struct{})
		go func() {
			defer close(delivered)
			m.deliver(json.RawMessage(first))
			m.deliver(json.RawMessage(second))
		}()
		select {
		case <-delivered:
		case <-time.After(testTimeout(10 * time.Second)):
			t.Fatal("deliver blocked")
		}
		pw.Close()
		<-read
		var want bytes.Buffer
		typed := false
	chunks:
		for _, raw := range []string{first, second} {
			var c modelChunk
			err := decodeStrict([]byte(raw), &c)
			// The child's walk accepts nothing the strict decode refuses,
			// and reads what it reads.
			if fast, ferr := decodeModelChunk([]byte(raw)); ferr == nil && (err != nil || !reflect.DeepEqual(fast, c)) {
				t.Fatalf("chunk %q read as %+v, the strict decode: %+v %v", raw, fast, c, err)
			}
			if err != nil {
				c = modelChunk{}
				if json.Unmarshal([]byte(raw), &c) != nil {
					continue
				}
			}
			switch {
			case c.StreamID != "s":
				continue
			case err != nil, c.ContentType != "" && typed, c.ContentType == "" && !typed:
				break chunks // the reply ends with an error
			}
			typed = true
			want.Write(c.Data)
		}
		if !bytes.HasPrefix(want.Bytes(), got.Bytes()) {
			t.Fatalf("reader got %q, want at most %q", got.Bytes(), want.Bytes())
		}
	})
}

// Redacting a stream cut anywhere is redacting it whole.
func FuzzRedactor(f *testing.F) {
	f.Add("sk-123", "a sk-123 b sk-12sk-123", uint8(3))
	f.Add("aa", "aaaaa", uint8(1))
	f.Add("", "x", uint8(0))
	f.Fuzz(func(t *testing.T, secret, data string, cut uint8) {
		r := redactor{secret: []byte(secret)}
		var out []byte
		step := int(cut)%7 + 1
		for i := 0; i < len(data); i += step {
			out = append(out, r.push([]byte(data[i:min(i+step, len(data))]))...)
		}
		out = append(out, r.flush()...)
		want := data
		if secret != "" {
			want = string(bytes.ReplaceAll([]byte(data), []byte(secret), []byte(openAIRedactedKey)))
		}
		if string(out) != want {
			t.Fatalf("redact %q in %q by %d = %q, want %q", secret, data, step, out, want)
		}
	})
}

// Whether a model's event stream ends with data: [DONE] does not depend on
// where its reads were cut, and is what reading the stream whole says: its
// last event, starting a line, is that data line.
func FuzzSSEDone(f *testing.F) {
	f.Add("data: {}\n\ndata: [DONE]\n\n", uint8(5), uint8(20))
	f.Add("data:[DONE]\r\n\r\n", uint8(3), uint8(9))
	f.Add("xdata: [DONE]\n\n", uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, stream string, a, b uint8) {
		// Up to three reads, cut where a and b say.
		i := min(int(a), len(stream))
		j := min(i+int(b), len(stream))
		d := sseDone{on: true}
		var got bool
		for _, read := range []string{stream[:i], stream[i:j], stream[j:]} {
			if read != "" {
				got = d.push([]byte(read))
			}
		}
		want := false
		for _, ev := range sseDoneEvents {
			if before, ok := strings.CutSuffix(stream, string(ev)); ok && (before == "" || strings.HasSuffix(before, "\n") || strings.HasSuffix(before, "\r")) {
				want = true
			}
		}
		if stream != "" && got != want {
			t.Fatalf("%q cut at %d and %d: done %v, want %v", stream, i, j, got, want)
		}
	})
}
