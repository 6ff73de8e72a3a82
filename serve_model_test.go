// serve_model_test.go tests the model calls of serve's children through
// serve, against a fake OpenAI-compatible service on loopback: a real serve
// and real acp children for the whole path, the scripted fake child for
// what a forged child may ask.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeModelServer is a chat completions service that records every call and
// streams the SSE events reply(n) gives for the n-th (from 0).
type fakeModelServer struct {
	srv   *httptest.Server
	reply func(n int) []string

	mu    sync.Mutex
	calls []fakeModelCall
}

type fakeModelCall struct {
	path string
	auth []string // every Authorization header value
	body map[string]json.RawMessage
}

func newFakeModelServer(t testing.TB, reply func(n int) []string) *fakeModelServer {
	m := &fakeModelServer{reply: reply}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		m.mu.Lock()
		n := len(m.calls)
		m.calls = append(m.calls, fakeModelCall{path: r.URL.Path, auth: r.Header.Values("Authorization"), body: body})
		m.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range m.reply(n) {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeModelServer) seen() []fakeModelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// agentChunks joins the agent_message_chunk texts of a turn's events.
func agentChunks(t testing.TB, evs []sseEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.typ != eventSessionUpdate {
			continue
		}
		var d struct {
			Update struct {
				SessionUpdate string          `json:"sessionUpdate"`
				Content       json.RawMessage `json:"content"`
			} `json:"update"`
		}
		if err := json.Unmarshal(parseEnvelope(t, ev).Data, &d); err != nil {
			t.Fatal(err)
		}
		var c struct{ Text string }
		if d.Update.SessionUpdate == "agent_message_chunk" && json.Unmarshal(d.Update.Content, &c) == nil {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// A managed child's model turn runs through serve: serve calls the model
// service with its own key and model name, once per model call; the child
// streams the text and runs the proposed tool; the key is in neither the
// child's start environment nor the tool's, nor in what the child was sent.
func TestServeE2EModelCallsThroughServe(t *testing.T) {
	const key = "sk-serve-only-7c1f0e9a2b4d"
	fm := newFakeModelServer(t, func(n int) []string {
		if n == 0 {
			return []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":"running env. "}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_m1","type":"function","function":{"name":"run_shell_command","arguments":"{\"command\":"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"env > env.txt\"}"}}]},"finish_reason":"tool_calls"}]}`,
				"[DONE]",
			}
		}
		// A service that echoes the key: serve redacts it on the way.
		return []string{`{"choices":[{"index":0,"delta":{"content":"done, with ` + key + `"},"finish_reason":"stop"}]}`, "[DONE]"}
	})
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, args, tokenEnv, envModelBaseURL+"="+fm.srv.URL+"/v1", envModelName+"=serve-model", envModelKey+"="+key)
	id := sp.newSession(t, "")
	_, evs := sp.runTurn(t, id, "show me the environment")
	if last := evs[len(evs)-1]; last.typ != eventTurnComplete {
		t.Fatalf("turn ended with %s %s\n%s", last.typ, last.data, sp.stderr.String())
	}
	if got, want := agentChunks(t, evs), "running env. done, with "+openAIRedactedKey; got != want {
		t.Errorf("agent text = %q, want %q", got, want)
	}
	shellEnv, err := os.ReadFile(filepath.Join(ws, "env.txt"))
	if err != nil {
		t.Fatalf("the model's shell call did not run: %v", err)
	}
	calls := fm.seen()
	if len(calls) != 2 {
		t.Fatalf("model service saw %d calls, want 2", len(calls))
	}
	for i, c := range calls {
		if len(c.auth) != 1 || c.auth[0] != "Bearer "+key {
			t.Errorf("call %d: Authorization headers %q, want serve's key exactly once", i, c.auth)
		}
		if string(c.body["model"]) != `"serve-model"` || c.path != "/v1/chat/completions" {
			t.Errorf("call %d: %s model %s, want serve's model on its endpoint", i, c.path, c.body["model"])
		}
	}
	if !strings.Contains(string(calls[1].body["messages"]), `"tool_call_id":"call_m1"`) {
		t.Errorf("second call carries no tool result: %s", calls[1].body["messages"])
	}
	if _, n := prov.counts(); n != 1 {
		t.Errorf("provider saw %d prepares, want 1 (the shell call)", n)
	}
	children := childPIDs(t, sp.cmd.Process.Pid)
	if len(children) != 1 {
		t.Fatalf("serve has children %v, want one ACP child", children)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", children[0]))
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"child /proc environ": string(environ), "tool environment": string(shellEnv)} {
		if strings.Contains(text, key) || strings.Contains(text, envModelKey+"=") {
			t.Errorf("%s holds the model key", where)
		}
	}
}

// serve makes a model call only for the running prompt of a session the
// asking child owns, and never under a model name the child chose: each
// refusal makes no HTTP request.
func TestServeModelCallsOnlyForOwnRunningPrompt(t *testing.T) {
	fm := newFakeModelServer(t, func(int) []string {
		return []string{`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`, "[DONE]"}
	})
	wsA, wsB := t.TempDir(), t.TempDir()
	// With two children, a and b get one each and a2 goes beside a.
	td := startTestDaemon(t, serveOptions{Workspaces: []string{wsA, wsB}, Limits: serveLimits{MaxChildren: 2},
		Model: openAIConfig{BaseURL: fm.srv.URL, APIKey: "model-key", Model: "serve-model"}}, fakeChildEnv("ack"))
	a := td.newSession(t, `{"cwd":"`+wsA+`"}`)
	b := td.newSession(t, `{"cwd":"`+wsB+`"}`)
	a2 := td.newSession(t, `{"cwd":"`+wsA+`"}`)
	streamB := td.openEvents(t, b, "")
	pb := td.prompt(t, b, "wait")
	readSSE(t, streamB, childUpdate)

	_, evs := td.runTurn(t, a, strings.Join([]string{
		"model " + b + " " + pb, // another child's session, running prompt
		"model " + a2 + " -",    // own child, idle session
		"model - stale-prompt",  // own session, not its prompt
		"model - - gpt-4o",      // a model of the child's choosing
	}, "\n"))
	want := []string{
		fmt.Sprintf("session %q is not a session of this ACP child", b),
		fmt.Sprintf("is not the running prompt of session %q", a2),
		fmt.Sprintf("prompt %q is not the running prompt of session %q", "stale-prompt", a),
		`request names model "gpt-4o"; serve alone chooses the model`,
	}
	got := texts(t, evs)
	if len(got) != len(want) {
		t.Fatalf("answers %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], "model error: ") || !strings.Contains(got[i], want[i]) {
			t.Errorf("answer %d = %q, want an error saying %q", i, got[i], want[i])
		}
	}
	if n := len(fm.seen()); n != 0 {
		t.Fatalf("refused model calls made %d HTTP requests", n)
	}

	_, evs = td.runTurn(t, a, "model - -")
	if got := texts(t, evs); len(got) != 1 || !strings.HasPrefix(got[0], "model ok ") || got[0] == "model ok 0" {
		t.Errorf("genuine model call answered %q", got)
	}
	calls := fm.seen()
	if len(calls) != 1 || string(calls[0].body["model"]) != `"serve-model"` || !slices.Equal(calls[0].auth, []string{"Bearer model-key"}) {
		t.Errorf("model service saw %+v, want one call with serve's model and key", calls)
	}
	td.do(t, "POST", "/session/"+b+"/cancel", "")
}

// A prompt's model calls are bounded in number: the one past the bound fails
// without an HTTP request, and the hit is counted.
func TestServeModelCallLimit(t *testing.T) {
	fm := newFakeModelServer(t, func(int) []string {
		return []string{`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`, "[DONE]"}
	})
	s := defaultSettings()
	s.Model.MaxTurns = 2
	td := startTestDaemon(t, serveOptions{Settings: s, Model: openAIConfig{BaseURL: fm.srv.URL, Model: "m"}}, fakeChildEnv("ack"))
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, "model - -\nmodel - -\nmodel - -")
	got := texts(t, evs)
	if len(got) != 3 || !strings.HasPrefix(got[0], "model ok") || !strings.HasPrefix(got[1], "model ok") ||
		!strings.Contains(got[2], "already made 2 model calls, its limit") {
		t.Errorf("answers = %q", got)
	}
	if n := len(fm.seen()); n != 2 {
		t.Errorf("model service saw %d calls, want 2", n)
	}
	metrics := string(td.do(t, "GET", metricsPath, "").body)
	if !strings.Contains(metrics, `acpguard_serve_limit_hits_total{code="`+limitModelCalls+`"} 1`) {
		t.Errorf("metrics do not count the model call limit:\n%s", metrics)
	}
	// The next prompt has its own budget.
	if _, evs := td.runTurn(t, id, "model - -"); !strings.HasPrefix(strings.Join(texts(t, evs), ""), "model ok") {
		t.Errorf("next prompt: %q", texts(t, evs))
	}
}

func TestModelBudgetBytes(t *testing.T) {
	var b modelBudget
	if !b.spend(maxModelBytesPerPrompt-10) || !b.spend(10) {
		t.Fatal("spending up to the bound was refused")
	}
	if b.spend(1) {
		t.Error("a byte past the bound was allowed")
	}
}

func TestRedactor(t *testing.T) {
	tests := []struct {
		secret string
		chunks []string
		want   string
	}{
		{"sk-123", []string{"a sk-123 b"}, "a " + openAIRedactedKey + " b"},
		{"sk-123", []string{"a sk-", "123 b"}, "a " + openAIRedactedKey + " b"},
		{"sk-123", []string{"s", "k", "-", "1", "2", "3"}, openAIRedactedKey},
		{"sk-123", []string{"sk-12", "sk-123"}, "sk-12" + openAIRedactedKey},
		{"sk-123", []string{"ends with sk-1"}, "ends with sk-1"},
		{"", []string{"nothing to hide"}, "nothing to hide"},
	}
	for _, tt := range tests {
		r := redactor{secret: []byte(tt.secret)}
		var out []byte
		for _, c := range tt.chunks {
			out = append(out, r.push([]byte(c))...)
		}
		out = append(out, r.flush()...)
		if string(out) != tt.want {
			t.Errorf("redact %q of %q = %q, want %q", tt.secret, tt.chunks, out, tt.want)
		}
	}
}

// A child's model call is read strictly: a member spelled in another case,
// given twice, unknown or of the wrong type, or bytes after the object, and
// serve makes no request, with the member named.
func TestModelCallParamsStrict(t *testing.T) {
	const req = `"request":{"messages":[{"role":"user","content":"hi"}],"stream":true}`
	tests := []struct{ params, want string }{
		{`{"sessionId":"s1","promptId":"p1","streamId":"x",` + req + `}`, ""},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x",` + req + `,"_meta":{"a":1}}`, ""},
		{`{"sessionId":"s1","promptId":"p1","StreamId":"x",` + req + `}`, `model call: invalid params: unknown field "StreamId"`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","streamId":"y",` + req + `}`, `model call: invalid params: duplicate field "streamId"`},
		{`{"sessionId":1,"promptId":"p1","streamId":"x",` + req + `}`, `model call: invalid params: field "sessionId": not a string`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x",` + req + `} {}`, `model call: invalid params: trailing data after the object`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x",` + req + `,"model":"m"}`, `model call: invalid params: unknown field "model"`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"",` + req + `}`, `model call: streamId "": want 1 to 64 bytes`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[],"Model":"m"}}`, `model call: request is not a chat completions request: unknown field "Model"`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":"a","role":"system"}]}}`, `model call: request is not a chat completions request: messages[0]: duplicate field "role"`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"Role":"user","content":"a"}]}}`, `model call: request is not a chat completions request: messages[0]: unknown field "Role"`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":{"text":"a"}}]}}`, `model call: request is not a chat completions request: messages[0].content: want a string`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"assistant","tool_calls":[{"index":1.5,"function":{"name":"f","arguments":"{}"}}]}]}}`, `model call: request is not a chat completions request: messages[0].tool_calls[0].index: want an integer`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","reasoning":{"a":1}}]}}`, `model call: request is not a chat completions request: messages[0].reasoning: want a string`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[null]}}`, `model call: request is not a chat completions request: messages[0]: want an object`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"model":"gpt-4o","messages":[]}}`, `model call: request names model "gpt-4o"; serve alone chooses the model`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"stream":"yes"}}`, `model call: request is not a chat completions request: stream: want a boolean`},
		{`{"sessionId":"s1","promptId":"p1","streamId":"x","request":{"messages":[{"role":"user","content":"` + "\xff" + `"}]}}`, `model call: request is not a chat completions request: messages[0].content: invalid UTF-8 at byte 39`},
		{`[]`, `model call: invalid params: an array instead of an object`},
	}
	for _, tt := range tests {
		_, body, err := decodeModelComplete(json.RawMessage(tt.params), "serve-model")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.params, err)
		case tt.want == "" && !strings.HasPrefix(string(body), `{"model":"serve-model",`):
			t.Errorf("%s: body %s, want serve's model first", tt.params, body)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("%s: error %v, want %q", tt.params, err, tt.want)
		}
	}
}

// The child's model call params are what json.Marshal writes for them.
func TestAppendModelCompleteParams(t *testing.T) {
	history := []message{{Role: roleUser, Text: "a<b>&\u2028\xff"}}
	tools := offeredTools(&toolEnv{})
	body, err := openAIRequestBody("", history, tools)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []promptIdentity{{"s1", "p1"}, {`s"\<`, "p\u2028\xff"}, {"", ""}} {
		want, err := json.Marshal(modelCompleteParams{SessionID: id.sessionID, PromptID: id.promptID, StreamID: "x", Request: body})
		if err != nil {
			t.Fatal(err)
		}
		// Appended after a line's start, as the call's line holds them.
		const start = `{"jsonrpc":"2.0","params":`
		got, err := appendModelCompleteParams([]byte(start), id, "x", history, tools)
		if err != nil || string(got) != start+string(want) {
			t.Errorf("params of %q = %s, %v; want %s", id, got, err, want)
		}
	}
	// A history the request cannot carry fails the params, not the line.
	if _, err := appendModelCompleteParams(nil, promptIdentity{"s1", "p1"}, "x", []message{{Role: "narrator"}}, nil); err == nil || err.Error() != `build chat completions request: history message 0 has role "narrator"` {
		t.Errorf("params of a narrator's message: %v", err)
	}
}

// A reply's chunk is what json.Marshal writes for it, and the child reads
// it back as the strict decode does.
func TestAppendModelChunk(t *testing.T) {
	for _, c := range []modelChunk{
		{StreamID: "s"},
		{StreamID: "s", ContentType: "text/event-stream"},
		{StreamID: "s<&>\u2028", Data: []byte("data: {\"a\":1}\n\n\xff")},
		{StreamID: "s", ContentType: "application/json", Data: []byte{0}},
	} {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got := appendModelChunk([]byte("kept"), c)
		if string(got) != "kept"+string(want) {
			t.Errorf("chunk %+v = %s, want %s", c, got[len("kept"):], want)
		}
		back, err := decodeModelChunk(want)
		var strict modelChunk
		if serr := decodeStrict(want, &strict); err != nil || serr != nil || !reflect.DeepEqual(back, strict) {
			t.Errorf("chunk %s read back as %+v (%v), the strict decode as %+v (%v)", want, back, err, strict, serr)
		}
	}
}

// TestModelReplyLastBytes: a reply whose last bytes could begin serve's
// key reaches the child whole, those bytes held back by the redaction until
// the reply ends and sent in the call's result.
func TestModelReplyLastBytes(t *testing.T) {
	const key = "]}-a-key-whose-start-ends-every-json-reply"
	call := startModelRoundTrip(t, key, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`)
	})
	turn, err := call(0)
	if err != nil || turn.Text != "whole" {
		t.Fatalf("turn %q, %v; want the reply whole", turn.Text, err)
	}
}

// TestModelReplyEndInTheAnswer: the reply's last read, and the bytes that
// end an event stream with data: [DONE], reach the child in the call's
// answer, with the media type when no chunk named it: a reply serve reads
// whole is one line to the child, not a chunk and then the answer. Bytes
// after [DONE] still come, in order.
func TestModelReplyEndInTheAnswer(t *testing.T) {
	const hi = `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n"
	const stop = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	for _, tt := range []struct {
		name  string
		write func(w http.ResponseWriter, saw <-chan string)
		lines int64 // 0: not counted, the reads' cuts being the kernel's
	}{
		{"json whole", func(w http.ResponseWriter, _ <-chan string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
		}, 1},
		{"stream whole", func(w http.ResponseWriter, _ <-chan string) {
			w.Header().Set("Content-Type", openAIEventStream)
			io.WriteString(w, hi+stop+"data: [DONE]\n\n")
		}, 1},
		{"done after a chunk", func(w http.ResponseWriter, saw <-chan string) {
			w.Header().Set("Content-Type", openAIEventStream)
			io.WriteString(w, hi)
			w.(http.Flusher).Flush()
			<-saw // the child read the chunk: what follows is another read
			io.WriteString(w, stop+"data:[DONE]\r\n\r\n")
		}, 2},
		{"bytes after done", func(w http.ResponseWriter, _ <-chan string) {
			w.Header().Set("Content-Type", openAIEventStream)
			io.WriteString(w, hi+stop+"data: [DONE]\n\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, ": after the end\n\n")
		}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			saw := make(chan string, 1)
			call, toChild := startModelRoundTripLines(t, "", func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				tt.write(w, saw)
			}, func(s string) {
				select {
				case saw <- s:
				default:
				}
			})
			turn, err := call(0)
			if err != nil || turn.Text != "hi" {
				t.Fatalf("turn %q, %v; want hi", turn.Text, err)
			}
			if got := toChild.Load(); tt.lines != 0 && got != tt.lines {
				t.Errorf("serve wrote %d lines to the child, want %d", got, tt.lines)
			}
		})
	}
}

// sseDone tells a stream that ends with data: [DONE] starting a line,
// however the stream was cut, and nothing else.
func TestSSEDone(t *testing.T) {
	for _, tt := range []struct {
		stream string
		want   bool
	}{
		{"data: [DONE]\n\n", true},
		{"data:[DONE]\n\n", true},
		{"data: [DONE]\r\n\r\n", true},
		{"data: {}\n\ndata: [DONE]\n\n", true},
		{"data: {}\r\n\r\ndata:[DONE]\r\n\r\n", true},
		{"data: {}\n\ndata: [DONE]\n", false},
		{"data: {}\n\ndata: [DONE]", false},
		{"xdata: [DONE]\n\n", false},
		{"data: {}\n\n: data: [DONE]\n\n", false},
		{"data: [DONE]\n\ndata: {}\n\n", false},
		{"data:  [DONE]\n\n", false},
	} {
		for cut := range len(tt.stream) + 1 {
			d := sseDone{on: true}
			d.push([]byte(tt.stream[:cut]))
			if got := d.push([]byte(tt.stream[cut:])); got != tt.want && cut < len(tt.stream) {
				t.Errorf("%q cut at %d: done %v, want %v", tt.stream, cut, got, tt.want)
			}
		}
		if d := (sseDone{}); d.push([]byte(tt.stream)) {
			t.Errorf("%q: done in a reply that is not an event stream", tt.stream)
		}
	}
}

// serve's check of a session's model request walks only what is new: the
// elements of messages and tools the last accepted request held, byte for
// byte at their place, are passed over; every other element is checked,
// so a new element, an old one changed or one at another place is refused
// as before, and a refused request leaves what was kept.
func TestModelCheckedElements(t *testing.T) {
	const (
		tools  = `"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]`
		a      = `{"role":"user","content":"a"}`
		b      = `{"role":"assistant","content":"b"}`
		badNew = `{"role":"user","Content":"c"}`
	)
	var c modelChecked
	steps := []struct{ name, req, want string }{
		{"first", `{"messages":[` + a + `],` + tools + `}`, ""},
		{"grown", `{"messages":[` + a + `,` + b + `],` + tools + `}`, ""},
		{"a new element", `{"messages":[` + a + `,` + b + `,` + badNew + `],` + tools + `}`, `messages[2]: unknown field "Content"`},
		{"an old element changed", `{"messages":[{"role":"user","content":"a","role":"x"},` + b + `],` + tools + `}`, `messages[0]: duplicate field "role"`},
		{"an old element grown", `{"messages":[{"role":"user","content":"a"` + `,"Role":"x"},` + b + `],` + tools + `}`, `messages[0]: unknown field "Role"`},
		{"a tool changed", `{"messages":[` + a + `],"tools":[{"type":"function","function":{"name":"f","parameters":{},"Name":"g"}}]}`, `tools[0].function: unknown field "Name"`},
		{"the kept request again", `{"messages":[` + a + `,` + b + `],` + tools + `}`, ""},
	}
	for _, st := range steps {
		body, err := checkModelRequest(json.RawMessage(st.req), "m", &c)
		switch {
		case st.want == "" && err != nil:
			t.Errorf("%s: %v", st.name, err)
		case st.want == "" && string(body) != `{"model":"m",`+st.req[1:]:
			t.Errorf("%s: body %s", st.name, body)
		case st.want != "" && (err == nil || !strings.HasSuffix(err.Error(), st.want)):
			t.Errorf("%s: error %v, want it to end %q", st.name, err, st.want)
		}
	}
	if k := c.known(); len(k.messages) != 2 || string(k.messages[0]) != a || string(k.messages[1]) != b || len(k.tools) != 1 {
		t.Errorf("kept %q and %q, want the last accepted request's elements", k.messages, k.tools)
	}
	// A request over maxModelChecked keeps nothing: serve holds one
	// request per session, so its bound is serve's memory per session.
	c.keep(make([]byte, maxModelChecked+1), modelElements{messages: [][]byte{[]byte(a)}})
	if k := c.known(); len(k.messages) != 0 {
		t.Errorf("a request of %d bytes kept %d elements", maxModelChecked+1, len(k.messages))
	}
	// What is kept is trusted as checked: an element kept at its place is
	// not walked again (here one planted in the kept set that the check
	// would refuse), while the same bytes at another place are.
	c.kept.messages = [][]byte{[]byte(badNew)}
	if _, err := checkModelRequest(json.RawMessage(`{"messages":[`+badNew+`]}`), "m", &c); err != nil {
		t.Errorf("a kept element was checked again: %v", err)
	}
	c.kept.messages = [][]byte{[]byte(a)}
	if _, err := checkModelRequest(json.RawMessage(`{"messages":[`+a+`,`+badNew+`]}`), "m", &c); err == nil {
		t.Error("an element at a place that kept nothing like it was passed over")
	}
}

// The body serve sends is the child's request with serve's model name
// first and the child's "model" gone, wherever the child put it.
func TestModelBodyAroundModel(t *testing.T) {
	tests := []struct{ req, want string }{
		{`{"model":"","messages":[]}`, `{"model":"m","messages":[]}`},
		{`{"model":null}`, `{"model":"m"}`},
		{`{"messages":[],"stream":true}`, `{"model":"m","messages":[],"stream":true}`},
		{`{ }`, `{"model":"m"}`},
		{`{"messages":[],"model":"","stream":true}`, `{"model":"m","messages":[],"stream":true}`},
		{`{"stream":true , "model":null}`, `{"model":"m","stream":true}`},
		{`{ "model" : "" , "messages" : [ ] }`, `{"model":"m","messages":[ ]}`},
	}
	for _, tt := range tests {
		body, err := checkModelRequest(json.RawMessage(tt.req), "m", nil)
		if err != nil || string(body) != tt.want {
			t.Errorf("%s: body %s %v, want %s", tt.req, body, err, tt.want)
		}
	}
}
