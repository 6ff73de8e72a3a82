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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

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
// request body serve sends: the child's, exactly as checkModelRequest read
// it, with modelName in "model". A child never names a model.
func decodeModelComplete(params json.RawMessage, modelName string) (modelCompleteParams, []byte, error) {
	p, err := decodeModelCall(params)
	if err != nil {
		return p, nil, err
	}
	body, err := checkModelRequest(p.Request, modelName, nil)
	return p, body, err
}

// modelCallMembers are the members of a child's model call, as
// modelCompleteParams names them.
var modelCallMembers = []string{"sessionId", "promptId", "streamId", "request", "_meta"}

// modelCallRequest is the request's index in modelCallMembers.
const modelCallRequest = 3

// decodeModelCall reads a child's model call's params but the request,
// which it only bounds: checkModelRequest checks the request's syntax
// strictly (valid UTF-8 JSON as encoding/json reads it, exact names, none
// twice at any depth) and its shape in one walk without building a Go
// value, so that its bytes are forwarded as read.
func decodeModelCall(params json.RawMessage) (modelCompleteParams, error) {
	var p modelCompleteParams
	var m [5]json.RawMessage // modelCallMembers
	if err := strictMembersBut(params, modelCallMembers, m[:], modelCallRequest); err != nil {
		return p, fmt.Errorf("model call: invalid params: %v", err)
	}
	for i, to := range []*string{&p.SessionID, &p.PromptID, &p.StreamID} {
		if m[i] == nil {
			continue
		}
		var err error
		if *to, err = wireStringValue(m[i]); err != nil {
			return p, fmt.Errorf("model call: invalid params: field %q: %v", modelCallMembers[i], err)
		}
	}
	p.Request, p.Meta = m[modelCallRequest], m[4]
	if p.StreamID == "" || len(p.StreamID) > maxModelStreamID {
		return p, fmt.Errorf("model call: streamId %q: want 1 to %d bytes", truncateForError([]byte(p.StreamID)), maxModelStreamID)
	}
	return p, nil
}

// readModelCall reads a child's model call as decodeModelCall and
// checkModelRequest do together. When the child wrote its session's id
// before the request, as it does, and session knows that session (its
// model's name and what it keeps), one strict walk of the params checks
// the request where it lies and returns the body. Otherwise, or on any
// error, the call is read as decodeModelCall reads it, which names what is
// wrong, and no body is returned: the caller checks the request once it
// knows the session.
func readModelCall(params json.RawMessage, session func(id string) (string, *modelChecked, bool)) (modelCompleteParams, []byte, error) {
	if p, body, ok := readModelCallOnce(params, session); ok {
		return p, body, nil
	}
	p, err := decodeModelCall(params)
	return p, nil, err
}

// errModelCallOrder ends readModelCallOnce's walk at a request it cannot
// check yet.
var errModelCallOrder = errors.New("the request before the session")

func readModelCallOnce(params json.RawMessage, session func(id string) (string, *modelChecked, bool)) (p modelCompleteParams, body []byte, ok bool) {
	if len(params) == 0 || params[0] != '{' {
		return p, nil, false
	}
	w := &wireWalk{data: params, check: walkStrict}
	var checked *modelChecked
	var elems modelElements
	err := modelShapeObject(w, modelAt{}, modelCallMembers, func(key string) error {
		start := w.i
		if key == modelCallMembers[modelCallRequest] {
			name, c, found := "", (*modelChecked)(nil), false
			if p.SessionID != "" {
				name, c, found = session(p.SessionID)
			}
			if !found {
				return errModelCallOrder
			}
			var err error
			body, elems, err = checkModelRequestAt(w, name, c)
			p.Request, checked = w.data[start:w.i], c
			return err
		}
		if err := w.checked(1); err != nil {
			return err
		}
		v, err := w.data[start:w.i], error(nil)
		switch key {
		case "sessionId":
			p.SessionID, err = wireStringValue(v)
		case "promptId":
			p.PromptID, err = wireStringValue(v)
		case "streamId":
			p.StreamID, err = wireStringValue(v)
		default: // _meta
			p.Meta = v
		}
		return err
	})
	if w.space(); err != nil || w.i != len(params) || body == nil || p.StreamID == "" || len(p.StreamID) > maxModelStreamID {
		return modelCompleteParams{}, nil, false
	}
	checked.keep(p.Request, elems)
	return p, body, true
}

// modelChecked is what serve keeps of one session's last accepted model
// request: the bytes of each element of its messages and its tools. Every
// request repeats the conversation so far and the same tools, and an
// element's check depends on its bytes alone, so an element whose bytes
// are, at its place, those of an element already accepted reads the same
// and is passed over: a call's check walks what is new since the last.
type modelChecked struct {
	mu   sync.Mutex
	kept modelElements
}

// modelElements is the elements of a request's messages and tools, each
// the bytes of one, aliasing the request.
type modelElements struct{ messages, tools [][]byte }

// maxModelChecked is the longest request whose elements a session keeps
// for the next call's check: one request per session is held, so the bound
// is serve's memory per session; a longer request is checked whole.
const maxModelChecked = 1 << 20

// known returns the elements of the last accepted request.
func (c *modelChecked) known() modelElements {
	if c == nil {
		return modelElements{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kept
}

// keep records the elements of req, a request serve accepted.
func (c *modelChecked) keep(req []byte, elems modelElements) {
	if c == nil {
		return
	}
	if len(req) > maxModelChecked {
		elems = modelElements{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept = elems
}

// The members of a chat completions request serve forwards, and of the
// objects inside it: those of openAIRequest and the types it holds, spelled
// exactly, a reply's members (reasoning) among them as encoding/json would
// read them.
var (
	modelRequestMembers  = []string{"model", "messages", "tools", "stream", "stream_options"}
	modelStreamMembers   = []string{"include_usage"}
	modelMessageMembers  = []string{"role", "content", "tool_calls", "tool_call_id", "reasoning_content", "reasoning"}
	modelToolCallMembers = []string{"index", "id", "type", "function"}
	modelCallFnMembers   = []string{"name", "arguments"}
	modelToolMembers     = []string{"type", "function"}
	modelFunctionMembers = []string{"name", "description", "parameters"}
	modelPartMembers     = []string{"type", "text", "image_url"}
	modelImageMembers    = []string{"url"}
)

// checkModelRequest checks req strictly (valid UTF-8 JSON as encoding/json
// reads it, exact names, none twice at any depth) and against the shape of
// openAIRequest: every object's members among that type's,
// each value of its type or null, "model" empty. It accepts nothing the
// strict decode of openAIRequest (decodeStrict) refuses, and refuses a
// member spelled in another case at any depth, and reasoning that is not a
// string. It returns the body serve sends: modelName in "model", then the
// other members as written. The elements of messages and tools whose bytes
// are, at their place, those of checked's last request are passed over
// (modelChecked); checked, when not nil, then keeps this request's.
func checkModelRequest(req json.RawMessage, modelName string, checked *modelChecked) ([]byte, error) {
	w := &wireWalk{data: req, check: walkStrict}
	body, elems, err := checkModelRequestAt(w, modelName, checked)
	if err != nil {
		return nil, err
	}
	if w.space(); w.i != len(req) {
		return nil, modelRequestError(errors.New("trailing data after the object"))
	}
	checked.keep(req, elems)
	return body, nil
}

// modelRequestError is err in a request's check.
func modelRequestError(err error) error {
	return fmt.Errorf("model call: request is not a chat completions request: %v", err)
}

// checkModelRequestAt is checkModelRequest of the request at w, which it
// moves past; it returns what checked would keep of it.
func checkModelRequestAt(w *wireWalk, modelName string, checked *modelChecked) ([]byte, modelElements, error) {
	var elems modelElements
	if w.i >= len(w.data) || w.data[w.i] != '{' {
		return nil, elems, modelRequestError(errors.New("not an object"))
	}
	body := make([]byte, 0, len(`{"model":""`)+len(modelName)+len(w.data)-w.i+1)
	body = append(body, `{"model":`...)
	body = appendJSONString(body, modelName, true)
	known := checked.known()
	err := modelShapeObject(w, modelAt{}, modelRequestMembers, func(key string) error {
		var err error
		at, start := modelAt{}.key(key), w.i
		switch key {
		case "model":
			v, err := modelShapeValue(w, at)
			if err != nil {
				return err
			}
			if isJSONNull(v) {
				return nil
			}
			name, err := wireStringValue(v)
			switch {
			case err != nil:
				return modelShapeType(at, "a string")
			case name != "":
				return &modelNamedError{name: name}
			}
			return nil // serve's name goes in its place
		case "messages":
			elems.messages, err = modelShapeElements(w, at, checkModelMessage, known.messages)
		case "tools":
			elems.tools, err = modelShapeElements(w, at, checkModelTool, known.tools)
		case "stream":
			err = modelShapeBool(w, at)
		case "stream_options":
			err = modelShapeObject(w, at, modelStreamMembers, func(key string) error {
				return modelShapeBool(w, at.key(key))
			})
		}
		body = append(append(append(append(body, ',', '"'), key...), '"', ':'), w.data[start:w.i]...)
		return err
	})
	if named, ok := err.(*modelNamedError); ok {
		return nil, elems, fmt.Errorf("model call: request names model %q; serve alone chooses the model", truncateForError([]byte(named.name)))
	}
	if err != nil {
		return nil, elems, modelRequestError(err)
	}
	return append(body, '}'), elems, nil
}

// modelNamedError is a request that names a model.
type modelNamedError struct{ name string }

func (e *modelNamedError) Error() string { return "request names a model" }

// The checks of a request's parts. Each starts with the walk at its value
// and moves past it, so the request is walked once.

func checkModelMessage(w *wireWalk, at modelAt) error {
	return modelShapeObject(w, at, modelMessageMembers, func(key string) error {
		switch key {
		case "content":
			if w.i < len(w.data) && w.data[w.i] == '[' {
				return modelShapeArray(w, at.key(key), checkModelPart)
			}
		case "tool_calls":
			return modelShapeArray(w, at.key(key), checkModelToolCall)
		}
		return modelShapeString(w, at.key(key)) // content, role, tool_call_id, reasoning
	})
}

func checkModelToolCall(w *wireWalk, at modelAt) error {
	return modelShapeObject(w, at, modelToolCallMembers, func(key string) error {
		switch key {
		case "index":
			v, err := modelShapeValue(w, at.key(key))
			if err != nil {
				return err
			}
			if !isJSONNull(v) {
				if _, err := strconv.Atoi(string(v)); err != nil {
					return modelShapeType(at.key(key), "an integer")
				}
			}
			return nil
		case "function":
			at := at.key(key)
			return modelShapeObject(w, at, modelCallFnMembers, func(key string) error {
				return modelShapeString(w, at.key(key))
			})
		}
		return modelShapeString(w, at.key(key))
	})
}

func checkModelTool(w *wireWalk, at modelAt) error {
	return modelShapeObject(w, at, modelToolMembers, func(key string) error {
		if key == "type" {
			return modelShapeString(w, at.key(key))
		}
		at := at.key(key)
		return modelShapeObject(w, at, modelFunctionMembers, func(key string) error {
			if key == "parameters" {
				_, err := modelShapeValue(w, at.key(key)) // any JSON: a tool's schema, forwarded as it is
				return err
			}
			return modelShapeString(w, at.key(key))
		})
	})
}

func checkModelPart(w *wireWalk, at modelAt) error {
	return modelShapeObject(w, at, modelPartMembers, func(key string) error {
		if key == "image_url" {
			at := at.key(key)
			return modelShapeObject(w, at, modelImageMembers, func(key string) error {
				return modelShapeString(w, at.key(key))
			})
		}
		return modelShapeString(w, at.key(key))
	})
}

// modelAt is where in a request a check is, as the error names it
// ("messages[3].tool_calls[0].function.name"). It is a value, built into
// text only for an error, so that a check allocates nothing per member.
type modelAt struct {
	n    int
	segs [modelAtDepth]modelAtSeg
}

// modelAtDepth is the deepest place a check names:
// messages[i].content[j].image_url.url.
const modelAtDepth = 6

// modelAtSeg is a member's name, or an element's index when key is "".
type modelAtSeg struct {
	key   string
	index int
}

func (a modelAt) key(k string) modelAt {
	if a.n < modelAtDepth {
		a.segs[a.n] = modelAtSeg{key: k}
		a.n++
	}
	return a
}

func (a modelAt) elem(i int) modelAt {
	if a.n < modelAtDepth {
		a.segs[a.n] = modelAtSeg{index: i}
		a.n++
	}
	return a
}

func (a modelAt) String() string {
	var b []byte
	for _, s := range a.segs[:a.n] {
		switch {
		case s.key == "":
			b = append(strconv.AppendInt(append(b, '['), int64(s.index), 10), ']')
		case len(b) > 0:
			b = append(append(b, '.'), s.key...)
		default:
			b = append(b, s.key...)
		}
	}
	return string(b)
}

// modelShapeObject walks the object or null at w, whose members' names
// must be among names, spelled exactly (it has none twice), calling member
// with each name as names spells it (so a check allocates nothing) and the
// walk at its value, which member must move past.
func modelShapeObject(w *wireWalk, at modelAt, names []string, member func(key string) error) error {
	if modelShapeNull(w) {
		return nil
	}
	if w.i >= len(w.data) || w.data[w.i] != '{' {
		return modelShapeType(at, "an object")
	}
	var seen uint64 // names given, by index: at most 64
	return w.objectBytes(func(key []byte) error {
		i := slices.IndexFunc(names, func(name string) bool { return name == string(key) })
		problem := ""
		switch {
		case i < 0:
			problem = "unknown"
		case seen&(1<<i) != 0:
			problem = "duplicate"
		}
		if problem != "" {
			if at.n == 0 {
				return fmt.Errorf("%s field %q", problem, key)
			}
			return fmt.Errorf("%s: %s field %q", at, problem, key)
		}
		seen |= 1 << i
		return member(names[i])
	})
}

// modelShapeArray walks the array or null at w, calling elem with the walk
// at each element; an element is never null (a message, tool, call or part
// of nothing).
func modelShapeArray(w *wireWalk, at modelAt, elem func(w *wireWalk, at modelAt) error) error {
	return modelShapeArrayFrom(w, at, func(w *wireWalk, at modelAt, _ int) error { return elem(w, at) })
}

// modelShapeArrayFrom is modelShapeArray whose elem also gets the index.
func modelShapeArrayFrom(w *wireWalk, at modelAt, elem func(w *wireWalk, at modelAt, n int) error) error {
	if modelShapeNull(w) {
		return nil
	}
	if !w.eat('[') {
		return modelShapeType(at, "an array")
	}
	for n := 0; ; n++ {
		more, err := w.nextElement(n)
		if err != nil || !more {
			return err
		}
		at := at.elem(n)
		if modelShapeNull(w) {
			return modelShapeType(at, "an object")
		}
		if err := elem(w, at, n); err != nil {
			return err
		}
	}
}

// modelShapeElements is modelShapeArray that passes over an element whose
// bytes are known's at its place (modelChecked) and returns every
// element's bytes, aliasing w's data.
func modelShapeElements(w *wireWalk, at modelAt, elem func(w *wireWalk, at modelAt) error, known [][]byte) ([][]byte, error) {
	elems := make([][]byte, 0, len(known)+4)
	err := modelShapeArrayFrom(w, at, func(w *wireWalk, at modelAt, n int) error {
		start := w.i
		// An accepted element is a whole object: bytes that begin with it
		// hold exactly it.
		if n < len(known) && bytes.HasPrefix(w.data[start:], known[n]) {
			w.i += len(known[n])
		} else if err := elem(w, at); err != nil {
			return err
		}
		elems = append(elems, w.data[start:w.i])
		return nil
	})
	return elems, err
}

// modelShapeNull moves past a null at w and says whether there was one.
func modelShapeNull(w *wireWalk) bool {
	if bytes.HasPrefix(w.data[w.i:], []byte("null")) {
		w.i += len("null")
		return true
	}
	return false
}

func modelShapeString(w *wireWalk, at modelAt) error {
	switch {
	case modelShapeNull(w):
		return nil
	case w.i < len(w.data) && w.data[w.i] == '"':
		if _, err := w.str(); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		return nil
	}
	return modelShapeType(at, "a string")
}

func modelShapeBool(w *wireWalk, at modelAt) error {
	v, err := modelShapeValue(w, at)
	if err != nil {
		return err
	}
	switch string(v) {
	case "true", "false", "null":
		return nil
	}
	return modelShapeType(at, "a boolean")
}

// modelShapeValue checks any JSON value at w strictly, nested no deeper
// than maxJSONDepth in all, and returns it.
func modelShapeValue(w *wireWalk, at modelAt) (json.RawMessage, error) {
	start := w.i
	// at's places are at least as many as the containers around w.
	if err := w.checked(at.n + 1); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return w.data[start:w.i], nil
}

func modelShapeType(at modelAt, want string) error { return fmt.Errorf("%s: want %s", at, want) }

// modelComplete makes one model call for a child: the channel must own the
// session and the prompt must be its running one, or no HTTP request is
// made; then one request with serve's key, whose reply goes back to the
// child as chunks with the key redacted. The call ends with the prompt.
func (d *daemon) modelComplete(ctx context.Context, ch *acpChannel, params json.RawMessage) (any, error) {
	p, body, err := readModelCall(params, ch.modelSession)
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
	if body == nil {
		if body, err = checkModelRequest(p.Request, s.model.name, &s.modelChecked); err != nil {
			return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
		}
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
	r := http.MaxBytesReader(nil, reply, openAIMaxReply)
	red := redactor{secret: []byte(d.model.apiKey)}
	bufp := modelChunkBuffers.Get().(*[]byte)
	defer modelChunkBuffers.Put(bufp)
	buf := *bufp
	var line []byte
	typed := false
	chunk := func(b []byte) modelChunk {
		c := modelChunk{StreamID: p.StreamID, Data: b}
		if !typed {
			c.ContentType, typed = mediaType, true
		}
		return c
	}
	send := func(b []byte) error {
		// notify copies the params into its line: line is reused.
		line = appendModelChunk(line[:0], chunk(b))
		return ch.conn.notify(methodModelChunk, rpcCompact(line))
	}
	// held is the reply's last read, or one that ended the stream's last
	// event, which waits for the body's end: it goes with the answer.
	var held []byte
	done := sseDone{on: mediaType == openAIEventStream}
	for {
		n, rerr := r.Read(buf)
		end := errors.Is(rerr, io.EOF) // net/http gives the last bytes with EOF when it has both
		if n > 0 {
			if !job.model.spend(n) {
				return nil, overBytes()
			}
			if held != nil {
				if err := send(held); err != nil {
					return nil, err
				}
				held = nil
			}
			out := red.push(buf[:n])
			if done.push(buf[:n]) || end {
				held = append(make([]byte, 0, len(out)), out...)
			} else if len(out) > 0 || !typed {
				if err := send(out); err != nil {
					return nil, err
				}
			}
		}
		if end {
			break
		}
		if rerr != nil {
			if cctx.Err() != nil {
				rerr = cctx.Err()
			}
			return nil, &rpcError{Code: rpcInternalError, Message: openAIReadError(rerr).Error()}
		}
	}
	last := chunk(append(held, red.flush()...))
	last.StreamID = ""
	return rpcCompact(appendModelChunk(nil, last)), nil
}

// sseDone follows the raw bytes of a reply to tell when they end with a
// chat completions stream's last event, data: [DONE]: nothing the child
// reads comes after it, so serve keeps those bytes for its answer and the
// child reads the reply's end and the answer in one line.
type sseDone struct {
	on   bool // the reply is an event stream
	tail []byte
	n    int // the bytes pushed
}

// sseDoneEvents are the data: [DONE] event as a stream may write it, the
// space and the line ends being the writer's choice.
var sseDoneEvents = [][]byte{
	[]byte("data: " + openAIDone + "\n\n"), []byte("data:" + openAIDone + "\n\n"),
	[]byte("data: " + openAIDone + "\r\n\r\n"), []byte("data:" + openAIDone + "\r\n\r\n"),
}

// sseDoneTail is the most of the stream sseDone keeps: the longest event
// and the line end before it.
const sseDoneTail = 24

// push takes the next bytes and reports whether the stream now ends with
// the data: [DONE] event, starting a line.
func (d *sseDone) push(b []byte) bool {
	if !d.on {
		return false
	}
	d.n += len(b)
	d.tail = append(d.tail, b[max(0, len(b)-sseDoneTail):]...)
	d.tail = d.tail[max(0, len(d.tail)-sseDoneTail):]
	for _, ev := range sseDoneEvents {
		if !bytes.HasSuffix(d.tail, ev) {
			continue
		}
		if d.n == len(ev) {
			return true
		}
		if len(d.tail) > len(ev) {
			if c := d.tail[len(d.tail)-len(ev)-1]; c == '\n' || c == '\r' {
				return true
			}
		}
	}
	return false
}

// modelChunkBuffers hold the buffers model replies are read into, one per
// call in progress: each would otherwise be a fresh 32 KiB to clear.
var modelChunkBuffers = sync.Pool{New: func() any { b := make([]byte, modelChunkSize); return &b }}

// modelSession is the model's name and the kept request of session id, a
// session of this channel (readModelCall).
func (ch *acpChannel) modelSession(id string) (string, *modelChecked, bool) {
	s := ch.session(id)
	if s == nil {
		return "", nil, false
	}
	return s.model.name, &s.modelChecked, true
}

// appendModelChunk appends c as json.Marshal writes it: a reply's chunks
// are many and small, and their bytes go as base64 without a second pass.
func appendModelChunk(dst []byte, c modelChunk) []byte {
	dst = append(dst, `{"streamId":`...)
	dst = appendJSONString(dst, c.StreamID, true)
	if c.ContentType != "" {
		dst = append(dst, `,"contentType":`...)
		dst = appendJSONString(dst, c.ContentType, true)
	}
	if len(c.Data) > 0 {
		dst = append(dst, `,"data":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, c.Data)
		dst = append(dst, '"')
	}
	return append(dst, '}')
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
