// config.go owns the command line of each subcommand: its flag set, parsed
// with the environment and the settings files into the options type its
// command declares beside its code (acpOptions, serveOptions, ...). The
// flags acp and serve share make their guard, log, settings and sandbox
// options in one function (sharedFlags.resolve); the sandbox flags are
// config_sandbox.go's, the usage config_usage.go's. Only the configuration
// files parse flags.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Provider timeout bounds in milliseconds (DESIGN.md §6).
const (
	minGuardTimeoutMs     = 100
	maxGuardTimeoutMs     = 30000
	defaultGuardTimeoutMs = 3000
	// A provider started together with serve or acp listens within a few
	// seconds; the startup wait takes the timeout's form and bounds.
	defaultGuardStartupWaitMs = 10000
)

// Default loopback address of serve (the provider's is defaultProviderListen).
const (
	defaultServeHostname = "127.0.0.1"
	defaultServePort     = "4170"
)

// warnUnguarded prints the one warning line of serve and acp in off mode
// (DESIGN.md §1: off mode makes no policy decision at all), unless the
// operator chose off explicitly (given: --external-tool-guard-mode was on
// the command line). With --log-format json the line is a JSON log record,
// so a log reader parses it; --log-level never hides it. Off mode's
// behaviour is otherwise unchanged.
func warnUnguarded(w io.Writer, cmd string, g guardConfig, given, logJSON bool) {
	if g.Mode != guardModeOff || given {
		return
	}
	msg := fmt.Sprintf("no external tool guard: every tool call the approval mode allows runs without a policy decision (start a provider and pass --%s required; pass --%s=off to silence this)",
		flagGuardMode, flagGuardMode)
	if logJSON {
		newLogger(w, true, slog.LevelWarn).Warn(msg, "command", cmd)
		return
	}
	fmt.Fprintf(w, "acpguard %s: warning: %s\n", cmd, msg)
}

// parseEndpoint validates --external-tool-guard-endpoint: an origin-only
// loopback HTTP(S) endpoint (loopbackEndpoint).
func parseEndpoint(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, usagef("--%s %q: required when --%s is %s", flagGuardEndpoint, raw, flagGuardMode, guardModeRequired)
	}
	u, rule := loopbackEndpoint(raw)
	if rule != "" {
		return nil, usagef("--%s %q: %s", flagGuardEndpoint, raw, rule)
	}
	return u, nil
}

// parseListen validates the provider's --listen: a loopback address
// (loopbackListen).
func parseListen(raw string) (loopbackAddr, error) {
	a, rule := loopbackListen(raw)
	if rule != "" {
		return loopbackAddr{}, usagef("--listen %q: %s", raw, rule)
	}
	return a, nil
}

// parseHostname validates serve's --hostname (bindHostname).
func parseHostname(raw string) (bindAddr, error) {
	a, rule := bindHostname(raw)
	if rule != "" {
		return bindAddr{}, usagef("--hostname %q: %s", raw, rule)
	}
	return a, nil
}

// parseGuardMillis validates a guard flag of milliseconds: --external-tool-guard-timeout-ms
// or --external-tool-guard-startup-wait-ms. Only plain
// decimal digits are an integer here: "+200", " 200", "2e2" and "0x64" are not.
func parseGuardMillis(flag, raw string) (time.Duration, error) {
	n, ok := parseDigits[int](raw)
	if !ok || n < minGuardTimeoutMs || n > maxGuardTimeoutMs {
		return 0, usagef("--%s %q: must be an integer from %d through %d", flag, raw, minGuardTimeoutMs, maxGuardTimeoutMs)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseToken validates the guard token from QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
// and returns it trimmed. Its errors never contain the value.
func parseToken(raw string) (string, error) {
	return parseSecret(envGuardToken, raw)
}

// onceValue is a string flag that may be given at most once, so that a
// repeated --external-tool-guard-mode cannot let a later "off" quietly win.
type onceValue struct {
	value string
	count int
}

func (v *onceValue) String() string {
	if v == nil {
		return ""
	}
	return v.value
}

func (v *onceValue) Set(s string) error {
	v.value = s
	v.count++
	return nil
}

func onceFlag(fs *flag.FlagSet, name, def string) *onceValue {
	v := &onceValue{value: def}
	fs.Var(v, name, "")
	return v
}

// listValue is a repeatable string flag.
type listValue []string

func (l *listValue) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *listValue) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// guardFlags are the guard flags of a subcommand, not yet validated.
type guardFlags struct {
	mode, endpoint, timeout *onceValue
	startupWait             *onceValue
	tokenFile               *onceValue // --external-tool-guard-token-file
}

// addGuardFlags registers the guard flags on fs.
func addGuardFlags(fs *flag.FlagSet) guardFlags {
	return guardFlags{
		mode:        onceFlag(fs, flagGuardMode, guardModeOff),
		endpoint:    onceFlag(fs, flagGuardEndpoint, ""),
		timeout:     onceFlag(fs, flagGuardTimeout, strconv.Itoa(defaultGuardTimeoutMs)),
		startupWait: onceFlag(fs, flagGuardStartupWait, strconv.Itoa(defaultGuardStartupWaitMs)),
		tokenFile:   onceFlag(fs, flagGuardTokenFile, ""),
	}
}

// resolve validates the flags and the guard token from env or from
// --external-tool-guard-token-file; both at once is refused in every mode.
// In off mode the endpoint, the timeout and the token (the file is not even
// read) are neither validated nor kept.
func (g guardFlags) resolve(env *procEnv) (guardConfig, error) {
	if g.tokenFile.count > 0 && env.guardTokenSet {
		return guardConfig{}, usagef("--%s %q and %s: both set; give the provider token one way, the file or the variable", flagGuardTokenFile, g.tokenFile.value, envGuardToken)
	}
	switch g.mode.value {
	case guardModeOff:
		return guardConfig{Mode: guardModeOff}, nil
	case guardModeRequired:
	default:
		return guardConfig{}, usagef("--%s %q: must be %s or %s", flagGuardMode, g.mode.value, guardModeOff, guardModeRequired)
	}
	endpoint, err := parseEndpoint(g.endpoint.value)
	if err != nil {
		return guardConfig{}, err
	}
	timeout, err := parseGuardMillis(flagGuardTimeout, g.timeout.value)
	if err != nil {
		return guardConfig{}, err
	}
	wait, err := parseGuardMillis(flagGuardStartupWait, g.startupWait.value)
	if err != nil {
		return guardConfig{}, err
	}
	var token string
	switch {
	case g.tokenFile.count > 0:
		token, err = readSecretFile(flagGuardTokenFile, g.tokenFile.value)
	case !env.guardTokenSet:
		return guardConfig{}, usagef("%s: must be set when --%s is %s (or give --%s FILE)", envGuardToken, flagGuardMode, guardModeRequired, flagGuardTokenFile)
	default:
		token, err = parseToken(env.guardToken)
	}
	if err != nil {
		return guardConfig{}, err
	}
	return guardConfig{Mode: guardModeRequired, Endpoint: endpoint, Timeout: timeout, Token: token, StartupWait: wait}, nil
}

// sharedFlags are the flags acp and serve share: the guard, the settings
// files, the log, the model key file, the system prompt file, the slash
// commands and the sandbox.
type sharedFlags struct {
	guard                  guardFlags
	settings               *onceValue
	noUser, trustWorkspace *bool
	slash, disabledSlash   listValue
	logFormat, logLevel    *onceValue
	modelKeyFile           *onceValue
	systemPromptFile       *onceValue
	sandbox                *sandboxFlags
}

// addSharedFlags registers the shared flags on fs.
func addSharedFlags(fs *flag.FlagSet) *sharedFlags {
	f := &sharedFlags{
		guard:            addGuardFlags(fs),
		settings:         onceFlag(fs, "settings", ""),
		noUser:           fs.Bool(flagNoUserSettings, false, ""),
		trustWorkspace:   fs.Bool(flagTrustWorkspaceSettings, false, ""),
		logFormat:        onceFlag(fs, "log-format", "text"),
		logLevel:         onceFlag(fs, "log-level", "info"),
		modelKeyFile:     onceFlag(fs, flagModelKeyFile, ""),
		systemPromptFile: onceFlag(fs, flagSystemPromptFile, ""),
		sandbox:          addSandboxFlags(fs),
	}
	fs.Var(&f.slash, "allow-slash-command", "")
	fs.Var(&f.disabledSlash, "disabled-slash-commands", "")
	return f
}

// sharedOptions are the guard, log, settings and sandbox options acp and
// serve build alike, once, from their shared flags (sharedFlags.resolve).
type sharedOptions struct {
	guard      guardConfig
	guardGiven bool // --external-tool-guard-mode on the command line (warnUnguarded)
	// required is required mode or a managed child: the settings' and the
	// sandbox's defaults are required mode's.
	required bool
	logJSON  bool
	logLevel slog.Level
	// settingsFile is --settings, absolute ("" none); load is what the
	// settings files said, read with src and so.
	settingsFile string
	load         *settingsLoad
	src          settingsSources
	so           settingsLoadOptions
	sandbox      *sandboxChoice
}

// resolve builds the shared options from f and env: the guard, the log,
// the settings files of workspace ("" none: every layer but a
// workspace's), the .env files found from dotEnvDir ("" the user's only)
// set into env, and the sandbox flags, checked once. managed is a managed
// child's; servedChild is serve's child, whose model is serve's. The guard
// token and model key files, and each of secrets, are hidden from tools.
func (f *sharedFlags) resolve(env *procEnv, workspace string, managed bool, dotEnvDir string, servedChild bool, secrets ...*onceValue) (sharedOptions, error) {
	hideSecretFiles(f.sandbox, append([]*onceValue{f.guard.tokenFile, f.modelKeyFile}, secrets...)...)
	var o sharedOptions
	var err error
	if o.guard, err = f.guard.resolve(env); err != nil {
		return sharedOptions{}, err
	}
	o.guardGiven, o.required = f.guard.mode.count > 0, o.guard.required() || managed
	if o.logJSON, o.logLevel, err = parseLogFlags(f.logFormat.value, f.logLevel.value); err != nil {
		return sharedOptions{}, err
	}
	o.src = settingsSourcesOf(env)
	o.so = settingsLoadOptions{Workspace: workspace, NoUser: *f.noUser, TrustWorkspace: *f.trustWorkspace, Required: o.required}
	if o.settingsFile, o.load, err = parseSettingsFile(f.settings.value, o.src, o.so); err != nil {
		return sharedOptions{}, err
	}
	if !*f.noUser {
		dot, err := f.applyDotEnv(env, o, dotEnvDir, servedChild)
		if err != nil {
			return sharedOptions{}, err
		}
		// $VAR in the settings files sees what the .env files set, at
		// start as at each session's reading.
		if len(dot.Vars) > 0 {
			if o.settingsFile, o.load, err = parseSettingsFile(f.settings.value, o.src, o.so); err != nil {
				return sharedOptions{}, err
			}
		}
		o.load.DotEnv = dot
	}
	if o.sandbox, err = f.sandbox.check(); err != nil {
		return sharedOptions{}, err
	}
	return o, nil
}

// applyDotEnv reads the .env files found from dir ("" the user's only)
// with the trust of o's settings and sets in env what they may set, the
// names env has unset or empty only, as Qwen Code does. A file that gave
// the model key is hidden from tools like a key file.
func (f *sharedFlags) applyDotEnv(env *procEnv, o sharedOptions, dir string, servedChild bool) (*dotEnvLoad, error) {
	folder := o.load.Trust
	if dir != "" {
		var err error
		if folder, err = decideFolderTrust(folder.Enabled, o.src.TrustedFolders, dir); err != nil {
			return nil, &usageError{err}
		}
	}
	l, err := loadDotEnv(o.src, dotEnvOptions{Dir: dir, Required: o.required, TrustWorkspace: *f.trustWorkspace,
		Folder: folder, NoModelKey: servedChild, Excluded: o.load.ExcludedEnvVars})
	if err != nil {
		return nil, &usageError{err}
	}
	for _, v := range l.Vars {
		if env.setUnset(v.Name, v.Value) && v.Name == envModelKey {
			f.sandbox.addSecret(v.File)
		}
	}
	return l, nil
}

// newFlagSet returns a flag set that prints nothing: parseFlags writes the
// usage and the errors.
func newFlagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("acpguard "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args for the subcommand cmd. --help and -h print usage to
// stdout and return errHelp; anything malformed is a usage error naming the flag.
func parseFlags(fs *flag.FlagSet, cmd, usage string, args []string, sys *system) error {
	hint := fmt.Sprintf(`run "acpguard %s --help"`, cmd)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(sys.stdout, usage)
		return errHelp
	case err != nil:
		return usagef("%s; %s", flagErrorText(err, fs), hint)
	case fs.NArg() > 0:
		return usagef("unexpected argument %q; %s", fs.Arg(0), hint)
	}
	fs.Visit(func(f *flag.Flag) {
		if v, ok := f.Value.(*onceValue); ok && v.count > 1 && err == nil {
			err = usagef("flag %q given more than once; %s", "--"+f.Name, hint)
		}
	})
	return err
}

// flagErrorText rewrites the flag package's messages in this program's
// spelling of flags, offering the nearest of fs's flags for an unknown one.
// None of them carries the value of a string flag.
func flagErrorText(err error, fs *flag.FlagSet) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := closestKey(name, names); near != "" {
			return fmt.Sprintf("unknown flag %q (did you mean %q?)", "--"+name, "--"+near)
		}
		return fmt.Sprintf("unknown flag %q", "--"+name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("flag %q needs a value", "--"+name)
	}
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		if value, name, ok := strings.Cut(rest, " for -"); ok {
			name, _, _ = strings.Cut(name, ":")
			return fmt.Sprintf("flag %q: invalid boolean value %s", "--"+name, value)
		}
	}
	if arg, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return fmt.Sprintf("bad flag syntax %q", arg)
	}
	return msg
}

func parseProviderArgs(args []string, sys *system) (providerOptions, error) {
	fs := newFlagSet("provider")
	listen := onceFlag(fs, "listen", defaultProviderListen)
	policy := onceFlag(fs, "policy", "")
	audit := onceFlag(fs, "audit", "")
	auditArgs := fs.Bool("audit-arguments", false, "")
	shadow := fs.Bool("shadow", false, "")
	logFormat := onceFlag(fs, "log-format", "text")
	logLevel := onceFlag(fs, "log-level", "info")
	tlsCert := onceFlag(fs, "tls-cert", "")
	tlsKey := onceFlag(fs, "tls-key", "")
	opa := onceFlag(fs, "opa", "")
	if err := parseFlags(fs, "provider", providerUsage, args, sys); err != nil {
		return providerOptions{}, err
	}
	logJSON, level, err := parseLogFlags(logFormat.value, logLevel.value)
	if err != nil {
		return providerOptions{}, err
	}
	if (tlsCert.value == "") != (tlsKey.value == "") {
		return providerOptions{}, usagef("--tls-cert %q, --tls-key %q: give both to serve HTTPS, or neither", tlsCert.value, tlsKey.value)
	}
	addr, err := parseListen(listen.value)
	if err != nil {
		return providerOptions{}, err
	}
	var opaURL *url.URL
	switch {
	case opa.value != "" && policy.value != "":
		return providerOptions{}, usagef("--opa %q, --policy %q: give one: the policy file or Open Policy Agent decides", opa.value, policy.value)
	case opa.value != "":
		if opaURL, err = parseOPAURL(opa.value); err != nil {
			return providerOptions{}, err
		}
	case policy.value == "":
		return providerOptions{}, usagef(`--policy "": a policy file is required`)
	}
	env := envOf(sys)
	if !env.guardTokenSet {
		return providerOptions{}, usagef("%s: must be set: the provider accepts only clients that send this bearer token", envGuardToken)
	}
	token, err := parseToken(env.guardToken)
	if err != nil {
		return providerOptions{}, err
	}
	return providerOptions{
		Listen:         addr,
		PolicyFile:     policy.value,
		AuditPath:      audit.value,
		AuditArguments: *auditArgs,
		Token:          token,
		Shadow:         *shadow,
		LogJSON:        logJSON,
		LogLevel:       level,
		TLSCert:        tlsCert.value,
		TLSKey:         tlsKey.value,
		OPA:            opaURL,
	}, nil
}

func parseDemoArgs(args []string, sys *system) (demoOptions, error) {
	fs := newFlagSet("demo")
	keep := fs.Bool("keep", false, "")
	if err := parseFlags(fs, "demo", demoUsage, args, sys); err != nil {
		return demoOptions{}, err
	}
	return demoOptions{Keep: *keep}, nil
}

// parseLogFlags validates --log-format text|json and --log-level
// debug|info|warn|error.
func parseLogFlags(format, level string) (logJSON bool, l slog.Level, err error) {
	switch format {
	case "text":
	case "json":
		logJSON = true
	default:
		return false, 0, usagef("--log-format %q: must be text or json", format)
	}
	switch level {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		return false, 0, usagef("--log-level %q: must be debug, info, warn or error", level)
	}
	return logJSON, l, nil
}

// providerCasesSuffix names the cases file written beside a policy:
// examples/policy.json is checked against examples/policy.cases.json.
const providerCasesSuffix = ".cases.json"

func parseProviderCheckArgs(args []string, sys *system) (providerCheckOptions, error) {
	fs := newFlagSet("provider check")
	policy := onceFlag(fs, "policy", "")
	cases := onceFlag(fs, "cases", "")
	explain := onceFlag(fs, "explain", "")
	if err := parseFlags(fs, "provider check", providerCheckUsage, args, sys); err != nil {
		return providerCheckOptions{}, err
	}
	if policy.value == "" {
		return providerCheckOptions{}, usagef(`--policy "": a policy file is required`)
	}
	if cases.count > 0 && cases.value == "" {
		return providerCheckOptions{}, usagef(`--cases "": must name a file`)
	}
	if explain.count > 0 && strings.TrimSpace(explain.value) == "" {
		return providerCheckOptions{}, usagef(`--explain "": want a shell command or a call such as '{"tool":"run_shell_command","arguments":{"command":"git status"}}'`)
	}
	if explain.count > 0 && cases.count > 0 {
		return providerCheckOptions{}, usagef("--explain and --cases: both given; explain one call, or check a cases file")
	}
	opts := providerCheckOptions{PolicyFile: policy.value, CasesFile: cases.value, CasesGiven: cases.count > 0,
		Explain: explain.value, ExplainGiven: explain.count > 0}
	if !opts.CasesGiven {
		opts.CasesFile = strings.TrimSuffix(policy.value, ".json") + providerCasesSuffix
	}
	return opts, nil
}

// modelKeyFromFile reads --model-key-file when it was given: the same file
// rules as every secret file, and refused together with OPENAI_API_KEY.
func modelKeyFromFile(file *onceValue, env *procEnv) (key string, given bool, err error) {
	if file.count == 0 {
		return "", false, nil
	}
	if env.modelKeySet {
		return "", false, usagef("--%s %q and %s: both set; give the model key one way, the file or the variable", flagModelKeyFile, file.value, envModelKey)
	}
	key, err = readSecretFile(flagModelKeyFile, file.value)
	return key, err == nil, err
}

func parseACPArgs(args []string, sys *system) (acpOptions, error) {
	fs := newFlagSet("acp")
	shared := addSharedFlags(fs)
	modelName := onceFlag(fs, "model", "")
	permTimeout := onceFlag(fs, "permission-response-timeout-ms", "0")
	stateDir := onceFlag(fs, flagStateDir, "")
	if err := parseFlags(fs, "acp", acpUsage, args, sys); err != nil {
		return acpOptions{}, err
	}
	env := envOf(sys)
	// serve's children save nothing unless told to: session/load is not
	// part of the host API.
	servedChild := env.privateGuard != "" || modelName.value == modelParent
	sd, sdGiven, err := parseStateDir(stateDir, env, servedChild)
	if err != nil {
		return acpOptions{}, err
	}
	ms, ok := parseDigits[int](permTimeout.value)
	if !ok || ms > maxPermissionTimeoutMs {
		return acpOptions{}, usagef("--permission-response-timeout-ms %q: must be an integer from 0 through %d", permTimeout.value, maxPermissionTimeoutMs)
	}
	return resolveACPOptions(shared, env, acpOptions{Model: modelName.value, PermissionTimeout: time.Duration(ms) * time.Millisecond,
		StateDir: sd, StateDirGiven: sdGiven})
}

// resolveACPOptions completes opts, which holds what the command's own
// flags chose (the model, the state directory, ...), with the options of
// the shared flags, parsed: the guard, the log, the settings files of the
// current directory, the sandbox, the slash commands, the system prompt and
// the model. acp and run build their agent's options here alike.
func resolveACPOptions(shared *sharedFlags, env *procEnv, opts acpOptions) (acpOptions, error) {
	// A managed child runs only under serve in required mode. Its
	// workspace, as a standalone agent's, is the directory it starts in.
	wd, err := os.Getwd()
	if err != nil {
		return acpOptions{}, fmt.Errorf("find the current directory, where the .env files are looked for: %w", err)
	}
	// serve's child starts in no workspace and takes only the user's .env.
	servedChild := env.privateGuard != "" || opts.Model == modelParent
	if servedChild {
		wd = ""
	}
	sh, err := shared.resolve(env, "", env.privateGuard != "", wd, servedChild)
	if err != nil {
		return acpOptions{}, err
	}
	opts.Guard, opts.GuardModeGiven, opts.LogJSON, opts.LogLevel = sh.guard, sh.guardGiven, sh.logJSON, sh.logLevel
	if err := loadACPSettings(&opts, sh); err != nil {
		return acpOptions{}, err
	}
	st := opts.Settings
	if opts.Sandbox, err = sh.sandbox.resolve(st, opts.SettingsLoad.originOf("tools", sh.settingsFile), sh.required); err != nil {
		return acpOptions{}, err
	}
	if err := opts.Sandbox.checkHideWays(); err != nil {
		return acpOptions{}, err
	}
	opts.SessionSandbox = sh.sandbox.forSessions(sh.settingsFile, sh.required)
	if err := resolveACPSlashCommands(&opts, shared.slash, shared.disabledSlash); err != nil {
		return acpOptions{}, err
	}
	if opts.SystemPrompt, err = resolveSystemPrompt(shared.systemPromptFile.value, env, st); err != nil {
		return acpOptions{}, err
	}
	opts.SessionSystemPrompt = systemPromptForSessions(shared.systemPromptFile.value, env)
	if err := resolveACPModel(&opts, shared.modelKeyFile, env); err != nil {
		return acpOptions{}, err
	}
	return opts, nil
}

// parseStateDir resolves --state-dir: "off" saves nothing; unset, the
// default directory, except for serve's children.
func parseStateDir(v *onceValue, env *procEnv, servedChild bool) (dir string, given bool, err error) {
	switch {
	case v.count == 0 && servedChild:
		return "", false, nil
	case v.count == 0:
		return defaultStateDir(env), false, nil
	case v.value == stateDirOff:
		return "", true, nil
	case v.value == "":
		return "", true, usagef("--%s %q: want a directory or %q", flagStateDir, v.value, stateDirOff)
	}
	abs, err := filepath.Abs(v.value)
	if err != nil {
		return "", true, usagef("--%s %q: %v", flagStateDir, v.value, err)
	}
	return abs, true, nil
}

// loadACPSettings sets in opts the settings files of the start directory,
// over the layers sh read, and the way each session finds its own.
func loadACPSettings(opts *acpOptions, sh sharedOptions) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the current directory, the workspace of the settings files: %w", err)
	}
	// The layers but the workspace's were checked by sh, so a bad one
	// stopped the start; each session reads its own workspace's file at
	// session/new, where a bad one fails that session only.
	so := sh.so
	so.Operator, so.Workspace = sh.settingsFile, wd
	opts.SettingsSources, opts.SettingsOptions = sh.src, so
	// The sandbox is the process's: it takes the start directory's
	// workspace file too, when that loads.
	load := sh.load
	if wsLoad, err := loadSettingsFiles(sh.src, so); err == nil {
		wsLoad.DotEnv, load = sh.load.DotEnv, wsLoad
	}
	opts.Settings, opts.SettingsLoad = load.Settings, load
	return nil
}

// resolveACPSlashCommands sets the slash commands of opts: those allowed,
// and those disabled, added to the settings' list.
func resolveACPSlashCommands(opts *acpOptions, slash, disabledSlash listValue) error {
	var err error
	if opts.AllowSlashCommands, err = parseSlashCommands(slash); err != nil {
		return err
	}
	disabled, err := parseDisabledSlashCommands(disabledSlash)
	if err != nil {
		return err
	}
	// The flag adds to the settings' list, as Qwen Code's does.
	opts.DisabledSlashCommands = disabled
	opts.Settings.SlashCommands.Disabled = append(opts.Settings.SlashCommands.Disabled, disabled...)
	return nil
}

// resolveACPModel sets the model of opts, --model or else the environment's
// choice, with the key of --model-key-file or the environment's, and
// checks that an OpenAI-compatible model can be made.
func resolveACPModel(opts *acpOptions, modelKeyFile *onceValue, env *procEnv) error {
	modelKey, modelKeyGiven, err := modelKeyFromFile(modelKeyFile, env)
	if err != nil {
		return err
	}
	if !modelKeyGiven {
		modelKey = env.modelKey
	}
	if opts.Model == "" {
		opts.Model = modelScripted
		if env.lookup(envModelBaseURL) != "" {
			opts.Model = modelOpenAI
		}
	}
	switch opts.Model {
	case modelScripted, modelParent:
	case modelOpenAI:
		// A model name the command chose (run's --model) wins over OPENAI_MODEL.
		opts.OpenAI = openAIConfig{BaseURL: env.lookup(envModelBaseURL), APIKey: modelKey, Model: cmp.Or(opts.OpenAI.Model, env.lookup(envModelName))}
		opts.ModelNameFixed = opts.OpenAI.Model != ""
		if opts.OpenAI.Model == "" {
			opts.OpenAI.Model = opts.Settings.Model.Name
		}
		if opts.OpenAI.BaseURL == "" {
			return usagef("--model openai needs %s", envModelBaseURL)
		}
		if _, err := newOpenAIModel(opts.OpenAI); err != nil {
			return &usageError{err}
		}
	default:
		return usagef("--model %q: want %s, %s or %s", opts.Model, modelScripted, modelOpenAI, modelParent)
	}
	return nil
}

// serveFlags are serve's own flags, beyond those it shares with acp.
type serveFlags struct {
	hostname, port, token, tokenFile, decisionLog, maxPending *onceValue
	workspaces                                                *listValue
	tokenless, requireAuth, decisionLogArgs, noWeb, open      *bool
	limits                                                    serveLimitFlags
}

// addServeFlags registers serve's own flags on fs: serve's and doctor's.
func addServeFlags(fs *flag.FlagSet) serveFlags {
	f := serveFlags{
		hostname:   onceFlag(fs, "hostname", defaultServeHostname),
		port:       onceFlag(fs, "port", defaultServePort),
		workspaces: &listValue{},
	}
	fs.Var(f.workspaces, "workspace", "")
	f.token = onceFlag(fs, "token", "")
	f.tokenFile = onceFlag(fs, flagHostTokenFile, "")
	f.tokenless = fs.Bool(flagAllowTokenlessLoopback, false, "")
	f.requireAuth = fs.Bool(flagRequireAuth, false, "")
	f.decisionLog = onceFlag(fs, "decision-log", "")
	f.decisionLogArgs = fs.Bool("decision-log-arguments", false, "")
	f.noWeb = fs.Bool(flagNoWeb, false, "")
	f.open = fs.Bool(flagOpen, false, "")
	f.maxPending = onceFlag(fs, "max-pending-prompts-per-session", strconv.Itoa(defaultMaxPendingPrompts))
	f.limits = addServeLimitFlags(fs)
	return f
}

func parseServeArgs(args []string, sys *system) (serveOptions, error) {
	fs := newFlagSet("serve")
	shared := addSharedFlags(fs)
	sf := addServeFlags(fs)
	hostname, port, token, tokenFile := sf.hostname, sf.port, sf.token, sf.tokenFile
	tokenless, requireAuth, decisionLog, maxPending, limits := sf.tokenless, sf.requireAuth, sf.decisionLog, sf.maxPending, sf.limits
	if err := parseFlags(fs, "serve", serveUsage, args, sys); err != nil {
		return serveOptions{}, err
	}
	env := envOf(sys)
	opts := serveOptions{DecisionLog: decisionLog.value, DecisionLogArguments: *sf.decisionLogArgs, NoWeb: *sf.noWeb, Open: *sf.open}
	if opts.NoWeb && opts.Open {
		return serveOptions{}, usagef("--%s and --%s: both given; --%s opens the console that --%s turns off", flagOpen, flagNoWeb, flagOpen, flagNoWeb)
	}
	var err error
	if opts.Limits, err = limits.resolve(); err != nil {
		return serveOptions{}, err
	}
	if opts.Hostname, err = parseHostname(hostname.value); err != nil {
		return serveOptions{}, err
	}
	if opts.Port, err = parsePort(port.value); err != nil {
		return serveOptions{}, usagef("--port %q: %v", port.value, err)
	}
	if opts.Workspaces, err = parseWorkspaces(*sf.workspaces); err != nil {
		return serveOptions{}, err
	}
	// serve reads the settings files of its first workspace at start, as a
	// check; each session's child reads those of the session's workspace
	// at session/new (DESIGN.md §10). The host token file is hidden too;
	// the decision log only with --decision-log-arguments: otherwise it
	// holds ids, names, digests and outcomes, no argument, and often lies
	// in a large directory such as /tmp, where hiding costs a Landlock rule
	// per entry (DESIGN.md §5). With the arguments, one session's tools
	// would read what another's calls carried.
	secrets := []*onceValue{tokenFile}
	if opts.DecisionLogArguments {
		secrets = append(secrets, decisionLog)
	}
	// serve's environment is every workspace's: no workspace's .env is
	// read into it; each child reads its own.
	sh, err := shared.resolve(env, opts.Workspaces[0], false, "", false, secrets...)
	if err != nil {
		return serveOptions{}, err
	}
	opts.Guard, opts.GuardModeGiven, opts.LogJSON, opts.LogLevel = sh.guard, sh.guardGiven, sh.logJSON, sh.logLevel
	opts.NoUserSettings, opts.TrustWorkspaceSettings = *shared.noUser, *shared.trustWorkspace
	base, err := loadServeSettings(&opts, sh)
	if err != nil {
		return serveOptions{}, err
	}
	if err := resolveServeSystemPrompt(&opts, shared.systemPromptFile.value, env); err != nil {
		return serveOptions{}, err
	}
	if err := resolveServeAuth(&opts, token, tokenFile, *tokenless, *requireAuth, env, hostname.value); err != nil {
		return serveOptions{}, err
	}
	if err := resolveServeModel(&opts, shared.modelKeyFile, env); err != nil {
		return serveOptions{}, err
	}
	if err := resolveServeSandbox(&opts, sh.sandbox, base); err != nil {
		return serveOptions{}, err
	}
	if err := resolveServePrompts(&opts, maxPending, shared.slash, shared.disabledSlash); err != nil {
		return serveOptions{}, err
	}
	return opts, nil
}

// resolveServeSystemPrompt sets the replacement system prompt serve gives
// every session: --system-prompt-file's (file) or the process
// environment's, none when a settings env block names it.
func resolveServeSystemPrompt(opts *serveOptions, file string, env *procEnv) error {
	var err error
	if opts.SystemPrompt, err = resolveSystemPrompt(file, env, opts.Settings); err != nil {
		return err
	}
	if systemPromptForSessions(file, env) != nil {
		// Named by a settings env block, not by the operator: checked above
		// for the first workspace; each child finds each session's own.
		opts.SystemPrompt = systemPromptSource{}
	}
	return nil
}

// resolveServeAuth sets the host token of opts and whether every request
// must carry it (--require-auth), which needs a token.
func resolveServeAuth(opts *serveOptions, token, tokenFile *onceValue, tokenless, requireAuth bool, env *procEnv, hostname string) error {
	if err := resolveHostToken(opts, token, tokenFile, tokenless, env, hostname, opts.Hostname.loopback); err != nil {
		return err
	}
	// As in Qwen Code, --require-auth without a host token does not start.
	if opts.RequireAuth = requireAuth; opts.RequireAuth && opts.Token == "" && !opts.GenerateToken {
		return usagef("--%s on --hostname %q: no host token is given; set --token, --%s or %s", flagRequireAuth, opts.Hostname.host, flagHostTokenFile, envServerToken)
	}
	return nil
}

// resolveHostToken decides serve's host token from the flags and env: the
// value of --token (which wins over QWEN_SERVER_TOKEN, as in Qwen Code) or
// of the variable; or --token-file, read when the file exists and generated
// at start when it does not. --token-file together with either of the
// others is refused. In required mode a loopback daemon with none of them
// gets a generated token unless --allow-tokenless-loopback is given.
func resolveHostToken(opts *serveOptions, token, tokenFile *onceValue, tokenless bool, env *procEnv, hostname string, loopback bool) error {
	var err error
	switch {
	case tokenFile.count > 0 && token.count > 0:
		return usagef("--%s %q and --token: both set; give the host token one way", flagHostTokenFile, tokenFile.value)
	case tokenFile.count > 0 && env.serverTokenSet:
		return usagef("--%s %q and %s: both set; give the host token one way", flagHostTokenFile, tokenFile.value, envServerToken)
	case tokenFile.count > 0:
		err = hostTokenFromFile(opts, tokenFile.value)
	// --token wins over QWEN_SERVER_TOKEN, as in Qwen Code.
	case token.count > 0:
		opts.Token, err = parseSecret("--token", token.value)
		opts.TokenOnCommandLine = true
	case env.serverTokenSet:
		opts.Token, err = parseSecret(envServerToken, env.serverToken)
	}
	if err != nil {
		return err
	}
	given := opts.Token != "" || opts.GenerateToken
	if tokenless {
		switch {
		case given:
			return usagef("--%s: a host token is also given (--token, --%s or %s); give one or the other", flagAllowTokenlessLoopback, flagHostTokenFile, envServerToken)
		case !loopback:
			return usagef("--%s: --hostname %q is not a loopback address, which always requires a host token", flagAllowTokenlessLoopback, hostname)
		}
		opts.AllowTokenlessLoopback = true
		return nil
	}
	// A non-loopback address needs a host token.
	if !loopback && !given {
		return usagef("--hostname %q: a non-loopback address requires --token, --%s or %s", hostname, flagHostTokenFile, envServerToken)
	}
	if !given && opts.Guard.required() {
		opts.GenerateToken = true
	}
	return nil
}

// hostTokenFromFile reads --token-file when the file exists; when nothing
// is there yet, serve generates the token into it at start.
func hostTokenFromFile(opts *serveOptions, path string) error {
	if path == "" {
		return usagef("--%s \"\": must name a file", flagHostTokenFile)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return usagef("--%s %q: %v", flagHostTokenFile, path, err)
	}
	exists, err := secretFileExists(flagHostTokenFile, abs)
	if err != nil {
		return err
	}
	opts.TokenFile = abs
	if !exists {
		opts.GenerateToken = true
		return nil
	}
	opts.Token, err = readSecretFile(flagHostTokenFile, abs)
	return err
}

// resolveServePrompts sets what bounds and opens each session's prompts:
// --max-pending-prompts-per-session, the slash commands allowed and those
// disabled.
func resolveServePrompts(opts *serveOptions, maxPending *onceValue, slash, disabledSlash listValue) error {
	n, ok := parseDigits[int](maxPending.value)
	if !ok || n < 1 || n > maxMaxPendingPrompts {
		return usagef("--max-pending-prompts-per-session %q: must be an integer from 1 through %d", maxPending.value, maxMaxPendingPrompts)
	}
	opts.MaxPendingPrompts = n
	var err error
	if opts.AllowSlashCommands, err = parseSlashCommands(slash); err != nil {
		return err
	}
	if opts.DisabledSlashCommands, err = parseDisabledSlashCommands(disabledSlash); err != nil {
		return err
	}
	return nil
}

// loadServeSettings sets in opts the settings files of its first
// workspace, as sh read them, and the way each session's child finds its
// own. It returns the base: the layers that are no workspace's file.
func loadServeSettings(opts *serveOptions, sh sharedOptions) (*settingsLoad, error) {
	opts.SettingsFile, opts.SettingsLoad, opts.Settings = sh.settingsFile, sh.load, sh.load.Settings
	// What serve gives its children is no workspace's: its own flags and
	// environment, over the layers that are no workspace's file, so that
	// one workspace's file never reaches another's sessions (DESIGN.md §10).
	so := sh.so
	so.Workspace, so.Operator = "", opts.SettingsFile
	base, err := loadSettingsFiles(sh.src, so)
	if err != nil {
		return nil, &usageError{err}
	}
	opts.SessionSettings.Sources, opts.SessionSettings.Options = sh.src, so
	return base, nil
}

// resolveServeModel sets opts' model from env and its settings, with the
// key of --model-key-file when one is given.
func resolveServeModel(opts *serveOptions, modelKeyFile *onceValue, env *procEnv) error {
	// serve reads the model key from the file into the place the variable's
	// value is kept, so it reaches what the variable reaches.
	modelKey, modelKeyGiven, err := modelKeyFromFile(modelKeyFile, env)
	if err != nil {
		return err
	}
	if modelKeyGiven {
		env.modelKey, env.modelKeySet = modelKey, true
	}
	if opts.Model, err = serveModelConfig(env, opts.Settings); err != nil {
		return err
	}
	opts.ModelNameFixed = env.lookup(envModelName) != ""
	return nil
}

// serveModelConfig is the model serve's children use, from serve's own
// environment, named as for acp: the scripted model without OPENAI_BASE_URL.
func serveModelConfig(env *procEnv, s *settings) (openAIConfig, error) {
	base := env.lookup(envModelBaseURL)
	if base == "" {
		return openAIConfig{}, nil
	}
	cfg := openAIConfig{BaseURL: base, APIKey: env.modelKey, Model: env.lookup(envModelName)}
	if cfg.Model == "" && s != nil {
		cfg.Model = s.Model.Name
	}
	if _, err := newOpenAIModel(cfg); err != nil {
		return openAIConfig{}, &usageError{err}
	}
	return cfg, nil
}

// resolveServeSandbox resolves opts' sandboxes from the sandbox flags: its
// first workspace's, as that workspace's sessions' child will, and the one
// serve reports and gives its children, from base.
func resolveServeSandbox(opts *serveOptions, sandbox *sandboxChoice, base *settingsLoad) error {
	// The first workspace's sandbox keys are checked as its sessions' child
	// will resolve them; the sandbox serve reports and gives its children
	// is the base, without any workspace's file.
	first, err := sandbox.resolve(opts.Settings, opts.SettingsLoad.originOf("tools", opts.SettingsFile), opts.Guard.required())
	if err != nil {
		return err
	}
	opts.FirstWorkspaceSandbox = &first
	if opts.Sandbox, err = sandbox.resolve(base.Settings, base.originOf("tools", opts.SettingsFile), opts.Guard.required()); err != nil {
		// Keys that confine nothing without a workspace that turns the
		// sandbox on: the base is off, and a session of a workspace that
		// does not turn it on is refused by its child with this error.
		opts.Sandbox = sandboxConfig{Profile: sandboxOff}
	}
	if err := opts.Sandbox.checkHidden(opts.Workspaces...); err != nil {
		return err
	}
	if err := opts.Sandbox.checkHideWays(); err != nil {
		return err
	}
	opts.SandboxFlags = sandbox.given()
	return nil
}

// serveLimitFlags are serve's limit flags, as given.
type serveLimitFlags struct {
	maxSessions, maxChildren, maxSubscribers, ringSize                 *onceValue
	initTimeout, promptDeadline, permTimeout, idleTimeout, eventMemory *onceValue
}

// addServeLimitFlags defines serve's limit flags on fs, with their defaults.
func addServeLimitFlags(fs *flag.FlagSet) serveLimitFlags {
	return serveLimitFlags{
		maxSessions:    onceFlag(fs, "max-sessions", strconv.Itoa(defaultMaxSessions)),
		maxChildren:    onceFlag(fs, "max-children", strconv.Itoa(defaultMaxChildren)),
		maxSubscribers: onceFlag(fs, "max-subscribers-per-session", strconv.Itoa(defaultMaxSubscribers)),
		ringSize:       onceFlag(fs, "event-ring-size", strconv.Itoa(defaultEventRingSize)),
		initTimeout:    onceFlag(fs, "initialize-timeout-ms", strconv.Itoa(defaultInitializeTimeoutMs)),
		promptDeadline: onceFlag(fs, "prompt-deadline-ms", "0"),
		permTimeout:    onceFlag(fs, "permission-response-timeout-ms", "0"),
		idleTimeout:    onceFlag(fs, "session-idle-timeout-ms", strconv.Itoa(defaultSessionIdleTimeoutMs)),
		eventMemory:    onceFlag(fs, "max-event-memory", strconv.Itoa(defaultMaxEventMemory)),
	}
}

// resolve validates the limit flags, each an integer or a byte count in
// its range.
func (f serveLimitFlags) resolve() (serveLimits, error) {
	l, err := parseServeLimits(f.maxSessions.value, f.maxSubscribers.value, f.ringSize.value,
		f.initTimeout.value, f.promptDeadline.value, f.permTimeout.value, f.idleTimeout.value)
	if err != nil {
		return serveLimits{}, err
	}
	n, ok := parseDigits[int](f.maxChildren.value)
	if !ok || n < 1 || n > maxMaxChildren {
		return serveLimits{}, usagef("--max-children %q: must be an integer from 1 through %d", f.maxChildren.value, maxMaxChildren)
	}
	l.MaxChildren = n
	if l.MaxEventMemory, err = parseByteCount("max-event-memory", f.eventMemory.value, minMaxEventMemory, maxMaxEventMemory); err != nil {
		return serveLimits{}, err
	}
	return l, nil
}

// parseServeLimits validates serve's limit flags, each an integer in its range.
func parseServeLimits(maxSessions, maxSubscribers, ringSize, initTimeout, promptDeadline, permTimeout, idleTimeout string) (serveLimits, error) {
	var l serveLimits
	var err error
	count := func(flag, raw string, lo, hi int) int {
		n, ok := parseDigits[int](raw)
		if err == nil && (!ok || n < lo || n > hi) {
			err = usagef("--%s %q: must be an integer from %d through %d", flag, raw, lo, hi)
		}
		return n
	}
	millis := func(flag, raw string, lo, hi int) time.Duration {
		return time.Duration(count(flag, raw, lo, hi)) * time.Millisecond
	}
	l.MaxSessions = count("max-sessions", maxSessions, 1, maxMaxSessions)
	l.MaxSubscribers = count("max-subscribers-per-session", maxSubscribers, 1, maxMaxSubscribers)
	l.EventRingSize = count("event-ring-size", ringSize, 1, maxEventRingSize)
	l.InitializeTimeout = millis("initialize-timeout-ms", initTimeout, minInitializeTimeoutMs, maxInitializeTimeoutMs)
	l.PromptDeadline = millis("prompt-deadline-ms", promptDeadline, 0, maxPromptDeadlineMs)
	l.PermissionTimeout = millis("permission-response-timeout-ms", permTimeout, 0, maxPermissionTimeoutMs)
	l.SessionIdleTimeout = millis("session-idle-timeout-ms", idleTimeout, minSessionIdleTimeoutMs, maxSessionIdleTimeoutMs)
	return l, err
}

// byteSuffixes are the binary multiples a byte count may end with.
var byteSuffixes = []struct {
	suffix string
	shift  uint
}{{"K", 10}, {"M", 20}, {"G", 30}}

// parseByteCount validates a byte count flag: digits, optionally followed by
// K, M or G (binary multiples), from lo through hi bytes.
func parseByteCount(flag, raw string, lo, hi int64) (int64, error) {
	digits, shift := raw, uint(0)
	for _, s := range byteSuffixes {
		if d, ok := strings.CutSuffix(raw, s.suffix); ok {
			digits, shift = d, s.shift
			break
		}
	}
	n, ok := parseDigits[int](digits)
	if !ok || int64(n) > hi>>shift || int64(n)<<shift < lo {
		return 0, usagef("--%s %q: must be a byte count from %d (%dM) through %d (%dG), optionally with a K, M or G suffix", flag, raw, lo, lo>>20, hi, hi>>30)
	}
	return int64(n) << shift, nil
}

// parseWorkspaces returns each --workspace as an absolute, clean path of an
// existing directory, first occurrence first; none means the current directory.
func parseWorkspaces(raw []string) ([]string, error) {
	if len(raw) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("find the current directory, the default workspace: %w", err)
		}
		return []string{wd}, nil
	}
	var out []string
	for _, r := range raw {
		if r == "" {
			return nil, usagef(`--workspace "": must name a directory`)
		}
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, usagef("--workspace %q: %v", r, err)
		}
		fi, err := os.Stat(abs)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, usagef("--workspace %q: no such directory", r)
		case err != nil:
			return nil, usagef("--workspace %q: %v", r, err)
		case !fi.IsDir():
			return nil, usagef("--workspace %q: not a directory", r)
		}
		if !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	return out, nil
}

// parseSettingsFile checks that --settings names an existing regular file,
// then reads and merges it with Qwen Code's settings files
// (loadSettingsFiles); with none the defaults apply. A bad file is a usage
// error, so nothing starts on settings that would be half applied.
func parseSettingsFile(raw string, src settingsSources, o settingsLoadOptions) (string, *settingsLoad, error) {
	if raw == "" {
		load, err := loadSettingsFiles(src, o)
		if err != nil {
			return "", nil, &usageError{err}
		}
		return "", load, nil
	}
	abs, err := filepath.Abs(raw)
	if err != nil {
		return "", nil, usagef("--settings %q: %v", raw, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil, usagef("--settings %q: no such file", raw)
	case err != nil:
		return "", nil, usagef("--settings %q: %v", raw, err)
	case !fi.Mode().IsRegular():
		return "", nil, usagef("--settings %q: not a regular file", raw)
	}
	o.Operator = abs
	load, err := loadSettingsFiles(src, o)
	if err != nil {
		return "", nil, &usageError{err}
	}
	return abs, load, nil
}

// parseSlashCommands validates --allow-slash-command names, with or without
// their leading "/", and returns them without it.
func parseSlashCommands(raw []string) ([]string, error) {
	var out []string
	for _, r := range raw {
		name := strings.TrimPrefix(r, "/")
		if !validCommandName(name) {
			return nil, usagef("--allow-slash-command %q: must be a command name of letters, digits, '-', '_', '.' or ':'", r)
		}
		if name == forkSlashCommand {
			return nil, usagef("--allow-slash-command %q: /fork starts a nested agent, which the guard cannot cover", r)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// parseDisabledSlashCommands reads --disabled-slash-commands, the commands
// refused in every mode (DESIGN.md §10).
// Each value is one name or a comma-separated list, with or without "/".
func parseDisabledSlashCommands(raw []string) ([]string, error) {
	var out []string
	for _, r := range raw {
		for _, n := range strings.Split(r, ",") {
			name := strings.TrimPrefix(strings.TrimSpace(n), "/")
			if !validCommandName(name) {
				return nil, usagef("--disabled-slash-commands %q: %q is not a command name of letters, digits, '-', '_', '.' or ':'", r, n)
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out, nil
}
