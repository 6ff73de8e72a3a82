// guard_wire.go owns both ends of the provider wire contract: its names and
// limits, request and response types, strict codec, failure categories and
// the rules for a denial reason shown to the model and the client.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Texts a model and a client may see; nothing else of a provider failure is shown.
const (
	denyDefaultReason = "Tool invocation denied by host policy"
	guardFailedReason = "Tool invocation guard failed"
)

// Decision is one decision wherever it travels: a guard's answer at the
// boundary, the decision fields of a provider's reply, serve's answer to a
// managed child. A reason goes only with a denial.
type Decision struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

// deniedReason is the text shown for a denial given reason: the generic
// denial text when it is blank (DESIGN.md §1), else the trimmed text.
func deniedReason(reason string) string {
	if r := strings.TrimSpace(reason); r != "" {
		return r
	}
	return denyDefaultReason
}

// Wire names and limits of the provider contract (DESIGN.md §8): a request
// body, a response body (bounded before it is parsed), a denial reason.
const (
	wireProtocolVersion = 1
	wireClientName      = "qwen-code"
	wirePathHandshake   = "/v1/handshake"
	wirePathPrepare     = "/v1/prepare"
	wireContentType     = jsonContentType
	maxWireRequest      = 1 << 20
	maxWireResponse     = 64 << 10
	maxReasonUTF16      = 500
	// The provider echoes nonce and requestId; bounding them keeps every
	// reply far inside the client's 64 KiB limit.
	maxWireID = 256
)

// wireContentTypeOK reports whether ct is the content type both ends
// accept: application/json, its ASCII letters in either case, alone or with
// parameters (white space, then ';'). A byte loop: it runs on every request
// and response.
func wireContentTypeOK(ct string) bool {
	n := len(wireContentType)
	if len(ct) < n {
		return false
	}
	for i := range n {
		c := ct[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != wireContentType[i] {
			return false
		}
	}
	rest := strings.TrimLeft(ct[n:], " \t\n\f\r")
	return len(ct) == n || strings.HasPrefix(rest, ";")
}

// Failure categories of one provider call (DESIGN.md §3), for logs and
// metrics only: never shown to the model or in a tool result.
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
	// handshake met (guard_identity.go); no byte was sent on it.
	failIdentity = "identity"
)

// wireError is a failed provider call: its category and the detail behind it.
type wireError struct {
	Category string
	Err      error
	Status   int // the HTTP status of an http_status failure
}

func (e *wireError) Error() string { return e.Category + ": " + e.Err.Error() }
func (e *wireError) Unwrap() error { return e.Err }

func wireFail(category, format string, a ...any) *wireError {
	return &wireError{Category: category, Err: fmt.Errorf(format, a...)}
}

// reasonUnsafe reports why a denial reason may not be shown, or "" when it
// is safe (DESIGN.md §8).
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
	if len(raw) == 0 || raw[0] != '"' {
		return "", fmt.Errorf("field %q is not a string", key)
	}
	s, err := wireStringValue(raw)
	if err != nil {
		return "", fmt.Errorf("field %q: %w", key, err)
	}
	return s, nil
}

// wireStringValue decodes raw, a JSON string a strict walk accepted;
// without an escape it is the bytes between its quotes.
func wireStringValue(raw json.RawMessage) (string, error) {
	switch {
	case raw == nil:
		return "", errors.New("missing")
	case len(raw) < 2 || raw[0] != '"':
		return "", errors.New("not a string")
	case bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw):
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
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

// decodeWireBody decodes a body of either end: an exact object
// (decodeObjectBody) whose protocolVersion is 1.
func decodeWireBody(body []byte, allowed ...string) (map[string]json.RawMessage, *wireError) {
	m, werr := decodeObjectBody(body, allowed...)
	if werr == nil {
		werr = wireVersion(m)
	}
	if werr != nil {
		return nil, werr
	}
	return m, nil
}

// decodeHandshakeResponse checks a handshake reply, which must be exactly
// {"protocolVersion":1,"nonce":N,"capabilities":{"prepare":true}}.
func decodeHandshakeResponse(body []byte, nonce string) *wireError {
	m, werr := decodeWireBody(body, "protocolVersion", "nonce", "capabilities")
	if werr != nil {
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

// decodePrepareResponse checks a prepare reply and returns its decision,
// the reason "" when the provider gave none.
func decodePrepareResponse(body []byte, requestID string) (Decision, *wireError) {
	if isPrepareAllow(body, requestID) {
		return Decision{Allowed: true}, nil
	}
	return decodePrepareAnswer(body, requestID)
}

// decodePrepareAnswer is decodePrepareResponse without its shortcut for
// the reference provider's allow.
func decodePrepareAnswer(body []byte, requestID string) (Decision, *wireError) {
	m, werr := decodeWireBody(body, "protocolVersion", "requestId", "allowed", "reason")
	if werr != nil {
		return Decision{}, werr
	}
	got, err := wireString(m, "requestId")
	if err != nil {
		return Decision{}, &wireError{Category: failSchema, Err: err}
	}
	d, werr := decodeDecision(m)
	if werr == nil && got != requestID {
		return Decision{}, wireFail(failIDMismatch, "requestId does not echo the one sent")
	}
	return d, werr
}

// isPrepareAllow reports whether body is exactly the allow the reference
// provider writes for requestID (appendPrepareResponse), which
// decodePrepareResponse would read as an allow: the common answer is taken
// without a decode. Any other bytes are decoded.
func isPrepareAllow(body []byte, requestID string) bool {
	const head, tail = `{"protocolVersion":1,"requestId":"`, `","allowed":true}`
	return len(body) == len(head)+len(requestID)+len(tail) &&
		string(body[:len(head)]) == head && string(body[len(body)-len(tail):]) == tail &&
		string(body[len(head):len(head)+len(requestID)]) == requestID &&
		validWireID(requestID)
}

// validWireID reports whether id is a request id as this client makes them
// (randomHex): lower-case hex, which JSON writes as it is.
func validWireID(id string) bool {
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return id != ""
}

// appendPrepareResponse appends r as json.Marshal writes it.
func appendPrepareResponse(b []byte, r prepareResponse) []byte {
	b = append(b, `{"protocolVersion":`...)
	b = strconv.AppendInt(b, int64(r.ProtocolVersion), 10)
	b = appendJSONString(append(b, `,"requestId":`...), r.RequestID, true)
	if r.Allowed {
		b = append(b, `,"allowed":true`...)
	} else {
		b = append(b, `,"allowed":false`...)
	}
	if r.Reason != "" {
		b = appendJSONString(append(b, `,"reason":`...), r.Reason, true)
	}
	return append(b, '}')
}

// decodeDecision reads the fields of a decision: allowed, a JSON boolean,
// and reason, only on a denial and only as shownReason shows it.
func decodeDecision(m map[string]json.RawMessage) (Decision, *wireError) {
	var d Decision
	switch string(m["allowed"]) {
	case "true":
		d.Allowed = true
	case "false":
	default:
		return Decision{}, wireFail(failSchema, "allowed is missing or not a JSON boolean")
	}
	raw, ok := m["reason"]
	if !ok {
		return d, nil
	}
	if d.Allowed {
		return Decision{}, wireFail(failSchema, "reason on an allow")
	}
	if _, err := wireString(m, "reason"); err != nil {
		return Decision{}, &wireError{Category: failSchema, Err: err}
	}
	reason, err := shownReason(raw)
	if err != nil {
		return Decision{}, &wireError{Category: failUnsafeReason, Err: err}
	}
	d.Reason = reason
	return d, nil
}

// shownReason checks a denial reason, a JSON string as sent, and returns the
// text shown for it: "" when it is blank, so that the generic denial text
// is shown (DESIGN.md §1), else the trimmed text. An error
// says why the reason may not be shown.
func shownReason(raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("reason %q is not a string", truncateForError(raw))
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

// handshakeResponse is the body of a handshake reply, in wire order.
type handshakeResponse struct {
	ProtocolVersion int    `json:"protocolVersion"`
	Nonce           string `json:"nonce"`
	Capabilities    struct {
		Prepare bool `json:"prepare"`
	} `json:"capabilities"`
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

// prepareResponse is the body of a prepare reply, in wire order.
type prepareResponse struct {
	ProtocolVersion int    `json:"protocolVersion"`
	RequestID       string `json:"requestId"`
	Decision
}

// decodeProviderArguments decodes the final arguments of a call, which must
// be one JSON object; numbers stay as written, so canonicalArguments loses
// nothing.
func decodeProviderArguments(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New(`field "arguments" is not an object`)
	}
	args, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf(`field "arguments": %w`, err)
	}
	return args, nil
}

// canonicalArguments returns the canonical form of decoded arguments (Go's
// json.Marshal of the value: object keys sorted, no insignificant white
// space, numbers as written, strings escaped as encoding/json escapes them)
// and its argumentsDigest, the argumentsSha256 of the provider's audit log.
func canonicalArguments(args map[string]any) (canonical []byte, digest string) {
	canonical, _ = json.Marshal(args) // re-encoding a decoded value cannot fail
	return canonical, argumentsDigest(canonical)
}

// argumentsDigest is the argumentsSha256 of arguments as they travel: the
// SHA-256 of exactly these bytes, in hex (DESIGN.md §8).
func argumentsDigest(args []byte) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// canonicalArgumentBytes encodes a call's final arguments as they travel to
// the provider: their canonical form (canonicalArguments), which decoding
// and re-encoding leaves as it is, so the digest serve takes of the bytes
// it forwards equals the one the reference provider takes of what it
// decoded (DESIGN.md §8). json.Marshal's form is that, but for a string
// that is not valid UTF-8, which it spells \ufffd and which re-encodes as
// the character itself: such arguments take one more round.
func canonicalArgumentBytes(args map[string]any) ([]byte, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode arguments: %w", err)
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, errors.New("encode arguments: not an object")
	}
	if bytes.Contains(b, []byte(`\ufffd`)) {
		m, err := decodeObject(b)
		if err != nil {
			return nil, fmt.Errorf("encode arguments: %w", err)
		}
		b, _ = canonicalArguments(m)
	}
	return b, nil
}

// Bounds of the arguments serve forwards. They travel inside one request
// body, so no more than its bound; their nesting is the strict walk's,
// encoding/json's limit, so the provider decodes whatever serve forwards.
const (
	maxWireArguments      = maxWireRequest
	maxWireArgumentsDepth = maxJSONDepth
)

// checkWireArguments checks the final arguments of a call as a child sent
// them, once and without building Go values: one JSON object, valid UTF-8,
// no member name given twice in one object at any depth, nothing after it,
// at most maxWireArguments bytes. It returns them trimmed of JSON white
// space, the bytes to forward and to digest as they are.
func checkWireArguments(raw []byte) ([]byte, error) {
	raw, err := checkArgumentsBound(raw)
	if err != nil {
		return nil, err
	}
	w := wireWalk{data: raw, check: walkStrict}
	if err := w.checked(0); err != nil {
		return nil, fmt.Errorf(`field "arguments": %w`, err)
	}
	if w.i != len(raw) {
		return nil, errors.New(`field "arguments": trailing data after the object`)
	}
	return raw, nil
}

// checkArgumentsBound checks arguments a strict walk (strictMembers) already
// accepted: one object within maxWireArguments. It returns them trimmed.
func checkArgumentsBound(raw []byte) ([]byte, error) {
	raw = trimJSONSpace(raw)
	if len(raw) > maxWireArguments {
		return nil, fmt.Errorf(`field "arguments": %d bytes, more than %d`, len(raw), maxWireArguments)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New(`field "arguments" is not an object`)
	}
	return raw, nil
}

// trimJSONSpace trims JSON's white space, and nothing else, from both ends.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// appendPrepareRequest appends the body of POST /v1/prepare for call, in
// wire order and as json.Marshal writes it, but for the arguments: they are
// appended as given, which are bytes checkWireArguments accepted or
// canonicalArgumentBytes made (DESIGN.md §8).
func appendPrepareRequest(dst []byte, call prepareRequest) []byte {
	dst = append(dst, `{"protocolVersion":`...)
	dst = strconv.AppendInt(dst, int64(call.ProtocolVersion), 10)
	dst = append(dst, `,"requestId":`...)
	dst = appendJSONString(dst, call.RequestID, true)
	dst = append(dst, `,"sessionId":`...)
	dst = appendJSONString(dst, call.SessionID, true)
	dst = append(dst, `,"promptId":`...)
	dst = appendJSONString(dst, call.PromptID, true)
	dst = append(dst, `,"toolCallId":`...)
	dst = appendJSONString(dst, call.ToolCallID, true)
	dst = append(dst, `,"toolName":`...)
	dst = appendJSONString(dst, call.ToolName, true)
	dst = append(dst, `,"arguments":`...)
	dst = append(dst, call.Arguments...)
	return append(dst, '}')
}

// prepareRequestFrame is the bytes of a prepare body besides its strings and
// arguments, a capacity hint.
const prepareRequestFrame = 128
