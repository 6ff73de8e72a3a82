// model_proxy_fuzz_test.go fuzzes the model proxy's decoders of another
// process's bytes: serve's reading of a child's model call, the child's
// reading of serve's reply chunks, and the redaction of a reply cut anywhere.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// A child's model call either is refused or leaves serve as a chat
// completions request with serve's model name and only the members serve
// knows.
func FuzzModelCompleteParams(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"","messages":[{"role":"user","content":"hi"}],"stream":true}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"gpt-4o","messages":[],"stream":true}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[],"stream":true,"Model":"x"}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[],"base_url":"http://evil"}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"","request":{}}`,
		`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"","model":"x"}}`,
		`null`, `[]`, `{}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, params string) {
		p, body, err := decodeModelComplete(json.RawMessage(params), "serve-model")
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
		case <-time.After(10 * time.Second):
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
