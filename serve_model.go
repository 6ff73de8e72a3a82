// serve_model.go owns serve's end of its children's model calls. A child
// never holds the model key: it asks serve over its private channel with
// methodModelComplete (model_parent.go), and serve makes the HTTP call
// itself, with the endpoint and key of its own configuration and the model
// name and call bound of the session's workspace as serve read them, only
// for the running prompt of a session that child owns, bounded per
// prompt, and streams the reply back with methodModelChunk, key redacted.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"unicode/utf8"
)

// serveModelConfig is the model serve's children use, from serve's own
// environment, named as for acp: the scripted model without OPENAI_BASE_URL.
func serveModelConfig(env *procEnv, s *settings) (openAIConfig, error) {
	base := env.lookup(envModelBaseURL)
	if base == "" {
		return openAIConfig{}, nil
	}
	cfg := openAIConfig{BaseURL: base, APIKey: env.modelKey, Model: env.lookup(envModelName)}
	if cfg.Model == "" && s != nil {
		cfg.Model = s.Model.Name
	}
	if _, err := newOpenAIModel(cfg); err != nil {
		return openAIConfig{}, &usageError{err}
	}
	return cfg, nil
}

// setModel makes serve the model client of its children when the operator
// configured a model service, and finds each session's model settings.
func (d *daemon) setModel(opts serveOptions) error {
	d.modelDefault = sessionModel{callLimit: maxModelCallsPerPrompt}
	if opts.Settings != nil {
		d.modelDefault.callLimit = min(opts.Settings.Model.MaxTurns, maxModelCallsPerPrompt)
	}
	if opts.Model.BaseURL == "" {
		return nil
	}
	m, err := newOpenAIModel(opts.Model)
	if err != nil {
		return &usageError{err}
	}
	d.model, d.modelDefault.name, d.modelNameFixed = m, m.name, opts.ModelNameFixed
	if src := opts.SessionSettings; src.Sources.Lookup != nil {
		d.modelSettings = newSettingsCache(src.Sources, src.Options, func(l *settingsLoad) (*sessionSettings, error) {
			return &sessionSettings{Load: l, Settings: l.Settings}, nil
		})
	}
	return nil
}

// sessionModel is what serve's model calls for one session's prompts use:
// the model name and the calls one prompt may make.
type sessionModel struct {
	name      string
	callLimit int
}

// sessionModelOf returns the model of a session in ws: model.name and
// model.maxSessionTurns of ws's own settings layers, read by serve itself
// with the trust rule of the children (DESIGN.md §10), OPENAI_MODEL over
// the name. A child's bytes never choose either: a child could name any
// model the key reaches, or a bound the workspace never set.
func (d *daemon) sessionModelOf(ws string) (sessionModel, error) {
	if d.model == nil || d.modelSettings == nil {
		return d.modelDefault, nil
	}
	ss, _, err := d.modelSettings.get(ws)
	if err != nil {
		return sessionModel{}, err
	}
	m := sessionModel{name: ss.Settings.Model.Name, callLimit: min(ss.Settings.Model.MaxTurns, maxModelCallsPerPrompt)}
	if d.modelNameFixed {
		m.name = d.model.name
	}
	if m.name == "" {
		return sessionModel{}, fmt.Errorf("workspace %q names no model; set %s for serve or model.name in its settings", ws, envModelName)
	}
	return m, nil
}

// childModelArgs tells a child which model to run: serve's, through serve.
func (d *daemon) childModelArgs() []string {
	if d.model != nil {
		return []string{"--model", modelParent}
	}
	return []string{"--model", modelScripted}
}

// modelBudget counts one prompt's model calls and bytes.
type modelBudget struct {
	mu    sync.Mutex
	calls int
	bytes int
}

// call takes one call if fewer than limit were made.
func (b *modelBudget) call(limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls >= limit {
		return false
	}
	b.calls++
	return true
}

// spend takes n bytes if the prompt's bound allows them.
func (b *modelBudget) spend(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes+n > maxModelBytesPerPrompt {
		return false
	}
	b.bytes += n
	return true
}

// decodeModelComplete checks a child's model call and returns it with the
// request body serve sends: the child's, exactly as the chat completions
// shapes read it, with modelName in "model". A child never names a model.
func decodeModelComplete(params json.RawMessage, modelName string) (modelCompleteParams, []byte, error) {
	p, req, err := decodeModelCall(params)
	if err != nil {
		return p, nil, err
	}
	body, err := encodeModelRequest(req, modelName)
	return p, body, err
}

// modelCallMembers are the members of a child's model call, as
// modelCompleteParams names them.
var modelCallMembers = []string{"sessionId", "promptId", "streamId", "request", "_meta"}

// decodeModelCall checks a child's model call: its params and its request,
// which names no model. The params are split by one strict walk (exact
// names, none twice, nothing after the object) and only the request, the
// bulk of the bytes, is decoded into Go values: a reflective decode of the
// params would scan the request twice more before its own decode.
func decodeModelCall(params json.RawMessage) (modelCompleteParams, *openAIRequest, error) {
	var p modelCompleteParams
	if !utf8.Valid(params) || !json.Valid(params) {
		return p, nil, errors.New("model call: invalid params: not one valid UTF-8 JSON value")
	}
	m, err := decodeWireObject(params, modelCallMembers...)
	if err != nil {
		return p, nil, fmt.Errorf("model call: invalid params: %v", err)
	}
	for _, f := range []struct {
		key string
		to  *string
	}{{"sessionId", &p.SessionID}, {"promptId", &p.PromptID}, {"streamId", &p.StreamID}} {
		raw, ok := m[f.key]
		if !ok {
			continue
		}
		if *f.to, err = wireStringValue(raw); err != nil {
			return p, nil, fmt.Errorf("model call: invalid params: field %q: %v", f.key, err)
		}
	}
	p.Request, p.Meta = m["request"], m["_meta"]
	if p.StreamID == "" || len(p.StreamID) > maxModelStreamID {
		return p, nil, fmt.Errorf("model call: streamId %q: want 1 to %d bytes", truncateForError([]byte(p.StreamID)), maxModelStreamID)
	}
	var req openAIRequest
	if err := decodeStrict(p.Request, &req); err != nil {
		return p, nil, fmt.Errorf("model call: request is not a chat completions request: %v", err)
	}
	if req.Model != "" {
		return p, nil, fmt.Errorf("model call: request names model %q; serve alone chooses the model", truncateForError([]byte(req.Model)))
	}
	return p, &req, nil
}

// encodeModelRequest is the body serve sends for a checked request: the
// request with modelName in "model".
func encodeModelRequest(req *openAIRequest, modelName string) ([]byte, error) {
	req.Model = modelName
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("model call: encode request: %v", err)
	}
	return body, nil
}

// modelComplete makes one model call for a child: the channel must own the
// session and the prompt must be its running one, or no HTTP request is
// made; then one request with serve's key, whose reply goes back to the
// child as chunks with the key redacted. The call ends with the prompt.
func (d *daemon) modelComplete(ctx context.Context, ch *acpChannel, params json.RawMessage) (any, error) {
	p, req, err := decodeModelCall(params)
	if err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
	}
	refuse := func(format string, a ...any) error {
		msg := fmt.Sprintf(format, a...)
		d.obs.logger().Warn("model call refused", "sessionId", p.SessionID, "promptId", p.PromptID, "reason", msg)
		return &rpcError{Code: rpcInvalidRequest, Message: msg}
	}
	s := ch.session(p.SessionID)
	if s == nil {
		return nil, refuse("model call: session %q is not a session of this ACP child", p.SessionID)
	}
	job := s.activeJob(p.PromptID)
	if job == nil {
		return nil, refuse("model call: prompt %q is not the running prompt of session %q", p.PromptID, p.SessionID)
	}
	if d.model == nil {
		return nil, refuse("model call: serve has no model service; set %s for serve", envModelBaseURL)
	}
	// The session's model and bound, from its workspace as serve read it.
	limit := s.model.callLimit
	if !job.model.call(limit) {
		d.obs.limitHit(limitModelCalls, "sessionId", p.SessionID, "promptId", p.PromptID, "calls", limit)
		return nil, refuse("model call: prompt %q already made %d model calls, its limit", p.PromptID, limit)
	}
	body, err := encodeModelRequest(req, s.model.name)
	if err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
	}
	overBytes := func() error {
		d.obs.limitHit(limitModelBytes, "sessionId", p.SessionID, "promptId", p.PromptID, "bytes", maxModelBytesPerPrompt)
		return refuse("model call: prompt %q moved more than %d bytes to and from the model, its limit", p.PromptID, maxModelBytesPerPrompt)
	}
	if !job.model.spend(len(body)) {
		return nil, overBytes()
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(job.ctx, cancel)()
	reply, mediaType, err := d.model.post(cctx, body)
	if err != nil {
		return nil, &rpcError{Code: rpcInternalError, Message: err.Error()}
	}
	defer reply.Close()
	if err := ch.conn.notify(methodModelChunk, modelChunk{StreamID: p.StreamID, ContentType: mediaType}); err != nil {
		return nil, err
	}
	r := http.MaxBytesReader(nil, reply, openAIMaxReply)
	red := redactor{secret: []byte(d.model.apiKey)}
	buf := make([]byte, modelChunkSize)
	send := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		return ch.conn.notify(methodModelChunk, modelChunk{StreamID: p.StreamID, Data: b})
	}
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if !job.model.spend(n) {
				return nil, overBytes()
			}
			if err := send(red.push(buf[:n])); err != nil {
				return nil, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if cctx.Err() != nil {
				rerr = cctx.Err()
			}
			return nil, &rpcError{Code: rpcInternalError, Message: openAIReadError(rerr).Error()}
		}
	}
	if err := send(red.flush()); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// redactor replaces a secret in a byte stream cut at arbitrary places: it
// holds back the longest tail that could begin the secret.
type redactor struct {
	secret []byte
	carry  []byte
}

// push returns what of carry and b is certain not to hold part of the
// secret, with every whole secret replaced.
func (r *redactor) push(b []byte) []byte {
	if len(r.secret) == 0 {
		return b
	}
	buf := append(r.carry, b...)
	var out []byte
	for {
		i := bytes.Index(buf, r.secret)
		if i < 0 {
			break
		}
		out = append(append(out, buf[:i]...), openAIRedactedKey...)
		buf = buf[i+len(r.secret):]
	}
	keep := 0
	for k := min(len(r.secret)-1, len(buf)); k > 0; k-- {
		if bytes.HasSuffix(buf, r.secret[:k]) {
			keep = k
			break
		}
	}
	out = append(out, buf[:len(buf)-keep]...)
	r.carry = append([]byte(nil), buf[len(buf)-keep:]...)
	return out
}

// flush returns the held-back tail at the end of the stream.
func (r *redactor) flush() []byte {
	out := r.carry
	r.carry = nil
	return out
}
