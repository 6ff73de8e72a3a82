// model_openai_test.go tests the OpenAI-compatible client against loopback fake
// chat completions servers: what the server sees, and what a reply becomes.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testAPIKey must never appear in an error text.
const testAPIKey = "sk-test-7f3a9c0d1e2b"

// newFakeOpenAI starts a loopback server answering with handle and returns a
// client whose base URL ends in /v1, like OPENAI_BASE_URL usually does.
func newFakeOpenAI(t *testing.T, handle http.HandlerFunc) *openAIModel {
	t.Helper()
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	m, err := newOpenAIModel(openAIConfig{BaseURL: srv.URL + "/v1", APIKey: testAPIKey, Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sseReply answers with body as an event stream.
func sseReply(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}
}

func textChunk(s string) string {
	q, _ := json.Marshal(s)
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"delta":{"content":` + string(q) + `},"finish_reason":null}]}`
}

func finishChunk(reason string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

// toolChunk is one streamed tool-call fragment; id and name are left out when empty.
func toolChunk(index int, id, name, args string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}, "finish_reason": nil}},
	})
	return string(b)
}

// events frames each data payload as one SSE event.
func events(payloads ...string) string {
	var b strings.Builder
	for _, p := range payloads {
		fmt.Fprintf(&b, "data: %s\n\n", p)
	}
	return b.String()
}

var userHello = []message{{Role: roleUser, Text: "hello"}}

// wantCall is a call as a test expects it; an empty ID means "any new id".
type wantCall struct{ ID, Name, Args string }

func checkCalls(t *testing.T, got []toolCall, want []wantCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d calls %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if w.ID != "" && g.ID != w.ID {
			t.Errorf("call %d: id %q, want %q", i, g.ID, w.ID)
		}
		if w.ID == "" && !assignedCallID.MatchString(g.ID) {
			t.Errorf("call %d: id %q, want one assigned by the runtime", i, g.ID)
		}
		if g.Name != w.Name || string(g.Args) != w.Args {
			t.Errorf("call %d: %s %s, want %s %s", i, g.Name, g.Args, w.Name, w.Args)
		}
	}
}

// streamDeadlockBreaker is far beyond any loopback delay; it is not a speed bound.
var streamDeadlockBreaker = testTimeout(30 * time.Second)

var assignedCallID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

func TestOpenAIStreamsTextAsItArrives(t *testing.T) {
	parts := []string{"Hel", "lo, ", "wörld"}
	passedOn := make(chan string, len(parts))
	var stalled atomic.Bool
	m := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		io.WriteString(w, ": keep-alive\n\n")
		for _, p := range parts {
			io.WriteString(w, events(textChunk(p)))
			w.(http.Flusher).Flush()
			// The next chunk goes out only once the client has passed this
			// one on. A client that waited for the whole reply would wait
			// forever; the timer only breaks that deadlock so the test fails
			// instead of hanging.
			select {
			case <-passedOn:
			case <-time.After(streamDeadlockBreaker):
				stalled.Store(true)
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, events(finishChunk("stop"), "[DONE]"))
	})
	var got []string
	turn, err := m.next(context.Background(), userHello, nil, func(s string) {
		got = append(got, s)
		passedOn <- s
	})
	if err != nil {
		t.Fatal(err)
	}
	if stalled.Load() {
		t.Error("a text chunk was not passed on before the server sent the next one")
	}
	if !reflect.DeepEqual(got, parts) {
		t.Errorf("text chunks %q, want %q", got, parts)
	}
	if turn.Text != "Hello, wörld" || len(turn.Calls) != 0 {
		t.Errorf("turn %+v, want the joined text and no calls", turn)
	}
}

func TestOpenAIStreamTurns(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantText string
		want     []wantCall
	}{
		{
			name: "arguments split across chunks",
			body: events(
				textChunk("Reading."),
				toolChunk(0, "call_a", "read_file", ""),
				toolChunk(0, "", "", `{"path":`),
				toolChunk(0, "", "", `"a.txt"}`),
				finishChunk("tool_calls"), "[DONE]"),
			wantText: "Reading.",
			want:     []wantCall{{"call_a", "read_file", `{"path":"a.txt"}`}},
		},
		{
			name: "two parallel calls interleaved",
			body: events(
				toolChunk(0, "call_a", "read_file", ""),
				toolChunk(1, "call_b", "glob", ""),
				toolChunk(0, "", "", `{"path":"a"`),
				toolChunk(1, "", "", `{"pattern":"*.go"}`),
				toolChunk(0, "", "", `}`),
				finishChunk("tool_calls"), "[DONE]"),
			want: []wantCall{{"call_a", "read_file", `{"path":"a"}`}, {"call_b", "glob", `{"pattern":"*.go"}`}},
		},
		{
			name: "calls without index each arrive whole",
			body: events(
				`{"choices":[{"index":0,"delta":{"tool_calls":[`+
					`{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},`+
					`{"id":"call_b","type":"function","function":{"name":"glob","arguments":"{}"}}]}}]}`,
				finishChunk("tool_calls"), "[DONE]"),
			want: []wantCall{{"call_a", "read_file", `{"path":"a"}`}, {"call_b", "glob", `{}`}},
		},
		{
			name: "a new id at a reused index starts a new call",
			body: events(
				toolChunk(0, "call_a", "read_file", `{"path":"a"}`),
				toolChunk(0, "call_b", "read_file", `{"path":"b"}`),
				finishChunk("tool_calls"), "[DONE]"),
			want: []wantCall{{"call_a", "read_file", `{"path":"a"}`}, {"call_b", "read_file", `{"path":"b"}`}},
		},
		{
			name: "empty arguments become an empty object",
			body: events(toolChunk(0, "call_a", "list_directory", ""), finishChunk("tool_calls"), "[DONE]"),
			want: []wantCall{{"call_a", "list_directory", `{}`}},
		},
		{
			name: "arguments that are not JSON pass through for runTool to refuse",
			body: events(toolChunk(0, "call_a", "read_file", `{"path":`), finishChunk("length"), "[DONE]"),
			want: []wantCall{{"call_a", "read_file", `{"path":`}},
		},
		{
			name: "CRLF lines, multi-line data, comments, id and retry fields",
			body: ": ping\r\nretry: 1000\r\nid: 7\r\ndata: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"two lines\"}}]}\r\n\r\n" +
				"data:" + finishChunk("stop") + "\r\n\r\ndata: [DONE]\r\n\r\n",
			wantText: "two lines",
		},
		{
			name:     "a byte order mark and event: message",
			body:     "\ufeffevent: message\ndata: " + textChunk("ok") + "\n\n" + events("[DONE]"),
			wantText: "ok",
		},
		{
			name:     "other event types and empty events are skipped",
			body:     "event: ping\ndata: {\"not\":\"a chunk\"}\n\ndata:\n\n\n\n" + events(textChunk("ok"), "[DONE]"),
			wantText: "ok",
		},
		{
			name:     "a finish_reason then the end of the stream, no [DONE]",
			body:     events(textChunk("ok"), finishChunk("stop")),
			wantText: "ok",
		},
		{
			name:     "a usage chunk without choices after the finish",
			body:     events(textChunk("ok"), finishChunk("stop"), `{"choices":[],"usage":{"total_tokens":3}}`, "[DONE]"),
			wantText: "ok",
		},
		{
			name: "choices other than the first are not ours",
			body: events(
				`{"choices":[{"index":1,"delta":{"content":"other","tool_calls":[{"index":0,"id":"call_x","function":{"name":"run_shell_command","arguments":"{}"}}]}}]}`,
				textChunk("ok"), "[DONE]"),
			wantText: "ok",
		},
		{
			name:     "nothing after [DONE] is read",
			body:     events(textChunk("ok"), "[DONE]", textChunk("late")) + "data: {broken\n\n",
			wantText: "ok",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeOpenAI(t, sseReply(tt.body))
			var streamed strings.Builder
			turn, err := m.next(context.Background(), userHello, nil, func(s string) { streamed.WriteString(s) })
			if err != nil {
				t.Fatal(err)
			}
			if turn.Text != tt.wantText || streamed.String() != tt.wantText {
				t.Errorf("text %q, streamed %q, want %q", turn.Text, streamed.String(), tt.wantText)
			}
			checkCalls(t, turn.Calls, tt.want)
		})
	}
}

func TestOpenAIJSONReply(t *testing.T) {
	m := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",`+
			`"content":"Writing it.","tool_calls":[{"id":"call_w","type":"function","function":{"name":"write_file",`+
			`"arguments":"{\"file_path\":\"a.txt\",\"content\":\"hi\"}"}},{"id":"","type":"function","function":{"name":"glob","arguments":""}}]},`+
			`"finish_reason":"tool_calls"}],"usage":{"total_tokens":9}}`)
	})
	var chunks []string
	turn, err := m.next(context.Background(), userHello, nil, func(s string) { chunks = append(chunks, s) })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(chunks, []string{"Writing it."}) || turn.Text != "Writing it." {
		t.Errorf("text chunks %q, turn text %q, want the content once", chunks, turn.Text)
	}
	checkCalls(t, turn.Calls, []wantCall{
		{"call_w", "write_file", `{"file_path":"a.txt","content":"hi"}`},
		{"", "glob", `{}`},
	})
}

func TestOpenAIErrors(t *testing.T) {
	tooManyCalls := make([]string, 0, openAIMaxCalls+1)
	for i := range openAIMaxCalls + 1 {
		tooManyCalls = append(tooManyCalls, toolChunk(i, "", "glob", "{}"))
	}
	tests := []struct {
		name   string
		handle http.HandlerFunc // nil: nothing listens
		want   []string         // substrings of the error text
	}{
		{
			name: "HTTP 500 echoing the key",
			handle: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "invalid api key: "+r.Header.Get("Authorization"), http.StatusInternalServerError)
			},
			want: []string{"status 500 Internal Server Error", `invalid api key: Bearer [redacted]`},
		},
		{
			name: "HTTP 401 with the key across the snippet's end",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, strings.Repeat("x", openAIErrorSnippet-5)+testAPIKey+strings.Repeat("y", 100))
			},
			want: []string{"status 401 Unauthorized", "(truncated)"},
		},
		{
			name: "a redirect is not followed",
			handle: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/chat/completions" {
					panic("the client followed a redirect to " + r.URL.Path)
				}
				http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			},
			want: []string{"status 307 Temporary Redirect"},
		},
		{
			name: "a reply that is neither SSE nor JSON",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html>")
			},
			want: []string{`Content-Type "text/html"`},
		},
		{
			name:   "malformed SSE chunk",
			handle: sseReply(events(textChunk("ok"), `{"choices":[{`)),
			want:   []string{"chunk 2: invalid JSON"},
		},
		{
			name:   "a chunk that is not a completion",
			handle: sseReply(events(`{"choices":"none"}`)),
			want:   []string{"chunk 1: invalid JSON"},
		},
		{
			name:   "stream cut without [DONE] or finish_reason",
			handle: sseReply(events(textChunk("par"))),
			want:   []string{"ended before [DONE] or a finish_reason"},
		},
		{
			name:   "stream cut inside an event",
			handle: sseReply("data: [DONE]"),
			want:   []string{"ended before [DONE] or a finish_reason"},
		},
		{
			name:   "error event",
			handle: sseReply("event: error\ndata: {\"message\":\"overloaded\"}\n\n"),
			want:   []string{`error event "{\"message\":\"overloaded\"}"`},
		},
		{
			name:   "error object inside the stream",
			handle: sseReply(events(textChunk("ok"), `{"error":{"message":"context too long"}}`)),
			want:   []string{"error", "context too long"},
		},
		{
			name:   "a line past the bound",
			handle: sseReply("data: " + strings.Repeat("x", openAIMaxLine) + "\n\n"),
			want:   []string{fmt.Sprintf("line longer than %d bytes", openAIMaxLine)},
		},
		{
			name:   "event data past the bound",
			handle: sseReply(strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 5)),
			want:   []string{fmt.Sprintf("event data longer than %d bytes", openAIMaxLine)},
		},
		{
			name:   "too many tool calls",
			handle: sseReply(events(tooManyCalls...)),
			want:   []string{fmt.Sprintf("more than %d tool calls", openAIMaxCalls)},
		},
		{
			name: "JSON reply without choices",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[]}`)
			},
			want: []string{"no choices"},
		},
		{
			name: "invalid JSON reply",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[]} trailing`)
			},
			want: []string{"invalid JSON"},
		},
		{
			name: "JSON error reply with status 200",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"error":{"message":"bad key `+r.Header.Get("Authorization")+`"}}`)
			},
			want: []string{"bad key Bearer [redacted]"},
		},
		{
			name: "JSON reply past the bound",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[{"message":{"content":"`+strings.Repeat("x", openAIMaxReply)+`"}}]}`)
			},
			want: []string{fmt.Sprintf("longer than %d bytes", openAIMaxReply)},
		},
		{
			name: "connection dropped mid-stream",
			handle: func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				defer conn.Close()
				chunk := events(textChunk("par"))
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk)
				buf.Flush()
			},
			want: []string{"read chat completions reply", "unexpected EOF"},
		},
		{
			name: "nothing listening",
			want: []string{"chat completions request", "connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handle := tt.handle
			if handle == nil {
				handle = func(http.ResponseWriter, *http.Request) {}
			}
			srv := httptest.NewServer(handle)
			if tt.handle == nil {
				srv.Close()
			} else {
				t.Cleanup(srv.Close)
			}
			m, err := newOpenAIModel(openAIConfig{BaseURL: srv.URL + "/v1", APIKey: testAPIKey, Model: "test-model"})
			if err != nil {
				t.Fatal(err)
			}
			turn, err := m.next(context.Background(), userHello, nil, func(string) {})
			if err == nil {
				t.Fatalf("got turn %+v, want an error", turn)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testAPIKey[:8]) {
				t.Errorf("error %q holds (part of) the API key", err)
			}
		})
	}
}

func TestOpenAICancelAbortsRequest(t *testing.T) {
	tests := []struct {
		name string
		// cancelOnText cancels when the first text arrives; otherwise the
		// test cancels once the server has the request and sent nothing.
		cancelOnText bool
	}{
		{"mid-stream", true},
		{"before the reply headers", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			received := make(chan struct{})
			ended := make(chan struct{})
			m := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request) {
				defer close(ended)
				// The server notices a client going away only once it has read the body.
				io.Copy(io.Discard, r.Body)
				if tt.cancelOnText {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, events(textChunk("first")))
					w.(http.Flusher).Flush()
				}
				close(received)
				<-r.Context().Done() // the server sees the client go away
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			if !tt.cancelOnText {
				go func() {
					defer close(done)
					<-received
					cancel()
				}()
			} else {
				close(done)
			}
			_, err := m.next(ctx, userHello, nil, func(string) {
				if tt.cancelOnText {
					cancel()
				}
			})
			<-done
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			<-ended
		})
	}
}

func TestOpenAICallIDs(t *testing.T) {
	long := strings.Repeat("i", openAIMaxCallID)
	history := []message{
		{Role: roleUser, Text: "go"},
		{Role: roleAssistant, Calls: []toolCall{{ID: "call_old", Name: "glob", Args: json.RawMessage(`{}`)}}},
		{Role: roleTool, CallID: "call_old", Tool: "glob"},
		{Role: roleTool, CallID: "call_orphan", Tool: "glob"},
	}
	tests := []struct {
		name string
		ids  []string // the model's ids, one call each
		keep []bool   // whether each id is accepted as is
	}{
		{"a fresh id", []string{"call_new"}, []bool{true}},
		{"printable with a space", []string{"tool use 1"}, []bool{true}},
		{"exactly the bound", []string{long}, []bool{true}},
		{"empty", []string{""}, []bool{false}},
		{"one byte too long", []string{long + "i"}, []bool{false}},
		{"a control character", []string{"call\x01"}, []bool{false}},
		{"a newline", []string{"call\nx"}, []bool{false}},
		{"non-ASCII", []string{"callé"}, []bool{false}},
		{"used earlier in the session", []string{"call_old"}, []bool{false}},
		{"answered earlier in the session", []string{"call_orphan"}, []bool{false}},
		{"twice in one turn", []string{"call_twin", "call_twin"}, []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chunks []string
			for i, id := range tt.ids {
				tc := map[string]any{"index": i, "id": id, "type": "function",
					"function": map[string]any{"name": "glob", "arguments": "{}"}}
				b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0,
					"delta": map[string]any{"tool_calls": []any{tc}}}}})
				chunks = append(chunks, string(b))
			}
			m := newFakeOpenAI(t, sseReply(events(append(chunks, "[DONE]")...)))
			turn, err := m.next(context.Background(), history, nil, func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			if len(turn.Calls) != len(tt.ids) {
				t.Fatalf("got %d calls, want %d", len(turn.Calls), len(tt.ids))
			}
			seen := map[string]bool{"call_old": true, "call_orphan": true}
			for i, c := range turn.Calls {
				switch {
				case tt.keep[i] && c.ID != tt.ids[i]:
					t.Errorf("call %d: id %q replaced by %q, want it kept", i, tt.ids[i], c.ID)
				case !tt.keep[i] && !assignedCallID.MatchString(c.ID):
					t.Errorf("call %d: id %q, want a runtime-assigned id for %q", i, c.ID, tt.ids[i])
				}
				if seen[c.ID] {
					t.Errorf("call %d: id %q is not unique in the session", i, c.ID)
				}
				seen[c.ID] = true
			}
		})
	}
}

// seenRequest is what the fake server received.
type seenRequest struct {
	method, path, auth, contentType string
	body                            []byte
}

func recordRequest(seen chan<- seenRequest, reply string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- seenRequest{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body}
		sseReply(reply)(w, r)
	}
}

func TestOpenAIRequestAsTheServerSeesIt(t *testing.T) {
	seen := make(chan seenRequest, 1)
	m := newFakeOpenAI(t, recordRequest(seen, events(textChunk("ok"), "[DONE]")))
	history := []message{
		{Role: roleUser, Text: "list files"},
		{Role: roleAssistant, Text: "Looking.", Calls: []toolCall{
			{ID: "call_1", Name: "list_directory", Args: json.RawMessage(`{"path":"."}`)},
			{ID: "call_2", Name: "read_file", Args: json.RawMessage(`{"path":`)},
			{ID: "call_3", Name: "glob"},
		}},
		{Role: roleTool, CallID: "call_1", Tool: "list_directory", Result: toolResult{Status: statusCompleted, Output: "a.txt\nb.txt"}},
		{Role: roleTool, CallID: "call_2", Tool: "read_file", Result: toolResult{Status: statusFailed, Output: "invalid arguments", ErrorType: errTypeInvalidParams}},
		{Role: roleTool, CallID: "call_3", Tool: "glob", Result: toolResult{Status: statusFailed, Output: "denied by policy", ErrorType: errTypeExecutionDenied}},
		{Role: roleAssistant, Calls: []toolCall{{ID: "call_4", Name: "run_shell_command", Args: json.RawMessage(`{"command":"ls"}`)}}},
		{Role: roleTool, CallID: "call_4", Tool: "run_shell_command", Result: toolResult{Status: statusCompleted, Output: ""}},
		{Role: roleAssistant, Text: "Done."},
		{Role: roleUser, Text: "thanks"},
	}
	tools := []*toolSpec{
		{Name: "read_file", Description: "Reads a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "glob"},
	}
	if _, err := m.next(context.Background(), history, tools, func(string) {}); err != nil {
		t.Fatal(err)
	}
	req := <-seen
	if req.method != http.MethodPost || req.path != "/v1/chat/completions" || req.contentType != "application/json" {
		t.Errorf("request %s %s (%s), want POST /v1/chat/completions (application/json)", req.method, req.path, req.contentType)
	}
	if req.auth != "Bearer "+testAPIKey {
		t.Errorf("Authorization %q, want the bearer key", req.auth)
	}
	want := `{
	  "model": "test-model",
	  "stream": true,
	  "stream_options": {"include_usage": true},
	  "messages": [
	    {"role": "user", "content": "list files"},
	    {"role": "assistant", "content": "Looking.", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "list_directory", "arguments": "{\"path\":\".\"}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":"}},
	      {"id": "call_3", "type": "function", "function": {"name": "glob", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
	    {"role": "tool", "tool_call_id": "call_2", "content": "invalid arguments"},
	    {"role": "tool", "tool_call_id": "call_3", "content": "denied by policy"},
	    {"role": "assistant", "tool_calls": [
	      {"id": "call_4", "type": "function", "function": {"name": "run_shell_command", "arguments": "{\"command\":\"ls\"}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_4", "content": ""},
	    {"role": "assistant", "content": "Done."},
	    {"role": "user", "content": "thanks"}
	  ],
	  "tools": [
	    {"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
	      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
	    {"type": "function", "function": {"name": "glob", "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}}}
	  ]
	}`
	var got, wantV any
	if err := json.Unmarshal(req.body, &got); err != nil {
		t.Fatalf("request body %s: %v", req.body, err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("request body\n%s\nwant\n%s", req.body, want)
	}
}

func TestOpenAINoKeyNoAuthorization(t *testing.T) {
	seen := make(chan seenRequest, 1)
	srv := httptest.NewServer(recordRequest(seen, events(textChunk("ok"), "[DONE]")))
	defer srv.Close()
	m, err := newOpenAIModel(openAIConfig{BaseURL: srv.URL, Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.next(context.Background(), userHello, nil, func(string) {}); err != nil {
		t.Fatal(err)
	}
	req := <-seen
	if req.auth != "" || req.path != "/chat/completions" {
		t.Errorf("Authorization %q at %s, want none at /chat/completions", req.auth, req.path)
	}
	if bytes.Contains(req.body, []byte(`"tools"`)) {
		t.Errorf("request body %s offers tools, want none", req.body)
	}
}

func TestNewOpenAIModel(t *testing.T) {
	tests := []struct {
		base, key, model string
		endpoint         string // "" when an error is wanted
		wantErr          string
	}{
		{base: "http://127.0.0.1:8080/v1", model: "m", endpoint: "http://127.0.0.1:8080/v1/chat/completions"},
		{base: "http://127.0.0.1:8080/v1/", model: "m", endpoint: "http://127.0.0.1:8080/v1/chat/completions"},
		{base: "http://127.0.0.1:8080", model: "m", endpoint: "http://127.0.0.1:8080/chat/completions"},
		{base: "http://127.0.0.1:8080/", model: "m", endpoint: "http://127.0.0.1:8080/chat/completions"},
		{base: "https://localhost/compatible-mode/v1", model: "m", endpoint: "https://localhost/compatible-mode/v1/chat/completions"},
		{base: "http://[::1]:9/v1?api-version=1", model: "m", endpoint: "http://[::1]:9/v1/chat/completions?api-version=1"},
		{base: "http://127.0.0.1/v1", model: "", wantErr: "no model name"},
		{base: "", model: "m", wantErr: `base URL ""`},
		{base: "127.0.0.1:8080", model: "m", wantErr: "base URL"},
		{base: "ftp://localhost/v1", model: "m", wantErr: "want http:// or https://"},
		{base: "http://user:pw@localhost/v1", model: "m", wantErr: `host "localhost" holds credentials`},
		{base: "http://localhost/v1#x", model: "m", wantErr: "fragment"},
		{base: "http://localhost/v1", key: testAPIKey + "\n", model: "m", wantErr: "OPENAI_API_KEY holds a character"},
		{base: "http://localhost/v1", key: "sk-key with-space", model: "m", wantErr: "OPENAI_API_KEY holds a character"},
	}
	for _, tt := range tests {
		m, err := newOpenAIModel(openAIConfig{BaseURL: tt.base, APIKey: tt.key, Model: tt.model})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("base %q model %q: error %v, want %q", tt.base, tt.model, err, tt.wantErr)
			}
			if err != nil && tt.key != "" && strings.Contains(err.Error(), tt.key[:8]) {
				t.Errorf("error %q holds the API key", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("base %q: %v", tt.base, err)
			continue
		}
		if m.endpoint != tt.endpoint {
			t.Errorf("base %q: endpoint %q, want %q", tt.base, m.endpoint, tt.endpoint)
		}
	}
}

func FuzzOpenAISSE(f *testing.F) {
	f.Add([]byte(events(textChunk("a"), textChunk("b"), finishChunk("stop"), "[DONE]")))
	f.Add([]byte(events(toolChunk(0, "call_a", "read_file", `{"pa`), toolChunk(0, "", "", `th":"x"}`),
		toolChunk(1, "call_a", "glob", ""), finishChunk("tool_calls"))))
	f.Add([]byte(": c\r\nevent: error\r\ndata: x\r\n\r\n"))
	f.Add([]byte("\ufeffdata: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"x\"}}]}\n\ndata\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1,\"id\":\"\"}]},\"finish_reason\":\"\"}]}\n\n"))
	f.Add([]byte(`data: {"error":null,"choices":null}` + "\n\n"))
	f.Add([]byte(`data: {"choices":[{"delta":{"reasoning":{"k":1},"reasoning_content":7}}],"object":"error"}` + "\n\n"))
	// Every recorded shape of a real server is a seed.
	vectors, _ := filepath.Glob(filepath.Join(streamVectorDir, "*.sse"))
	if len(vectors) == 0 {
		f.Fatalf("no stream vectors in %s", streamVectorDir)
	}
	for _, v := range vectors {
		b, err := os.ReadFile(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := newOpenAITurn(testAPIKey)
		tr.thought = func(s string) {
			if s == "" {
				t.Error("thought called with an empty chunk")
			}
		}
		var streamed strings.Builder
		err := readOpenAIStream(bytes.NewReader(data), tr, func(s string) {
			if s == "" {
				t.Error("text called with an empty chunk")
			}
			streamed.WriteString(s)
		})
		if err != nil {
			if strings.Contains(err.Error(), testAPIKey) {
				t.Errorf("error %q holds the API key", err)
			}
			return
		}
		turn, err := tr.turn(userHello)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Text != streamed.String() {
			t.Errorf("turn text %q, streamed %q", turn.Text, streamed.String())
		}
		if len(turn.Calls) > openAIMaxCalls {
			t.Errorf("%d calls, past the bound %d", len(turn.Calls), openAIMaxCalls)
		}
		ids := make(map[string]bool)
		for _, c := range turn.Calls {
			if !validModelCallID(c.ID) || ids[c.ID] {
				t.Errorf("call id %q is invalid or repeated", c.ID)
			}
			ids[c.ID] = true
			if len(c.Args) == 0 {
				t.Errorf("call %q has empty arguments", c.ID)
			}
		}
	})
}

func FuzzOpenAIJSON(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"glob","arguments":"{}"}},{"function":{"name":"x","arguments":""}}]},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"error":{"message":"bad"}}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := newOpenAITurn(testAPIKey)
		var streamed strings.Builder
		if err := readOpenAIJSON(bytes.NewReader(data), tr, func(s string) { streamed.WriteString(s) }); err != nil {
			return
		}
		turn, err := tr.turn(userHello)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Text != streamed.String() {
			t.Errorf("turn text %q, streamed %q", turn.Text, streamed.String())
		}
		for _, c := range turn.Calls {
			if !validModelCallID(c.ID) || len(c.Args) == 0 {
				t.Errorf("call %+v: invalid id or empty arguments", c)
			}
		}
	})
}

func BenchmarkOpenAIStream100(b *testing.B) {
	var payloads []string
	for i := range 90 {
		payloads = append(payloads, textChunk(fmt.Sprintf("word %d ", i)))
	}
	payloads = append(payloads, toolChunk(0, "call_a", "write_file", ""))
	for range 8 {
		payloads = append(payloads, toolChunk(0, "", "", `{"content":"some file text"}`))
	}
	payloads = append(payloads, finishChunk("tool_calls"), "[DONE]")
	stream := []byte(events(payloads...))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		tr := newOpenAITurn(testAPIKey)
		if err := readOpenAIStream(bytes.NewReader(stream), tr, func(string) {}); err != nil {
			b.Fatal(err)
		}
		if _, err := tr.turn(userHello); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOpenAIUsage: the usage a reply reports, on a streamed reply's last
// chunk or in a whole reply, is the turn's, with cached and reasoning
// tokens when the service gives them; a reply without usage has none.
func TestOpenAIUsage(t *testing.T) {
	full := `{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}`
	want := &modelUsage{InputTokens: 12, OutputTokens: 7, TotalTokens: 19, ThoughtTokens: 3, CachedReadTokens: 4}
	for _, tt := range []struct {
		name, mediaType, body string
		want                  *modelUsage
	}{
		{"stream", openAIEventStream, events(`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`, `{"choices":[],"usage":`+full+`}`, "[DONE]"), want},
		{"json", openAIJSON, `{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}],"usage":` + full + `}`, want},
		{"none", openAIEventStream, events(`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`, "[DONE]"), nil},
	} {
		tr := newOpenAITurn(testAPIKey)
		if err := readOpenAIReply(t.Context(), tt.mediaType, strings.NewReader(tt.body), tr, func(string) {}); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		turn, err := tr.turn(userHello)
		if err != nil || (turn.Usage == nil) != (tt.want == nil) || turn.Usage != nil && *turn.Usage != *tt.want {
			t.Errorf("%s: usage %+v (%v), want %+v", tt.name, turn.Usage, err, tt.want)
		}
	}
}

// streamVectorDir holds recorded stream shapes of real OpenAI-compatible
// servers, one SSE body a file; each is also a seed of FuzzOpenAISSE.
var streamVectorDir = filepath.Join("testdata", "openai_stream")

// vectorUsage is the usage every vector that reports one reports.
var vectorUsage = &modelUsage{InputTokens: 31, OutputTokens: 12, TotalTokens: 43}

// TestOpenAIStreamVectors replays each recorded shape from a loopback server
// and checks what a user sees: the text, the thinking, the calls proposed,
// the usage, or the error that ends the turn.
func TestOpenAIStreamVectors(t *testing.T) {
	tests := map[string]struct {
		text, err string // err: a substring of the error; the turn then has nothing else
		thoughts  []string
		calls     []wantCall
		usage     *modelUsage
	}{
		"vllm.sse": {text: "Reading it.", thoughts: []string{"Need the file."}, usage: vectorUsage,
			calls: []wantCall{{"chatcmpl-tool-9a1", "read_file", `{"absolute_path": "/w/caf\u00e9.txt"}`}}},
		"ollama.sse": {thoughts: []string{"Two files."}, usage: vectorUsage,
			calls: []wantCall{{"call_k2v1", "read_file", `{"absolute_path":"/w/a"}`}, {"call_p8x0", "glob", `{"pattern":"*.go"}`}}},
		"llamacpp.sse":      {text: "Hello.", thoughts: []string{"Short answer."}, usage: vectorUsage},
		"llamacpp_tool.sse": {calls: []wantCall{{"Xr5kq", "list_directory", `{"path":"/w"}`}}},
		"flat_error.sse":    {err: `chat completions reply: error "{\"object\":\"error\",\"message\":\"This model's maximum context length is 32768 tokens.`},
		"error_chunk.sse":   {err: `chat completions reply: error "{\"message\":\"upstream overloaded\"`},
		"reasoning.sse":     {text: "Hi!", thoughts: []string{"The user ", "says hi."}},
		"indexless_calls.sse": {calls: []wantCall{
			{"", "read_file", `{"absolute_path":"/w/a"}`}, {"", "read_file", `{"absolute_path":"/w/b"}`}}},
		"indexless_one_chunk.sse": {calls: []wantCall{
			{"", "glob", `{"pattern":"*"}`}, {"", "read_file", `{"absolute_path":"/w/a"}`}}},
		"several_calls.sse": {text: "Three.", calls: []wantCall{
			{"call_1", "glob", `{"pattern":"*.md"}`}, {"call_2", "read_file", `{"absolute_path":"/w/a"}`},
			{"call_3", "list_directory", `{"path":"/w"}`}}},
		"usage_empty_choices.sse": {text: "ok", usage: vectorUsage},
		"crlf.sse":                {text: "line"},
		"data_nospace.sse":        {text: "tight"},
		"keepalive.sse":           {text: "ab"},
		"no_done.sse":             {text: "end", usage: vectorUsage},
	}
	files, err := filepath.Glob(filepath.Join(streamVectorDir, "*.sse"))
	if err != nil || len(files) != len(tests) {
		t.Fatalf("%d vectors in %s (%v), want one per table row (%d)", len(files), streamVectorDir, err, len(tests))
	}
	for _, file := range files {
		name := filepath.Base(file)
		tt, ok := tests[name]
		if !ok {
			t.Errorf("vector %s has no table row", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			m := newFakeOpenAI(t, sseReply(string(body)))
			var thoughts []string
			var streamed strings.Builder
			ctx := withThoughtSink(t.Context(), func(s string) { thoughts = append(thoughts, s) })
			turn, err := m.next(ctx, userHello, nil, func(s string) { streamed.WriteString(s) })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one holding %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if turn.Text != tt.text || streamed.String() != tt.text {
				t.Errorf("text %q, streamed %q, want %q", turn.Text, streamed.String(), tt.text)
			}
			if !reflect.DeepEqual(thoughts, tt.thoughts) {
				t.Errorf("thoughts %q, want %q", thoughts, tt.thoughts)
			}
			checkCalls(t, turn.Calls, tt.calls)
			if (turn.Usage == nil) != (tt.usage == nil) || turn.Usage != nil && *turn.Usage != *tt.usage {
				t.Errorf("usage %+v, want %+v", turn.Usage, tt.usage)
			}
		})
	}
}

// TestOpenAIErrorBodies: a flat error object as a whole reply and any
// non-2xx reply, whatever its Content-Type, end the turn with the service's
// message in the error.
func TestOpenAIErrorBodies(t *testing.T) {
	flat := `{"object":"error","message":"The model 'qwen' does not exist.","type":"NotFoundError","param":null,"code":404}`
	for _, tt := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
	}{
		{"flat error as a JSON reply", http.StatusOK, "application/json", flat, `error "{\"object\":\"error\",\"message\":\"The model 'qwen' does not exist.\"`},
		{"flat error with status 404", http.StatusNotFound, "application/json", flat, `status 404 Not Found: body "{\"object\":\"error\",\"message\":\"The model 'qwen' does not exist.\"`},
		{"error chunk with status 429 as SSE", http.StatusTooManyRequests, "text/event-stream", events(`{"error":{"message":"rate limited"}}`), `status 429 Too Many Requests: body "data: {\"error\":{\"message\":\"rate limited\"}}`},
		{"plain text 502", http.StatusBadGateway, "text/plain", "upstream connect error", `status 502 Bad Gateway: body "upstream connect error"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			var streamed strings.Builder
			_, err := m.next(t.Context(), userHello, nil, func(s string) { streamed.WriteString(s) })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one holding %s", err, tt.want)
			}
			if streamed.Len() != 0 {
				t.Errorf("streamed %q from an error reply", streamed.String())
			}
		})
	}
}

// TestOpenAIIndexlessCallsAreSeparate: two complete calls with neither index nor id
// each run; before, they were merged and the merged arguments failed.
func TestOpenAIIndexlessCallsAreSeparate(t *testing.T) {
	tr := newOpenAITurn(testAPIKey)
	body := events(
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"glob","arguments":"{\"pattern\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"*\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"glob","arguments":"{}"}}]}}]}`,
		finishChunk("tool_calls"))
	if err := readOpenAIStream(strings.NewReader(body), tr, func(string) {}); err != nil {
		t.Fatal(err)
	}
	turn, err := tr.turn(userHello)
	if err != nil {
		t.Fatal(err)
	}
	// A fragment with neither id nor name continues the call before it.
	checkCalls(t, turn.Calls, []wantCall{{"", "glob", `{"pattern":"*"}`}, {"", "glob", `{}`}})
	if turn.Calls[0].ID == turn.Calls[1].ID {
		t.Errorf("both calls have id %q", turn.Calls[0].ID)
	}
}

// TestServeThoughtsAndFlatError: through serve and its acp child, a
// reasoning model's thinking reaches the host as agent_thought_chunk updates
// before the answer's text, and a flat error object mid-stream (as vLLM
// sends) ends the turn with the service's message instead of a normal end.
func TestServeThoughtsAndFlatError(t *testing.T) {
	fm := newFakeModelServer(t, func(n int) []string {
		if n == 0 {
			return []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Think "}}]}`,
				`{"choices":[{"index":0,"delta":{"reasoning_content":"first."}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}`,
				"[DONE]",
			}
		}
		return []string{
			`{"choices":[{"index":0,"delta":{"content":"Partial"}}]}`,
			`{"object":"error","message":"maximum context length is 32768 tokens","type":"BadRequestError","param":null,"code":400}`,
			"[DONE]",
		}
	})
	td := startTestDaemon(t, serveOptions{Model: openAIConfig{BaseURL: fm.srv.URL, Model: "m"}})
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, "hello")
	var kinds, texts []string
	for _, ev := range evs {
		var d struct {
			Update struct {
				SessionUpdate string      `json:"sessionUpdate"`
				Content       textContent `json:"content"`
			} `json:"update"`
		}
		if ev.typ != eventSessionUpdate || json.Unmarshal(parseEnvelope(t, ev).Data, &d) != nil || !strings.HasSuffix(d.Update.SessionUpdate, "_chunk") {
			continue
		}
		kinds = append(kinds, d.Update.SessionUpdate)
		texts = append(texts, d.Update.Content.Text)
	}
	wantKinds := []string{"agent_thought_chunk", "agent_thought_chunk", "agent_message_chunk"}
	if !reflect.DeepEqual(kinds, wantKinds) || !reflect.DeepEqual(texts, []string{"Think ", "first.", "done"}) {
		t.Errorf("updates %q with texts %q, want %q with the thinking, then the answer", kinds, texts, wantKinds)
	}
	if last := evs[len(evs)-1]; last.typ != eventTurnComplete {
		t.Fatalf("turn ended with %s %s", last.typ, last.data)
	}
	pid, evs := td.runTurn(t, id, "again")
	var te turnError
	last := evs[len(evs)-1]
	if last.typ != eventTurnError || decodeStrict(parseEnvelope(t, last).Data, &te) != nil || te.PromptID != pid ||
		!strings.Contains(te.Message, "maximum context length is 32768 tokens") {
		t.Errorf("turn ended with %s %s, want a turn_error with the service's message", last.typ, last.data)
	}
}

// TestOpenAIJSONReplyReasoning: a whole (non-streamed) reply's reasoning is
// shown once, the reasoning_content name first, and is not the turn's text.
func TestOpenAIJSONReplyReasoning(t *testing.T) {
	m := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi!",`+
			`"reasoning_content":"Greet back.","reasoning":"Greet back."},"finish_reason":"stop"}]}`)
	})
	var thoughts []string
	ctx := withThoughtSink(t.Context(), func(s string) { thoughts = append(thoughts, s) })
	turn, err := m.next(ctx, userHello, nil, func(string) {})
	if err != nil || turn.Text != "Hi!" || !reflect.DeepEqual(thoughts, []string{"Greet back."}) {
		t.Errorf("turn %+v (%v), thoughts %q: want text \"Hi!\" and the thinking once", turn, err, thoughts)
	}
}

// A 404 names the URL it came from and, when the base URL does not end in
// /v1, the base URL that would (the mistake behind most of them).
func TestOpenAINotFoundNamesTheURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	for _, tt := range []struct{ base, want string }{
		{srv.URL, `chat completions request: POST ` + srv.URL + `/chat/completions: status 404 Not Found: body "404 page not found\n"; the base URL "` + srv.URL + `" does not end in /v1, where OpenAI-compatible servers answer: set OPENAI_BASE_URL to "` + srv.URL + `/v1"`},
		{srv.URL + "/api/", `chat completions request: POST ` + srv.URL + `/api/chat/completions: status 404 Not Found: body "404 page not found\n"; the base URL "` + srv.URL + `/api/" does not end in /v1, where OpenAI-compatible servers answer: set OPENAI_BASE_URL to "` + srv.URL + `/api/v1"`},
		{srv.URL + "/v1/", `chat completions request: POST ` + srv.URL + `/v1/chat/completions: status 404 Not Found: body "404 page not found\n"`},
	} {
		m, err := newOpenAIModel(openAIConfig{BaseURL: tt.base, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.next(t.Context(), userHello, nil, func(string) {})
		if err == nil || err.Error() != tt.want {
			t.Errorf("base %q: error\n%v\nwant\n%s", tt.base, err, tt.want)
		}
	}
}

// openAIRequestOracle is the request as json.Marshal writes openAIRequest
// for history and tools: what openAIRequestBody must write byte for byte.
func openAIRequestOracle(t *testing.T, model string, history []message, tools []*toolSpec) []byte {
	t.Helper()
	text := func(s string) *openAIContent { return &openAIContent{Text: s} }
	req := openAIRequest{Model: model, Stream: true, StreamOptions: &openAIStreamOptions{IncludeUsage: true}, Messages: []openAIMessage{}}
	for _, h := range history {
		msg := openAIMessage{Role: h.Role}
		switch h.Role {
		case roleSystem:
			msg.Content = text(h.Text)
		case roleUser:
			msg.Content = text(h.Text)
			if len(h.Images) > 0 {
				msg.Content = &openAIContent{Parts: []openAIContentPart{}}
				if h.Text != "" {
					msg.Content.Parts = append(msg.Content.Parts, openAIContentPart{Type: openAIPartText, Text: h.Text})
				}
				for _, img := range h.Images {
					url := "data:" + img.MimeType + ";base64," + img.Data
					msg.Content.Parts = append(msg.Content.Parts, openAIContentPart{Type: openAIPartImage, ImageURL: &openAIImageURL{URL: url}})
				}
			}
		case roleAssistant:
			if h.Text != "" || len(h.Calls) == 0 {
				msg.Content = text(h.Text)
			}
			for _, c := range h.Calls {
				args := cmp.Or(string(c.Args), openAIEmptyArgs)
				msg.ToolCalls = append(msg.ToolCalls, openAIToolCall{ID: c.ID, Type: openAIToolType, Function: openAIFunctionCall{Name: c.Name, Arguments: args}})
			}
		case roleTool:
			msg.Content, msg.ToolCallID = text(h.Result.Output), h.CallID
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, s := range tools {
		req.Tools = append(req.Tools, openAITool{Type: openAIToolType, Function: openAIFunction{Name: s.Name, Description: s.Description, Parameters: s.parametersSchema()}})
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestOpenAIRequestBodyIsMarshals holds the hand-written request to
// json.Marshal's bytes for every kind of message, the strings encoding/json
// escapes, and a tool schema written with spaces and HTML characters.
func TestOpenAIRequestBodyIsMarshals(t *testing.T) {
	odd := "a<b>&\u2028\u2029\xff\"\\\n\t\x01é😀"
	img := promptImage{MimeType: "image/png", Data: "aGk="}
	mcpTool := &toolSpec{Name: "mcp__s__t", Description: "runs <t> & more", Schema: json.RawMessage("{ \"type\" : \"object\",\n \"description\": \"<x>\" }")}
	cases := []struct {
		name    string
		history []message
		tools   []*toolSpec
	}{
		{"empty", nil, nil},
		{"system and user", []message{{Role: roleSystem, Text: "sys " + odd}, {Role: roleUser, Text: odd}}, nil},
		{"empty user text", []message{{Role: roleUser}}, nil},
		{"images with text", []message{{Role: roleUser, Text: "look", Images: []promptImage{img, img}}}, nil},
		{"images alone", []message{{Role: roleUser, Images: []promptImage{img}}}, nil},
		{"assistant text", []message{{Role: roleAssistant, Text: odd}}, nil},
		{"assistant nothing", []message{{Role: roleAssistant}}, nil},
		{"assistant calls", []message{{Role: roleAssistant, Calls: []toolCall{
			{ID: "c1", Name: "write_file", Args: json.RawMessage(`{"file_path":"a<b>.txt","content":"` + "x" + `"}`)},
			{ID: "", Name: "ls", Args: nil},
			{ID: "c3", Name: "n" + odd, Args: json.RawMessage(`not json ` + odd)},
		}}}, nil},
		{"assistant text and calls", []message{{Role: roleAssistant, Text: "t", Calls: []toolCall{{ID: "c", Name: "ls", Args: json.RawMessage(`{}`)}}}}, nil},
		{"tool results", []message{
			{Role: roleTool, CallID: "c1", Tool: "ls", Result: toolResult{Output: odd}},
			{Role: roleTool, Tool: "ls", Result: toolResult{Output: ""}},
		}, nil},
		{"tools", benchModelExchanges(3), append(offeredTools(&toolEnv{}), mcpTool)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, model := range []string{"", "m<" + odd} {
				got, err := openAIRequestBody(model, c.history, c.tools)
				if err != nil {
					t.Fatal(err)
				}
				if want := openAIRequestOracle(t, model, c.history, c.tools); !bytes.Equal(got, want) {
					t.Errorf("model %q:\n got %s\nwant %s", model, got, want)
				}
			}
		})
	}
	// A tool of the same name whose schema or description changed (an MCP
	// server started again) is encoded anew, never from an earlier call.
	for _, changed := range []*toolSpec{
		{Name: mcpTool.Name, Description: mcpTool.Description, Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)},
		{Name: mcpTool.Name, Description: "another description", Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)},
	} {
		got, err := openAIRequestBody("", nil, []*toolSpec{changed})
		if err != nil {
			t.Fatal(err)
		}
		if want := openAIRequestOracle(t, "", nil, []*toolSpec{changed}); !bytes.Equal(got, want) {
			t.Errorf("a changed tool:\n got %s\nwant %s", got, want)
		}
	}
	if _, err := openAIRequestBody("", []message{{Role: "narrator"}}, nil); err == nil || err.Error() != `build chat completions request: history message 0 has role "narrator"` {
		t.Errorf("a message of an unknown role: %v", err)
	}
}
