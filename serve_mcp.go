// serve_mcp.go owns serve's end of its children's remote MCP servers. A
// child never holds a remote server's header values (DESIGN.md §4): it asks
// serve over its private channel to list a server's tools (methodMCPList)
// and to make each call (methodMCPCall, mcp_parent.go). serve reads the
// servers from the session's workspace settings itself, with the trust rule
// of the children (DESIGN.md §10), expands the headers from its own
// environment, and runs a call only for the running prompt of a session the
// child owns, and only when it matches a decision the bridge has just
// allowed for that prompt: the tool's name and its canonical arguments,
// each decision used once.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// maxMCPAllowed bounds the allowed decisions one session keeps for calls
// its child has not made yet: the oldest goes first.
const maxMCPAllowed = 64

// serveMCP is one session's remote servers, as serve reaches them.
type serveMCP struct {
	mu      sync.Mutex
	servers map[string]*mcpServer
	// offers maps each server's tools by their canonical names to the
	// names the server listed: only tools its settings offer and whose
	// canonical name no other of its tools shares, as the child names
	// them (addMCPTools). A call names a tool in it or is refused.
	offers  map[string]map[string]string
	allowed []serveMCPAllowed
	closed  bool
}

// serveMCPAllowed is one decision the bridge allowed for an MCP tool.
type serveMCPAllowed struct {
	promptID, tool string
	args           []byte // canonical
}

// setMCP finds each session's remote MCP servers and http hooks: from its
// workspace's settings when serve knows where they are, else from serve's
// own.
func (d *daemon) setMCP(opts serveOptions) {
	d.hookStart = opts.Settings
	if opts.Settings != nil {
		d.mcpStart, _ = mcpServersFromSettings(opts.Settings.MCPServers)
	}
	if src := opts.SessionSettings; src.Sources.Lookup != nil {
		d.mcpSettings = newSettingsCache(src.Sources, src.Options, func(l *settingsLoad) (*sessionSettings, error) {
			servers, err := mcpServersFromSettings(l.Settings.MCPServers)
			if err != nil {
				return nil, err
			}
			// What a workspace read after the children started names is
			// hidden at once; the children are told by the reader, out of
			// the cache's lock (workspaceSettings, serve_secrets.go).
			envOf(d.sys).hideSecrets(append(mcpHeaderSecrets(servers), l.Settings.hookSecretNames()...)...)
			d.untold.Store(true)
			return &sessionSettings{Load: l, Settings: l.Settings, MCP: servers,
				MCPCallTimeout: time.Duration(l.Settings.MCP.CallTimeoutMs) * time.Millisecond}, nil
		})
		// The variables the workspaces' headers name, and those their http
		// hooks may read, are held before any child starts (DESIGN.md §4).
		for _, ws := range opts.Workspaces {
			if ss, _, err := d.mcpSettings.get(ws); err == nil {
				envOf(d.sys).hideSecrets(mcpHeaderSecrets(ss.MCP)...)
				envOf(d.sys).hideSecrets(ss.Settings.hookSecretNames()...)
			}
		}
	}
}

// mcpServerOf returns the remote server name of the settings of ws.
func (d *daemon) mcpServerOf(ws, name string) (mcpServerConfig, time.Duration, error) {
	configs, timeout := d.mcpStart, time.Duration(0)
	if d.mcpSettings != nil {
		ss, err := d.workspaceSettings(ws)
		if err != nil {
			return mcpServerConfig{}, 0, err
		}
		configs, timeout = ss.MCP, ss.MCPCallTimeout
	}
	i := slices.IndexFunc(configs, func(c mcpServerConfig) bool { return c.Name == name && c.remote() })
	if i < 0 {
		return mcpServerConfig{}, 0, fmt.Errorf("the settings of workspace %q name no remote MCP server %q", ws, name)
	}
	return configs[i], timeout, nil
}

// mcpCanonical is a call's arguments in the guard's canonical form
// (canonicalArgumentBytes) whatever their encoding, so that the
// arguments of the call and of the decision compare as values. They are
// read strictly (checkWireArguments: valid UTF-8, no member twice, as the
// provider judged them) and numbers kept as written, so that two calls
// compare equal only when they are the same call.
func mcpCanonical(raw []byte) ([]byte, error) {
	_, canon, err := mcpArguments(raw)
	return canon, err
}

// mcpArguments is raw read strictly as mcpCanonical reads it, and its
// canonical form.
func mcpArguments(raw []byte) (map[string]any, []byte, error) {
	checked, err := checkWireArguments(raw)
	if err != nil {
		return nil, nil, err
	}
	args, err := decodeObject(checked)
	if err != nil {
		return nil, nil, err
	}
	canon, err := canonicalArgumentBytes(args)
	return args, canon, err
}

// allowMCP records a decision the bridge allowed, when it is for an MCP
// tool: the call it allows may then run once through serve.
func (s *hostSession) allowMCP(promptID, tool string, args json.RawMessage) {
	if len(tool) <= len(mcpToolPrefix) || tool[:len(mcpToolPrefix)] != mcpToolPrefix {
		return
	}
	canon, err := mcpCanonical(args)
	if err != nil {
		return
	}
	m := s.remoteMCP()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.allowed) == maxMCPAllowed {
		m.allowed = m.allowed[1:]
	}
	m.allowed = append(m.allowed, serveMCPAllowed{promptID: promptID, tool: tool, args: canon})
}

// takeAllowed removes and reports the decision that allows this call.
func (m *serveMCP) takeAllowed(promptID, tool string, args []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.allowed, func(a serveMCPAllowed) bool {
		return a.promptID == promptID && a.tool == tool && bytes.Equal(a.args, args)
	})
	if i < 0 {
		return false
	}
	m.allowed = slices.Delete(m.allowed, i, i+1)
	return true
}

// serveMCPPending is a session in creation: its child lists its remote
// servers during session/new, before serve knows the session.
type serveMCPPending struct {
	ch  *acpChannel
	ws  string
	mcp *serveMCP
}

// expectMCP opens the remote servers of session id, in creation on ch.
func (d *daemon) expectMCP(ch *acpChannel, id, ws string) *serveMCP {
	m := &serveMCP{servers: map[string]*mcpServer{}}
	d.mcpMu.Lock()
	defer d.mcpMu.Unlock()
	if d.mcpPending == nil {
		d.mcpPending = map[string]serveMCPPending{}
	}
	d.mcpPending[id] = serveMCPPending{ch: ch, ws: ws, mcp: m}
	return m
}

// adoptMCP ends the creation of session id: the session holds its servers.
func (d *daemon) adoptMCP(id string) {
	d.mcpMu.Lock()
	defer d.mcpMu.Unlock()
	if p, ok := d.mcpPending[id]; ok {
		p.ch = nil
		d.mcpPending[id] = p
	}
}

// dropMCP forgets the creation of session id; its servers stop unless the
// session was created.
func (d *daemon) dropMCP(id string, m *serveMCP) {
	d.mcpMu.Lock()
	p, ok := d.mcpPending[id]
	if ok && p.mcp == m {
		delete(d.mcpPending, id)
	}
	d.mcpMu.Unlock()
	if ok && p.mcp == m && p.ch != nil {
		(&hostSession{mcp: m}).closeMCP()
	}
}

// mcpSessionOf returns the workspace and remote servers of session id as
// ch may use them: a session ch owns, or one ch is creating.
func (d *daemon) mcpSessionOf(ch *acpChannel, id string) (string, *serveMCP) {
	if s := ch.session(id); s != nil {
		return s.ws, s.remoteMCP()
	}
	d.mcpMu.Lock()
	defer d.mcpMu.Unlock()
	if p, ok := d.mcpPending[id]; ok && p.ch == ch {
		return p.ws, p.mcp
	}
	return "", nil
}

// remoteMCP returns the session's remote servers, made on first use.
func (s *hostSession) remoteMCP() *serveMCP {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mcp == nil {
		s.mcp = &serveMCP{servers: map[string]*mcpServer{}}
	}
	return s.mcp
}

// closeMCP stops the session's remote servers.
func (s *hostSession) closeMCP() {
	s.mu.Lock()
	m := s.mcp
	s.mu.Unlock()
	if m == nil {
		return
	}
	m.mu.Lock()
	m.closed = true
	servers := m.servers
	m.servers = map[string]*mcpServer{}
	m.mu.Unlock()
	for _, srv := range servers {
		go srv.stop(errSessionEnded)
	}
}

// mcpList answers methodMCPList: serve connects to the server and lists
// its tools, once per session and server.
func (d *daemon) mcpList(ctx context.Context, ch *acpChannel, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Server    string `json:"server"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("invalid %s params: %v", methodMCPList, err)}
	}
	ws, m := d.mcpSessionOf(ch, p.SessionID)
	if m == nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("unknown session %q", p.SessionID)}
	}
	cfg, timeout, err := d.mcpServerOf(ws, p.Server)
	if err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: err.Error()}
	}
	d.hideLearned(mcpHeaderSecrets([]mcpServerConfig{cfg})...)
	env := envOf(d.sys)
	srv, tools, err := startMCPServer(ctx, cfg, mcpOptions{Cwd: ws, Env: env, Log: d.obs.logger().With("session", p.SessionID), CallTimeout: cmp.Or(timeout, defaultMCPCallTimeout), StartupTimeout: cfg.StartupTimeout})
	if err != nil {
		return nil, &rpcError{Code: rpcInternalError, Message: err.Error()}
	}
	m.mu.Lock()
	old, closed := m.servers[p.Server], m.closed
	if !closed {
		m.servers[p.Server] = srv
		if m.offers == nil {
			m.offers = map[string]map[string]string{}
		}
		m.offers[p.Server] = mcpOffers(cfg, tools)
	}
	m.mu.Unlock()
	if old != nil {
		go old.stop(errSessionEnded)
	}
	if closed {
		srv.stop(errSessionEnded)
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("session %q ended", p.SessionID)}
	}
	return mcpParentList{Tools: tools}, nil
}

// mcpOffers is the tools of one server a call may name, by canonical
// name: those cfg offers, less every name two of them share.
func mcpOffers(cfg mcpServerConfig, tools []mcpToolDef) map[string]string {
	offers := map[string]string{}
	shared := map[string]bool{}
	for _, t := range tools {
		if !cfg.offersTool(t.Name) {
			continue
		}
		n := mcpToolName(cfg.Name, t.Name)
		if _, seen := offers[n]; seen {
			shared[n] = true
		}
		offers[n] = t.Name
	}
	for n := range shared {
		delete(offers, n)
	}
	return offers
}

// mcpCall answers methodMCPCall: one call, only for the running prompt of
// a session this child owns and only as the bridge allowed it.
func (d *daemon) mcpCall(ctx context.Context, ch *acpChannel, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		PromptID  string          `json:"promptId"`
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("invalid %s params: %v", methodMCPCall, err)}
	}
	s := ch.session(p.SessionID)
	if s == nil || s.activeJob(p.PromptID) == nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("MCP tools/call %q refused by serve: session %q has no running prompt %q", p.Tool, p.SessionID, p.PromptID)}
	}
	args, canon, err := mcpArguments(p.Arguments)
	m := s.remoteMCP()
	name := mcpToolName(p.Server, p.Tool)
	m.mu.Lock()
	srv, listed := m.servers[p.Server], m.offers[p.Server][name]
	m.mu.Unlock()
	if srv != nil && listed != p.Tool {
		d.obs.logger().Warn("MCP call refused: the server did not offer the tool", "session", p.SessionID, "prompt", p.PromptID, "tool", name)
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("MCP tools/call %q refused by serve: server %q offered no tool %q under that name; it was not sent", name, p.Server, p.Tool)}
	}
	if err != nil || srv == nil || !m.takeAllowed(p.PromptID, name, canon) {
		d.obs.logger().Warn("MCP call refused: no allowed decision matches it", "session", p.SessionID, "prompt", p.PromptID, "tool", name)
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("MCP tools/call %q refused by serve: no decision allowed this call with these arguments; it was not sent", name)}
	}
	return mcpParentAnswer(srv.callTool(ctx, p.Tool, args)), nil
}
