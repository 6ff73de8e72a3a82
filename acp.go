// acp.go owns the ACP agent ("acpguard acp"): sessions, the prompt loop,
// session/update emission, and the managed-child handshake with serve.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Approval modes as session/new offers them; perms.go gives them meaning.
var approvalModes = []struct{ id, name, description string }{
	{modePlan, "Plan", "Read-only tools only"},
	{modeDefault, "Default", "Ask before edits and shell commands"},
	{modeAutoEdit, "Auto Edit", "Run edits, ask before shell commands"},
	{modeYolo, "YOLO", "Run every tool without asking"},
}

// permissionOption is one option of a session/request_permission.
type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// permissionOptions are the options offered for one call, as Qwen Code
// offers them: the always option first (edits are allowed all at once, a
// shell command or other tool by its rule), then once, then reject.
func permissionOptions(spec *toolSpec, args map[string]any) []permissionOption {
	always := permissionOption{optionProceedAlways, "Allow All Edits", kindAllowAlways}
	if spec.Kind != kindEdit {
		rule := spec.Name
		if spec.Name == toolShell {
			cmd, _ := args["command"].(string)
			rule = "Shell(" + cmd + ")"
		}
		always = permissionOption{optionProceedAlwaysProject, "Always Allow in project: " + rule, kindAllowAlways}
	}
	return []permissionOption{
		always,
		{optionProceedOnce, "Allow", kindAllowOnce},
		{optionCancel, "Reject", kindRejectOnce},
	}
}

// agent is one ACP connection and the sessions created on it.
type agent struct {
	conn  *rpcConn
	env   *procEnv
	log   *slog.Logger
	model model
	// modelNameFixed: OPENAI_MODEL names the model of every session;
	// otherwise each session's workspace's model.name (sessionModel).
	modelNameFixed bool

	// Exactly one of these guards the tools, or neither (the plain path).
	managed bool // serve's required-v1 child: serve decides
	// backgroundReports: the client asked for methodSessionBackground
	// (serve does). Atomic: the report is sent from under locks.
	backgroundReports atomic.Bool
	provider          *providerClient // standalone required mode

	settings *settings // the start's settings; a session has its own (session.settings)
	// settingsRequired logs the settings files read at info (required mode).
	settingsRequired bool
	sandbox          sandboxConfig // confines what tools, hooks and MCP servers start
	sandboxABI       int           // the kernel's Landlock ABI, reported in initialize
	// tempParent holds the sessions' temp directories; in a managed child
	// it is the directory serve made for this child alone, which shutdown
	// removes once empty, in case serve is gone before it reaps the child.
	tempParent string
	allowSlash []string // slash commands serve opened for a managed child
	home       string   // for ~/ in path rules
	// mcpSettings are the settings file's MCP servers, started for every
	// session; mcpCallTimeout bounds one tools/call (0: the default).
	// With settingsCache nil, settings and these govern every session.
	mcpSettings    []mcpServerConfig
	mcpCallTimeout time.Duration
	// settingsCache loads each session's settings from its cwd's workspace
	// at session/new (DESIGN.md §10).
	settingsCache *settingsCache
	// permTimeout cancels a permission request the client leaves
	// unanswered (0: wait), as serve's --permission-response-timeout-ms.
	permTimeout time.Duration
	// history saves each session for session/load; nil: not saved
	// (acp_history.go).
	history *historyStore
	// systemPrompt replaces the built-in system prompt when its Text is
	// set (agent_prompt.go).
	systemPrompt systemPromptSource
	// declineAsks and wrapModel are acpOptions.DeclinePermissions and
	// acpOptions.WrapModel.
	declineAsks bool
	wrapModel   func(model) model

	mu          sync.Mutex
	initialized bool
	sessions    map[string]*session
	warned      map[string]bool // the settings warnings logged (warnSettingsOnce)
}

// session is one ACP session: its own cwd, history and tool processes.
type session struct {
	id         string
	cwd        string
	background *processSet
	workspace  *workspace      // its cwd, resolved and opened once; closed when it ends
	mcp        *mcpSet         // its MCP servers and their tools
	sandbox    *sandboxSession // confines its tools, hooks and MCP servers; nil: off
	settings   *settings       // from its workspace (agent.settingsFor); never changed
	model      model           // the agent's, under its workspace's model.name (agent.sessionModel)

	mu      sync.Mutex
	mode    string
	cancel  context.CancelFunc // of the running prompt, nil when idle
	history []message
	// system is the system prompt every model call sends first, fixed at
	// session/new; "" for the scripted model, which reads none.
	system string
	always map[string]bool // calls the user allowed for the whole session
	// Prompts are numbered as they are read; a session/cancel cancels the
	// running prompt and every prompt read before it, even one whose
	// handler has not started yet.
	promptsRead   int64
	cancelledUpTo int64
	// commandsSent: the session's available_commands_update went out, at
	// the start of its first prompt (DESIGN.md §7).
	commandsSent bool
	// What the session's file holds (acp_history.go): the saved messages,
	// how much of history they cover, the updates of calls not yet saved.
	record    sessionRecord
	saved     []historyMessage
	savedUpTo int
	// savedEncoded is the encoding of each saved message as the file holds
	// it: a save encodes only what is new.
	savedEncoded [][]byte
}

// promptSeqKey carries a prompt's number (session.promptsRead) in its context.
type promptSeqKey struct{}

// cancelledLocked reports whether a session/cancel read after the prompt
// numbered seq has cancelled it. s.mu is held.
func (s *session) cancelledLocked(seq int64) bool { return seq != 0 && seq <= s.cancelledUpTo }

// acpOptions are the validated options of "acpguard acp", as config.go
// parses them from its flags, environment and settings.
type acpOptions struct {
	Guard              guardConfig
	GuardModeGiven     bool   // --external-tool-guard-mode on the command line (warnUnguarded)
	Model              string // modelScripted or modelOpenAI
	OpenAI             openAIConfig
	ModelNameFixed     bool      // OPENAI_MODEL named every session's model, not each workspace's model.name
	Settings           *settings // the merged settings files (settings_files.go), or the defaults
	SettingsLoad       *settingsLoad
	AllowSlashCommands []string   // for a managed child: the slash commands serve opened
	LogJSON            bool       // --log-format json; text otherwise
	LogLevel           slog.Level // --log-level
	Sandbox            sandboxConfig
	// SessionSandbox resolves a session's sandbox from its settings load:
	// the flags over its workspace's tools.sandbox* keys; nil: Sandbox.
	SessionSandbox func(*settingsLoad) (sandboxConfig, error)
	// PermissionTimeout cancels a session/request_permission the client has
	// not answered by then, as serve's flag of the same name; 0 waits.
	PermissionTimeout time.Duration
	// StateDir is where sessions are saved for session/load, "" nowhere;
	// StateDirGiven says --state-dir named it (acp_history.go).
	StateDir      string
	StateDirGiven bool

	// SettingsSources and SettingsOptions find a session's settings files
	// at session/new, from its cwd (DESIGN.md §10); DisabledSlashCommands
	// are --disabled-slash-commands, added to every session's list.
	SettingsSources       settingsSources
	SettingsOptions       settingsLoadOptions
	DisabledSlashCommands []string
	// SystemPrompt replaces the built-in system prompt (agent_prompt.go):
	// --system-prompt-file, else QWEN_SYSTEM_MD.
	SystemPrompt systemPromptSource
	// SessionSystemPrompt finds a session's replacement prompt from its
	// settings; nil: SystemPrompt for every session.
	SessionSystemPrompt func(*settings) (systemPromptSource, error)

	// DeclinePermissions: the client answers no permission request (run
	// without a terminal), so a call that needs one is declined unasked.
	DeclinePermissions bool
	// WrapModel, when set, wraps each session's model: run's budgets see
	// every model call and what it proposes (run_budget.go).
	WrapModel func(model) model
}

// modelOpenAI is --model openai: an OpenAI-compatible chat completions
// service (model_openai.go) the agent calls itself.
const modelOpenAI = "openai"

// startAgent builds the agent of opts and everything it needs before it
// reads its client: the model, the guard, the sandbox. An error here is one
// the client is told (refuseInitialize).
func startAgent(ctx context.Context, sys *system, opts acpOptions) (*agent, sandboxInForce, error) {
	a, err := newACPAgent(sys, opts)
	if err != nil {
		return nil, sandboxInForce{}, err
	}
	// Each agent names the settings files it read: a child may read
	// another workspace's than serve (DESIGN.md §10). The start
	// directory's are read now, so its sessions find them cached.
	logDotEnv(a.log, opts.SettingsLoad, a.settingsRequired)
	if _, err := a.settingsFor(opts.SettingsOptions.Workspace, ""); err != nil {
		logSettingsFiles(a.log, opts.SettingsLoad, a.settingsRequired)
		if sys.env.privateGuard == "" {
			a.warnSettingsOnce(a.log, opts.Settings)
		}
	}
	if opts.Model == modelOpenAI {
		if a.model, err = newOpenAIModel(opts.OpenAI); err != nil {
			return nil, sandboxInForce{}, &usageError{err}
		}
		a.modelNameFixed = opts.ModelNameFixed
	}
	// Every acp runs tools as its own user, and its start environment may hold
	// the provider token or the model key.
	if err := hideEnviron(a.log); err != nil {
		return nil, sandboxInForce{}, err
	}
	if err := a.takeGuard(ctx, sys.env, opts); err != nil {
		return nil, sandboxInForce{}, err
	}
	inForce, err := a.enforceSandbox(sys.env, opts)
	if err != nil {
		return nil, sandboxInForce{}, err
	}
	// The runtime's Go work is short steps between waits on its client, its
	// parent and its tools. On one scheduler slot the answer to a guard
	// request wakes the waiting prompt on the thread that read it; with two,
	// it wakes a second thread first, which costs about 40 µs per guarded
	// call on a 2-core VM, and the load run (8 sessions per child) lost no
	// throughput. An operator's GOMAXPROCS still wins.
	if sys.env.lookup("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// A child that takes decisions or model output from its parent takes
	// them only over the socket pair serve made (channel.go).
	if a.managed || opts.Model == modelParent {
		if err := checkParentChannel(); err != nil {
			return nil, sandboxInForce{}, &usageError{err}
		}
	}
	return a, inForce, nil
}

// runAgent runs the agent of opts on sys's stdin and stdout until its
// client or ctx ends the connection.
func runAgent(ctx context.Context, sys *system, opts acpOptions) error {
	a, inForce, err := startAgent(ctx, sys, opts)
	if err != nil {
		// A child of serve (its marker, or a model over the channel)
		// answers nothing: serve reads its exit.
		return refuseInitialize(sys, err, opts.Model == modelParent)
	}
	if a.provider != nil {
		// A provider restarted under the agent's own uid listens on a new
		// socket: SIGHUP meets it, as serve's does.
		var wg sync.WaitGroup
		hupCtx, cancel := context.WithCancel(ctx)
		stop := a.provider.handshakeOnSIGHUP(hupCtx, a.log, &wg)
		defer func() { stop(); cancel(); wg.Wait() }()
	}
	a.conn = a.newConn(sys)
	if opts.Model == modelParent {
		a.model = newParentModel(a.conn)
	}
	a.log.Debug("acp runtime ready", "managed", a.managed, "gomaxprocs", runtime.GOMAXPROCS(0), inForce.logAttr())
	err = a.conn.serve(ctx)
	a.shutdown()
	// A child of serve leads its session: what its tools left in it goes too.
	endOwnSession()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("acp connection: %w", err)
	}
	return nil
}

// refusedInitializeWait bounds how long an acp that cannot start waits for
// its client's initialize, to answer it with the reason: an editor shows a
// JSON-RPC error; a connection that just closes shows nothing of why.
const refusedInitializeWait = 10 * time.Second

// refuseInitialize answers the client's initialize, when one arrives within
// refusedInitializeWait, with a JSON-RPC internal error (-32603) whose
// message is err, then returns err for the exit status and stderr. It waits
// for no terminal (a person reads stderr) and answers nothing to serve (a
// managed child, by its marker or when managed says so, whose parent reads
// its exit).
func refuseInitialize(sys *system, err error, managed bool) error {
	if managed || sys.env.privateGuard != "" || isTerminal(sys.stdin) {
		return err
	}
	id := make(chan json.RawMessage, 1)
	go func() {
		r := bufio.NewReaderSize(io.LimitReader(sys.stdin, acpMaxLine), 64<<10)
		for {
			line, rerr := r.ReadBytes('\n')
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &req) == nil && req.Method == methodInitialize && len(req.ID) > 0 {
				id <- req.ID
				return
			}
			if rerr != nil {
				close(id)
				return
			}
		}
	}()
	t := time.NewTimer(refusedInitializeWait)
	defer t.Stop()
	select {
	case reqID, ok := <-id:
		if ok {
			type rpcErr struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			answer, _ := json.Marshal(struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   rpcErr          `json:"error"`
			}{"2.0", reqID, rpcErr{rpcInternalError, err.Error()}})
			sys.stdout.Write(append(answer, '\n'))
		}
	case <-t.C:
	}
	return err
}

// newACPAgent builds the agent of opts, with the scripted model, the
// settings it was started with, the MCP servers they name and the cache
// that derives each session's settings from its workspace's files.
func newACPAgent(sys *system, opts acpOptions) (*agent, error) {
	a := &agent{
		env:        sys.env,
		log:        newLogger(sys.stderr, opts.LogJSON, opts.LogLevel),
		model:      scriptedModel{},
		sessions:   make(map[string]*session),
		settings:   opts.Settings,
		sandbox:    opts.Sandbox,
		tempParent: opts.Sandbox.TempParent,
		allowSlash: opts.AllowSlashCommands,
		home:       sys.env.lookup("HOME"),

		permTimeout:  opts.PermissionTimeout,
		systemPrompt: opts.SystemPrompt,
		declineAsks:  opts.DeclinePermissions,
		wrapModel:    opts.WrapModel,
	}
	if sandboxTestOverride != nil {
		// What the test confines with, in the places serve chose.
		o := *sandboxTestOverride
		o.Hide, o.TempParent = a.sandbox.Hide, a.sandbox.TempParent
		a.sandbox = o
	}
	var err error
	if a.mcpSettings, err = mcpServersFromSettings(opts.Settings.MCPServers); err != nil {
		return nil, usagef("settings: %v", err)
	}
	// The variables the start settings' headers name are secrets from the
	// start: no child of any session receives them.
	sys.env.hideSecrets(mcpHeaderSecrets(a.mcpSettings)...)
	a.mcpCallTimeout = time.Duration(opts.Settings.MCP.CallTimeoutMs) * time.Millisecond
	a.settingsRequired = opts.Guard.required() || sys.env.privateGuard != ""
	a.settingsCache = newSettingsCache(opts.SettingsSources, opts.SettingsOptions, func(l *settingsLoad) (*sessionSettings, error) {
		ss, err := deriveSessionSettings(l, opts.DisabledSlashCommands)
		if err != nil {
			return nil, err
		}
		// The sandbox and the prompt are the session's workspace's, not
		// the start directory's: a child of serve starts in "/".
		if opts.SessionSandbox != nil {
			cfg, err := opts.SessionSandbox(l)
			if err != nil {
				return nil, err
			}
			ss.Sandbox = &cfg
		}
		if opts.SessionSystemPrompt != nil {
			sp, err := opts.SessionSystemPrompt(l.Settings)
			if err != nil {
				return nil, err
			}
			ss.SystemPrompt = &sp
		}
		return ss, nil
	})
	return a, nil
}

// takeGuard sets where a's decisions come from: a managed child (env's
// private guard marker) takes them from its parent, required mode from the
// provider of opts once its handshake passed, and otherwise none.
func (a *agent) takeGuard(ctx context.Context, env *procEnv, opts acpOptions) error {
	switch marker := env.privateGuard; {
	case marker != "":
		// A managed child trusts its parent for decisions; any other
		// marker refuses to start.
		if marker != privateGuardMarker {
			return usagef("%s %q: want %q", envPrivateGuard, marker, privateGuardMarker)
		}
		if opts.Guard.required() {
			return usagef("a managed child takes its guard from its parent, not --external-tool-guard-mode=required")
		}
		a.managed = true
	case opts.Guard.required():
		a.provider = newProviderClient(opts.Guard)
		waiting := func() {
			a.log.Info("provider not listening yet: retrying the handshake", "endpoint", opts.Guard.Endpoint.String(), "wait", opts.Guard.StartupWait)
		}
		if err := a.provider.startupHandshake(ctx, opts.Guard.StartupWait, waiting); err != nil {
			return err // names the endpoint and the failure category
		}
	}
	return nil
}

// enforceSandbox starts a's sandbox as the kernel allows it, before
// anything can start a tool, opens the state directory of opts and sets
// what every session protects. It returns the sandbox in force.
func (a *agent) enforceSandbox(env *procEnv, opts acpOptions) (sandboxInForce, error) {
	// Before anything can start a tool: the kernel decides what the
	// sandbox can be.
	inForce, err := startSandbox(a.sandbox, a.log)
	if err != nil {
		return sandboxInForce{}, err
	}
	a.sandbox, a.sandboxABI = inForce.Config, inForce.ABI
	if !a.managed {
		// serve warned for its children.
		warnUserServices(inForce, env, a.log)
	}
	if a.history, err = openStateDir(opts, a.log); err != nil {
		return sandboxInForce{}, err
	}
	if a.sandbox.on() {
		// What every session protects, as initialize reports it; each
		// session adds its own workspace's (sessionSandbox).
		a.sandbox.Trusted = trustedProtect(a.trustedSources("", a.sandbox))
	}
	return inForce, nil
}

// newConn is a's JSON-RPC connection on sys's stdin and stdout, read
// through the runtime's poller where they are pipes or sockets (pollable).
func (a *agent) newConn(sys *system) *rpcConn {
	in, out := sys.stdin, sys.stdout
	if f, ok := in.(*os.File); ok {
		in = pollable(f)
	}
	if f, ok := out.(*os.File); ok {
		out = pollableOut(f)
	}
	return newRPCConn(in, out, rpcConfig{
		MaxLine:   acpMaxLine,
		OnRequest: a.handleRequest,
		OnNotify:  a.handleNotify,
		OnAdmit:   a.admit,
		// A prepare or permission request abandoned by a cancel is
		// cancelled at the peer too: serve stops its provider call.
		CancelNotice: acpCancelNotice,
	})
}

// pollable returns f read through the runtime's poller when it is a pipe or
// a socket, as ACP clients and serve give their agents. A blocking read keeps
// the reading thread, and with it the scheduler slot, in the kernel: the
// prompt that the answer just read wakes would wait for the scheduler to
// take the slot back, about 20 µs on every guarded call.
func pollable(f *os.File) io.Reader {
	if f.SetReadDeadline(time.Time{}) == nil {
		return f // already read through the poller
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil {
		return f
	}
	if t := st.Mode & syscall.S_IFMT; t != syscall.S_IFIFO && t != syscall.S_IFSOCK {
		return f // a terminal or a file: other processes may share its flags
	}
	if syscall.SetNonblock(int(f.Fd()), true) != nil {
		return f
	}
	return os.NewFile(f.Fd(), f.Name())
}

// shutdown ends what the sessions left running; serve has already cancelled
// and waited for every prompt.
func (a *agent) shutdown() {
	a.mu.Lock()
	defer a.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range a.sessions {
		wg.Go(s.mcp.close)
		s.background.killAll()
		a.sessionEnded(s, false) // before its sandbox closes: its hooks run there
	}
	wg.Wait()
	for _, s := range a.sessions {
		s.sandbox.close()
		s.workspace.close()
	}
	if a.managed && a.tempParent != "" {
		os.Remove(a.tempParent) // only when empty: a session still closing keeps it
	}
}

func (a *agent) guarded() bool { return a.managed || a.provider != nil }

func invalidParams(format string, args ...any) error {
	return &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf(format, args...)}
}

func (a *agent) handleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case methodInitialize:
		return a.initialize(params)
	case methodSessionNew:
		return a.newSession(ctx, params)
	case methodSessionPrompt:
		return a.prompt(ctx, params)
	case methodSessionSetMode:
		return a.setMode(params)
	case methodSessionClose:
		return a.closeSession(params)
	case methodSessionLoad:
		return a.loadSession(ctx, params)
	default:
		return nil, &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("method %q not found", method)}
	}
}

// hideLearned takes out of the agent's environment the variables serve
// names in methodEnvHide: serve learned they are secrets after this child
// started (serve_secrets.go). A tool started after no longer gets them.
// Hiding only narrows a tool's environment: every name that can be a
// variable's is hidden, whatever else the params hold; the rest is logged.
func (a *agent) hideLearned(params json.RawMessage) {
	var p envHideParams
	if err := decodeStrict(params, &p); err != nil {
		a.log.Warn(methodEnvHide+": params unreadable: nothing hidden", "err", err)
		return
	}
	names := slices.DeleteFunc(p.Names, func(n string) bool {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			a.log.Warn(methodEnvHide+": not a variable's name: ignored", "name", n)
			return true
		}
		return false
	})
	a.env.hideSecrets(names...)
	a.log.Debug("variables hidden from tools at serve's word", "names", names)
}

func (a *agent) handleNotify(method string, params json.RawMessage) {
	if m, ok := a.model.(*parentModel); ok && method == methodModelChunk {
		m.deliver(params)
		return
	}
	if method == methodEnvHide {
		// serve's word alone: an editor's is an unknown notification.
		if a.managed {
			a.hideLearned(params)
		}
		return
	}
	if method != methodSessionCancel {
		return // unknown notifications are ignored
	}
	var p struct {
		SessionID string          `json:"sessionId"`
		Meta      json.RawMessage `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		// Stopping is the safe direction: a cancel that names its session
		// cancels it, whatever else it carries.
		if json.Unmarshal(params, &p) != nil || p.SessionID == "" {
			a.log.Warn("session/cancel: no session id: nothing cancelled", "err", err)
			return
		}
		a.log.Warn("session/cancel: unexpected params, cancelling all the same", "session", p.SessionID, "err", err)
	}
	if s := a.session(p.SessionID); s != nil {
		s.mu.Lock()
		s.cancelledUpTo = s.promptsRead
		if s.cancel != nil {
			s.cancel()
		}
		s.mu.Unlock()
	}
}

// admit numbers each session/prompt as it is read (see session.promptsRead).
func (a *agent) admit(ctx context.Context, method string, params json.RawMessage) context.Context {
	if method != methodSessionPrompt {
		return ctx
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	// Loose on purpose: the handler decodes strictly and refuses bad params.
	if json.Unmarshal(params, &p) != nil {
		return ctx
	}
	s := a.session(p.SessionID)
	if s == nil {
		return ctx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promptsRead++
	return context.WithValue(ctx, promptSeqKey{}, s.promptsRead)
}

func (a *agent) session(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

func (a *agent) initialize(params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion    int             `json:"protocolVersion"`
		ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
		ClientInfo         json.RawMessage `json:"clientInfo,omitempty"`
		Meta               map[string]any  `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, invalidParams("initialize: %v", err)
	}
	// A client's capabilities are read loosely, as ACP asks: only the one
	// acpguard extension matters here.
	var clientCaps struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(p.ClientCapabilities, &clientCaps)
	backgroundReports := string(clientCaps.Meta[metaBackgroundReports]) == "true"
	caps := map[string]any{
		"loadSession":         a.history != nil,
		"promptCapabilities":  map[string]bool{"image": true, "audio": false, "embeddedContext": false},
		"mcpCapabilities":     map[string]bool{"http": true, "sse": true},
		"sessionCapabilities": map[string]any{"close": map[string]any{}},
	}
	meta := map[string]any{}
	if a.managed {
		meta[metaGuardReady] = privateGuardMarker
	}
	if s := (sandboxInForce{a.sandbox, a.sandboxABI}); s.reported(a.guarded()) {
		meta[metaSandbox] = s.report()
	}
	if len(meta) > 0 {
		caps["_meta"] = meta
	}
	a.mu.Lock()
	a.initialized = true
	a.mu.Unlock()
	a.backgroundReports.Store(backgroundReports)
	// An unsupported requested version is answered with the latest we speak.
	return map[string]any{
		"protocolVersion":   acpProtocolVersion,
		"agentCapabilities": caps,
		"authMethods":       []any{},
		"agentInfo":         map[string]string{"name": "acpguard", "version": version},
	}, nil
}

// sessionIDFor is the id a new session gets: the one session/new's _meta
// names (metaSessionID), or a fresh random one.
func (a *agent) sessionIDFor(meta json.RawMessage) (string, error) {
	var m map[string]json.RawMessage
	if len(meta) > 0 && json.Unmarshal(meta, &m) != nil {
		return "", invalidParams("session/new: _meta is not an object")
	}
	raw, named := m[metaSessionID]
	if !named {
		return randomHex(randomIDBytes), nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil || !validSessionID(id) {
		return "", invalidParams("session/new: _meta %q: %s is not a session id (1 to %d of A-Z a-z 0-9 - _ . :)", metaSessionID, raw, maxSessionIDLen)
	}
	return id, nil
}

// settingsFor returns the settings of a session in cwd: its workspace's
// files over the others (DESIGN.md §10), read again only when one changed.
// The files read and their warnings are logged when they were read, with
// the session id; an agent without a cache has one settings for all.
func (a *agent) settingsFor(cwd, id string) (*sessionSettings, error) {
	if a.settingsCache == nil {
		// The variables http hooks may read are secrets: no child gets them.
		a.env.hideSecrets(a.settings.hookSecretNames()...)
		return &sessionSettings{Settings: a.settings, MCP: a.mcpSettings, MCPCallTimeout: a.mcpCallTimeout}, nil
	}
	ss, fresh, err := a.settingsCache.get(cwd)
	if err == nil {
		a.env.hideSecrets(ss.Settings.hookSecretNames()...)
	}
	if !fresh {
		return ss, err
	}
	log := a.log
	if id != "" {
		log = log.With("session", id)
	}
	if err != nil {
		log.Warn("settings: " + err.Error())
		return nil, err
	}
	logSettingsFiles(log, ss.Load, a.settingsRequired)
	// serve has already warned, once, for its required-mode children.
	if a.env.privateGuard == "" {
		a.warnSettingsOnce(log, ss.Settings)
	}
	return ss, nil
}

func (a *agent) newSession(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Cwd                   string            `json:"cwd"`
		AdditionalDirectories []string          `json:"additionalDirectories,omitempty"`
		McpServers            []json.RawMessage `json:"mcpServers"`
		Meta                  json.RawMessage   `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, invalidParams("session/new: %v", err)
	}
	if len(p.AdditionalDirectories) > 0 {
		// Every path a tool takes is confined to cwd; a second root would
		// widen that without the operator's say.
		return nil, invalidParams("session/new: additionalDirectories %q: not supported, tools work under cwd only", p.AdditionalDirectories)
	}
	if !filepath.IsAbs(p.Cwd) {
		return nil, invalidParams("session/new: cwd %q is not an absolute path", p.Cwd)
	}
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		return nil, invalidParams("session/new: cwd %q is not an existing directory", p.Cwd)
	}
	a.mu.Lock()
	initialized := a.initialized
	a.mu.Unlock()
	if a.managed && !initialized {
		// No session exists on a managed channel before initialize.
		return nil, &rpcError{Code: rpcInvalidRequest, Message: "session/new: initialize has not succeeded"}
	}
	id, err := a.sessionIDFor(p.Meta)
	if err != nil {
		return nil, err
	}
	ss, err := a.settingsFor(filepath.Clean(p.Cwd), id)
	if err != nil {
		return nil, invalidParams("session/new: %v", err)
	}
	s := &session{id: id, cwd: filepath.Clean(p.Cwd), settings: ss.Settings, mode: ss.Settings.Tools.ApprovalMode, background: &processSet{}, always: map[string]bool{}}
	if err := a.openSession(ctx, s, ss, p.McpServers, methodSessionNew); err != nil {
		return nil, err
	}
	return map[string]any{"sessionId": id, "modes": sessionModes(s.mode)}, nil
}

// openSession starts s's sandbox and MCP servers (those of its settings ss
// and of the request) and adds it to the agent's sessions; op names the
// request in errors.
func (a *agent) openSession(ctx context.Context, s *session, ss *sessionSettings, mcpServers []json.RawMessage, op string) error {
	id := s.id
	s.background.notify = func(running bool, seq uint64) {
		// An extension notification, to a client that asked for it: serve
		// reads it (DESIGN.md §7).
		if !a.backgroundReports.Load() {
			return
		}
		// At the session's or the agent's end the connection may be gone
		// and nobody asks any more: a failed send is no warning.
		if err := a.conn.notify(methodSessionBackground, sessionBackgroundParams{SessionID: id, Running: running, Seq: seq}); err != nil {
			a.log.Debug("send "+methodSessionBackground, "session", id, "err", err)
		}
	}
	var err error
	if s.model, err = a.sessionModel(ss, s.cwd); err != nil {
		return invalidParams("%s: %v", op, err)
	}
	if a.wrapModel != nil {
		s.model = a.wrapModel(s.model)
	}
	if s.workspace, err = openWorkspace(s.cwd); err != nil {
		return invalidParams("%s: %v", op, err)
	}
	if s.sandbox, err = newSandboxSession(a.sessionSandbox(ss, s.cwd), s.cwd, a.env); err != nil {
		s.workspace.close()
		// No session whose tools would run unconfined.
		return &rpcError{Code: rpcInternalError, Message: fmt.Sprintf("%s: %v", op, err)}
	}
	requested := parseACPMCPServers(mcpServers)
	var instructions [][2]string // each instruction file read: its path and memory type
	opts := mcpOptions{Cwd: s.cwd, Env: a.env, Sandbox: s.sandbox, Log: a.log.With("session", id), CallTimeout: ss.MCPCallTimeout}
	if a.managed {
		// A serve child never holds a remote server's header values: serve
		// reaches its remote servers for it (mcp_parent.go).
		opts.Parent, opts.SessionID = a.conn, id
	}
	s.mcp = startMCPServers(ctx, mergeMCPServers(ss.MCP, requested), opts, requested.notices)
	if _, scripted := a.model.(scriptedModel); !scripted {
		sp := a.systemPrompt
		if ss.SystemPrompt != nil {
			sp = *ss.SystemPrompt
		}
		files := instructionSources{Names: ss.Settings.Context.FileName, QwenHome: settingsSourcesOf(a.env).qwenHome(),
			NoProject: ss.Load != nil && ss.Load.Trust.untrusted(),
			Loaded:    func(p, memoryType string) { instructions = append(instructions, [2]string{p, memoryType}) }}
		s.system = sessionSystemPrompt(sp, s.cwd, a.offeredTools(s, &toolEnv{}), files, a.log.With("session", id))
	}
	a.mu.Lock()
	if _, taken := a.sessions[id]; taken {
		a.mu.Unlock()
		s.mcp.close()
		s.sandbox.close()
		s.workspace.close()
		return invalidParams("%s: session id %q is taken", op, id)
	}
	a.sessions[id] = s
	a.mu.Unlock()
	source := sessionStartResumed
	if op == methodSessionNew {
		source = sessionStartNew
	}
	a.sessionStarted(ctx, s, source, instructions)
	return nil
}

// sessionModel is the model of a session in cwd with settings ss: the
// agent's, under the model.name of the session's workspace unless
// OPENAI_MODEL named it (DESIGN.md §10). Endpoint and key stay the agent's; a
// child's model is serve's, which chooses the name itself (serve_model.go).
func (a *agent) sessionModel(ss *sessionSettings, cwd string) (model, error) {
	m, ok := a.model.(*openAIModel)
	if !ok || a.modelNameFixed || ss.Settings.Model.Name == m.name {
		return a.model, nil
	}
	if ss.Settings.Model.Name == "" {
		return nil, fmt.Errorf("workspace %q names no model; set %s or model.name in its settings", cwd, envModelName)
	}
	named := *m
	named.name = ss.Settings.Model.Name
	return &named, nil
}

// sessionSandbox is the sandbox of a session with settings ss: the one its
// workspace's settings resolve to, under what the kernel allows as checked
// at the start (startSandbox). A default workspace profile on a kernel
// without Landlock is off, as the start warned once; one asked for
// explicitly stays on, and newSandboxSession refuses the session.
func (a *agent) sessionSandbox(ss *sessionSettings, cwd string) sandboxConfig {
	cfg := a.sandbox
	if ss.Sandbox != nil && sandboxTestOverride == nil {
		cfg = *ss.Sandbox
		if cfg.on() && !cfg.Explicit && a.sandboxABI == 0 {
			return sandboxConfig{Profile: sandboxOff}
		}
	}
	if cfg.on() {
		cfg.Trusted = trustedProtect(a.trustedSources(cwd, cfg))
	}
	return cfg
}

// trustedSources are the paths this agent trusts for a session in cwd:
// the settings files it reads there, its system prompt file, its state
// directory, its secret files and the home directory.
func (a *agent) trustedSources(cwd string, cfg sandboxConfig) trustedSources {
	ts := trustedSources{Workspace: cwd, SystemPrompt: a.systemPrompt.File, Secrets: cfg.Private, Home: a.home}
	if c := a.settingsCache; c != nil {
		o := c.opts
		o.Workspace = cwd
		ts.Settings = settingsLayers(c.src, o)
		ts.TrustedWS = !o.NoUser && (!o.Required || o.TrustWorkspace)
	}
	if a.history != nil {
		ts.StateDir = a.history.dir
	}
	return ts
}

// sessionModes is the modes member of a session/new or session/load result.
func sessionModes(current string) map[string]any {
	modes := make([]map[string]string, len(approvalModes))
	for i, m := range approvalModes {
		modes[i] = map[string]string{"id": m.id, "name": m.name, "description": m.description}
	}
	return map[string]any{"currentModeId": current, "availableModes": modes}
}

// closeSession ends a session: its running prompt, its background
// processes and its MCP servers. serve sends it when a host deletes a session.
func (a *agent) closeSession(params json.RawMessage) (any, error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		Meta      json.RawMessage `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, invalidParams("session/close: %v", err)
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	delete(a.sessions, p.SessionID)
	a.mu.Unlock()
	if s == nil {
		return nil, &rpcError{Code: rpcNotFound, Message: fmt.Sprintf("session/close: unknown session %q", p.SessionID)}
	}
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.background.killAll()
	a.sessionEnded(s, deletedMeta(p.Meta))
	s.mcp.close()
	s.sandbox.close()
	// A tool call still running on it fails; it cannot reach another file.
	s.workspace.close()
	a.mu.Lock()
	live := len(a.sessions)
	a.mu.Unlock()
	sessionMemory.closed(live)
	return map[string]any{}, nil
}

func (a *agent) setMode(params json.RawMessage) (any, error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		ModeID    string          `json:"modeId"`
		Meta      json.RawMessage `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, invalidParams("session/set_mode: %v", err)
	}
	s := a.session(p.SessionID)
	if s == nil {
		return nil, &rpcError{Code: rpcNotFound, Message: fmt.Sprintf("session/set_mode: unknown session %q", p.SessionID)}
	}
	known := false
	for _, m := range approvalModes {
		known = known || m.id == p.ModeID
	}
	if !known {
		return nil, invalidParams("session/set_mode: unknown mode %q", p.ModeID)
	}
	s.mu.Lock()
	s.mode = p.ModeID
	s.mu.Unlock()
	a.update(s.id, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": p.ModeID})
	return map[string]any{}, nil
}

func (a *agent) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string                     `json:"sessionId"`
		Prompt    []contentBlock             `json:"prompt"`
		Meta      map[string]json.RawMessage `json:"_meta,omitempty"`
	}
	if err := decodeStrict(params, &p); err != nil {
		return nil, invalidParams("session/prompt: %v", err)
	}
	s := a.session(p.SessionID)
	if s == nil {
		return nil, &rpcError{Code: rpcNotFound, Message: fmt.Sprintf("session/prompt: unknown session %q", p.SessionID)}
	}
	text, images, err := promptContent(p.Prompt)
	if err != nil {
		return nil, err
	}
	seq, _ := ctx.Value(promptSeqKey{}).(int64)
	promptID, guard := a.promptGuard(s, p.Meta[metaInvocation])
	_, slash := slashCommand(text)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	switch {
	case s.cancelledLocked(seq):
		// The cancel was read after this prompt, before its handler got here.
		s.mu.Unlock()
		return map[string]string{"stopReason": stopCancelled}, nil
	case !slash && s.cancel != nil:
		s.mu.Unlock()
		return nil, invalidParams("session/prompt: session %q already has a prompt running", s.id)
	}
	if !slash {
		s.cancel = cancel
	}
	commandsDue := !s.commandsSent
	s.commandsSent = true
	s.mu.Unlock()
	a.sendFirstPromptNotices(s, commandsDue)
	if slash {
		a.slashCommand(s, text)
		return map[string]string{"stopReason": stopEndTurn}, nil
	}
	defer func() {
		s.mu.Lock()
		s.cancel = nil
		s.mu.Unlock()
	}()

	// UserPromptSubmit decides whether the prompt reaches the model, and
	// what it reads with it.
	var submitted string
	json.Unmarshal(p.Meta[metaSubmittedPrompt], &submitted)
	text, ok := a.promptSubmitted(ctx, s, promptID, text, submitted)
	if !ok {
		if ctx.Err() != nil {
			return map[string]string{"stopReason": stopCancelled}, nil
		}
		return map[string]string{"stopReason": stopEndTurn}, nil
	}
	s.mu.Lock()
	s.history = append(s.history, message{Role: roleUser, Text: text, Images: images})
	s.mu.Unlock()
	env := a.turnEnv(s, promptID, guard)
	stop, err := a.runTurn(withPromptIdentity(ctx, s.id, promptID), s, env)
	a.saveSession(s)
	if err != nil {
		return nil, err
	}
	return map[string]string{"stopReason": stop}, nil
}

// promptContent is the text and the images of a session/prompt's blocks:
// each image block checked and decoded, every other block a line of the
// text, a resource link as "@" and its URI.
func promptContent(blocks []contentBlock) (string, []promptImage, error) {
	var text strings.Builder
	var images []promptImage
	lines := 0
	for i, b := range blocks {
		if b.Type == "image" {
			img, err := b.image()
			if err != nil {
				return "", nil, invalidParams("session/prompt: block %d: %v", i, err)
			}
			images = append(images, img)
			continue
		}
		if err := b.check(); err != nil {
			return "", nil, invalidParams("session/prompt: block %d: %v", i, err)
		}
		if lines > 0 {
			text.WriteString("\n")
		}
		lines++
		if b.Type == "text" {
			text.WriteString(b.Text)
		} else {
			fmt.Fprintf(&text, "@%s", b.URI)
		}
	}
	return text.String(), images, nil
}

// sendFirstPromptNotices sends what waits for a prompt of session s: the
// slash commands open in it when commandsDue, on its first prompt, and
// the MCP failures not yet shown.
func (a *agent) sendFirstPromptNotices(s *session, commandsDue bool) {
	// The slash commands open here are announced on the session's first
	// prompt, as Qwen Code's first turn carries them: an update sent
	// right after session/new may reach the client before it knows the
	// session's id, and be dropped (DESIGN.md §7).
	if commandsDue {
		a.update(s.id, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": a.availableCommands(s)})
	}
	// MCP failures are shown on the session's first prompt that runs,
	// whatever it is.
	for _, n := range s.mcp.takeNotices() {
		a.update(s.id, map[string]any{
			"sessionUpdate": "agent_message_chunk",
			"content":       map[string]string{"type": "text", "text": n + "\n"},
		})
	}
}

// turnEnv is what the tools of the turn of prompt promptID in session s
// run with, guarded by guard; the observer and the policy are set per call.
func (a *agent) turnEnv(s *session, promptID string, guard Guard) *toolEnv {
	return &toolEnv{
		SessionID:  s.id,
		PromptID:   promptID,
		Cwd:        s.cwd,
		Workspace:  s.workspace,
		Guard:      guard,
		Managed:    a.guarded(),
		Env:        a.env,
		Sandbox:    s.sandbox,
		Background: s.background,
		Observer:   nil, // set per call
		Policy:     nil, // set per call: the mode may change between calls
		Extra:      s.mcp.extra(),
	}
}

// promptGuard returns the prompt id and the guard for one prompt. A managed
// prompt without a valid invocation gets a guard that always fails, so it
// runs no guarded tool.
func (a *agent) promptGuard(s *session, rawInv json.RawMessage) (string, Guard) {
	switch {
	case a.managed:
		id, err := invocationPromptID(s, rawInv)
		if err != nil {
			a.log.Warn("managed prompt without valid identity: every guarded tool fails", "session", s.id, "err", err)
			return "", func(context.Context, GuardRequest) (Decision, error) { return Decision{}, err }
		}
		return id, a.parentGuard
	case a.provider != nil:
		return randomHex(randomIDBytes), a.providerGuard
	default:
		if _, viaParent := a.model.(*parentModel); viaParent {
			// serve's unguarded child: the id names the prompt in model
			// calls, which serve makes only for its running prompt.
			id, err := invocationPromptID(s, rawInv)
			if err != nil {
				a.log.Warn("prompt without valid identity: every model call fails", "session", s.id, "err", err)
			}
			return id, nil
		}
		return randomHex(randomIDBytes), nil // only a correlation label on the plain path
	}
}

// invocationPromptID is the prompt id of a prompt's invocation identity,
// checked against its session.
func invocationPromptID(s *session, rawInv json.RawMessage) (string, error) {
	var inv invocation
	err := decodeStrict(rawInv, &inv)
	switch {
	case rawInv == nil:
		err = errors.New("the prompt carries no invocation identity")
	case err != nil:
	case inv.Version != invocationVersion:
		err = fmt.Errorf("invocation version %d, want %d", inv.Version, invocationVersion)
	case inv.SessionID != s.id:
		err = fmt.Errorf("invocation sessionId %q is not this session %q", inv.SessionID, s.id)
	case inv.PromptID == "":
		err = errors.New("invocation has no promptId")
	}
	if err != nil {
		return "", err
	}
	return inv.PromptID, nil
}

// parentGuard asks the managed parent, which holds the provider token. Its
// answer is read by the provider's decision rules: the reason is shown to
// the model and the client, whoever the parent is.
func (a *agent) parentGuard(ctx context.Context, req GuardRequest) (Decision, error) {
	// serve forwards the arguments as sent and digests them: they go in
	// canonical form, so its digest is the provider's (DESIGN.md §8).
	args, err := canonicalArgumentBytes(req.Arguments)
	if err != nil {
		return Decision{}, fmt.Errorf("prepare request to parent: %w", err)
	}
	raw, err := a.conn.call(ctx, methodGuardPrepare, rpcCompact(appendGuardPrepareParams(req, args)))
	if err != nil {
		return Decision{}, fmt.Errorf("prepare request to parent: %w", err)
	}
	if string(raw) == decisionAllowedJSON {
		return Decision{Allowed: true}, nil // serve's answer to every allow, read as decodeDecision reads it
	}
	m, werr := decodeObjectBody(raw, "allowed", "reason")
	if werr == nil {
		var d Decision
		if d, werr = decodeDecision(m); werr == nil {
			return d, nil
		}
	}
	return Decision{}, fmt.Errorf("prepare answer from parent: %w", werr)
}

// appendGuardPrepareParams writes the params of a prepare request to the
// parent, the members guardPrepareMembers names, without reflection over a
// map: args are the canonical bytes, sent as they are (DESIGN.md §8).
func appendGuardPrepareParams(req GuardRequest, args []byte) []byte {
	dst := make([]byte, 0, prepareRequestFrame+len(args)+len(req.SessionID)+len(req.PromptID)+len(req.ToolCallID)+len(req.ToolName))
	dst = append(dst, `{"sessionId":`...)
	dst = appendJSONString(dst, req.SessionID, false)
	dst = append(dst, `,"promptId":`...)
	dst = appendJSONString(dst, req.PromptID, false)
	dst = append(dst, `,"toolCallId":`...)
	dst = appendJSONString(dst, req.ToolCallID, false)
	dst = append(dst, `,"toolName":`...)
	dst = appendJSONString(dst, req.ToolName, false)
	dst = append(dst, `,"arguments":`...)
	dst = append(dst, args...)
	return append(dst, '}')
}

// providerGuard asks the provider directly (standalone required mode).
func (a *agent) providerGuard(ctx context.Context, req GuardRequest) (Decision, error) {
	args, err := canonicalArgumentBytes(req.Arguments)
	if err != nil {
		return Decision{}, err
	}
	start := time.Now()
	res := a.provider.prepare(ctx, prepareRequest{
		SessionID:  req.SessionID,
		PromptID:   req.PromptID,
		ToolCallID: req.ToolCallID,
		ToolName:   req.ToolName,
		Arguments:  args,
	})
	a.log.Info("guard decision", "session", req.SessionID, "prompt", req.PromptID, "toolCall", req.ToolCallID,
		"requestId", res.RequestID, "tool", req.ToolName, "allowed", res.Allowed, "failure", res.Category,
		"latencyUs", time.Since(start).Microseconds())
	if res.Category == failIdentity {
		a.log.Error("provider identity check failed: call denied", "requestId", res.RequestID, "tool", req.ToolName, "err", res.Err)
	}
	if res.Category != "" {
		return Decision{}, fmt.Errorf("provider %s: %w", res.Category, res.Err)
	}
	return res.Decision, nil
}

// runTurn runs the model loop of one prompt until the model stops calling
// tools, the prompt is cancelled, or the turn limit is reached.
func (a *agent) runTurn(ctx context.Context, s *session, env *toolEnv) (string, error) {
	stopBlocks := 0 // the Stop hooks' blocks in a row (turnStopping)
	for range s.settings.Model.MaxTurns {
		if ctx.Err() != nil {
			return stopCancelled, nil
		}
		// Only this turn appends to the history, so the model may read it
		// without a copy; the full slice expression keeps it from appending.
		s.mu.Lock()
		history := withSystemPrompt(s.system, s.history[:len(s.history):len(s.history)])
		s.mu.Unlock()
		called := time.Now()
		// A reasoning model's thinking is shown as it arrives, never kept.
		modelCtx := withThoughtSink(ctx, func(t string) {
			if t != "" {
				a.update(s.id, map[string]any{
					"sessionUpdate": "agent_thought_chunk",
					"content":       map[string]string{"type": "text", "text": t},
				})
			}
		})
		turn, err := s.model.next(modelCtx, history, a.offeredTools(s, env), func(t string) {
			if t != "" {
				a.update(s.id, map[string]any{
					"sessionUpdate": "agent_message_chunk",
					"content":       map[string]string{"type": "text", "text": t},
				})
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return stopCancelled, nil
			}
			a.turnFailed(s, env.PromptID, err)
			return "", &rpcError{Code: rpcInternalError, Message: fmt.Sprintf("model: %v", err)}
		}
		if turn.Usage != nil {
			// Qwen Code reports a model call's usage as an empty text chunk
			// right after the call (DESIGN.md §7).
			a.update(s.id, map[string]any{
				"sessionUpdate": "agent_message_chunk",
				"content":       map[string]string{"type": "text", "text": ""},
				"_meta":         map[string]any{"usage": turn.Usage, "durationMs": time.Since(called).Milliseconds()},
			})
		}
		results := make([]message, 0, len(turn.Calls))
		inputs := make([]any, 0, len(turn.Calls)) // each call's tool_input for its hooks
		// rejected: the user rejected a call of this batch. The batch's
		// other calls are still asked and reported, then the turn ends with
		// no further model call, as Qwen Code's does (DESIGN.md §10).
		rejected := false
		for _, call := range turn.Calls {
			var res toolResult
			obs := &callObserver{a: a, sessionID: s.id}
			if ctx.Err() != nil {
				// The prompt was cancelled: the rest of the turn's calls are
				// reported, never run, under their canonical names.
				call.Name = canonicalToolName(call.Name)
				obs.toolPending(call, call.Name, "other", nil)
				res = toolResult{Status: statusCancelled, Output: "Tool call cancelled"}
			} else {
				callEnv := *env
				callEnv.Observer = obs
				obs.env = &callEnv
				callEnv.Policy = a.callPolicy(s, &rejected)
				started := time.Now()
				res = runTool(ctx, &callEnv, call)
				res = a.callFinished(ctx, s, env.PromptID, call, obs.name(call), obs.input(call), res, time.Since(started))
			}
			obs.finish(call, res)
			results = append(results, message{Role: roleTool, CallID: call.ID, Tool: obs.name(call), Result: res})
			inputs = append(inputs, obs.input(call))
		}
		a.batchFinished(ctx, s, env.PromptID, inputs, results)
		s.mu.Lock()
		s.history = append(s.history, message{Role: roleAssistant, Text: turn.Text, Calls: turn.Calls})
		s.history = append(s.history, results...)
		s.mu.Unlock()
		if len(turn.Calls) == 0 || rejected {
			if ctx.Err() != nil {
				return stopCancelled, nil
			}
			// A Stop hook's block goes on with its reason as the user's.
			if reason := a.turnStopping(ctx, s, env.PromptID, turn.Text, &stopBlocks); reason != "" && len(turn.Calls) == 0 {
				s.mu.Lock()
				s.history = append(s.history, message{Role: roleUser, Text: reason})
				s.mu.Unlock()
				continue
			}
			return stopEndTurn, nil
		}
	}
	return stopMaxTurnRequests, nil
}

// update sends one session/update notification.
func (a *agent) update(sessionID string, u map[string]any) {
	if a.history != nil {
		if s := a.session(sessionID); s != nil {
			s.record.note(u)
		}
	}
	if err := a.conn.notify(methodSessionUpdate, map[string]any{"sessionId": sessionID, "update": u}); err != nil {
		a.log.Warn("send session/update", "session", sessionID, "err", err)
	}
}

// callObserver turns one call's lifecycle into ACP tool_call updates.
type callObserver struct {
	a         *agent
	sessionID string
	canonical string         // the canonical tool name, once runTool reported it
	args      map[string]any // the normalized arguments runTool reported, nil if none
	env       *toolEnv       // the call's session, for the preview of its change; nil: none
	head      toolHead       // the call as toolPending announced it
}

func (o *callObserver) name(call toolCall) string {
	if o.canonical != "" {
		return o.canonical
	}
	return canonicalToolName(call.Name)
}

func (o *callObserver) toolPending(call toolCall, title, kind string, args map[string]any) {
	o.canonical = call.Name // runTool passes the canonical name
	o.args = args
	var rawInput any = args
	if args == nil {
		rawInput = rawInputOf(call.Args)
	}
	input, err := appendJSONValue(nil, rawInput)
	if err != nil {
		o.a.log.Warn("send session/update", "session", o.sessionID, "err", err)
		return
	}
	// Only a prepared call has its tool's kind (an unprepared one is
	// announced as other), so the preview runs on final arguments only: the
	// change the user is about to be asked to approve.
	var d *fileDiff
	if kind == kindEdit {
		d = previewChange(o.env, o.canonical, args)
	}
	o.head = toolHead{id: call.ID, title: title, kind: kind, toolName: o.canonical, rawInput: input, locations: toolLocations(o.canonical, args)}
	o.a.sendToolUpdate(o.sessionID, toolEvent{id: call.ID, kind: "tool_call", status: "pending",
		raw: toolPendingUpdate(&o.head, d)})
}

func (o *callObserver) toolRunning(call toolCall) {
	o.a.sendToolUpdate(o.sessionID, toolEvent{id: call.ID, kind: "tool_call_update", status: "in_progress",
		raw: toolRunningUpdate(&o.head)})
}

// finish reports how the call ended. ACP has no cancelled tool status: a
// cancelled call is failed, with the reason in rawOutput.
func (o *callObserver) finish(call toolCall, res toolResult) {
	status := "failed"
	raw := res.RawOutput
	_, shell := raw.(shellRawOutput) // Qwen Code's shell_result, sent as it is (DESIGN.md §7)
	switch {
	case res.Status == statusCompleted:
		status = "completed"
		if raw == nil {
			raw = map[string]string{"output": res.Output}
		}
	case shell:
	case res.Status == statusCancelled:
		raw = withOutcome(raw, "status", statusCancelled, res.Output)
	default:
		raw = withOutcome(raw, "errorType", res.ErrorType, res.Output)
	}
	output, err := appendJSONValue(nil, raw)
	if err != nil {
		o.a.log.Warn("send session/update", "session", o.sessionID, "err", err)
		return
	}
	o.a.sendToolUpdate(o.sessionID, toolEvent{id: call.ID, kind: "tool_call_update", status: status,
		raw: toolFinishUpdate(call.ID, o.name(call), status, res.Output, res.Diff, output)})
}

// withOutcome is the rawOutput of a call that did not complete: key and
// message, beside what the executor reported (a shell's exit code, an MCP
// server's content).
func withOutcome(raw any, key, value, message string) map[string]any {
	out := map[string]any{}
	if m, ok := raw.(map[string]any); ok {
		maps.Copy(out, m)
	}
	out[key], out["message"] = value, message
	return out
}

// rawInputOf shows arguments that could not be normalized: the object if
// they are one, else the text as proposed.
func rawInputOf(args json.RawMessage) any {
	var m map[string]any
	if json.Unmarshal(args, &m) == nil && m != nil {
		return m
	}
	return map[string]string{"raw": string(args)}
}

// offeredTools is what the model may call: tools.disabled removes a tool
// from the offer, and runTool (guard.go) also refuses it if called.
func (a *agent) offeredTools(s *session, env *toolEnv) []*toolSpec {
	all := offeredTools(env)
	out := all[:0]
	for _, t := range all {
		if !s.settings.toolDisabled(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// callPolicy is the layers before the guard for the next call of s; a
// user's reject sets *rejected.
func (a *agent) callPolicy(s *session, rejected *bool) *callPolicy {
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	return &callPolicy{
		Settings: s.settings,
		Mode:     mode,
		Home:     a.home,
		Parent:   a.parentConn(),
		Ask: func(ctx context.Context, call toolCall, spec *toolSpec, args map[string]any) permissionOutcome {
			if a.declineAsks {
				return permissionDeclined // not a reject: the turn goes on
			}
			out := a.askPermission(ctx, s, call, spec, args)
			if out == permissionRejected {
				*rejected = true
			}
			return out
		},
		Log: a.log.Warn,
	}
}

// alwaysKey is what an always answer remembers, from the normalized
// arguments (DESIGN.md §10): for a shell call the whole call (the command,
// the resolved directory, is_background and timeout), so that an approved
// command approves it nowhere else and in no other way; for any other tool,
// MCP tools included, the tool, as Qwen Code's "Always Allow in project:
// <tool>" and "Allow All Edits" (every edit of that tool, whatever its path)
// mean.
func alwaysKey(tool string, args map[string]any) string {
	if tool != toolShell {
		return tool
	}
	key, err := json.Marshal([]any{tool, args["command"], args["directory"], args["is_background"], args["timeout"]})
	if err != nil {
		return "" // never stored: an unkeyable call is asked every time
	}
	return string(key)
}

// askPermission asks the client with session/request_permission. Anything
// but a well-formed allow is a reject, but for the prompt's cancel and an
// expired request, which cancel the call.
func (a *agent) askPermission(ctx context.Context, s *session, call toolCall, spec *toolSpec, args map[string]any) permissionOutcome {
	key := alwaysKey(spec.Name, args)
	s.mu.Lock()
	remembered := key != "" && s.always[key]
	s.mu.Unlock()
	if remembered {
		return permissionAllowed
	}
	a.permissionPrompted(ctx, s, spec.Name)
	options := permissionOptions(spec, args)
	// On expiry the request is abandoned as a cancel abandons it: the
	// client gets $/cancel_request, a late answer is dropped, and the call
	// ends cancelled while the turn goes on (DESIGN.md §6).
	askCtx := ctx
	if a.permTimeout > 0 {
		var stop context.CancelFunc
		askCtx, stop = context.WithTimeout(ctx, a.permTimeout)
		defer stop()
	}
	raw, err := a.conn.call(askCtx, methodRequestPermission, map[string]any{
		"sessionId": s.id,
		"toolCall": map[string]any{
			"toolCallId": call.ID,
			"title":      spec.title(args),
			"kind":       spec.Kind,
			"status":     "pending",
			"rawInput":   args,
			"content":    permissionContent(s, spec, args),
			"locations":  locationsValue(toolLocations(spec.Name, args)),
			"_meta":      map[string]string{"toolName": spec.Name},
		},
		"options": options,
	})
	if err != nil {
		if ctx.Err() != nil {
			return permissionCancelled
		}
		if askCtx.Err() != nil {
			a.log.Warn("session/request_permission unanswered: the call is cancelled", "session", s.id, "toolCallId", call.ID, "timeout", a.permTimeout)
			return permissionCancelled
		}
		a.log.Warn("session/request_permission failed: the call is rejected", "session", s.id, "toolCallId", call.ID, "err", err)
		return permissionRejected
	}
	var ans struct {
		Outcome struct {
			Outcome  string          `json:"outcome"`
			OptionID string          `json:"optionId,omitempty"`
			Meta     json.RawMessage `json:"_meta,omitempty"` // ACP allows _meta on every object
		} `json:"outcome"`
		Meta json.RawMessage `json:"_meta,omitempty"`
	}
	if err := decodeStrict(raw, &ans); err != nil {
		a.log.Warn("session/request_permission: unreadable answer: the call is rejected", "session", s.id, "err", err)
		return permissionRejected
	}
	if ans.Outcome.Outcome == outcomeCancelled {
		// A client answers cancelled after its session/cancel, which ended
		// ctx when it was read; without one, the user dismissed the
		// request: a reject, as in Qwen Code (DESIGN.md §10).
		if ctx.Err() != nil {
			return permissionCancelled
		}
		return permissionRejected
	}
	var chosen *permissionOption
	if ans.Outcome.Outcome == outcomeSelected {
		chosen = chosenOption(options, ans.Outcome.OptionID, func(o permissionOption) (string, string) { return o.OptionID, o.Kind })
	}
	switch {
	case chosen == nil:
		return permissionRejected
	case chosen.Kind == kindAllowOnce:
		return permissionAllowed
	case chosen.Kind == kindAllowAlways:
		if key != "" {
			s.mu.Lock()
			s.always[key] = true
			s.mu.Unlock()
		}
		return permissionAllowed
	default:
		return permissionRejected
	}
}

// slashOpen reports whether the command name may run here: a managed child
// runs only the commands serve opened, and settings may disable any.
func (a *agent) slashOpen(s *session, name string) bool {
	return (!a.managed || slices.Contains(a.allowSlash, name)) && !s.settings.slashCommandDisabled(name)
}

// availableCommands lists the slash commands open here, as ACP's
// available_commands_update has them; none takes an argument.
func (a *agent) availableCommands(s *session) []availableCommand {
	out := []availableCommand{}
	for _, c := range slashCommands {
		if a.slashOpen(s, c.name) {
			out = append(out, availableCommand{Name: c.name, Description: c.what, Input: nil})
		}
	}
	return out
}

type availableCommand struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Input is the command's argument hint, null when it takes none.
	Input *commandInput `json:"input"`
}

type commandInput struct {
	Hint string `json:"hint"`
}

// slashCommand answers a slash command with one agent message. A managed
// child never runs /fork.
func (a *agent) slashCommand(s *session, text string) {
	name, _ := slashCommand(text)
	var reply string
	switch {
	case a.managed && !slices.Contains(a.allowSlash, name):
		reply = fmt.Sprintf("slash command %q is not available in a managed session", "/"+name)
	case s.settings.slashCommandDisabled(name):
		reply = fmt.Sprintf("slash command %q is disabled by settings (slashCommands.disabled)", "/"+name)
	case name == slashHelp:
		var open []string
		for _, c := range slashCommands {
			if a.slashOpen(s, c.name) {
				open = append(open, fmt.Sprintf("/%s (%s)", c.name, c.what))
			}
		}
		reply = "Slash commands: " + strings.Join(open, ", ") + ".\n" +
			"Scripted model: each line `call <tool_name> <json-object>` proposes one tool call."
	case name == slashTools:
		var names []string
		for _, t := range a.offeredTools(s, &toolEnv{Extra: s.mcp.extra()}) {
			names = append(names, t.Name)
		}
		reply = "Tools: " + strings.Join(names, ", ")
	default:
		reply = fmt.Sprintf("unknown slash command %q; try /help", "/"+name)
	}
	a.update(s.id, map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]string{"type": "text", "text": reply},
	})
}
