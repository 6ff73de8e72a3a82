// mcp_parent.go owns the remote MCP servers of serve's child: serve holds
// their header values, so the child lists a server's tools and makes each
// call through serve over its private channel (serve_mcp.go); serve runs a
// call only when it matches the decision it has just allowed.
package main

import (
	"context"
	"errors"
	"fmt"
)

// mcpParent is the channel to serve of one remote server.
type mcpParent struct {
	conn      *rpcConn
	sessionID string
}

// mcpParentList is methodMCPList's result.
type mcpParentList struct {
	Tools []mcpToolDef `json:"tools"`
}

// mcpParentResult is methodMCPCall's result: the call's outcome as serve's
// client read it.
type mcpParentResult struct {
	Status    string `json:"status"`
	Output    string `json:"output"`
	RawOutput any    `json:"rawOutput,omitempty"`
	ErrorType string `json:"errorType,omitempty"`
}

// startParentMCPServer asks serve for a remote server's tools.
func startParentMCPServer(ctx context.Context, cfg mcpServerConfig, opts mcpOptions) (*mcpServer, []mcpToolDef, error) {
	s := &mcpServer{name: cfg.Name, cwd: opts.Cwd, trust: cfg.Trust, log: opts.Log, done: make(chan struct{}),
		parent: &mcpParent{conn: opts.Parent, sessionID: opts.SessionID}}
	s.life, s.brake = context.WithCancelCause(context.Background())
	context.AfterFunc(s.life, func() { close(s.done) })
	startup := mcpDefaultRemoteDiscovery
	if cfg.StartupTimeout > 0 {
		startup = cfg.StartupTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, startup+mcpPostTimeout)
	defer cancel()
	raw, err := opts.Parent.call(cctx, methodMCPList, map[string]string{"sessionId": opts.SessionID, "server": cfg.Name})
	var list mcpParentList
	if err == nil {
		err = decodeStrict(raw, &list)
	}
	if err != nil {
		s.stop(err)
		return nil, nil, fmt.Errorf("serve listed no tools: %w", err)
	}
	return s, list.Tools, nil
}

// parentCall asks serve for one call; serve's answer is the call's outcome. A
// channel failure leaves the outcome unknown: the server is broken.
func (s *mcpServer) parentCall(ctx context.Context, env *toolEnv, tool string, args map[string]any) toolResult {
	if env == nil {
		return failed(errTypeExecutionFailed, "MCP server %q: the call has no session", s.name)
	}
	raw, err := s.parent.conn.call(ctx, methodMCPCall, map[string]any{"sessionId": s.parent.sessionID, "promptId": env.PromptID,
		"server": s.name, "tool": tool, "arguments": args})
	var res mcpParentResult
	var rerr *rpcError
	switch {
	case errors.As(err, &rerr):
		return failed(errTypeExecutionFailed, "%s", rerr.Message)
	case err == nil:
		if err = decodeStrict(raw, &res); err == nil && res.Status != "" {
			return toolResult{Status: res.Status, Output: res.Output, RawOutput: res.RawOutput, ErrorType: res.ErrorType}
		}
	case ctx.Err() != nil:
		return toolResult{Status: statusCancelled,
			Output: fmt.Sprintf("MCP tools/call %q to server %q was cancelled while running; its outcome is unknown", tool, s.name)}
	}
	s.breakDown(fmt.Errorf("tools/call %q through serve failed: %v", tool, err))
	return failed(errTypeExecutionFailed, "MCP server %q failed during tools/call %q through serve (%v); the outcome is unknown and the call was not retried", s.name, tool, err)
}

// mcpParentAnswer is a parent call's result as serve sends it.
func mcpParentAnswer(r toolResult) mcpParentResult {
	return mcpParentResult{Status: r.Status, Output: r.Output, RawOutput: r.RawOutput, ErrorType: r.ErrorType}
}
