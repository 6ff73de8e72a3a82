// provider.go owns both ends of the provider wire contract: its constants and
// strict codec, the pinned loopback client that asks for one decision, and
// the reference provider ("acpguard provider") with its policy file and audit log.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Texts a model and a client may see; nothing else of a provider failure is shown.
const (
	denyDefaultReason = "Tool invocation denied by host policy"
	guardFailedReason = "Tool invocation guard failed"
)

// Wire names and limits. "All bodies use UTF-8 JSON and Content-Type:
// application/json. Requests use Authorization: Bearer <token>. Redirects are
// not followed. Response bodies are bounded before JSON parsing. A serialized
// request may not exceed 1 MiB, a response may not exceed 64 KiB, and a
// denial reason may not exceed 500 UTF-16 code units or contain control
// characters."
const (
	wireProtocolVersion = 1
	wireClientName      = "qwen-code"
	wirePathHandshake   = "/v1/handshake"
	wirePathPrepare     = "/v1/prepare"
	wireContentType     = "application/json"
	maxWireRequest      = 1 << 20
	maxWireResponse     = 64 << 10
	maxReasonUTF16      = 500
	// The provider echoes nonce and requestId; bounding them keeps every
	// reply far inside the client's 64 KiB limit.
	maxWireID = 256
)

// wireContentTypeRE is the content type both ends accept: "content type
// must match ^application/json(\s*;|$) (case-insensitive)".
var wireContentTypeRE = regexp.MustCompile(`(?i)^application/json(\s*;|$)`)

// Failure categories of one provider call, for logs and metrics only: "the
// category and detail never reach the model or the tool result".
const (
	failTimeout          = "timeout"
	failCancelled        = "cancelled"
	failTransport        = "transport"
	failHTTPStatus       = "http_status"
	failContentType      = "content_type"
	failOversizeRequest  = "oversize_request"
	failOversizeResponse = "oversize_response"
	failMalformedJSON    = "malformed_json"
	failSchema           = "schema"
	failVersion          = "version"
	failIDMismatch       = "id_mismatch"
	failUnsafeReason     = "unsafe_reason"
	// failIdentity: the connection did not reach the provider the
	// handshake met (provider_identity.go); no byte was sent on it.
	failIdentity = "identity"
)

// wireError is a failed provider call: its category and the detail behind it.
type wireError struct {
	Category string
	Err      error
}

func (e *wireError) Error() string { return e.Category + ": " + e.Err.Error() }
func (e *wireError) Unwrap() error { return e.Err }

func wireFail(category, format string, a ...any) *wireError {
	return &wireError{Category: category, Err: fmt.Errorf(format, a...)}
}

// newWireID returns a fresh nonce or requestId: 16 bytes from crypto/rand, hex.
func newWireID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: crypto/rand aborts the process instead
	return hex.EncodeToString(b[:])
}

// reasonUnsafe reports why a denial reason may not be shown, or "" when it
// is safe: "non-blank after trimming, at most 500 UTF-16 code units, no
// control character (same set as the token)".
func reasonUnsafe(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	if strings.TrimSpace(s) == "" {
		return "blank"
	}
	units := 0
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 {
			return fmt.Sprintf("control character %U", r)
		}
		units += utf16.RuneLen(r)
	}
	if units > maxReasonUTF16 {
		return fmt.Sprintf("%d UTF-16 code units, more than %d", units, maxReasonUTF16)
	}
	return ""
}

// replacedEscape reports whether decoding the JSON string raw into s
// replaced an escape with U+FFFD: s holds more U+FFFD than raw spells.
func replacedEscape(raw json.RawMessage, s string) bool {
	spelled := bytes.Count(raw, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
	return strings.Count(s, "\uFFFD") > spelled
}

// wireString decodes a required JSON string field.
func wireString(m map[string]json.RawMessage, key string) (string, error) {
	raw, ok := m[key]
	if !ok {
		return "", fmt.Errorf("missing field %q", key)
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' {
		return "", fmt.Errorf("field %q is not a string", key)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("field %q: %w", key, err)
	}
	return s, nil
}

// wireVersion checks a required protocolVersion: any other JSON type is a
// schema failure, any value but the literal 1 a version failure.
func wireVersion(m map[string]json.RawMessage) *wireError {
	raw, ok := m["protocolVersion"]
	if !ok {
		return wireFail(failSchema, `missing field "protocolVersion"`)
	}
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return wireFail(failSchema, "protocolVersion is not a number")
	}
	if string(raw) != "1" {
		return wireFail(failVersion, "protocolVersion is not %d", wireProtocolVersion)
	}
	return nil
}

// decodeObjectBody turns body into an exact object, sorting syntax errors
// (malformed_json) from shape errors (schema).
func decodeObjectBody(body []byte, allowed ...string) (map[string]json.RawMessage, *wireError) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, wireFail(failMalformedJSON, "response is not one valid UTF-8 JSON value")
	}
	m, err := decodeWireObject(body, allowed...)
	if err != nil {
		return nil, &wireError{Category: failSchema, Err: err}
	}
	return m, nil
}

// decodeHandshakeResponse checks a handshake reply, which must be exactly
// {"protocolVersion":1,"nonce":N,"capabilities":{"prepare":true}}.
func decodeHandshakeResponse(body []byte, nonce string) *wireError {
	m, werr := decodeObjectBody(body, "protocolVersion", "nonce", "capabilities")
	if werr != nil {
		return werr
	}
	if werr := wireVersion(m); werr != nil {
		return werr
	}
	got, err := wireString(m, "nonce")
	if err != nil {
		return &wireError{Category: failSchema, Err: err}
	}
	caps, ok := m["capabilities"]
	if !ok {
		return wireFail(failSchema, `missing field "capabilities"`)
	}
	cm, err := decodeWireObject(caps, "prepare")
	if err != nil {
		return &wireError{Category: failSchema, Err: fmt.Errorf("capabilities: %w", err)}
	}
	if string(cm["prepare"]) != "true" {
		return wireFail(failSchema, "capabilities.prepare is not true")
	}
	if got != nonce {
		return wireFail(failIDMismatch, "nonce does not echo the one sent")
	}
	return nil
}

// decodePrepareResponse checks a prepare reply and returns the decision and
// the provider's reason ("" when it gave none).
func decodePrepareResponse(body []byte, requestID string) (allowed bool, reason string, werr *wireError) {
	m, werr := decodeObjectBody(body, "protocolVersion", "requestId", "allowed", "reason")
	if werr != nil {
		return false, "", werr
	}
	if werr := wireVersion(m); werr != nil {
		return false, "", werr
	}
	got, err := wireString(m, "requestId")
	if err != nil {
		return false, "", &wireError{Category: failSchema, Err: err}
	}
	switch string(m["allowed"]) {
	case "true":
		allowed = true
	case "false":
	default:
		return false, "", wireFail(failSchema, "allowed is missing or not a JSON boolean")
	}
	if got != requestID {
		return false, "", wireFail(failIDMismatch, "requestId does not echo the one sent")
	}
	if _, ok := m["reason"]; ok {
		if allowed {
			return false, "", wireFail(failSchema, "reason on an allow")
		}
		if _, err := wireString(m, "reason"); err != nil {
			return false, "", &wireError{Category: failSchema, Err: err}
		}
		if reason, err = shownReason(m["reason"]); err != nil {
			return false, "", &wireError{Category: failUnsafeReason, Err: err}
		}
	}
	return allowed, reason, nil
}

// shownReason checks a denial reason, a JSON string as sent, and returns the
// text shown for it: "" when it is blank, for "A missing or blank denial
// reason uses a stable generic message", else the trimmed text. An error
// says why the reason may not be shown. The provider client and a managed
// child reading its parent's answer both apply it.
func shownReason(raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("reason %s is not a string", raw)
	}
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	if replacedEscape(raw, s) {
		// encoding/json turns a lone surrogate escape into U+FFFD: the
		// text shown would not be the text sent.
		return "", errors.New("reason: an invalid \\u escape (a lone surrogate)")
	}
	if why := reasonUnsafe(s); why != "" {
		return "", fmt.Errorf("reason: %s", why)
	}
	return strings.TrimSpace(s), nil
}

// handshakeRequest is the body of POST /v1/handshake, in wire order.
type handshakeRequest struct {
	ProtocolVersion int    `json:"protocolVersion"`
	Nonce           string `json:"nonce"`
	Client          string `json:"client"`
}

// prepareRequest is the body of POST /v1/prepare, in wire order.
type prepareRequest struct {
	ProtocolVersion int             `json:"protocolVersion"`
	RequestID       string          `json:"requestId"`
	SessionID       string          `json:"sessionId"`
	PromptID        string          `json:"promptId"`
	ToolCallID      string          `json:"toolCallId"`
	ToolName        string          `json:"toolName"`
	Arguments       json.RawMessage `json:"arguments"`
}

// The client's connection pool: the daemon may ask for several decisions at
// once, and "keep-alive connections to the provider are allowed".
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
// client, one whose every call fails: config.go validates first, this is the
// second lock.
func newProviderClient(cfg guardConfig) *providerClient {
	c := &providerClient{token: cfg.Token, timeout: cfg.Timeout, selfUID: uint32(os.Geteuid())}
	u := cfg.Endpoint
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
		c.invalid = errors.New("endpoint is not an http(s) URL")
		return c
	}
	host := strings.ToLower(u.Hostname())
	// "localhost is pinned by the client to 127.0.0.1 (with localhost SNI
	// for HTTPS); it is never resolved through ambient DNS or proxy
	// configuration."
	var dialHost string
	switch host {
	case "localhost", "127.0.0.1":
		dialHost = "127.0.0.1"
	case "::1":
		dialHost = "::1"
	default:
		c.invalid = fmt.Errorf("endpoint host %q is not loopback", host)
		return c
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
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12} // system roots only
	if host == "localhost" {
		tlsConf.ServerName = "localhost"
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
		// "Redirects are not followed": the 3xx itself comes back and fails the status check.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// handshake performs the startup handshake; any error means the provider is
// unusable. The error (a *wireError) names the failure category. A
// successful handshake records the provider it met: later connections must
// reach that one. A failed one leaves the identity recorded before.
func (c *providerClient) handshake(ctx context.Context) error {
	nonce := newWireID()
	body, err := json.Marshal(handshakeRequest{ProtocolVersion: wireProtocolVersion, Nonce: nonce, Client: wireClientName})
	if err != nil {
		return fmt.Errorf("provider handshake: %w", err)
	}
	var seen atomic.Pointer[providerIdentity]
	resp, werr := c.post(ctx, c.handshakeClient(&seen), wirePathHandshake, body)
	if werr == nil {
		werr = decodeHandshakeResponse(resp, nonce)
	}
	if werr == nil {
		werr = c.acceptIdentity(&seen)
	}
	if werr != nil {
		return fmt.Errorf("provider handshake: %w", c.redact(werr))
	}
	return nil
}

// redact removes the token from a failure's detail: details are logged, and
// a misbehaving provider could echo the token back in what an error quotes.
func (c *providerClient) redact(werr *wireError) *wireError {
	if c.token == "" || !strings.Contains(werr.Err.Error(), c.token) {
		return werr
	}
	return &wireError{Category: werr.Category, Err: errors.New(strings.ReplaceAll(werr.Err.Error(), c.token, "[token]"))}
}

// prepareCall is the identity and the final call one decision is about.
type prepareCall struct {
	SessionID  string
	PromptID   string
	ToolCallID string
	ToolName   string
	Arguments  json.RawMessage // a JSON object
}

// prepareResult is the outcome of exactly one prepare attempt.
type prepareResult struct {
	RequestID string
	Allowed   bool
	Reason    string // user-visible: the provider's reason, denyDefaultReason or guardFailedReason
	Category  string // failure category, "" when the provider decided
	Err       error  // failure detail, for logs only
}

// prepare asks the provider once whether call may execute now. There is no
// retry on any outcome: "Qwen Code sends no retries".
func (c *providerClient) prepare(ctx context.Context, call prepareCall) prepareResult {
	res := prepareResult{RequestID: newWireID()}
	fail := func(werr *wireError) prepareResult {
		res.Reason, res.Category, res.Err = guardFailedReason, werr.Category, c.redact(werr)
		return res
	}
	args := bytes.TrimSpace(call.Arguments)
	if len(args) == 0 || args[0] != '{' {
		return fail(wireFail(failSchema, "arguments are not a JSON object"))
	}
	body, err := json.Marshal(prepareRequest{
		ProtocolVersion: wireProtocolVersion,
		RequestID:       res.RequestID,
		SessionID:       call.SessionID,
		PromptID:        call.PromptID,
		ToolCallID:      call.ToolCallID,
		ToolName:        call.ToolName,
		Arguments:       args,
	})
	if err != nil {
		return fail(wireFail(failSchema, "encode prepare request: %w", err))
	}
	if len(body) > maxWireRequest {
		return fail(wireFail(failOversizeRequest, "prepare request is %d bytes, more than %d", len(body), maxWireRequest))
	}
	resp, werr := c.post(ctx, c.http, wirePathPrepare, body)
	if werr != nil {
		return fail(werr)
	}
	allowed, reason, werr := decodePrepareResponse(resp, res.RequestID)
	if werr != nil {
		return fail(werr)
	}
	res.Allowed = allowed
	if !allowed {
		res.Reason = reason
		if res.Reason == "" {
			res.Reason = denyDefaultReason
		}
	}
	return res
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
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.origin+route, bytes.NewReader(body))
	if err != nil {
		return nil, &wireError{Category: failTransport, Err: err}
	}
	// net/http re-sends a POST only when a reused idle connection failed
	// before a single byte of it was written, so the provider still sees at
	// most one request; it never replays one the provider may have received.
	req.Host = c.hostPort
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", wireContentType)
	req.Header.Set("Accept", wireContentType)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.classify(ctx, callCtx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, wireFail(failHTTPStatus, "POST %s: status %d", route, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !wireContentTypeRE.MatchString(ct) {
		return nil, wireFail(failContentType, "POST %s: content type %q", route, ct)
	}
	if resp.ContentLength > maxWireResponse {
		return nil, wireFail(failOversizeResponse, "POST %s: content length %d, more than %d", route, resp.ContentLength, maxWireResponse)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxWireResponse+1))
	if err != nil {
		return nil, c.classify(ctx, callCtx, err)
	}
	if len(data) > maxWireResponse {
		return nil, wireFail(failOversizeResponse, "POST %s: response over %d bytes", route, maxWireResponse)
	}
	return data, nil
}

// classify names a failed exchange: a failed identity check (the request
// was never sent), then the caller's context, then the call's own
// deadline, then the transport.
func (c *providerClient) classify(parent, call context.Context, err error) *wireError {
	if isIdentityError(err) {
		return &wireError{Category: failIdentity, Err: err}
	}
	if perr := parent.Err(); perr != nil {
		return ctxFailure(parent, err)
	}
	if errors.Is(call.Err(), context.DeadlineExceeded) {
		return &wireError{Category: failTimeout, Err: fmt.Errorf("no answer within %v: %w", c.timeout, err)}
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
