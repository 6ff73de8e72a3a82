// mcp_client.go owns the MCP client over stdio: one server in its own
// process group, the handshake, tools/call, and the strict reading of answers.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"
)

var errSessionEnded = errors.New("the session ended")

// mcpServer is one running MCP server: a stdio process, or a remote server
// (remote set, group and stdin nil).
type mcpServer struct {
	name        string
	cwd         string
	callTimeout time.Duration
	trust       bool // its tools skip the default permission prompt
	log         *slog.Logger
	conn        *rpcConn
	group       *procGroup
	stdin       *os.File
	remote      *mcpRemote
	parent      *mcpParent

	// life ends when the server can no longer be used; its cause says why.
	life  context.Context
	brake context.CancelCauseFunc

	done chan struct{} // the process was reaped and the connection has ended
}

// startMCPServer starts one server, initializes it and lists its tools.
func startMCPServer(ctx context.Context, cfg mcpServerConfig, opts mcpOptions) (*mcpServer, []mcpToolDef, error) {
	if opts.Env == nil {
		return nil, nil, errors.New("no process environment configured")
	}
	if cfg.remote() && opts.Parent != nil {
		return startParentMCPServer(ctx, cfg, opts)
	}
	if cfg.remote() {
		return startRemoteMCPServer(ctx, cfg, opts)
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
	if cfg.Cwd != "" {
		cmd.Dir = cfg.Cwd
		if !filepath.IsAbs(cfg.Cwd) {
			cmd.Dir = filepath.Join(opts.Cwd, cfg.Cwd)
		}
		if fi, err := os.Stat(cmd.Dir); err != nil || !fi.IsDir() {
			return nil, nil, fmt.Errorf("cwd %q is not a directory", cmd.Dir)
		}
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.Stderr = &mcpStderr{log: opts.Log, server: cfg.Name, budget: mcpStderrLogBudget}
	cmd.WaitDelay = procDrainGrace
	s := &mcpServer{
		name:        cfg.Name,
		cwd:         opts.Cwd,
		callTimeout: cfg.CallTimeout,
		trust:       cfg.Trust,
		log:         opts.Log,
		stdin:       inW,
		done:        make(chan struct{}),
	}
	s.life, s.brake = context.WithCancelCause(context.Background())
	s.group, err = startGroup(cmd, opts.Sandbox, func() { s.breakDown(errors.New("its process exited")) })
	inR.Close()
	outW.Close()
	if err != nil {
		s.brake(err)
		inW.Close()
		outR.Close()
		return nil, nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}
	if s.callTimeout == 0 {
		s.callTimeout = opts.CallTimeout
	}
	s.conn = newRPCConn(outR, &mcpWire{w: inW, onUnreadable: func() {
		s.breakDown(errors.New("it sent a message that is not JSON-RPC"))
	}}, rpcConfig{MaxLine: mcpMaxMessage, OnRequest: s.answer, CancelNotice: mcpCancelNotice})
	s.serveConn(errors.New("it closed its stdout"), func() { outR.Close() })

	startup := opts.StartupTimeout
	if cfg.StartupTimeout > 0 {
		startup = cfg.StartupTimeout
	}
	tools, err := s.handshake(ctx, startup)
	if err != nil {
		s.stop(err)
		return nil, nil, err
	}
	return s, tools, nil
}

// serveConn serves the connection until it ends (then the server is
// broken with ended) or the server breaks; done closes once the server is
// stopped and the connection has ended.
func (s *mcpServer) serveConn(ended error, after func()) {
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := s.conn.serve(s.life); err != nil {
			s.breakDown(fmt.Errorf("its connection failed: %w", err))
		}
		s.breakDown(ended)
		after()
	}()
	go func() {
		defer close(s.done)
		<-s.life.Done()
		s.terminate()
		<-served
	}()
}

// terminate ends the process group: stdin closed, then SIGTERM, then SIGKILL.
func (s *mcpServer) terminate() {
	if s.remote != nil {
		s.remote.close()
		return
	}
	s.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-s.group.exited:
			return
		case <-time.After(mcpStopGrace):
		}
		s.group.signal(sig)
	}
	<-s.group.exited
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
// InitializeResult). Capabilities may grow, so they stay a map.
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
// ([key: string]: unknown). The members v names are decoded strictly
// (decodeStrict), and no member name may appear twice anywhere in raw.
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
	known := map[string]json.RawMessage{}
	for _, f := range jsonFields(reflect.TypeOf(v).Elem()) {
		if m, ok := members[f.name]; ok {
			known[f.name] = m
		}
	}
	b, _ := json.Marshal(known) // members of valid JSON: cannot fail
	return decodeStrict(b, v)
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
	if s.remote != nil {
		s.remote.initialized(init.ProtocolVersion)
	}
	if err := s.conn.notify(mcpMethodInitialized, nil); err != nil {
		return fail(mcpMethodInitialized, err)
	}
	if s.remote != nil {
		s.remote.listen()
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
	w            io.Writer
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
