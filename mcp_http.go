// mcp_http.go owns the Streamable HTTP transport of a remote MCP server
// (settings' httpUrl, session/new's type "http"): each message is one POST,
// answered with JSON or with an event stream; the session id the server
// assigns at initialize and the negotiated protocol version go on every
// later request; the GET stream carries the server's own messages where the
// server offers one.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// mcpHTTPAccept is what a POST accepts: both answer forms.
const mcpHTTPAccept = mcpJSONMediaType + ", " + sseMediaType

// postHTTP sends one message. A request's answer is read in the
// background, so that the server's own requests can be answered meanwhile,
// and its POST ends when its caller stops waiting (requestPost); a
// notification's or an answer's POST is acknowledged before postHTTP
// returns. Any other failure breaks the connection.
func (r *mcpRemote) postHTTP(msg []byte) error {
	ctx, done, init, ok := r.requestPost(msg)
	if !ok {
		ctx, cancel := context.WithTimeout(r.life, mcpPostTimeout)
		defer cancel()
		return r.exchange(ctx, msg, false)
	}
	if !r.spawn(func() {
		defer done()
		if err := r.exchange(ctx, msg, init); err != nil && !abandoned(ctx) {
			r.fail(err)
		}
	}) {
		done()
		return errSessionEnded
	}
	return nil
}

// exchange POSTs msg and delivers what the answer carries. init takes the
// session id the answer assigns.
func (r *mcpRemote) exchange(ctx context.Context, msg []byte, init bool) error {
	req, err := newMCPPost(ctx, r.url.String(), msg)
	if err != nil {
		return fmt.Errorf("POST: %w", err)
	}
	r.setHeaders(req, mcpHTTPAccept)
	req.Header.Set("Content-Type", mcpJSONMediaType)
	sessionSent := req.Header.Get(mcpHeaderSessionID) != ""
	resp, err := r.do(ctx, req)
	if err != nil {
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	if err := mcpHTTPStatus(resp, sessionSent); err != nil {
		return fmt.Errorf("POST: %w", err)
	}
	if init {
		if err := r.takeSessionID(resp.Header.Get(mcpHeaderSessionID)); err != nil {
			return fmt.Errorf("POST: %w", err)
		}
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	switch ct := mediaType(resp); ct {
	case mcpJSONMediaType:
		body, err := io.ReadAll(io.LimitReader(resp.Body, mcpMaxMessage+1))
		if err != nil {
			return fmt.Errorf("POST: read the answer: %w", err)
		}
		if len(body) > mcpMaxMessage {
			return fmt.Errorf("POST: the answer is longer than %d bytes", mcpMaxMessage)
		}
		if err := r.in.deliver(body); err != nil {
			return fmt.Errorf("POST: %w", err)
		}
	case sseMediaType:
		if err := r.deliverEvents(newMCPEventReader(resp.Body, sseMaxEvent)); err != nil {
			return fmt.Errorf("POST: the answer's event stream: %w", err)
		}
	default:
		// An acknowledgement in any other form is still one.
		if body, _ := io.ReadAll(io.LimitReader(resp.Body, 1)); len(body) > 0 {
			return fmt.Errorf("POST: the server answered with content type %q, not %q or %q", ct, mcpJSONMediaType, sseMediaType)
		}
	}
	return nil
}

// takeSessionID records the id the initialize answer assigns, if any: it
// must be visible ASCII (MCP 2025-11-25, Session Management).
func (r *mcpRemote) takeSessionID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > mcpMaxSessionID {
		return fmt.Errorf("the session id is longer than %d bytes", mcpMaxSessionID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return errors.New("the session id holds a character outside visible ASCII")
		}
	}
	r.mu.Lock()
	r.sessionID = id
	r.mu.Unlock()
	return nil
}

// listen opens the GET stream for the server's own messages, once the
// session is initialized. A server that offers none answers 405; a stream
// that fails or ends is logged and not reopened: the calls go on over POST.
func (r *mcpRemote) listen() {
	if r.sse {
		return
	}
	r.spawn(func() {
		req, err := http.NewRequestWithContext(r.life, http.MethodGet, r.url.String(), nil)
		if err != nil {
			return
		}
		r.setHeaders(req, sseMediaType)
		ctx, cancel := context.WithTimeout(r.life, mcpPostTimeout)
		resp, err := r.do(ctx, req)
		cancel()
		if err != nil {
			if r.life.Err() == nil {
				r.log.Info("MCP server GET stream not opened", "server", r.name, "reason", err)
			}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed {
			r.log.Debug("MCP server offers no GET stream", "server", r.name)
			return
		}
		if err := mcpHTTPStatus(resp, true); err != nil {
			r.log.Info("MCP server GET stream not opened", "server", r.name, "reason", err)
			return
		}
		if ct := mediaType(resp); ct != sseMediaType {
			r.log.Info("MCP server GET stream not opened", "server", r.name, "reason", fmt.Sprintf("content type %q", ct))
			return
		}
		err = r.deliverEvents(newMCPEventReader(resp.Body, sseMaxEvent))
		if r.life.Err() == nil {
			r.log.Info("MCP server GET stream ended", "server", r.name, "reason", err)
		}
	})
}
