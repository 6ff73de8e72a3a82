// serve.go owns "acpguard serve" as a command: its options and host token,
// start-up, shutdown and signals (DESIGN.md §9). In required mode serve makes
// a host token when none is given, so that a tool it started cannot act as a
// host just by reaching the loopback port.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runDaemon runs serve on opts until ctx is done: it logs what it read,
// makes the host token when opts ask for one, and announces where it
// listens on stdout.
func runDaemon(ctx context.Context, sys *system, opts serveOptions) error {
	log := newLogger(sys.stderr, opts.LogJSON, opts.LogLevel)
	logSettingsFiles(log, opts.SettingsLoad, opts.Guard.required())
	logDotEnv(log, opts.SettingsLoad, opts.Guard.required())
	warnSettings(log, opts.Settings)
	if err := hideEnviron(log); err != nil {
		return err
	}
	// The variables remote MCP servers' headers name, and those http hooks
	// may read (allowedEnvVars), are secrets like the model key: no child
	// receives them (DESIGN.md §4): serve POSTs its children's http hooks
	// (serve_hooks.go).
	if opts.Settings != nil {
		envOf(sys).hideSecrets(opts.Settings.hookSecretNames()...)
		if configs, err := mcpServersFromSettings(opts.Settings.MCPServers); err == nil {
			envOf(sys).hideSecrets(mcpHeaderSecrets(configs)...)
		}
	}
	// An operator's GOMAXPROCS wins over serve's own choice.
	opts.SchedSlots = sys.env.lookup("GOMAXPROCS") == ""
	tok, err := prepareHostToken(&opts, envOf(sys), log)
	if err != nil {
		return err
	}
	defer tok.cleanup()
	return serveDaemon(ctx, sys, opts, func(url string) {
		// Qwen Code's shape, so a host that takes the URL from this line
		// finds it (DESIGN.md §7); every other line goes to stderr.
		fmt.Fprintf(sys.stdout, "acpguard serve listening on %s (mode=%s, workspace=%s)\n", url, hostMode, opts.Workspaces[0])
		tok.announce(sys.stdout)
		if !opts.NoWeb {
			log.Info("console", "url", url+consolePagePath, "signIn", consoleSignIn(opts))
		}
		if opts.Open {
			openConsole(sys.env, log, url, opts.Token)
		}
	})
}

// serveOptions are the validated options of "acpguard serve", as
// config.go parses them from its flags, environment and settings.
type serveOptions struct {
	// SchedSlots: serve sets its runtime's scheduler slots from the prompts
	// it runs (slots.go); the command sets it when GOMAXPROCS is unset.
	SchedSlots   bool
	Hostname     bindAddr
	Port         int // 0: pick a free port
	Workspaces   []string
	SettingsFile string    // "" none
	Settings     *settings // the merged settings files (settings_files.go), or the defaults
	SettingsLoad *settingsLoad
	// NoUserSettings and TrustWorkspaceSettings are the flags of the same
	// names, passed on to every child.
	NoUserSettings         bool
	TrustWorkspaceSettings bool
	Token                  string // host API token, "" none
	// TokenOnCommandLine says --token gave it, where /proc shows it to
	// every local process: serve warns at start.
	TokenOnCommandLine bool
	// TokenFile is the host token file from --token-file: read when it
	// existed at start, else created by runDaemon (GenerateToken).
	TokenFile string
	// GenerateToken asks runDaemon for a new random host token, written to
	// TokenFile or, when that is "", to a new file in a fresh directory.
	GenerateToken bool
	// AllowTokenlessLoopback is --allow-tokenless-loopback: in required mode
	// a loopback daemon without a host token, as in off mode.
	AllowTokenlessLoopback bool
	RequireAuth            bool // --require-auth: /health needs the token on loopback too (DESIGN.md §7)
	Guard                  guardConfig
	GuardModeGiven         bool   // --external-tool-guard-mode on the command line (warnUnguarded)
	DecisionLog            string // "" stderr
	// NoWeb is --no-web: no console page, assets or console API (404).
	NoWeb bool
	// Open is --open: the system browser is started at the console once
	// serve listens, the host token in the URL fragment.
	Open                 bool
	DecisionLogArguments bool // each decision line carries the arguments
	MaxPendingPrompts    int
	AllowSlashCommands   []string // names without the leading "/"
	// DisabledSlashCommands are refused with 400 and passed to every child.
	DisabledSlashCommands []string
	Limits                serveLimits
	LogJSON               bool       // --log-format json; text otherwise
	LogLevel              slog.Level // the zero Level is info
	// Sandbox is the base the children confine with: serve's flags over
	// the settings layers that are no workspace's file.
	Sandbox sandboxConfig
	// SandboxFlags are the --sandbox* flags serve was given, for its
	// children; nil for a serve assembled without flags, whose children
	// get Sandbox whole.
	SandboxFlags *sandboxGiven
	// FirstWorkspaceSandbox is the sandbox of the first workspace's
	// sessions, checked against the kernel at start as Sandbox is.
	FirstWorkspaceSandbox *sandboxConfig
	// Model is the model service serve calls for its children
	// (serve_model.go); BaseURL "" runs the scripted model. Its name is
	// OPENAI_MODEL's, else the first workspace's model.name, checked at
	// start; ModelNameFixed says OPENAI_MODEL named it, for every session.
	Model          openAIConfig
	ModelNameFixed bool
	// SessionSettings find the settings files of a session's workspace,
	// from which serve takes its model.name and model.maxSessionTurns;
	// Sources zero (a serve assembled without flags): Settings for all.
	SessionSettings struct {
		Sources settingsSources
		Options settingsLoadOptions // Workspace is set per session
	}
	// SystemPrompt is the operator's (the flag's or the process
	// environment's); its File goes to every child as
	// --system-prompt-file. One a settings env block names is each
	// session's, found by its child.
	SystemPrompt systemPromptSource
}

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
	slots        *schedSlots  // nil: the runtime's slots are left as they are
	obs          *serveObserver
	allowSlash   []string
	disabled     []string // --disabled-slash-commands
	childLog     []string // --log-format and --log-level for the children
	settingsFile string
	settingsArgs []string       // --no-user-settings, --trust-workspace-settings
	systemFile   string         // --system-prompt-file or QWEN_SYSTEM_MD's file, for the children
	sandbox      sandboxInForce // checked against the kernel; given to every child
	sandboxFlags *sandboxGiven  // serve's --sandbox* flags; nil: sandbox whole
	port         string
	bindHost     string // the bound address as a Host header spells it
	checkHost    bool
	requireAuth  bool // --require-auth: no route is open without the token
	// console: serve answers the console (serve_console.go), unless --no-web.
	console bool
	// decisionLogPath is --decision-log's file, which the console reads;
	// "": the decision log goes to stderr.
	decisionLogPath string
	started         time.Time

	model *openAIModel // the children's model service; nil: the scripted model
	// modelDefault is a session's model name and call bound when serve
	// has no settings sources; modelNameFixed: OPENAI_MODEL names the
	// model of every session; modelSettings loads a session's workspace
	// settings for the others (serve_model.go).
	modelDefault   sessionModel
	modelNameFixed bool
	modelSettings  *settingsCache
	// mcpStart are serve's own settings' MCP servers; mcpSettings loads a
	// session's workspace settings for its remote servers and http hooks
	// (serve_mcp.go, serve_hooks.go).
	mcpStart    []mcpServerConfig
	mcpSettings *settingsCache
	// untold is set when mcpSettings' loader hid variables the children
	// may not have been told of yet (workspaceSettings, serve_secrets.go).
	untold atomic.Bool
	// hookStart are serve's own settings, whose http hooks serve POSTs for
	// its children when it has no settings sources (serve_hooks.go).
	hookStart *settings
	// allowed sees each decision the bridge allowed, after it is final
	// and logged: it cannot change one (serve_mcp.go's allowMCP).
	allowed func(s *hostSession, promptID, tool string, args json.RawMessage)
	// mcpPending are the remote servers of sessions in creation, by id;
	// hookClosing the sessions whose session/close their child handles
	// (serve_hooks.go). mcpMu guards both.
	mcpMu       sync.Mutex
	mcpPending  map[string]serveMCPPending
	hookClosing map[string]serveHookClosing

	runCtx context.Context // cancelled when shutdown begins
	wg     sync.WaitGroup  // children's readers and prompt runners

	mu       sync.Mutex
	closing  bool
	chans    map[*acpChannel]struct{} // every child not yet reaped
	pool     []*acpChannel            // the initialized children sessions are placed on
	starting int                      // children being started, counted against --max-children
	// poolChanged is closed, and replaced, when a child being started is
	// ready or failed (serve_children.go).
	poolChanged chan struct{}
	sessions    map[string]*hostSession
	creating    int // session creations past the --max-sessions check

	// singleMu makes the single-scope POST /session that finds no default
	// session the only one to create it (serve_sessions.go).
	singleMu sync.Mutex
}

// serveDaemon runs the daemon until ctx is done. ready is called with the
// base URL once the listener is open.
func serveDaemon(ctx context.Context, sys *system, opts serveOptions, ready func(url string)) error {
	if !opts.Hostname.loopback && opts.Token == "" {
		return usagef("--hostname %q is not a loopback address; a host token (--token or QWEN_SERVER_TOKEN) is required", opts.Hostname.host)
	}
	d := newDaemon(sys, opts)
	if d.maxPending < 1 {
		return usagef("max pending prompts per session %d: must be at least 1", d.maxPending)
	}
	if err := d.setModel(opts); err != nil {
		return err
	}
	d.setMCP(opts)
	sandbox, err := d.startSandbox(opts)
	if err != nil {
		return err
	}
	// Without Landlock the default falls back to off in serve and in each
	// child, each saying so once. The children are not told off: a
	// workspace whose file asks for the sandbox must have its sessions
	// refused, not run unconfined (DESIGN.md §5).
	d.sandboxFlags = opts.SandboxFlags
	if opts.SchedSlots {
		d.slots = newSchedSlots(d.obs.log, slotsServeMaxPrompts)
	}
	d.sandbox, d.obs.sandbox = sandbox, sandbox
	d.events = newEventBudget(d.limits.MaxEventMemory)
	d.obs.events = d.events
	d.obs.maxChildren = d.limits.MaxChildren
	if opts.Guard.required() {
		// Required mode: the handshake (DESIGN.md §8) before the listener
		// opens or any child starts.
		pc := newProviderClient(opts.Guard)
		waiting := func() {
			d.obs.log.Info("provider not listening yet: retrying the handshake", "endpoint", opts.Guard.Endpoint.String(), "wait", opts.Guard.StartupWait)
		}
		if err := pc.startupHandshake(ctx, opts.Guard.StartupWait, waiting); err != nil {
			return fmt.Errorf("external tool guard provider handshake failed: %w", err)
		}
		d.provider, d.guarded = pc, true
	}
	d.decisions = newDecisionLog(sys.stderr)
	if opts.DecisionLog != "" {
		l, err := openLineLog(opts.DecisionLog)
		if err != nil {
			return fmt.Errorf("open decision log %q: %w", opts.DecisionLog, err)
		}
		defer l.close()
		d.decisions = &decisionLog{lines: l}
		d.decisionLogPath = opts.DecisionLog
	}
	d.decisions.arguments = opts.DecisionLogArguments

	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Hostname.host, strconv.Itoa(opts.Port)))
	if err != nil {
		return listenError(net.JoinHostPort(opts.Hostname.host, strconv.Itoa(opts.Port)), uint16(opts.Port), "port", err)
	}
	bound, port, _ := net.SplitHostPort(ln.Addr().String())
	d.port, d.bindHost = port, bound
	if strings.Contains(bound, ":") {
		d.bindHost = "[" + bound + "]"
	}
	return d.serve(ctx, ln, ready)
}

// serve serves d's routes on ln until ctx ends or serving fails, with
// its sessions reaped when idle and, when guarded, a new handshake on
// SIGHUP; ready, when not nil, learns the URL once it listens. It then
// shuts d down.
func (d *daemon) serve(ctx context.Context, ln net.Listener, ready func(url string)) error {
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	d.runCtx = runCtx
	if d.guarded {
		defer d.provider.handshakeOnSIGHUP(runCtx, d.obs.logger(), &d.wg)()
	}
	srv := newHTTPServer(runCtx, d.routes(), d.obs.log)
	srv.ConnContext = d.peerConnContext
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

// newDaemon is the daemon of opts, its limits' defaults filled in, before
// its model, sandbox, guard and listener.
func newDaemon(sys *system, opts serveOptions) *daemon {
	return &daemon{
		sys:          sys,
		started:      time.Now(),
		token:        opts.Token,
		workspaces:   opts.Workspaces,
		maxPending:   opts.MaxPendingPrompts,
		limits:       opts.Limits.withDefaults(),
		obs:          newServeObserver(newLogger(sys.stderr, opts.LogJSON, opts.LogLevel)),
		allowSlash:   opts.AllowSlashCommands,
		disabled:     opts.DisabledSlashCommands,
		childLog:     childLogArgs(opts.LogJSON, opts.LogLevel),
		settingsFile: opts.SettingsFile,
		settingsArgs: settingsChildArgs(opts),
		systemFile:   opts.SystemPrompt.File,
		checkHost:    opts.Hostname.loopback,
		requireAuth:  opts.RequireAuth,
		console:      !opts.NoWeb,
		poolChanged:  make(chan struct{}),
		chans:        map[*acpChannel]struct{}{},
		sessions:     map[string]*hostSession{},
		allowed:      (*hostSession).allowMCP,
	}
}

// startSandbox starts serve's sandbox of opts as the kernel allows it,
// after checking its first workspace's, sets what every child protects,
// and warns where the sandbox leaves the host token or the user's
// services open. It returns the sandbox in force.
func (d *daemon) startSandbox(opts serveOptions) (sandboxInForce, error) {
	if c := opts.FirstWorkspaceSandbox; c != nil {
		// What the first workspace's file asks of the kernel stops the
		// start as the base would; its fallback warning is the base's.
		if _, err := startSandbox(*c, slog.New(slog.DiscardHandler)); err != nil {
			return sandboxInForce{}, err
		}
	}
	sandbox, err := startSandbox(opts.Sandbox, d.obs.log)
	if err != nil {
		return sandboxInForce{}, err
	}
	if sandbox.Config.on() {
		// What every child protects, as /capabilities reports it; each
		// child adds its sessions' workspaces' (sandbox_protect.go).
		o := opts.SessionSettings.Options
		o.Workspace = ""
		sandbox.Config.Trusted = trustedProtect(trustedSources{Settings: settingsLayers(opts.SessionSettings.Sources, o),
			SystemPrompt: opts.SystemPrompt.File, Secrets: sandbox.Config.Private, Home: d.sys.env.lookup("HOME")})
	}
	warnUserServices(sandbox, d.sys.env, d.obs.log)
	// The sandbox is what keeps the host token from tools (DESIGN.md §2);
	// a kernel without Landlock has already been warned about.
	if opts.Guard.required() && opts.TokenFile != "" && !sandbox.Config.on() && sandbox.Config.Explicit {
		d.obs.log.Warn("sandbox off: every tool can read the host token file and act as a host; keep --sandbox workspace, the default", "tokenFile", opts.TokenFile)
	}
	return sandbox, nil
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
	sessions := slices.Collect(maps.Values(d.sessions))
	chans := slices.Collect(maps.Keys(d.chans))
	d.mu.Unlock()

	for _, s := range sessions {
		s.cancelActive(cancelReasonShutdown)
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

// hupWatch is a log writer that reports the result of each SIGHUP's
// handshake on results (logHUPAccepted or logHUPFailed), dropping it when
// nobody waits. It lets the demo, which runs serve in its own process,
// wait for serve to accept the provider it restarted.
type hupWatch struct{ results chan string }

func (w hupWatch) Write(p []byte) (int, error) {
	for _, msg := range [...]string{logHUPAccepted, logHUPFailed} {
		if bytes.Contains(p, []byte(msg)) {
			select {
			case w.results <- msg:
			default:
			}
		}
	}
	return len(p), nil
}

// rehandshakeSelf sends SIGHUP to this process, whose serve runs the
// provider handshake again, and waits for the result w reports.
func (w hupWatch) rehandshakeSelf(ctx context.Context, within time.Duration) error {
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		return fmt.Errorf("send SIGHUP to serve: %w", err)
	}
	select {
	case msg := <-w.results:
		if msg != logHUPAccepted {
			return errors.New("serve's handshake with the restarted provider failed")
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("serve did not run its handshake within %v of SIGHUP", within)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flagAllowTokenlessLoopback restores tokenless loopback in required mode.
const flagAllowTokenlessLoopback = "allow-tokenless-loopback"

// flagRequireAuth makes GET /health need the host token on loopback too.
const flagRequireAuth = "require-auth"

// hostTokenBytes is the size of a generated host token: 256 random bits,
// sent as 64 hex digits.
const hostTokenBytes = 32

// A generated token without --token-file goes to a file of this name in a
// fresh directory (mode 0700) under hostTokenBase; both are removed at exit.
const (
	hostTokenDirPattern   = "acpguard-serve-*"
	hostTokenFileName     = "host-token"
	hostTokenAnnouncement = "acpguard serve: host token in "
	// sharedMemoryDir is the tmpfs every Linux system mounts for POSIX
	// shared memory, writable by all and sticky, as the temporary
	// directory is.
	sharedMemoryDir = "/dev/shm"
	accessWrite     = 2 // W_OK for access(2)
)

// hostToken is the host token of a starting serve as the operator sees it.
type hostToken struct {
	file      string // the token file to announce, "" none
	removeDir string // a fresh directory to remove at exit, "" none
}

// prepareHostToken generates the host token when opts asks for one, writes
// it to its file and puts it in opts.Token. It warns once when required mode
// runs without a host token. The caller calls cleanup at exit.
func prepareHostToken(opts *serveOptions, env *procEnv, log *slog.Logger) (*hostToken, error) {
	ht := &hostToken{file: opts.TokenFile}
	if opts.GenerateToken {
		tok := randomHex(hostTokenBytes)
		path := opts.TokenFile
		if path == "" {
			dir, err := os.MkdirTemp(hostTokenBase(env), hostTokenDirPattern)
			if err != nil {
				return nil, fmt.Errorf("create a directory for the host token: %w; give --%s FILE", err, flagHostTokenFile)
			}
			ht.removeDir = dir
			path = filepath.Join(dir, hostTokenFileName)
		}
		if err := createSecretFile(flagHostTokenFile, path, tok); err != nil {
			ht.cleanup()
			return nil, err
		}
		opts.Token, opts.TokenFile, ht.file = tok, path, path
		if err := opts.hideSecret(path); err != nil {
			ht.cleanup()
			return nil, err
		}
	}
	if opts.TokenOnCommandLine {
		log.Warn("host token given with --token: every local process can read serve's command line in /proc, the tools of this daemon included; give it in " + envServerToken + " or --" + flagHostTokenFile)
	}
	if opts.Guard.required() && opts.Token == "" && opts.AllowTokenlessLoopback {
		log.Warn("required mode without a host token (--" + flagAllowTokenlessLoopback + "): every local process, the tools of this daemon included, can act as a host")
	}
	return ht, nil
}

// hostTokenBase is where a generated host token's directory goes:
// $XDG_RUNTIME_DIR; else the user's runtime directory that the login
// manager makes (/run/user/UID, owned by the user, mode 0700) when the
// variable was not passed on; else the shared memory directory (a sticky
// tmpfs, so the token never reaches a disk); else the system's temporary
// directory. Hiding the token from tools costs a Landlock rule for every
// entry of every directory on its way (sandbox_hide.go), which in the
// temporary directory of a long-running machine can be thousands.
func hostTokenBase(env *procEnv) string {
	if d := env.lookup(envRuntimeDir); filepath.IsAbs(d) {
		return d
	}
	var st syscall.Stat_t
	d := filepath.Join(userRuntimeDirs, strconv.Itoa(os.Geteuid()))
	if syscall.Lstat(d, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR &&
		st.Uid == uint32(os.Geteuid()) && st.Mode&secretFileGroupOtherBits == 0 {
		return d
	}
	if syscall.Lstat(sharedMemoryDir, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR &&
		st.Mode&syscall.S_ISVTX != 0 && syscall.Access(sharedMemoryDir, accessWrite) == nil {
		return sharedMemoryDir
	}
	return os.TempDir()
}

// hideSecret hides the secret file path, made at start, from the tools of
// every child, as a secret file named by a flag is (DESIGN.md §5).
func (o *serveOptions) hideSecret(path string) error {
	if o.SandboxFlags != nil && !slices.Contains(o.SandboxFlags.secrets, path) {
		o.SandboxFlags.secrets = append(o.SandboxFlags.secrets, path)
	}
	for _, c := range []*sandboxConfig{&o.Sandbox, o.FirstWorkspaceSandbox} {
		if c != nil && c.on() && !slices.Contains(c.Hide, path) {
			c.Hide = append(slices.Clone(c.Hide), path)
		}
	}
	if err := o.Sandbox.checkHidden(o.Workspaces...); err != nil {
		return err
	}
	return o.Sandbox.checkHideWays()
}

// announce prints the token file's path on its own line, after the
// listening line that hosts parse.
func (ht *hostToken) announce(w io.Writer) {
	if ht.file != "" {
		fmt.Fprintf(w, "%s%s\n", hostTokenAnnouncement, ht.file)
	}
}

// cleanup removes a token file serve generated in a fresh directory; a
// token file named by --token-file stays for the next start to read.
func (ht *hostToken) cleanup() {
	if ht.removeDir != "" {
		os.RemoveAll(ht.removeDir)
	}
}
