// hooks_parent.go owns the http hooks of serve's child: serve holds the
// variables a hook's allowedEnvVars name (DESIGN.md §4), so the child asks
// serve over its private channel to POST the hook (methodHookHTTP,
// serve_hooks.go). The child names the hook by its place in the settings
// it loaded and sends the URL and headers as written; serve POSTs only a
// hook of its own reading that matches them. This file holds the wire of
// that request, its strict decoders, and the child's end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Bounds of the http hook request of a serve child: the hook's input is a
// hook input (tool arguments included) and travels in one channel message;
// serve's failure text is shown to the user and the model like a reason.
// hookParentGrace is how much longer than the hook's own timeout the child
// waits for serve's answer: serve's POST times out first, and says so.
const (
	maxHookParentInputBytes   = 4 << 20
	maxHookParentFailureBytes = maxHookReasonBytes
	hookParentGrace           = 5 * time.Second
)

// hookAt is a hook's place in the settings it was loaded from: the index
// of its matcher entry in its event's list and its index in that entry.
// The loops that run hooks set it (runPreToolUseHooks, runEventHooks).
type hookAt struct {
	Matcher int
	Hook    int
}

// hookHTTPParams is methodHookHTTP's params: the session and prompt the
// hook fires for, the hook's place in the child's settings, its URL and
// headers as written (unexpanded), and its input JSON, an object.
type hookHTTPParams struct {
	SessionID string            `json:"sessionId"`
	PromptID  string            `json:"promptId,omitempty"`
	Event     string            `json:"event"`
	Matcher   int               `json:"matcher"`
	Hook      int               `json:"hook"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	Input     json.RawMessage   `json:"input"`
}

// hookHTTPResult is methodHookHTTP's result: the 2xx body and whether its
// Content-Type said JSON, or Failure, the hook's failure as runHTTPHook
// words it (a non-2xx status among them).
type hookHTTPResult struct {
	Body    []byte `json:"body,omitempty"` // base64 on the wire: any bytes
	JSON    bool   `json:"json,omitempty"`
	Failure string `json:"failure,omitempty"`
}

// decodeHookHTTPParams reads a child's methodHookHTTP params strictly: a
// valid session id, non-negative places, an event name and URL, and an
// input that is one JSON object within maxHookParentInputBytes.
func decodeHookHTTPParams(raw []byte) (hookHTTPParams, error) {
	var p hookHTTPParams
	if err := decodeStrict(raw, &p); err != nil {
		return hookHTTPParams{}, err
	}
	switch {
	case !validSessionID(p.SessionID):
		return hookHTTPParams{}, fmt.Errorf("sessionId %q is not a session id", p.SessionID)
	case p.Event == "" || p.URL == "":
		return hookHTTPParams{}, fmt.Errorf("event %q and url %q: both are required", p.Event, p.URL)
	case p.Matcher < 0 || p.Hook < 0:
		return hookHTTPParams{}, fmt.Errorf("matcher %d, hook %d: a place is not negative", p.Matcher, p.Hook)
	case len(p.Input) > maxHookParentInputBytes:
		return hookHTTPParams{}, fmt.Errorf("input of %d bytes: more than %d", len(p.Input), maxHookParentInputBytes)
	}
	if _, err := decodeObject(p.Input); err != nil {
		return hookHTTPParams{}, fmt.Errorf("input: %w", err)
	}
	return p, nil
}

// decodeHookHTTPResult reads serve's methodHookHTTP result strictly: a
// body within maxHookOutputBytes, or a failure within
// maxHookParentFailureBytes, never both.
func decodeHookHTTPResult(raw []byte) (hookHTTPResult, error) {
	var r hookHTTPResult
	if err := decodeStrict(raw, &r); err != nil {
		return hookHTTPResult{}, err
	}
	switch {
	case len(r.Body) > maxHookOutputBytes:
		return hookHTTPResult{}, fmt.Errorf("body of %d bytes: more than %d", len(r.Body), maxHookOutputBytes)
	case len(r.Failure) > maxHookParentFailureBytes:
		return hookHTTPResult{}, fmt.Errorf("failure of %d bytes: more than %d", len(r.Failure), maxHookParentFailureBytes)
	case r.Failure != "" && (len(r.Body) > 0 || r.JSON):
		return hookHTTPResult{}, errors.New("both a failure and an answer")
	}
	return r, nil
}

// hookParent is serve's channel in a serve child, for the http hooks of one
// session and prompt ("" outside a prompt).
type hookParent struct {
	conn      *rpcConn
	sessionID string
	promptID  string
}

// newHookParent is the http hook channel of a session: nil outside serve
// (conn nil), where the child POSTs its hooks itself.
func newHookParent(conn *rpcConn, sessionID, promptID string) *hookParent {
	if conn == nil {
		return nil
	}
	return &hookParent{conn: conn, sessionID: sessionID, promptID: promptID}
}

// post asks serve to POST hook h of event with stdin as its input and
// reads serve's answer as runHTTPHook's: a refusal or a channel failure is
// the hook's failure, so an event that fails closed stops what it guards.
func (p *hookParent) post(ctx context.Context, h hookCommand, event string, stdin []byte, timeout time.Duration) (hookReply, string) {
	cctx, cancel := context.WithTimeout(ctx, timeout+hookParentGrace)
	defer cancel()
	raw, err := p.conn.call(cctx, methodHookHTTP, hookHTTPParams{SessionID: p.sessionID, PromptID: p.promptID, Event: event,
		Matcher: h.at.Matcher, Hook: h.at.Hook, URL: h.URL, Headers: maps.Clone(h.Headers), Input: stdin})
	var rerr *rpcError
	switch {
	case errors.As(err, &rerr):
		return hookReply{}, hookRefusedByServe + ": " + hookReasonText(rerr.Message)
	case ctx.Err() != nil:
		return hookReply{}, "was cancelled"
	case cctx.Err() != nil:
		return hookReply{}, fmt.Sprintf("timed out after %d ms waiting for serve", (timeout + hookParentGrace).Milliseconds())
	case err != nil:
		return hookReply{}, fmt.Sprintf("%s: %v", hookNotSentToServe, err)
	}
	res, err := decodeHookHTTPResult(raw)
	switch {
	case err != nil:
		return hookReply{}, fmt.Sprintf("got an invalid answer from serve: %v", err)
	case res.Failure != "":
		return hookReply{}, res.Failure
	}
	return hookReply{Stdout: res.Body, HTTP: true, JSON: res.JSON}, ""
}
