// flags.go owns every operator input: the flag sets of each subcommand and
// the validation of the guard configuration.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// "--external-tool-guard-mode off|required, default off. Any other value: exit 2."
const (
	guardModeOff      = "off"
	guardModeRequired = "required"
)

// The guard flags, shared by acp and serve.
const (
	flagGuardMode     = "external-tool-guard-mode"
	flagGuardEndpoint = "external-tool-guard-endpoint"
	flagGuardTimeout  = "external-tool-guard-timeout-ms"
)

// "--external-tool-guard-timeout-ms: an integer in [100, 30000], default 3000"
const (
	minGuardTimeoutMs     = 100
	maxGuardTimeoutMs     = 30000
	defaultGuardTimeoutMs = 3000
)

// "empty after trimming or longer than 8192 UTF-16 code units is rejected"
const maxTokenUTF16 = 8192

// "acpguard provider --listen 127.0.0.1:8787"; "Default bind 127.0.0.1:4170".
const (
	defaultProviderListen = "127.0.0.1:8787"
	defaultServeHostname  = "127.0.0.1"
	defaultServePort      = "4170"
)

// "Prompts of a session run one at a time in FIFO order; a full queue
// (default 5) is 503". The upper bound keeps one session's queue small
// enough to allocate up front.
const (
	defaultMaxPendingPrompts = 5
	maxMaxPendingPrompts     = 1000
)

// Limits of serve, flag defaults and bounds: "a daemon on a shared host must
// bound what any one caller can make it hold". Durations are milliseconds.
const (
	// "--max-sessions 32 live sessions"
	defaultMaxSessions = 32
	maxMaxSessions     = 10000
	// "--max-subscribers-per-session 8 SSE streams"
	defaultMaxSubscribers = 8
	maxMaxSubscribers     = 1000
	// "--event-ring-size 4096 events per session for Last-Event-ID replay"
	defaultEventRingSize = 4096
	maxEventRingSize     = 1 << 20
	// "--initialize-timeout-ms 10000 for a child's initialize"
	defaultInitializeTimeoutMs = 10000
	minInitializeTimeoutMs     = 100
	maxInitializeTimeoutMs     = 600000
	// "--prompt-deadline-ms (default 0 = none)" and
	// "--permission-response-timeout-ms (default 0 = wait)"; at most a day.
	maxPromptDeadlineMs    = 86400000
	maxPermissionTimeoutMs = 86400000
	// "Idle sessions reaped after --session-idle-timeout-ms 1800000"; at
	// least a second, at most a week.
	defaultSessionIdleTimeoutMs = 1800000
	minSessionIdleTimeoutMs     = 1000
	maxSessionIdleTimeoutMs     = 604800000
)

// "the direct /fork entry point ... [is] rejected before [it] can start":
// no flag can open it.
const forkSlashCommand = "fork"

// guardConfig is a validated guard configuration. In off mode only Mode is set.
type guardConfig struct {
	Mode     string
	Endpoint *url.URL // origin only: scheme, and Host always with its port
	Timeout  time.Duration
	Token    string // never printed, logged or put in an error
}

func (g guardConfig) required() bool { return g.Mode == guardModeRequired }

// providerOptions are the validated flags of "acpguard provider". Every zero
// value is the default.
type providerOptions struct {
	Listen         string // host:port, localhost already pinned to 127.0.0.1
	PolicyFile     string
	AuditPath      string // "" none, "-" stdout
	AuditArguments bool
	Token          string
	Shadow         bool       // answer allow whatever the policy says, and log what it says
	LogJSON        bool       // --log-format json; text otherwise
	LogLevel       slog.Level // the zero Level is info
	TLSCert        string     // with TLSKey: serve HTTPS; both or neither
	TLSKey         string
}

// providerCheckOptions are the validated flags of "acpguard provider check".
type providerCheckOptions struct {
	PolicyFile string
	CasesFile  string
	// CasesGiven says --cases named the file: then it must exist. The
	// default file beside the policy may be absent.
	CasesGiven bool
}

type acpOptions struct {
	Guard              guardConfig
	Model              string // modelScripted or modelOpenAI
	OpenAI             openAIConfig
	Settings           *settings  // from --settings, or the defaults
	AllowSlashCommands []string   // for a managed child: the slash commands serve opened
	LogJSON            bool       // --log-format json; text otherwise
	LogLevel           slog.Level // --log-level
	Sandbox            sandboxConfig
}

// Model choices of "acpguard acp", and the environment of the OpenAI-compatible
// client, named as in Qwen Code.
const (
	modelScripted   = "scripted"
	modelOpenAI     = "openai"
	envModelBaseURL = "OPENAI_BASE_URL"
	envModelName    = "OPENAI_MODEL"
)

type serveOptions struct {
	Hostname     string // an IP address or host name; localhost pinned to 127.0.0.1
	Port         int    // 0: pick a free port
	Workspaces   []string
	SettingsFile string    // "" none
	Settings     *settings // loaded from SettingsFile, or the defaults
	Token        string    // host API token, "" none
	// TokenFile is the host token file from --token-file: read when it
	// existed at start, else created by runServe (GenerateToken).
	TokenFile string
	// GenerateToken asks runServe for a new random host token, written to
	// TokenFile or, when that is "", to a new file in a fresh directory.
	GenerateToken bool
	// AllowTokenlessLoopback is --allow-tokenless-loopback: in required mode
	// a loopback daemon without a host token, as in off mode.
	AllowTokenlessLoopback bool
	Guard                  guardConfig
	DecisionLog            string // "" stderr
	MaxPendingPrompts      int
	AllowSlashCommands     []string // names without the leading "/"
	// DisabledSlashCommands are refused with 400 and passed to every child.
	DisabledSlashCommands []string
	Limits                serveLimits
	LogJSON               bool       // --log-format json; text otherwise
	LogLevel              slog.Level // the zero Level is info
	Sandbox               sandboxConfig
	// Model is the model service serve calls for its children
	// (model_proxy.go); BaseURL "" runs the scripted model.
	Model openAIConfig
}

// serveLimits bound what callers can make the daemon hold. A zero count or
// a zero InitializeTimeout or SessionIdleTimeout takes its default; a zero
// PromptDeadline or PermissionTimeout means none.
type serveLimits struct {
	MaxSessions        int
	MaxSubscribers     int // SSE streams per session
	EventRingSize      int // events per session kept for Last-Event-ID replay
	InitializeTimeout  time.Duration
	PromptDeadline     time.Duration
	PermissionTimeout  time.Duration
	SessionIdleTimeout time.Duration
	MaxEventMemory     int64 // bytes of events every ring and queue may hold together
}

// withDefaults fills every zero limit that has a default.
func (l serveLimits) withDefaults() serveLimits {
	if l.MaxSessions == 0 {
		l.MaxSessions = defaultMaxSessions
	}
	if l.MaxSubscribers == 0 {
		l.MaxSubscribers = defaultMaxSubscribers
	}
	if l.EventRingSize == 0 {
		l.EventRingSize = defaultEventRingSize
	}
	if l.InitializeTimeout == 0 {
		l.InitializeTimeout = defaultInitializeTimeoutMs * time.Millisecond
	}
	if l.SessionIdleTimeout == 0 {
		l.SessionIdleTimeout = defaultSessionIdleTimeoutMs * time.Millisecond
	}
	if l.MaxEventMemory == 0 {
		l.MaxEventMemory = defaultMaxEventMemory
	}
	return l
}

// parseEndpoint validates --external-tool-guard-endpoint: "an origin-only
// loopback HTTP(S) endpoint". It returns the origin with a lower-case scheme
// and an explicit port (the scheme default when none was given), so the
// Host header is always host:port and "localhost" is spelled in lower case.
func parseEndpoint(raw string) (*url.URL, error) {
	bad := func(rule string) error {
		return usagef("--%s %q: %s", flagGuardEndpoint, raw, rule)
	}
	switch {
	case raw == "":
		return nil, bad("required when --" + flagGuardMode + " is " + guardModeRequired)
	// url.Parse drops an empty fragment without a trace, so look at the text.
	case strings.Contains(raw, "#"):
		return nil, bad("must not have a fragment")
	// url.Parse decodes escapes in the host ("%6c" is "l"): the host must be
	// spelled out, and nothing else of an origin may carry an escape.
	case strings.Contains(raw, "%"):
		return nil, bad("must not contain percent-encoding")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, bad("not a valid URL")
	case u.Scheme == "" || u.Opaque != "" || u.Host == "":
		return nil, bad("must be an absolute http or https URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("scheme must be http or https")
	case u.User != nil:
		return nil, bad("must not contain userinfo")
	case u.ForceQuery || u.RawQuery != "":
		return nil, bad("must not have a query")
	case u.EscapedPath() != "" && u.EscapedPath() != "/":
		return nil, bad("path must be empty or /")
	}
	host, bracketed := u.Hostname(), strings.HasPrefix(u.Host, "[")
	switch {
	case bracketed && host == "::1":
	case !bracketed && host == "127.0.0.1":
	case !bracketed && asciiEqualFold(host, "localhost"):
		host = "localhost"
	default:
		return nil, bad("host must be 127.0.0.1, localhost or [::1]")
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return nil, bad("port must not be empty")
		}
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return nil, bad("port must be 1-65535")
	}
	return &url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(host, strconv.FormatUint(n, 10))}, nil
}

// parseTimeoutMs validates --external-tool-guard-timeout-ms. Only plain
// decimal digits are an integer here: "+200", " 200", "2e2" and "0x64" are not.
func parseTimeoutMs(raw string) (time.Duration, error) {
	n, ok := parseDigits(raw)
	if !ok || n < minGuardTimeoutMs || n > maxGuardTimeoutMs {
		return 0, usagef("--%s %q: must be an integer from %d through %d", flagGuardTimeout, raw, minGuardTimeoutMs, maxGuardTimeoutMs)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseToken validates the guard token from QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
// and returns it trimmed. Its errors never contain the value.
func parseToken(raw string) (string, error) {
	return parseSecret(envGuardToken, raw)
}

// parseSecret applies the token rules to the secret named name: "rejected if
// it contains a control character (code point < 0x20, 0x7F–0x9F, U+2028,
// U+2029), then trimmed of surrounding white space; empty after trimming or
// longer than 8192 UTF-16 code units is rejected."
func parseSecret(name, raw string) (string, error) {
	if !utf8.ValidString(raw) {
		return "", usagef("%s: must be valid UTF-8 (value not shown)", name)
	}
	if strings.IndexFunc(raw, isControl) >= 0 {
		return "", usagef("%s: must not contain a control character (value not shown)", name)
	}
	// The white space of JavaScript's String.prototype.trim, which Qwen Code uses.
	tok := strings.TrimFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
	if tok == "" {
		return "", usagef("%s: must not be blank", name)
	}
	units := 0
	for _, r := range tok {
		units += utf16Len(r)
	}
	if units > maxTokenUTF16 {
		return "", usagef("%s: must be at most %d UTF-16 code units, got %d (value not shown)", name, maxTokenUTF16, units)
	}
	return tok, nil
}

// isControl is the control-character set of the token and reason rules.
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7F && r <= 0x9F) || r == '\u2028' || r == '\u2029'
}

func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// asciiEqualFold is strings.EqualFold without Unicode folding, under which
// "localhoſt" (long s) would equal "localhost".
func asciiEqualFold(s, t string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return strings.EqualFold(s, t)
}

// parseDigits parses a non-empty run of ASCII digits that fits an int.
func parseDigits(raw string) (int, bool) {
	if raw == "" || strings.TrimLeft(raw, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(raw)
	return n, err == nil
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
	tokenFile               *onceValue // --external-tool-guard-token-file
}

// addGuardFlags registers the guard flags on fs.
func addGuardFlags(fs *flag.FlagSet) guardFlags {
	return guardFlags{
		mode:      onceFlag(fs, flagGuardMode, guardModeOff),
		endpoint:  onceFlag(fs, flagGuardEndpoint, ""),
		timeout:   onceFlag(fs, flagGuardTimeout, strconv.Itoa(defaultGuardTimeoutMs)),
		tokenFile: onceFlag(fs, flagGuardTokenFile, ""),
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
	timeout, err := parseTimeoutMs(g.timeout.value)
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
	return guardConfig{Mode: guardModeRequired, Endpoint: endpoint, Timeout: timeout, Token: token}, nil
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
		return usagef("%s; %s", flagErrorText(err), hint)
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
// spelling of flags. None of them carries the value of a string flag.
func flagErrorText(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
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

// envOf returns the captured environment of sys; a system built without one
// (in a test) has an empty environment, so no secret is ever assumed present.
func envOf(sys *system) *procEnv {
	if sys.env == nil {
		return &procEnv{}
	}
	return sys.env
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
	if policy.value == "" {
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
	}, nil
}

type demoOptions struct {
	Keep bool // leave the stack running until interrupted
}

func parseDemoArgs(args []string, sys *system) (demoOptions, error) {
	fs := newFlagSet("demo")
	keep := fs.Bool("keep", false, "")
	if err := parseFlags(fs, "demo", demoUsage, args, sys); err != nil {
		return demoOptions{}, err
	}
	return demoOptions{Keep: *keep}, nil
}

const demoUsage = `Usage: acpguard demo [--keep]

Runs the guarded path end to end in a temporary workspace: the reference
provider with a built-in sample policy, serve in required mode, one session,
and three scripted prompts: an allowed write, a shell command the policy
denies, and a call made after the provider was stopped. Prints a transcript
and cleans everything up.

Flags:
  --keep
        after the transcript, start the provider again, leave it and serve
        running and print curl commands to drive them by hand; stop with
        Ctrl-C.
  -h, --help
        print this text.
`

// newLogger is the slog logger every subcommand writes to stderr.
func newLogger(w io.Writer, logJSON bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
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
	if err := parseFlags(fs, "provider check", providerCheckUsage, args, sys); err != nil {
		return providerCheckOptions{}, err
	}
	if policy.value == "" {
		return providerCheckOptions{}, usagef(`--policy "": a policy file is required`)
	}
	if cases.count > 0 && cases.value == "" {
		return providerCheckOptions{}, usagef(`--cases "": must name a file`)
	}
	opts := providerCheckOptions{PolicyFile: policy.value, CasesFile: cases.value, CasesGiven: cases.count > 0}
	if !opts.CasesGiven {
		opts.CasesFile = strings.TrimSuffix(policy.value, ".json") + providerCasesSuffix
	}
	return opts, nil
}

// parseListen validates the provider's --listen: "Refuses non-loopback
// listen addresses." localhost becomes 127.0.0.1, the address the client
// dials for it, so no resolver decides where the provider listens.
func parseListen(raw string) (string, error) {
	host, port, err := net.SplitHostPort(raw)
	if err != nil {
		return "", usagef("--listen %q: must be host:port", raw)
	}
	switch {
	case host == "127.0.0.1", host == "::1" && strings.HasPrefix(raw, "["):
	case asciiEqualFold(host, "localhost"):
		host = "127.0.0.1"
	default:
		return "", usagef("--listen %q: host must be 127.0.0.1, localhost or [::1]", raw)
	}
	if _, err := parsePort(port); err != nil {
		return "", usagef("--listen %q: %v", raw, err)
	}
	return net.JoinHostPort(host, port), nil
}

// parsePort accepts a decimal port 0-65535; 0 asks the system for a free one.
func parsePort(raw string) (int, error) {
	n, ok := parseDigits(raw)
	if !ok || n > 65535 {
		return 0, errors.New("port must be an integer from 0 through 65535")
	}
	return n, nil
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
	guard := addGuardFlags(fs)
	modelName := onceFlag(fs, "model", "")
	modelKeyFile := onceFlag(fs, flagModelKeyFile, "")
	settingsFile := onceFlag(fs, "settings", "")
	var slash, disabledSlash listValue
	fs.Var(&slash, "allow-slash-command", "")
	fs.Var(&disabledSlash, "disabled-slash-commands", "")
	logFormat := onceFlag(fs, "log-format", "text")
	logLevel := onceFlag(fs, "log-level", "info")
	sandbox := addSandboxFlags(fs)
	if err := parseFlags(fs, "acp", acpUsage, args, sys); err != nil {
		return acpOptions{}, err
	}
	cfg, err := guard.resolve(envOf(sys))
	if err != nil {
		return acpOptions{}, err
	}
	opts := acpOptions{Guard: cfg, Model: modelName.value}
	if opts.LogJSON, opts.LogLevel, err = parseLogFlags(logFormat.value, logLevel.value); err != nil {
		return acpOptions{}, err
	}
	settingsPath, st, err := parseSettingsFile(settingsFile.value)
	if err != nil {
		return acpOptions{}, err
	}
	opts.Settings = st
	// A managed child runs only under serve in required mode.
	if opts.Sandbox, err = sandbox.resolve(st, settingsPath, cfg.required() || envOf(sys).privateGuard != ""); err != nil {
		return acpOptions{}, err
	}
	if opts.AllowSlashCommands, err = parseSlashCommands(slash); err != nil {
		return acpOptions{}, err
	}
	disabled, err := parseDisabledSlashCommands(disabledSlash)
	if err != nil {
		return acpOptions{}, err
	}
	// The flag adds to the settings' list, as Qwen Code's does.
	opts.Settings.SlashCommands.Disabled = append(opts.Settings.SlashCommands.Disabled, disabled...)
	env := envOf(sys)
	modelKey, modelKeyGiven, err := modelKeyFromFile(modelKeyFile, env)
	if err != nil {
		return acpOptions{}, err
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
		opts.OpenAI = openAIConfig{BaseURL: env.lookup(envModelBaseURL), APIKey: modelKey, Model: env.lookup(envModelName)}
		if opts.OpenAI.Model == "" {
			opts.OpenAI.Model = opts.Settings.Model.Name
		}
		if opts.OpenAI.BaseURL == "" {
			return acpOptions{}, usagef("--model openai needs %s", envModelBaseURL)
		}
		if _, err := newOpenAIModel(opts.OpenAI); err != nil {
			return acpOptions{}, &usageError{err}
		}
	default:
		return acpOptions{}, usagef("--model %q: want %s, %s or %s", opts.Model, modelScripted, modelOpenAI, modelParent)
	}
	return opts, nil
}

func parseServeArgs(args []string, sys *system) (serveOptions, error) {
	fs := newFlagSet("serve")
	hostname := onceFlag(fs, "hostname", defaultServeHostname)
	port := onceFlag(fs, "port", defaultServePort)
	var workspaces, slash listValue
	fs.Var(&workspaces, "workspace", "")
	settings := onceFlag(fs, "settings", "")
	token := onceFlag(fs, "token", "")
	tokenFile := onceFlag(fs, flagHostTokenFile, "")
	tokenless := fs.Bool(flagAllowTokenlessLoopback, false, "")
	guard := addGuardFlags(fs)
	modelKeyFile := onceFlag(fs, flagModelKeyFile, "")
	decisionLog := onceFlag(fs, "decision-log", "")
	maxPending := onceFlag(fs, "max-pending-prompts-per-session", strconv.Itoa(defaultMaxPendingPrompts))
	fs.Var(&slash, "allow-slash-command", "")
	var disabledSlash listValue
	fs.Var(&disabledSlash, "disabled-slash-commands", "")
	maxSessions := onceFlag(fs, "max-sessions", strconv.Itoa(defaultMaxSessions))
	maxSubscribers := onceFlag(fs, "max-subscribers-per-session", strconv.Itoa(defaultMaxSubscribers))
	ringSize := onceFlag(fs, "event-ring-size", strconv.Itoa(defaultEventRingSize))
	initTimeout := onceFlag(fs, "initialize-timeout-ms", strconv.Itoa(defaultInitializeTimeoutMs))
	promptDeadline := onceFlag(fs, "prompt-deadline-ms", "0")
	permTimeout := onceFlag(fs, "permission-response-timeout-ms", "0")
	idleTimeout := onceFlag(fs, "session-idle-timeout-ms", strconv.Itoa(defaultSessionIdleTimeoutMs))
	eventMemory := onceFlag(fs, "max-event-memory", strconv.Itoa(defaultMaxEventMemory))
	logFormat := onceFlag(fs, "log-format", "text")
	logLevel := onceFlag(fs, "log-level", "info")
	sandbox := addSandboxFlags(fs)
	if err := parseFlags(fs, "serve", serveUsage, args, sys); err != nil {
		return serveOptions{}, err
	}
	env := envOf(sys)
	opts := serveOptions{DecisionLog: decisionLog.value}
	var err error
	if opts.LogJSON, opts.LogLevel, err = parseLogFlags(logFormat.value, logLevel.value); err != nil {
		return serveOptions{}, err
	}
	if opts.Limits, err = parseServeLimits(maxSessions.value, maxSubscribers.value, ringSize.value,
		initTimeout.value, promptDeadline.value, permTimeout.value, idleTimeout.value); err != nil {
		return serveOptions{}, err
	}
	if opts.Limits.MaxEventMemory, err = parseByteCount("max-event-memory", eventMemory.value, minMaxEventMemory, maxMaxEventMemory); err != nil {
		return serveOptions{}, err
	}

	host, loopback, err := parseHostname(hostname.value)
	if err != nil {
		return serveOptions{}, err
	}
	opts.Hostname = host
	if opts.Port, err = parsePort(port.value); err != nil {
		return serveOptions{}, usagef("--port %q: %v", port.value, err)
	}
	if opts.Workspaces, err = parseWorkspaces(workspaces); err != nil {
		return serveOptions{}, err
	}
	if opts.SettingsFile, opts.Settings, err = parseSettingsFile(settings.value); err != nil {
		return serveOptions{}, err
	}
	if opts.Guard, err = guard.resolve(env); err != nil {
		return serveOptions{}, err
	}
	if err := resolveHostToken(&opts, token, tokenFile, *tokenless, env, hostname.value, loopback); err != nil {
		return serveOptions{}, err
	}
	// serve reads the model key from the file into the place the variable's
	// value is kept, so it reaches what the variable reaches.
	modelKey, modelKeyGiven, err := modelKeyFromFile(modelKeyFile, env)
	if err != nil {
		return serveOptions{}, err
	}
	if modelKeyGiven {
		env.modelKey, env.modelKeySet = modelKey, true
	}
	if opts.Model, err = serveModelConfig(env, opts.Settings); err != nil {
		return serveOptions{}, err
	}
	if opts.Sandbox, err = sandbox.resolve(opts.Settings, opts.SettingsFile, opts.Guard.required()); err != nil {
		return serveOptions{}, err
	}
	n, ok := parseDigits(maxPending.value)
	if !ok || n < 1 || n > maxMaxPendingPrompts {
		return serveOptions{}, usagef("--max-pending-prompts-per-session %q: must be an integer from 1 through %d", maxPending.value, maxMaxPendingPrompts)
	}
	opts.MaxPendingPrompts = n
	if opts.AllowSlashCommands, err = parseSlashCommands(slash); err != nil {
		return serveOptions{}, err
	}
	if opts.DisabledSlashCommands, err = parseDisabledSlashCommands(disabledSlash); err != nil {
		return serveOptions{}, err
	}
	return opts, nil
}

// parseServeLimits validates serve's limit flags, each an integer in its range.
func parseServeLimits(maxSessions, maxSubscribers, ringSize, initTimeout, promptDeadline, permTimeout, idleTimeout string) (serveLimits, error) {
	var l serveLimits
	var err error
	count := func(flag, raw string, lo, hi int) int {
		n, ok := parseDigits(raw)
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
	n, ok := parseDigits(digits)
	if !ok || int64(n) > hi>>shift || int64(n)<<shift < lo {
		return 0, usagef("--%s %q: must be a byte count from %d (%dM) through %d (%dG), optionally with a K, M or G suffix", flag, raw, lo, lo>>20, hi, hi>>30)
	}
	return int64(n) << shift, nil
}

// parseHostname validates serve's --hostname and says whether it is a
// loopback address. A host name other than localhost counts as non-loopback
// whatever it resolves to.
func parseHostname(raw string) (host string, loopback bool, err error) {
	h := raw
	if inner, ok := strings.CutPrefix(h, "["); ok {
		h, ok = strings.CutSuffix(inner, "]")
		if !ok {
			return "", false, usagef("--hostname %q: unbalanced brackets", raw)
		}
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), ip.IsLoopback(), nil
	}
	if asciiEqualFold(h, "localhost") {
		return "127.0.0.1", true, nil
	}
	if !validHostName(h) {
		return "", false, usagef("--hostname %q: must be an IP address or a host name", raw)
	}
	return h, false, nil
}

// validHostName accepts letters, digits, '-' and '.' in labels of a DNS name.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
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

// parseSettingsFile checks that --settings names an existing regular file
// and loads it; without the flag the defaults apply. A bad file is a usage
// error, so nothing starts on a settings file that would be half applied.
func parseSettingsFile(raw string) (string, *settings, error) {
	if raw == "" {
		return "", defaultSettings(), nil
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
	st, err := loadSettings(abs)
	if err != nil {
		return "", nil, &usageError{err}
	}
	return abs, st, nil
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

// parseDisabledSlashCommands reads --disabled-slash-commands: "disable
// non-approved commands with slashCommands.disabled / --disabled-slash-commands".
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

func validCommandName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}

const guardFlagsUsage = `  --external-tool-guard-mode off|required
        off (default): no provider is constructed or called. required: every
        tool call needs one allow from the policy provider, asked exactly once
        right before the tool runs; any failure denies.
  --external-tool-guard-endpoint URL
        the provider's origin, required in required mode: http or https, host
        127.0.0.1, localhost or [::1], optional port, no path, query, fragment
        or userinfo. Example: http://127.0.0.1:8787
  --external-tool-guard-timeout-ms N
        bound on one provider call, in milliseconds: 100 through 30000
        (default 3000).
  --external-tool-guard-token-file FILE
        read the provider's bearer token from FILE once at start, instead of
        QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN (both is an error): a regular file
        of the current user, mode 0600 or stricter, not a symbolic link; one
        trailing newline is removed, then the variable's rules apply. Read
        only in required mode.
`

const scrubUsage = `Children (tools, hooks, MCP servers, ACP children) never see the variables
above, nor LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, BASH_ENV, ENV or BASH_FUNC_*.
`

const providerUsage = `Usage: acpguard provider --policy FILE [flags]
       acpguard provider check --policy FILE [--cases FILE]

Runs the reference policy provider: POST /v1/handshake and POST /v1/prepare
on a loopback HTTP(S) address, one decision per prepare from the policy file,
and GET /metrics. "acpguard provider check" tests a policy without serving
(see "acpguard provider check --help").

Flags:
  --listen HOST:PORT
        loopback address to listen on: host 127.0.0.1, localhost or [::1];
        port 0 picks a free one (default 127.0.0.1:8787).
  --policy FILE
        the JSON policy file (required); reloaded on SIGHUP.
  --audit FILE|-
        append one JSON line per decision to FILE, or to stdout with "-"
        (default: no audit log).
  --audit-arguments
        put the raw arguments in the audit log and the debug log, not only
        their SHA-256.
  --shadow
        shadow rollout: evaluate the policy, log the decision it would have
        made ("shadow":true and "wouldDecide" in every audit line, a warning
        per call on stderr), and answer allow to every well-formed prepare.
        Clients never fail open; only this provider does, and says so.
  --tls-cert FILE, --tls-key FILE
        serve HTTPS with this PEM certificate chain and key (both or neither).
        Clients verify it with their system roots (SSL_CERT_FILE, SSL_CERT_DIR).
  --log-format text|json
        format of the log on stderr (default text).
  --log-level debug|info|warn|error
        least severe level logged (default info). debug logs every decision
        (identity, tool, rule, argument hash) and each TLS client's server name.
  -h, --help
        print this text.

Metrics: GET /metrics answers in the Prometheus text format 0.0.4 and, like
every route, requires the bearer token (Prometheus: authorization.credentials).

Logs never contain the token, and raw arguments only with --audit-arguments.

Environment:
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
        the bearer token every client must send (required); read and removed
        from the environment at start.
  QWEN_SERVER_TOKEN
        read and removed at start; not used.

` + scrubUsage

const providerCheckUsage = `Usage: acpguard provider check --policy FILE [--cases FILE]

Validates a policy file as the provider does at startup (exit 2 when it is
invalid), then decides every example case of the cases file and compares the
decision with the expected one. Prints each mismatch with the rule that
decided, then "N passed, M failed". Exit 0 when every case passes, 1 on any
mismatch, 2 on an invalid policy or cases file.

Flags:
  --policy FILE
        the JSON policy file (required).
  --cases FILE
        the cases file (default: the policy's name with .json replaced by
        .cases.json, e.g. policy.cases.json beside policy.json; when that file
        does not exist only the policy is validated).
  -h, --help
        print this text.

Cases file: a JSON array, strictly decoded, of
  {"name": "optional label", "tool": "canonical_tool_name",
   "arguments": {...final arguments...}, "expect": "allow" | "deny",
   "reason": "optional: the exact denial reason a client would show"}
A deny without a reason shows "` + denyDefaultReason + `".

Environment:
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN, QWEN_SERVER_TOKEN
        read and removed at start; not used.
`

const acpUsage = `Usage: acpguard acp [flags]

Runs the guarded ACP v1 agent on stdin/stdout: JSON-RPC 2.0, one message per
line. Logs go to stderr.

Flags:
` + guardFlagsUsage + `  --model scripted|openai|parent
        the model: the built-in scripted model (default), an
        OpenAI-compatible chat completions service (default when
        OPENAI_BASE_URL is set), or parent: acpguard serve makes the model
        calls with its own key (set by serve; stdin and stdout must then be
        a Unix socket).
  --model-key-file FILE
        read the model's API key from FILE once at start, instead of
        OPENAI_API_KEY (both is an error); the file rules of the token file
        above.
  --settings FILE
        settings in Qwen Code's format: tools.approvalMode, tools.disabled,
        permissions.allow|ask|deny, hooks.PreToolUse, model.name,
        model.maxTurns, slashCommands.disabled, mcpServers, mcp.callTimeoutMs,
        tools.sandbox (true|false), tools.sandboxRead, tools.sandboxWrite,
        tools.sandboxNetwork, tools.sandboxUnix (a --sandbox* flag wins).
  --allow-slash-command NAME
        (repeatable) a slash command a managed child may run; set by serve.
  --disabled-slash-commands NAME[,NAME...]
        (repeatable) slash commands refused, added to slashCommands.disabled.
` + sandboxFlagsUsage + `  --log-format text|json
        the format of the log on stderr (default text).
  --log-level debug|info|warn|error
        the least severe log level written (default info).
  -h, --help
        print this text.

Environment:
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
        the provider's bearer token, required in required mode unless
        --external-tool-guard-token-file is given; read and removed from the
        environment at start.
  OPENAI_BASE_URL, OPENAI_MODEL
        the OpenAI-compatible service and model name.
  OPENAI_API_KEY
        its API key unless --model-key-file is given; read and removed at
        start, sent only to that service.
  QWEN_SERVER_TOKEN
        read and removed at start; not used.
  QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD
        required-v1, set only by "acpguard serve" for the ACP children it
        manages: serve decides every guarded call; stdin and stdout must be a
        Unix socket. Read and removed at start.
  QWEN_CODE_PRIVATE_ACP_CAPABILITY
        read and removed at start; not used.
  GOMAXPROCS
        unset, the runtime runs on one scheduler slot: its work is short steps
        between waits, and one slot answers a guard decision sooner.

` + scrubUsage

const serveUsage = `Usage: acpguard serve [flags]

Runs the managed daemon: a host HTTP API on a loopback address, one private
guarded ACP child per workspace, and in required mode one provider call per
guarded tool call.

Flags:
  --hostname HOST
        address to listen on (default 127.0.0.1). A non-loopback address
        requires a host token (--token, --token-file or QWEN_SERVER_TOKEN).
  --port N
        port to listen on, 0 picks a free one (default 4170).
  --workspace DIR
        a directory sessions may use; repeatable. The first is the default
        session cwd (default: the current directory).
  --settings FILE
        settings file for the ACP children (permissions, hooks, the
        tools.sandbox* keys; a --sandbox* flag wins over its key).
  --token T
        bearer token every host request must send; wins over QWEN_SERVER_TOKEN.
        Prefer the variable or --token-file: a flag is visible to other local
        users.
  --token-file FILE
        the host token's file, instead of --token or QWEN_SERVER_TOKEN (with
        either is an error). An existing FILE is read once at start: a regular
        file of the current user, mode 0600 or stricter, not a symbolic link,
        one trailing newline removed. A FILE that does not exist is created
        at start with a new random token (mode 0600, in a directory no other
        user can write to) and kept for the next start.
  --allow-tokenless-loopback
        required mode only: accept host requests without a token on a
        loopback address, as in off mode; warned at start. Without it, and
        without a token, required mode generates a host token into a fresh
        directory under $XDG_RUNTIME_DIR (or the temporary directory), prints
        "acpguard serve: host token in FILE" after the listening line, and
        removes the directory at exit.
` + guardFlagsUsage + `  --model-key-file FILE
        read the model's API key from FILE once at start, instead of
        OPENAI_API_KEY (both is an error); the same file rules as --token-file.
  --decision-log FILE
        append one JSON line per guard decision to FILE (default: stderr).
  --max-pending-prompts-per-session N
        prompts one session may queue, 1 through 1000 (default 5).
  --allow-slash-command NAME
        accept prompts starting with /NAME in required mode; repeatable.
  --disabled-slash-commands NAME[,NAME...]
        refuse prompts starting with these commands (400) in every mode and
        disable them in the children; repeatable.
` + sandboxFlagsUsage + `  --log-format text|json
        format of the log on stderr (default text).
  --log-level debug|info|warn|error
        least severe level logged (default info).
  -h, --help
        print this text.

Limits (each hit is answered with a status and a code, logged, and counted
in acpguard_serve_limit_hits_total):
  --max-sessions N
        live sessions, 1 through 10000 (default 32); one more is 503
        session_limit_exceeded with Retry-After.
  --max-subscribers-per-session N
        event streams of one session, 1 through 1000 (default 8); one more is
        429 subscriber_limit_exceeded.
  --event-ring-size N
        events each session keeps for Last-Event-ID replay, 1 through 1048576
        (default 4096).
  --initialize-timeout-ms N
        a new ACP child that has not answered initialize by then is killed and
        the session creation fails 503 initialize_timeout; 100 through 600000
        (default 10000).
  --prompt-deadline-ms N
        a prompt still running N ms after it started is cancelled as if the
        host had cancelled it; 0 through 86400000 (default 0: no deadline).
  --permission-response-timeout-ms N
        a permission request the host has not answered after N ms is answered
        cancelled, so the call does not run; 0 through 86400000 (default 0:
        wait).
  --session-idle-timeout-ms N
        a session without a prompt or a host request for N ms is closed with
        session_closed; 1000 through 604800000 (default 1800000).
  --max-event-memory BYTES
        bytes of events that every session's replay ring and every event
        stream's queue may hold together; a K, M or G suffix multiplies by
        1024, 1024^2 or 1024^3; 1M through 1024G (default 256M). Over it the
        oldest events of the largest rings are evicted first, until a
        sixteenth of it is free (code event_memory); a stream that still
        needed them, or that resumes before them, gets stream_dropped.

Host request bodies are at most 1 MiB (413 payload_too_large) and a prompt at
most 256 content blocks (413 prompt_too_large). A host request from one of
serve's own descendants (a tool, a hook, an MCP server, what they start) is
403 host_is_descendant, whatever token it carries.

Metrics: GET /metrics answers in the Prometheus text format 0.0.4 and, like
every route, requires the host token when one is set. Families, all prefixed
acpguard_serve_: decisions_total{outcome}, decision_failures_total{category},
provider_request_duration_seconds (histogram), sessions, sessions_created_total,
prompts_total{result}, tool_executions_total{tool,status}, children,
children_started_total, children_died_total, limit_hits_total{code},
event_memory_bytes, event_streams, sandbox_enabled, sandbox_landlock_abi.

Sandbox: serve checks the kernel once at start, gives its choice to every
child as flags, and reports it in GET /capabilities ("sandbox") and the
listening log line.

Logs never contain a token or a tool call's arguments.

Signals: SIGINT and SIGTERM shut down. In required mode SIGHUP runs the provider
handshake again: a provider restarted as this user listens on a new socket,
and calls to it fail (category identity) until a handshake accepts it. A
handshake that fails keeps the provider of the last successful one.

Environment:
  QWEN_SERVER_TOKEN
        bearer token for host requests when --token is not given; read and
        removed from the environment at start.
  QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN
        the provider's bearer token, required in required mode unless
        --external-tool-guard-token-file is given; read and removed at start,
        kept in the daemon only.
  OPENAI_BASE_URL, OPENAI_MODEL
        the OpenAI-compatible service and model name the children use; without
        them the children run the scripted model. serve makes every model call
        itself, for a session's running prompt only.
  OPENAI_API_KEY
        its API key unless --model-key-file is given; read and removed at
        start, kept in the daemon only and sent only to that service.

` + scrubUsage
