// jsonrpc.go owns the line-delimited JSON-RPC 2.0 peer used by the ACP agent,
// the daemon's channel to a child, and the MCP client.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// JSON-RPC 2.0 and ACP error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
	rpcCancelled      = -32800
	rpcNotFound       = -32002
)

// One UTF-8 JSON-RPC 2.0 message per line, never a raw newline inside.
const (
	rpcVersion = "2.0"
	// defaultMaxLine bounds one incoming message when rpcConfig.MaxLine is 0
	// (DESIGN.md §6).
	defaultMaxLine = 4 << 20
	// rpcReadBuffer is the read chunk; a line longer than it is assembled
	// piecewise, so memory grows only with the lines actually received.
	rpcReadBuffer = 64 << 10
	// The receiver of a cancel still answers the request once.
	rpcCancelRequest = "$/cancel_request"
	// rpcMaxErrorText bounds the message of an error this side writes about
	// a malformed line, which may quote part of a line of up to MaxLine bytes.
	rpcMaxErrorText = 256
)

// errConnClosed is wrapped by every call that cannot complete because the
// connection has ended.
var errConnClosed = errors.New("json-rpc connection closed")

// rpcError is an error response, sent or received.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// methodNotFound is the answer to a request nobody handles; handlers
// return it for methods they do not know.
func methodNotFound(method string) *rpcError {
	return &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("method not found: %q", method)}
}

// rpcConfig says how a connection answers what the peer sends.
type rpcConfig struct {
	// MaxLine bounds one incoming message in bytes (0 means defaultMaxLine);
	// a longer line is discarded without being buffered whole, answered
	// with -32700 and id null, and serving continues.
	MaxLine int
	// OnRequest answers one request; it runs in its own goroutine and ctx is
	// cancelled by $/cancel_request or when the connection ends. Returning
	// an *rpcError sends it as is; any other error becomes -32603.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (any, error)
	// OnNotify handles one notification, in read order, on the read goroutine.
	OnNotify func(method string, params json.RawMessage)
	// OnAdmit, when set, sees each request in read order on the read
	// goroutine before its handler starts, and returns the handler's
	// context: a notification read after the request then finds what
	// OnAdmit recorded, however late the handler's goroutine runs.
	OnAdmit func(ctx context.Context, method string, params json.RawMessage) context.Context
	// CancelNotice, when set, is the notification that tells the peer a
	// call's caller stopped waiting (its context ended before the answer),
	// so the peer can stop the work: ACP's $/cancel_request, MCP's
	// notifications/cancelled. ok false sends nothing for that call.
	CancelNotice func(call string, id json.RawMessage) (method string, params any, ok bool)
	// ParamsChecked names the requests whose handler walks its params
	// strictly itself, refusing what is not JSON: the envelope's walk only
	// bounds them, so that a long request's bytes are walked once. Its
	// params that are not JSON are then answered as invalid params, not as
	// a parse error.
	ParamsChecked []string
}

// acpCancelNotice is "`$/cancel_request` {requestId}".
func acpCancelNotice(_ string, id json.RawMessage) (string, any, bool) {
	return rpcCancelRequest, map[string]json.RawMessage{"requestId": id}, true
}

// rpcConn is one line-delimited JSON-RPC 2.0 peer. serve runs at most once;
// call and notify may be used from any goroutine.
type rpcConn struct {
	r   io.Reader
	w   io.Writer
	cfg rpcConfig

	// wmu guards writing and queued. One write to w is in progress at a
	// time; lines sent meanwhile queue whole, in send order, and go out
	// together in the next write, which starts as soon as the one in
	// progress ends: no line waits for company, and a line sent while the
	// peer is slow to read costs no write of its own.
	wmu     sync.Mutex
	writing bool
	queued  *rpcBatch

	mu       sync.Mutex
	closed   bool
	nextID   int64
	pending  map[int64]pendingCall         // outgoing calls awaiting a response
	inflight map[string]context.CancelFunc // incoming requests, by idKey
	handlers sync.WaitGroup                // the requests being handled

	// Handler goroutines are kept (handleMore): one whose request is
	// answered waits on idle for the next while serve runs. serving is
	// set by serve, and read with idle only on its read goroutine.
	serving bool
	idle    chan func()
	idlers  sync.WaitGroup

	// gone is closed when a write finds the peer's end closed (EPIPE): a
	// peer that reads nothing more has ended the connection, as if its
	// input had ended.
	gone     chan struct{}
	goneOnce sync.Once

	// methods are method names read before (methodName).
	methods []string
}

// rpcBatch is the lines sent while a write was in progress. Its first
// sender writes it when the write ahead of it ends; every sender returns
// once it is written, with its outcome.
type rpcBatch struct {
	lines []byte
	turn  chan struct{} // closed when the write ahead ends
	done  chan struct{} // closed once lines are written; err is then set
	err   error
}

// rpcReply is what a pending call receives.
type rpcReply struct {
	result json.RawMessage
	err    error
}

// pendingCall is one outgoing call awaiting its response.
type pendingCall struct {
	reply chan rpcReply // capacity 1
	// answered, when set, runs where the call is settled: on the read
	// goroutine before the next line is dispatched (callAnswered).
	answered func()
}

// settle hands the call its reply, after running answered.
func (p pendingCall) settle(r rpcReply) {
	if p.answered != nil {
		p.answered()
	}
	p.reply <- r
}

// rpcEnvelope is every field a message may carry; each is kept raw so that
// presence (including an explicit null) and type are checked here.
type rpcEnvelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// rpcOut is one outgoing message, its members in wire order. appendRPCOut
// writes it as encoding/json would, without HTML escaping, and compacts
// every value it did not build itself, so no newline can reach the wire
// inside a message. An empty member is left out.
type rpcOut struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	// Result is compact and valid JSON as runHandler has it (json.Marshal's
	// output or a handler's rpcCompact): it goes on the line as it is.
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// rpcCompact is JSON its maker built compact and valid: a call's params
// (appendGuardPrepareParams) or a handler's result. It goes on the line as
// it is, where a json.RawMessage is checked and compacted and any other
// value encoded. Empty, it is a json.RawMessage.
type rpcCompact []byte

// rpcAppendParams appends a call's params to the line being built, compact
// and valid as rpcCompact is, or fails: params as large as a model call's
// request are then made once, in the line, instead of built and copied.
type rpcAppendParams func(line []byte) ([]byte, error)

// rpcLineFrame bounds what a line holds besides its params, result and
// error, so that most lines are built without growing their buffer.
const rpcLineFrame = 64

// rpcNullID answers a message whose id could not be read.
const rpcNullID = "null"

func newRPCConn(r io.Reader, w io.Writer, cfg rpcConfig) *rpcConn {
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = defaultMaxLine
	}
	return &rpcConn{
		r:        r,
		w:        w,
		cfg:      cfg,
		pending:  make(map[int64]pendingCall),
		inflight: make(map[string]context.CancelFunc),
		gone:     make(chan struct{}),
		idle:     make(chan func()),
	}
}

// serve reads messages until r ends or ctx is done, then cancels and waits
// for every request handler before it returns. When ctx ends, serve closes r
// if it is an io.Closer so that a blocked read returns; a reader that is not
// a Closer keeps serve waiting until its read returns. A write that finds the
// peer gone (EPIPE) ends serving as the end of r does. serve returns nil at
// the end of r or of the peer, ctx.Err() when ctx ended, and the read or
// write error that stopped it otherwise.
func (c *rpcConn) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stop := make(chan struct{})
	var watcher sync.WaitGroup
	if rc, ok := c.r.(io.Closer); ok {
		watcher.Go(func() {
			select {
			case <-ctx.Done():
				rc.Close()
			case <-c.gone:
				rc.Close()
			case <-stop:
			}
		})
	}

	c.serving = true
	err := c.readLoop(ctx)
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	} else if c.peerGone() {
		err = nil
	}
	close(stop)
	watcher.Wait()

	// Fail pending calls before waiting for handlers: a handler blocked in
	// call on this connection would otherwise never return.
	c.mu.Lock()
	c.closed = true
	pending := c.pending
	c.pending = map[int64]pendingCall{}
	c.mu.Unlock()
	for _, p := range pending {
		p.settle(rpcReply{err: errConnClosed}) // answered runs without c.mu
	}
	cancel()
	c.handlers.Wait()
	c.idlers.Wait() // ctx ended their wait
	return err
}

func (c *rpcConn) readLoop(ctx context.Context) error {
	lr := lineReader{br: bufio.NewReaderSize(c.r, rpcReadBuffer), max: c.cfg.MaxLine}
	for ctx.Err() == nil {
		line, tooLong, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read json-rpc message: %w", err)
		}
		if tooLong {
			err = c.sendError(nil, rpcParseError, fmt.Sprintf("parse error: message longer than %d bytes", c.cfg.MaxLine))
		} else {
			err = c.dispatch(ctx, line)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lineReader splits input into lines no longer than max, discarding the rest
// of an over-long line instead of buffering it.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// next returns the next line without its newline, or tooLong when it
// exceeded max. A final line without a newline is still returned. The line
// is valid until the next call.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		if err == nil && len(l.buf) == 0 && !tooLong && len(chunk) <= l.max+1 {
			// A whole line in the read buffer is returned as it lies there:
			// the next call reuses it, as it reuses buf.
			return bytes.TrimSuffix(chunk, []byte("\n")), false, nil
		}
		if !tooLong {
			// max+1 leaves room for the newline itself.
			if len(l.buf)+len(chunk) > l.max+1 {
				tooLong = true
				l.buf = l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(l.buf) > 0 || tooLong):
			// The unterminated last line; the next call reports EOF.
		case err != nil:
			return nil, false, err
		}
		line = bytes.TrimSuffix(l.buf, []byte("\n"))
		if len(line) > l.max {
			return nil, true, nil
		}
		return line, tooLong, nil
	}
}

// rpcMembers are the members of a message, in the order of rpcEnvelope.
var rpcMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// dispatch handles one line. Only a failure to write an answer is returned.
// An object is checked and split into its members in one walk that builds
// no Go value (syntaxMembers); the members alias the read buffer, which the
// next line reuses, so what outlives this call is copied where it is handed
// on (request, notified, deliver).
func (c *rpcConn) dispatch(ctx context.Context, line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var m [len(rpcMembers)]json.RawMessage
	if line[0] != '{' {
		switch {
		case !json.Valid(line):
			return c.sendError(nil, rpcParseError, "parse error: invalid JSON")
		case line[0] == '[':
			// No batches: an array is answered -32600 with id null, as the ACP SDK does.
			return c.sendError(nil, rpcInvalidRequest, "invalid request: batches are not supported")
		}
		return c.sendError(nil, rpcInvalidRequest, "invalid request: message is not an object")
	}
	named, valid := c.envelope(line, m[:])
	switch {
	case !valid:
		return c.sendError(nil, rpcParseError, "parse error: invalid JSON")
	case named != nil:
		return c.rejectMalformed(line, fmt.Sprintf("invalid request: %v", named))
	}
	env := rpcEnvelope{JSONRPC: m[0], ID: m[1], Method: m[2], Params: m[3], Result: m[4], Error: m[5]}
	id, idOK := rpcID(env.ID)
	if !rpcVersionOK(env.JSONRPC) {
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
	method, ok := c.methodName(env.Method)
	if !ok {
		return c.reject(env, id, fmt.Sprintf("invalid request: method must be a non-empty string, got %s", truncateForError(env.Method)))
	}
	if env.Result != nil || env.Error != nil {
		return c.reject(env, id, fmt.Sprintf("invalid request: %q carries a result or an error", method))
	}
	if string(env.Params) == "null" {
		env.Params = nil // null params are no params
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

// rpcParams is the index of "params" in rpcMembers.
const rpcParams = 3

// envelope splits line into rpcMembers as syntaxMembers does, except that
// the params of a request the configuration names in ParamsChecked are only
// bounded.
func (c *rpcConn) envelope(line []byte, m []json.RawMessage) (named error, valid bool) {
	if !c.mayBeParamsChecked(line) {
		return syntaxMembers(line, rpcMembers[:], m)
	}
	w := wireWalk{data: line, check: walkSyntax}
	named, err := w.members(rpcMembers[:], m, rpcParams)
	if err != nil || m[rpcParams] == nil {
		return named, err == nil
	}
	if m[1] != nil && m[2] != nil {
		if method, ok := c.methodName(m[2]); ok && slices.Contains(c.cfg.ParamsChecked, method) {
			return named, true
		}
	}
	p := wireWalk{data: m[rpcParams], check: walkSyntax}
	if p.checked(0) != nil || p.i != len(p.data) {
		return named, false
	}
	return named, true
}

// rpcMethodPeek is how far into a line mayBeParamsChecked looks for a
// method's name: past "jsonrpc" and an id, where a peer writes "method"
// before "params", as JSON-RPC's examples and every ACP SDK do.
const rpcMethodPeek = 256

// mayBeParamsChecked reports whether line may be a request ParamsChecked
// names: one of the names, quoted, in its first bytes. Any other line is
// walked once as before (a request of such a method whose name comes later
// is too, only slower): a line's params are otherwise walked twice, bounded
// then checked.
func (c *rpcConn) mayBeParamsChecked(line []byte) bool {
	head := line[:min(len(line), rpcMethodPeek)]
	for _, name := range c.cfg.ParamsChecked {
		if i := bytes.Index(head, []byte(name)); i > 0 && i+len(name) < len(head) && head[i-1] == '"' && head[i+len(name)] == '"' {
			return true
		}
	}
	return false
}

// rpcVersionOK reports whether raw, a member's JSON value, is the string
// rpcVersion however it is spelled.
func rpcVersionOK(raw json.RawMessage) bool {
	if string(raw) == `"`+rpcVersion+`"` {
		return true
	}
	var version string
	return json.Unmarshal(raw, &version) == nil && version == rpcVersion
}

// rpcMethodNames bounds the method names a connection keeps to hand out
// again without a copy, and rpcMethodNameLen each one's length: the names
// are the peer's, so what they hold stays small whatever it sends.
const (
	rpcMethodNames   = 8
	rpcMethodNameLen = 64
)

// methodName reads raw, a JSON value, as a method name: a non-empty
// string. A name written without escapes is its own bytes, and one seen
// before is not copied again; any other is decoded.
// It runs on the read goroutine only.
func (c *rpcConn) methodName(raw json.RawMessage) (string, bool) {
	if raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if len(inner) == 0 {
		return "", false // never kept among the names read before, so never read as one
	}
	if bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		var method string
		if json.Unmarshal(raw, &method) != nil {
			return "", false
		}
		return method, method != ""
	}
	for _, name := range c.methods {
		if name == string(inner) {
			return name, true
		}
	}
	method := string(inner)
	if len(c.methods) < rpcMethodNames && len(method) <= rpcMethodNameLen {
		c.methods = append(c.methods, method)
	}
	return method, method != ""
}

// rejectMalformed answers a message that failed strict decoding, after
// reading what it can of it loosely.
func (c *rpcConn) rejectMalformed(line []byte, msg string) error {
	var env rpcEnvelope
	// line is a valid JSON object and every field is raw, so this succeeds.
	_ = json.Unmarshal(line, &env)
	id, _ := rpcID(env.ID)
	return c.reject(env, id, msg)
}

// reject answers an invalid message with -32600. A notification has nobody
// to answer. A response is never answered, since its id is from our own
// numbering, but it fails the call it answers.
func (c *rpcConn) reject(env rpcEnvelope, id json.RawMessage, msg string) error {
	switch {
	case env.Method != nil && env.ID == nil:
		return nil
	case env.Method == nil && (env.Result != nil || env.Error != nil):
		c.fail(id, fmt.Errorf("malformed json-rpc response: %s", msg))
		return nil
	}
	return c.sendError(id, rpcInvalidRequest, msg)
}

// rpcID validates an id: absent, a string, an integer or null. An invalid
// id comes back nil, which answers as null.
func rpcID(raw json.RawMessage) (json.RawMessage, bool) {
	if raw == nil {
		return nil, true
	}
	switch c := raw[0]; {
	case c == '"', string(raw) == rpcNullID:
		return raw, true
	case (c == '-' || c >= '0' && c <= '9') && !bytes.ContainsAny(raw, ".eE"):
		return raw, true
	}
	return nil, false
}

// idKey names an id independently of its spelling on the wire, so that
// "a" and "\u0061" in $/cancel_request find the same request.
func idKey(raw json.RawMessage) string {
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s" + s
		}
	}
	return "n" + string(raw)
}

// deliver hands a response to the call waiting for it; a response nobody
// waits for (unknown id, or a call whose ctx already ended) is dropped.
func (c *rpcConn) deliver(env rpcEnvelope) {
	if env.Result != nil && env.Error != nil {
		c.fail(env.ID, errors.New("malformed json-rpc response: both result and error"))
		return
	}
	if env.Error != nil {
		var rerr rpcError
		if env.Error[0] != '{' {
			c.fail(env.ID, fmt.Errorf("malformed json-rpc error response %q: not an object", truncateForError(env.Error)))
			return
		}
		if err := decodeStrict(env.Error, &rerr); err != nil {
			c.fail(env.ID, fmt.Errorf("malformed json-rpc error response %q: %w", truncateForError(env.Error), err))
			return
		}
		c.fail(env.ID, &rerr)
		return
	}
	if p, ok := c.take(env.ID); ok {
		p.settle(rpcReply{result: bytes.Clone(env.Result)}) // it outlives the line
	}
}

func (c *rpcConn) fail(id json.RawMessage, err error) {
	if p, ok := c.take(id); ok {
		p.settle(rpcReply{err: err})
	}
}

// take removes and returns the pending call answered by id, if any.
func (c *rpcConn) take(id json.RawMessage) (pendingCall, bool) {
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		return pendingCall{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[n]
	delete(c.pending, n)
	return p, ok
}

// notified runs one notification on the read goroutine.
func (c *rpcConn) notified(method string, params json.RawMessage) {
	if method == rpcCancelRequest {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Meta      json.RawMessage `json:"_meta"`
		}
		if decodeStrict(params, &p) != nil || p.RequestID == nil {
			return
		}
		if _, ok := rpcID(p.RequestID); !ok {
			return
		}
		c.mu.Lock()
		cancel := c.inflight[idKey(p.RequestID)]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return
	}
	if c.cfg.OnNotify != nil {
		c.cfg.OnNotify(method, bytes.Clone(params)) // it may outlive the line
	}
}

// request starts the handler of one request in its own goroutine.
func (c *rpcConn) request(ctx context.Context, id json.RawMessage, method string, params json.RawMessage) error {
	if c.cfg.OnRequest == nil {
		return c.sendError(id, rpcMethodNotFound, methodNotFound(method).Message)
	}
	key := idKey(id)
	c.mu.Lock()
	if _, dup := c.inflight[key]; dup {
		c.mu.Unlock()
		return c.sendError(id, rpcInvalidRequest, fmt.Sprintf("invalid request: id %s is already in use", id))
	}
	hctx, cancel := context.WithCancel(ctx)
	c.inflight[key] = cancel
	c.mu.Unlock()
	// The id and the params outlive the line: one copy holds both.
	own := make([]byte, 0, len(id)+len(params))
	own = append(append(own, id...), params...)
	id = own[:len(id):len(id)]
	if params != nil {
		params = own[len(id):]
	}
	if c.cfg.OnAdmit != nil {
		hctx = c.cfg.OnAdmit(hctx, method, params)
	}

	c.handlers.Add(1)
	c.handle(ctx, func() {
		defer c.handlers.Done()
		defer cancel()
		result, rerr := c.runHandler(hctx, method, params)
		// Forget the id before answering: the peer may reuse it as soon as
		// it has the answer.
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		// The peer may be gone; there is nobody to tell about a failed write.
		if rerr != nil {
			_ = c.send(rpcOut{JSONRPC: rpcVersion, ID: id, Error: rerr})
		} else {
			_ = c.send(rpcOut{JSONRPC: rpcVersion, ID: id, Result: result})
		}
	})
	return nil
}

// rpcHandlerIdle is how long a handler goroutine whose request is answered
// waits for the next before it ends. A new goroutine's stack is small, and
// a handler's path (strict walks, the provider's and the model's HTTP
// client) grows it more than once, copying it each time: about 10 µs of a
// guarded call's CPU in serve (docs/performance.md). A goroutine kept
// keeps the stack it grew.
const rpcHandlerIdle = time.Second

// handle runs fn, one request's handling, on a goroutine of its own: a
// kept one waiting for work, or a new one, kept afterwards while serve
// runs (handleMore). It runs on the read goroutine.
func (c *rpcConn) handle(ctx context.Context, fn func()) {
	if !c.serving {
		go fn()
		return
	}
	select {
	case c.idle <- fn:
	default:
		c.idlers.Add(1)
		go c.handleMore(ctx, fn)
	}
}

// handleMore runs fn, then the requests handed to it on idle, until none
// comes for rpcHandlerIdle or ctx, serve's, ends.
func (c *rpcConn) handleMore(ctx context.Context, fn func()) {
	defer c.idlers.Done()
	wait := time.NewTimer(rpcHandlerIdle)
	defer wait.Stop()
	for {
		fn()
		fn = nil // a request's params are not kept while it waits
		wait.Reset(rpcHandlerIdle)
		select {
		case fn = <-c.idle:
		case <-wait.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// runHandler runs OnRequest and turns whatever it does into exactly one
// answer: a result, or an error object.
func (c *rpcConn) runHandler(ctx context.Context, method string, params json.RawMessage) (result json.RawMessage, rerr *rpcError) {
	defer func() {
		if p := recover(); p != nil {
			result, rerr = nil, &rpcError{Code: rpcInternalError, Message: fmt.Sprintf("internal error: handler for %q panicked", method)}
		}
	}()
	v, err := c.cfg.OnRequest(ctx, method, params)
	if err != nil {
		var re *rpcError
		switch {
		case errors.As(err, &re):
			return nil, re
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			return nil, &rpcError{Code: rpcCancelled, Message: "request cancelled"}
		}
		return nil, &rpcError{Code: rpcInternalError, Message: err.Error()}
	}
	if r, ok := v.(rpcCompact); ok {
		if len(r) > 0 {
			return json.RawMessage(r), nil
		}
		v = json.RawMessage(r)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &rpcError{Code: rpcInternalError, Message: fmt.Sprintf("encode result of %q: %v", method, err)}
	}
	return b, nil
}

// call sends a request and waits for its response, ctx, or the end of the
// connection. An error response is returned as *rpcError; when ctx ends
// first, ctx.Err() is returned and a late response is dropped.
func (c *rpcConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.callAnswered(ctx, method, params, nil)
}

// callAnswered is call that also runs answered, when not nil, on the read
// goroutine as the response (a result, an error, or a malformed one) is
// read, before the next line is dispatched; or as the connection ends with
// the call pending. Whatever answered records is then in place for every
// message the peer sent after its answer, however late the caller's
// goroutine runs: serve ends a prompt there, so that a prepare the child
// wrote after its prompt result finds the prompt over. answered may also run
// after ctx ended, if the answer was already being read. It must be quick
// and must not wait on this connection.
func (c *rpcConn) callAnswered(ctx context.Context, method string, params any, answered func()) (json.RawMessage, error) {
	return c.callSent(ctx, method, params, nil, answered)
}

// callSent is callAnswered that also runs sent, when not nil, on the
// caller's goroutine once the request is written: a notification sent from
// there reaches the peer after the request (DESIGN.md §7).
func (c *rpcConn) callSent(ctx context.Context, method string, params any, sent, answered func()) (json.RawMessage, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("call %q: %w", method, errConnClosed)
	}
	c.nextID++
	n := c.nextID
	ch := make(chan rpcReply, 1)
	c.pending[n] = pendingCall{reply: ch, answered: answered}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, n)
		c.mu.Unlock()
	}()

	id := json.RawMessage(strconv.AppendInt(nil, n, 10))
	if err := c.send(rpcOut{JSONRPC: rpcVersion, ID: id, Method: method, Params: params}); err != nil {
		return nil, fmt.Errorf("call %q: %w", method, err)
	}
	if sent != nil {
		sent()
	}
	select {
	case r := <-ch:
		if r.err != nil {
			var re *rpcError
			if errors.As(r.err, &re) {
				return nil, re
			}
			return nil, fmt.Errorf("call %q: %w", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		if c.cfg.CancelNotice != nil {
			if notice, params, ok := c.cfg.CancelNotice(method, id); ok {
				// Sent aside: a peer that stopped reading must not keep the
				// caller, which gave up on it, waiting on a full pipe. The
				// write ends when the connection does.
				go c.notify(notice, params)
			}
		}
		return nil, ctx.Err()
	}
}

// notify sends a notification.
func (c *rpcConn) notify(method string, params any) error {
	if err := c.send(rpcOut{JSONRPC: rpcVersion, Method: method, Params: params}); err != nil {
		return fmt.Errorf("notify %q: %w", method, err)
	}
	return nil
}

// sendError answers with an error; a nil id, absent or unreadable, is sent
// as null.
func (c *rpcConn) sendError(id json.RawMessage, code int, msg string) error {
	if id == nil {
		id = json.RawMessage(rpcNullID)
	}
	if len(msg) > rpcMaxErrorText {
		cut := rpcMaxErrorText
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return c.send(rpcOut{JSONRPC: rpcVersion, ID: id, Error: &rpcError{Code: code, Message: msg}})
}

// rpcLines holds line buffers for send, which is done with a line once
// sendLine returns: written, or copied into the queued batch.
var rpcLines = sync.Pool{New: func() any { return new([]byte) }}

// rpcPooledLine bounds the buffers rpcLines keeps: one grown past it is
// left to the collector, so the pool stays small whatever was sent. It
// holds a model call's line, which repeats the session's history on every
// call, for a session of some hundred exchanges.
const rpcPooledLine = 256 << 10

// send writes one message as one line.
func (c *rpcConn) send(m rpcOut) error {
	buf := rpcLines.Get().(*[]byte)
	line, err := appendRPCOut((*buf)[:0], m)
	if err != nil {
		rpcLines.Put(buf)
		return err
	}
	err = c.sendLine(line)
	if cap(line) <= rpcPooledLine {
		*buf = line[:0]
		rpcLines.Put(buf)
	}
	return err
}

// appendRPCOut appends m to b as one line, newline included: the bytes
// json.Encoder writes for m with HTML escaping off, so that an echoed id
// stays byte for byte what the peer sent.
func appendRPCOut(b []byte, m rpcOut) ([]byte, error) {
	n := rpcLineFrame + len(m.ID) + len(m.Method) + len(m.Result)
	if p, ok := m.Params.(rpcCompact); ok {
		n += len(p)
	}
	if m.Error != nil {
		n += len(m.Error.Message) + len(m.Error.Data)
	}
	b = slices.Grow(b, n)
	b = append(b, `{"jsonrpc":`...)
	b = appendJSONString(b, m.JSONRPC, false)
	var err error
	if len(m.ID) > 0 {
		b = append(b, `,"id":`...)
		if b, err = appendCompactJSON(b, m.ID); err != nil {
			return nil, fmt.Errorf("encode json-rpc message: id %q: %w", truncateForError(m.ID), err)
		}
	}
	if m.Method != "" {
		b = append(b, `,"method":`...)
		b = appendJSONString(b, m.Method, false)
	}
	if m.Params != nil {
		b = append(b, `,"params":`...)
		if b, err = appendRPCParams(b, m.Params); err != nil {
			return nil, fmt.Errorf("encode json-rpc message: params of %q: %w", m.Method, err)
		}
	}
	if len(m.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, m.Result...)
	}
	if m.Error != nil {
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(m.Error.Code), 10)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, m.Error.Message, false)
		if len(m.Error.Data) > 0 {
			b = append(b, `,"data":`...)
			if b, err = appendCompactJSON(b, m.Error.Data); err != nil {
				return nil, fmt.Errorf("encode json-rpc message: error data: %w", err)
			}
		}
		b = append(b, '}')
	}
	return append(b, '}', '\n'), nil
}

// appendRPCParams appends params as json.Encoder would, HTML escaping off:
// rpcCompact as they are, a json.RawMessage compacted (nil is null),
// any other value encoded.
func appendRPCParams(b []byte, params any) ([]byte, error) {
	switch p := params.(type) {
	case rpcAppendParams:
		return p(b)
	case rpcCompact:
		if len(p) > 0 {
			return append(b, p...), nil
		}
		return appendRPCParams(b, json.RawMessage(p))
	case json.RawMessage:
		if p == nil {
			return append(b, "null"...), nil
		}
		return appendCompactJSON(b, p)
	}
	return appendEncoded(b, params)
}

// appendNotifyStart opens a notification line up to its params, which the
// caller appends compact, as appendRPCOut has them, then closes with
// "}\n": the line is the one notify would write.
func appendNotifyStart(b []byte, method string) []byte {
	b = append(b, `{"jsonrpc":"`+rpcVersion+`","method":`...)
	b = appendJSONString(b, method, false)
	return append(b, `,"params":`...)
}

// notifyLine sends a notification line appendNotifyStart began.
func (c *rpcConn) notifyLine(method string, line []byte) error {
	if err := c.sendLine(line); err != nil {
		return fmt.Errorf("notify %q: %w", method, err)
	}
	return nil
}

// sendLine writes one encoded message, newline included: at once, or in
// the batch of the write in progress.
func (c *rpcConn) sendLine(line []byte) error {
	c.wmu.Lock()
	if !c.writing {
		c.writing = true
		c.wmu.Unlock()
		err := c.write(line)
		c.passWrite()
		return err
	}
	batch := c.queued
	first := batch == nil
	if first {
		batch = &rpcBatch{turn: make(chan struct{}), done: make(chan struct{})}
		c.queued = batch
	}
	batch.lines = append(batch.lines, line...)
	c.wmu.Unlock()
	if !first {
		<-batch.done
		return batch.err
	}
	<-batch.turn
	c.wmu.Lock()
	c.queued = nil // what is sent from now on queues behind this write
	c.wmu.Unlock()
	batch.err = c.write(batch.lines)
	close(batch.done)
	c.passWrite()
	return batch.err
}

// passWrite ends a write: the batch queued behind it, if any, goes next.
func (c *rpcConn) passWrite() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.queued != nil {
		close(c.queued.turn)
		return
	}
	c.writing = false
}

// write puts whole lines on w; only one write is in progress at a time.
func (c *rpcConn) write(lines []byte) error {
	if _, err := c.w.Write(lines); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			c.goneOnce.Do(func() { close(c.gone) })
		}
		return fmt.Errorf("write json-rpc message: %w", err)
	}
	return nil
}

// peerGone reports whether a write found the peer's end closed.
func (c *rpcConn) peerGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

// quoteRaw shows a raw value in an error message, or "nothing" when absent.
func quoteRaw(raw json.RawMessage) string {
	if raw == nil {
		return "nothing"
	}
	return string(raw)
}
