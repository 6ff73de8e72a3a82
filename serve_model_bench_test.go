// serve_model_bench_test.go measures serve's model path in one process: a
// child's model call through the JSON-RPC channel to serve, serve's check of
// the request and its HTTP call to a local streaming chat completions
// service, and the reply's chunks back to the child's reader; and the check
// of the request alone.
//
//	go test -run '^$' -bench 'BenchmarkServeModel' -benchmem -cpuprofile cpu.out .
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// benchModelHistory is a session's history after one tool call: the system
// prompt, the user's prompt, the assistant's call and its result.
func benchModelHistory() []message {
	return []message{
		{Role: roleSystem, Text: strings.Repeat("You are a coding agent. Follow the project's instructions. ", 20)},
		{Role: roleUser, Text: "write the file out.txt with hello"},
		{Role: roleAssistant, Calls: []toolCall{{ID: "call_1", Name: "write_file", Args: json.RawMessage(`{"file_path":"out.txt","content":"hello"}`)}}},
		{Role: roleTool, CallID: "call_1", Tool: "write_file", Result: toolResult{Status: statusCompleted, Output: "Successfully wrote out.txt"}},
	}
}

// benchModelCall is the params of a child's model call of the history above
// with the built-in tools, as the child encodes them.
func benchModelCall(b *testing.B) json.RawMessage {
	body, err := openAIRequestBody("", benchModelHistory(), offeredTools(&toolEnv{}))
	if err != nil {
		b.Fatal(err)
	}
	params, err := json.Marshal(modelCompleteParams{SessionID: "s1", PromptID: "p1", StreamID: "x", Request: body})
	if err != nil {
		b.Fatal(err)
	}
	return params
}

// BenchmarkServeModelCheck is serve's check of one child's model call and
// the body it sends the model service.
func BenchmarkServeModelCheck(b *testing.B) {
	params := benchModelCall(b)
	b.ReportMetric(float64(len(params)), "request-bytes")
	b.ReportAllocs()
	for range b.N {
		if _, _, err := decodeModelComplete(params, "serve-model"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeModelEncode is the child's encoding of one model call: the
// request body, then the params that carry it.
func BenchmarkServeModelEncode(b *testing.B) {
	history, tools := benchModelHistory(), offeredTools(&toolEnv{})
	b.ReportAllocs()
	for range b.N {
		body, err := openAIRequestBody("", history, tools)
		if err != nil {
			b.Fatal(err)
		}
		appendModelCompleteParams(promptIdentity{"s1", "p1"}, "x", body)
	}
}

// benchModelReply is a short streamed text answer with its usage.
var benchModelReply = []string{
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":"wrote "}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"out.txt"},"finish_reason":"stop"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":3000,"completion_tokens":4,"total_tokens":3004}}`,
	"[DONE]",
}

// BenchmarkServeModelRoundTrip is one model call of a child through serve:
// the child's parentModel and serve's modelComplete joined by two pipes
// with the JSON-RPC framing of the channel, and a local streaming service.
func BenchmarkServeModelRoundTrip(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", openAIEventStream)
		for _, ev := range benchModelReply {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	d, ch, s := fuzzDaemon(io.Discard)
	m, err := newOpenAIModel(openAIConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-bench-key", Model: "serve-model"})
	if err != nil {
		b.Fatal(err)
	}
	d.model = m
	s.model = sessionModel{name: m.name, callLimit: maxModelCallsPerPrompt}

	toChildR, toChildW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	toServeR, toServeW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	a := &agent{}
	pm := newParentModel(a)
	a.model = pm
	a.conn = newRPCConn(toChildR, toServeW, rpcConfig{MaxLine: acpMaxLine, OnNotify: a.handleNotify})
	ch.conn = newRPCConn(toServeR, toChildW, rpcConfig{MaxLine: maxChildLine, OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return d.modelComplete(ctx, ch, params)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.conn.serve(ctx)
	go ch.conn.serve(ctx)

	history, tools := benchModelHistory(), offeredTools(&toolEnv{})
	call := func(i int) {
		// A prompt of its own for each call: its bounds start afresh.
		jctx, stop := context.WithCancel(ctx)
		defer stop()
		job := &promptJob{id: fmt.Sprintf("p%d", i), ctx: jctx, stop: stop}
		s.mu.Lock()
		s.active = job
		s.mu.Unlock()
		turn, err := pm.next(withPromptIdentity(ctx, s.id, job.id), history, tools, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
		if turn.Text != "wrote out.txt" {
			b.Fatalf("turn text %q", turn.Text)
		}
	}
	call(-1) // the first connection
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		call(i)
	}
}

// BenchmarkServeModelChunk is one chunk of a streamed reply: serve's
// notification line, and the child's delivery of it to the reply's reader.
func BenchmarkServeModelChunk(b *testing.B) {
	data := []byte(`data: {"choices":[{"index":0,"delta":{"content":"out.txt"},"finish_reason":null}]}` + "\n\n")
	m := newParentModel(nil)
	pr, pw := io.Pipe()
	m.streams["s"] = &modelStream{mediaType: make(chan string, 1), typed: true, pr: pr, pw: pw}
	var got countWriter
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(&got, pr)
	}()
	b.ReportAllocs()
	for range b.N {
		line, err := appendRPCOut(nil, rpcOut{JSONRPC: "2.0", Method: methodModelChunk, Params: rpcCompact(appendModelChunk(nil, modelChunk{StreamID: "s", Data: data}))})
		if err != nil {
			b.Fatal(err)
		}
		params, ok := bytes.CutPrefix(line, []byte(`{"jsonrpc":"2.0","method":"`+methodModelChunk+`","params":`))
		if !ok {
			b.Fatalf("chunk line %s", line)
		}
		m.deliver(json.RawMessage(bytes.TrimSuffix(params, []byte("}\n"))))
	}
	b.StopTimer()
	pw.Close()
	<-read
	if got.n != b.N*len(data) {
		b.Fatalf("the reader got %d bytes of %d chunks of %d", got.n, b.N, len(data))
	}
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
