// serve_image_test.go tests image prompt blocks on the host API: serve
// accepts a prompt with images and runs its turn, refuses a bad image with
// a 400 that names it, and relays the images to its model service.
package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// promptBlocksBody is a prompt body of the given blocks.
func promptBlocksBody(t testing.TB, blocks ...any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"prompt": blocks})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runBlocks posts a prompt of blocks, wants its 202 and returns the turn's
// last event.
func (td *testDaemon) runBlocks(t testing.TB, id string, blocks ...any) sseEvent {
	t.Helper()
	stream := td.openEvents(t, id, "")
	r := td.do(t, "POST", "/session/"+id+"/prompt", promptBlocksBody(t, blocks...))
	var res promptAccepted
	if r.status != http.StatusAccepted || decodeStrict(r.body, &res) != nil || res.PromptID == "" {
		t.Fatalf("POST prompt = %d %s, want 202", r.status, r.body)
	}
	evs := readSSE(t, stream, untilTurnEnd(res.PromptID))
	return evs[len(evs)-1]
}

func TestServeImagePrompts(t *testing.T) {
	td := startTestDaemon(t, serveOptions{})
	id := td.newSession(t, "")
	for _, blocks := range [][]any{
		{imageBlock("image/png", testPNG)},
		{map[string]any{"type": "text", "text": "what is this"}, imageBlock("image/jpeg", testPNG)},
		{map[string]any{"type": "text", "text": " "}, map[string]any{"type": "image", "mimeType": "image/webp", "data": testPNG, "uri": "https://example.com/x.webp"}},
	} {
		if last := td.runBlocks(t, id, blocks...); last.typ != eventTurnComplete {
			t.Errorf("prompt %v ended with %s %s", blocks, last.typ, last.data)
		}
	}

	const allowed = "(want one of image/png, image/jpeg, image/gif, image/webp)"
	for _, tt := range []struct {
		name    string
		body    string
		status  int
		wantErr string
	}{
		{"bmp", promptBlocksBody(t, imageBlock("image/bmp", testPNG)), 400,
			`prompt[0]: image mimeType "image/bmp" is not supported ` + allowed},
		{"second block svg", promptBlocksBody(t, map[string]any{"type": "text", "text": "hi"}, imageBlock("image/svg+xml", testPNG)), 400,
			`prompt[1]: image mimeType "image/svg+xml" is not supported ` + allowed},
		{"bad base64", promptBlocksBody(t, imageBlock("image/png", "not base64")), 400,
			"prompt[0]: image data is not standard base64: illegal base64 data at input byte 3"},
		{"empty data", promptBlocksBody(t, imageBlock("image/png", "")), 400,
			"prompt[0]: image data must be a non-empty base64 string"},
		{"unknown member", promptBlocksBody(t, map[string]any{"type": "image", "mimeType": "image/png", "data": testPNG, "alt": "x"}), 400,
			`prompt[0] is not a content block: json: unknown field "alt"`},
		// The host body bound is met long before the per-image bound.
		{"oversized", promptBlocksBody(t, imageBlock("image/png", strings.Repeat("AAAA", maxHostBody/4))), 413,
			"Request body too large (max 1 MB)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := td.do(t, "POST", "/session/"+id+"/prompt", tt.body)
			var e errorBody
			if r.status != tt.status || json.Unmarshal(r.body, &e) != nil || e.Error != tt.wantErr {
				t.Errorf("POST prompt = %d %s, want %d %q", r.status, r.body, tt.status, tt.wantErr)
			}
		})
	}
}

// Through serve's model relay, the model service receives the prompt's
// images as image_url parts of the user message.
func TestServeE2EImageReachesModelService(t *testing.T) {
	fm := newFakeModelServer(t, func(int) []string {
		return []string{`{"choices":[{"index":0,"delta":{"content":"a picture"},"finish_reason":"stop"}]}`, "[DONE]"}
	})
	sp := startServe(t, []string{"--workspace", t.TempDir()},
		envModelBaseURL+"="+fm.srv.URL+"/v1", envModelName+"=serve-model", envModelKey+"=k")
	id := sp.newSession(t, "")
	last := sp.runBlocks(t, id, map[string]any{"type": "text", "text": "what is this"}, imageBlock("image/png", testPNG))
	if last.typ != eventTurnComplete {
		t.Fatalf("turn ended with %s %s\n%s", last.typ, last.data, sp.stderr.String())
	}
	calls := fm.seen()
	if len(calls) != 1 {
		t.Fatalf("model service saw %d calls, want 1", len(calls))
	}
	want := `[{"role":"user","content":[{"type":"text","text":"what is this"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + testPNG + `"}}]}]`
	var msgs []json.RawMessage
	if err := json.Unmarshal(calls[0].body["messages"], &msgs); err != nil || len(msgs) != 2 || !strings.HasPrefix(string(msgs[0]), `{"role":"system"`) {
		t.Fatalf("messages = %s, want the system message then the user's", calls[0].body["messages"])
	}
	if got := "[" + string(msgs[1]) + "]"; got != want {
		t.Errorf("messages = %s\nwant %s", got, want)
	}
}

// A child's model call with image parts reaches the model service as sent;
// parts with members serve does not know are refused.
func TestModelCompleteImageParts(t *testing.T) {
	const parts = `[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]`
	params := `{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":` + parts + `}],"stream":true}}`
	_, body, err := decodeModelComplete(json.RawMessage(params), "m")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","messages":[{"role":"user","content":` + parts + `}],"stream":true}`; string(body) != want {
		t.Errorf("body = %s\nwant %s", body, want)
	}
	for _, bad := range []string{
		`[{"type":"image_url","image_url":{"url":"x","detail":"high"}}]`,
		`[{"type":"text","text":"a","extra":1}]`,
		`[{"type":"text","text":"a","text":"b"}]`,
	} {
		params := `{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":` + bad + `}]}}`
		if _, body, err := decodeModelComplete(json.RawMessage(params), "m"); err == nil {
			t.Errorf("content %s accepted as %s", bad, body)
		}
	}
}
