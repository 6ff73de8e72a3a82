// run.go owns "acpguard run": the guarded agent in the current directory,
// started in this process and reached only as its ACP client, over a socket
// pair (initialize, session/new or session/load, session/prompt, the
// session/update notifications), as an editor reaches "acpguard acp". So the
// one execution boundary stays the only way a tool runs: run never runs one.
// The headless face is Qwen Code's `qwen PROMPT`: one prompt, the output of
// run_output.go, the budgets of run_budget.go, the exit statuses; its flags
// are config_run.go's. The terminal face is run_terminal.go's.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// exitInterrupted is the exit status of a run ended by SIGINT or SIGTERM,
// as a shell reports one ended by SIGINT (and as qwen exits).
const exitInterrupted = 130

// maxRunPromptBytes bounds the prompt run sends, standard input's text
// included, as serve bounds a host request: it must fit in one ACP message
// whatever its escaping.
const maxRunPromptBytes = 1 << 20

// runOptions are the validated options of "acpguard run", as config_run.go
// parses them.
type runOptions struct {
	// ACP are the options of the agent run starts, built as acp's.
	ACP acpOptions
	// Prompt is the prompt words or --prompt; standard input's text, when
	// it is not a terminal, comes before it.
	Prompt      string
	Format      string // runFormatText, runFormatJSON or runFormatStreamJSON
	FormatGiven bool   // -o on the command line
	Partial     bool   // --include-partial-messages
	// ApprovalMode is the session's mode, set with session/set_mode; ""
	// keeps the settings' tools.approvalMode.
	ApprovalMode string
	Limits       runLimits
	// At most one of these: the id of a new session, the saved session to
	// go on with, or the latest saved session of the current directory.
	SessionID string
	Resume    string
	Continue  bool
}

// runPrompt runs one run: its terminal face when stdin and stdout are a
// terminal and no -o was given, else headless.
func runPrompt(ctx context.Context, sys *system, opts runOptions) error {
	if opts.interactive(sys) {
		return runTerminal(ctx, sys, opts)
	}
	return runHeadless(ctx, sys, opts)
}

// interactive reports whether run shows its terminal face.
func (o runOptions) interactive(sys *system) bool {
	out, ok := sys.stdout.(*os.File)
	return !o.FormatGiven && ok && isTerminal(sys.stdin) && isTerminal(out)
}

// exitStatusError ends a command with a status of its own: run's aborts
// (53, 55) after their JSON line on stderr, an interrupt (130). main prints
// err when it is set.
type exitStatusError struct {
	code int
	err  error
}

func (e *exitStatusError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// runCancelWait bounds how long an aborted or interrupted run waits for
// its prompt to end after session/cancel (its running call killed, the
// rest reported cancelled) before it ends the agent itself.
const runCancelWait = 5 * time.Second

// runHeadless runs the prompt of opts without asking anybody anything: a
// call that needs approval is declined, and the output goes to stdout in
// opts.Format.
func runHeadless(ctx context.Context, sys *system, opts runOptions) error {
	start := time.Now()
	prompt, err := runPromptText(sys.stdin, opts.Prompt)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the current directory, the session's cwd: %w", err)
	}
	budget := newRunBudget(opts.Limits, start)
	agentOpts := opts.ACP
	agentOpts.DeclinePermissions = true
	agentOpts.WrapModel = budget.wrap

	// An interrupt or the wall time cancels the prompt through ACP first,
	// so that the agent ends its calls and reports them; the agent's own
	// context ends only if that takes too long.
	agentCtx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgent()
	transcript := newRunTranscript(opts.Format, opts.Partial, sys.stdout, sys.stderr, start)
	c, err := startRunAgent(agentCtx, sys, agentOpts, transcript)
	if err != nil {
		return err
	}
	abort := make(chan struct{})
	abortOnce := sync.OnceFunc(func() { close(abort) })
	if opts.Limits.MaxWallTime > 0 {
		t := time.AfterFunc(opts.Limits.MaxWallTime, func() {
			budget.wallTimeOver(time.Now())
			abortOnce()
		})
		defer t.Stop()
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			abortOnce()
		case <-abort:
		case <-done:
			return
		}
		if !c.cancelPrompt() {
			stopAgent() // no prompt yet: nothing to end first
			return
		}
		select {
		case <-time.After(runCancelWait):
			stopAgent()
		case <-done:
		}
	}()
	stop, runErr := c.converse(agentCtx, opts, cwd, prompt, transcript)
	agentErr := c.close()
	var failed *runPromptError
	switch abort := budget.abort(); {
	case abort != nil:
		abort.report(sys.stderr)
		return &exitStatusError{code: abort.Code}
	case ctx.Err() != nil:
		return &exitStatusError{code: exitInterrupted, err: errors.New("run interrupted")}
	case errors.Is(runErr, errAgentStart):
		// The agent could not start: its own error says why, and its type
		// the exit status (a usage error is 2).
		if agentErr != nil {
			return agentErr
		}
		return runErr
	case errors.As(runErr, &failed):
		// The prompt failed (the model service): the output says so too.
		if err := transcript.finish(failed.msg); err != nil {
			return err
		}
		return runErr
	case runErr != nil:
		return runErr
	case stop == stopMaxTurnRequests:
		// The settings' model.maxSessionTurns ended the prompt.
		a := turnLimitAbort()
		a.report(sys.stderr)
		return &exitStatusError{code: a.Code}
	case stop != stopEndTurn:
		return fmt.Errorf("prompt: ended %q", stop)
	}
	if err := transcript.finish(""); err != nil {
		return err
	}
	return agentErr
}

// runPromptError is the error answer of the prompt itself.
type runPromptError struct{ msg string }

func (e *runPromptError) Error() string { return "prompt: " + e.msg }

// runPromptText is the prompt: standard input's text, when it is not a
// terminal, then words. An empty prompt is a usage error.
func runPromptText(stdin io.Reader, words string) (string, error) {
	var piped string
	if stdin != nil && !isTerminal(stdin) {
		b, err := io.ReadAll(io.LimitReader(stdin, maxRunPromptBytes+1))
		if err != nil {
			return "", fmt.Errorf("read the prompt from standard input: %w", err)
		}
		piped = string(b)
	}
	text := words
	if strings.TrimSpace(piped) != "" {
		text = strings.TrimRight(piped, "\n")
		if words != "" {
			text += "\n\n" + words
		}
	}
	switch {
	case len(text) > maxRunPromptBytes:
		return "", usagef("the prompt: more than %d bytes (standard input's text and the words together)", maxRunPromptBytes)
	case strings.TrimSpace(text) == "":
		return "", usagef(`no prompt given: pass it as words, with --prompt, or on standard input; run "acpguard run --help"`)
	}
	return text, nil
}

// errAgentStart marks a run whose agent did not answer initialize: it could
// not start, and its own error says why.
var errAgentStart = errors.New("the agent did not start")

// runClient is run's side of the in-process agent: the ACP connection to it
// over a socket pair.
type runClient struct {
	conn      *rpcConn
	end       *os.File
	stop      context.CancelFunc // ends the connection
	served    chan error
	agentDone chan error

	// face reads the prompt's updates, those of its session only, once
	// sessionID is set (before the prompt is sent), and answers the
	// agent's permission requests.
	face      runFace
	mu        sync.Mutex
	sessionID string
}

// runFace is what a run shows its prompts on and asks about calls: the
// headless transcript (run_output.go), which asks nobody, or the terminal
// (run_terminal.go), which asks the person at it.
type runFace interface {
	// update reads one session/update's update member, in the order sent.
	update(raw json.RawMessage)
	// askPermission answers one session/request_permission; it returns
	// once ctx ends (the agent withdrew the request).
	askPermission(ctx context.Context, params json.RawMessage) (any, error)
}

// startRunAgent starts the agent of opts in this process on one end of a
// socket pair (its stdin and stdout, as runAgent takes them) and connects
// to the other end, face showing what it does. The agent ends when the
// connection or ctx does.
func startRunAgent(ctx context.Context, sys *system, opts acpOptions, face runFace) (*runClient, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start the agent: socketpair: %w", err)
	}
	for _, fd := range fds {
		// Non-blocking: both ends are read through the runtime's poller.
		if err := syscall.SetNonblock(fd, true); err != nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
			return nil, fmt.Errorf("start the agent: socketpair: %w", err)
		}
	}
	agentEnd := os.NewFile(uintptr(fds[0]), "acpguard-run-agent")
	c := &runClient{end: os.NewFile(uintptr(fds[1]), "acpguard-run-client"), served: make(chan error, 1), agentDone: make(chan error, 1), face: face}
	agentSys := &system{env: sys.env, stdin: agentEnd, stdout: agentEnd, stderr: sys.stderr}
	go func() {
		err := runAgent(ctx, agentSys, opts)
		agentEnd.Close()
		c.agentDone <- err
	}()
	c.conn = newRPCConn(c.end, c.end, rpcConfig{MaxLine: acpMaxLine, OnRequest: c.request, OnNotify: c.notify, CancelNotice: acpCancelNotice})
	connCtx, stop := context.WithCancel(ctx)
	c.stop = stop
	go func() { c.served <- c.conn.serve(connCtx) }()
	return c, nil
}

// close ends the connection and waits for the agent, which ends what its
// sessions left running and saves them; it returns the agent's error.
func (c *runClient) close() error {
	c.stop()
	<-c.served
	return <-c.agentDone
}

// request answers the agent's requests: a permission request is the
// face's to answer.
func (c *runClient) request(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == methodRequestPermission {
		return c.face.askPermission(ctx, params)
	}
	return nil, methodNotFound(method)
}

// askPermission rejects: a headless run asks nobody. The agent declines a
// call that needs approval itself; a request that comes all the same is
// rejected.
func (*runTranscript) askPermission(context.Context, json.RawMessage) (any, error) {
	return runPermissionAnswer(optionCancel), nil
}

// runPermissionAnswer is the answer to a permission request that selects
// the option optionID.
func runPermissionAnswer(optionID string) any {
	return map[string]any{"outcome": map[string]string{"outcome": outcomeSelected, "optionId": optionID}}
}

// notify hands the prompt's session/update notifications to the face, in
// the order they were sent. Those before the prompt (a loaded session's
// replay) were shown when they happened.
func (c *runClient) notify(method string, params json.RawMessage) {
	if method != methodSessionUpdate {
		return
	}
	c.mu.Lock()
	sid := c.sessionID
	c.mu.Unlock()
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if sid == "" || json.Unmarshal(params, &p) != nil || p.SessionID != sid {
		return
	}
	c.face.update(p.Update)
}

// converse opens the session of opts in cwd and sends it the prompt,
// with the transcript t ready for its updates; it returns the prompt's
// stop reason.
func (c *runClient) converse(ctx context.Context, opts runOptions, cwd, prompt string, t *runTranscript) (string, error) {
	sid, mode, err := c.open(ctx, opts, cwd)
	if err != nil {
		return "", err
	}
	t.init = runInitOf(opts, sid, cwd, mode)
	c.watch(sid)
	return c.prompt(ctx, sid, prompt)
}

// open initializes the agent and opens the session of opts in cwd, in its
// approval mode; it returns the session's id and mode.
func (c *runClient) open(ctx context.Context, opts runOptions, cwd string) (sid, mode string, err error) {
	if _, err := c.conn.call(ctx, methodInitialize, map[string]any{
		"protocolVersion":    acpProtocolVersion,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "acpguard run", "version": version},
	}); err != nil {
		return "", "", fmt.Errorf("%w: %v", errAgentStart, err)
	}
	sid, mode, err = c.openSession(ctx, opts, cwd)
	if err != nil {
		return "", "", err
	}
	if opts.ApprovalMode != "" && opts.ApprovalMode != mode {
		if _, err := c.conn.call(ctx, methodSessionSetMode, map[string]string{"sessionId": sid, "modeId": opts.ApprovalMode}); err != nil {
			return "", "", fmt.Errorf("set the approval mode %q: %s", opts.ApprovalMode, rpcMessage(err))
		}
		mode = opts.ApprovalMode
	}
	return sid, mode, nil
}

// watch hands the updates of session sid to the face from now on.
func (c *runClient) watch(sid string) {
	c.mu.Lock()
	c.sessionID = sid
	c.mu.Unlock()
}

// prompt sends one prompt to session sid and returns its stop reason.
func (c *runClient) prompt(ctx context.Context, sid, prompt string) (string, error) {
	raw, err := c.conn.call(ctx, methodSessionPrompt, map[string]any{
		"sessionId": sid,
		"prompt":    []contentBlock{{Type: "text", Text: prompt}},
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", &runPromptError{rpcMessage(err)}
	}
	var res struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", fmt.Errorf("prompt: unreadable answer: %v", err)
	}
	return res.StopReason, nil
}

// cancelPrompt sends session/cancel for the prompt; false when there is
// none yet.
func (c *runClient) cancelPrompt() bool {
	c.mu.Lock()
	sid := c.sessionID
	c.mu.Unlock()
	return sid != "" && c.conn.notify(methodSessionCancel, map[string]string{"sessionId": sid}) == nil
}

// openSession opens run's session: a new one (under --session-id's id),
// the one --resume names, or with --continue the latest saved one of cwd
// (a new one when there is none). It returns its id and approval mode.
func (c *runClient) openSession(ctx context.Context, opts runOptions, cwd string) (id, mode string, err error) {
	load := opts.Resume
	if opts.Continue {
		if load, err = latestSession(opts.ACP.StateDir, cwd); err != nil {
			return "", "", err
		}
	}
	var res struct {
		SessionID string `json:"sessionId"`
		Modes     struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	var raw json.RawMessage
	if load != "" {
		raw, err = c.conn.call(ctx, methodSessionLoad, map[string]any{"sessionId": load, "cwd": cwd, "mcpServers": []any{}})
		res.SessionID = load
	} else {
		params := map[string]any{"cwd": cwd, "mcpServers": []any{}}
		if sessionSaved(opts.ACP.StateDir, opts.SessionID) {
			// A new session under its id would overwrite it.
			return "", "", usagef("--session-id %q: a saved session has this id; go on with it with --resume %s", opts.SessionID, opts.SessionID)
		}
		if opts.SessionID != "" {
			params["_meta"] = map[string]string{metaSessionID: opts.SessionID}
		}
		raw, err = c.conn.call(ctx, methodSessionNew, params)
	}
	if err != nil {
		return "", "", fmt.Errorf("open the session: %s", rpcMessage(err))
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.SessionID == "" {
		return "", "", fmt.Errorf("open the session: unreadable answer %s", raw)
	}
	return res.SessionID, res.Modes.CurrentModeID, nil
}

// sessionSaved reports whether dir holds a saved session of id.
func sessionSaved(dir, id string) bool {
	if dir == "" || id == "" {
		return false
	}
	h, err := openHistoryStore(dir)
	if err != nil {
		return false // the agent saves nothing there either
	}
	_, err = os.Lstat(h.path(id))
	return err == nil
}

// latestSession is the id of the session of cwd saved last in dir, "" when
// none is.
func latestSession(dir, cwd string) (string, error) {
	if dir == "" {
		return "", usagef("--continue: sessions are not saved (--%s %s); resume one with --resume ID", flagStateDir, stateDirOff)
	}
	h, err := openHistoryStore(dir)
	if err != nil {
		return "", fmt.Errorf("--continue: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("--continue: %v", err)
	}
	type saved struct {
		id  string
		mod time.Time
	}
	var all []saved
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), historyFileSuffix)
		if !ok || !e.Type().IsRegular() || !validSessionID(id) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			all = append(all, saved{id, fi.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b saved) int { return b.mod.Compare(a.mod) })
	for _, s := range all {
		if f, err := h.load(s.id); err == nil && f.Cwd == cwd {
			return s.id, nil
		}
	}
	return "", nil
}

// rpcMessage is an error response's message, or err's text.
func rpcMessage(err error) string {
	var re *rpcError
	if errors.As(err, &re) {
		return re.Message
	}
	return err.Error()
}

// runInitOf is the system init message of a run's session.
func runInitOf(opts runOptions, sessionID, cwd, mode string) runInit {
	st := opts.ACP.Settings
	tools := []string{}
	for _, n := range builtinToolNames() {
		if st == nil || !st.toolDisabled(n) {
			tools = append(tools, n)
		}
	}
	servers := []runMCPServer{}
	if st != nil {
		for _, n := range slices.Sorted(maps.Keys(st.MCPServers)) {
			servers = append(servers, runMCPServer{Name: n})
		}
	}
	model := modelScripted
	if opts.ACP.Model == modelOpenAI {
		model = opts.ACP.OpenAI.Model
	}
	return runInit{SessionID: sessionID, Cwd: cwd, Tools: tools, MCPServers: servers, Model: model,
		PermissionMode: mode, AcpguardVersion: version, Agents: []json.RawMessage{}}
}
