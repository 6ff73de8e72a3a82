// model_parent.go owns the model of a managed acp child: each model call
// goes to serve over the private channel (serve_model.go) and its reply is
// read as a direct one is (model_openai.go).
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// promptIdentityKey carries, in a prompt's context, the session and the
// prompt id serve gave it, which a model call through serve names.
type promptIdentityKey struct{}

type promptIdentity struct{ sessionID, promptID string }

func withPromptIdentity(ctx context.Context, sessionID, promptID string) context.Context {
	return context.WithValue(ctx, promptIdentityKey{}, promptIdentity{sessionID, promptID})
}

// errModelStreamDone ends the delivery of a reply nobody reads any more.
var errModelStreamDone = errors.New("model reply no longer read")

// parentModel is the model of serve's child: serve makes each call, asked
// over conn, the child's private channel.
type parentModel struct {
	conn    *rpcConn
	mu      sync.Mutex
	streams map[string]*modelStream
}

// modelStream is one call's reply as it arrives.
type modelStream struct {
	mediaType chan string // capacity 1: sent before any byte
	typed     bool        // the read goroutine's: the media type came
	pr        *io.PipeReader
	pw        *io.PipeWriter
}

func newParentModel(conn *rpcConn) *parentModel {
	return &parentModel{conn: conn, streams: map[string]*modelStream{}}
}

func (m *parentModel) next(ctx context.Context, history []message, tools []*toolSpec, text func(string)) (modelTurn, error) {
	id, _ := ctx.Value(promptIdentityKey{}).(promptIdentity)
	streamID := randomHex(randomIDBytes)
	pr, pw := io.Pipe()
	st := &modelStream{mediaType: make(chan string, 1), pr: pr, pw: pw}
	m.mu.Lock()
	m.streams[streamID] = st
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.streams, streamID)
		m.mu.Unlock()
	}()

	callCtx, stopCall := context.WithCancel(ctx)
	defer stopCall()
	called := make(chan error, 1)
	go func() {
		// The request is made in the call's line: the line, reused, is
		// all the memory a call's request takes in the child.
		result, err := m.conn.call(callCtx, methodModelComplete, rpcAppendParams(func(line []byte) ([]byte, error) {
			return appendModelCompleteParams(line, id, streamID, history, tools)
		}))
		// The answer is read after every chunk before it was delivered; it
		// holds the reply's last bytes.
		if err == nil {
			err = m.lastBytes(st, result)
		}
		if err != nil {
			pw.CloseWithError(err)
		} else {
			pw.Close()
		}
		called <- err
	}()
	var mediaType string
	var callErr error
	answered := false
	select {
	case mediaType = <-st.mediaType:
	case callErr = <-called:
		answered = true
		select {
		case mediaType = <-st.mediaType:
		default:
		}
	}
	t := newOpenAITurn("") // serve redacted its key already
	t.thought = thoughtSink(ctx)
	var readErr error
	if mediaType != "" {
		readErr = readOpenAIReply(ctx, mediaType, pr, t, text)
	}
	pr.CloseWithError(errModelStreamDone)
	if readErr != nil {
		stopCall() // serve stops reading the reply
	}
	if !answered {
		callErr = <-called
	}
	switch {
	case readErr != nil:
		return modelTurn{}, readErr
	case callErr != nil:
		return modelTurn{}, fmt.Errorf("model call through serve: %w", callErr)
	case mediaType == "":
		return modelTurn{}, errors.New("model call through serve: answered without a reply")
	}
	return t.turn(history)
}

// lastBytes delivers the reply's last bytes, which came in the call's
// result: a modelChunk without a stream id, with the media type only when no
// chunk came before with it (a reply serve read whole, in one read).
func (m *parentModel) lastBytes(st *modelStream, result json.RawMessage) error {
	c, err := decodeModelChunk(result)
	switch {
	case err != nil:
		return fmt.Errorf("model reply from serve: invalid result: %v", err)
	case c.StreamID != "":
		return errors.New("model reply from serve: a result that names a stream")
	case c.ContentType != "" && st.typed:
		return errors.New("model reply from serve: a second content type")
	case c.ContentType != "":
		st.typed = true
		st.mediaType <- c.ContentType
	}
	switch {
	case len(c.Data) == 0:
		return nil
	case !st.typed:
		return errors.New("model reply from serve: bytes before the content type")
	}
	if _, err := st.pw.Write(c.Data); err != nil && !errors.Is(err, errModelStreamDone) {
		return err
	}
	return nil
}

// appendModelCompleteParams appends modelCompleteParams as json.Marshal
// writes it, its request the one openAIRequestBody makes of history and
// tools, with no model named: serve names it.
func appendModelCompleteParams(dst []byte, id promptIdentity, streamID string, history []message, tools []*toolSpec) ([]byte, error) {
	dst = append(dst, `{"sessionId":`...)
	dst = appendJSONString(dst, id.sessionID, true)
	dst = append(dst, `,"promptId":`...)
	dst = appendJSONString(dst, id.promptID, true)
	dst = append(dst, `,"streamId":`...)
	dst = appendJSONString(dst, streamID, true)
	dst = append(dst, `,"request":`...)
	dst, err := appendOpenAIRequest(dst, "", history, tools)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

// modelChunkMembers are the members of a chunk, as modelChunk names them.
var modelChunkMembers = []string{"streamId", "contentType", "data"}

// decodeModelChunk reads one chunk strictly, as decodeStrict would read a
// modelChunk, by one walk instead of a reflective decode: a streamed reply
// comes as many small chunks.
func decodeModelChunk(params json.RawMessage) (modelChunk, error) {
	var c modelChunk
	var m [3]json.RawMessage // modelChunkMembers
	if err := strictMembers(params, modelChunkMembers, m[:]); err != nil {
		return c, err
	}
	for i, to := range []*string{&c.StreamID, &c.ContentType} {
		if m[i] == nil || isJSONNull(m[i]) {
			continue
		}
		var err error
		if *to, err = wireStringValue(m[i]); err != nil {
			return c, fmt.Errorf("field %q: %v", modelChunkMembers[i], err)
		}
	}
	if m[2] == nil || isJSONNull(m[2]) {
		return c, nil
	}
	data, err := wireStringValue(m[2])
	if err == nil {
		c.Data = make([]byte, base64.StdEncoding.DecodedLen(len(data)))
		var n int
		n, err = base64.StdEncoding.Decode(c.Data, []byte(data))
		c.Data = c.Data[:n]
	}
	if err != nil {
		return modelChunk{}, fmt.Errorf("field %q: %v", "data", err)
	}
	return c, nil
}

// deliver takes one chunk from serve, on the connection's read goroutine,
// and waits until the reply's reader took it or stopped reading. A chunk out
// of order ends its reply with an error.
func (m *parentModel) deliver(params json.RawMessage) {
	c, err := decodeModelChunk(params)
	if err != nil {
		// Read loosely only to find the reply it would belong to.
		c = modelChunk{}
		if json.Unmarshal(params, &c) != nil {
			return
		}
	}
	m.mu.Lock()
	st := m.streams[c.StreamID]
	m.mu.Unlock()
	switch {
	case st == nil:
		return // a reply nobody waits for any more
	case err != nil:
		st.pw.CloseWithError(fmt.Errorf("model reply from serve: invalid chunk: %v", err))
	case c.ContentType != "" && st.typed:
		st.pw.CloseWithError(errors.New("model reply from serve: a second content type"))
	case c.ContentType != "":
		st.typed = true
		st.mediaType <- c.ContentType
		if len(c.Data) > 0 {
			st.pw.Write(c.Data)
		}
	case !st.typed:
		st.pw.CloseWithError(errors.New("model reply from serve: bytes before the content type"))
	case len(c.Data) > 0:
		st.pw.Write(c.Data) // fails at once when the reader stopped
	}
}
