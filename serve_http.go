// serve_http.go owns the host HTTP API (DESIGN.md §7): routing, the
// loopback, peer and token checks, the handlers, and every error code a host sees.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Feature tags of GET /capabilities: Qwen Code's names, only for what
// acpguard serves. external_tool_guard is advertised only after a successful
// handshake in required mode (DESIGN.md §1).
var baseFeatures = []string{"health", "capabilities", "daemon_status", "session_create", "session_prompt",
	"session_events", "session_cancel", "session_permission_vote", "permission_vote", "session_scope_override"}

const featureExternalToolGuard = "external_tool_guard"

// Host API error codes, as Qwen Code sends them.
const (
	codeUnauthorized     = "unauthorized"
	codeHostNotAllowed   = "host_not_allowed"
	codeOriginNotAllowed = "origin_not_allowed"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeBadRequest       = "invalid_request"
	codeTooLarge         = "payload_too_large"
	codeSessionNotFound  = "session_not_found"
	// POST /session's body and X-Qwen-Client-Id (DESIGN.md §7).
	codeInvalidSessionScope = "invalid_session_scope"
	codeInvalidSessionID    = "invalid_session_id"
	codeInvalidApprovalMode = "invalid_approval_mode"
	codeInvalidClientID     = "invalid_client_id"
	codeSessionDied         = "session_died"
	codeWorkspaceMismatch   = "workspace_mismatch"
	codeQueueFull           = "prompt_queue_full"
	codeSlashRejected       = "slash_command_rejected"
	codePermissionUnknown   = "permission_not_found"
	codeInvalidOptionID     = "invalid_option_id"
	codeChildUnavailable    = "child_unavailable"
	codeGuardNotReady       = "guard_not_acknowledged"
	codeShuttingDown        = "shutting_down"
	codeInternal            = "internal_error"
	// The limits a host request can hit (serve_limits.go).
	codeSessionLimit      = "session_limit_exceeded"
	codePromptTooLarge    = "prompt_too_large"
	codeSubscriberLimit   = "subscriber_limit_exceeded"
	codeInitializeTimeout = "initialize_timeout"
	// A peer that is a descendant of the daemon (serve_peer.go).
	codeHostIsDescendant = "host_is_descendant"
)

// hostError is a failure with the status and code a host sees.
type hostError struct {
	status    int
	code, msg string
}

// errShuttingDown refuses what would add a session or a child at shutdown.
var errShuttingDown = &hostError{http.StatusServiceUnavailable, codeShuttingDown, "the daemon is shutting down"}

// hostKey is one more key of an error body, beside error and code, where
// Qwen Code sends one (DESIGN.md §7).
type hostKey struct {
	name  string
	value any
}

// hostErrorKeys is a hostError whose body carries Qwen Code's extra keys in
// its order, and its Retry-After where it sends one.
type hostErrorKeys struct {
	*hostError
	keys       []hostKey
	retryAfter string
}

func (e *hostErrorKeys) write(w http.ResponseWriter) {
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	writeHostError(w, e.status, e.code, e.msg, e.keys...)
}

// sessionNotFound is Qwen Code's 404, text and sessionId key (DESIGN.md §11).
func sessionNotFound(id string) *hostErrorKeys {
	return &hostErrorKeys{hostError: &hostError{http.StatusNotFound, codeSessionNotFound, fmt.Sprintf("No session with id %q", id)},
		keys: []hostKey{{"sessionId", id}}}
}

func sessionDied(id string) *hostError {
	return &hostError{http.StatusGone, codeSessionDied, fmt.Sprintf("session %q ended: its ACP child exited; create a new session", id)}
}

func childUnavailable(format string, a ...any) *hostError {
	return &hostError{http.StatusServiceUnavailable, codeChildUnavailable, fmt.Sprintf(format, a...)}
}

func (e *hostError) write(w http.ResponseWriter) { writeHostError(w, e.status, e.code, e.msg) }

func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", d.handleHealth)
	mux.HandleFunc("GET /capabilities", d.handleCapabilities)
	mux.HandleFunc("GET /daemon/status", d.handleDaemonStatus)
	mux.HandleFunc("POST /session", d.handleNewSession)
	mux.HandleFunc("POST /session/{id}/prompt", d.handlePrompt)
	mux.HandleFunc("GET /session/{id}/events", d.handleEvents)
	mux.HandleFunc("POST /session/{id}/cancel", d.handleCancel)
	mux.HandleFunc("POST /session/{id}/permission/{requestId}", d.handlePermission)
	mux.HandleFunc("POST /permission/{requestId}", d.handlePermission)
	mux.HandleFunc("DELETE /session/{id}", d.handleDelete)
	mux.HandleFunc("GET "+metricsPath, d.handleMetrics)
	if d.console {
		d.consoleRoutes(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.checkHost && !loopbackHostHeader(r.Host, d.port, d.bindHost) {
			writeHostError(w, http.StatusForbidden, codeHostNotAllowed, "Invalid Host header")
			return
		}
		// A web page can POST to a loopback daemon without a preflight; its
		// browser names the page in Origin, which hosts and curl never send.
		if o := r.Header.Get("Origin"); o != "" && d.checkHost && !isLoopbackOrigin(o) {
			writeHostError(w, http.StatusForbidden, codeOriginNotAllowed, "Request denied by CORS policy")
			return
		}
		if !d.peerAllowed(w, r) {
			return
		}
		if d.token != "" && !d.healthOpen(r) && !d.consoleOpen(r) {
			if why := bearerFailure(r.Header.Get("Authorization"), d.token); why != "" {
				// The 401 closes the connection: one line and one count per connection.
				d.obs.authFailed(why, r)
				writeUnauthorized(w, errorBody{Error: "Unauthorized", Code: codeUnauthorized, Hint: hostAuthHints[why]}, true)
				return
			}
		}
		if h, pattern := mux.Handler(r); pattern == "" {
			// The mux's own 404 and 405 are plain text; hosts expect JSON.
			rec := &statusRecorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			// A method a route does not take is a 404, as Qwen Code answers
			// it (GET /session/:id among them), naming the methods it takes.
			if rec.status == http.StatusMethodNotAllowed {
				allow := rec.header.Get("Allow")
				w.Header().Set("Allow", allow)
				writeHostError(w, http.StatusNotFound, codeMethodNotAllowed, fmt.Sprintf("no route for %s %q: it takes %s", r.Method, r.URL.Path, allow))
				return
			}
			writeHostError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no route for %q", r.URL.Path))
			return
		}
		if r.Body != http.NoBody {
			// Bodies are bounded on every route before any lookup, a cancel
			// or an unknown session included (DESIGN.md §6, §7).
			data, status, err := readBody(w, r, maxHostBody)
			if status == http.StatusRequestEntityTooLarge {
				d.obs.limitHit(codeTooLarge, "method", r.Method, "path", r.URL.Path)
				writeHostError(w, status, codeTooLarge, fmt.Sprintf("Request body too large (max %d MB)", maxHostBody>>20))
				return
			} else if err != nil {
				writeHostError(w, status, codeBadRequest, fmt.Sprintf("read request body: %v", err))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
		}
		mux.ServeHTTP(w, r)
	})
}

// statusRecorder learns which status the mux chose for an unmatched request.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }

func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }

func (r *statusRecorder) WriteHeader(code int) { r.status = code }

// hostAuthHints say, by bearerFailure's reason, what a host must fix; none
// of them quotes what it sent.
var hostAuthHints = map[string]string{
	authNoHeader: "no Authorization header: send Authorization: Bearer <token> with serve's host token",
	authScheme:   "the Authorization header is not Bearer <token>: send Authorization: Bearer <token> with serve's host token",
	authToken:    "the bearer token is not serve's host token: use the token in the file serve names at start, or the " + envServerToken + " serve was started with",
}

// writeHostError answers with the host API's {"error":...,"code":...},
// followed by Qwen Code's extra keys where it has them.
func writeHostError(w http.ResponseWriter, status int, code, msg string, keys ...hostKey) {
	b, _ := json.Marshal(errorBody{Error: msg, Code: code})
	for _, k := range keys {
		name, _ := json.Marshal(k.name)
		value, err := json.Marshal(k.value)
		if err != nil {
			continue
		}
		b = append(append(append(append(b[:len(b)-1], ','), name...), ':'), value...)
		b = append(b, '}')
	}
	writeHostJSON(w, status, json.RawMessage(b))
}

// writeHostJSON sends v as a host API reply, which ends with a newline.
func writeHostJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v, true) }

// readHostBody decodes a strict JSON body, which routes read whole and
// bounded, into v. An empty body is {}, as Qwen Code reads it. It writes the
// error response itself.
func (d *daemon) readHostBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, _ := io.ReadAll(r.Body) // a bytes.Reader or http.NoBody
	if len(bytes.TrimSpace(data)) == 0 {
		return true
	}
	// encoding/json would quietly turn invalid bytes into U+FFFD, and a
	// prompt is forwarded raw: refuse it whole instead.
	if !utf8.Valid(data) {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "read request body: not valid UTF-8")
		return false
	}
	if !json.Valid(data) {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "Invalid JSON in request body")
		return false
	}
	if err := decodeStrict(data, v); err != nil {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("decode request body: %v", err))
		return false
	}
	return true
}

// healthOpen reports whether r is a health check answered without the host
// token: on a loopback bind, as Qwen Code serves it before auth, unless
// --require-auth (DESIGN.md §7). It tells nothing but that serve is up.
func (d *daemon) healthOpen(r *http.Request) bool {
	return d.checkHost && !d.requireAuth && r.URL.Path == "/health" &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead)
}

func (d *daemon) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeHostJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type newSessionRequest struct {
	Cwd          *string `json:"cwd"`
	SessionScope *string `json:"sessionScope"`
	SessionID    *string `json:"sessionId"`
	ApprovalMode *string `json:"approvalMode"`
	// Keys Qwen Code accepts that acpguard reads as strings and ignores:
	// it has one model service and no worktrees (DESIGN.md §7).
	ModelServiceID *string `json:"modelServiceId"`
	SourceType     *string `json:"sourceType"`
	SourceID       *string `json:"sourceId"`
	Branch         *string `json:"branch"`
	Worktree       *string `json:"worktree"`
}

// newSessionResponse is Qwen Code's answer to POST /session: the attach
// keys only when attached (DESIGN.md §7).
type newSessionResponse struct {
	SessionID       string `json:"sessionId"`
	WorkspaceCwd    string `json:"workspaceCwd"`
	Attached        bool   `json:"attached"`
	ClientID        string `json:"clientId"`
	CreatedAt       string `json:"createdAt"`
	HasActivePrompt *bool  `json:"hasActivePrompt,omitempty"`
	// HasRunningBackgroundTasks: a background shell process the session
	// started runs, as its child last reported (methodSessionBackground).
	HasRunningBackgroundTasks *bool `json:"hasRunningBackgroundTasks,omitempty"`
}

// headerClientID names the host's client on a request, Qwen Code's.
const headerClientID = "X-Qwen-Client-Id"

// clientIDPattern is what X-Qwen-Client-Id may hold, Qwen Code's rule.
// The patterns compile at first use: their counted repeats make programs
// that cost about 2 ms to build, which every start of acpguard (the mount
// stage's among them) would otherwise pay.
var clientIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`) })

// uuidPattern is a UUID of versions 1 to 5, the session ids a host may pick.
var uuidPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-5][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$`)
})

// requestClientID is the request's X-Qwen-Client-Id, "" when it names none;
// an invalid one is answered 400 invalid_client_id here (ok false).
func requestClientID(w http.ResponseWriter, r *http.Request) (id string, ok bool) {
	vs, named := r.Header[headerClientID]
	if !named {
		return "", true
	}
	if len(vs) != 1 || !clientIDPattern().MatchString(vs[0]) {
		writeHostError(w, http.StatusBadRequest, codeInvalidClientID, fmt.Sprintf("read %s: client id %q is invalid; use 1 to 128 of A-Z a-z 0-9 . _ : -", headerClientID, strings.Join(vs, ", ")))
		return "", false
	}
	return vs[0], true
}

// lookupAs is lookup for a request whose X-Qwen-Client-Id, if valid, is
// registered on the session it names (DESIGN.md §7).
func (d *daemon) lookupAs(w http.ResponseWriter, r *http.Request, allowDead bool) (*hostSession, string) {
	client, ok := requestClientID(w, r)
	if !ok {
		return nil, ""
	}
	s := d.lookup(w, r, allowDead)
	if s != nil {
		s.addClient(client)
	}
	return s, client
}

// createdAtLayout is ISO 8601 in UTC with milliseconds, as Qwen Code sends it.
const createdAtLayout = "2006-01-02T15:04:05.000Z"

func (d *daemon) handleNewSession(w http.ResponseWriter, r *http.Request) {
	var req newSessionRequest
	if !d.readHostBody(w, r, &req) {
		return
	}
	ws := d.workspaces[0]
	if req.Cwd != nil {
		ws = filepath.Clean(*req.Cwd)
		if !filepath.IsAbs(ws) {
			writeHostError(w, http.StatusBadRequest, codeWorkspaceMismatch, "`cwd` must be an absolute path when provided")
			return
		}
		if !slices.Contains(d.workspaces, ws) {
			workspaceMismatch(d.workspaces[0], ws).write(w)
			return
		}
	}
	open := sessionRequest{ws: ws, scope: scopeSingle}
	if req.SessionScope != nil {
		if *req.SessionScope != scopeSingle && *req.SessionScope != scopeThread {
			writeHostError(w, http.StatusBadRequest, codeInvalidSessionScope, "`sessionScope` must be \"single\" or \"thread\" when provided")
			return
		}
		open.scope = *req.SessionScope
	}
	if req.SessionID != nil {
		if !uuidPattern().MatchString(*req.SessionID) {
			writeHostError(w, http.StatusBadRequest, codeInvalidSessionID, fmt.Sprintf("create session: session id %q is not a UUID; send a UUID (versions 1 to 5) or omit sessionId", *req.SessionID))
			return
		}
		open.id = *req.SessionID
	}
	if req.ApprovalMode != nil {
		if !slices.Contains(hostApprovalModes, *req.ApprovalMode) {
			writeHostError(w, http.StatusBadRequest, codeInvalidApprovalMode, fmt.Sprintf("create session: approval mode %q is unknown; use plan, default, auto-edit, auto or yolo", *req.ApprovalMode),
				hostKey{"allowed", hostApprovalModes})
			return
		}
		open.mode = *req.ApprovalMode
	}
	var ok bool
	if open.clientID, ok = requestClientID(w, r); !ok {
		return
	}
	o, herr := d.openSession(r.Context(), open)
	if herr != nil {
		if herr.code == codeSessionLimit {
			w.Header().Set("Retry-After", sessionLimitRetryAfter)
		}
		herr.write(w)
		return
	}
	res := newSessionResponse{SessionID: o.s.id, WorkspaceCwd: ws, Attached: o.attached, ClientID: o.clientID,
		CreatedAt: o.createdAtTime.UTC().Format(createdAtLayout)}
	if o.attached {
		background := o.s.backgroundRunning()
		res.HasActivePrompt, res.HasRunningBackgroundTasks = &o.activePrompt, &background
	}
	writeHostJSON(w, http.StatusOK, res)
}

// workspaceMismatch is Qwen Code's 400 for a cwd that is not a workspace of
// this serve, with its text and keys (DESIGN.md §11).
func workspaceMismatch(bound, requested string) *hostErrorKeys {
	return &hostErrorKeys{hostError: &hostError{http.StatusBadRequest, codeWorkspaceMismatch, fmt.Sprintf("Workspace mismatch: runtime is bound to %q but request asked for %q. "+
		"Select a registered runtime for %q or register it before retrying; this bridge will not fall back to the primary workspace.", bound, requested, requested)},
		keys: []hostKey{{"boundWorkspace", bound}, {"requestedWorkspace", requested}}}
}

func (d *daemon) lookup(w http.ResponseWriter, r *http.Request, allowDead bool) *hostSession {
	id := r.PathValue("id")
	d.mu.Lock()
	s := d.sessions[id]
	d.mu.Unlock()
	if s == nil {
		sessionNotFound(id).write(w)
		return nil
	}
	if !allowDead && s.isDead() {
		sessionDied(id).write(w)
		return nil
	}
	s.touch()
	return s
}

type promptRequest struct {
	Prompt json.RawMessage `json:"prompt"` // checked by promptBlocks
	Meta   json.RawMessage `json:"_meta"`  // caller metadata: stripped
}

// promptAccepted is the 202 of a prompt, with Qwen Code's keys (DESIGN.md
// §7): lastEventId is the session log's newest id before the turn, and
// eventEpoch the X-Qwen-Event-Epoch its event stream carries.
type promptAccepted struct {
	PromptID    string `json:"promptId"`
	LastEventID int64  `json:"lastEventId"`
	EventEpoch  string `json:"eventEpoch"`
}

func (d *daemon) handlePrompt(w http.ResponseWriter, r *http.Request) {
	s, client := d.lookupAs(w, r, false)
	if s == nil {
		return
	}
	var req promptRequest
	if !d.readHostBody(w, r, &req) {
		return
	}
	blocks := promptBlocks(req.Prompt)
	if len(blocks) == 0 {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "`prompt` is required and must be a non-empty array of content blocks")
		return
	}
	if len(blocks) > maxPromptBlocks {
		d.obs.limitHit(codePromptTooLarge, "sessionId", s.id, "blocks", len(blocks))
		writeHostError(w, http.StatusRequestEntityTooLarge, codePromptTooLarge, fmt.Sprintf("prompt has %d content blocks, more than %d", len(blocks), maxPromptBlocks))
		return
	}
	empty := true
	for i, raw := range blocks {
		// The child's own rules, so that a bad block is a 400 here rather
		// than a turn_error after a 202.
		var block contentBlock
		if err := decodeStrict(raw, &block); err != nil {
			writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("prompt[%d] is not a content block: %v", i, err))
			return
		}
		if err := block.check(); err != nil {
			writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("prompt[%d]: %v", i, err))
			return
		}
		empty = empty && block.empty()
		if name, ok := slashCommand(block.Text); ok && block.Type == "text" {
			switch {
			case slices.Contains(d.disabled, name):
				writeHostError(w, http.StatusBadRequest, codeSlashRejected, fmt.Sprintf("slash command %q is disabled by --disabled-slash-commands", "/"+name))
				return
			case d.guarded && !slices.Contains(d.allowSlash, name):
				writeHostError(w, http.StatusBadRequest, codeSlashRejected, fmt.Sprintf("slash command %q is refused in required mode; open it with --allow-slash-command", "/"+name))
				return
			}
		}
	}
	if empty {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "prompt is empty: no text, resource link or image")
		return
	}
	job, herr := d.enqueue(s, blocks, client)
	if herr != nil {
		herr.write(w)
		return
	}
	writeHostJSON(w, http.StatusAccepted, promptAccepted{PromptID: job.id, LastEventID: job.lastEventID, EventEpoch: s.events.epoch})
}

// promptBlocks returns the blocks of a prompt, none when it is missing, null
// or not an array.
func promptBlocks(raw json.RawMessage) []json.RawMessage {
	var blocks []json.RawMessage
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	return blocks
}

func (d *daemon) handleCancel(w http.ResponseWriter, r *http.Request) {
	s, _ := d.lookupAs(w, r, false)
	if s == nil {
		return
	}
	s.cancelActive("")
	w.WriteHeader(http.StatusNoContent)
}

// voteInvalidText is Qwen Code's 400 text for a vote body it cannot read
// (DESIGN.md §11).
const voteInvalidText = "`outcome` must be `{ outcome: \"cancelled\" }` or `{ outcome: \"selected\", optionId: string }`"

type hostVote struct {
	Outcome *hostVoteOutcome `json:"outcome"`
}

type hostVoteOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// handlePermission answers a vote, on POST /session/:id/permission/:requestId
// or on POST /permission/:requestId, which finds the request's session
// itself (DESIGN.md §7).
func (d *daemon) handlePermission(w http.ResponseWriter, r *http.Request) {
	var s *hostSession
	var client string
	if r.PathValue("id") != "" {
		if s, client = d.lookupAs(w, r, false); s == nil {
			return
		}
	} else {
		var ok bool
		if client, ok = requestClientID(w, r); !ok {
			return
		}
		requestID := r.PathValue("requestId")
		if s = d.permissionSession(requestID); s == nil {
			// Qwen Code's text; no session to name.
			writeHostError(w, http.StatusNotFound, codePermissionUnknown, "No pending permission request for session", hostKey{"requestId", requestID})
			return
		}
		s.touch()
		s.addClient(client)
	}
	var vote hostVote
	if !d.readHostBody(w, r, &vote) {
		return
	}
	if vote.Outcome == nil {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, voteInvalidText)
		return
	}
	if herr := s.vote(r.PathValue("requestId"), *vote.Outcome, client); herr != nil {
		herr.write(w)
		return
	}
	writeHostJSON(w, http.StatusOK, struct{}{})
}

// permissionSession is the live session with the permission request id
// pending or lately resolved; nil when none has it.
func (d *daemon) permissionSession(requestID string) *hostSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sessions {
		if s.hasPermission(requestID) && !s.isDead() {
			return s
		}
	}
	return nil
}

func (d *daemon) handleDelete(w http.ResponseWriter, r *http.Request) {
	s, _ := d.lookupAs(w, r, true)
	if s == nil {
		return
	}
	d.mu.Lock()
	delete(d.sessions, s.id)
	d.mu.Unlock()
	if s.isDead() {
		// Forgotten all the same; the answer says the session had died.
		sessionDied(s.id).write(w)
		return
	}
	s.end(eventSessionClosed, "", true)
	w.WriteHeader(http.StatusNoContent)
}
