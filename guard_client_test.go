// guard_client_test.go tests the provider client against real loopback servers,
// replaying the shared wire vectors in testdata/wire/response.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// wireSeenRequest is what a test server received.
type wireSeenRequest struct {
	Method, Path, Host string
	Header             http.Header
	Body               []byte
}

// wireRecorder is a real loopback provider stand-in that records every request.
type wireRecorder struct {
	mu   sync.Mutex
	seen []wireSeenRequest
}

func (r *wireRecorder) add(req *http.Request) wireSeenRequest {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 2<<20))
	s := wireSeenRequest{Method: req.Method, Path: req.URL.Path, Host: req.Host, Header: req.Header.Clone(), Body: body}
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
	return s
}

func (r *wireRecorder) requests() []wireSeenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wireSeenRequest(nil), r.seen...)
}

// startWireRecorder serves handle on 127.0.0.1 and records every request first.
func startWireRecorder(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, s wireSeenRequest)) (*httptest.Server, *wireRecorder) {
	t.Helper()
	rec := &wireRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(w, r, rec.add(r))
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// wireRequestID returns the requestId or nonce of a request body.
func wireRequestID(body []byte) string {
	var m struct{ RequestID, Nonce string }
	json.Unmarshal(body, &m)
	return m.RequestID + m.Nonce
}

// replayVector answers every request with the vector, "$ID" replaced.
func replayVector(v wireResponseVector) func(w http.ResponseWriter, r *http.Request, s wireSeenRequest) {
	return func(w http.ResponseWriter, r *http.Request, s wireSeenRequest) {
		if v.ContentType == "" {
			w.Header()["Content-Type"] = nil // no sniffed type either
		} else {
			w.Header().Set("Content-Type", v.ContentType)
		}
		w.WriteHeader(v.Status)
		io.WriteString(w, padWireBody(strings.ReplaceAll(v.Body, "$ID", wireRequestID(s.Body)), v.PadTo))
	}
}

func TestClientWireVectors(t *testing.T) {
	for name, v := range loadWireVectors[wireResponseVector](t, "response") {
		t.Run(name, func(t *testing.T) {
			srv, rec := startWireRecorder(t, replayVector(v))
			c := testProviderClient(t, srv.URL, 5*time.Second)
			switch v.Route {
			case "prepare":
				res := c.prepare(context.Background(), providerTestCall)
				checkPrepareOutcome(t, v, res)
			case "handshake":
				err := c.handshake(context.Background())
				var werr *wireError
				switch {
				case v.Expect.OK && err != nil:
					t.Errorf("handshake failed: %v", err)
				case !v.Expect.OK && !errors.As(err, &werr):
					t.Errorf("handshake error = %v, want category %q", err, v.Expect.Category)
				case !v.Expect.OK && werr.Category != v.Expect.Category:
					t.Errorf("handshake category = %q (%v), want %q", werr.Category, err, v.Expect.Category)
				}
			default:
				t.Fatalf("vector route %q", v.Route)
			}
			if n := len(rec.requests()); n != 1 {
				t.Errorf("server saw %d requests, want exactly 1", n)
			}
		})
	}
}

func checkPrepareOutcome(t *testing.T, v wireResponseVector, res prepareResult) {
	t.Helper()
	if v.Expect.Category != "" {
		if res.Allowed || res.Category != v.Expect.Category || res.Reason != "" || res.Err == nil {
			t.Errorf("result = %+v, want failure %q", res, v.Expect.Category)
		}
		return
	}
	if v.Expect.Allowed == nil {
		t.Fatal("vector expects neither a decision nor a failure")
	}
	if res.Category != "" || res.Err != nil {
		t.Fatalf("unexpected failure %q: %v", res.Category, res.Err)
	}
	// The reason expected is the one shown, which the boundary makes of the client's.
	shown := res.Reason
	if !res.Allowed {
		shown = deniedReason(shown)
	}
	if res.Allowed != *v.Expect.Allowed || shown != v.Expect.Reason {
		t.Errorf("result allowed=%v reason=%q, want allowed=%v reason=%q", res.Allowed, shown, *v.Expect.Allowed, v.Expect.Reason)
	}
}

func TestClientRequestShape(t *testing.T) {
	allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
	srv, rec := startWireRecorder(t, replayVector(allow))
	c := testProviderClient(t, srv.URL, 5*time.Second)
	call := providerTestCall
	call.Arguments = json.RawMessage(" {\"z\": 1, \"a\": [true, null], \"m\": {\"k\": \"v\"}}\n")
	first := c.prepare(context.Background(), call)
	second := c.prepare(context.Background(), call)
	if !first.Allowed || !second.Allowed {
		t.Fatalf("prepare = %+v, %+v; want allowed", first, second)
	}
	seen := rec.requests()
	if len(seen) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(seen))
	}
	hexID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if !hexID.MatchString(first.RequestID) || first.RequestID == second.RequestID {
		t.Errorf("request ids %q, %q: want fresh 32-digit hex ids", first.RequestID, second.RequestID)
	}
	s := seen[0]
	// The arguments travel as given, trimmed, never re-encoded (DESIGN.md §8).
	want := fmt.Sprintf(`{"protocolVersion":1,"requestId":"%s","sessionId":"sess-1","promptId":"prompt-1","toolCallId":"call-1","toolName":"read_file","arguments":{"z": 1, "a": [true, null], "m": {"k": "v"}}}`, first.RequestID)
	if string(s.Body) != want {
		t.Errorf("body\n%s\nwant\n%s", s.Body, want)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	checkProviderHeaders(t, s, "/v1/prepare", host)

	if err := c.handshake(context.Background()); err == nil {
		t.Fatal("handshake against an allow reply succeeded")
	}
	h := rec.requests()[2]
	checkProviderHeaders(t, h, "/v1/handshake", host)
	var hb struct{ Nonce string }
	json.Unmarshal(h.Body, &hb)
	if !hexID.MatchString(hb.Nonce) || string(h.Body) != `{"protocolVersion":1,"nonce":"`+hb.Nonce+`","client":"qwen-code"}` {
		t.Errorf("handshake body %s", h.Body)
	}
}

func checkProviderHeaders(t *testing.T, s wireSeenRequest, path, host string) {
	t.Helper()
	if s.Method != http.MethodPost || s.Path != path || s.Host != host {
		t.Errorf("request %s %s Host %q, want POST %s Host %q", s.Method, s.Path, s.Host, path, host)
	}
	for k, want := range map[string]string{
		"Authorization": "Bearer " + providerTestToken,
		"Content-Type":  "application/json",
		"Accept":        "application/json",
	} {
		if got := s.Header.Values(k); len(got) != 1 || got[0] != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if got := s.Header.Get("Accept-Encoding"); got != "" {
		t.Errorf("Accept-Encoding %q: the client must not ask for compressed bodies", got)
	}
}

// TestClientFailures covers the categories a replayed reply cannot produce.
func TestClientFailures(t *testing.T) {
	hold := func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) { <-r.Context().Done() }
	tests := []struct {
		name     string
		handle   func(w http.ResponseWriter, r *http.Request, s wireSeenRequest)
		timeout  time.Duration
		ctx      func(t *testing.T, got <-chan struct{}) context.Context
		call     func(prepareRequest) prepareRequest
		category string
		requests int
	}{
		{name: "never answers", handle: hold, timeout: 150 * time.Millisecond, category: failTimeout, requests: 1},
		{
			name: "caller deadline", handle: hold, timeout: 30 * time.Second, category: failTimeout, requests: 1,
			ctx: func(t *testing.T, _ <-chan struct{}) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
		},
		{
			name: "cancelled while waiting", handle: hold, timeout: 30 * time.Second, category: failCancelled, requests: 1,
			ctx: func(t *testing.T, got <-chan struct{}) context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				go func() { <-got; cancel() }()
				return ctx
			},
		},
		{
			// The call runs on the caller's context, whose deadline it
			// reuses: a cancel of it is still a cancellation.
			name: "cancelled within the caller deadline", handle: hold, timeout: 30 * time.Second, category: failCancelled, requests: 1,
			ctx: func(t *testing.T, got <-chan struct{}) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t.Cleanup(cancel)
				go func() { <-got; cancel() }()
				return ctx
			},
		},
		{
			name: "cancelled before the call", handle: hold, timeout: 30 * time.Second, category: failCancelled, requests: 0,
			ctx: func(t *testing.T, _ <-chan struct{}) context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
		},
		{
			name: "connection dropped", timeout: 5 * time.Second, category: failTransport, requests: 1,
			handle: func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
			},
		},
		{
			name: "body cut short", timeout: 5 * time.Second, category: failTransport, requests: 1,
			handle: func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err == nil {
					buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"protocolVersion\":1")
					buf.Flush()
					conn.Close()
				}
			},
		},
		{
			name: "oversize request", handle: hold, timeout: 5 * time.Second, category: failOversizeRequest, requests: 0,
			call: func(c prepareRequest) prepareRequest {
				c.Arguments = json.RawMessage(`{"content":"` + strings.Repeat("x", maxWireRequest) + `"}`)
				return c
			},
		},
		{
			name: "arguments not an object", handle: hold, timeout: 5 * time.Second, category: failSchema, requests: 0,
			call: func(c prepareRequest) prepareRequest { c.Arguments = json.RawMessage(`["a"]`); return c },
		},
		{
			name: "oversize declared length", timeout: 5 * time.Second, category: failOversizeResponse, requests: 1,
			handle: func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", fmt.Sprint(maxWireResponse+1))
				w.WriteHeader(200)
				w.Write([]byte("{"))
			},
		},
		{
			name: "oversize streamed", timeout: 5 * time.Second, category: failOversizeResponse, requests: 1,
			handle: func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				for range 100 { // chunked, no length: 100 KiB of white space
					w.Write([]byte(strings.Repeat(" ", 1024)))
				}
			},
		},
		{
			name: "invalid UTF-8", timeout: 5 * time.Second, category: failMalformedJSON, requests: 1,
			handle: func(w http.ResponseWriter, r *http.Request, s wireSeenRequest) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, "{\"protocolVersion\":1,\"requestId\":\"%s\",\"allowed\":false,\"reason\":\"\xff\"}", wireRequestID(s.Body))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan struct{}, 1)
			srv, rec := startWireRecorder(t, func(w http.ResponseWriter, r *http.Request, s wireSeenRequest) {
				got <- struct{}{}
				tt.handle(w, r, s)
			})
			c := testProviderClient(t, srv.URL, tt.timeout)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(t, got)
			}
			call := providerTestCall
			if tt.call != nil {
				call = tt.call(call)
			}
			res := c.prepare(ctx, call)
			if res.Allowed || res.Category != tt.category || res.Reason != "" {
				t.Errorf("result = %+v, want failure %q", res, tt.category)
			}
			if n := len(rec.requests()); n != tt.requests {
				t.Errorf("server saw %d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestClientRequestSizeLimit(t *testing.T) {
	allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
	srv, rec := startWireRecorder(t, replayVector(allow))
	c := testProviderClient(t, srv.URL, 5*time.Second)
	// The body around the content string, with a 32-digit requestId.
	frame, _ := json.Marshal(prepareRequest{ProtocolVersion: 1, RequestID: strings.Repeat("0", 32), SessionID: providerTestCall.SessionID,
		PromptID: providerTestCall.PromptID, ToolCallID: providerTestCall.ToolCallID, ToolName: providerTestCall.ToolName, Arguments: json.RawMessage(`{"content":""}`)})
	for _, tt := range []struct {
		size     int
		category string
	}{{maxWireRequest, ""}, {maxWireRequest + 1, failOversizeRequest}} {
		call := providerTestCall
		call.Arguments = json.RawMessage(`{"content":"` + strings.Repeat("x", tt.size-len(frame)) + `"}`)
		before := len(rec.requests())
		res := c.prepare(context.Background(), call)
		if res.Category != tt.category || res.Allowed != (tt.category == "") {
			t.Errorf("%d-byte request: result %+v, want category %q", tt.size, res, tt.category)
		}
		sent := len(rec.requests()) - before
		if tt.category == "" && (sent != 1 || len(rec.requests()[before].Body) != tt.size) {
			t.Errorf("%d-byte request: %d sent", tt.size, sent)
		}
		if tt.category != "" && sent != 0 {
			t.Errorf("%d-byte request was sent", tt.size)
		}
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
			second, secondRec := startWireRecorder(t, replayVector(allow))
			first, firstRec := startWireRecorder(t, func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) {
				http.Redirect(w, r, second.URL+"/v1/prepare", status)
			})
			res := testProviderClient(t, first.URL, 5*time.Second).prepare(context.Background(), providerTestCall)
			if res.Allowed || res.Category != failHTTPStatus {
				t.Errorf("result = %+v, want failure %q", res, failHTTPStatus)
			}
			if n := len(firstRec.requests()); n != 1 {
				t.Errorf("first server saw %d requests, want 1", n)
			}
			if n := len(secondRec.requests()); n != 0 {
				t.Errorf("redirect target saw %d requests, want 0", n)
			}
		})
	}
}

// proxyTrap counts every connection made to it.
func proxyTrap(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), conns
}

func TestClientIgnoresProxyEnvironment(t *testing.T) {
	trap, conns := proxyTrap(t)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, "http://"+trap)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
	srv, rec := startWireRecorder(t, replayVector(allow))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, endpoint := range []string{srv.URL, fmt.Sprintf("http://localhost:%d", port)} {
		c := testProviderClient(t, endpoint, 5*time.Second)
		if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
			t.Errorf("%s: result %+v, want allowed", endpoint, res)
		}
		// Go skips proxies for loopback hosts on its own, so the trap alone
		// cannot fail; the transport must not consult the environment at all.
		if tr := c.http.Transport.(*http.Transport); tr.Proxy != nil {
			t.Errorf("%s: transport has a Proxy function", endpoint)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("trap proxy saw %d connections, want 0", n)
	}
	if n := len(rec.requests()); n != 2 {
		t.Errorf("provider saw %d requests, want 2", n)
	}
}

func TestClientPinsLocalhost(t *testing.T) {
	allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
	srv, rec := startWireRecorder(t, replayVector(allow))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := testProviderClient(t, fmt.Sprintf("http://LocalHost:%d/", port), 5*time.Second)
	if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
		t.Fatalf("result %+v, want allowed", res)
	}
	if got, want := rec.requests()[0].Host, fmt.Sprintf("localhost:%d", port); got != want {
		t.Errorf("Host = %q, want %q", got, want)
	}
}

func TestClientIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	rec := &wireRecorder{}
	allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
	h := replayVector(allow)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, rec.add(r)) })}}
	srv.Start()
	t.Cleanup(srv.Close)
	endpoint := "http://" + ln.Addr().String()
	if res := testProviderClient(t, endpoint, 5*time.Second).prepare(context.Background(), providerTestCall); !res.Allowed {
		t.Fatalf("result %+v, want allowed", res)
	}
	if got := rec.requests()[0].Host; got != ln.Addr().String() {
		t.Errorf("Host = %q, want %q", got, ln.Addr().String())
	}
}

// TestClientTLS: HTTPS to localhost presents SNI "localhost" and trusts only
// the system roots, so a self-signed provider certificate fails closed.
func TestClientTLS(t *testing.T) {
	var mu sync.Mutex
	var sni []string
	rec := &wireRecorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rec.add(r) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.TLS = &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		sni = append(sni, hello.ServerName)
		mu.Unlock()
		return nil, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, endpoint := range []string{fmt.Sprintf("https://localhost:%d", port), srv.URL} {
		res := testProviderClient(t, endpoint, 5*time.Second).prepare(context.Background(), providerTestCall)
		if res.Allowed || res.Category != failTransport {
			t.Errorf("%s: result %+v, want failure %q", endpoint, res, failTransport)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sni) != 2 || sni[0] != "localhost" {
		t.Errorf("server names seen %q, want localhost first", sni)
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("untrusted server saw %d requests", n)
	}
}

func TestClientRefusesNonLoopbackEndpoint(t *testing.T) {
	trap, conns := proxyTrap(t)
	_, port, _ := net.SplitHostPort(trap)
	for _, endpoint := range []string{"http://192.0.2.1:" + port, "http://example.com:" + port, "ftp://127.0.0.1:" + port, "http://127.0.0.2:" + port} {
		c := testProviderClient(t, endpoint, 5*time.Second)
		if res := c.prepare(context.Background(), providerTestCall); res.Allowed || res.Category != failTransport {
			t.Errorf("%s: result %+v, want failure %q", endpoint, res, failTransport)
		}
		if err := c.handshake(context.Background()); err == nil {
			t.Errorf("%s: handshake succeeded", endpoint)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections made", n)
	}
	if res := newProviderClient(guardConfig{Mode: guardModeRequired}).prepare(context.Background(), providerTestCall); res.Category != failTransport {
		t.Errorf("nil endpoint: result %+v", res)
	}
}

func TestClientKeepAlive(t *testing.T) {
	allow := wireResponseVector{Status: 200, ContentType: "application/json", Body: `{"protocolVersion":1,"requestId":"$ID","allowed":true}`}
	var conns atomic.Int64
	rec := &wireRecorder{}
	h := replayVector(allow)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, rec.add(r)) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := testProviderClient(t, srv.URL, 5*time.Second)
	for range 5 {
		if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
			t.Fatalf("result %+v", res)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 sequential decisions used %d connections, want 1", n)
	}
}

// TestClientTokenNotInErrors: failure details are for logs, but even they
// never carry the token.
func TestClientTokenNotInErrors(t *testing.T) {
	srv, _ := startWireRecorder(t, func(w http.ResponseWriter, r *http.Request, _ wireSeenRequest) {
		w.Header().Set("Content-Type", "application/json")
		bw := bufio.NewWriter(w)
		fmt.Fprintf(bw, `{"protocolVersion":1,%q:%q,"allowed":true}`, r.Header.Get("Authorization"), r.Header.Get("Authorization"))
		bw.Flush()
	})
	c := testProviderClient(t, srv.URL, 5*time.Second)
	res := c.prepare(context.Background(), providerTestCall)
	if res.Category != failSchema || !strings.Contains(res.Err.Error(), "[token]") {
		t.Fatalf("result %+v", res)
	}
	if err := c.handshake(context.Background()); err == nil || strings.Contains(err.Error(), providerTestToken) {
		t.Errorf("handshake error %v", err)
	}
	if strings.Contains(res.Err.Error(), providerTestToken) || strings.Contains(res.Reason, providerTestToken) {
		t.Errorf("failure %q / %v carries the token", res.Reason, res.Err)
	}
}

// TestClientHandshakeHints: a failed handshake whose fix is known says it,
// each against a real loopback peer: a provider with another token, a port
// nobody listens on, a self-signed certificate.
func TestClientHandshakeHints(t *testing.T) {
	otherToken := startRefProvider(t, providerOptions{Token: "another-token", PolicyFile: "examples/policy.json"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	selfSigned := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	selfSigned.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	selfSigned.StartTLS()
	t.Cleanup(selfSigned.Close)
	for _, tt := range []struct{ name, endpoint, hint string }{
		{"another token", otherToken.url, "the token differs from the provider's: " + envGuardToken},
		{"nobody listens", closed, "start one with `acpguard provider --policy FILE`"},
		{"self-signed", selfSigned.URL, "SSL_CERT_FILE"},
	} {
		err := testProviderClient(t, tt.endpoint, 10*time.Second).handshake(context.Background())
		if err == nil || !strings.Contains(err.Error(), tt.hint) {
			t.Errorf("%s: handshake error %v, want the hint %q", tt.name, err, tt.hint)
		}
	}
}

// A response body is read whole whatever length it declared, but never
// more than one byte past the bound, which is what tells it oversize.
func TestReadWireBody(t *testing.T) {
	big := strings.Repeat("x", maxWireResponse+10)
	for _, tt := range []struct {
		body     string
		declared int64
		want     int
	}{
		{`{"a":1}`, 7, 7},
		{`{"a":1}`, -1, 7},
		{`{"a":1}`, 2, 7}, // a length that understates grows the buffer
		{"", 0, 0},
		{big[:maxWireResponse], maxWireResponse, maxWireResponse},
		{big[:maxWireResponse], -1, maxWireResponse},
		{big, -1, maxWireResponse + 1},
	} {
		data, err := readWireBody(strings.NewReader(tt.body), tt.declared)
		if err != nil || len(data) != tt.want || string(data) != tt.body[:tt.want] {
			t.Errorf("body of %d bytes, declared %d: read %d bytes, %v; want %d", len(tt.body), tt.declared, len(data), err, tt.want)
		}
	}
	if _, err := readWireBody(io.MultiReader(strings.NewReader("{"), iotest.ErrReader(io.ErrUnexpectedEOF)), 5); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body cut short: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}
