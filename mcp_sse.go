// mcp_sse.go owns the Server-Sent Events stream as MCP's remote transports
// read it (a bounded, strict event reader) and the older HTTP+SSE transport
// (settings' url, session/new's type "sse"): a GET opens the server's event
// stream, whose first event names the endpoint, and each message to the
// server is one POST to that endpoint.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// SSE wire names (WHATWG HTML, server-sent events; MCP 2024-11-05 HTTP+SSE).
const (
	sseMediaType    = "text/event-stream"
	sseFieldData    = "data"
	sseFieldEvent   = "event"
	sseFieldID      = "id"
	sseEventMessage = "message"  // an event without a type is a message
	sseEventEnd     = "endpoint" // HTTP+SSE: where the client POSTs
)

// sseMaxEvent bounds the data of one event and the length of one line: one
// MCP message and the field name around it.
const sseMaxEvent = mcpMaxMessage + 64

// mcpEvent is one dispatched event.
type mcpEvent struct {
	Type string // "message" when the stream named none
	Data string
	ID   string
}

// mcpEventReader reads events from a stream. A line or an event's data longer
// than max is an error that ends the stream: the message in it would be
// lost, and with it maybe the answer to a call.
type mcpEventReader struct {
	br    *bufio.Reader
	max   int
	first bool
}

func newMCPEventReader(r io.Reader, max int) *mcpEventReader {
	return &mcpEventReader{br: bufio.NewReaderSize(r, 64<<10), max: max, first: true}
}

// errMCPEventTooLong is a line or an event over the reader's bound.
var errMCPEventTooLong = errors.New("event stream: a line or an event is longer than the limit")

// line returns the next line without its end (LF or CRLF).
func (r *mcpEventReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(buf)+len(chunk) > r.max+2 {
			return nil, errMCPEventTooLong
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
			if r.first {
				r.first = false
				buf = bytes.TrimPrefix(buf, []byte("\xef\xbb\xbf"))
			}
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			// A last line without its end is not dispatched (WHATWG).
			return nil, err
		}
	}
}

// next returns the next event that carries data; comments, retry and
// fields of no meaning are skipped. io.EOF is the stream's end.
func (r *mcpEventReader) next() (mcpEvent, error) {
	var ev mcpEvent
	var data []byte
	hasData := false
	for {
		line, err := r.line()
		if err != nil {
			return mcpEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = string(data)
				if ev.Type == "" {
					ev.Type = sseEventMessage
				}
				return ev, nil
			}
			ev = mcpEvent{ID: ev.ID}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case sseFieldData:
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > r.max {
				return mcpEvent{}, errMCPEventTooLong
			}
			data, hasData = append(data, value...), true
		case sseFieldEvent:
			ev.Type = string(value)
		case sseFieldID:
			if !bytes.ContainsRune(value, 0) {
				ev.ID = string(value)
			}
		}
	}
}

// connectSSE opens the HTTP+SSE stream and waits for its endpoint event,
// within ctx; the messages after it are delivered until the stream ends,
// which breaks the connection.
func (r *mcpRemote) connectSSE(ctx context.Context) error {
	req, err := http.NewRequestWithContext(r.life, http.MethodGet, r.url.String(), nil)
	if err != nil {
		return fmt.Errorf("open event stream: %w", err)
	}
	r.setHeaders(req, sseMediaType)
	resp, err := r.do(ctx, req)
	if err != nil {
		return fmt.Errorf("open event stream: %w", err)
	}
	if err := mcpHTTPStatus(resp, false); err != nil {
		resp.Body.Close()
		return fmt.Errorf("open event stream: %w", err)
	}
	if ct := mediaType(resp); ct != sseMediaType {
		resp.Body.Close()
		return fmt.Errorf("open event stream: the server answered with content type %q, not %q", ct, sseMediaType)
	}
	events := newMCPEventReader(resp.Body, sseMaxEvent)
	found := make(chan error, 1)
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	go func() {
		ev, err := events.next()
		switch {
		case err != nil:
			err = fmt.Errorf("the stream ended before an %q event: %w", sseEventEnd, err)
		case ev.Type != sseEventEnd:
			err = fmt.Errorf("the first event is %q, not %q", ev.Type, sseEventEnd)
		default:
			err = r.setEndpoint(ev.Data)
		}
		found <- err
	}()
	err = <-found
	if !stop() || err != nil {
		resp.Body.Close()
		if err == nil || ctx.Err() != nil {
			err = fmt.Errorf("no %q event within the startup timeout", sseEventEnd)
		}
		return fmt.Errorf("open event stream: %w", err)
	}
	if !r.spawn(func() {
		defer resp.Body.Close()
		err := r.deliverEvents(events)
		if err == nil {
			err = errors.New("the server closed its event stream")
		}
		r.fail(err)
	}) {
		resp.Body.Close()
		return errSessionEnded
	}
	return nil
}

// setEndpoint takes the endpoint event's URI, relative to the stream's URL.
// It must be of the stream's origin: the headers go wherever it points.
func (r *mcpRemote) setEndpoint(data string) error {
	ref, err := url.Parse(strings.TrimSpace(data))
	if err != nil {
		return fmt.Errorf("the endpoint %q is not a URL: %w", data, err)
	}
	u := r.url.ResolveReference(ref)
	if u.Scheme != r.url.Scheme || u.Host != r.url.Host || u.User != nil {
		return fmt.Errorf("the endpoint %q is not of the server's origin %q; refused", data, r.url.Scheme+"://"+r.url.Host)
	}
	r.mu.Lock()
	r.endpoint = u
	r.mu.Unlock()
	return nil
}

// deliverEvents passes every message event of a stream to the connection
// until it ends (nil at its end); other event types are skipped.
func (r *mcpRemote) deliverEvents(events *mcpEventReader) error {
	for {
		ev, err := events.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if r.life.Err() != nil {
				return context.Cause(r.life)
			}
			return err
		}
		// An event of no data is a stream's priming event (an id to resume
		// from, MCP 2025-11-25), not a message.
		if ev.Type != sseEventMessage || strings.TrimSpace(ev.Data) == "" {
			continue
		}
		if err := r.in.deliver([]byte(ev.Data)); err != nil {
			return err
		}
	}
}

// postSSE sends one message to the endpoint; the answer comes on the
// stream. A request's POST runs in the background, so that a caller who
// stops waiting is not kept by it, and ends then (requestPost); any other
// message's POST is acknowledged before postSSE returns. Any other failure
// breaks the connection.
func (r *mcpRemote) postSSE(msg []byte) error {
	ctx, done, _, ok := r.requestPost(msg)
	if !ok {
		return r.sendSSE(r.life, msg)
	}
	if !r.spawn(func() {
		defer done()
		if err := r.sendSSE(ctx, msg); err != nil && !abandoned(ctx) {
			r.fail(err)
		}
	}) {
		done()
		return errSessionEnded
	}
	return nil
}

// sendSSE POSTs msg to the endpoint within ctx and mcpPostTimeout.
func (r *mcpRemote) sendSSE(ctx context.Context, msg []byte) error {
	r.mu.Lock()
	endpoint := r.endpoint
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, mcpPostTimeout)
	defer cancel()
	req, err := newMCPPost(ctx, endpoint.String(), msg)
	if err != nil {
		return fmt.Errorf("POST message: %w", err)
	}
	r.setHeaders(req, "")
	req.Header.Set("Content-Type", mcpJSONMediaType)
	resp, err := r.do(ctx, req)
	if err != nil {
		return fmt.Errorf("POST message: %w", err)
	}
	defer resp.Body.Close()
	if err := mcpHTTPStatus(resp, false); err != nil {
		return fmt.Errorf("POST message: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, mcpMaxMessage))
	return nil
}
