// guard_client.go owns the pinned loopback client that asks the provider for
// one decision; guard_handshake.go meets the provider first.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The client's connection pool: the daemon may ask for several decisions at
// once over kept-alive connections.
const (
	providerIdleConns   = 64
	providerIdleTimeout = 90 * time.Second
)

// providerClient asks the configured provider for decisions. It is safe for
// concurrent use.
type providerClient struct {
	origin   string // scheme://host:port, the base of every request URL
	hostPort string // the Host header: the endpoint's host:port
	token    string
	timeout  time.Duration
	http     *http.Client
	invalid  error // a configuration the client refuses to use; every call fails

	// Built once for every request: the URL of each route, and the headers
	// for the token they carry. A request only reads them (net/http's client
	// and transport never write to a request's URL or Header), so they are
	// shared.
	routes map[string]*url.URL
	header atomic.Pointer[tokenHeader]

	// The pinned address, and the provider every connection must reach:
	// recorded by the last successful handshake, nil before one.
	dialAddr netip.AddrPort
	dialer   net.Dialer
	ident    atomic.Pointer[providerIdentity]
	diag     diagSocket // how a connection's sockets are looked up
	selfUID  uint32     // acpguard's own uid: its listeners are pinned by inode too
}

// close drops the client's idle keep-alive connections to the provider; a
// caller that is done with the client calls it so no connection outlives it.
func (c *providerClient) close() {
	if c.http != nil { // a refused configuration never dialled
		c.http.CloseIdleConnections()
	}
	c.diag.close()
}

// newProviderClient builds the pinned client for a validated required-mode
// configuration. An endpoint that is not loopback HTTP(S) still yields a
// client, one whose every call fails: parseEndpoint validates first, this is
// the second lock.
func newProviderClient(cfg guardConfig) *providerClient {
	c := &providerClient{token: cfg.Token, timeout: cfg.Timeout, selfUID: uint32(os.Geteuid())}
	u := cfg.Endpoint
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
		c.invalid = errors.New("endpoint is not an http(s) URL")
		return c
	}
	host, ok := loopbackHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	if !ok {
		c.invalid = fmt.Errorf("endpoint host %q is not loopback", u.Hostname())
		return c
	}
	// localhost is pinned to 127.0.0.1 (with localhost SNI), never resolved.
	dialHost := host
	if host == loopbackName {
		dialHost = loopbackV4
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		c.invalid = fmt.Errorf("endpoint port %q is not a port number", port)
		return c
	}
	c.hostPort = net.JoinHostPort(host, port)
	c.origin = u.Scheme + "://" + c.hostPort
	c.dialAddr = netip.AddrPortFrom(netip.MustParseAddr(dialHost), uint16(portNum))
	c.routes = map[string]*url.URL{}
	for _, route := range []string{wirePathHandshake, wirePathPrepare} {
		c.routes[route] = &url.URL{Scheme: u.Scheme, Host: c.hostPort, Path: route}
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12} // system roots only
	if host == loopbackName {
		tlsConf.ServerName = loopbackName
	}
	tr := &http.Transport{
		Proxy: nil, // HTTP_PROXY and friends never see the token
		// Dial the pinned address whatever the request names: the only
		// URLs this transport sees are built from the endpoint anyway.
		// Every connection must reach the provider of the handshake.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.dial(ctx, nil)
		},
		TLSClientConfig:        tlsConf,
		DisableCompression:     true, // the body is bounded as sent, never inflated
		MaxIdleConns:           providerIdleConns,
		MaxIdleConnsPerHost:    providerIdleConns,
		IdleConnTimeout:        providerIdleTimeout,
		MaxResponseHeaderBytes: maxWireResponse,
	}
	c.http = &http.Client{
		Transport: tr,
		// Redirects are not followed (DESIGN.md §8): the 3xx itself comes back and fails the status check.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// redact removes the token from a failure's detail: details are logged, and
// a misbehaving provider could echo the token back in what an error quotes.
func (c *providerClient) redact(werr *wireError) *wireError {
	if c.token == "" || !strings.Contains(werr.Err.Error(), c.token) {
		return werr
	}
	return &wireError{Category: werr.Category, Err: errors.New(strings.ReplaceAll(werr.Err.Error(), c.token, "[token]"))}
}

// prepareResult is the outcome of exactly one prepare attempt: the
// provider's decision, its reason "" when it gave none, or a failure.
type prepareResult struct {
	Decision
	RequestID string
	Category  string // failure category, "" when the provider decided
	Err       error  // failure detail, for logs only
}

// prepare asks the provider once whether call may execute now, filling in
// its protocolVersion and requestId. call.Arguments are sent as they are:
// bytes checkWireArguments accepted or canonicalArgumentBytes made. There is
// no retry on any outcome (DESIGN.md §1).
func (c *providerClient) prepare(ctx context.Context, call prepareRequest) prepareResult {
	res := prepareResult{RequestID: randomHex(randomIDBytes)}
	fail := func(werr *wireError) prepareResult {
		res.Category, res.Err = werr.Category, c.redact(werr)
		return res
	}
	call.ProtocolVersion, call.RequestID, call.Arguments = wireProtocolVersion, res.RequestID, trimJSONSpace(call.Arguments)
	if len(call.Arguments) == 0 || call.Arguments[0] != '{' {
		return fail(wireFail(failSchema, "arguments are not a JSON object"))
	}
	// The arguments go as given, checked once by the caller (DESIGN.md §8).
	size := prepareRequestFrame + len(call.Arguments) + len(call.RequestID) + len(call.SessionID) + len(call.PromptID) + len(call.ToolCallID) + len(call.ToolName)
	body := appendPrepareRequest(make([]byte, 0, size), call)
	if len(body) > maxWireRequest {
		return fail(wireFail(failOversizeRequest, "prepare request is %d bytes, more than %d", len(body), maxWireRequest))
	}
	resp, werr := c.post(ctx, c.http, wirePathPrepare, body)
	if werr != nil {
		return fail(werr)
	}
	if res.Decision, werr = decodePrepareResponse(resp, res.RequestID); werr != nil {
		return fail(werr)
	}
	return res
}

// callContext is ctx bounded by the provider timeout, for a caller that
// must also cancel the call itself: post reuses its deadline, so the call
// has one context and one timer, not one per layer.
func (c *providerClient) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// post makes the one HTTP attempt of a call through hc and returns the
// bounded body of a 200 JSON response.
func (c *providerClient) post(ctx context.Context, hc *http.Client, route string, body []byte) ([]byte, *wireError) {
	if c.invalid != nil {
		return nil, &wireError{Category: failTransport, Err: c.invalid}
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxFailure(ctx, err)
	}
	// A caller whose deadline is no later than the call's own (callContext's)
	// has already bounded it: one context, one timer per call.
	callCtx, limit := ctx, c.timeout
	if dl, ok := ctx.Deadline(); ok && !dl.After(time.Now().Add(c.timeout)) {
		limit = time.Until(dl).Round(time.Millisecond)
	} else {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	hdr := c.header.Load()
	if hdr == nil || hdr.token != c.token {
		hdr = newTokenHeader(c.token)
		c.header.Store(hdr)
	}
	u := c.routes[route]
	if u == nil {
		return nil, wireFail(failTransport, "POST %s: not a route of the guard protocol", route)
	}
	// net/http re-sends a POST only when a reused idle connection failed
	// before a single byte of it was written (it rewinds the body through
	// GetBody), so the provider still sees at most one request; it never
	// replays one the provider may have received.
	req := (&http.Request{
		Method: http.MethodPost, URL: u, Host: c.hostPort, Header: hdr.h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}).WithContext(callCtx)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.classify(ctx, callCtx, limit, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &wireError{Category: failHTTPStatus, Status: resp.StatusCode, Err: fmt.Errorf("POST %s: status %d", route, resp.StatusCode)}
	}
	if ct := resp.Header.Get("Content-Type"); !wireContentTypeOK(ct) {
		return nil, wireFail(failContentType, "POST %s: content type %q", route, ct)
	}
	if resp.ContentLength > maxWireResponse {
		return nil, wireFail(failOversizeResponse, "POST %s: content length %d, more than %d", route, resp.ContentLength, maxWireResponse)
	}
	data, err := readWireBody(resp.Body, resp.ContentLength)
	if err != nil {
		return nil, c.classify(ctx, callCtx, limit, err)
	}
	if len(data) > maxWireResponse {
		return nil, wireFail(failOversizeResponse, "POST %s: response over %d bytes", route, maxWireResponse)
	}
	return data, nil
}

// readWireBody reads a response body to its end, but no more than one byte
// past maxWireResponse, which tells an oversize body. The declared length
// (already checked to be at most maxWireResponse; -1 when none was
// declared) sizes the buffer once.
func readWireBody(body io.Reader, length int64) ([]byte, error) {
	size := int64(bytes.MinRead)
	if length >= 0 {
		size = length + 1 // the read that finds the end needs room
	}
	data := make([]byte, 0, size)
	r := io.LimitedReader{R: body, N: maxWireResponse + 1}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF { // as io.ReadAll ends
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// tokenHeader is the headers of every request, built for one token.
type tokenHeader struct {
	token string
	h     http.Header
}

func newTokenHeader(token string) *tokenHeader {
	return &tokenHeader{token: token, h: http.Header{
		"Authorization": {"Bearer " + token},
		"Content-Type":  {wireContentType},
		"Accept":        {wireContentType},
	}}
}

// classify names a failed exchange: a failed identity check (the request
// was never sent), then the call's deadline (the caller's when post reused
// it; limit is the time it gave the call), then the caller's context, then
// the transport.
func (c *providerClient) classify(parent, call context.Context, limit time.Duration, err error) *wireError {
	if isIdentityError(err) {
		return &wireError{Category: failIdentity, Err: err}
	}
	if perr := parent.Err(); perr != nil && (call != parent || !errors.Is(perr, context.DeadlineExceeded)) {
		return ctxFailure(parent, err)
	}
	if errors.Is(call.Err(), context.DeadlineExceeded) {
		return &wireError{Category: failTimeout, Err: fmt.Errorf("no answer within %v: %w", limit, err)}
	}
	return &wireError{Category: failTransport, Err: err}
}

// ctxFailure names a call stopped by the caller's context.
func ctxFailure(ctx context.Context, err error) *wireError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &wireError{Category: failTimeout, Err: err}
	}
	return &wireError{Category: failCancelled, Err: err}
}

// isIdentityError reports whether err is a failed identity check.
func isIdentityError(err error) bool {
	var ie *identityError
	return errors.As(err, &ie)
}
