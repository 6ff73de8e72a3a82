// jsonrpc_test.go tests the JSON-RPC peer over real pipes: a raw peer that
// writes exact bytes and reads exact lines, and pairs of connections.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// testIOTimeout only keeps a broken test from hanging; nothing asserts it.
var testIOTimeout = testTimeout(20 * time.Second)

// wireMsg is any message a connection writes, decoded strictly.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

// checkWireLine reports whether line is one valid JSON-RPC 2.0 message as a
// peer would read it.
func checkWireLine(line []byte) (wireMsg, error) {
	var m wireMsg
	if bytes.ContainsAny(line, "\r\n") {
		return m, fmt.Errorf("raw newline inside message %q", line)
	}
	if err := decodeStrict(line, &m); err != nil {
		return m, fmt.Errorf("decode %q: %v", line, err)
	}
	if m.JSONRPC != "2.0" {
		return m, fmt.Errorf("jsonrpc %q in %q", m.JSONRPC, line)
	}
	isResponse := m.Result != nil || m.Error != nil
	switch {
	case m.Method != "" && isResponse:
		return m, fmt.Errorf("method and result in %q", line)
	case m.Method == "" && !isResponse:
		return m, fmt.Errorf("neither method nor result in %q", line)
	case isResponse && m.ID == nil:
		return m, fmt.Errorf("response without id: %q", line)
	case m.Result != nil && m.Error != nil:
		return m, fmt.Errorf("result and error in %q", line)
	}
	return m, nil
}

// rawPeer drives one rpcConn with exact bytes over os.Pipe pairs.
type rawPeer struct {
	t      *testing.T
	conn   *rpcConn
	in     *os.File // test -> conn
	out    *os.File // conn -> test
	lines  *bufio.Reader
	cancel context.CancelFunc
	done   chan error
}

func startRawPeer(t *testing.T, cfg rpcConfig) *rawPeer {
	t.Helper()
	return startRawPeerWriter(t, cfg, func(w io.Writer) io.Writer { return w })
}

// startRawPeerWriter is startRawPeer with the connection's writer wrapped.
func startRawPeerWriter(t *testing.T, cfg rpcConfig, wrap func(io.Writer) io.Writer) *rawPeer {
	t.Helper()
	connIn, testW := mustPipe(t)
	testR, connOut := mustPipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := &rawPeer{
		t:      t,
		conn:   newRPCConn(connIn, wrap(connOut), cfg),
		in:     testW,
		out:    testR,
		lines:  bufio.NewReaderSize(testR, 1<<20),
		cancel: cancel,
		done:   make(chan error, 1),
	}
	go func() { p.done <- p.conn.serve(ctx) }()
	t.Cleanup(func() {
		// Closing the read end first fails any write still pending, so
		// that handlers, and with them serve, can return.
		testR.Close()
		p.stop()
		connOut.Close()
	})
	return p
}

// stop ends the input and returns what serve returned; it may be called
// more than once.
func (p *rawPeer) stop() error {
	p.in.Close()
	select {
	case err, ok := <-p.done:
		if ok {
			close(p.done)
		}
		return err
	case <-time.After(testTimeout(testIOTimeout)):
		p.cancel()
		p.t.Fatal("serve did not return after its input ended")
		return nil
	}
}

func (p *rawPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line); err != nil {
		p.t.Fatalf("write %q: %v", line, err)
	}
}

// recv reads one output line and checks that it is valid JSON-RPC.
func (p *rawPeer) recv() wireMsg {
	p.t.Helper()
	p.out.SetReadDeadline(time.Now().Add(testIOTimeout))
	line, err := p.lines.ReadBytes('\n')
	if err != nil {
		p.t.Fatalf("read response: %v", err)
	}
	m, err := checkWireLine(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

// expectError reads one line and checks it is an error answer with id.
func (p *rawPeer) expectError(id string, code int) *rpcError {
	p.t.Helper()
	m := p.recv()
	if string(m.ID) != id || m.Error == nil || m.Error.Code != code {
		p.t.Fatalf("got id %s error %+v result %s; want id %s error %d", m.ID, m.Error, m.Result, id, code)
	}
	return m.Error
}

// expectResult reads one line and checks it is a result answer with id.
func (p *rawPeer) expectResult(id, result string) {
	p.t.Helper()
	m := p.recv()
	if string(m.ID) != id || m.Error != nil || string(m.Result) != result {
		p.t.Fatalf("got id %s error %+v result %s; want id %s result %s", m.ID, m.Error, m.Result, id, result)
	}
}

// echoHandler answers every request with its params and counts calls.
func echoHandler(calls *atomic.Int32) func(context.Context, string, json.RawMessage) (any, error) {
	return func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		calls.Add(1)
		if params == nil {
			return method, nil
		}
		return params, nil
	}
}

const probe = `{"jsonrpc":"2.0","id":"probe","method":"m","params":{"p":1}}` + "\n"

func TestRPCMalformedLines(t *testing.T) {
	tests := []struct {
		name, line string
		code       int
		id         string
	}{
		{"invalid json", `{"jsonrpc":`, rpcParseError, "null"},
		{"not json", `hello`, rpcParseError, "null"},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"m"} x`, rpcParseError, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, rpcInvalidRequest, "null"},
		{"empty batch", `[]`, rpcInvalidRequest, "null"},
		{"scalar", `42`, rpcInvalidRequest, "null"},
		{"wrong version", `{"jsonrpc":"1.0","id":7,"method":"m"}`, rpcInvalidRequest, "7"},
		{"version number", `{"jsonrpc":2.0,"id":7,"method":"m"}`, rpcInvalidRequest, "7"},
		{"missing version", `{"id":"x","method":"m"}`, rpcInvalidRequest, `"x"`},
		{"unknown field", `{"jsonrpc":"2.0","id":3,"method":"m","extra":1}`, rpcInvalidRequest, "3"},
		{"unknown field bad id", `{"jsonrpc":"2.0","id":[1],"method":"m","extra":1}`, rpcInvalidRequest, "null"},
		// encoding/json would match "Method" to method and let the last of two methods win.
		{"member name in another case", `{"jsonrpc":"2.0","id":3,"Method":"m"}`, rpcInvalidRequest, "3"},
		{"duplicate method", `{"jsonrpc":"2.0","id":8,"method":"session/cancel","method":"m"}`, rpcInvalidRequest, "8"},
		{"escaped member name", `{"jsonrpc":"2.0","\u0069d":9,"method":"m","id":9}`, rpcInvalidRequest, "9"},
		{"neither method nor result", `{"jsonrpc":"2.0","id":4}`, rpcInvalidRequest, "4"},
		{"nothing at all", `{"jsonrpc":"2.0"}`, rpcInvalidRequest, "null"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`, rpcInvalidRequest, "null"},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"m"}`, rpcInvalidRequest, "null"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, rpcInvalidRequest, "null"},
		{"fractional id wrong version", `{"jsonrpc":"1.0","id":1.5,"method":"m"}`, rpcInvalidRequest, "null"},
		{"fractional id unknown field", `{"jsonrpc":"2.0","id":1.5,"method":"m","x":1}`, rpcInvalidRequest, "null"},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"m"}`, rpcInvalidRequest, "null"},
		{"method not a string", `{"jsonrpc":"2.0","id":5,"method":5}`, rpcInvalidRequest, "5"},
		{"method null", `{"jsonrpc":"2.0","id":5,"method":null}`, rpcInvalidRequest, "5"},
		{"method empty", `{"jsonrpc":"2.0","id":5,"method":""}`, rpcInvalidRequest, "5"},
		{"scalar params", `{"jsonrpc":"2.0","id":6,"method":"m","params":3}`, rpcInvalidRequest, "6"},
		{"method with result", `{"jsonrpc":"2.0","id":8,"method":"m","result":1}`, rpcInvalidRequest, "8"},
	}
	// A method whose handler checks its params itself answers the same.
	for _, checked := range [][]string{nil, {"m"}} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s checked=%q", tt.name, checked), func(t *testing.T) {
				var calls atomic.Int32
				p := startRawPeer(t, rpcConfig{OnRequest: echoHandler(&calls), ParamsChecked: checked})
				p.send(tt.line + "\n")
				p.expectError(tt.id, tt.code)
				p.send(probe)
				p.expectResult(`"probe"`, `{"p":1}`)
				if n := calls.Load(); n != 1 {
					t.Errorf("handler ran %d times; want once, for the probe only", n)
				}
			})
		}
	}
}

// An empty method name is refused every time on one connection: the names
// a connection has read are kept (methodName), and the empty one must not
// be read as one of them the second time.
func TestRPCEmptyMethodTwice(t *testing.T) {
	var calls atomic.Int32
	p := startRawPeer(t, rpcConfig{OnRequest: echoHandler(&calls), ParamsChecked: []string{"m"}})
	for _, id := range []string{"1", "2", "3"} {
		p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"","params":[]}` + "\n")
		p.expectError(id, rpcInvalidRequest)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("a request with an empty method reached the handler %d times", n)
	}
}

// Params that are not JSON are a parse error, and reach no handler, but
// for a request whose handler checks its params itself (ParamsChecked):
// that handler gets them as bounded and refuses them.
func TestRPCParamsChecked(t *testing.T) {
	tests := []struct {
		name, line string
		code       int
		id         string
		handled    int32
	}{
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":tru}}`, rpcParseError, "null", 0},
		{"control character", `{"jsonrpc":"2.0","id":2,"method":"m","params":{"a":"` + "\x01" + `"}}`, rpcParseError, "null", 0},
		{"checked method", `{"jsonrpc":"2.0","id":3,"method":"checked","params":{"a":tru}}`, rpcInvalidParams, "3", 1},
		{"checked method, control character", `{"jsonrpc":"2.0","id":4,"method":"checked","params":{"a":"` + "\x01" + `"}}`, rpcInvalidParams, "4", 1},
		{"checked method as a notification", `{"jsonrpc":"2.0","method":"checked","params":{"a":tru}}`, rpcParseError, "null", 0},
		{"checked method, the envelope not JSON", `{"jsonrpc":"2.0","id":5,"method":"checked","params":{}`, rpcParseError, "null", 0},
		{"checked method, params with no value", `{"jsonrpc":"2.0","id":6,"method":"checked","params":}`, rpcParseError, "null", 0},
		{"checked method, params a closing bracket", `{"jsonrpc":"2.0","id":7,"method":"checked","params":]}`, rpcParseError, "null", 0},
		// The method named past the line's first bytes: the line is walked
		// as any other's.
		{"checked method named late", `{"jsonrpc":"2.0","id":8,"params":{"a":"` + strings.Repeat("x", rpcMethodPeek) + `","b":tru},"method":"checked"}`, rpcParseError, "null", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			p := startRawPeer(t, rpcConfig{ParamsChecked: []string{"checked"}, OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
				if method == "checked" {
					calls.Add(1)
					var v map[string]any
					if err := decodeStrict(params, &v); err != nil {
						return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
					}
				}
				return params, nil
			}})
			p.send(tt.line + "\n")
			p.expectError(tt.id, tt.code)
			p.send(probe)
			p.expectResult(`"probe"`, `{"p":1}`)
			if n := calls.Load(); n != tt.handled {
				t.Errorf("the checking handler ran %d times, want %d", n, tt.handled)
			}
		})
	}
}

// TestRPCNullParams: ACP's schema allows "params": null, read as absent.
func TestRPCNullParams(t *testing.T) {
	var calls atomic.Int32
	p := startRawPeer(t, rpcConfig{OnRequest: echoHandler(&calls)})
	p.send(`{"jsonrpc":"2.0","id":6,"method":"m","params":null}` + "\n")
	p.expectResult("6", `"m"`)
}

// TestRPCUnanswered sends lines that must get no answer at all; the next
// line out must be the probe's answer.
func TestRPCUnanswered(t *testing.T) {
	tests := []struct{ name, lines string }{
		{"empty lines", "\n\n"},
		{"blank line", " \t\r\n"},
		{"crlf", "\r\n"},
		{"notification", `{"jsonrpc":"2.0","method":"note","params":{}}` + "\n"},
		{"notification wrong version", `{"jsonrpc":"1.0","method":"note"}` + "\n"},
		{"notification unknown field", `{"jsonrpc":"2.0","method":"note","x":1}` + "\n"},
		{"response unknown id", `{"jsonrpc":"2.0","id":99,"result":{}}` + "\n"},
		{"response string id", `{"jsonrpc":"2.0","id":"1","result":{}}` + "\n"},
		{"response null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}` + "\n"},
		{"malformed response", `{"jsonrpc":"2.0","id":1,"result":{},"x":1}` + "\n"},
		{"cancel of unknown request", `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}` + "\n"},
		{"malformed cancel", `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"id":5}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			var notes []string
			p := startRawPeer(t, rpcConfig{
				OnRequest: echoHandler(&calls),
				OnNotify:  func(method string, _ json.RawMessage) { notes = append(notes, method) },
			})
			p.send(tt.lines)
			p.send(probe)
			p.expectResult(`"probe"`, `{"p":1}`)
			p.stop()
			if tt.name == "notification" {
				if len(notes) != 1 || notes[0] != "note" {
					t.Errorf("notifications seen %q; want [note]", notes)
				}
			} else if len(notes) != 0 {
				t.Errorf("notifications seen %q; want none", notes)
			}
		})
	}
}

func TestRPCOverlongLine(t *testing.T) {
	const max = 100
	tests := []struct {
		name, line string
		tooLong    bool
	}{
		{"exactly max", requestOfSize(max), false},
		{"exactly max with cr", requestOfSize(max-1) + "\r", false},
		{"one over max", requestOfSize(max + 1), true},
		{"far past the read buffer", requestOfSize(3 * rpcReadBuffer), true},
		{"garbage past the read buffer", strings.Repeat("\x00", 2*rpcReadBuffer+7), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			p := startRawPeer(t, rpcConfig{MaxLine: max, OnRequest: echoHandler(&calls)})
			// Writes larger than the pipe buffer block until serve reads them.
			go p.send(tt.line + "\n" + probe)
			if tt.tooLong {
				p.expectError("null", rpcParseError)
				p.expectResult(`"probe"`, `{"p":1}`)
				if n := calls.Load(); n != 1 {
					t.Errorf("handler ran %d times; want once, for the probe only", n)
				}
				return
			}
			// Both are handled concurrently; answers come in either order.
			ids := map[string]bool{}
			for range 2 {
				m := p.recv()
				if m.Error != nil {
					t.Fatalf("id %s answered %+v", m.ID, m.Error)
				}
				ids[string(m.ID)] = true
			}
			if !ids["1"] || !ids[`"probe"`] {
				t.Errorf("answered ids %v; want 1 and \"probe\"", ids)
			}
		})
	}
}

// requestOfSize returns a request with id 1 of exactly n bytes.
func requestOfSize(n int) string {
	const head, tail = `{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"`, `"}}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

func TestRPCLineReaderUnterminatedLastLine(t *testing.T) {
	var out bytes.Buffer
	var calls atomic.Int32
	in := strings.NewReader(strings.TrimSuffix(probe, "\n"))
	c := newRPCConn(in, &out, rpcConfig{OnRequest: echoHandler(&calls)})
	if err := c.serve(context.Background()); err != nil {
		t.Fatalf("serve at end of input: %v", err)
	}
	if got, want := out.String(), `{"jsonrpc":"2.0","id":"probe","result":{"p":1}}`+"\n"; got != want {
		t.Errorf("answer %q; want %q", got, want)
	}
}

func TestRPCErrorTextBounded(t *testing.T) {
	p := startRawPeer(t, rpcConfig{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"m","params":"` + strings.Repeat("é", 1000) + `"}` + "\n")
	e := p.expectError("1", rpcInvalidRequest)
	if len(e.Message) > rpcMaxErrorText+len("...") || !utf8.ValidString(e.Message) || !strings.HasSuffix(e.Message, "...") {
		t.Errorf("error message of %d bytes: %q", len(e.Message), e.Message)
	}
}

func TestRPCIDEcho(t *testing.T) {
	ids := []string{`"abc"`, `"<&>"`, `"\u0061"`, `"é\n"`, `""`, `0`, `12`, `-3`, `null`, `123456789012345678901234567890`}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			var calls atomic.Int32
			p := startRawPeer(t, rpcConfig{OnRequest: echoHandler(&calls)})
			p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"m","params":[1]}` + "\n")
			p.expectResult(id, "[1]")
			p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"nohandler","params":{},"x":0}` + "\n")
			p.expectError(id, rpcInvalidRequest)
		})
	}
}

func TestRPCHandlerAnswers(t *testing.T) {
	notFound := &rpcError{Code: -32002, Message: "not found", Data: json.RawMessage(`{"uri":"x"}`)}
	tests := []struct {
		name    string
		handler func(context.Context, string, json.RawMessage) (any, error)
		code    int
		message string
		result  string
	}{
		{"result", func(context.Context, string, json.RawMessage) (any, error) { return map[string]int{"a": 1}, nil }, 0, "", `{"a":1}`},
		{"nil result", func(context.Context, string, json.RawMessage) (any, error) { return nil, nil }, 0, "", "null"},
		{"raw result", func(context.Context, string, json.RawMessage) (any, error) {
			return json.RawMessage("\n{ \"a\" :\n [ \"<\u2028>\" ]\r\n}\n"), nil
		}, 0, "", `{"a":["\u003c\u2028\u003e"]}`},
		{"compact result", func(context.Context, string, json.RawMessage) (any, error) {
			return rpcCompact(`{"b":"<\u2028>"}`), nil
		}, 0, "", `{"b":"<\u2028>"}`},
		{"empty compact result", func(context.Context, string, json.RawMessage) (any, error) { return rpcCompact(nil), nil }, 0, "", "null"},
		{"invalid raw result", func(context.Context, string, json.RawMessage) (any, error) { return json.RawMessage("{\n"), nil },
			rpcInternalError, `encode result of "m": json: error calling MarshalJSON for type json.RawMessage: unexpected end of JSON input`, ""},
		{"rpc error as is", func(context.Context, string, json.RawMessage) (any, error) { return nil, notFound }, -32002, "not found", ""},
		{"wrapped rpc error", func(context.Context, string, json.RawMessage) (any, error) {
			return nil, fmt.Errorf("load: %w", notFound)
		}, -32002, "not found", ""},
		{"plain error", func(context.Context, string, json.RawMessage) (any, error) {
			return nil, errors.New(`read "/x": denied`)
		}, rpcInternalError, `read "/x": denied`, ""},
		{"panic", func(context.Context, string, json.RawMessage) (any, error) { panic("boom") }, rpcInternalError, `internal error: handler for "m" panicked`, ""},
		{"unencodable result", func(context.Context, string, json.RawMessage) (any, error) { return make(chan int), nil }, rpcInternalError, `encode result of "m": json: unsupported type: chan int`, ""},
		{"no handler", nil, rpcMethodNotFound, `method not found: "m"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startRawPeer(t, rpcConfig{OnRequest: tt.handler})
			for _, id := range []string{"1", "2"} { // serving continues after each
				p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"m","params":{}}` + "\n")
				if tt.code == 0 {
					p.expectResult(id, tt.result)
					continue
				}
				e := p.expectError(id, tt.code)
				if e.Message != tt.message {
					t.Errorf("message %q; want %q", e.Message, tt.message)
				}
				if tt.code == notFound.Code && string(e.Data) != string(notFound.Data) {
					t.Errorf("data %s; want %s", e.Data, notFound.Data)
				}
			}
		})
	}
}

func TestRPCCancelRequest(t *testing.T) {
	tests := []struct {
		name, id, cancelID string
		ignoreCancel       bool
		wantCode           int
	}{
		{"integer id", "9", "9", false, rpcCancelled},
		{"string id", `"a"`, `"a"`, false, rpcCancelled},
		{"string id spelled otherwise", `"a"`, `"\u0061"`, false, rpcCancelled},
		{"handler answers anyway", "9", "9", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{})
			var calls atomic.Int32
			p := startRawPeer(t, rpcConfig{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
				if method != "block" {
					return echoHandler(&calls)(ctx, method, params)
				}
				close(started)
				<-ctx.Done()
				if tt.ignoreCancel {
					return "done anyway", nil
				}
				return nil, ctx.Err()
			}})
			p.send(`{"jsonrpc":"2.0","id":` + tt.id + `,"method":"block"}` + "\n")
			<-started
			p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + tt.cancelID + `}}` + "\n")
			if tt.wantCode != 0 {
				p.expectError(tt.id, tt.wantCode)
			} else {
				p.expectResult(tt.id, `"done anyway"`)
			}
			// A second cancel finds nothing, and no second answer follows.
			p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + tt.cancelID + `}}` + "\n")
			p.send(probe)
			p.expectResult(`"probe"`, `{"p":1}`)
		})
	}
}

func TestRPCDuplicateInflightID(t *testing.T) {
	release := make(chan struct{})
	p := startRawPeer(t, rpcConfig{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if method == "block" {
			<-release
		}
		return method, nil
	}})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"block"}` + "\n")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"other"}` + "\n")
	p.expectError("1", rpcInvalidRequest)
	close(release)
	p.expectResult("1", `"block"`)
	// Once answered, the id may be used again.
	p.send(`{"jsonrpc":"2.0","id":1,"method":"again"}` + "\n")
	p.expectResult("1", `"again"`)
}

// connPair is two rpcConns talking over os.Pipe pairs.
type connPair struct {
	a, b   *rpcConn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   [2]error
}

func startPair(t testing.TB, cfgA, cfgB rpcConfig) *connPair {
	t.Helper()
	aIn, bOut := mustPipe(t)
	bIn, aOut := mustPipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := &connPair{a: newRPCConn(aIn, aOut, cfgA), b: newRPCConn(bIn, bOut, cfgB), cancel: cancel}
	p.wg.Go(func() { p.errs[0] = p.a.serve(ctx) })
	p.wg.Go(func() { p.errs[1] = p.b.serve(ctx) })
	t.Cleanup(p.stop)
	return p
}

func (p *connPair) stop() {
	p.cancel()
	p.wg.Wait()
}

func TestRPCPairCallsBothWays(t *testing.T) {
	var pair *connPair
	add := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		var xs []int
		if err := decodeStrict(params, &xs); err != nil {
			return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
		}
		switch method {
		case "add":
			return xs[0] + xs[1], nil
		case "nested": // b asks a back while a waits for b
			raw, err := pair.b.call(ctx, "add", xs)
			if err != nil {
				return nil, err
			}
			var sum int
			if err := decodeStrict(raw, &sum); err != nil {
				return nil, err
			}
			return sum * 10, nil
		}
		return nil, methodNotFound(method)
	}
	pair = startPair(t, rpcConfig{OnRequest: add}, rpcConfig{OnRequest: add})

	const n = 50
	errs := make(chan error, 3*n)
	var wg sync.WaitGroup
	for i := range n {
		for _, tc := range []struct {
			from   *rpcConn
			method string
			want   int
		}{{pair.a, "add", 2 * i}, {pair.b, "add", 2 * i}, {pair.a, "nested", 20 * i}} {
			wg.Go(func() {
				raw, err := tc.from.call(context.Background(), tc.method, []int{i, i})
				if err != nil {
					errs <- err
					return
				}
				if string(raw) != fmt.Sprint(tc.want) {
					errs <- fmt.Errorf("%s(%d,%d) = %s; want %d", tc.method, i, i, raw, tc.want)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	_, err := pair.a.call(context.Background(), "mul", []int{1, 2})
	var re *rpcError
	if !errors.As(err, &re) || re.Code != rpcMethodNotFound {
		t.Errorf("unknown method: err %v; want *rpcError %d", err, rpcMethodNotFound)
	}
}

func TestRPCNotificationsInOrder(t *testing.T) {
	var got []int
	pair := startPair(t, rpcConfig{}, rpcConfig{
		OnRequest: func(context.Context, string, json.RawMessage) (any, error) { return len(got), nil },
		OnNotify: func(method string, params json.RawMessage) {
			var p struct{ Seq int }
			if method == "seq" && decodeStrict(params, &p) == nil {
				got = append(got, p.Seq)
			}
		},
	})
	const n = 500
	for i := range n {
		if err := pair.a.notify("seq", map[string]int{"Seq": i}); err != nil {
			t.Fatal(err)
		}
	}
	// A request read after the notifications is answered after they ran.
	raw, err := pair.a.call(context.Background(), "count", nil)
	if err != nil || string(raw) != fmt.Sprint(n) {
		t.Fatalf("count = %s, %v; want %d", raw, err, n)
	}
	for i, seq := range got {
		if seq != i {
			t.Fatalf("notification %d carried %d; order lost", i, seq)
		}
	}
}

func TestRPCCallContextCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	pair := startPair(t, rpcConfig{}, rpcConfig{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if method == "slow" {
			started <- struct{}{}
			<-release
			return "late", nil
		}
		return "fast", nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	raw, err := pair.a.call(ctx, "slow", nil)
	if !errors.Is(err, context.Canceled) || raw != nil {
		t.Fatalf("call = %s, %v; want context.Canceled", raw, err)
	}
	close(release) // the late answer is dropped, not given to the next call
	raw, err = pair.a.call(context.Background(), "quick", nil)
	if err != nil || string(raw) != `"fast"` {
		t.Fatalf("next call = %s, %v; want \"fast\"", raw, err)
	}
}

func TestRPCResponses(t *testing.T) {
	tests := []struct {
		name, response string // %s is the request's id
		result         string
		code           int
		wantErr        string
	}{
		{"result", `{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, `{"ok":true}`, 0, ""},
		{"null result", `{"jsonrpc":"2.0","id":%s,"result":null}`, "null", 0, ""},
		{"error", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"auth required"}}`, "", -32000, ""},
		{"unknown field", `{"jsonrpc":"2.0","id":%s,"result":{},"x":1}`, "", 0, "malformed json-rpc response"},
		{"wrong version", `{"jsonrpc":"1.0","id":%s,"result":{}}`, "", 0, "malformed json-rpc response"},
		{"result and error", `{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":1,"message":"x"}}`, "", 0, "malformed json-rpc response"},
		{"malformed error", `{"jsonrpc":"2.0","id":%s,"error":{"code":"x"}}`, "", 0, "malformed json-rpc error response"},
		{"unknown error field", `{"jsonrpc":"2.0","id":%s,"error":{"code":1,"message":"x","y":2}}`, "", 0, "malformed json-rpc error response"},
		{"null error", `{"jsonrpc":"2.0","id":%s,"error":null}`, "", 0, "malformed json-rpc error response"},
		{"fractional code", `{"jsonrpc":"2.0","id":%s,"error":{"code":1.5,"message":"x"}}`, "", 0, "malformed json-rpc error response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startRawPeer(t, rpcConfig{OnRequest: echoHandler(new(atomic.Int32))})
			type answer struct {
				raw json.RawMessage
				err error
			}
			got := make(chan answer, 1)
			go func() {
				raw, err := p.conn.call(context.Background(), "fs/read_text_file", map[string]string{"path": "/x"})
				got <- answer{raw, err}
			}()
			req := p.recv()
			if req.Method != "fs/read_text_file" || string(req.Params) != `{"path":"/x"}` || string(req.ID) != "1" {
				t.Fatalf("request %+v", req)
			}
			p.send(`{"jsonrpc":"2.0","id":77,"result":"stray"}` + "\n")
			p.send(fmt.Sprintf(tt.response, req.ID) + "\n")
			a := <-got
			switch {
			case tt.result != "":
				if a.err != nil || string(a.raw) != tt.result {
					t.Errorf("call = %s, %v; want %s", a.raw, a.err, tt.result)
				}
			case tt.code != 0:
				var re *rpcError
				if !errors.As(a.err, &re) || re.Code != tt.code {
					t.Errorf("call err %v; want *rpcError %d", a.err, tt.code)
				}
			default:
				if a.err == nil || !strings.Contains(a.err.Error(), tt.wantErr) {
					t.Errorf("call = %s, %v; want error containing %q", a.raw, a.err, tt.wantErr)
				}
			}
			// Responses are never answered: the probe's answer comes next.
			p.send(probe)
			p.expectResult(`"probe"`, `{"p":1}`)
		})
	}
}

func TestRPCCloseFailsPendingCalls(t *testing.T) {
	for _, how := range []string{"input ends", "ctx cancelled"} {
		t.Run(how, func(t *testing.T) {
			p := startRawPeer(t, rpcConfig{})
			errs := make(chan error, 3)
			for range 3 {
				go func() {
					_, err := p.conn.call(context.Background(), "never", nil)
					errs <- err
				}()
			}
			for range 3 {
				p.recv()
			}
			var serveErr error
			if how == "input ends" {
				serveErr = p.stop()
				if serveErr != nil {
					t.Errorf("serve at end of input = %v; want nil", serveErr)
				}
			} else {
				p.cancel()
				serveErr = p.stop()
				if !errors.Is(serveErr, context.Canceled) {
					t.Errorf("serve after cancel = %v; want context.Canceled", serveErr)
				}
			}
			for range 3 {
				if err := <-errs; !errors.Is(err, errConnClosed) {
					t.Errorf("pending call = %v; want errConnClosed", err)
				}
			}
			_, err := p.conn.call(context.Background(), "after", nil)
			if !errors.Is(err, errConnClosed) || err.Error() != `call "after": json-rpc connection closed` {
				t.Errorf("call after close = %v", err)
			}
		})
	}
}

// TestRPCServeWaitsForHandlers checks that serve cancels every handler,
// waits for it, and leaves no goroutine behind.
func TestRPCServeWaitsForHandlers(t *testing.T) {
	baseline := runtime.NumGoroutine()
	func() {
		const n = 20
		var started sync.WaitGroup
		started.Add(n)
		var finished atomic.Int32
		p := startRawPeer(t, rpcConfig{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			started.Done()
			<-ctx.Done()
			time.Sleep(time.Millisecond) // a handler still cleaning up
			finished.Add(1)
			return nil, ctx.Err()
		}})
		for i := range n {
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block"}`+"\n", i))
		}
		started.Wait()
		p.stop()
		if got := finished.Load(); got != n {
			t.Errorf("serve returned with %d of %d handlers finished", got, n)
		}
	}()
	deadline := time.Now().Add(testIOTimeout)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > baseline {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after serve returned; baseline %d\n%s", got, baseline, buf[:runtime.Stack(buf, true)])
	}
}

// chunkWriter writes in small pieces, yielding between them, as a socket or
// a pipe past its atomic size may; *os.File and io.Pipe would serialize
// whole writes themselves and hide a missing lock.
type chunkWriter struct{ w io.Writer }

func (c chunkWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), 512)
		m, err := c.w.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		b = b[k:]
		runtime.Gosched()
	}
	return n, nil
}

func TestRPCConcurrentResponsesDoNotInterleave(t *testing.T) {
	big := strings.Repeat("x", 16<<10)
	p := startRawPeerWriter(t, rpcConfig{OnRequest: func(context.Context, string, json.RawMessage) (any, error) {
		return big, nil
	}}, func(w io.Writer) io.Writer { return chunkWriter{w} })
	const n = 64
	go func() {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"m"}`+"\n", i)
		}
		io.WriteString(p.in, b.String())
	}()
	seen := make(map[string]bool)
	for range n {
		m := p.recv()
		if m.Error != nil || string(m.Result) != `"`+big+`"` {
			t.Fatalf("id %s: error %+v, result of %d bytes", m.ID, m.Error, len(m.Result))
		}
		seen[string(m.ID)] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct ids answered; want %d", len(seen), n)
	}
}

func TestRPCWriteErrorsReturned(t *testing.T) {
	r, w := mustPipe(t)
	r.Close()
	c := newRPCConn(strings.NewReader(""), w, rpcConfig{})
	if err := c.notify("x", nil); err == nil || !strings.HasPrefix(err.Error(), `notify "x": write json-rpc message: `) {
		t.Errorf("notify to a closed pipe = %v", err)
	}
	if _, err := c.call(context.Background(), "y", nil); err == nil || !strings.HasPrefix(err.Error(), `call "y": write json-rpc message: `) {
		t.Errorf("call to a closed pipe = %v", err)
	}
	if err := c.notify("x", make(chan int)); err == nil || !strings.Contains(err.Error(), "encode json-rpc message") {
		t.Errorf("notify with unencodable params = %v", err)
	}
}

func TestRPCOutgoingMessagesAreOneLine(t *testing.T) {
	var out bytes.Buffer
	c := newRPCConn(strings.NewReader(""), &out, rpcConfig{})
	params := map[string]any{"text": "line1\nline2\r\n", "raw": json.RawMessage("{\n  \"a\" : 1\n}"), "html": "<&>"}
	if err := c.notify("session/update", params); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","method":"session/update","params":{"html":"<&>","raw":{"a":1},"text":"line1\nline2\r\n"}}` + "\n"
	if out.String() != want {
		t.Errorf("wire %q; want %q", out.String(), want)
	}
}

// TestRPCLinesAfterLongAndFailedOnes: whatever came before, each line on
// the wire is the one its message makes, whole: after a line longer than
// the buffers kept for reuse, after one that failed to encode, and with
// compact params that shrink.
func TestRPCLinesAfterLongAndFailedOnes(t *testing.T) {
	var out bytes.Buffer
	c := newRPCConn(strings.NewReader(""), &out, rpcConfig{})
	long := strings.Repeat("x", rpcPooledLine+1)
	sends := []struct {
		params any
		want   string // "" when the message fails to encode
	}{
		{map[string]string{"a": long}, `{"jsonrpc":"2.0","method":"n","params":{"a":"` + long + `"}}`},
		{rpcCompact(`{"b":"` + long[:100] + `"}`), `{"jsonrpc":"2.0","method":"n","params":{"b":"` + long[:100] + `"}}`},
		{json.RawMessage(`{"c":`), ""},
		{rpcCompact(`[1]`), `{"jsonrpc":"2.0","method":"n","params":[1]}`},
		{json.RawMessage(" [ 2 ] "), `{"jsonrpc":"2.0","method":"n","params":[2]}`},
	}
	for _, s := range sends {
		out.Reset()
		err := c.notify("n", s.params)
		switch {
		case s.want == "" && (err == nil || !strings.HasPrefix(err.Error(), `notify "n": encode json-rpc message: params of "n": `)):
			t.Errorf("notify with params %v = %v; want an encode error", s.params, err)
		case s.want != "" && err != nil:
			t.Errorf("notify: %v", err)
		case out.String() != s.want+strings.Repeat("\n", min(len(s.want), 1)):
			t.Errorf("wire %.200q; want %.200q", out.String(), s.want)
		}
	}
}

var fuzzSeeds = []string{
	probe,
	`{"jsonrpc":"2.0","method":"n","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":"x","method":"$/cancel_request","params":{"requestId":"x"}}`,
	`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"m"}]`,
	`{"jsonrpc":"1.0","id":{},"method":"m"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"m","x":1}`,
	`{"jsonrpc":"2.0","id":"\u2028<","method":"m","params":"s"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"m\"}",
	`{"jsonrpc":`,
	"\n\n\r\n",
	strings.Repeat("a", 300),
}

// FuzzRPCLine feeds arbitrary bytes as input lines: serve must not panic and
// every line it writes must be a valid JSON-RPC response.
func FuzzRPCLine(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		c := newRPCConn(bytes.NewReader(append(data, '\n')), &out, rpcConfig{
			MaxLine: 256,
			OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
				if method == "panic" {
					panic("boom")
				}
				return params, nil
			},
			OnNotify: func(string, json.RawMessage) {},
		})
		if err := c.serve(context.Background()); err != nil {
			t.Fatalf("serve: %v", err)
		}
		for line := range bytes.Lines(out.Bytes()) {
			m, err := checkWireLine(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil {
				t.Fatal(err)
			}
			if m.Method != "" {
				t.Fatalf("serve sent a request or notification: %q", line)
			}
		}
	})
}

func BenchmarkRPCCall(b *testing.B) {
	pair := startPair(b, rpcConfig{}, rpcConfig{OnRequest: func(_ context.Context, _ string, params json.RawMessage) (any, error) {
		return params, nil
	}})
	params := map[string]string{"sessionId": "s1", "toolName": "run_shell_command"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pair.a.call(ctx, "_qwen/control/external_tool_guard/prepare", params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRPCCallPrepare is a call carrying the child's prepare request,
// its params built by appendGuardPrepareParams.
func BenchmarkRPCCallPrepare(b *testing.B) {
	pair := startPair(b, rpcConfig{}, rpcConfig{OnRequest: func(context.Context, string, json.RawMessage) (any, error) {
		return map[string]any{"allowed": true}, nil
	}})
	args, err := canonicalArgumentBytes(map[string]any{"command": "ls -la /tmp", "description": "list the files", "timeout": 120000})
	if err != nil {
		b.Fatal(err)
	}
	req := GuardRequest{SessionID: "5f0c6a1e-8d0b-4b8e-9a53-6f6c1f0b7a11", PromptID: "p-1", ToolCallID: "call-1", ToolName: "run_shell_command"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pair.a.call(ctx, methodGuardPrepare, rpcCompact(appendGuardPrepareParams(req, args))); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRPCCallAnsweredBeforeNextLine: what a call's answered hook records is
// in place for every message the peer wrote after its answer, in the same
// write, whatever the goroutines' timing: a request's handler and a
// notification both find it. A malformed answer and the end of the
// connection run it too; an answer to another call does not.
func TestRPCCallAnsweredBeforeNextLine(t *testing.T) {
	for _, tt := range []struct {
		name, answer string // %s is the call's id
		end          bool   // end the input instead of answering
	}{
		{"result", `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, false},
		{"error", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"x"}}`, false},
		{"malformed", `{"jsonrpc":"2.0","id":%s,"result":{},"x":1}`, false},
		{"connection ends", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var done atomic.Bool
			seen := make(chan string, 2)
			p := startRawPeer(t, rpcConfig{
				OnRequest: func(ctx context.Context, method string, _ json.RawMessage) (any, error) {
					seen <- fmt.Sprintf("request %v", done.Load())
					return "ok", nil
				},
				OnNotify: func(method string, _ json.RawMessage) { seen <- fmt.Sprintf("notify %v", done.Load()) },
			})
			var runs atomic.Int32
			errc := make(chan error, 1)
			go func() {
				_, err := p.conn.callAnswered(context.Background(), "session/prompt", nil, func() {
					runs.Add(1)
					done.Store(true)
				})
				errc <- err
			}()
			req := p.recv()
			// An answer to a call nobody made runs nothing.
			p.send(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n")
			if tt.end {
				p.stop()
				<-errc
				if runs.Load() != 1 {
					t.Errorf("answered ran %d times at the end of the connection, want 1", runs.Load())
				}
				return
			}
			p.send(fmt.Sprintf(tt.answer, req.ID) + "\n" +
				`{"jsonrpc":"2.0","id":"after","method":"_qwen/control/external_tool_guard/prepare","params":{}}` + "\n" +
				`{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n")
			<-errc
			for range 2 {
				select {
				case got := <-seen:
					if !strings.HasSuffix(got, "true") {
						t.Errorf("%s: the message after the answer ran before answered", got)
					}
				case <-time.After(testTimeout(testIOTimeout)):
					t.Fatal("the messages after the answer were not handled")
				}
			}
			if runs.Load() != 1 {
				t.Errorf("answered ran %d times, want 1", runs.Load())
			}
		})
	}
}

// gateWriter holds its first write until release is closed, and records
// what each write carried.
type gateWriter struct {
	entered chan struct{} // closed when the first write has begun
	release chan struct{}
	mu      sync.Mutex
	writes  []string
}

func (g *gateWriter) Write(b []byte) (int, error) {
	g.mu.Lock()
	first := len(g.writes) == 0
	g.writes = append(g.writes, string(b))
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return len(b), nil
}

func (g *gateWriter) written() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.writes)
}

// Lines sent while a write is in progress go out whole, each once, in one
// write when it ends; no sender returns before its line is written.
func TestRPCSendsQueuedBehindAWriteGoOutTogether(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	c := newRPCConn(strings.NewReader(""), g, rpcConfig{})
	errs := make(chan error, 9)
	go func() { errs <- c.notify("first", nil) }()
	select {
	case <-g.entered:
	case <-time.After(testIOTimeout):
		t.Fatal("the first write never began")
	}
	const queued = 8
	var returned atomic.Int32
	for i := range queued {
		go func() {
			err := c.notify("queued", map[string]int{"n": i})
			returned.Add(1)
			errs <- err
		}()
	}
	// Wait until every queued line is in the batch, then check that no
	// sender has returned while the write ahead of it is held.
	deadline := time.Now().Add(testIOTimeout)
	for {
		c.wmu.Lock()
		n := 0
		if c.queued != nil {
			n = bytes.Count(c.queued.lines, []byte("\n"))
		}
		c.wmu.Unlock()
		if n == queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lines queued", n, queued)
		}
		time.Sleep(time.Millisecond)
	}
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d senders returned before their line was written", n)
	}
	close(g.release)
	for range queued + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	writes := g.written()
	if len(writes) != 2 {
		t.Fatalf("%d writes %q; want the first and one for the queued lines", len(writes), writes)
	}
	seen := map[string]bool{}
	for _, line := range strings.SplitAfter(writes[1], "\n") {
		if line == "" {
			continue
		}
		m, err := checkWireLine([]byte(strings.TrimSuffix(line, "\n")))
		if err != nil || m.Method != "queued" {
			t.Fatalf("queued line %q: %v", line, err)
		}
		seen[string(m.Params)] = true
	}
	if len(seen) != queued {
		t.Errorf("%d distinct queued lines written; want %d: %q", len(seen), queued, writes[1])
	}
	// With nothing in progress a line is written at once, on its own.
	if err := c.notify("later", nil); err != nil {
		t.Fatal(err)
	}
	if writes := g.written(); len(writes) != 3 || !strings.Contains(writes[2], `"later"`) {
		t.Errorf("writes after the batch: %q", writes[2:])
	}
}

// rpcBenchUpdate is a session/update notification as a child sends serve one
// for a tool call that edits a file: a tool_call with a diff, about 600 bytes.
const rpcBenchUpdate = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"5f0c6a1e9b7d4c2a8e3f1b0d","update":{"content":[{"newText":"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello, world\")\n\tfmt.Println(\"a second line\")\n}\n","oldText":"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n","path":"/home/user/project/cmd/hello/main.go","type":"diff"}],"kind":"edit","locations":[{"path":"/home/user/project/cmd/hello/main.go"}],"rawInput":{"content":"package main\n","file_path":"/home/user/project/cmd/hello/main.go"},"sessionUpdate":"tool_call","status":"pending","title":"WriteFile main.go","toolCallId":"write_file-1764662400123-7"}}}`

// rpcBenchPrepareAnswer is the answer to a child's prepare request.
const rpcBenchPrepareAnswer = `{"jsonrpc":"2.0","id":1,"result":{"decision":"allow","reason":"workspace write allowed by policy rule 3","requestId":"9c2f4b7a1e6d3f8a0b5c7e2d4f6a8b1c"}}`

// BenchmarkRPCDispatch is the work of reading one line of the private
// channel, past the line reader: a session/update notification handed to
// OnNotify, and a response handed to the call waiting for it.
func BenchmarkRPCDispatch(b *testing.B) {
	ctx := context.Background()
	b.Run("update", func(b *testing.B) {
		var got int
		c := newRPCConn(nil, io.Discard, rpcConfig{OnNotify: func(_ string, params json.RawMessage) { got += len(params) }})
		line := []byte(rpcBenchUpdate)
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if err := c.dispatch(ctx, line); err != nil {
				b.Fatal(err)
			}
		}
		if got == 0 {
			b.Fatal("no notification delivered")
		}
	})
	b.Run("answer", func(b *testing.B) {
		c := newRPCConn(nil, io.Discard, rpcConfig{})
		line := []byte(rpcBenchPrepareAnswer)
		reply := make(chan rpcReply, 1)
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			c.mu.Lock()
			c.pending[1] = pendingCall{reply: reply}
			c.mu.Unlock()
			if err := c.dispatch(ctx, line); err != nil {
				b.Fatal(err)
			}
			if r := <-reply; r.err != nil || r.result == nil {
				b.Fatalf("reply %+v", r)
			}
		}
	})
}

// referenceDispatch is dispatch written plainly: json.Valid over the line,
// a copy of the whole line, the envelope split by decodeWireObject, and
// version and method decoded by json.Unmarshal.
// TestRPCDispatchMatchesReference and FuzzRPCDispatch hold dispatch to its
// outcomes.
func referenceDispatch(c *rpcConn, ctx context.Context, line []byte) error {
	line = bytes.TrimSpace(line)
	switch {
	case len(line) == 0:
		return nil
	case !json.Valid(line):
		return c.sendError(nil, rpcParseError, "parse error: invalid JSON")
	case line[0] == '[':
		return c.sendError(nil, rpcInvalidRequest, "invalid request: batches are not supported")
	case line[0] != '{':
		return c.sendError(nil, rpcInvalidRequest, "invalid request: message is not an object")
	}
	line = bytes.Clone(line)
	m, err := decodeWireObject(line, "jsonrpc", "id", "method", "params", "result", "error")
	if err != nil {
		return c.rejectMalformed(line, fmt.Sprintf("invalid request: %v", err))
	}
	env := rpcEnvelope{JSONRPC: m["jsonrpc"], ID: m["id"], Method: m["method"], Params: m["params"], Result: m["result"], Error: m["error"]}
	id, idOK := rpcID(env.ID)
	var version string
	if json.Unmarshal(env.JSONRPC, &version) != nil || version != rpcVersion {
		return c.reject(env, id, fmt.Sprintf("invalid request: jsonrpc must be %q, got %s", rpcVersion, quoteRaw(env.JSONRPC)))
	}
	if !idOK {
		return c.reject(env, nil, fmt.Sprintf("invalid request: id must be a string, an integer or null, got %s", truncateForError(env.ID)))
	}
	if env.Method == nil {
		if env.Result == nil && env.Error == nil {
			return c.sendError(id, rpcInvalidRequest, "invalid request: message has neither method nor result nor error")
		}
		c.deliver(env)
		return nil
	}
	var method string
	if env.Method[0] != '"' || json.Unmarshal(env.Method, &method) != nil || method == "" {
		return c.reject(env, id, fmt.Sprintf("invalid request: method must be a non-empty string, got %s", truncateForError(env.Method)))
	}
	if env.Result != nil || env.Error != nil {
		return c.reject(env, id, fmt.Sprintf("invalid request: %q carries a result or an error", method))
	}
	if string(env.Params) == "null" {
		env.Params = nil
	}
	if env.Params != nil && env.Params[0] != '{' && env.Params[0] != '[' {
		return c.reject(env, id, fmt.Sprintf("invalid request: params of %q must be an object or an array, got %s", method, truncateForError(env.Params)))
	}
	if env.ID == nil {
		c.notified(method, env.Params)
		return nil
	}
	return c.request(ctx, id, method, env.Params)
}

// dispatchOutcome is everything a peer and the local side notice of one
// line: what is written back, notifications and requests handed on, and
// the replies calls 1 and 2 receive.
type dispatchOutcome struct {
	Err      string
	Wrote    string
	Notified []string
	Requests []string
	Replies  []string
}

// dispatchOutcomeOf runs one line through dispatch on a fresh connection
// with calls 1 and 2 pending. The line's buffer is overwritten once
// dispatch returns, as the next line does, so a member handed on without a
// copy shows.
func dispatchOutcomeOf(t testing.TB, line []byte, dispatch func(*rpcConn, context.Context, []byte) error) dispatchOutcome {
	return dispatchOutcomeIn(t, line, nil, dispatch)
}

// dispatchOutcomeIn is dispatchOutcomeOf on a connection whose handler
// checks the params of the methods checked itself (ParamsChecked).
func dispatchOutcomeIn(t testing.TB, line []byte, checked []string, dispatch func(*rpcConn, context.Context, []byte) error) dispatchOutcome {
	var out syncBuffer
	var mu sync.Mutex
	var notes, reqs [][2]any
	c := newRPCConn(nil, &out, rpcConfig{
		OnNotify: func(method string, params json.RawMessage) { notes = append(notes, [2]any{method, params}) },
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (any, error) {
			mu.Lock()
			reqs = append(reqs, [2]any{method, params})
			mu.Unlock()
			if method == "fail" {
				return nil, &rpcError{Code: 7, Message: "failed"}
			}
			return "ok", nil
		},
		ParamsChecked: checked,
	})
	replies := []chan rpcReply{make(chan rpcReply, 1), make(chan rpcReply, 1)}
	for i, ch := range replies {
		c.pending[int64(i+1)] = pendingCall{reply: ch}
	}
	buf := slices.Clone(line)
	var o dispatchOutcome
	if err := dispatch(c, context.Background(), buf); err != nil {
		o.Err = err.Error()
	}
	for i := range buf {
		buf[i] = '#'
	}
	c.handlers.Wait()
	show := func(kind string, v [2]any) string {
		raw := v[1].(json.RawMessage)
		return fmt.Sprintf("%s %q %q nil=%v", kind, v[0], raw, raw == nil)
	}
	for _, n := range notes {
		o.Notified = append(o.Notified, show("notify", n))
	}
	for _, r := range reqs {
		o.Requests = append(o.Requests, show("request", r))
	}
	for i, ch := range replies {
		select {
		case r := <-ch:
			o.Replies = append(o.Replies, fmt.Sprintf("call %d: result %q nil=%v err %v", i+1, r.result, r.result == nil, r.err))
		default:
		}
	}
	o.Wrote = out.String()
	return o
}

// checkDispatchMatches fails unless dispatch and referenceDispatch have the
// same outcome for line.
func checkDispatchMatches(t testing.TB, line []byte) {
	t.Helper()
	got := dispatchOutcomeOf(t, line, (*rpcConn).dispatch)
	want := dispatchOutcomeOf(t, line, referenceDispatch)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("line %q:\n got %+v\nwant %+v", truncateForError(line), got, want)
	}
}

// rpcDispatchLines are lines of every kind dispatch tells apart.
var rpcDispatchLines = []string{
	rpcBenchUpdate,
	rpcBenchPrepareAnswer,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"x","data":{"a":[1]}}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","Code":2}}`,
	`{"jsonrpc":"2.0","id":1,"error":"x"}`,
	`{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}`,
	`{"jsonrpc":"2.0","id":9,"result":{}}`,
	`{"jsonrpc":"2.0","id":"a","method":"m","params":{"k":[1,2,{"x":null}]}}`,
	`{"jsonrpc":"2.0","id":3,"method":"fail","params":[]}`,
	`{"jsonrpc":"2.0","id":null,"method":"m"}`,
	`{"jsonrpc":"2.0","method":"n","params":null}`,
	`{"jsonrpc":"2.0","method":"n","params":"s"}`,
	`{"jsonrpc":"2.0","method":"n","params":{"a":1,"a":2}}`,
	`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"x"}}`,
	` {"jsonrpc" : "2.0" , "method" : "n" , "params" : { } } ` + "\t",
	"\u00a0\v{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\u0085",
	// Not JSON, at the start, inside and after a member refused by name.
	`{"jsonrpc":`,
	`{"jsonrpc":"2.0","method":"n",}`,
	`{"jsonrpc":"2.0","method":"n"}}`,
	`{"jsonrpc":"2.0","method":"n"} {}`,
	`{"jsonrpc":"2.0","x":1,"method":"n","params":{"a":tru}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"n","params":[01]}`,
	`{"jsonrpc":"2.0","method":"n","params":{"s":"\q"}}`,
	`{"jsonrpc":"2.0","method":"n","params":{"s":"\u12"}}`,
	"{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"s\":\"\x01\"}}",
	`{"jsonrpc":"2.0","method":"n","params":[1.]}`,
	`{"jsonrpc":"2.0","method":"n","params":[-]}`,
	`{"jsonrpc":"2.0","method":"n","params":[1e+]}`,
	`{"jsonrpc":"2.0","method":"n","params":[-0.5E-3,1e9,0]}`,
	// Not UTF-8, which json.Valid lets through.
	"{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"s\":\"\xff\xfe\"}}",
	"{\"jsonrpc\":\"2.0\",\"method\":\"n\xff\",\"id\":1}",
	"{\"jsonrpc\":\"2.0\",\"\xffid\":1,\"method\":\"n\"}",
	"{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\xff",
	// Members refused by name: unknown, spelled otherwise, given twice,
	// the same name escaped.
	`{"jsonrpc":"2.0","id":5,"method":"n","x":1}`,
	`{"jsonrpc":"2.0","ID":5,"method":"n"}`,
	`{"jsonrpc":"2.0","id":5,"Method":"n"}`,
	`{"jsonrpc":"2.0","id":5,"id":6,"method":"n"}`,
	`{"jsonrpc":"2.0","id":1,"\u0069d":2,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`,
	`{"jsonrpc":"2.0","\u006dethod":"n","params":{}}`,
	`{"jsonrpc":"2.0","method":"n","method":"m","id":4}`,
	`{"jsonrpc":"2.0","method":"n","x":1}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"x":1}`,
	// Batches and other values.
	`[{"jsonrpc":"2.0","id":1,"method":"m"}]`,
	`[`,
	`"x"`,
	`null`,
	`12`,
	`x`,
	// Versions.
	`{"id":1,"method":"m"}`,
	`{"jsonrpc":"1.0","id":1,"method":"m"}`,
	`{"jsonrpc":2.0,"id":1,"method":"m"}`,
	`{"jsonrpc":null,"id":1,"method":"m"}`,
	`{"jsonrpc":"2\u002e0","id":1,"method":"m"}`,
	`{"jsonrpc":"2.0 ","id":1,"result":{}}`,
	// Ids.
	`{"jsonrpc":"2.0","id":1.5,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1e3,"method":"m"}`,
	`{"jsonrpc":"2.0","id":{},"method":"m"}`,
	`{"jsonrpc":"2.0","id":[1],"result":{}}`,
	`{"jsonrpc":"2.0","id":true,"method":"m"}`,
	`{"jsonrpc":"2.0","id":-1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":"\u2028<","method":"m","params":[]}`,
	`{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}`,
	// Methods.
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"2.0","id":1,"method":"\u0066ail"}`,
	`{"jsonrpc":"2.0","id":1,"method":"a\"b"}`,
	`{"jsonrpc":"2.0","id":1,"method":"\ud800"}`,
	`{"jsonrpc":"2.0","id":1,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"method":1}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`,
	`{"jsonrpc":"2.0","id":1}`,
	`{}`,
	`{"jsonrpc":"2.0","method":"` + strings.Repeat("m", 100) + `"}`,
	// Large and deep params.
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"` + strings.Repeat("é\\n", 20000) + `"}}`,
	`{"jsonrpc":"2.0","method":"n","params":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"jsonrpc":"2.0","method":"n","params":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"jsonrpc":"2.0","method":"n","params":` + strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000) + `}`,
}

// TestRPCDispatchMatchesReference: a line's outcome is the one
// referenceDispatch gives it, byte for byte on the wire, and what is handed on stays
// as read when the line's buffer is reused.
func TestRPCDispatchMatchesReference(t *testing.T) {
	for _, line := range append(slices.Clone(rpcDispatchLines), fuzzSeeds...) {
		checkDispatchMatches(t, []byte(line))
	}
	// A method read again is the same name.
	c := newRPCConn(nil, io.Discard, rpcConfig{})
	for range 2 * rpcMethodNames {
		for _, name := range []string{"session/update", "a", "\u00e9"} {
			if got, ok := c.methodName(json.RawMessage(strconv.Quote(name))); !ok || got != name {
				t.Fatalf("method %q read as %q, %v", name, got, ok)
			}
		}
	}
}

// FuzzRPCDispatch holds dispatch to referenceDispatch's outcome.
func FuzzRPCDispatch(f *testing.F) {
	for _, s := range append(slices.Clone(rpcDispatchLines), fuzzSeeds...) {
		if len(s) < 4096 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDispatchMatches(t, line)
		checkDispatchParamsChecked(t, line)
	})
}

// checkDispatchParamsChecked holds a connection whose handler checks some
// methods' params itself (ParamsChecked) to one that does not: the same
// outcome for every line that is JSON; for one that is not, at most that a
// request of such a method reaches its handler, which refuses it, where
// the other answers a parse error.
func checkDispatchParamsChecked(t testing.TB, line []byte) {
	t.Helper()
	checked := []string{"m", "fail"}
	got := dispatchOutcomeIn(t, line, checked, (*rpcConn).dispatch)
	want := dispatchOutcomeIn(t, line, nil, (*rpcConn).dispatch)
	if reflect.DeepEqual(got, want) {
		return
	}
	if json.Valid(bytes.TrimSpace(line)) {
		t.Fatalf("line %q is JSON, and a connection that lets handlers check params answers it otherwise:\n got %+v\nwant %+v", truncateForError(line), got, want)
	}
	for _, r := range got.Requests {
		if !strings.HasPrefix(r, `request "m" `) && !strings.HasPrefix(r, `request "fail" `) {
			t.Fatalf("line %q: request %s reached its handler unchecked", truncateForError(line), r)
		}
	}
	if len(want.Requests) != 0 || len(got.Notified) != len(want.Notified) {
		t.Fatalf("line %q:\n got %+v\nwant %+v", truncateForError(line), got, want)
	}
}

// encodeRPCOutReference is encoding/json's rendering of m with HTML
// escaping off, which appendRPCOut must match byte for byte. Compact
// params are raw JSON to the encoder.
func encodeRPCOutReference(m rpcOut) ([]byte, error) {
	if p, ok := m.Params.(rpcCompact); ok {
		m.Params = json.RawMessage(p)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(m)
	return b.Bytes(), err
}

// checkRPCOutMatches fails unless appendRPCOut writes what the encoder does
// for m, or fails where it fails.
func checkRPCOutMatches(t testing.TB, m rpcOut) {
	t.Helper()
	want, wantErr := encodeRPCOutReference(m)
	got, err := appendRPCOut(nil, m)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("appendRPCOut(%+v) = %q, %v; encoder %q, %v", m, got, err, want, wantErr)
	case err != nil:
		if !strings.HasPrefix(err.Error(), "encode json-rpc message: ") {
			t.Fatalf("appendRPCOut(%+v) error %q does not name the operation", m, err)
		}
	case !bytes.Equal(got, want):
		t.Fatalf("appendRPCOut(%+v)\n got %q\nwant %q", m, got, want)
	}
}

func mustMarshal(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tricky is a string every JSON writer may spell differently: HTML
// characters, the JavaScript line separators, a quote, a control character
// and a byte that is not UTF-8.
const tricky = "<>&\u2028\u2029\"\\\x01\xff é"

func TestRPCOutMatchesEncoder(t *testing.T) {
	args, err := canonicalArgumentBytes(map[string]any{"command": tricky, "n": 1.5, "list": []any{nil, true, map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	prepare := appendGuardPrepareParams(GuardRequest{SessionID: "s<1>", PromptID: tricky, ToolCallID: "c&1", ToolName: "run_shell_command"}, args)
	type structParams struct {
		A string          `json:"a"`
		B int             `json:"b,omitempty"`
		R json.RawMessage `json:"r"`
	}
	ids := []json.RawMessage{json.RawMessage("7"), json.RawMessage("-12"), json.RawMessage(`"a<b>&c"`), json.RawMessage(`"` + "\u2028" + `"`), json.RawMessage(`"\u003c"`), json.RawMessage(rpcNullID), nil}
	params := []any{
		nil,
		structParams{A: tricky, R: json.RawMessage("[ 1 ,\n 2 ]")},
		map[string]any{"z": 1, "a": "x\ny", "h": "<&>"},
		map[string]json.RawMessage{"requestId": json.RawMessage(` "x" `)},
		json.RawMessage("{ \"a\" :\n [1, \"<>&\u2028\" , {\"b\" : null} ]\t}\r\n"),
		json.RawMessage(` "` + tricky[:len(tricky)-4] + `" `),
		json.RawMessage(`"\u003c\u2028"`),
		json.RawMessage(nil),
		json.RawMessage("[]"),
		(*structParams)(nil),
		[]string{tricky},
		rpcCompact(prepare),
		rpcCompact(nil),
	}
	var msgs []rpcOut
	for _, id := range ids {
		for _, method := range []string{"m", methodGuardPrepare, tricky} {
			for _, p := range params {
				msgs = append(msgs, rpcOut{JSONRPC: rpcVersion, ID: id, Method: method, Params: p})
			}
		}
		for _, result := range []any{map[string]any{"allowed": true, "reason": tricky}, json.RawMessage("{ \"a\" : [ ] }"), tricky, nil, 0} {
			msgs = append(msgs, rpcOut{JSONRPC: rpcVersion, ID: id, Result: mustMarshal(t, result)})
		}
		for _, rerr := range []*rpcError{
			{Code: rpcInvalidParams, Message: tricky},
			{Code: rpcInternalError, Message: "", Data: json.RawMessage("{ \"k\" :\n [ 1, \"<>\" ] }")},
			{Code: 0, Message: "m", Data: json.RawMessage(`"\u2028"`)},
			methodNotFound(tricky),
		} {
			msgs = append(msgs, rpcOut{JSONRPC: rpcVersion, ID: id, Error: rerr})
		}
	}
	// Values neither writes.
	msgs = append(msgs,
		rpcOut{JSONRPC: rpcVersion, Method: "m", Params: json.RawMessage("{")},
		rpcOut{JSONRPC: rpcVersion, Method: "m", Params: json.RawMessage{}},
		rpcOut{JSONRPC: rpcVersion, Method: "m", Params: json.RawMessage("1 2")},
		rpcOut{JSONRPC: rpcVersion, Method: "m", Params: rpcCompact{}},
		rpcOut{JSONRPC: rpcVersion, Method: "m", Params: make(chan int)},
		rpcOut{JSONRPC: rpcVersion, ID: json.RawMessage("1 2"), Method: "m"},
		rpcOut{JSONRPC: rpcVersion, ID: json.RawMessage("1"), Error: &rpcError{Code: 1, Message: "m", Data: json.RawMessage("{]")}},
	)
	for _, m := range msgs {
		checkRPCOutMatches(t, m)
	}
}

// TestRPCCompactParamsAsBuilt: the params of the child's prepare request
// are compact and valid as appendGuardPrepareParams builds them, whatever
// the strings hold, so they may go on the line unchecked.
func TestRPCCompactParamsAsBuilt(t *testing.T) {
	for _, s := range []string{"", tricky, "line\nbreak", strings.Repeat("\u2028<", 50)} {
		args, err := canonicalArgumentBytes(map[string]any{s: s, "nested": map[string]any{"k": []any{s, 1e300, -0.0}}})
		if err != nil {
			t.Fatal(err)
		}
		p := appendGuardPrepareParams(GuardRequest{SessionID: s, PromptID: s, ToolCallID: s, ToolName: s}, args)
		var compact bytes.Buffer
		if err := json.Compact(&compact, p); err != nil || !bytes.Equal(compact.Bytes(), p) {
			t.Fatalf("prepare params for %q are not compact valid JSON: %q (%v)", s, p, err)
		}
	}
}

// FuzzRPCSend compares appendRPCOut with the encoder on arbitrary raw
// values as params, id, result and error data.
func FuzzRPCSend(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), "m")
	}
	f.Add([]byte("{ \"a\" :\n [1, \"<>&\u2028\" ] }"), tricky)
	f.Add([]byte(`"\u2028"`), "")
	f.Fuzz(func(t *testing.T, raw []byte, method string) {
		checkRPCOutMatches(t, rpcOut{JSONRPC: rpcVersion, ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(raw)})
		checkRPCOutMatches(t, rpcOut{JSONRPC: rpcVersion, Method: method, Params: map[string]any{method: string(raw)}})
		checkRPCOutMatches(t, rpcOut{JSONRPC: rpcVersion, ID: raw, Error: &rpcError{Code: len(raw), Message: method, Data: raw}})
		if json.Valid(raw) {
			result, err := json.Marshal(json.RawMessage(raw))
			if err != nil {
				t.Fatal(err)
			}
			checkRPCOutMatches(t, rpcOut{JSONRPC: rpcVersion, ID: json.RawMessage(`"` + strconv.Itoa(len(raw)) + `"`), Result: result})
		}
	})
}

// BenchmarkRPCOut builds the child's prepare request line and serve's
// answer to it, by appendRPCOut and by the reference encoder.
func BenchmarkRPCOut(b *testing.B) {
	args, err := canonicalArgumentBytes(map[string]any{"command": "ls -la /tmp", "description": "list the files", "timeout": 120000})
	if err != nil {
		b.Fatal(err)
	}
	req := GuardRequest{SessionID: "5f0c6a1e-8d0b-4b8e-9a53-6f6c1f0b7a11", PromptID: "p-1", ToolCallID: "call-1", ToolName: "run_shell_command"}
	result := mustMarshal(b, map[string]any{"allowed": true})
	msgs := func() [2]rpcOut {
		return [2]rpcOut{
			{JSONRPC: rpcVersion, ID: json.RawMessage("41"), Method: methodGuardPrepare, Params: rpcCompact(appendGuardPrepareParams(req, args))},
			{JSONRPC: rpcVersion, ID: json.RawMessage("41"), Result: result},
		}
	}
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, m := range msgs() {
				if _, err := encodeRPCOutReference(m); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var line []byte
		for b.Loop() {
			for _, m := range msgs() {
				if line, err = appendRPCOut(line[:0], m); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// A request answered leaves its goroutine waiting for the next, which it
// runs on the stack it grew; serve still returns with none left behind
// (TestRPCServeWaitsForHandlers). The next request may come before the
// goroutine that answered waits again, and then goes to another kept one
// or a new one: of requests one after another, some run where one before
// them ran.
func TestRPCHandlerGoroutineKept(t *testing.T) {
	goroutine := func() string {
		buf := make([]byte, 64)
		first, _, _ := bytes.Cut(buf[:runtime.Stack(buf, false)], []byte(" ["))
		return string(first) // "goroutine N"
	}
	const n = 20
	ran := make(chan string, n)
	p := startRawPeer(t, rpcConfig{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		ran <- goroutine()
		return "ok", nil
	}})
	var on []string
	for i := range n {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m"}`+"\n", i))
		p.expectResult(strconv.Itoa(i), `"ok"`)
		on = append(on, <-ran)
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(on))); len(distinct) == n {
		t.Errorf("%d requests one after another ran on %q: want a goroutine kept for the next", n, on)
	}
}
