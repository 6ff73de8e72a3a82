// mcp.go owns stdio MCP servers as tools: the source-independent server
// config, starting a session's servers, and their tools as toolSpecs. A
// transport failure during a call breaks the server for the rest of the
// session: it is an ambiguous result, never reconnected or replayed.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	// mcpMethodCancelled is sent, as MCP asks, by a caller that stops
	// waiting: a user cancel or a timeout.
	mcpMethodCancelled   = "notifications/cancelled"
	mcpClientName        = "acpguard"
	mcpToolPrefix        = "mcp__"
	mcpToolNameSeparator = "__"
	mcpTransportStdio    = "stdio"
	// mcpTransportHTTP is Streamable HTTP (settings' httpUrl, session/new's
	// type "http"); mcpTransportSSE is the older HTTP+SSE transport
	// (settings' url, session/new's type "sse") (mcp_http.go, mcp_sse.go).
	mcpTransportHTTP = "http"
	mcpTransportSSE  = "sse"
	// mcpKindFetch is the ACP tool kind of a read-only tool that reaches an
	// "open world" (annotations readOnlyHint and openWorldHint).
	mcpKindFetch = "fetch"
)

var mcpAcceptedVersions = []string{mcpProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// An MCP tool is offered as mcp__<server>__<tool>, other characters than
// [A-Za-z0-9_-] as "_" (model APIs accept no others in function names). A
// longer name is shortened in the tool part only, never inside
// mcp__<server>__, so that every rule on the server still matches it: the
// tool part keeps its head and ends in "_" and a hash of the tool's name,
// which keeps two long tools of one server apart. A server name that leaves
// less than mcpMinToolPart characters for the tool is refused at start
// (Qwen Code cuts the whole name instead, server part included; DESIGN.md §6).
const (
	mcpMaxToolName = 64
	mcpToolHashLen = 8                      // hex digits of the hash of a shortened tool's name
	mcpMinToolPart = 8 + 1 + mcpToolHashLen // head, "_", hash
	// mcpMaxServerName is the longest sanitized server name that leaves
	// mcpMinToolPart characters for the tool.
	mcpMaxServerName = mcpMaxToolName - len(mcpToolPrefix) - len(mcpToolNameSeparator) - mcpMinToolPart
)

// MCP limits (DESIGN.md §6).
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
// ends in time (DESIGN.md §9) with several servers stopping at once.
const mcpStopGrace = 500 * time.Millisecond

// mcpServerConfig is one MCP server, whichever source named it: the
// settings file's mcpServers object or a session/new mcpServers entry.
// Transport is mcpTransportStdio ("" too), mcpTransportHTTP or
// mcpTransportSSE; a stdio server has Command, Args and Env, a remote one
// URL and Headers.
type mcpServerConfig struct {
	Name      string
	Transport string
	Command   string
	Args      []string
	Env       []string // "NAME=value", on top of the scrubbed environment
	URL       string
	Headers   []mcpHeader
	// CallTimeout bounds one tools/call to this server; 0 means the
	// session's default.
	CallTimeout time.Duration
	// From the settings file (settings.go): Cwd is where the server starts,
	// relative to the session's directory, "" for it; Trust lets its tools
	// run without the permission prompt (the guard still decides);
	// IncludeTools and ExcludeTools filter the tools it lists;
	// StartupTimeout bounds its start and tools/list, 0 for the default.
	Cwd            string
	Trust          bool
	IncludeTools   []string
	ExcludeTools   []string
	StartupTimeout time.Duration
}

// offersTool applies includeTools and excludeTools to a listed tool: an
// entry is the tool's name or "name(" and more; exclude wins.
func (c mcpServerConfig) offersTool(tool string) bool {
	named := func(list []string) bool {
		for _, e := range list {
			if e == tool || strings.HasPrefix(e, tool+"(") {
				return true
			}
		}
		return false
	}
	if named(c.ExcludeTools) {
		return false
	}
	return len(c.IncludeTools) == 0 || named(c.IncludeTools)
}

// remote reports whether the server is reached over HTTP.
func (c mcpServerConfig) remote() bool {
	return c.Transport == mcpTransportHTTP || c.Transport == mcpTransportSSE
}

// validate checks what the runtime relies on: a name, a command, and
// environment entries that are one NAME=value each; for a remote server an
// http or https URL and headers that can be sent.
func (c mcpServerConfig) validate() error {
	switch {
	case strings.TrimSpace(c.Name) == "":
		return errors.New("MCP server has no name")
	case mcpNameAmbiguous(c.Name) != nil:
		return mcpNameAmbiguous(c.Name)
	case mcpServerNameTooLong(c.Name) != nil:
		return mcpServerNameTooLong(c.Name)
	case c.CallTimeout < 0:
		return fmt.Errorf("MCP server %q: negative call timeout %v", c.Name, c.CallTimeout)
	case c.remote():
		return c.validateRemote()
	case c.Transport != "" && c.Transport != mcpTransportStdio:
		return fmt.Errorf("MCP server %q: transport %q is not one of %q", c.Name, c.Transport, []string{mcpTransportStdio, mcpTransportHTTP, mcpTransportSSE})
	case c.URL != "" || c.Headers != nil:
		return fmt.Errorf("MCP server %q: a stdio server has no url or headers", c.Name)
	case c.Command == "":
		return fmt.Errorf("MCP server %q has no command", c.Name)
	case strings.ContainsRune(c.Command, 0):
		return fmt.Errorf("MCP server %q: command %q contains a NUL byte", c.Name, c.Command)
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

// acpMCPServer is one session/new mcpServers entry: a stdio entry has no
// type or type "stdio", and env may be missing; http and sse entries name
// their type.
type acpMCPServer struct {
	Type    *string         `json:"type,omitempty"`
	Name    string          `json:"name"`
	Command string          `json:"command,omitempty"`
	Args    []string        `json:"args,omitempty"`
	Env     []acpEnvVar     `json:"env,omitempty"`
	URL     string          `json:"url,omitempty"`
	Headers []acpHeader     `json:"headers,omitempty"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

// acpHeader is one ACP HttpHeader. Its value is sent as given: a client's
// value is never expanded from the agent's environment, which would let
// the client send the agent's variables to an address it chose.
type acpHeader struct {
	Name  string          `json:"name"`
	Value string          `json:"value"`
	Meta  json.RawMessage `json:"_meta,omitempty"`
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

// parseACPMCPServers reads session/new's mcpServers: stdio, http and sse
// entries. An entry that is not JSON of an ACP McpServer shape is an error
// (the request is invalid); a well-formed entry the runtime does not run (an
// unknown type, a duplicate name, a missing command or url) is refused with
// a notice and the session goes on without it.
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
			c := mcpServerConfig{Name: e.Name, Transport: *e.Type, URL: e.URL, Headers: []mcpHeader{}}
			for _, h := range e.Headers {
				c.Headers = append(c.Headers, mcpHeader{Name: h.Name, Value: h.Value, Literal: true})
			}
			var err error
			switch {
			case !c.remote():
				err = mcpTransportRefused(e.Name, *e.Type)
			case e.Command != "" || e.Args != nil || e.Env != nil:
				err = fmt.Errorf("MCP server %q was refused: an %s entry carries command, args or env", e.Name, *e.Type)
			default:
				if err = c.validate(); err != nil {
					err = fmt.Errorf("MCP server %q was refused: %w", e.Name, err)
				}
			}
			if err != nil {
				notices = append(notices, err.Error())
				continue
			}
			parsed = append(parsed, c)
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
// except initialize, which MCP forbids cancelling.
func mcpCancelNotice(call string, id json.RawMessage) (string, any, bool) {
	if call == mcpMethodInitialize {
		return "", nil, false
	}
	return mcpMethodCancelled, map[string]any{"requestId": id, "reason": "the client stopped waiting: the call was cancelled or timed out"}, true
}

// mcpTransportRefused is why a server of an unknown transport does not run.
func mcpTransportRefused(name, transport string) error {
	return fmt.Errorf("MCP server %q was refused: transport %q is not supported; use %q, %q or %q", name, transport, mcpTransportStdio, mcpTransportHTTP, mcpTransportSSE)
}

// mergeMCPServers returns the servers of one session: the settings' servers,
// each replaced by the session/new entry of the same name, then the other
// session/new entries. A refused entry replaces it too: the
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

// resolveMCPCwds makes the relative cwd of a settings server absolute
// against base(name), the workspace of the file that named it; with base
// "" it stays relative, to the session's directory (startMCPServer).
func resolveMCPCwds(configs []mcpServerConfig, base func(name string) string) {
	for i, c := range configs {
		if c.Cwd == "" || filepath.IsAbs(c.Cwd) {
			continue
		}
		if dir := base(c.Name); dir != "" {
			configs[i].Cwd = filepath.Join(dir, c.Cwd)
		}
	}
}

// mcpToolName is the canonical name of a server's tool. Its server part is
// never cut (mcpServerNameTooLong refuses a server it would not fit).
func mcpToolName(server, tool string) string {
	prefix := mcpToolPrefix + mcpSanitize(server) + mcpToolNameSeparator
	part := mcpSanitize(tool)
	if len(prefix)+len(part) <= mcpMaxToolName {
		return prefix + part
	}
	// part is ASCII after sanitizing: byte offsets are characters.
	head := max(mcpMaxToolName-len(prefix)-1-mcpToolHashLen, 0)
	sum := sha256.Sum256([]byte(tool))
	return prefix + part[:head] + "_" + hex.EncodeToString(sum[:])[:mcpToolHashLen]
}

// mcpServerNameTooLong refuses a server name that leaves too little room
// for its tools' names within mcpMaxToolName characters.
func mcpServerNameTooLong(name string) error {
	n := len(mcpSanitize(name))
	if n <= mcpMaxServerName {
		return nil
	}
	return fmt.Errorf("MCP server name %q is too long: it has %d characters, at most %d leave room for a tool in a name \"mcp__<server>__<tool>\" of at most %d characters; give the server a shorter name", name, n, mcpMaxServerName, mcpMaxToolName)
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
	// Parent is serve's channel in a serve child: its remote servers are
	// reached through serve (mcp_parent.go) as SessionID; nil: directly.
	Parent    *rpcConn
	SessionID string
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
// each has listed its tools or failed; a failed server is reported (a log
// line and an agent message) and offers no tool.
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
	// The variables remote servers' headers name leave every child
	// environment before any server of the set starts.
	opts.Env.hideSecrets(mcpHeaderSecrets(configs)...)
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
			if !configs[i].offersTool(t.Name) {
				continue
			}
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
// set; tools that collide after this are all refused, with a notice each.
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
		// The model gets the input schema as the server gave it.
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
		Trusted:     s.trust,
		title:       func(map[string]any) string { return title },
		normalize: func(_ *toolEnv, args map[string]any) (map[string]any, error) {
			if err := s.unusable(); err != nil {
				return nil, s.refusal(err)
			}
			return args, nil
		},
		exec: func(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
			if s.parent != nil {
				return s.parentCall(ctx, env, tool, args)
			}
			return s.callTool(ctx, tool, args)
		},
	}
}
