package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Both transports: the handshake lists the tool, one allowed call is one
// tools/call on the server's side and its result comes back; the headers
// go out with $VAR expanded, with the session id and protocol version.
func TestRemoteMCPTransports(t *testing.T) {
	tests := []struct {
		name       string
		transport  string
		path       string
		sseAnswers bool
	}{
		{"streamable HTTP, JSON answers", mcpTransportHTTP, "/mcp", false},
		{"streamable HTTP, event stream answers", mcpTransportHTTP, "/mcp", true},
		{"HTTP+SSE", mcpTransportSSE, "/sse", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRemoteMCP(t)
			f.sseAnswers = tt.sseAnswers
			env := newProcEnv([]string{"PATH=/bin", "REMOTE_TOKEN=s3cret"})
			cfg := mcpServerConfig{Name: "r", Transport: tt.transport, URL: f.srv.URL + tt.path,
				Headers: []mcpHeader{{Name: "Authorization", Value: "Bearer ${REMOTE_TOKEN}"}, {Name: "X-Plain", Value: "$REMOTE_TOKEN!"}}}
			s, tools, err := startRemoteForTest(t, cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) != 1 || tools[0].Name != "echo" {
				t.Fatalf("tools = %+v", tools)
			}
			res := s.callTool(context.Background(), "echo", map[string]any{"text": "hi"})
			if res.Status != statusCompleted || res.Output != "echo: hi" {
				t.Fatalf("result = %+v", res)
			}
			if n := f.calls(mcpMethodToolsCall); n != 1 {
				t.Errorf("the server received %d tools/call, want 1", n)
			}
			h := f.headersOf(mcpMethodToolsCall)
			if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Plain") != "s3cret!" {
				t.Errorf("headers = %v", h)
			}
			if tt.transport == mcpTransportHTTP && (h.Get(mcpHeaderSessionID) != fakeRemoteSession || h.Get(mcpHeaderProtocol) != mcpProtocolVersion) {
				t.Errorf("session id %q, protocol %q", h.Get(mcpHeaderSessionID), h.Get(mcpHeaderProtocol))
			}
			// The variable is held: no child environment carries it.
			if got := strings.Join(env.childEnv("REMOTE_TOKEN=again"), "\n"); strings.Contains(got, "REMOTE_TOKEN") {
				t.Errorf("child environment holds the header's variable: %q", got)
			}
		})
	}
}

// A call whose transport fails, or whose session the server ended, fails
// with its outcome unknown and is never sent again; the server is not used
// for the rest of the session.
func TestRemoteMCPNoReplay(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request) bool
		want   string
	}{
		{"session id expired", func(w http.ResponseWriter, _ *http.Request) bool {
			w.WriteHeader(http.StatusNotFound)
			return true
		}, "the server ended the MCP session (HTTP 404 to its session id); the session is not renewed and no call is resent"},
		{"connection dropped", func(w http.ResponseWriter, _ *http.Request) bool {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return true
		}, "EOF"},
		{"server error", func(w http.ResponseWriter, _ *http.Request) bool {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return true
		}, `the server answered HTTP 503: "overloaded\n"`},
	}
	for _, transport := range []string{mcpTransportHTTP, mcpTransportSSE} {
		for _, tt := range tests {
			if transport == mcpTransportSSE && tt.name == "session id expired" {
				continue // HTTP+SSE has no session id header
			}
			t.Run(transport+" "+tt.name, func(t *testing.T) {
				f := newFakeRemoteMCP(t)
				f.onCall = tt.answer
				path := "/mcp"
				if transport == mcpTransportSSE {
					path = "/sse"
				}
				s, _, err := startRemoteForTest(t, mcpServerConfig{Name: "r", Transport: transport, URL: f.srv.URL + path}, newProcEnv(nil))
				if err != nil {
					t.Fatal(err)
				}
				res := s.callTool(context.Background(), "echo", map[string]any{"text": "once"})
				if res.Status != statusFailed || !strings.Contains(res.Output, "the outcome is unknown and the call was not retried") || !strings.Contains(res.Output, tt.want) {
					t.Errorf("result = %+v, want a failure with %q", res, tt.want)
				}
				res = s.callTool(context.Background(), "echo", map[string]any{"text": "twice"})
				if res.Status != statusFailed || !strings.Contains(res.Output, "the call was not sent") {
					t.Errorf("second call = %+v", res)
				}
				if n := f.calls(mcpMethodToolsCall); n != 1 {
					t.Errorf("the server received %d tools/call, want 1", n)
				}
			})
		}
	}
}

// A server is reached only where the operator said: a redirect, an
// endpoint of another origin and a certificate no root signs all fail the
// start, and the headers go nowhere else.
func TestRemoteMCPRefusesOtherAddresses(t *testing.T) {
	other := newFakeRemoteMCP(t)
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(tls.Close)
	tests := []struct {
		name  string
		setup func(f *fakeRemoteMCP) mcpServerConfig
		want  string
	}{
		{"redirect", func(f *fakeRemoteMCP) mcpServerConfig {
			mux := http.NewServeMux()
			mux.Handle("/", http.RedirectHandler(other.srv.URL+"/mcp", http.StatusTemporaryRedirect))
			r := httptest.NewServer(mux)
			t.Cleanup(r.Close)
			return mcpServerConfig{Name: "r", Transport: mcpTransportHTTP, URL: r.URL + "/mcp"}
		}, "redirects are refused; configure the final address"},
		{"endpoint of another origin", func(f *fakeRemoteMCP) mcpServerConfig {
			f.endpoint = other.srv.URL + "/message?session=s1"
			return mcpServerConfig{Name: "r", Transport: mcpTransportSSE, URL: f.srv.URL + "/sse"}
		}, "is not of the server's origin"},
		{"certificate not verified", func(*fakeRemoteMCP) mcpServerConfig {
			return mcpServerConfig{Name: "r", Transport: mcpTransportHTTP, URL: tls.URL + "/mcp"}
		}, "certificate signed by unknown authority"},
		{"variable not set", func(f *fakeRemoteMCP) mcpServerConfig {
			return mcpServerConfig{Name: "r", Transport: mcpTransportHTTP, URL: f.srv.URL + "/mcp", Headers: []mcpHeader{{Name: "X-Key", Value: "$NOT_SET_ANYWHERE"}}}
		}, `header "X-Key" names variable "NOT_SET_ANYWHERE", which is not set in acpguard's environment; set it or change the header`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRemoteMCP(t)
			_, _, err := startRemoteForTest(t, tt.setup(f), newProcEnv(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("start: %v, want %q", err, tt.want)
			}
			if n := other.calls(mcpMethodInitialize); n != 0 {
				t.Errorf("the other server received %d initialize", n)
			}
		})
	}
}

// The event stream reader: the vectors under testdata/mcp/sse are streams
// and the events read from them.
func TestMCPEventReader(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "mcp", "sse", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no vectors")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			stream, want, _ := strings.Cut(string(b), "\n---\n")
			r := newMCPEventReader(strings.NewReader(stream), 64)
			var got []string
			for {
				ev, err := r.next()
				if err != nil {
					got = append(got, "error: "+err.Error())
					break
				}
				j, _ := json.Marshal(ev)
				got = append(got, string(j))
			}
			if g := strings.Join(got, "\n"); g != strings.TrimSpace(want) {
				t.Errorf("events:\n%s\nwant:\n%s", g, want)
			}
		})
	}
}

// mcpMessageLines: one message or a batch of objects, each one line.
func TestMCPMessageLines(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{`{"jsonrpc":"2.0", "id":1,
 "result":{}}`, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", ""},
		{`[{"a":1},{"b":"x\ny"}]`, "{\"a\":1}\n{\"b\":\"x\\ny\"}\n", ""},
		{`[]`, "", "an empty batch"},
		{`[1]`, "", "message 0 is not a JSON object"},
		{`"x"`, "", "message 0 is not a JSON object"},
		{`{"a":1}{"b":2}`, "", "not JSON"},
		{``, "", "empty message"},
	}
	for _, tt := range tests {
		got, err := mcpMessageLines([]byte(tt.in))
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%q: %q %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

// serve runs a child's remote call only as the bridge allowed it: the same
// prompt, tool and arguments (as values: key order and spacing aside),
// each decision once.
func TestServeMCPAllowedDecisions(t *testing.T) {
	s := &hostSession{}
	s.allowMCP("p1", "mcp__remote__echo", json.RawMessage(`{"text":"yes","n":1}`))
	s.allowMCP("p1", "read_file", json.RawMessage(`{"absolute_path":"/x"}`)) // not an MCP tool: not kept
	canon := func(raw string) []byte {
		b, err := mcpCanonical([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name, prompt, tool, args string
		want                     bool
	}{
		{"another prompt", "p2", "mcp__remote__echo", `{"text":"yes","n":1}`, false},
		{"another tool", "p1", "mcp__remote__other", `{"text":"yes","n":1}`, false},
		{"other arguments", "p1", "mcp__remote__echo", `{"text":"no","n":1}`, false},
		{"the allowed call, keys reordered", "p1", "mcp__remote__echo", `{ "n":1, "text":"yes" }`, true},
		{"the same call again", "p1", "mcp__remote__echo", `{"text":"yes","n":1}`, false},
		{"a built-in tool", "p1", "read_file", `{"absolute_path":"/x"}`, false},
	}
	for _, tt := range tests {
		if got := s.remoteMCP().takeAllowed(tt.prompt, tt.tool, canon(tt.args)); got != tt.want {
			t.Errorf("%s: allowed = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Arguments the provider could read otherwise than serve never match:
	// a member given twice or bytes that are not UTF-8 are refused, and
	// numbers compare as written, never rounded.
	for _, raw := range []string{`{"text":"no","text":"yes"}`, "{\"text\":\"\xff\"}"} {
		if _, err := mcpCanonical([]byte(raw)); err == nil {
			t.Errorf("arguments %q read, want them refused", raw)
		}
	}
	if string(canon(`{"n":9007199254740993}`)) == string(canon(`{"n":9007199254740992}`)) {
		t.Error("two integers past float64's precision compare equal")
	}
}

// A remote MCP POST has no GetBody, so net/http cannot send it twice
// (after a lost connection, an HTTP/2 stream reset or an idempotency key).
func TestMCPPostNotReplayable(t *testing.T) {
	req, err := newMCPPost(context.Background(), "http://127.0.0.1:1/mcp", []byte(`{"jsonrpc":"2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody != nil || req.ContentLength != int64(len(`{"jsonrpc":"2.0"}`)) {
		t.Errorf("GetBody set %v, ContentLength %d", req.GetBody != nil, req.ContentLength)
	}
	for _, h := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		if !slices.Contains(mcpOwnHeaders, h) {
			t.Errorf("a configured %s header is not refused", h)
		}
	}
}

// serve runs a child's call only for a tool the server listed under the
// name the decision named: a tool the settings leave out, or one of two
// whose names read alike ("t.x" and "t_x" are both mcp__remote__t_x),
// cannot be reached by naming it, whatever the child asks.
func TestServeMCPOffers(t *testing.T) {
	tools := []mcpToolDef{{Name: "echo"}, {Name: "t.x"}, {Name: "t_x"}, {Name: "secret"}, {Name: "add"}}
	tests := []struct {
		name string
		cfg  mcpServerConfig
		want map[string]string
	}{
		{"all listed", mcpServerConfig{Name: "remote"}, map[string]string{"mcp__remote__echo": "echo", "mcp__remote__secret": "secret", "mcp__remote__add": "add"}},
		{"excludeTools", mcpServerConfig{Name: "remote", ExcludeTools: []string{"secret"}}, map[string]string{"mcp__remote__echo": "echo", "mcp__remote__add": "add"}},
		{"includeTools", mcpServerConfig{Name: "remote", IncludeTools: []string{"echo", "t.x(x)"}}, map[string]string{"mcp__remote__echo": "echo", "mcp__remote__t_x": "t.x"}},
	}
	for _, tt := range tests {
		if got := mcpOffers(tt.cfg, tools); !maps.Equal(got, tt.want) {
			t.Errorf("%s: offers = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A call cancelled while the server holds its POST open returns at once,
// and its POST ends with it; once the server is stopped, none of its
// connections stays open, kept-alive ones included.
func TestRemoteMCPCancelEndsPost(t *testing.T) {
	for _, tt := range []struct{ transport, path string }{{mcpTransportHTTP, "/mcp"}, {mcpTransportSSE, "/sse"}} {
		t.Run(tt.transport, func(t *testing.T) {
			f := newFakeRemoteMCP(t)
			held, ended := make(chan struct{}), make(chan struct{})
			f.onCall = func(w http.ResponseWriter, r *http.Request) bool {
				close(held)
				<-r.Context().Done()
				close(ended)
				return true
			}
			s, _, err := startRemoteForTest(t, mcpServerConfig{Name: "r", Transport: tt.transport, URL: f.srv.URL + tt.path}, newProcEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan toolResult, 1)
			go func() { done <- s.callTool(ctx, "echo", map[string]any{"text": "held"}) }()
			wait := func(ch <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-ch:
				case <-time.After(testTimeout(10 * time.Second)):
					t.Fatalf("%s: not within the test's timeout", what)
				}
			}
			wait(held, "the server receives the call")
			cancel()
			select {
			case res := <-done:
				if res.Status != statusCancelled {
					t.Errorf("result = %+v, want cancelled", res)
				}
			case <-time.After(testTimeout(10 * time.Second)):
				t.Fatal("the cancelled call did not return")
			}
			wait(ended, "the held POST ends with its call")
			s.stop(errSessionEnded)
			f.waitConnsClosed(t)
		})
	}
}

// A child that names a tool the server did not offer under the decision's
// name is refused before any call, and the decision stays unused: "t.x"
// reads as mcp__remote__t_x, but the server offered only "t_x" under it.
func TestServeMCPCallNamesAnOfferedTool(t *testing.T) {
	d, ch, s := fuzzDaemon(io.Discard)
	m := s.remoteMCP()
	m.servers["remote"] = &mcpServer{name: "remote"} // never called: every call here is refused
	m.offers = map[string]map[string]string{"remote": mcpOffers(mcpServerConfig{Name: "remote"}, []mcpToolDef{{Name: "t_x"}})}
	s.allowMCP("p1", "mcp__remote__t_x", json.RawMessage(`{}`))
	raw, _ := json.Marshal(map[string]any{"sessionId": "s1", "promptId": "p1", "server": "remote", "tool": "t.x", "arguments": map[string]any{}})
	_, err := d.mcpCall(context.Background(), ch, raw)
	var rerr *rpcError
	want := `MCP tools/call "mcp__remote__t_x" refused by serve: server "remote" offered no tool "t.x" under that name; it was not sent`
	if !errors.As(err, &rerr) || rerr.Message != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
	if !m.takeAllowed("p1", "mcp__remote__t_x", []byte(`{}`)) {
		t.Error("the refused call used the decision")
	}
}
