// acp_image_test.go tests image prompt blocks over ACP: the capability
// initialize advertises, the checks of a block's type, data and size, and
// the image parts an OpenAI-compatible model service receives.
package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// testPNG is a PNG signature: a few bytes that are an image's start.
var testPNG = base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))

func imageBlock(mime, data string) map[string]any {
	return map[string]any{"type": "image", "mimeType": mime, "data": data}
}

func TestACPInitializeAdvertisesImages(t *testing.T) {
	c := startACP(t, nil, nil)
	var res struct {
		AgentCapabilities struct {
			PromptCapabilities map[string]bool `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
	}
	c.mustCall(methodInitialize, initializeParams(""), &res)
	want := map[string]bool{"image": true, "audio": false, "embeddedContext": false}
	for k, v := range want {
		if got, ok := res.AgentCapabilities.PromptCapabilities[k]; !ok || got != v {
			t.Errorf("promptCapabilities.%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}

func TestACPImageBlocks(t *testing.T) {
	c := startACP(t, nil, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := c.newSession(t.TempDir())
	atLimit := base64.StdEncoding.EncodeToString(make([]byte, maxImageBytes))
	overLimit := base64.StdEncoding.EncodeToString(make([]byte, maxImageBytes+1))
	for _, tt := range []struct {
		name    string
		blocks  []any
		wantErr string // "" = the turn ends with end_turn
	}{
		{"only an image", []any{imageBlock("image/png", testPNG)}, ""},
		{"text and images of every type", []any{map[string]any{"type": "text", "text": "what is this"},
			imageBlock("image/jpeg", testPNG), imageBlock("image/gif", testPNG), imageBlock("image/webp", testPNG)}, ""},
		{"uri ignored", []any{map[string]any{"type": "image", "mimeType": "image/png", "data": testPNG, "uri": "file:///x.png"}}, ""},
		{"exactly the bound", []any{imageBlock("image/png", atLimit)}, ""},
		{"one byte over the bound", []any{imageBlock("image/png", overLimit)},
			"session/prompt: block 0: image data is 5242881 bytes decoded, more than 5242880 (5 MiB) per image"},
		{"svg", []any{imageBlock("image/svg+xml", testPNG)},
			`session/prompt: block 0: image mimeType "image/svg+xml" is not supported (want one of image/png, image/jpeg, image/gif, image/webp)`},
		{"no mimeType", []any{map[string]any{"type": "image", "data": testPNG}},
			`session/prompt: block 0: image mimeType "" is not supported (want one of image/png, image/jpeg, image/gif, image/webp)`},
		{"url-safe base64", []any{imageBlock("image/png", "a-_b")},
			"session/prompt: block 0: image data is not standard base64: illegal base64 data at input byte 1"},
		{"unpadded", []any{imageBlock("image/png", "AAA")},
			"session/prompt: block 0: image data is not standard base64: illegal base64 data at input byte 0"},
		{"line break", []any{imageBlock("image/png", "AAAA\nAAAA")},
			"session/prompt: block 0: image data is not standard base64: line break at input byte 4"},
		{"no data", []any{map[string]any{"type": "image", "mimeType": "image/png"}},
			"session/prompt: block 0: image data must be a non-empty base64 string"},
		{"data a number", []any{map[string]any{"type": "image", "mimeType": "image/png", "data": 7}},
			"session/prompt: block 0: image data must be a non-empty base64 string"},
		{"unknown member", []any{map[string]any{"type": "image", "mimeType": "image/png", "data": testPNG, "width": 3}},
			`session/prompt: json: unknown field "width"`},
		{"audio", []any{map[string]any{"type": "audio", "mimeType": "audio/wav", "data": testPNG}},
			`session/prompt: block 0: unsupported content type "audio" (text, resource_link and image are)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := c.call(methodSessionPrompt, map[string]any{"sessionId": sid, "prompt": tt.blocks})
			switch {
			case tt.wantErr == "" && (r.Error != nil || !strings.Contains(string(r.Result), stopEndTurn)):
				t.Errorf("prompt = %s %+v, want end_turn", r.Result, r.Error)
			case tt.wantErr != "" && (r.Error == nil || r.Error.Code != rpcInvalidParams || r.Error.Message != tt.wantErr):
				t.Errorf("prompt = %s %+v, want invalid params %q", r.Result, r.Error, tt.wantErr)
			}
		})
	}
}

// An OpenAI-compatible service gets a user message with images as an array
// of parts, text first, each image a data URL; one without as a string.
func TestACPOpenAIImageParts(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"a picture"}}]}`)
	}))
	defer srv.Close()
	c := startACP(t, nil, nil, envModelBaseURL+"="+srv.URL+"/v1", envModelName+"=test-model", envModelKey+"=k")
	c.mustCall(methodInitialize, initializeParams(""), nil)
	sid := c.newSession(t.TempDir())
	var res struct{ StopReason string }
	c.mustCall(methodSessionPrompt, map[string]any{"sessionId": sid, "prompt": []any{
		imageBlock("image/png", testPNG),
		map[string]any{"type": "text", "text": "what is this"},
		imageBlock("image/webp", "AAAA"),
	}}, &res)
	c.mustCall(methodSessionPrompt, promptParams(sid, "thanks", ""), &res)
	c.mustCall(methodSessionPrompt, map[string]any{"sessionId": sid, "prompt": []any{imageBlock("image/gif", "R0lG")}}, &res)
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("model service saw %d requests, want 3", len(bodies))
	}
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(bodies[2], &req); err != nil || len(req.Messages) != 6 {
		t.Fatalf("third request %s: %v", bodies[2], err)
	}
	for i, want := range []string{
		`{"role":"user","content":[{"type":"text","text":"what is this"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + testPNG + `"}},` +
			`{"type":"image_url","image_url":{"url":"data:image/webp;base64,AAAA"}}]}`,
		`{"role":"assistant","content":"a picture"}`,
		`{"role":"user","content":"thanks"}`,
		`{"role":"assistant","content":"a picture"}`,
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lG"}}]}`,
	} {
		if got := string(req.Messages[i+1]); got != want {
			t.Errorf("message %d = %s\nwant %s", i, got, want)
		}
	}
}
