// mcp.go owns stdio MCP servers as tools: the source-independent server
// config, starting a session's servers in their own process groups, the MCP
// client over stdio, and the toolSpecs whose one executor is one tools/call.
// A transport failure during a call breaks the server for the rest of the
// session: "A guarded MCP transport error is treated as an ambiguous result
// and is not automatically reconnected/replayed."
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// MCP wire names. The client speaks the newest revision that still opens
// with initialize (2025-11-25; the stateless 2026-07-28 revision has no
// initialize) and accepts a server that answers with an earlier revision
// the official SDKs still support.
const (
	mcpProtocolVersion   = "2025-11-25"
	mcpMethodInitialize  = "initialize"
	mcpMethodInitialized = "notifications/initialized"
	mcpMethodToolsList   = "tools/list"
	mcpMethodToolsCall   = "tools/call"
	mcpMethodRootsList   = "roots/list"
	mcpMethodPing        = "ping"
	// "the sender SHOULD issue a cancellation notification for that
	// request" when it stops waiting: a user cancel or a timeout.
	mcpMethodCancelled   = "notifications/cancelled"
	mcpClientName        = "acpguard"
	mcpToolPrefix        = "mcp__"
	mcpToolNameSeparator = "__"
	mcpTransportStdio    = "stdio"
	// mcpKindFetch is the ACP tool kind of a read-only tool that reaches an
	// "open world" (annotations readOnlyHint and openWorldHint).
	mcpKindFetch = "fetch"
)

var mcpAcceptedVersions = []string{mcpProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// "Each MCP tool is offered as `mcp__<server>__<tool>`: characters outside
// [A-Za-z0-9_-] become `_` (model APIs accept no other characters in function
// names); a name over 64 characters becomes its first 28 + `___` + its last 32."
const (
	mcpMaxToolName   = 64
	mcpTruncHead     = 28
	mcpTruncTail     = 32
	mcpTruncSplicing = "___"
)

// "Limits: a startup timeout per server, bounded message size, a per-call
// timeout (default 60 s, from settings `mcp.callTimeoutMs`)."
const (
	mcpStartupTimeout     = 30 * time.Second
	defaultMCPCallTimeout = 60 * time.Second
	mcpMaxMessage         = 4 << 20  // bytes of one message from a server
	mcpMaxToolPages       = 100      // tools/list pages one server may answer
	mcpMaxTools           = 1000     // tools one server may list
	mcpStderrLogBudget    = 64 << 10 // bytes of one server's stderr copied to the log
	mcpStderrLogMaxRecord = 4 << 10  // bytes of stderr in one log record
)

// Stopping a server follows the MCP stdio shutdown: close its stdin, then
// SIGTERM, then SIGKILL, each after a short grace, so that the runtime still
// "exits 0 within 5 s" with several servers stopping at once.
const (
	mcpStopGrace = 500 * time.Millisecond
	// mcpWaitDelay bounds how long Wait copies stderr after the group is
	// gone: a descendant that left the group may hold the pipe.
	mcpWaitDelay = 2 * time.Second
)

// mcpServerConfig is one stdio MCP server, whichever source named it: the
// settings file's mcpServers object or a session/new mcpServers entry.
type mcpServerConfig struct {
	Name    string
	Command string
	Args    []string
	Env     []string // "NAME=value", on top of the scrubbed environment
	// CallTimeout bounds one tools/call to this server; 0 means the
	// session's default.
	CallTimeout time.Duration
}

// validate checks what the runtime relies on: a name, a command, and
// environment entries that are one NAME=value each.
func (c mcpServerConfig) validate() error {
	switch {
	case strings.TrimSpace(c.Name) == "":
		return errors.New("MCP server has no name")
	case mcpNameAmbiguous(c.Name) != nil:
		return mcpNameAmbiguous(c.Name)
	case c.Command == "":
		return fmt.Errorf("MCP server %q has no command", c.Name)
	case strings.ContainsRune(c.Command, 0):
		return fmt.Errorf("MCP server %q: command %q contains a NUL byte", c.Name, c.Command)
	case c.CallTimeout < 0:
		return fmt.Errorf("MCP server %q: negative call timeout %v", c.Name, c.CallTimeout)
	}
	for _, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("MCP server %q: argument %q contains a NUL byte", c.Name, a)
		}
	}
	for _, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("MCP server %q: environment entry %q is not NAME=value", c.Name, kv)
		}
	}
	return nil
}

// acpMCPServer is one session/new mcpServers entry. "stdio MCP server entry:
// {name, command, args[], env[{name,value}]} (no `type`, or `"type":"stdio"`:
// accept both; accept a missing env). http/sse entries carry `type`."
type acpMCPServer struct {
	Type    *string         `json:"type,omitempty"`
	Name    string          `json:"name"`
	Command string          `json:"command,omitempty"`
	Args    []string        `json:"args,omitempty"`
	Env     []acpEnvVar     `json:"env,omitempty"`
	URL     string          `json:"url,omitempty"`
	Headers json.RawMessage `json:"headers,omitempty"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

type acpEnvVar struct {
	Name  string          `json:"name"`
	Value string          `json:"value"`
	Meta  json.RawMessage `json:"_meta,omitempty"`
}

// sessionMCPServers is what session/new asked for.
type sessionMCPServers struct {
	configs []mcpServerConfig // the entries that can run
	named   map[string]bool   // every name an entry gave, run or refused
	notices []string          // why entries were refused
}

// parseACPMCPServers reads session/new's mcpServers. An entry that is not
// JSON of an ACP McpServer shape is an error (the request is invalid); a
// well-formed entry the runtime does not run (http, sse, a duplicate name, a
// missing command) is refused with a notice and the session goes on without it.
func parseACPMCPServers(entries []json.RawMessage) sessionMCPServers {
	var parsed []mcpServerConfig
	var notices []string
	named := map[string]bool{}
	for i, raw := range entries {
		var e acpMCPServer
		if err := decodeStrict(raw, &e); err != nil {
			// The schema marks these items x-deserialize-skip-invalid-items:
			// one bad entry is refused, the session still starts. Its name,
			// if it has one, still replaces a settings entry of that name.
			json.Unmarshal(raw, &e)
			if e.Name != "" {
				named[e.Name] = true
			}
			notices = append(notices, fmt.Sprintf("MCP server entry %d (%q) was refused: %v", i, e.Name, err))
			continue
		}
		named[e.Name] = true
		if e.Type != nil && *e.Type != mcpTransportStdio {
			notices = append(notices, fmt.Sprintf("%v (mcpCapabilities http and sse are false)", mcpTransportRefused(e.Name, *e.Type)))
			continue
		}
		if e.URL != "" || e.Headers != nil {
			notices = append(notices, fmt.Sprintf("MCP server %q was refused: a stdio entry carries url or headers", e.Name))
			continue
		}
		c := mcpServerConfig{Name: e.Name, Command: e.Command, Args: e.Args}
		var badEnv error
		for _, v := range e.Env {
			if v.Name == "" || strings.ContainsAny(v.Name, "=\x00") {
				badEnv = fmt.Errorf("environment variable name %q is invalid", v.Name)
			}
			c.Env = append(c.Env, v.Name+"="+v.Value)
		}
		if err := errors.Join(badEnv, c.validate()); err != nil {
			notices = append(notices, fmt.Sprintf("MCP server %q was refused: %v", e.Name, err))
			continue
		}
		parsed = append(parsed, c)
	}
	// Two entries of one name: which one the client meant is unknown, so
	// neither runs.
	count := map[string]int{}
	for _, c := range parsed {
		count[c.Name]++
	}
	var configs []mcpServerConfig
	for _, c := range parsed {
		switch n := count[c.Name]; {
		case n == 1:
			configs = append(configs, c)
		case n > 1:
			notices = append(notices, fmt.Sprintf("MCP server %q was refused: session/new names it %d times", c.Name, n))
			count[c.Name] = 0 // one notice per name
		}
	}
	return sessionMCPServers{configs: configs, named: named, notices: notices}
}

// mcpNameAmbiguous refuses a server name whose tools permission rules could
// not tell apart, whichever source named it. A rule reads the server name
// up to the first "__" (matchMCPRule), so the sanitized name must not
// contain "__": mcp__a would match a__b's tools, and no rule could name
// a__b. A trailing "_" is the same: a_'s tools are mcp__a___<tool>, which
// mcp__a matches.
func mcpNameAmbiguous(name string) error {
	sanitized := mcpSanitize(name)
	if !strings.Contains(sanitized, mcpToolNameSeparator) && !strings.HasSuffix(sanitized, "_") {
		return nil
	}
	return fmt.Errorf("MCP server name %q cannot be told apart by permission rules: its tools would be named \"mcp__%s__<tool>\" and a rule reads the server name up to the first \"__\" (with characters outside [A-Za-z0-9_-] as \"_\", the name must not contain \"__\" or end in \"_\")", name, sanitized)
}

// mcpCancelNotice tells a server the client stopped waiting for a request,
// except initialize: "The initialize request MUST NOT be cancelled".
func mcpCancelNotice(call string, id json.RawMessage) (string, any, bool) {
	if call == mcpMethodInitialize {
		return "", nil, false
	}
	return mcpMethodCancelled, map[string]any{"requestId": id, "reason": "the client stopped waiting: the call was cancelled or timed out"}, true
}

// mcpTransportRefused is why an http or sse server does not run, whichever
// source named it.
func mcpTransportRefused(name, transport string) error {
	return fmt.Errorf("MCP server %q was refused: transport %q is not supported; only stdio MCP servers are supported", name, transport)
}

// mergeMCPServers returns the servers of one session: the settings' servers,
// each replaced by the session/new entry of the same name, then the other
// session/new entries. "a session/new entry with the same name as a settings
// entry replaces it for that session." A refused entry replaces it too: the
// client asked for something else under that name.
func mergeMCPServers(settings []mcpServerConfig, session sessionMCPServers) []mcpServerConfig {
	out := make([]mcpServerConfig, 0, len(settings)+len(session.configs))
	used := make([]bool, len(session.configs))
	for _, s := range settings {
		if !session.named[s.Name] {
			out = append(out, s)
			continue
		}
		if i := slices.IndexFunc(session.configs, func(c mcpServerConfig) bool { return c.Name == s.Name }); i >= 0 {
			out, used[i] = append(out, session.configs[i]), true
		}
	}
	for i, c := range session.configs {
		if !used[i] {
			out = append(out, c)
		}
	}
	return out
}

// mcpMaxCallTimeout bounds a settings entry's timeout.
const mcpMaxCallTimeout = 24 * time.Hour

// stdioOnly refuses an entry of another transport, naming the key that
// makes it one. Qwen Code reads httpUrl as streamable HTTP and url as SSE,
// both before command, so such an entry is not a stdio server with extras;
// headers belong to those transports only.
func (e mcpServerSettings) stdioOnly(name string) (key string, err error) {
	switch {
	case e.HTTPURL != "":
		return "httpUrl", mcpTransportRefused(name, "http")
	case e.URL != "":
		return "url", mcpTransportRefused(name, "sse")
	case e.Headers != nil:
		return "headers", fmt.Errorf("MCP server %q has headers but no url or httpUrl: headers apply only to http and sse servers", name)
	}
	return "", nil
}

// mcpServersFromSettings turns the settings file's mcpServers object,
// `{"<name>": {"command", "args", "env": {k: v}, "timeout"?}}`, into server
// configurations in name order. An entry that cannot run is an error naming
// its path.
func mcpServersFromSettings(servers map[string]mcpServerSettings) ([]mcpServerConfig, error) {
	names := slices.Sorted(maps.Keys(servers))
	configs := make([]mcpServerConfig, 0, len(names))
	for _, name := range names {
		e := servers[name]
		if key, err := e.stdioOnly(name); err != nil {
			return nil, fmt.Errorf("mcpServers.%s.%s: %w", name, key, err)
		}
		c := mcpServerConfig{Name: name, Command: e.Command, Args: e.Args}
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("mcpServers.%s.env: variable name %q is invalid", name, k)
			}
			c.Env = append(c.Env, k+"="+e.Env[k])
		}
		if e.Timeout != 0 {
			if e.Timeout < 1 || int64(e.Timeout) > mcpMaxCallTimeout.Milliseconds() {
				return nil, fmt.Errorf("mcpServers.%s.timeout: %d ms is not between 1 and %d", name, e.Timeout, mcpMaxCallTimeout.Milliseconds())
			}
			c.CallTimeout = time.Duration(e.Timeout) * time.Millisecond
		}
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("mcpServers.%s: %w", name, err)
		}
		configs = append(configs, c)
	}
	return configs, nil
}

// mcpToolName is the canonical name of a server's tool.
func mcpToolName(server, tool string) string {
	n := mcpToolPrefix + mcpSanitize(server) + mcpToolNameSeparator + mcpSanitize(tool)
	if len(n) > mcpMaxToolName {
		// n is ASCII after sanitizing: byte offsets are characters.
		n = n[:mcpTruncHead] + mcpTruncSplicing + n[len(n)-mcpTruncTail:]
	}
	return n
}

// mcpSanitize replaces every character outside [A-Za-z0-9_-] with '_'; an
// invalid UTF-8 byte counts as one character.
func mcpSanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// mcpOptions is what the servers of one session share.
type mcpOptions struct {
	Cwd            string
	Env            *procEnv
	Sandbox        *sandboxSession // confines every server; nil: off
	Log            *slog.Logger
	CallTimeout    time.Duration // 0: defaultMCPCallTimeout
	StartupTimeout time.Duration // 0: mcpStartupTimeout
}

// mcpSet is the MCP servers of one session and the tools they offer.
type mcpSet struct {
	servers []*mcpServer
	// tools holds one spec per offered tool by canonical name, ready for toolEnv.Extra.
	tools map[string]*toolSpec

	mu      sync.Mutex
	notices []string // failures not yet shown to the client
}

// startMCPServers starts every configured server at once and returns when
// each has listed its tools or failed: "session/new answers only after every
// server of the session has listed its tools or failed; a failed server is
// reported (log line and an agent message) and its tools are absent."
// notices are refusals found before starting (parseACPMCPServers); the set
// keeps them, with every failure found here, until takeNotices, and logs each.
func startMCPServers(ctx context.Context, configs []mcpServerConfig, opts mcpOptions, notices []string) *mcpSet {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = defaultMCPCallTimeout
	}
	if opts.StartupTimeout <= 0 {
		opts.StartupTimeout = mcpStartupTimeout
	}
	type started struct {
		srv   *mcpServer
		tools []mcpToolDef
		err   error
	}
	results := make([]started, len(configs))
	var wg sync.WaitGroup
	for i, c := range configs {
		if err := c.validate(); err != nil {
			results[i].err = err
			continue
		}
		wg.Go(func() {
			srv, tools, err := startMCPServer(ctx, c, opts)
			results[i] = started{srv, tools, err}
		})
	}
	wg.Wait()

	set := &mcpSet{tools: map[string]*toolSpec{}}
	var offered []mcpOffer
	for i, r := range results {
		if r.err != nil {
			notices = append(notices, fmt.Sprintf("MCP server %q failed to start and its tools are not available: %v", configs[i].Name, r.err))
			continue
		}
		set.servers = append(set.servers, r.srv)
		for _, t := range r.tools {
			offered = append(offered, mcpOffer{srv: r.srv, def: t})
		}
	}
	set.notices = append(notices, addMCPTools(set, offered)...)
	for _, n := range set.notices {
		opts.Log.Warn(n)
	}
	return set
}

// mcpOffer is one tool a server listed.
type mcpOffer struct {
	srv *mcpServer
	def mcpToolDef
}

// addMCPTools gives every offered tool its canonical name and adds it to
// set; "two tools that collide after this are both refused with a clear
// error", returned as notices.
func addMCPTools(set *mcpSet, offered []mcpOffer) (notices []string) {
	byName := map[string][]mcpOffer{}
	var order []string
	for _, o := range offered {
		n := mcpToolName(o.srv.name, o.def.Name)
		if _, seen := byName[n]; !seen {
			order = append(order, n)
		}
		byName[n] = append(byName[n], o)
	}
	for _, n := range order {
		group := byName[n]
		if len(group) > 1 {
			var who []string
			for _, o := range group {
				who = append(who, fmt.Sprintf("%q of server %q", o.def.Name, o.srv.name))
			}
			notices = append(notices, fmt.Sprintf("MCP tools %s all map to the name %q; all of them are refused", strings.Join(who, ", "), n))
			continue
		}
		spec := group[0].srv.spec(n, group[0].def)
		// "Its input schema goes to the model as given."
		spec.Schema = group[0].def.InputSchema
		set.tools[n] = spec
	}
	return notices
}

// takeNotices returns the failures not yet shown to the client, once.
func (m *mcpSet) takeNotices() []string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.notices
	m.notices = nil
	return n
}

// extra returns the session's MCP tools for toolEnv.Extra.
func (m *mcpSet) extra() map[string]*toolSpec {
	if m == nil {
		return nil
	}
	return m.tools
}

// close stops every server of the set and waits until each is gone.
func (m *mcpSet) close() {
	if m == nil {
		return
	}
	var wg sync.WaitGroup
	for _, s := range m.servers {
		wg.Go(func() { s.stop(errSessionEnded) })
	}
	wg.Wait()
}

var errSessionEnded = errors.New("the session ended")

// mcpServer is one running stdio MCP server.
type mcpServer struct {
	name        string
	cwd         string
	callTimeout time.Duration
	log         *slog.Logger
	conn        *rpcConn
	cmd         *exec.Cmd
	stdin       *os.File

	// life ends when the server can no longer be used; its cause says why.
	life  context.Context
	brake context.CancelCauseFunc

	mu     sync.Mutex // guards reaped against signalling a reused group id
	reaped bool

	exited chan struct{} // the process was reaped
	done   chan struct{} // the process was reaped and the connection has ended
}

// startMCPServer starts one server, initializes it and lists its tools.
func startMCPServer(ctx context.Context, cfg mcpServerConfig, opts mcpOptions) (*mcpServer, []mcpToolDef, error) {
	if opts.Env == nil {
		return nil, nil, errors.New("no process environment configured")
	}
	for _, kv := range cfg.Env {
		if k, _, _ := strings.Cut(kv, "="); removedEnvName(k) {
			opts.Log.Warn("MCP server environment entry dropped: it names a scrubbed variable", "server", cfg.Name, "name", k)
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = opts.Env.childEnv(opts.Sandbox.env(cfg.Env...)...) // never nil: nil would inherit everything
	cmd.Dir = opts.Cwd
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.Stderr = &mcpStderr{log: opts.Log, server: cfg.Name, budget: mcpStderrLogBudget}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = mcpWaitDelay
	err = opts.Sandbox.start(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}

	s := &mcpServer{
		name:        cfg.Name,
		cwd:         opts.Cwd,
		callTimeout: cfg.CallTimeout,
		log:         opts.Log,
		cmd:         cmd,
		stdin:       inW,
		exited:      make(chan struct{}),
		done:        make(chan struct{}),
	}
	if s.callTimeout == 0 {
		s.callTimeout = opts.CallTimeout
	}
	s.life, s.brake = context.WithCancelCause(context.Background())
	s.conn = newRPCConn(outR, &mcpWire{w: inW, onUnreadable: func() {
		s.breakDown(errors.New("it sent a message that is not JSON-RPC"))
	}}, rpcConfig{MaxLine: mcpMaxMessage, OnRequest: s.answer, CancelNotice: mcpCancelNotice})
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := s.conn.serve(s.life); err != nil {
			s.breakDown(fmt.Errorf("its connection failed: %w", err))
		}
		s.breakDown(errors.New("it closed its stdout"))
		outR.Close()
	}()
	go s.reap()
	go func() {
		defer close(s.done)
		<-s.life.Done()
		s.terminate()
		<-served
	}()

	tools, err := s.handshake(ctx, opts.StartupTimeout)
	if err != nil {
		s.stop(err)
		return nil, nil, err
	}
	return s, tools, nil
}

// reap waits for the server to exit, ends what it left in its group, and
// reaps it.
func (s *mcpServer) reap() {
	pid := s.cmd.Process.Pid
	waitExited(pid)
	s.breakDown(errors.New("its process exited"))
	s.mu.Lock()
	// The leader is an unreaped zombie: its pid, the group id, cannot be reused yet.
	syscall.Kill(-pid, syscall.SIGKILL)
	s.reaped = true
	s.mu.Unlock()
	s.cmd.Wait()
	close(s.exited)
}

// terminate ends the process group: stdin closed, then SIGTERM, then SIGKILL.
func (s *mcpServer) terminate() {
	s.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-s.exited:
			return
		case <-time.After(mcpStopGrace):
		}
		s.signal(sig)
	}
	<-s.exited
}

func (s *mcpServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reaped {
		syscall.Kill(-s.cmd.Process.Pid, sig)
	}
}

// breakDown marks the server unusable for the rest of the session; the first
// reason is the one reported. The server is then stopped.
func (s *mcpServer) breakDown(reason error) {
	switch {
	case s.life.Err() != nil:
	case errors.Is(reason, errSessionEnded):
		s.log.Info("MCP server stopping", "server", s.name, "reason", reason)
	default:
		s.log.Warn("MCP server is no longer used", "server", s.name, "reason", reason)
	}
	s.brake(reason)
}

// stop breaks the server with reason and waits until it is gone.
func (s *mcpServer) stop(reason error) {
	s.breakDown(reason)
	<-s.done
}

// unusable says why the server can no longer take calls, or nil.
func (s *mcpServer) unusable() error {
	if s.life.Err() == nil {
		return nil
	}
	return context.Cause(s.life)
}

// answer serves the server's requests: roots/list with the session cwd, ping.
func (s *mcpServer) answer(_ context.Context, method string, _ json.RawMessage) (any, error) {
	switch method {
	case mcpMethodRootsList:
		uri := url.URL{Scheme: "file", Path: s.cwd}
		return map[string]any{"roots": []map[string]string{{"uri": uri.String(), "name": filepath.Base(s.cwd)}}}, nil
	case mcpMethodPing:
		return map[string]any{}, nil
	}
	return nil, methodNotFound(method)
}

// scoped returns ctx bounded by timeout and ended when the server breaks.
func (s *mcpServer) scoped(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// mcpInitializeResult is the server's initialize answer (2025-11-25
// InitializeResult). Capabilities are "not a closed set", so they stay a map.
type mcpInitializeResult struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	ServerInfo      json.RawMessage            `json:"serverInfo"`
	Instructions    string                     `json:"instructions,omitempty"`
	Meta            json.RawMessage            `json:"_meta,omitempty"`
}

// decodeMCPResult decodes an MCP result object into v, a pointer to a
// struct. Only the top level is open: a member v has no field for is dropped,
// because the schema's Result carries an index signature
// ([key: string]: unknown). The members v names are decoded with exact names
// and unknown fields refused at every depth below, and no member name may
// appear twice anywhere in raw.
func decodeMCPResult(raw []byte, v any) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return err
	}
	if members == nil {
		return errors.New("the result is null, not an object")
	}
	if err := duplicateMember(raw); err != nil {
		return err
	}
	known := []byte{'{'}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if m, ok := members[name]; ok {
			if len(known) > 1 {
				known = append(known, ',')
			}
			// The names are this file's own tags: plain ASCII, no quoting needed.
			known = append(append(append(known, '"'), name...), "\":"...)
			known = append(known, m...)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(append(known, '}')))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeInitializeResult decodes an initialize result and checks that the
// server speaks a protocol version this client accepts.
func decodeInitializeResult(raw []byte) (mcpInitializeResult, error) {
	var init mcpInitializeResult
	if err := decodeMCPResult(raw, &init); err != nil {
		return mcpInitializeResult{}, fmt.Errorf("malformed result: %w", err)
	}
	if !slices.Contains(mcpAcceptedVersions, init.ProtocolVersion) {
		return mcpInitializeResult{}, fmt.Errorf("protocol version %q is not one of %q", init.ProtocolVersion, mcpAcceptedVersions)
	}
	return init, nil
}

// handshake runs initialize, notifications/initialized and tools/list
// (following nextCursor) within the startup timeout.
func (s *mcpServer) handshake(ctx context.Context, timeout time.Duration) ([]mcpToolDef, error) {
	ctx, cancel := s.scoped(ctx, timeout)
	defer cancel()
	fail := func(step string, err error) ([]mcpToolDef, error) {
		if cause := s.unusable(); cause != nil {
			err = cause
		} else if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within the startup timeout of %v", timeout)
		}
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	raw, err := s.conn.call(ctx, mcpMethodInitialize, map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{"roots": map[string]bool{"listChanged": false}},
		"clientInfo":      map[string]string{"name": mcpClientName, "version": version},
	})
	if err != nil {
		return fail(mcpMethodInitialize, err)
	}
	init, err := decodeInitializeResult(raw)
	if err != nil {
		return fail(mcpMethodInitialize, err)
	}
	if err := s.conn.notify(mcpMethodInitialized, nil); err != nil {
		return fail(mcpMethodInitialized, err)
	}
	// tools/list goes out even without the tools capability: servers that
	// list tools without declaring it exist, and skipping them would drop
	// their tools without a word. Such a server refusing the list offers none.
	caps, declared := init.Capabilities["tools"]
	declared = declared && string(caps) != "null"
	var tools []mcpToolDef
	var cursor *string
	for page := 0; ; page++ {
		if page == mcpMaxToolPages {
			return fail(mcpMethodToolsList, fmt.Errorf("more than %d pages", mcpMaxToolPages))
		}
		params := map[string]any{}
		if cursor != nil {
			params["cursor"] = *cursor
		}
		raw, err := s.conn.call(ctx, mcpMethodToolsList, params)
		var rerr *rpcError
		if page == 0 && !declared && errors.As(err, &rerr) {
			s.log.Info("MCP server offers no tools: it declares no tools capability and answered tools/list with an error",
				"server", s.name, "code", rerr.Code, "message", rerr.Message)
			return nil, nil
		}
		if err != nil {
			return fail(mcpMethodToolsList, err)
		}
		res, err := decodeToolsList(raw)
		if err != nil {
			return fail(mcpMethodToolsList, err)
		}
		tools = append(tools, res.Tools...)
		if len(tools) > mcpMaxTools {
			return fail(mcpMethodToolsList, fmt.Errorf("more than %d tools", mcpMaxTools))
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			return tools, nil
		}
		cursor = res.NextCursor
	}
}

// mcpToolsListResult is a tools/list answer (2025-11-25 ListToolsResult).
type mcpToolsListResult struct {
	Tools      []mcpToolDef    `json:"tools"`
	NextCursor *string         `json:"nextCursor,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// mcpToolDef is one listed tool (2025-11-25 Tool).
type mcpToolDef struct {
	Name         string              `json:"name"`
	Title        string              `json:"title,omitempty"`
	Description  string              `json:"description,omitempty"`
	InputSchema  json.RawMessage     `json:"inputSchema"`
	OutputSchema json.RawMessage     `json:"outputSchema,omitempty"`
	Annotations  *mcpToolAnnotations `json:"annotations,omitempty"`
	Execution    json.RawMessage     `json:"execution,omitempty"`
	Icons        json.RawMessage     `json:"icons,omitempty"`
	Meta         json.RawMessage     `json:"_meta,omitempty"`
}

// mcpToolAnnotations are the server's hints about a tool.
type mcpToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// decodeToolsList decodes and checks one tools/list result.
func decodeToolsList(raw []byte) (mcpToolsListResult, error) {
	var res mcpToolsListResult
	if err := decodeMCPResult(raw, &res); err != nil {
		return mcpToolsListResult{}, fmt.Errorf("malformed result: %w", err)
	}
	if res.Tools == nil {
		return mcpToolsListResult{}, errors.New("malformed result: no tools array")
	}
	for i, t := range res.Tools {
		if t.Name == "" {
			return mcpToolsListResult{}, fmt.Errorf("malformed result: tool %d has no name", i)
		}
		if len(t.InputSchema) == 0 || t.InputSchema[0] != '{' {
			return mcpToolsListResult{}, fmt.Errorf("malformed result: tool %q: inputSchema is not a JSON object", t.Name)
		}
	}
	return res, nil
}

// spec is the toolSpec of one listed tool under its canonical name. Its
// arguments are checked only as a JSON object (the server validates its own
// schema) and are not normalized; a broken server refuses the call in
// normalize, before any guard request.
func (s *mcpServer) spec(canonical string, def mcpToolDef) *toolSpec {
	readOnly := def.Annotations != nil && def.Annotations.ReadOnlyHint != nil && *def.Annotations.ReadOnlyHint
	kind := kindOther
	if readOnly {
		kind = kindRead
		if a := def.Annotations; a.OpenWorldHint != nil && *a.OpenWorldHint {
			kind = mcpKindFetch
		}
	}
	display := def.Title
	if display == "" && def.Annotations != nil {
		display = def.Annotations.Title
	}
	if display == "" {
		display = def.Name
	}
	title := fmt.Sprintf("%s (MCP server %s)", display, s.name)
	tool := def.Name
	return &toolSpec{
		Name:        canonical,
		Kind:        kind,
		Description: def.Description,
		ReadOnly:    readOnly,
		title:       func(map[string]any) string { return title },
		normalize: func(_ *toolEnv, args map[string]any) (map[string]any, error) {
			if err := s.unusable(); err != nil {
				return nil, s.refusal(err)
			}
			return args, nil
		},
		exec: func(ctx context.Context, _ *toolEnv, args map[string]any) toolResult {
			return s.callTool(ctx, tool, args)
		},
	}
}

// refusal is the error of a call to a server that can no longer be used.
func (s *mcpServer) refusal(cause error) error {
	return fmt.Errorf("MCP server %q is unavailable for the rest of this session (%v); the call was not sent", s.name, cause)
}

// callTool sends exactly one tools/call and never resends it. A transport
// failure (exit, closed pipe, malformed reply, timeout) leaves the outcome
// unknown: the server is broken for the rest of the session.
func (s *mcpServer) callTool(ctx context.Context, tool string, args map[string]any) toolResult {
	if err := s.unusable(); err != nil {
		return failed(errTypeExecutionFailed, "%v", s.refusal(err))
	}
	cctx, cancel := s.scoped(ctx, s.callTimeout)
	defer cancel()
	raw, err := s.conn.call(cctx, mcpMethodToolsCall, map[string]any{"name": tool, "arguments": args})
	var rerr *rpcError
	switch {
	case err == nil:
		res, derr := decodeCallResult(raw)
		if derr == nil {
			return res
		}
		err = derr
	case errors.As(err, &rerr):
		// The server answered: the transport worked and it says the call failed.
		return failed(errTypeExecutionFailed, "MCP server %q answered tools/call %q with error %d: %s", s.name, tool, rerr.Code, rerr.Message)
	case ctx.Err() != nil:
		return toolResult{Status: statusCancelled,
			Output: fmt.Sprintf("MCP tools/call %q to server %q was cancelled while running; its outcome is unknown", tool, s.name)}
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("no answer within %v", s.callTimeout)
	}
	if cause := s.unusable(); cause != nil {
		err = cause
	}
	s.breakDown(fmt.Errorf("tools/call %q failed: %w", tool, err))
	return failed(errTypeExecutionFailed, "MCP server %q failed during tools/call %q (%v); the outcome is unknown and the call was not retried", s.name, tool, err)
}

// mcpCallResult is a tools/call answer (2025-11-25 CallToolResult).
type mcpCallResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           *bool             `json:"isError,omitempty"`
	Meta              json.RawMessage   `json:"_meta,omitempty"`
}

// mcpContent is any 2025-11-25 ContentBlock: text, image, audio,
// resource_link or resource.
type mcpContent struct {
	Type        string          `json:"type"`
	Text        *string         `json:"text,omitempty"`
	Data        *string         `json:"data,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	URI         string          `json:"uri,omitempty"`
	Name        string          `json:"name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Size        *json.Number    `json:"size,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	Resource    *mcpResource    `json:"resource,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// mcpResource is the contents of an embedded resource.
type mcpResource struct {
	URI      string          `json:"uri"`
	MimeType string          `json:"mimeType,omitempty"`
	Text     *string         `json:"text,omitempty"`
	Blob     *string         `json:"blob,omitempty"`
	Meta     json.RawMessage `json:"_meta,omitempty"`
}

// decodeCallResult turns a tools/call result into the tool's result: the
// content's text is the output, isError is a failure, and the content and
// structured content as given are the raw output.
func decodeCallResult(raw []byte) (toolResult, error) {
	var res mcpCallResult
	if err := decodeMCPResult(raw, &res); err != nil {
		return toolResult{}, fmt.Errorf("malformed tools/call result: %w", err)
	}
	if res.Content == nil {
		return toolResult{}, errors.New("malformed tools/call result: no content array")
	}
	out := &limitedBuffer{max: maxToolOutput}
	for i, b := range res.Content {
		var c mcpContent
		if err := decodeStrict(b, &c); err != nil {
			return toolResult{}, fmt.Errorf("malformed tools/call result: content %d: %w", i, err)
		}
		if i > 0 {
			out.WriteString("\n")
		}
		switch {
		case c.Type == "text" && c.Text != nil:
			out.WriteString(*c.Text)
		case (c.Type == "image" || c.Type == "audio") && c.Data != nil:
			fmt.Fprintf(out, "[%s %s, %d bytes of base64]", c.Type, c.MimeType, len(*c.Data))
		case c.Type == "resource_link" && c.URI != "":
			fmt.Fprintf(out, "[resource_link %s]", c.URI)
		case c.Type == "resource" && c.Resource != nil && c.Resource.Text != nil:
			out.WriteString(*c.Resource.Text)
		case c.Type == "resource" && c.Resource != nil && c.Resource.Blob != nil:
			fmt.Fprintf(out, "[resource %s, %d bytes of base64]", c.Resource.URI, len(*c.Resource.Blob))
		default:
			return toolResult{}, fmt.Errorf("malformed tools/call result: content %d of type %q lacks its fields", i, c.Type)
		}
	}
	rawOut := map[string]any{"content": res.Content}
	if res.StructuredContent != nil {
		rawOut["structuredContent"] = res.StructuredContent
	}
	if res.IsError != nil && *res.IsError {
		rawOut["isError"] = true
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, Output: out.String(), RawOutput: rawOut}, nil
	}
	return completed(out.String(), rawOut), nil
}

// mcpWire is the server's stdin as the JSON-RPC connection writes to it. An
// error answer with a null id means the server sent a line that is not a
// readable JSON-RPC message (or is too long): the server is then broken,
// since a reply it meant could be lost in that line.
type mcpWire struct {
	w            *os.File
	onUnreadable func()
}

func (m *mcpWire) Write(p []byte) (int, error) {
	var msg struct {
		ID    json.RawMessage `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	// These are our own bytes, one encoded message per Write.
	if json.Unmarshal(p, &msg) == nil && msg.Error != nil && bytes.Equal(msg.ID, []byte(rpcNullID)) {
		m.onUnreadable()
	}
	return m.w.Write(p)
}

// mcpStderr copies a server's stderr into the log, up to a budget.
type mcpStderr struct {
	log    *slog.Logger
	server string
	budget int
}

func (w *mcpStderr) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && w.budget > 0 {
		chunk := p[:min(len(p), mcpStderrLogMaxRecord, w.budget)]
		p = p[len(chunk):]
		w.budget -= len(chunk)
		w.log.Info("MCP server stderr", "server", w.server, "text", strings.TrimRight(string(chunk), "\n"))
		if w.budget == 0 {
			w.log.Warn("MCP server stderr: the rest is dropped", "server", w.server, "budget", mcpStderrLogBudget)
		}
	}
	return n, nil
}
