// serve_model_bench_test.go measures serve's model path in one process: a
// child's model call through the JSON-RPC channel to serve, serve's check of
// the request and its HTTP call to a local streaming chat completions
// service, and the reply's chunks back to the child's reader; the check of
// the request alone; and, from outside, warm turns of a built binary.
//
//	go test -run '^$' -bench 'BenchmarkServeModel' -benchmem -cpuprofile cpu.out .
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchModelHistory is a session's history after one tool call: the system
// prompt, the user's prompt, the assistant's call and its result.
func benchModelHistory() []message { return benchModelExchanges(1) }

// benchModelExchanges is the system prompt and n exchanges of the turn
// harness (TestModelTurnReleaseBinary): a prompt, the assistant's
// write_file call, its result, and the assistant's text but in the last,
// which ends at the result.
func benchModelExchanges(n int) []message {
	history := []message{{Role: roleSystem, Text: strings.Repeat("You are a coding agent. Follow the project's instructions. ", 20)}}
	for i := range n {
		id := "call_" + strconv.Itoa(i)
		history = append(history,
			message{Role: roleUser, Text: "write the file out.txt with hello"},
			message{Role: roleAssistant, Calls: []toolCall{{ID: id, Name: "write_file", Args: json.RawMessage(`{"file_path":"out.txt","content":"hello"}`)}}},
			message{Role: roleTool, CallID: id, Tool: "write_file", Result: toolResult{Status: statusCompleted, Output: "Successfully wrote out.txt"}})
		if i < n-1 {
			history = append(history, message{Role: roleAssistant, Text: "done"})
		}
	}
	return history
}

// benchModelSizes are the histories the model benchmarks encode and check:
// a session's first call, and one two hundred turns on, as the turn
// harness's last turns send.
var benchModelSizes = []int{1, 200}

// benchModelCall is the params of a child's model call of n exchanges with
// the built-in tools, as the child encodes them.
func benchModelCall(b *testing.B, n int) json.RawMessage {
	body, err := openAIRequestBody("", benchModelExchanges(n), offeredTools(&toolEnv{}))
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
	for _, n := range benchModelSizes {
		b.Run("exchanges="+strconv.Itoa(n), func(b *testing.B) {
			params := benchModelCall(b, n)
			b.ReportMetric(float64(len(params)), "request-bytes")
			b.ReportAllocs()
			for range b.N {
				if _, _, err := decodeModelComplete(params, "serve-model"); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The same call in a session whose last accepted request is the
		// one before it (one exchange fewer), read as serve reads a call
		// of a session it knows (readModelCall, modelChecked).
		b.Run("exchanges="+strconv.Itoa(n)+"/kept", func(b *testing.B) {
			prev, err := decodeModelCall(benchModelCall(b, n-1))
			if err != nil {
				b.Fatal(err)
			}
			var c modelChecked
			if _, err := checkModelRequest(prev.Request, "serve-model", &c); err != nil {
				b.Fatal(err)
			}
			kept := c.known()
			params := benchModelCall(b, n)
			b.ReportMetric(float64(len(params)), "request-bytes")
			b.ReportAllocs()
			session := func(string) (string, *modelChecked, bool) { return "serve-model", &c, true }
			for range b.N {
				c.keep(prev.Request, kept)
				if _, body, err := readModelCall(params, session); err != nil || body == nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkServeModelEncode is the child's encoding of one model call's
// params, request included, into a line it reuses.
func BenchmarkServeModelEncode(b *testing.B) {
	tools := offeredTools(&toolEnv{})
	for _, n := range benchModelSizes {
		b.Run("exchanges="+strconv.Itoa(n), func(b *testing.B) {
			history := benchModelExchanges(n)
			var line []byte // the child's pooled line
			b.ReportAllocs()
			for range b.N {
				var err error
				if line, err = appendModelCompleteParams(line[:0], promptIdentity{"s1", "p1"}, "x", history, tools); err != nil {
					b.Fatal(err)
				}
			}
		})
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
	call := startModelRoundTrip(b, "sk-bench-key", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", openAIEventStream)
		for _, ev := range benchModelReply {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		}
	})
	check := func(i int) {
		turn, err := call(i)
		if err != nil {
			b.Fatal(err)
		}
		if turn.Text != "wrote out.txt" {
			b.Fatalf("turn text %q", turn.Text)
		}
	}
	check(-1) // the first connection
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		check(i)
	}
}

// startModelRoundTrip joins a child's parentModel and serve's
// modelComplete by two pipes with the channel's JSON-RPC framing, serve's
// model being service with apiKey; call(i) makes one model call of a
// prompt of its own, numbered i, with the one-exchange history.
func startModelRoundTrip(tb testing.TB, apiKey string, service http.HandlerFunc) (call func(i int) (modelTurn, error)) {
	call, _ = startModelRoundTripLines(tb, apiKey, service, nil)
	return call
}

// startModelRoundTripLines is startModelRoundTrip whose calls pass each
// text of the reply to text, and which counts the lines serve writes to the
// child.
func startModelRoundTripLines(tb testing.TB, apiKey string, service http.HandlerFunc, text func(string)) (call func(i int) (modelTurn, error), toChild *atomic.Int64) {
	srv := httptest.NewServer(service)
	tb.Cleanup(srv.Close)
	d, ch, s := fuzzDaemon(io.Discard)
	m, err := newOpenAIModel(openAIConfig{BaseURL: srv.URL + "/v1", APIKey: apiKey, Model: "serve-model"})
	if err != nil {
		tb.Fatal(err)
	}
	d.model = m
	s.model = sessionModel{name: m.name, callLimit: maxModelCallsPerPrompt}

	toChildR, toChildW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	toServeR, toServeW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	a := &agent{}
	a.conn = newRPCConn(toChildR, toServeW, rpcConfig{MaxLine: acpMaxLine, OnNotify: a.handleNotify})
	pm := newParentModel(a.conn)
	a.model = pm
	toChild = new(atomic.Int64)
	ch.conn = newRPCConn(toServeR, lineCounter{toChildW, toChild}, rpcConfig{MaxLine: maxChildLine, ParamsChecked: []string{methodModelComplete}, OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return d.modelComplete(ctx, ch, params)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	go a.conn.serve(ctx)
	go ch.conn.serve(ctx)

	history, tools := benchModelHistory(), offeredTools(&toolEnv{})
	return func(i int) (modelTurn, error) {
		// A prompt of its own for each call: its bounds start afresh.
		jctx, stop := context.WithCancel(ctx)
		defer stop()
		job := &promptJob{id: fmt.Sprintf("p%d", i), ctx: jctx, stop: stop}
		s.mu.Lock()
		s.active = job
		s.mu.Unlock()
		if text == nil {
			text = func(string) {}
		}
		return pm.next(withPromptIdentity(ctx, s.id, job.id), history, tools, text)
	}, toChild
}

// lineCounter counts the lines written through it.
type lineCounter struct {
	io.Writer
	n *atomic.Int64
}

func (w lineCounter) Write(p []byte) (int, error) {
	w.n.Add(int64(bytes.Count(p, []byte("\n"))))
	return w.Writer.Write(p)
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

// modelTurnTurns is how many warm turns TestModelTurnReleaseBinary times
// for each shape of serve.
const modelTurnTurns = 200

// modelTurnCount is modelTurnTurns, or ACPGUARD_MODEL_TURNS when set: a
// short session measures the turn before its request has grown.
func modelTurnCount(t *testing.T) int {
	v := os.Getenv("ACPGUARD_MODEL_TURNS")
	if v == "" {
		return modelTurnTurns
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 {
		t.Fatalf("ACPGUARD_MODEL_TURNS=%q: want a number of turns, at least 10", v)
	}
	return n
}

// TestModelTurnReleaseBinary times warm prompt turns of the release binary
// (or envBenchBin's, so that two builds compare in one session) from
// outside, through the host API over one kept-alive connection: serve with
// a local streaming chat completions service, two model calls per turn (a
// write_file call, then text) with the guard off and required, and the
// built-in scripted model's turn with the same write. Off by default:
//
//	ACPGUARD_LOAD=1 go test -run TestModelTurnReleaseBinary -v -count=1 .
func TestModelTurnReleaseBinary(t *testing.T) {
	skipUnlessLoad(t)
	bin := releaseBinary(t)
	forModelTurnShapes(t, func(t *testing.T, shape modelTurnShape, modelURL string, prov *testProvider) {
		timeServeShape(t, bin, shape, modelURL, prov)
	})
}

// forModelTurnShapes runs each of modelTurnShapes as a subtest, with the
// local chat completions service and the test's provider the shapes use.
func forModelTurnShapes(t *testing.T, run func(t *testing.T, shape modelTurnShape, modelURL string, prov *testProvider)) {
	t.Helper()
	model := httptest.NewServer(http.HandlerFunc(serveTwoCallTurn))
	defer model.Close()
	prov := newTestProvider(t)
	for _, shape := range modelTurnShapes {
		t.Run(shape.name, func(t *testing.T) { run(t, shape, model.URL, prov) })
	}
}

// TestModelTurnCompare times the turns of TestModelTurnReleaseBinary for
// the builds envBenchBins names, in rounds, each round running every build
// once and each build going first in turn, so that a change in the
// machine's load meets all of them; it logs each build's medians over the
// rounds and their difference from the first build's. Off by default:
//
//	ACPGUARD_LOAD=1 ACPGUARD_BENCH_BINS=/tmp/old,/tmp/new ACPGUARD_MODEL_TURNS=40 \
//	  go test -run 'TestModelTurnCompare' -v -count=1 .
func TestModelTurnCompare(t *testing.T) {
	skipUnlessLoad(t)
	bins := strings.Split(os.Getenv(envBenchBins), ",")
	if len(bins) < 2 {
		t.Skipf("%s names no two builds; set it to their paths, comma-separated", envBenchBins)
	}
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v", envBenchBins, err)
		}
	}
	rounds := benchRounds(t)
	forModelTurnShapes(t, func(t *testing.T, shape modelTurnShape, modelURL string, prov *testProvider) {
		got := make([][]modelTurnFigures, len(bins))
		for round := range rounds {
			for j := range bins {
				k := (round + j) % len(bins)
				got[k] = append(got[k], timeServeShape(t, bins[k], shape, modelURL, prov))
			}
		}
		var first modelTurnFigures
		for k, bin := range bins {
			m := medianFigures(got[k])
			if k == 0 {
				first = m
			}
			t.Logf("model-turn-compare: bin=%s shape=%s rounds=%d p50-ms=%.2f p90-ms=%.2f run-us/turn=%.0f own-run-us/turn=%.0f p50-over-first-ms=%+.2f run-over-first-us=%+.0f",
				bin, shape.name, rounds, m.p50, m.p90, m.run, m.ownRun, m.p50-first.p50, m.run-first.run)
		}
	})
}

// envBenchBins names the builds TestModelTurnCompare times, comma-separated.
const envBenchBins = "ACPGUARD_BENCH_BINS"

// benchRounds is TestModelTurnCompare's rounds: ACPGUARD_BENCH_ROUNDS, or
// six.
func benchRounds(t *testing.T) int {
	v := os.Getenv("ACPGUARD_BENCH_ROUNDS")
	if v == "" {
		return 6
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("ACPGUARD_BENCH_ROUNDS=%q: want a number of rounds, at least 1", v)
	}
	return n
}

// modelTurnFigures is what timeModelTurns measures of one session: the
// turn's p50 and p90 in ms, and the run time per turn in µs of serve with
// its children and of serve alone.
type modelTurnFigures struct{ p50, p90, run, ownRun float64 }

// medianFigures is each figure's median over runs.
func medianFigures(runs []modelTurnFigures) modelTurnFigures {
	of := func(f func(modelTurnFigures) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	return modelTurnFigures{
		p50:    of(func(r modelTurnFigures) float64 { return r.p50 }),
		p90:    of(func(r modelTurnFigures) float64 { return r.p90 }),
		run:    of(func(r modelTurnFigures) float64 { return r.run }),
		ownRun: of(func(r modelTurnFigures) float64 { return r.ownRun }),
	}
}

// timeServeShape starts serve of bin for shape, with modelURL's service
// and prov as the provider where the shape uses them, times its turns
// (timeModelTurns) and stops it.
func timeServeShape(t *testing.T, bin string, shape modelTurnShape, modelURL string, prov *testProvider) modelTurnFigures {
	t.Helper()
	const hostToken = "host-token-for-the-turn-harness"
	ws := t.TempDir()
	args := []string{"serve", "--port", "0", "--workspace", ws, "--settings", yoloSettings(t)}
	env := append(os.Environ(), envServerToken+"="+hostToken)
	if shape.guard {
		args = append(args, "--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL)
		env = append(env, envGuardToken+"="+prov.token)
	}
	if shape.model {
		env = append(env, envModelBaseURL+"="+modelURL+"/v1", envModelName+"=m")
	}
	td := startBuiltServe(t, bin, args, env)
	td.token = hostToken
	stderr, stop := td.stderr, td.stop
	defer stop()
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	turn := func() time.Duration {
		start := time.Now()
		pid := td.prompt(t, id, shape.prompt)
		evs := readSSE(t, stream, untilTurnEnd(pid))
		took := time.Since(start)
		if last := evs[len(evs)-1]; last.typ != eventTurnComplete {
			t.Fatalf("%s: turn ended with %s %s\n%s", shape.name, last.typ, last.data, stderr.String())
		}
		return took
	}
	return timeModelTurns(t, "model-turn", bin, shape.name, ws, td.pid, turn)
}

// modelTurnShape is one kind of turn the harnesses time.
type modelTurnShape struct {
	name   string
	model  bool // with the local chat completions service
	guard  bool // guard required, with the test's provider
	prompt string
}

// modelTurnShapes are the turns both harnesses time: a model call pair
// with the guard off and required, and the scripted model's one call.
var modelTurnShapes = []modelTurnShape{
	{"openai-guard-off", true, false, "write out.txt"},
	{"openai-guard-required", true, true, "write out.txt"},
	{"scripted-guard-off", false, false, `call write_file {"file_path":"out.txt","content":"x"}`},
}

// timeModelTurns runs turn 5 times to warm up, then modelTurnCount times,
// checks the turns wrote ws/out.txt, and logs and returns the p50 and p90
// under label, with the CPU time and the context switches per turn of pid
// and its descendants: figures a loaded machine moves less than it moves
// time.
func timeModelTurns(t *testing.T, label, bin, shape, ws string, pid int, turn func() time.Duration) modelTurnFigures {
	t.Helper()
	for range 5 {
		turn()
	}
	took := make([]time.Duration, 0, modelTurnCount(t))
	cpu0 := treeCPU(t, pid)
	own0, err := procOwnCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	sw0, ownSw0 := treeCtxSwitches(t, pid)
	run0, ownRun0 := treeRunTime(t, pid)
	for range cap(took) {
		took = append(took, turn())
	}
	cpu := treeCPU(t, pid) - cpu0
	own, err := procOwnCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	sw, ownSw := treeCtxSwitches(t, pid)
	run, ownRun := treeRunTime(t, pid)
	if data, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(data) != "x" {
		t.Fatalf("%s: out.txt = %q %v, want the turn's write", shape, data, err)
	}
	slices.Sort(took)
	at := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1e3 }
	perTurn := float64(len(took))
	t.Logf("%s: bin=%s shape=%s turns=%d p50-ms=%.2f p90-ms=%.2f cpu-us/turn=%.0f ctxsw/turn=%.1f own-cpu-us/turn=%.0f own-ctxsw/turn=%.1f run-us/turn=%.0f own-run-us/turn=%.0f",
		label, bin, shape, len(took), at(0.5), at(0.9), float64(cpu.Microseconds())/perTurn, float64(sw-sw0)/perTurn,
		float64((own-own0).Microseconds())/perTurn, float64(ownSw-ownSw0)/perTurn,
		float64((run-run0).Microseconds())/perTurn, float64((ownRun-ownRun0).Microseconds())/perTurn)
	return modelTurnFigures{p50: at(0.5), p90: at(0.9), run: float64((run - run0).Microseconds()) / perTurn, ownRun: float64((ownRun - ownRun0).Microseconds()) / perTurn}
}

// TestModelTurnReleaseBinaryStandalone times the same turns through a
// standalone acp of the built binary, driven as an editor drives it: the
// floor serve's turn is measured against (ACPGUARD_LOAD=1,
// ACPGUARD_BENCH_BIN).
func TestModelTurnReleaseBinaryStandalone(t *testing.T) {
	skipUnlessLoad(t)
	bin := releaseBinary(t)
	forModelTurnShapes(t, func(t *testing.T, shape modelTurnShape, modelURL string, prov *testProvider) {
		ws := t.TempDir()
		args := []string{"acp", "--settings", yoloSettings(t), "--no-user-settings"}
		env := os.Environ()
		if shape.guard {
			args = append(args, "--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL)
			env = append(env, envGuardToken+"="+prov.token)
		}
		if shape.model {
			env = append(env, envModelBaseURL+"="+modelURL+"/v1", envModelName+"=m")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		c := driveACP(t, cmd, cancel, nil, false)
		c.mustCall(methodInitialize, initializeParams(""), nil)
		sid := c.newYoloSession(ws)
		turn := func() time.Duration {
			start := time.Now()
			c.prompt(sid, shape.prompt, "")
			return time.Since(start)
		}
		timeModelTurns(t, "model-turn-acp", bin, shape.name, ws, cmd.Process.Pid, turn)
	})
}

// startBuiltServe starts bin with args and env and returns its host API
// once it printed its listening line, whose wording older builds word
// otherwise: the line's first http:// URL is the API. serve is stopped
// with SIGTERM at the end of the test, or earlier by stop.
func startBuiltServe(t *testing.T, bin string, args, env []string) *testDaemon {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	td := &testDaemon{stderr: &syncBuffer{}}
	cmd.Stderr = td.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	td.pid = cmd.Process.Pid
	var once sync.Once
	td.stop = func() error {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			err = cmd.Wait()
		})
		return err
	}
	t.Cleanup(func() { td.stop() })
	line, rerr := bufio.NewReader(out).ReadString('\n')
	at := strings.Index(line, "http://")
	if at < 0 {
		td.stop()
		t.Fatalf("serve printed %q (%v), stderr:\n%s", line, rerr, td.stderr.String())
	}
	td.url = strings.Fields(line[at:])[0]
	return td
}

// serveTwoCallTurn is a chat completions service whose turn is two calls:
// a write_file call while the last message is not a tool result, then text.
func serveTwoCallTurn(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "want a chat completions request", http.StatusBadRequest)
		return
	}
	events := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"write_file","arguments":"{\"file_path\":\"out.txt\",\"content\":\"x\"}"}}]},"finish_reason":"tool_calls"}]}`,
	}
	if req.Messages[len(req.Messages)-1].Role == roleTool {
		events = []string{`{"choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`}
	}
	events = append(events, `{"choices":[],"usage":{"prompt_tokens":3000,"completion_tokens":4,"total_tokens":3004}}`, openAIDone)
	w.Header().Set("Content-Type", openAIEventStream)
	for _, ev := range events {
		fmt.Fprintf(w, "data: %s\n\n", ev)
		w.(http.Flusher).Flush()
	}
}
