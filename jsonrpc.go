// jsonrpc.go owns the wire codecs shared by every peer: the strict JSON
// decoder, and one line-delimited JSON-RPC 2.0 connection used by the ACP
// agent, the daemon's channel to a child, and the MCP client.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields and trailing data. Every decoder of another process's bytes
// goes through it.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

// JSON-RPC 2.0 and ACP error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
	rpcCancelled      = -32800
)

// rpcError is an error response, sent or received.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// rpcConfig says how a connection answers what the peer sends.
type rpcConfig struct {
	// MaxLine bounds one incoming message in bytes; a longer line is an error
	// answered with -32700 (or, past the bound, the connection is closed).
	MaxLine int
	// OnRequest answers one request; it runs in its own goroutine and ctx is
	// cancelled by $/cancel_request or when the connection ends. Returning
	// an *rpcError sends it as is; any other error becomes -32603.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (any, error)
	// OnNotify handles one notification, in read order, on the read goroutine.
	OnNotify func(method string, params json.RawMessage)
}

// rpcConn is one line-delimited JSON-RPC 2.0 peer.
// STUB: owned by the jsonrpc helper.
type rpcConn struct{}

func newRPCConn(r io.Reader, w io.Writer, cfg rpcConfig) *rpcConn { return &rpcConn{} }

// serve reads messages until r ends or ctx is done, then cancels and waits
// for every request handler before it returns.
func (c *rpcConn) serve(ctx context.Context) error { return nil }

// call sends a request and waits for its response, ctx, or the end of the
// connection. An error response is returned as *rpcError.
func (c *rpcConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return nil, errors.New("unimplemented")
}

// notify sends a notification.
func (c *rpcConn) notify(method string, params any) error { return nil }
