// bridge.go owns "acpguard serve": the host HTTP API and its event streams,
// the private ACP children, the guarded prepare bridge and the decision log.
//
// Identity: a host sessionId is the ACP sessionId that the daemon's own
// private child returned from session/new. The child is part of the daemon
// ("sessionId is generated and owned by the daemon/ACP Session"), so the id
// the host sees, the id the child sends back in a prepare request and the id
// the provider sees are one and the same; the daemon refuses an id that is
// malformed or already registered, and binds each id to the channel that
// created it. promptId and the provider requestId are generated here.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Limits of the host API.
const (
	// "A serialized request may not exceed 1 MiB": host bodies get the same bound.
	maxHostBody = 1 << 20
	// A child's session ids travel in URL paths and logs.
	maxSessionIDLen = 128
)

// Limits of the private ACP channel.
const (
	// Every read from another process is bounded; updates carry tool output.
	maxChildLine = 8 << 20
	// session/new of a healthy child takes milliseconds.
	childCallTimeout = 15 * time.Second
	// "SIGINT/SIGTERM: ... end children and their process groups, exit 0
	// within 5 s": a child gets this long to end its tools after SIGTERM.
	childStopGrace = 2 * time.Second
	// In-flight host requests get this long to finish at shutdown.
	httpShutdownGrace = time.Second
)

// Feature tags of GET /capabilities. "The capability is external_tool_guard
// and is advertised only when required mode completed its startup handshake."
var baseFeatures = []string{"session_create", "session_prompt", "session_events", "session_cancel", "session_permission_vote"}

const featureExternalToolGuard = "external_tool_guard"

// Host API error codes, as Qwen Code sends them.
const (
	codeUnauthorized      = "unauthorized"
	codeHostNotAllowed    = "host_not_allowed"
	codeOriginNotAllowed  = "origin_not_allowed"
	codeNotFound          = "not_found"
	codeMethodNotAllowed  = "method_not_allowed"
	codeBadRequest        = "invalid_request"
	codeTooLarge          = "payload_too_large"
	codeSessionNotFound   = "session_not_found"
	codeSessionDied       = "session_died"
	codeWorkspaceMismatch = "workspace_mismatch"
	codeQueueFull         = "prompt_queue_full"
	codeSlashRejected     = "slash_command_rejected"
	codePermissionUnknown = "permission_not_found"
	codeChildUnavailable  = "child_unavailable"
	codeGuardNotReady     = "guard_not_acknowledged"
	codeShuttingDown      = "shutting_down"
	codeInternal          = "internal_error"
)

// Event types of GET /session/:id/events.
const (
	eventSessionUpdate      = "session_update"
	eventPermissionRequest  = "permission_request"
	eventPermissionResolved = "permission_resolved"
	eventTurnComplete       = "turn_complete"
	eventTurnError          = "turn_error"
	eventSessionDied        = "session_died"
	eventSessionClosed      = "session_closed"
	// The last event a dropped slow subscriber gets. It carries no id, so
	// the host's Last-Event-ID still names the last event it received.
	eventStreamDropped = "stream_dropped"
)

// Decision log outcomes that the bridge decides before or after the
// provider; the provider's own failure categories are logged as they are.
const (
	outcomeAllowed          = "allowed"
	outcomeDenied           = "denied"
	outcomeMalformed        = "malformed_request"
	outcomeIdentityMismatch = "identity_mismatch"
	outcomeStalePrompt      = "stale_prompt"
	outcomeNotConfigured    = "not_configured"
)

func runServe(ctx context.Context, sys *system, args []string) error {
	opts, err := parseServeArgs(args, sys)
	if err != nil {
		return err
	}
	log := newLogger(sys.stderr, opts.LogJSON, opts.LogLevel)
	if err := hideEnviron(log); err != nil {
		return err
	}
	tok, err := prepareHostToken(&opts, envOf(sys), log)
	if err != nil {
		return err
	}
	defer tok.cleanup()
	return serveDaemon(ctx, sys, opts, func(url string) {
		fmt.Fprintf(sys.stdout, "acpguard serve: listening on %s\n", url)
		tok.announce(sys.stdout)
	})
}

// hostIdleConnTimeout closes a host's keep-alive connection that carries no
// request; an event stream is a response in progress, never idle.
const hostIdleConnTimeout = 2 * time.Minute

// daemon is one running "acpguard serve".
type daemon struct {
	sys          *system
	token        string
	guarded      bool            // required mode completed its handshake
	provider     *providerClient // nil in off mode: "no provider is constructed"
	decisions    *decisionLog
	workspaces   []string // absolute, cleaned; the first is the primary
	maxPending   int
	limits       serveLimits
	events       *eventBudget // every session's event memory: --max-event-memory
	obs          *serveObserver
	allowSlash   []string
	disabled     []string // --disabled-slash-commands
	childLog     []string // --log-format and --log-level for the children
	settingsFile string
	sandbox      sandboxInForce // checked against the kernel; given to every child
	port         string
	bindHost     string // the bound address as a Host header spells it
	checkHost    bool

	model          *openAIModel // the children's model service; nil: the scripted model
	modelCallLimit int          // model calls of one prompt (model_proxy.go)

	runCtx context.Context // cancelled when shutdown begins
	wg     sync.WaitGroup  // children's readers and prompt runners

	mu       sync.Mutex
	closing  bool
	slots    map[string]*workspaceSlot
	chans    map[*acpChannel]struct{} // every child not yet reaped
	sessions map[string]*hostSession
	creating int // session creations past the --max-sessions check
}

// workspaceSlot serializes the start of the one child of a workspace.
type workspaceSlot struct {
	mu sync.Mutex
	ch *acpChannel // nil until first use and after the child ended
}

// serveDaemon runs the daemon until ctx is done. ready is called with the
// base URL once the listener is open.
func serveDaemon(ctx context.Context, sys *system, opts serveOptions, ready func(url string)) error {
	loopback := isLoopbackBind(opts.Hostname)
	if !loopback && opts.Token == "" {
		return usagef("--hostname %q is not a loopback address; a host token (--token or QWEN_SERVER_TOKEN) is required", opts.Hostname)
	}
	// parseServeArgs made every workspace absolute and defaulted to the
	// current directory; a relative one here could never match a cwd.
	if len(opts.Workspaces) == 0 {
		return usagef("no workspace given")
	}
	for _, ws := range opts.Workspaces {
		if !filepath.IsAbs(ws) {
			return usagef("--workspace %q: not an absolute path", ws)
		}
	}
	d := &daemon{
		sys:          sys,
		token:        opts.Token,
		workspaces:   opts.Workspaces,
		maxPending:   opts.MaxPendingPrompts,
		limits:       opts.Limits.withDefaults(),
		obs:          newServeObserver(newLogger(sys.stderr, opts.LogJSON, opts.LogLevel)),
		allowSlash:   opts.AllowSlashCommands,
		disabled:     opts.DisabledSlashCommands,
		childLog:     childLogArgs(opts.LogJSON, opts.LogLevel),
		settingsFile: opts.SettingsFile,
		checkHost:    loopback,
		slots:        map[string]*workspaceSlot{},
		chans:        map[*acpChannel]struct{}{},
		sessions:     map[string]*hostSession{},
	}
	if d.maxPending < 1 {
		return usagef("max pending prompts per session %d: must be at least 1", d.maxPending)
	}
	if err := d.setModel(opts); err != nil {
		return err
	}
	sandbox, err := startSandbox(opts.Sandbox, d.obs.log)
	if err != nil {
		return err
	}
	d.sandbox, d.obs.sandbox = sandbox, sandbox
	d.events = newEventBudget(d.limits.MaxEventMemory)
	d.obs.events = d.events
	if opts.Guard.required() {
		// "daemon startup performs an authenticated, versioned handshake"
		// before the listener opens or any child starts.
		pc := newProviderClient(opts.Guard)
		if err := pc.handshake(ctx); err != nil {
			return fmt.Errorf("external tool guard provider handshake failed: %w", err)
		}
		d.provider, d.guarded = pc, true
	}
	logw := sys.stderr
	if opts.DecisionLog != "" {
		f, err := os.OpenFile(opts.DecisionLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open decision log %q: %w", opts.DecisionLog, err)
		}
		defer f.Close()
		logw = f
	}
	d.decisions = &decisionLog{w: logw}

	host := opts.Hostname
	if strings.EqualFold(host, "localhost") {
		// Pinned like the provider endpoint: never resolved through DNS.
		host = "127.0.0.1"
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listen on %q port %d: %w", opts.Hostname, opts.Port, err)
	}
	bound, port, _ := net.SplitHostPort(ln.Addr().String())
	d.port, d.bindHost = port, bound
	if strings.Contains(bound, ":") {
		d.bindHost = "[" + bound + "]"
	}

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	d.runCtx = runCtx
	if d.guarded {
		// SIGHUP re-runs the provider handshake (serve_identity.go).
		defer d.handshakeOnSIGHUP(runCtx)()
	}
	srv := &http.Server{
		Handler:           d.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		// An idle keep-alive connection holds a descriptor; without a bound
		// anyone who can connect could hold them all.
		IdleTimeout: hostIdleConnTimeout,
		BaseContext: func(net.Listener) context.Context { return runCtx },
		ConnContext: d.peerConnContext,
		ErrorLog:    slog.NewLogLogger(d.obs.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	d.wg.Add(1)
	go d.reapIdleSessions(runCtx)
	d.obs.log.Info("listening", "url", "http://"+ln.Addr().String(), "guarded", d.guarded, "maxSessions", d.limits.MaxSessions, d.sandbox.logAttr())
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	d.shutdown(srv, stopRun)
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve http: %w", serveErr)
}

// shutdown stops accepting, cancels active prompts, ends every child and
// its process group, and waits for every goroutine the daemon started.
func (d *daemon) shutdown(srv *http.Server, stopRun context.CancelFunc) {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()

	stopRun() // ends event streams and in-flight host requests
	sctx, cancel := context.WithTimeout(context.Background(), httpShutdownGrace)
	if srv.Shutdown(sctx) != nil {
		srv.Close()
	}
	cancel()

	// closing is set: no session or child can be added from here on.
	d.mu.Lock()
	sessions := make([]*hostSession, 0, len(d.sessions))
	for _, s := range d.sessions {
		sessions = append(sessions, s)
	}
	chans := make([]*acpChannel, 0, len(d.chans))
	for ch := range d.chans {
		chans = append(chans, ch)
	}
	d.mu.Unlock()

	for _, s := range sessions {
		s.cancelActive()
	}
	var stops sync.WaitGroup
	for _, ch := range chans {
		stops.Go(ch.stop)
	}
	stops.Wait()
	d.wg.Wait()
	if d.provider != nil {
		d.provider.close()
	}
	if d.model != nil {
		d.model.client.CloseIdleConnections()
	}
}

// isLoopbackBind reports whether a --hostname binds loopback only.
func isLoopbackBind(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// ---- HTTP layer ----

func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", d.handleHealth)
	mux.HandleFunc("GET /capabilities", d.handleCapabilities)
	mux.HandleFunc("POST /session", d.handleNewSession)
	mux.HandleFunc("POST /session/{id}/prompt", d.handlePrompt)
	mux.HandleFunc("GET /session/{id}/events", d.handleEvents)
	mux.HandleFunc("POST /session/{id}/cancel", d.handleCancel)
	mux.HandleFunc("POST /session/{id}/permission/{requestId}", d.handlePermission)
	mux.HandleFunc("DELETE /session/{id}", d.handleDelete)
	mux.HandleFunc("GET "+serveMetricsPath, d.handleMetrics)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.checkHost && !d.hostAllowed(r.Host) {
			writeHostError(w, http.StatusForbidden, codeHostNotAllowed, fmt.Sprintf("Host %q is not a loopback name", r.Host))
			return
		}
		// A web page can POST to a loopback daemon without a preflight; its
		// browser names the page in Origin, which hosts and curl never send.
		if o := r.Header.Get("Origin"); o != "" && d.checkHost && !loopbackOrigin(o) {
			writeHostError(w, http.StatusForbidden, codeOriginNotAllowed, fmt.Sprintf("Origin %q is not a loopback origin", o))
			return
		}
		if !d.peerAllowed(w, r) {
			return
		}
		if d.token != "" && !bearerMatches(r.Header.Get("Authorization"), d.token) {
			// Closed after the answer: a client without the token holds no
			// connection, so it cannot use up the daemon's descriptors.
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeHostError(w, http.StatusUnauthorized, codeUnauthorized, "Unauthorized")
			return
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			// The mux's own 404 and 405 are plain text; hosts expect JSON.
			rec := &statusRecorder{header: http.Header{}}
			h, _ := mux.Handler(r)
			h.ServeHTTP(rec, r)
			if rec.status == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", rec.header.Get("Allow"))
				writeHostError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, fmt.Sprintf("Method %s is not allowed on %q", r.Method, r.URL.Path))
				return
			}
			writeHostError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("No route for %q", r.URL.Path))
			return
		}
		if r.Body != http.NoBody {
			// "Host request bodies at most 1 MiB (413)", on every route and
			// before any lookup: a cancel or an unknown session included.
			data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHostBody))
			if err != nil {
				d.bodyReadFailed(w, r, err)
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

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// hostAllowed implements "Loopback binds check the Host header (localhost,
// 127.0.0.1, [::1] with the port) against DNS rebinding".
func (d *daemon) hostAllowed(hostHeader string) bool {
	name := hostHeader
	if h, port, err := net.SplitHostPort(hostHeader); err == nil {
		if port != d.port {
			return false
		}
		name = h
		if h == "::1" {
			name = "[::1]"
		}
	}
	switch strings.ToLower(name) {
	case "localhost", "127.0.0.1", "[::1]", d.bindHost:
		return true
	}
	return false
}

// loopbackOrigin reports whether a browser Origin names a page served from
// this machine's loopback names.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// bearerMatches compares in constant time, also in the token's length.
func bearerMatches(header, token string) bool {
	scheme, got, _ := strings.Cut(header, " ")
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && strings.EqualFold(scheme, "Bearer")
}

type apiErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeHostError(w http.ResponseWriter, status int, code, msg string) {
	writeHostJSON(w, status, apiErrorBody{Error: msg, Code: code})
}

func writeHostJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"Internal error","code":"internal_error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// readHostBody decodes a bounded, strict JSON body into v. An empty body is
// allowed only when emptyOK. It writes the error response itself.
// bodyReadFailed answers a request whose body could not be read whole.
func (d *daemon) bodyReadFailed(w http.ResponseWriter, r *http.Request, err error) {
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		d.obs.limitHit(codeTooLarge, "method", r.Method, "path", r.URL.Path)
		writeHostError(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("Request body exceeds %d bytes", maxHostBody))
		return
	}
	writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("Read request body: %v", err))
}

func (d *daemon) readHostBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHostBody))
	if err != nil {
		d.bodyReadFailed(w, r, err)
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 && emptyOK {
		return true
	}
	// encoding/json would quietly turn invalid bytes into U+FFFD, and a
	// prompt is forwarded raw: refuse it whole instead.
	if !utf8.Valid(data) {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "Request body is not valid UTF-8")
		return false
	}
	if err := decodeStrict(data, v); err != nil {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("Invalid JSON body: %v", err))
		return false
	}
	return true
}

func (d *daemon) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeHostJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type capabilitiesBody struct {
	V            int      `json:"v"`
	Mode         string   `json:"mode"`
	Features     []string `json:"features"`
	WorkspaceCwd string   `json:"workspaceCwd"`
	// Sandbox is what confines the children's tools; absent in off mode
	// with the sandbox off.
	Sandbox *sandboxReport `json:"sandbox,omitempty"`
}

func (d *daemon) handleCapabilities(w http.ResponseWriter, r *http.Request) {
	features := slices.Clone(baseFeatures)
	if d.guarded {
		features = append(features, featureExternalToolGuard)
	}
	body := capabilitiesBody{V: 1, Mode: "http-bridge", Features: features, WorkspaceCwd: d.workspaces[0]}
	if d.sandbox.reported(d.guarded) {
		r := d.sandbox.report()
		body.Sandbox = &r
	}
	writeHostJSON(w, http.StatusOK, body)
}

type newSessionRequest struct {
	Cwd          *string `json:"cwd"`
	SessionScope string  `json:"sessionScope"` // Qwen Code's; acpguard always creates a new session
}

type newSessionResponse struct {
	SessionID    string `json:"sessionId"`
	WorkspaceCwd string `json:"workspaceCwd"`
}

func (d *daemon) handleNewSession(w http.ResponseWriter, r *http.Request) {
	var req newSessionRequest
	if !d.readHostBody(w, r, &req, true) {
		return
	}
	ws := d.workspaces[0]
	if req.Cwd != nil {
		ws = ""
		if filepath.IsAbs(*req.Cwd) && slices.Contains(d.workspaces, filepath.Clean(*req.Cwd)) {
			ws = filepath.Clean(*req.Cwd)
		}
		if ws == "" {
			writeHostError(w, http.StatusBadRequest, codeWorkspaceMismatch, fmt.Sprintf("cwd %q is not a registered workspace", *req.Cwd))
			return
		}
	}
	s, herr := d.newSession(r.Context(), ws)
	if herr != nil {
		if herr.code == codeSessionLimit {
			w.Header().Set("Retry-After", sessionLimitRetryAfter)
		}
		writeHostError(w, herr.status, herr.code, herr.msg)
		return
	}
	writeHostJSON(w, http.StatusOK, newSessionResponse{SessionID: s.id, WorkspaceCwd: ws})
}

// hostError is a failure with the status and code a host sees.
type hostError struct {
	status    int
	code, msg string
}

func (d *daemon) lookup(w http.ResponseWriter, r *http.Request, allowDead bool) *hostSession {
	id := r.PathValue("id")
	d.mu.Lock()
	s := d.sessions[id]
	d.mu.Unlock()
	if s == nil {
		writeHostError(w, http.StatusNotFound, codeSessionNotFound, fmt.Sprintf("No session with id %q", id))
		return nil
	}
	if !allowDead && s.isDead() {
		writeHostError(w, http.StatusGone, codeSessionDied, fmt.Sprintf("Session %q ended because its ACP child exited", id))
		return nil
	}
	s.touch()
	return s
}

type promptRequest struct {
	Prompt []json.RawMessage `json:"prompt"`
	Meta   json.RawMessage   `json:"_meta"` // caller metadata: stripped
}

type promptAccepted struct {
	PromptID string `json:"promptId"`
}

func (d *daemon) handlePrompt(w http.ResponseWriter, r *http.Request) {
	s := d.lookup(w, r, false)
	if s == nil {
		return
	}
	var req promptRequest
	if !d.readHostBody(w, r, &req, false) {
		return
	}
	if len(req.Prompt) == 0 {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "prompt must be a non-empty array of content blocks")
		return
	}
	if len(req.Prompt) > maxPromptBlocks {
		d.obs.limitHit(codePromptTooLarge, "sessionId", s.id, "blocks", len(req.Prompt))
		writeHostError(w, http.StatusRequestEntityTooLarge, codePromptTooLarge, fmt.Sprintf("prompt has %d content blocks, more than %d", len(req.Prompt), maxPromptBlocks))
		return
	}
	empty := true
	for i, raw := range req.Prompt {
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
				writeHostError(w, http.StatusBadRequest, codeSlashRejected, fmt.Sprintf("Slash command %q is disabled (--disabled-slash-commands)", "/"+name))
				return
			case d.guarded && !slices.Contains(d.allowSlash, name):
				writeHostError(w, http.StatusBadRequest, codeSlashRejected, fmt.Sprintf("Slash command %q is not allowed in required external tool guard mode", "/"+name))
				return
			}
		}
	}
	if empty {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "prompt is empty: no text and no resource link")
		return
	}
	job, herr := d.enqueue(s, req.Prompt)
	if herr != nil {
		writeHostError(w, herr.status, herr.code, herr.msg)
		return
	}
	writeHostJSON(w, http.StatusAccepted, promptAccepted{PromptID: job.id})
}

func (d *daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	// "its sessions get session_died, later calls on them 410": a stream
	// open when the child died got the event; a new one gets the 410.
	s := d.lookup(w, r, false)
	if s == nil {
		return
	}
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeHostError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("Last-Event-ID %q is not an event id", v))
			return
		}
		after = n
	}
	streamEvents(w, r, s.events, after, heartbeatInterval, streamWriteTimeout)
}

func (d *daemon) handleCancel(w http.ResponseWriter, r *http.Request) {
	s := d.lookup(w, r, false)
	if s == nil {
		return
	}
	s.cancelActive()
	w.WriteHeader(http.StatusNoContent)
}

type hostVote struct {
	Outcome *hostVoteOutcome `json:"outcome"`
}

type hostVoteOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

func (d *daemon) handlePermission(w http.ResponseWriter, r *http.Request) {
	s := d.lookup(w, r, false)
	if s == nil {
		return
	}
	var vote hostVote
	if !d.readHostBody(w, r, &vote, false) {
		return
	}
	if vote.Outcome == nil {
		writeHostError(w, http.StatusBadRequest, codeBadRequest, "outcome is required")
		return
	}
	if herr := s.vote(r.PathValue("requestId"), *vote.Outcome); herr != nil {
		writeHostError(w, herr.status, herr.code, herr.msg)
		return
	}
	writeHostJSON(w, http.StatusOK, struct{}{})
}

func (d *daemon) handleDelete(w http.ResponseWriter, r *http.Request) {
	s := d.lookup(w, r, true)
	if s == nil {
		return
	}
	d.mu.Lock()
	delete(d.sessions, s.id)
	d.mu.Unlock()
	if s.isDead() {
		// Forgotten all the same; the answer says the session had died.
		writeHostError(w, http.StatusGone, codeSessionDied, fmt.Sprintf("Session %q ended because its ACP child exited", s.id))
		return
	}
	s.end(eventSessionClosed, "")
	w.WriteHeader(http.StatusNoContent)
}

// ---- sessions and prompts ----

// hostSession is one host session: one ACP session on one channel.
type hostSession struct {
	d      *daemon
	id     string
	ch     *acpChannel
	events *streamLog

	mu      sync.Mutex
	ended   bool // closed by the host, or its child died
	dead    bool // its child died
	queue   []*promptJob
	active  *promptJob
	running bool // a runner goroutine owns the queue
	perms   map[string]*hostPendingPermission
	// lastUsed is the time of the last host request or prompt end, for
	// the idle reaper.
	lastUsed time.Time
}

// promptJob is one queued or running prompt.
type promptJob struct {
	id     string
	blocks []json.RawMessage
	// ctx is done once the prompt is cancelled or finished; a prepare
	// decided for it must not be answered with an allow after that.
	ctx    context.Context
	cancel context.CancelFunc
	// answered: the child's answer to the prompt was read; cancelled: the
	// host, a deadline or the end of the session cancelled it before that.
	// Each is set before ctx ends, under the session's mu; they tell a
	// prepare for a cancelled prompt from one for a finished prompt.
	answered, cancelled bool
	model               modelBudget // the model calls serve made for it
}

type hostPendingPermission struct {
	options  []string
	resolved chan hostVoteOutcome // capacity 1
}

func (s *hostSession) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

func (d *daemon) newSession(ctx context.Context, ws string) (*hostSession, *hostError) {
	// A creation holds its place against --max-sessions from here on, so
	// concurrent ones cannot overshoot, nor leave an ACP session behind.
	d.mu.Lock()
	if live := d.liveSessionsLocked() + d.creating; live >= d.limits.MaxSessions {
		d.mu.Unlock()
		d.obs.limitHit(codeSessionLimit, "sessions", live)
		return nil, &hostError{http.StatusServiceUnavailable, codeSessionLimit, fmt.Sprintf("The daemon already holds %d sessions, its limit", d.limits.MaxSessions)}
	}
	d.creating++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.creating--
		d.mu.Unlock()
	}()
	ch, herr := d.channelFor(ctx, ws)
	if herr != nil {
		return nil, herr
	}
	// "sessionId is generated by the daemon": the child is told which.
	id, err := randomHex(16)
	if err != nil {
		return nil, &hostError{http.StatusInternalServerError, codeInternal, fmt.Sprintf("generate a session id: %v", err)}
	}
	cctx, cancel := context.WithTimeout(ctx, childCallTimeout)
	defer cancel()
	raw, err := ch.conn.call(cctx, "session/new", map[string]any{"cwd": ws, "mcpServers": []any{}, "_meta": map[string]string{metaSessionID: id}})
	if err != nil {
		return nil, &hostError{http.StatusServiceUnavailable, codeChildUnavailable, fmt.Sprintf("ACP child refused session/new: %v", err)}
	}
	var res struct {
		SessionID     string          `json:"sessionId"`
		Modes         json.RawMessage `json:"modes"`
		Models        json.RawMessage `json:"models"`
		ConfigOptions json.RawMessage `json:"configOptions"`
		Meta          json.RawMessage `json:"_meta"`
	}
	if err := decodeStrict(raw, &res); err != nil || res.SessionID != id {
		return nil, &hostError{http.StatusServiceUnavailable, codeChildUnavailable, fmt.Sprintf("ACP child answered session/new with %q, not the session id %q the daemon generated", truncateForError(raw), id)}
	}
	events := newBoundedStreamLog(d.limits.EventRingSize, d.limits.MaxSubscribers, d.events, func(code string, attrs ...any) {
		d.obs.limitHit(code, append([]any{"sessionId", res.SessionID}, attrs...)...)
	})
	s := &hostSession{d: d, id: res.SessionID, ch: ch, events: events, perms: map[string]*hostPendingPermission{}, lastUsed: time.Now()}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil, &hostError{http.StatusServiceUnavailable, codeShuttingDown, "The daemon is shutting down"}
	}
	if _, taken := d.sessions[s.id]; taken || ch.ended() {
		return nil, &hostError{http.StatusServiceUnavailable, codeChildUnavailable, fmt.Sprintf("ACP child returned an unusable session id %q", s.id)}
	}
	d.sessions[s.id] = s
	d.obs.sessionCreated()
	d.obs.logger().Info("session created", "sessionId", s.id, "workspace", ws)
	return s, nil
}

func validSessionID(id string) bool {
	if id == "" || len(id) > maxSessionIDLen {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)
		if !ok {
			return false
		}
	}
	return true
}

func (d *daemon) enqueue(s *hostSession, blocks []json.RawMessage) (*promptJob, *hostError) {
	// Not derived from runCtx: at shutdown the active prompt must still be
	// seen as running until cancelActive tells the child to stop.
	ctx, cancel := context.WithCancel(context.Background())
	job := &promptJob{id: rand.Text(), blocks: blocks, ctx: ctx, cancel: cancel}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case d.closing:
		cancel()
		return nil, &hostError{http.StatusServiceUnavailable, codeShuttingDown, "The daemon is shutting down"}
	case s.dead:
		cancel()
		return nil, &hostError{http.StatusGone, codeSessionDied, fmt.Sprintf("Session %q ended because its ACP child exited", s.id)}
	case s.ended:
		cancel()
		return nil, &hostError{http.StatusNotFound, codeSessionNotFound, fmt.Sprintf("No session with id %q", s.id)}
	case len(s.queue) >= d.maxPending:
		cancel()
		d.obs.limitHit(codeQueueFull, "sessionId", s.id, "pending", len(s.queue))
		return nil, &hostError{http.StatusServiceUnavailable, codeQueueFull, fmt.Sprintf("Session %q already has %d pending prompts", s.id, len(s.queue))}
	}
	s.queue = append(s.queue, job)
	if !s.running {
		s.running = true
		d.wg.Add(1)
		go s.run()
	}
	return job, nil
}

// run sends the queued prompts to the child one at a time, in FIFO order.
func (s *hostSession) run() {
	defer s.d.wg.Done()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.ended {
			s.running = false
			s.mu.Unlock()
			return
		}
		job := s.queue[0]
		s.queue = s.queue[1:]
		s.active = job
		s.mu.Unlock()

		stopDeadline := s.startDeadline(job)
		stop, err := s.sendPrompt(job)
		stopDeadline()

		s.mu.Lock()
		s.active = nil
		s.lastUsed = time.Now()
		job.cancel()
		s.mu.Unlock()
		if err != nil {
			s.d.obs.promptEnded(promptResultError)
			s.events.publish(eventTurnError, job.id, turnError{PromptID: job.id, Message: err.Error()})
		} else {
			s.d.obs.promptEnded(stop)
			s.events.publish(eventTurnComplete, job.id, turnComplete{PromptID: job.id, StopReason: stop})
		}
	}
}

type turnComplete struct {
	PromptID   string `json:"promptId"`
	StopReason string `json:"stopReason"`
}

type turnError struct {
	PromptID string `json:"promptId"`
	Message  string `json:"message"`
}

func (s *hostSession) sendPrompt(job *promptJob) (string, error) {
	// The caller's _meta is never forwarded: the daemon rebinds the
	// identity it generated.
	params := map[string]any{
		"sessionId": s.id,
		"prompt":    job.blocks,
		"_meta":     map[string]any{metaInvocation: invocation{Version: invocationVersion, SessionID: s.id, PromptID: job.id}},
	}
	raw, err := s.ch.conn.callAnswered(s.d.runCtx, "session/prompt", params, func() { s.promptAnswered(job) })
	if err != nil {
		var rerr *rpcError
		if errors.As(err, &rerr) {
			return "", fmt.Errorf("ACP child failed the prompt: %s", rerr.Message)
		}
		return "", fmt.Errorf("ACP child did not answer the prompt: %w", err)
	}
	var res struct {
		StopReason string          `json:"stopReason"`
		Usage      json.RawMessage `json:"usage"`
		Meta       json.RawMessage `json:"_meta"`
	}
	if err := decodeStrict(raw, &res); err != nil || res.StopReason == "" {
		return "", fmt.Errorf("ACP child answered the prompt with an invalid result %q", truncateForError(raw))
	}
	return res.StopReason, nil
}

// cancelActive cancels the running prompt: a prepare for it is denied from
// now on, a pending permission request is answered cancelled, and the
// child is told to stop (it answers the prompt with stopReason cancelled).
func (s *hostSession) cancelActive() { s.cancelPrompt(nil) }

// cancelPrompt cancels the running prompt as cancelActive does, if it is
// only (any, when only is nil); it reports whether it cancelled one.
func (s *hostSession) cancelPrompt(only *promptJob) bool {
	s.mu.Lock()
	job := s.active
	if job == nil || job.ctx.Err() != nil || s.ended || (only != nil && job != only) {
		s.mu.Unlock()
		return false
	}
	job.cancelled = true
	job.cancel()
	for id, p := range s.perms {
		delete(s.perms, id)
		p.resolved <- hostVoteOutcome{Outcome: "cancelled"}
	}
	s.mu.Unlock()
	s.ch.conn.notify("session/cancel", map[string]string{"sessionId": s.id})
	return true
}

// end finishes a session for good: closed by the host or died with its child.
func (s *hostSession) end(typ, message string) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.dead = typ == eventSessionDied
	active := s.active
	if active != nil && active.ctx.Err() == nil {
		active.cancelled = true
	}
	for _, job := range s.queue {
		job.cancel()
	}
	s.queue = nil
	for id, p := range s.perms {
		delete(s.perms, id)
		p.resolved <- hostVoteOutcome{Outcome: "cancelled"}
	}
	s.mu.Unlock()
	if active != nil {
		active.cancel()
		if !s.dead {
			s.ch.conn.notify("session/cancel", map[string]string{"sessionId": s.id})
		}
	}
	if !s.dead {
		// The child ends the session's background processes and MCP
		// servers; the session is gone for the host whatever it answers.
		s.d.wg.Add(1)
		go func() {
			defer s.d.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), childStopGrace)
			defer cancel()
			if _, err := s.ch.conn.call(ctx, methodSessionClose, map[string]string{"sessionId": s.id}); err != nil && !s.ch.ended() {
				s.d.obs.logger().Warn("session/close on the ACP child failed", "session", s.id, "err", err)
			}
		}()
	}
	data := map[string]string{"sessionId": s.id}
	if message != "" {
		data["message"] = message
	}
	s.events.publish(typ, "", data)
	s.events.close()
}

func (s *hostSession) activePromptID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return ""
	}
	return s.active.id
}

// ---- permissions ----

type hostPermissionParams struct {
	SessionID string                 `json:"sessionId"`
	ToolCall  json.RawMessage        `json:"toolCall"`
	Options   []hostPermissionOption `json:"options"`
	Meta      json.RawMessage        `json:"_meta"`
}

type hostPermissionOption struct {
	OptionID string          `json:"optionId"`
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Meta     json.RawMessage `json:"_meta,omitempty"`
}

type permissionRequestEvent struct {
	RequestID string                 `json:"requestId"`
	SessionID string                 `json:"sessionId"`
	ToolCall  json.RawMessage        `json:"toolCall"`
	Options   []hostPermissionOption `json:"options"`
}

type permissionResolvedEvent struct {
	RequestID string          `json:"requestId"`
	SessionID string          `json:"sessionId"`
	Outcome   hostVoteOutcome `json:"outcome"`
}

// askPermission relays one session/request_permission to the host and waits
// for its vote; anything but a vote is the cancelled outcome.
func (s *hostSession) askPermission(ctx context.Context, p hostPermissionParams) hostVoteOutcome {
	requestID := rand.Text()
	pend := &hostPendingPermission{resolved: make(chan hostVoteOutcome, 1)}
	for _, o := range p.Options {
		pend.options = append(pend.options, o.OptionID)
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return hostVoteOutcome{Outcome: "cancelled"}
	}
	promptID := ""
	if s.active != nil {
		promptID = s.active.id
	}
	s.perms[requestID] = pend
	s.mu.Unlock()

	s.events.publish(eventPermissionRequest, promptID, permissionRequestEvent{RequestID: requestID, SessionID: s.id, ToolCall: p.ToolCall, Options: p.Options})
	var expired <-chan time.Time
	if timeout := s.d.limits.PermissionTimeout; timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var out hostVoteOutcome
	select {
	case out = <-pend.resolved:
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.perms, requestID)
		s.mu.Unlock()
		out = hostVoteOutcome{Outcome: "cancelled"}
	case <-expired:
		s.mu.Lock()
		_, unanswered := s.perms[requestID]
		delete(s.perms, requestID)
		s.mu.Unlock()
		if unanswered {
			s.d.obs.limitHit(limitPermissionTimeout, "sessionId", s.id, "requestId", requestID, "timeout", s.d.limits.PermissionTimeout)
			out = hostVoteOutcome{Outcome: "cancelled"}
		} else {
			// A vote or a cancel won the race; it is already buffered.
			out = <-pend.resolved
		}
	}
	s.events.publish(eventPermissionResolved, promptID, permissionResolvedEvent{RequestID: requestID, SessionID: s.id, Outcome: out})
	return out
}

func (s *hostSession) vote(requestID string, out hostVoteOutcome) *hostError {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.perms[requestID]
	if p == nil {
		return &hostError{http.StatusNotFound, codePermissionUnknown, fmt.Sprintf("No pending permission request with id %q", requestID)}
	}
	switch {
	case out.Outcome == "cancelled" && out.OptionID == "":
	case out.Outcome == "selected" && slices.Contains(p.options, out.OptionID):
	default:
		return &hostError{http.StatusBadRequest, codeBadRequest, fmt.Sprintf("outcome must be cancelled or selected with one of the offered optionIds, got %q/%q", out.Outcome, out.OptionID)}
	}
	delete(s.perms, requestID)
	p.resolved <- out
	return nil
}

// ---- children ----

// acpChannel is one private ACP child and the JSON-RPC connection to it.
type acpChannel struct {
	d      *daemon
	cmd    *exec.Cmd
	conn   *rpcConn
	sock   *channelConn       // serve's end of the private channel (channel.go)
	cancel context.CancelFunc // ends conn.serve
	done   chan struct{}      // closed once the child is reaped
	// stopping is set once the daemon ends the child: an exit before
	// that is a death.
	stopping atomic.Bool
}

func (ch *acpChannel) ended() bool {
	select {
	case <-ch.done:
		return true
	default:
		return false
	}
}

// channelFor returns the workspace's child, starting it on first use or
// after the previous one ended.
func (d *daemon) channelFor(ctx context.Context, ws string) (*acpChannel, *hostError) {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return nil, &hostError{http.StatusServiceUnavailable, codeShuttingDown, "The daemon is shutting down"}
	}
	slot := d.slots[ws]
	if slot == nil {
		slot = &workspaceSlot{}
		d.slots[ws] = slot
	}
	d.mu.Unlock()

	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.ch != nil && !slot.ch.ended() {
		return slot.ch, nil
	}
	slot.ch = nil
	ch, herr := d.startChannel(ctx, ws)
	if herr != nil {
		return nil, herr
	}
	slot.ch = ch
	return ch, nil
}

// childLogArgs makes the children log as the daemon does: their stderr is
// the daemon's.
func childLogArgs(logJSON bool, level slog.Level) []string {
	format := "text"
	if logJSON {
		format = "json"
	}
	return []string{"--log-format", format, "--log-level", strings.ToLower(level.String())}
}

// childCommand is "acpguard acp" with the operator's settings, opened slash
// commands and model choice, and the scrubbed environment; in required mode
// that environment also carries the required-v1 marker, and never a secret.
// Nothing else is added: what the child leaves behind is found by its
// session (reaper.go).
func (d *daemon) childCommand(exe string) *exec.Cmd {
	args := append([]string{"acp"}, d.childModelArgs()...)
	if d.settingsFile != "" {
		args = append(args, "--settings", d.settingsFile)
	}
	for _, name := range d.allowSlash {
		args = append(args, "--allow-slash-command", name)
	}
	if len(d.disabled) > 0 {
		args = append(args, "--disabled-slash-commands", strings.Join(d.disabled, ","))
	}
	args = append(args, d.childLog...)
	args = append(args, d.sandbox.childArgs()...)
	cmd := exec.Command(exe, args...)
	cmd.Env = d.sys.env.acpChildEnv(d.guarded)
	return cmd
}

type initializeResult struct {
	ProtocolVersion   int                        `json:"protocolVersion"`
	AgentCapabilities map[string]json.RawMessage `json:"agentCapabilities"`
	AuthMethods       json.RawMessage            `json:"authMethods"`
	AgentInfo         json.RawMessage            `json:"agentInfo"`
	Meta              json.RawMessage            `json:"_meta"`
}

// startChannel spawns "acpguard acp" for a workspace on a private socket pair
// (channel.go) and initializes it. In required mode the child must
// acknowledge required-v1, or it is killed before any session exists on it.
func (d *daemon) startChannel(ctx context.Context, ws string) (*acpChannel, *hostError) {
	unavailable := func(format string, a ...any) *hostError {
		return &hostError{http.StatusServiceUnavailable, codeChildUnavailable, fmt.Sprintf(format, a...)}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, unavailable("Cannot locate the acpguard executable: %v", err)
	}
	cmd := d.childCommand(exe)
	cmd.Dir = ws
	cmd.Stderr = d.sys.stderr
	// A descendant that kept the child's stderr open cannot hold Wait.
	cmd.WaitDelay = childStopGrace
	ends, err := newChannel()
	if err != nil {
		return nil, unavailable("Start ACP child: %v", err)
	}
	// The child's ends are its stdin and stdout; serve keeps only its own.
	cmd.Stdin, cmd.Stdout = ends.childStdin, ends.childStdout

	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		ends.closeAll()
		return nil, &hostError{http.StatusServiceUnavailable, codeShuttingDown, "The daemon is shutting down"}
	}
	// In a session of its own, with a parent-death signal (lifeline.go).
	if err := startChild(cmd); err != nil {
		d.mu.Unlock()
		ends.closeAll()
		return nil, unavailable("Start ACP child: %v", err)
	}
	ends.closeChild()
	sock := ends.conn(cmd.Process.Pid)
	// Not derived from runCtx: at shutdown the child gets its grace period
	// to end its tools before the connection is cut.
	connCtx, cancel := context.WithCancel(context.Background())
	ch := &acpChannel{d: d, cmd: cmd, sock: sock, cancel: cancel, done: make(chan struct{})}
	ch.conn = newRPCConn(sock, sock, rpcConfig{MaxLine: maxChildLine, OnRequest: ch.onRequest, OnNotify: ch.onNotify, CancelNotice: acpCancelNotice})
	d.chans[ch] = struct{}{}
	d.wg.Add(1)
	go ch.run(connCtx)
	d.mu.Unlock()
	d.obs.childStarted()
	d.obs.logger().Info("ACP child started", "pid", cmd.Process.Pid, "workspace", ws)

	initParams := map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "acpguard-serve", "version": version},
	}
	cctx, cancelCall := context.WithTimeout(ctx, d.limits.InitializeTimeout)
	defer cancelCall()
	raw, err := ch.conn.call(cctx, "initialize", initParams)
	if err != nil {
		ch.stop()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			d.obs.limitHit(codeInitializeTimeout, "pid", cmd.Process.Pid, "timeout", d.limits.InitializeTimeout)
			return nil, &hostError{http.StatusServiceUnavailable, codeInitializeTimeout,
				fmt.Sprintf("ACP child did not answer initialize within %v; it was killed", d.limits.InitializeTimeout)}
		}
		return nil, unavailable("ACP child failed to initialize: %v", err)
	}
	var res initializeResult
	if err := decodeStrict(raw, &res); err != nil || res.ProtocolVersion != 1 {
		ch.stop()
		return nil, unavailable("ACP child answered initialize with an invalid result %q", truncateForError(raw))
	}
	if d.guarded && guardAcknowledgement(res.AgentCapabilities) != privateGuardMarker {
		ch.stop()
		return nil, &hostError{http.StatusServiceUnavailable, codeGuardNotReady,
			fmt.Sprintf("ACP child did not acknowledge the external tool guard (want agentCapabilities._meta[%q] = %q); channel rejected", metaGuardReady, privateGuardMarker)}
	}
	return ch, nil
}

// guardAcknowledgement returns the child's required-v1 acknowledgement, or
// "" when it is missing or malformed.
func guardAcknowledgement(caps map[string]json.RawMessage) string {
	var meta map[string]json.RawMessage
	if json.Unmarshal(caps["_meta"], &meta) != nil {
		return ""
	}
	var ack string
	if json.Unmarshal(meta[metaGuardReady], &ack) != nil {
		return ""
	}
	return ack
}

// run owns the child: it serves the connection until the child's end of it
// closes (or the child exited, or another process wrote to it), then makes
// sure the whole process group is gone and reaps it.
func (ch *acpChannel) run(ctx context.Context) {
	defer ch.d.wg.Done()
	drained := ch.sock.drainAfterExit()
	serveErr := ch.conn.serve(ctx)
	syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
	ch.sock.Close()
	if fw, ok := errors.AsType[*foreignWriterError](serveErr); ok {
		ch.d.obs.logger().Error("another process wrote to an ACP child's private channel: the child was ended", "pid", fw.child, "writer", fw.writer, "err", fw)
	}
	// A child that died without ending its tool, hook and MCP process
	// groups (SIGKILL) leaves them running: end them by its session while
	// the unreaped child still holds its pid (reaper.go).
	waitExited(ch.cmd.Process.Pid)
	if n := endLeftBehind(ch.cmd.Process.Pid); n > 0 {
		ch.d.obs.logger().Warn("ended processes the ACP child left behind", "pid", ch.cmd.Process.Pid, "processes", n)
	}
	err := ch.cmd.Wait()
	<-drained
	forgetChild(ch.cmd.Process.Pid)
	if !ch.stopping.Load() {
		ch.d.obs.childDied()
		ch.d.obs.logger().Warn("ACP child exited", "pid", ch.cmd.Process.Pid, "status", fmt.Sprint(err))
	}
	close(ch.done)
	ch.d.channelEnded(ch)
}

// stop ends the child: EOF (shutdown of serve's writing side) and SIGTERM
// first, so it can end its own tool process groups, then SIGKILL to the
// group after a grace period.
func (ch *acpChannel) stop() {
	ch.stopping.Store(true)
	ch.sock.CloseWrite()
	syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(childStopGrace)
	defer t.Stop()
	select {
	case <-ch.done:
		return
	case <-t.C:
	}
	syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
	ch.cancel()
	<-ch.done
}

// channelEnded marks every session of an ended child as died.
func (d *daemon) channelEnded(ch *acpChannel) {
	d.mu.Lock()
	delete(d.chans, ch)
	var dying []*hostSession
	for _, s := range d.sessions {
		if s.ch == ch {
			dying = append(dying, s)
		}
	}
	d.mu.Unlock()
	for _, s := range dying {
		s.end(eventSessionDied, "ACP child exited")
	}
}

// session returns the session with this id if this channel owns it.
func (ch *acpChannel) session(id string) *hostSession {
	ch.d.mu.Lock()
	defer ch.d.mu.Unlock()
	s := ch.d.sessions[id]
	if s == nil || s.ch != ch {
		return nil
	}
	return s
}

type sessionUpdateEvent struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

func (ch *acpChannel) onNotify(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	// The hottest decoder of the daemon: three updates per tool call. params
	// is a member of a line rpcConn checked with json.Valid.
	m, err := decodeWireObject(params, "sessionId", "update", "_meta")
	if err != nil {
		return
	}
	sessionID, err := wireString(m, "sessionId")
	update := m["update"]
	if err != nil || len(update) == 0 || string(update) == "null" {
		return
	}
	s := ch.session(sessionID)
	if s == nil {
		return
	}
	ch.d.obs.toolUpdate(update)
	s.events.publish(eventSessionUpdate, s.activePromptID(), sessionUpdateEvent{SessionID: sessionID, Update: update})
}

func (ch *acpChannel) onRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case methodGuardPrepare:
		return ch.d.prepare(ctx, ch, params), nil
	case methodModelComplete:
		return ch.d.modelComplete(ctx, ch, params)
	case "session/request_permission":
		var p hostPermissionParams
		if err := decodeStrict(params, &p); err != nil {
			return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("invalid session/request_permission params: %v", err)}
		}
		s := ch.session(p.SessionID)
		if s == nil {
			return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("unknown session %q", p.SessionID)}
		}
		return map[string]hostVoteOutcome{"outcome": s.askPermission(ctx, p)}, nil
	}
	return nil, &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("method %q not found", method)}
}

// ---- the guarded prepare bridge ----

type guardPrepareParams struct {
	SessionID  string          `json:"sessionId"`
	PromptID   string          `json:"promptId"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Arguments  json.RawMessage `json:"arguments"`
	Meta       json.RawMessage `json:"_meta"`
}

type guardDecision struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

// prepare answers one child's request for a decision: the channel must own
// the session and the prompt must be the session's active one, or it is
// denied without a provider call; then exactly one provider prepare, and a
// re-check that the prompt is still active before an allow leaves.
func (d *daemon) prepare(ctx context.Context, ch *acpChannel, params json.RawMessage) guardDecision {
	start := time.Now()
	var p guardPrepareParams
	rec := decisionRecord{}
	deny := func(outcome, reason string) guardDecision {
		rec.Outcome = outcome
		rec.LatencyUs = time.Since(start).Microseconds()
		d.decisions.write(rec)
		d.obs.decided(outcome)
		return guardDecision{Allowed: false, Reason: reason}
	}
	if err := decodeStrict(params, &p); err != nil {
		return deny(outcomeMalformed, guardFailedReason)
	}
	rec.SessionID, rec.PromptID, rec.ToolCallID, rec.ToolName = p.SessionID, p.PromptID, p.ToolCallID, p.ToolName
	digest, ok := argumentsDigest(p.Arguments)
	rec.ArgumentsSha256 = digest
	if !ok || p.ToolName == "" {
		return deny(outcomeMalformed, guardFailedReason)
	}
	s := ch.session(p.SessionID)
	if s == nil {
		return deny(outcomeIdentityMismatch, guardFailedReason)
	}
	job := s.activeJob(p.PromptID)
	if job == nil {
		return deny(s.inactiveOutcome(p.PromptID, nil), guardFailedReason)
	}
	if d.provider == nil {
		return deny(outcomeNotConfigured, guardFailedReason)
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(job.ctx, cancel)
	defer stopAfter()
	called := time.Now()
	res := d.provider.prepare(pctx, prepareCall{SessionID: p.SessionID, PromptID: p.PromptID, ToolCallID: p.ToolCallID, ToolName: p.ToolName, Arguments: p.Arguments})
	d.obs.providerLatency(time.Since(called))
	rec.RequestID = res.RequestID

	if s.activeJob(p.PromptID) != job {
		return deny(s.inactiveOutcome(p.PromptID, job), guardFailedReason)
	}
	switch {
	case res.Category != "":
		if res.Category == failIdentity {
			d.obs.logger().Error("provider identity check failed: call denied", "requestId", res.RequestID, "tool", p.ToolName, "err", res.Err)
		}
		return deny(res.Category, guardFailedReason)
	case !res.Allowed:
		reason := res.Reason
		if reason == "" {
			reason = denyDefaultReason
		}
		return deny(outcomeDenied, reason)
	}
	rec.Outcome = outcomeAllowed
	rec.LatencyUs = time.Since(start).Microseconds()
	if err := d.decisions.write(rec); err != nil {
		// Never an unaudited allow.
		d.obs.decided(outcomeDecisionLog)
		d.obs.logger().Error("decision log failed: allow turned into a denial", "requestId", rec.RequestID, "err", err)
		return guardDecision{Allowed: false, Reason: guardFailedReason}
	}
	d.obs.decided(outcomeAllowed)
	return guardDecision{Allowed: true}
}

// activeJob returns the running prompt if its id is promptID and it was
// neither cancelled nor finished.
func (s *hostSession) activeJob(promptID string) *promptJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	job := s.active
	if job == nil || s.ended || promptID == "" || job.id != promptID || job.ctx.Err() != nil {
		return nil
	}
	return job
}

// promptAnswered ends job as the child's answer to it is read, on the
// channel's read goroutine: the child's messages are then applied in the
// order it sent them, and a prepare it wrote after that answer finds the
// prompt over and makes no provider request.
func (s *hostSession) promptAnswered(job *promptJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	job.answered = true
	job.cancel()
}

// inactiveOutcome is the decision-log outcome of a prepare for promptID
// that is not the running prompt (any more): a cancellation when the prompt
// was cancelled while the prepare waited for the provider (job, the prompt
// it was admitted for) or, before that, while the child had not answered it
// yet (job nil); stale_prompt for every other prompt.
func (s *hostSession) inactiveOutcome(promptID string, job *promptJob) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if job == nil {
		if job = s.active; job == nil || job.id != promptID || promptID == "" || job.answered {
			return outcomeStalePrompt
		}
	}
	if job.cancelled {
		return failCancelled
	}
	return outcomeStalePrompt
}

// argumentsDigest is the SHA-256 of the arguments in canonical form
// (compact, keys sorted, numbers as written), the form the reference
// provider's audit log hashes; ok is false unless they are a JSON object.
func argumentsDigest(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || v == nil || dec.More() {
		return "", false
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), true
}

// ---- decision log ----

// decisionRecord is one line of the decision log.
type decisionRecord struct {
	Time            string `json:"time"`
	SessionID       string `json:"sessionId"`
	PromptID        string `json:"promptId"`
	ToolCallID      string `json:"toolCallId"`
	RequestID       string `json:"requestId"`
	ToolName        string `json:"toolName"`
	ArgumentsSha256 string `json:"argumentsSha256"`
	Outcome         string `json:"outcome"`
	LatencyUs       int64  `json:"latencyUs"`
}

// decisionLog writes one JSON line per decision, whole lines only.
type decisionLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *decisionLog) write(rec decisionRecord) error {
	rec.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode decision record: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write decision log: %w", err)
	}
	return nil
}

// truncateForError shortens another process's bytes for an error message.
func truncateForError(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
