// provider.go owns the reference provider ("acpguard provider"): the
// loopback HTTP(S) server of the wire contract, its audit log, its shadow
// mode and its log.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// defaultProviderListen is where the reference provider listens without
// --listen, and where doctor looks for it.
const defaultProviderListen = "127.0.0.1:8787"

// providerOptions are the validated flags of "acpguard provider". Every zero
// value is the default.
type providerOptions struct {
	// SchedSlots: the provider sets its runtime's scheduler slots from the
	// requests in progress (slots.go); the command sets it when GOMAXPROCS
	// is unset.
	SchedSlots     bool
	Listen         loopbackAddr
	PolicyFile     string
	AuditPath      string // "" none, "-" stdout
	AuditArguments bool
	Token          string
	Shadow         bool       // answer allow whatever the policy says, and log what it says
	LogJSON        bool       // --log-format json; text otherwise
	LogLevel       slog.Level // the zero Level is info
	TLSCert        string     // with TLSKey: serve HTTPS; both or neither
	TLSKey         string
	OPA            *url.URL // --opa: OPA decides instead of PolicyFile
}

func runProvider(ctx context.Context, sys *system, args []string) error {
	if len(args) > 0 && args[0] == "check" {
		return runProviderCheck(sys, args[1:])
	}
	opts, err := parseProviderArgs(args, sys)
	if err != nil {
		return err
	}
	if err := hideEnviron(newLogger(sys.stderr, opts.LogJSON, opts.LogLevel)); err != nil {
		return err
	}
	// An operator's GOMAXPROCS wins over the provider's own choice.
	opts.SchedSlots = sys.env.lookup("GOMAXPROCS") == ""
	return serveProvider(ctx, sys, opts, nil)
}

// Server limits beyond both servers' (httpx.go): headers are bounded like a
// response, and a slow peer cannot hold a connection for ever.
const (
	providerReadTimeout   = 30 * time.Second
	providerWriteTimeout  = 30 * time.Second
	providerShutdownGrace = 5 * time.Second
)

// auditFailedReason is sent when a decision could not be recorded: an allow
// is sent only after its audit line is written.
const auditFailedReason = "denied: the policy provider could not record this decision"

// providerShadowWarning is printed at startup of a shadow provider, whatever the
// log level; every audit line of a shadow provider says so too.
const providerShadowWarning = "acpguard provider: WARNING: shadow mode: every well-formed prepare is answered allow; the policy's decisions are only logged\n"

// providerAnnounce writes a startup line whatever the log level: the text
// line, or with --log-format json one JSON record, so that every line of a
// JSON log parses.
func providerAnnounce(w io.Writer, logJSON bool, level slog.Level, text, msg string, args ...any) {
	if !logJSON {
		io.WriteString(w, text)
		return
	}
	slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).Log(context.Background(), level, msg, args...)
}

// serveProvider runs the reference provider until ctx ends. It validates
// everything before it listens, prints the URL it listens on to stderr, then
// calls ready (when not nil) with the bound address.
func serveProvider(ctx context.Context, sys *system, opts providerOptions, ready func(addr string)) error {
	if strings.TrimSpace(opts.Token) == "" {
		return usagef("provider: the token (QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN) is empty")
	}
	pol, err := &providerPolicy{}, error(nil)
	if opts.OPA == nil {
		if pol, err = loadProviderPolicy(opts.PolicyFile); err != nil {
			return &usageError{err}
		}
	}
	logger := newLogger(sys.stderr, opts.LogJSON, opts.LogLevel)
	for _, w := range pol.warnings {
		providerAnnounce(sys.stderr, opts.LogJSON, slog.LevelWarn, fmt.Sprintf("acpguard provider: warning: policy %q: %s\n", opts.PolicyFile, w), "policy warning", "file", opts.PolicyFile, "warning", w)
	}
	p := &providerServer{
		token:    opts.Token,
		withArgs: opts.AuditArguments,
		shadow:   opts.Shadow,
		log:      logger,
		metrics:  newProviderMetrics(opts.Shadow),
	}
	if opts.SchedSlots {
		p.slots = newSchedSlots(logger, slotsProviderMaxRequests)
	}
	if opts.OPA != nil {
		p.opa = newOPAClient(opts.OPA)
		defer p.opa.close()
	}
	p.current.Store(pol)
	scheme := "http"
	var tlsConf *tls.Config
	if opts.TLSCert != "" || opts.TLSKey != "" {
		if tlsConf, err = p.tlsConfig(opts.TLSCert, opts.TLSKey); err != nil {
			return err
		}
		scheme = "https"
	}
	switch opts.AuditPath {
	case "":
	case "-":
		p.audit = &lineLog{w: sys.stdout}
	default:
		l, err := openLineLog(opts.AuditPath)
		if err != nil {
			return fmt.Errorf("open audit log %q: %w", opts.AuditPath, err)
		}
		defer l.close()
		p.audit = l
	}

	// Catch SIGHUP before anyone can learn the address and send one.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	ln, err := net.Listen("tcp", opts.Listen.String())
	if err != nil {
		return listenError(opts.Listen.String(), opts.Listen.Port(), "listen", err)
	}
	addr := ln.Addr().String()
	p.announceStart(sys, opts, scheme+"://"+addr)
	if ready != nil {
		ready(addr)
	}
	srv := newProviderHTTPServer(ctx, p, logger, tlsConf)
	return p.serveHTTP(ctx, srv, ln, hup, opts.PolicyFile)
}

// announceStart says on sys's stderr that the provider listens on url,
// in the log format of opts, with a warning first in shadow mode and,
// after, the Open Policy Agent it decides with.
func (p *providerServer) announceStart(sys *system, opts providerOptions, url string) {
	if opts.Shadow {
		providerAnnounce(sys.stderr, opts.LogJSON, slog.LevelWarn, providerShadowWarning,
			"shadow mode: every well-formed prepare is answered allow; the policy's decisions are only logged", "shadow", true)
	}
	providerAnnounce(sys.stderr, opts.LogJSON, slog.LevelInfo, "acpguard provider: listening on "+url+"\n", "listening", "url", url)
	if p.opa != nil {
		providerAnnounce(sys.stderr, opts.LogJSON, slog.LevelInfo, "acpguard provider: deciding with Open Policy Agent at "+p.opa.url+"\n", "opa", "url", p.opa.url)
	}
}

// newProviderHTTPServer is the HTTP server of p, with TLS when tlsConf is
// not nil, its size and time limits, and its unused connections closed at
// shutdown.
func newProviderHTTPServer(ctx context.Context, p *providerServer, logger *slog.Logger, tlsConf *tls.Config) *http.Server {
	srv := newHTTPServer(ctx, p, logger)
	srv.TLSConfig, srv.MaxHeaderBytes = tlsConf, maxWireResponse
	srv.ReadTimeout, srv.WriteTimeout = providerReadTimeout, providerWriteTimeout
	unused := &providerUnusedConns{conns: map[net.Conn]struct{}{}}
	srv.ConnState = unused.track
	srv.RegisterOnShutdown(unused.closeAll)
	return srv
}

// serveHTTP serves srv on ln until ctx ends or serving fails, reloading
// policyFile on each signal from hup, and shuts srv down within
// providerShutdownGrace.
func (p *providerServer) serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener, hup <-chan os.Signal, policyFile string) error {
	var wg sync.WaitGroup
	reloadCtx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	wg.Go(func() {
		for {
			select {
			case <-reloadCtx.Done():
				return
			case <-hup:
				p.reload(policyFile)
			}
		}
	})
	serveErr := make(chan error, 1)
	wg.Go(func() {
		if srv.TLSConfig != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	})

	var err error
	select {
	case err = <-serveErr:
	case <-ctx.Done():
		shutCtx, cancel := context.WithTimeout(context.Background(), providerShutdownGrace)
		err = srv.Shutdown(shutCtx)
		cancel()
		if err != nil {
			srv.Close()
		}
		if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	stopReload()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	return nil
}

// providerUnusedConns are the connections that have not sent a whole request yet.
// A client's transport may dial a connection and then never use it, and
// Shutdown waits for such a connection until it is 5 seconds old (longer
// than providerShutdownGrace allows), so the provider closes them as soon as
// it shuts down: a stop is quick and clean with a daemon connected.
type providerUnusedConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (u *providerUnusedConns) track(c net.Conn, state http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if state == http.StateNew {
		u.conns[c] = struct{}{}
	} else {
		delete(u.conns, c)
	}
}

// closeAll runs when Shutdown has closed the listener.
func (u *providerUnusedConns) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for c := range u.conns {
		c.Close()
	}
}

// tlsConfig loads the provider's certificate before anything listens. The
// server name each client asks for is logged at debug level: a client of
// https://localhost must send "localhost".
func (p *providerServer) tlsConfig(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, usagef("--tls-cert %q, --tls-key %q: %w", certFile, keyFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			p.log.Debug("tls client hello", "serverName", hello.ServerName, "remote", hello.Conn.RemoteAddr().String())
			return nil, nil
		},
	}, nil
}

// providerServer answers the two routes of the wire contract and /metrics.
type providerServer struct {
	token    string
	current  atomic.Pointer[providerPolicy] // swapped whole on SIGHUP
	withArgs bool
	shadow   bool
	log      *slog.Logger
	metrics  *providerMetrics
	opa      *opaClient // nil: the policy file decides

	audit *lineLog // nil: no audit log

	slots *schedSlots // nil: the runtime's slots are left as they are
}

func (p *providerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.slots.begin()
	defer p.slots.end()
	start := time.Now()
	method := http.MethodPost
	switch r.URL.Path {
	case wirePathHandshake, wirePathPrepare:
	case metricsPath:
		method = http.MethodGet
	default:
		p.fail(w, http.StatusNotFound, fmt.Sprintf("no route %q", r.URL.Path))
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		p.fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %q not allowed", r.Method))
		return
	}
	if !bearerMatches(r.Header.Get("Authorization"), p.token) {
		p.metrics.refused(http.StatusUnauthorized)
		p.log.Debug("unauthorized request", "path", r.URL.Path, "remote", r.RemoteAddr)
		writeUnauthorized(w, errorBody{Error: "unauthorized"}, false)
		return
	}
	if r.URL.Path == metricsPath {
		writeMetrics(w, p.metrics.render(len(p.current.Load().rules)))
		return
	}
	if ct := r.Header.Get("Content-Type"); !wireContentTypeOK(ct) {
		p.fail(w, http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q, want %s", ct, wireContentType))
		return
	}
	body, status, err := readBody(w, r, maxWireRequest)
	if err != nil {
		p.fail(w, status, err.Error())
		return
	}
	if r.URL.Path == wirePathHandshake {
		p.handshake(w, body)
		return
	}
	if p.prepare(r.Context(), w, body) {
		p.metrics.latency.observe(time.Since(start))
	}
}

// fail answers a refused request and counts it. The message may quote what
// the client sent, so it is logged at debug level only.
func (p *providerServer) fail(w http.ResponseWriter, status int, msg string) {
	p.metrics.refused(status)
	msg = clipProviderText(msg, maxErrorMessage)
	p.log.Debug("request refused", "status", status, "error", msg)
	writeJSON(w, status, errorBody{Error: msg}, false)
}

// maxProviderLoggedClient bounds the client name a handshake logs: it is the
// client's text, which the wire contract does not bound.
const maxProviderLoggedClient = 64

// clipProviderText cuts s to at most n bytes of valid UTF-8, marking a cut with "...".
func clipProviderText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

func (p *providerServer) handshake(w http.ResponseWriter, body []byte) {
	m, werr := decodeWireBody(body, "protocolVersion", "nonce", "client")
	if werr != nil {
		p.fail(w, http.StatusBadRequest, werr.Error())
		return
	}
	nonce, err := wireID(m, "nonce")
	var client string
	if err == nil {
		client, err = wireString(m, "client")
	}
	if err != nil {
		p.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	p.metrics.handshakes.Add(1)
	p.log.Info("handshake", "client", clipProviderText(client, maxProviderLoggedClient))
	reply := handshakeResponse{ProtocolVersion: wireProtocolVersion, Nonce: nonce}
	reply.Capabilities.Prepare = true
	writeJSON(w, http.StatusOK, reply, false)
}

// prepare answers one prepare and reports whether it was a decision (200).
func (p *providerServer) prepare(ctx context.Context, w http.ResponseWriter, body []byte) bool {
	m, werr := decodeWireBody(body, "protocolVersion", "requestId", "sessionId", "promptId", "toolCallId", "toolName", "arguments")
	if werr != nil {
		p.fail(w, http.StatusBadRequest, werr.Error())
		return false
	}
	var rec providerAuditRecord
	var err error
	rec.RequestID, err = wireID(m, "requestId")
	for _, f := range []struct {
		key string
		dst *string
	}{{"sessionId", &rec.SessionID}, {"promptId", &rec.PromptID}, {"toolCallId", &rec.ToolCallID}, {"toolName", &rec.ToolName}} {
		if err == nil {
			*f.dst, err = wireString(m, f.key)
		}
	}
	var args map[string]any
	if err == nil {
		args, err = decodeProviderArguments(m["arguments"])
	}
	if err != nil {
		p.fail(w, http.StatusBadRequest, err.Error())
		return false
	}
	var d providerDecision
	if p.opa != nil {
		d = p.decideOPA(ctx, m, &rec, args)
	} else {
		d = p.current.Load().decideCall(&providerCall{Tool: rec.ToolName, Args: args, Session: rec.SessionID, At: time.Now()})
	}
	p.metrics.policy[providerPairIndex(d.Allowed)].Add(1)
	rec.Decision, rec.Reason, rec.Rule = providerDecisionName(d.Allowed), d.Reason, d.Rule
	answer := d.Decision
	if p.shadow {
		// The answer is allow, which carries no reason; the audit line
		// keeps the policy's decision and reason beside it.
		rec.Shadow, rec.WouldDecide, rec.Decision = true, rec.Decision, providerDecisionName(true)
		answer = Decision{Allowed: true}
	}
	rec.Outcome = outcomeDenied
	if rec.Decision == providerDecisionName(true) {
		rec.Outcome = outcomeAllowed
	}
	if p.audit != nil || p.log.Enabled(ctx, decisionLevel(&rec)) {
		// The digest and the canonical arguments are the audit line's and
		// the log's: not computed for neither.
		var canonical []byte
		canonical, rec.ArgumentsSHA256 = canonicalArguments(args)
		if p.withArgs {
			rec.Arguments = canonical
		}
	}
	if err := p.record(&rec); err != nil {
		p.metrics.auditFailures.Add(1)
		p.log.Error("audit log write failed, denying", "requestId", rec.RequestID, "error", err)
		answer = Decision{Reason: auditFailedReason}
	}
	p.logDecision(&rec)
	p.metrics.answers[providerPairIndex(answer.Allowed)].Add(1)
	resp := prepareResponse{ProtocolVersion: wireProtocolVersion, RequestID: rec.RequestID, Decision: answer}
	writeReply(w, http.StatusOK, jsonContentType, appendPrepareResponse(make([]byte, 0, prepareResponseFrame+len(resp.RequestID)+len(resp.Reason)*2), resp))
	return true
}

// logDecision logs one decision: at debug level normally, at warn level in
// shadow mode, where every call is an allow the policy may not have given.
// Raw arguments appear only with --audit-arguments.
func (p *providerServer) logDecision(rec *providerAuditRecord) {
	level, msg := decisionLevel(rec), "decision"
	if rec.Shadow {
		msg = "shadow decision: answered allow"
	}
	if !p.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("requestId", rec.RequestID), slog.String("sessionId", rec.SessionID),
		slog.String("promptId", rec.PromptID), slog.String("toolCallId", rec.ToolCallID),
		slog.String("toolName", rec.ToolName), slog.String("decision", rec.Decision),
	}
	if rec.Shadow {
		attrs = append(attrs, slog.Bool("shadow", true), slog.String("wouldDecide", rec.WouldDecide))
	}
	attrs = append(attrs, slog.Int("rule", rec.Rule), slog.String("reason", rec.Reason), slog.String("argumentsSha256", rec.ArgumentsSHA256))
	if rec.OPADecisionID != "" || rec.OPAError != "" {
		attrs = append(attrs, slog.String("opaDecisionId", rec.OPADecisionID), slog.String("opaError", rec.OPAError))
	}
	if rec.Arguments != nil {
		attrs = append(attrs, slog.String("arguments", string(rec.Arguments)))
	}
	p.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// decisionLevel is the level logDecision logs rec at.
func decisionLevel(rec *providerAuditRecord) slog.Level {
	if rec.Shadow {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

func providerDecisionName(allowed bool) string {
	if allowed {
		return "allow"
	}
	return "deny"
}

// providerPairIndex indexes the [deny, allow] pairs of counters.
func providerPairIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wireID decodes a nonce or requestId the provider will echo.
func wireID(m map[string]json.RawMessage, key string) (string, error) {
	s, err := wireString(m, key)
	if err != nil {
		return "", err
	}
	if s == "" || len(s) > maxWireID {
		return "", fmt.Errorf("field %q must be 1 to %d bytes, got %d", key, maxWireID, len(s))
	}
	return s, nil
}

// prepareResponseFrame bounds what a prepare's answer holds besides its
// request id and reason.
const prepareResponseFrame = 64

// maxErrorMessage bounds the text of an error reply, which may quote what
// the client sent: the provider's answers stay within the limits a
// client enforces.
const maxErrorMessage = 512

// providerAuditRecord is one line of the audit log. argumentsSha256 is the
// digest of canonicalArguments; the arguments are sensitive, so they appear
// only with --audit-arguments.
// In shadow mode decision is the answer sent (allow), wouldDecide the
// policy's, and reason and rule are the policy's.
type providerAuditRecord struct {
	Time       string `json:"time"`
	RequestID  string `json:"requestId"`
	SessionID  string `json:"sessionId"`
	PromptID   string `json:"promptId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Decision   string `json:"decision"`
	// Outcome is decision under the decision log's name and values
	// (allowed, denied), so that one reader reads both logs.
	Outcome         string          `json:"outcome"`
	Shadow          bool            `json:"shadow,omitempty"`
	WouldDecide     string          `json:"wouldDecide,omitempty"`
	Reason          string          `json:"reason"`
	Rule            int             `json:"rule"`
	ArgumentsSHA256 string          `json:"argumentsSha256"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	// With --opa: OPA's decision_id, and why OPA gave no decision.
	OPADecisionID string `json:"opaDecisionId,omitempty"`
	OPAError      string `json:"opaError,omitempty"`
}

// record writes one audit line; an error means the decision is unaudited.
func (p *providerServer) record(rec *providerAuditRecord) error {
	if p.audit == nil {
		return nil
	}
	rec.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return p.audit.append(append(line, '\n'))
}

// reload replaces the policy with the file's current content, or keeps the
// old one when the new file is invalid.
func (p *providerServer) reload(file string) {
	if p.opa != nil {
		p.log.Info("SIGHUP ignored: with --opa, OPA loads its own policy")
		return
	}
	pol, err := loadProviderPolicy(file)
	if err != nil {
		p.metrics.reloads[0].Add(1)
		p.log.Error("reload failed, keeping the previous policy", "error", err)
		return
	}
	for _, w := range pol.warnings {
		p.log.Warn("policy warning", "file", file, "warning", w)
	}
	p.current.Store(pol)
	p.metrics.reloads[1].Add(1)
	p.log.Info("reloaded policy", "file", file, "rules", len(pol.rules))
}
