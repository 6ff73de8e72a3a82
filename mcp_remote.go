// mcp_remote.go owns what the remote MCP transports share: a server's
// headers (and the variables they name, which are secrets), its HTTP client
// (the operator's address, TLS verified, redirects refused), the server's
// messages as lines for the JSON-RPC connection, and starting a remote
// server. Every message goes out once: a failed POST breaks the server for
// the rest of the session, and a call in flight is never resent
// (DESIGN.md §6).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Remote transport bounds.
const (
	mcpDialTimeout     = 30 * time.Second
	mcpTLSTimeout      = 30 * time.Second
	mcpIdleConnTimeout = 90 * time.Second
	mcpMaxHeaderBytes  = 64 << 10 // bytes of one answer's header
	// mcpPostTimeout bounds a POST that carries no request (a
	// notification, an answer, any message of HTTP+SSE): the server only
	// acknowledges it.
	mcpPostTimeout = 30 * time.Second
	// mcpCloseTimeout bounds the DELETE that ends a Streamable HTTP session.
	mcpCloseTimeout = 5 * time.Second
	// mcpMaxSessionID bounds the Mcp-Session-Id a server assigns.
	mcpMaxSessionID = 1024
	// mcpErrorBodyBytes of a refusing answer's body are quoted in the error.
	mcpErrorBodyBytes = 200
	// mcpDefaultRemoteDiscovery is Qwen Code's discovery bound of a
	// remote server, where a stdio server's is mcpStartupTimeout.
	mcpDefaultRemoteDiscovery = 5 * time.Second
)

// MCP HTTP wire names.
const (
	mcpHeaderSessionID = "Mcp-Session-Id"
	mcpHeaderProtocol  = "Mcp-Protocol-Version"
	mcpJSONMediaType   = "application/json"
)

// mcpOwnHeaders are the headers the transport sets itself: a configured
// header of one of these names is refused.
// Idempotency-Key and X-Idempotency-Key among them: with either, net/http
// would send a POST again on a connection that failed.
var mcpOwnHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection", mcpHeaderSessionID, mcpHeaderProtocol, "Last-Event-Id", "Idempotency-Key", "X-Idempotency-Key"}

// newMCPPost is a POST of msg that net/http cannot send twice: its body
// has no GetBody, so neither a connection lost before the answer nor an
// HTTP/2 stream reset replays a tools/call (the no-replay rule).
func newMCPPost(ctx context.Context, url string, msg []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, io.NopCloser(bytes.NewReader(msg)))
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(msg))
	req.GetBody = nil
	return req, nil
}

// mcpHeader is one configured header. A settings value may name the
// operator's variables as $VAR or ${VAR}; a session/new value is Literal.
type mcpHeader struct {
	Name    string
	Value   string
	Literal bool
}

// mcpHeaderVar is a variable reference in a settings header value.
var mcpHeaderVar = regexp.MustCompile(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))`)

// variables returns the names a header's value refers to.
func (h mcpHeader) variables() []string {
	if h.Literal {
		return nil
	}
	var names []string
	for _, m := range mcpHeaderVar.FindAllStringSubmatch(h.Value, -1) {
		names = append(names, m[1]+m[2])
	}
	return names
}

// mcpHeaderSecrets returns every variable the remote servers' headers name:
// each is a secret, removed from every child environment.
func mcpHeaderSecrets(configs []mcpServerConfig) []string {
	var names []string
	for _, c := range configs {
		for _, h := range c.Headers {
			for _, n := range h.variables() {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// validateRemote checks a remote server's URL and headers.
func (c mcpServerConfig) validateRemote() error {
	if c.Command != "" || c.Args != nil || c.Env != nil {
		return fmt.Errorf("MCP server %q: an %s server has no command, args or env", c.Name, c.Transport)
	}
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return fmt.Errorf("MCP server %q has no url", c.Name)
	case err != nil:
		return fmt.Errorf("MCP server %q: url %q: %v", c.Name, c.URL, err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("MCP server %q: url %q: want http:// or https:// and a host", c.Name, c.URL)
	case u.User != nil:
		// Credentials in the URL would be repeated in every transport error.
		return fmt.Errorf("MCP server %q: the url for host %q holds credentials: put them in headers", c.Name, u.Host)
	case u.Fragment != "" || u.RawFragment != "":
		return fmt.Errorf("MCP server %q: url %q has a fragment", c.Name, c.URL)
	}
	seen := map[string]bool{}
	for _, h := range c.Headers {
		canon := http.CanonicalHeaderKey(h.Name)
		switch {
		case !validHeaderName(h.Name):
			return fmt.Errorf("MCP server %q: header name %q is not an HTTP token", c.Name, h.Name)
		case slices.ContainsFunc(mcpOwnHeaders, func(o string) bool { return strings.EqualFold(o, h.Name) }):
			return fmt.Errorf("MCP server %q: header %q is set by the transport itself; remove it", c.Name, h.Name)
		case seen[canon]:
			return fmt.Errorf("MCP server %q: header %q is given twice", c.Name, h.Name)
		case !validHeaderValue(h.Value):
			// The value may be a secret: never quoted.
			return fmt.Errorf("MCP server %q: the value of header %q holds a character not allowed in an HTTP header", c.Name, h.Name)
		}
		seen[canon] = true
		for _, v := range h.variables() {
			if removedEnvName(v) {
				return fmt.Errorf("MCP server %q: header %q names variable %q, which acpguard keeps from every server; give the server its own variable", c.Name, h.Name, v)
			}
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s can be a header's value: no control
// character but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// expandMCPHeaders gives each header its value, settings values with their
// variables read through secret. A variable that is not set is an error: an
// unauthenticated request would go out instead.
func expandMCPHeaders(c mcpServerConfig, secret func(string) (string, bool)) (http.Header, error) {
	out := http.Header{}
	for _, h := range c.Headers {
		v := h.Value
		if !h.Literal {
			var missing string
			v = mcpHeaderVar.ReplaceAllStringFunc(h.Value, func(ref string) string {
				m := mcpHeaderVar.FindStringSubmatch(ref)
				val, ok := secret(m[1] + m[2])
				if !ok && missing == "" {
					missing = m[1] + m[2]
				}
				return val
			})
			if missing != "" {
				return nil, fmt.Errorf("header %q names variable %q, which is not set in acpguard's environment; set it or change the header", h.Name, missing)
			}
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("the value of header %q holds a character not allowed in an HTTP header once its variables are set", h.Name)
			}
		}
		out.Set(h.Name, v)
	}
	return out, nil
}

// newMCPHTTPClient is a remote server's client: the operator's address
// through the operator's proxy settings, TLS verified (the default
// configuration), every redirect refused: it would send the headers and
// the call somewhere the operator did not name.
func newMCPHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            (&net.Dialer{Timeout: mcpDialTimeout}).DialContext,
			TLSHandshakeTimeout:    mcpTLSTimeout,
			MaxResponseHeaderBytes: mcpMaxHeaderBytes,
			IdleConnTimeout:        mcpIdleConnTimeout,
			ForceAttemptHTTP2:      true,
		},
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return fmt.Errorf("the server redirected to %q: redirects are refused; configure the final address", req.URL.Redacted())
		},
	}
}

// mcpInbound is what the server sends, as lines the JSON-RPC connection
// reads: every answer body, stream event and GET stream event of one
// server, one whole message per line.
type mcpInbound struct {
	pr *io.PipeReader
	pw *io.PipeWriter
	mu sync.Mutex
}

func newMCPInbound() *mcpInbound {
	pr, pw := io.Pipe()
	return &mcpInbound{pr: pr, pw: pw}
}

// deliver passes one body or event's data to the connection.
func (in *mcpInbound) deliver(b []byte) error {
	lines, err := mcpMessageLines(b)
	if err != nil {
		return fmt.Errorf("the server sent a message that is not JSON-RPC: %w", err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	_, err = in.pw.Write(lines)
	return err
}

// fail ends the connection with err: every call in flight fails, none is
// resent. err is reported as text: a transport's io.EOF is a failure here,
// not the end of a stream that the reader would take as a clean close.
func (in *mcpInbound) fail(err error) { in.pw.CloseWithError(errors.New(err.Error())) }

// mcpMessageLines checks one body or event's data, a JSON-RPC message or a
// batch of them (2025-03-26), and returns each message as one line of
// compact JSON. Each message is an object of at most mcpMaxMessage bytes;
// what the object holds is the connection's to check.
func mcpMessageLines(b []byte) ([]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, errors.New("empty message")
	}
	if !json.Valid(b) {
		return nil, errors.New("not JSON")
	}
	msgs := []json.RawMessage{b}
	if b[0] == '[' {
		msgs = nil
		if err := json.Unmarshal(b, &msgs); err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			return nil, errors.New("an empty batch")
		}
	}
	var out bytes.Buffer
	for i, m := range msgs {
		m = bytes.TrimSpace(m)
		if len(m) == 0 || m[0] != '{' {
			return nil, fmt.Errorf("message %d is not a JSON object", i)
		}
		start := out.Len()
		if err := json.Compact(&out, m); err != nil {
			return nil, err
		}
		if out.Len()-start > mcpMaxMessage {
			return nil, fmt.Errorf("message %d is longer than %d bytes", i, mcpMaxMessage)
		}
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// mcpRemote is one remote server's transport.
type mcpRemote struct {
	name    string
	sse     bool // HTTP+SSE; else Streamable HTTP
	url     *url.URL
	headers http.Header // expanded: never logged
	client  *http.Client
	log     *slog.Logger
	in      *mcpInbound
	// broken breaks the server with a transport failure's cause before the
	// connection ends, so that a call in flight reports that cause.
	broken func(error)

	// life ends with close: every request of the server is cancelled.
	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup // the goroutines reading answers and streams

	mu        sync.Mutex
	calls     map[string]context.CancelCauseFunc // POSTs of requests in flight, by JSON-RPC id
	sessionID string                             // Streamable HTTP: assigned at initialize
	protocol  string                             // the version the server answered initialize with
	endpoint  *url.URL                           // HTTP+SSE: where messages go
	closed    bool
}

// startRemoteMCPServer connects to one remote server, initializes it and
// lists its tools.
func startRemoteMCPServer(ctx context.Context, cfg mcpServerConfig, opts mcpOptions) (*mcpServer, []mcpToolDef, error) {
	opts.Env.hideSecrets(mcpHeaderSecrets([]mcpServerConfig{cfg})...)
	headers, err := expandMCPHeaders(cfg, opts.Env.secret)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, nil, err // validate refused it already
	}
	r := &mcpRemote{name: cfg.Name, sse: cfg.Transport == mcpTransportSSE, url: u, headers: headers,
		client: newMCPHTTPClient(), log: opts.Log, in: newMCPInbound()}
	r.life, r.stop = context.WithCancel(context.Background())
	s := &mcpServer{
		name:        cfg.Name,
		cwd:         opts.Cwd,
		callTimeout: cfg.CallTimeout,
		trust:       cfg.Trust,
		log:         opts.Log,
		remote:      r,
		done:        make(chan struct{}),
	}
	if s.callTimeout == 0 {
		s.callTimeout = opts.CallTimeout
	}
	s.life, s.brake = context.WithCancelCause(context.Background())
	r.broken = s.breakDown
	startup := mcpDefaultRemoteDiscovery
	if cfg.StartupTimeout > 0 {
		startup = cfg.StartupTimeout
	}
	if r.sse {
		cctx, cancel := context.WithTimeout(ctx, startup)
		err := r.connectSSE(cctx)
		cancel()
		if err != nil {
			r.close()
			return nil, nil, err
		}
	}
	s.conn = newRPCConn(r.in.pr, &mcpWire{w: r, onUnreadable: func() {
		s.breakDown(errors.New("it sent a message that is not JSON-RPC"))
	}}, rpcConfig{MaxLine: mcpMaxMessage + 1, OnRequest: s.answer, CancelNotice: func(call string, id json.RawMessage) (string, any, bool) {
		r.abandon(id)
		return mcpCancelNotice(call, id)
	}})
	s.serveConn(errors.New("its connection ended"), func() {})
	tools, err := s.handshake(ctx, startup)
	if err != nil {
		s.stop(err)
		return nil, nil, err
	}
	return s, tools, nil
}

// Write sends the connection's messages, one POST each (a write may hold
// several lines). A failure breaks the connection.
func (r *mcpRemote) Write(p []byte) (int, error) {
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		msg := bytes.Clone(line)
		var err error
		if r.sse {
			err = r.postSSE(msg)
		} else {
			err = r.postHTTP(msg)
		}
		if err != nil {
			r.fail(err)
			return 0, err
		}
	}
	return len(p), nil
}

// setHeaders puts the configured headers, the session's id and protocol
// version, and accept on req.
func (r *mcpRemote) setHeaders(req *http.Request, accept string) {
	for k, v := range r.headers {
		req.Header[k] = slices.Clone(v)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessionID != "" {
		req.Header.Set(mcpHeaderSessionID, r.sessionID)
	}
	if r.protocol != "" {
		req.Header.Set(mcpHeaderProtocol, r.protocol)
	}
}

// do sends req and waits for its answer's header within ctx; the body
// stays bound to req's own context.
func (r *mcpRemote) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	rctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(ctx, cancel)
	resp, err := r.client.Do(req.WithContext(rctx))
	if !stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, fmt.Errorf("no answer: %w", context.Cause(ctx))
	}
	if err != nil {
		cancel()
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is the operator's own: named once by the caller
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// mcpHTTPStatus refuses an answer that is not 2xx, quoting the start of its
// body; sessionSent says whether the request carried a session id, whose
// 404 means the server ended the session.
func mcpHTTPStatus(resp *http.Response, sessionSent bool) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if resp.StatusCode == http.StatusNotFound && sessionSent {
		return errors.New("the server ended the MCP session (HTTP 404 to its session id); the session is not renewed and no call is resent")
	}
	// A POST's body cannot be sent again, so net/http hands a 307 or 308
	// back instead of asking the client's redirect check.
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		return fmt.Errorf("the server redirected to %q: redirects are refused; configure the final address", redactedURL(loc))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, mcpErrorBodyBytes))
	return fmt.Errorf("the server answered HTTP %d: %q", resp.StatusCode, strings.ToValidUTF8(string(body), "?"))
}

// mediaType is the answer's content type without parameters, "" if none.
func mediaType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// initialized records the protocol version the server answered initialize
// with: every later request carries it.
func (r *mcpRemote) initialized(version string) {
	r.mu.Lock()
	r.protocol = version
	r.mu.Unlock()
}

// fail breaks the server with err, then ends the connection: every call
// in flight fails, none is resent.
func (r *mcpRemote) fail(err error) {
	if r.broken != nil {
		r.broken(fmt.Errorf("its connection failed: %w", err))
	}
	r.in.fail(err)
}

// spawn runs f in a reader goroutine close waits for; false, and f does
// not run, once the server is closed.
func (r *mcpRemote) spawn(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Go(f)
	return true
}

// close ends every request and stream of the server, and a Streamable
// HTTP session with a DELETE, then waits for the readers.
func (r *mcpRemote) close() {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	sid := r.sessionID
	r.mu.Unlock()
	if already {
		return
	}
	r.stop()
	r.in.fail(errSessionEnded)
	if sid != "" && !r.sse {
		ctx, cancel := context.WithTimeout(context.Background(), mcpCloseTimeout)
		if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.url.String(), nil); err == nil {
			r.setHeaders(req, "")
			if resp, err := r.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	r.wg.Wait()
	// The server's kept-alive connections end with it, not at
	// mcpIdleConnTimeout: the transport is the server's own.
	r.client.CloseIdleConnections()
}

// errMCPCallAbandoned ends the POST of a request whose caller stopped
// waiting: it is no failure of the server's.
var errMCPCallAbandoned = errors.New("the call's caller stopped waiting")

// requestPost reads msg's head: for a request (ok true), the context of
// the POST that carries it, within the server's life and ended by
// abandon(id), so that a call whose context ends does not keep its POST
// open, and done, which forgets the request once its POST is over; init
// says it is the initialize request.
func (r *mcpRemote) requestPost(msg []byte) (ctx context.Context, done func(), init, ok bool) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	json.Unmarshal(msg, &head) // our own message
	if head.Method == "" || head.ID == nil {
		return nil, nil, false, false
	}
	ctx, cancel := context.WithCancelCause(r.life)
	key := string(head.ID)
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]context.CancelCauseFunc{}
	}
	r.calls[key] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.calls, key)
		r.mu.Unlock()
		cancel(nil)
	}, head.Method == mcpMethodInitialize, true
}

// abandon ends the POST of request id, if it is in flight: its caller
// stopped waiting (rpcConfig.CancelNotice).
func (r *mcpRemote) abandon(id json.RawMessage) {
	r.mu.Lock()
	cancel := r.calls[string(id)]
	r.mu.Unlock()
	if cancel != nil {
		cancel(errMCPCallAbandoned)
	}
}

// abandoned says whether the POST of ctx ended because its caller stopped
// waiting.
func abandoned(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errMCPCallAbandoned)
}

// redactedURL is loc with any password it holds masked, as url.Redacted.
func redactedURL(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return "(an invalid URL)"
	}
	return u.Redacted()
}
