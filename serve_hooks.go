// serve_hooks.go owns serve's end of its children's http hooks. A child
// never holds the variables a hook's allowedEnvVars name (DESIGN.md §4): it
// asks serve over its private channel to POST the hook (methodHookHTTP,
// hooks_parent.go). serve finds the hook in its own reading of the
// session's settings, with the trust rule of the children (DESIGN.md §10),
// refuses a hook whose URL or headers differ from the child's as written,
// and POSTs it with hooks_http.go's code and its own environment: the child
// never chooses the URL, the headers or which variables expand.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// hookOf returns the http hook p names in the settings serve reads for
// workspace ws (its own settings when it has no settings sources), when
// its URL and headers are the ones p gives as written.
func (d *daemon) hookOf(ws string, p hookHTTPParams) (hookCommand, error) {
	st := d.hookStart
	if d.mcpSettings != nil {
		ss, err := d.workspaceSettings(ws)
		if err != nil {
			return hookCommand{}, err
		}
		st = ss.Settings
	}
	var matchers []hookMatcher
	if st != nil {
		matchers = st.Hooks.hooksFor(p.Event)
	}
	if p.Matcher >= len(matchers) || p.Hook >= len(matchers[p.Matcher].Hooks) {
		return hookCommand{}, fmt.Errorf("the settings of workspace %q have no %s hook %d in matcher entry %d", ws, p.Event, p.Hook, p.Matcher)
	}
	h := matchers[p.Matcher].Hooks[p.Hook]
	if h.Type != hookTypeHTTP || h.URL != p.URL || !maps.Equal(h.Headers, p.Headers) {
		return hookCommand{}, fmt.Errorf("the %s hook %d in matcher entry %d of workspace %q's settings is not an http hook with url %q and these headers", p.Event, p.Hook, p.Matcher, ws, p.URL)
	}
	return h, nil
}

// serveHookClosing is a session whose session/close its child handles:
// the host no longer sees it, but its SessionEnd and SessionDelete hooks
// still go through serve.
type serveHookClosing struct {
	ch *acpChannel
	ws string
}

// closingHooks keeps the http hooks of ended session s open until the
// returned function runs, when its child has answered session/close.
func (d *daemon) closingHooks(s *hostSession) func() {
	d.mcpMu.Lock()
	defer d.mcpMu.Unlock()
	if d.hookClosing == nil {
		d.hookClosing = map[string]serveHookClosing{}
	}
	c := serveHookClosing{ch: s.ch, ws: s.ws}
	d.hookClosing[s.id] = c
	return func() {
		d.mcpMu.Lock()
		defer d.mcpMu.Unlock()
		if d.hookClosing[s.id] == c {
			delete(d.hookClosing, s.id)
		}
	}
}

// hookSessionOf returns the workspace of session id as ch may fire its
// hooks: a session ch owns, creates or closes; ok false for any other.
func (d *daemon) hookSessionOf(ch *acpChannel, id string) (ws string, ok bool) {
	if ws, m := d.mcpSessionOf(ch, id); m != nil {
		return ws, true
	}
	d.mcpMu.Lock()
	defer d.mcpMu.Unlock()
	c, ok := d.hookClosing[id]
	return c.ws, ok && c.ch == ch
}

// hookEventsOutsidePrompts are the events whose hooks fire with no prompt
// (hookHTTPParams' promptId empty): a session's start, end and deletion,
// its instructions' loading, and a notification. Every other event's hook
// names the running prompt of its session.
var hookEventsOutsidePrompts = map[string]bool{
	hookEventSessionStart: true, hookEventSessionEnd: true, hookEventSessionDelete: true,
	hookEventInstructionsLoaded: true, hookEventNotification: true,
}

// hookHTTP answers methodHookHTTP: serve POSTs one http hook of a session
// ch owns (or is creating or closing) and answers with its 2xx body or its failure.
func (d *daemon) hookHTTP(ctx context.Context, ch *acpChannel, params json.RawMessage) (any, error) {
	p, err := decodeHookHTTPParams(params)
	if err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("invalid %s params: %v", methodHookHTTP, err)}
	}
	ws, ok := d.hookSessionOf(ch, p.SessionID)
	if !ok {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("http hook %q refused by serve: unknown session %q", p.URL, p.SessionID)}
	}
	// A prompt's hook fires only while that prompt runs, and its POST ends
	// with the prompt, as a model call does.
	if p.PromptID != "" || !hookEventsOutsidePrompts[p.Event] {
		var job *promptJob
		if s := ch.session(p.SessionID); s != nil {
			job = s.activeJob(p.PromptID)
		}
		if job == nil {
			d.obs.logger().Warn("http hook refused: its prompt is not running", "session", p.SessionID, "prompt", p.PromptID, "event", p.Event)
			return nil, &rpcError{Code: rpcInvalidRequest, Message: fmt.Sprintf("http hook %q refused by serve: %s hooks fire in a running prompt, and prompt %q is not the running prompt of session %q", p.URL, p.Event, p.PromptID, p.SessionID)}
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(job.ctx, cancel)()
	}
	// The input's names read exactly: encoding/json would match
	// "SESSION_ID" to session_id, and a hook's receiver may read either.
	in, _ := decodeObject(p.Input) // decodeHookHTTPParams decoded it
	inSession, _ := in["session_id"].(string)
	inEvent, _ := in["hook_event_name"].(string)
	h, err := d.hookOf(ws, p)
	if err == nil && (inSession != p.SessionID || inEvent != p.Event) {
		err = fmt.Errorf("its input is for session %q and event %q, not %q and %q", inSession, inEvent, p.SessionID, p.Event)
	}
	if err != nil {
		d.obs.logger().Warn("http hook refused: it is not the settings' hook", "session", p.SessionID, "prompt", p.PromptID, "event", p.Event, "err", err)
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("http hook %q refused by serve: %v; it was not sent", p.URL, err)}
	}
	d.hideLearned(h.AllowedEnvVars...)
	env := envOf(d.sys)
	rep, failure := execHook(ctx, h, p.Event, p.Input, ws, spawnEnv{Env: env})
	if failure != "" {
		if len(failure) > maxHookParentFailureBytes {
			failure = strings.ToValidUTF8(failure[:maxHookParentFailureBytes], "")
		}
		return hookHTTPResult{Failure: failure}, nil
	}
	return hookHTTPResult{Body: rep.Stdout, JSON: rep.JSON}, nil
}
