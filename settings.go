// settings.go owns the settings file (--settings FILE): its keys mirror Qwen
// Code's so a section can be copied across (DESIGN.md §10), every key and
// value is checked, and an error names the file, the key path and the value.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// envSystemMD is the one variable of a settings env block acpguard reads:
// Qwen Code's QWEN_SYSTEM_MD, which names a replacement system prompt
// (agent_prompt.go) and may also come from the process environment.
const envSystemMD = "QWEN_SYSTEM_MD"

// Settings limits and defaults: with no settings the mode is default, with
// no rules and no hooks; past maxTurns a prompt stops with max_turn_requests.
const (
	maxSettingsBytes       = 1 << 20
	defaultSettingsMode    = modeDefault
	defaultMaxTurns        = 50
	maxMaxTurns            = 1000
	mcpMinTimeoutMS        = 100
	mcpMaxTimeoutMS        = 600000
	maxSettingsStringBytes = 64 << 10 // one string value
)

// settings is a validated settings file.
type settings struct {
	// Version and Schema are Qwen Code's $version (the settings format
	// version Qwen writes into every file it migrates) and $schema (an
	// editor's schema URL): accepted and ignored. acpguard never migrates
	// or rewrites a settings file.
	Version ignoredNumber `json:"$version"`
	Schema  string        `json:"$schema"`

	Tools         toolsSettings                `json:"tools"`
	Permissions   permissionsSettings          `json:"permissions"`
	Hooks         hooksSettings                `json:"hooks"`
	Model         modelSettings                `json:"model"`
	SlashCommands slashCommandsSettings        `json:"slashCommands"`
	MCPServers    map[string]mcpServerSettings `json:"mcpServers"`
	MCP           mcpSettings                  `json:"mcp"`
	// DisableAllHooks true runs no hook at all (Qwen Code's key);
	// StopHookBlockingCap bounds the Stop hooks' blocks in a row (0: the
	// default, hookStopBlockingCapDefault).
	DisableAllHooks     bool `json:"disableAllHooks"`
	StopHookBlockingCap int  `json:"stopHookBlockingCap"`
	// Security holds the http hooks' policy keys; a workspace file never
	// sets them (settings_files.go).
	Security securitySettings `json:"security"`
	// Context is Qwen Code's context key: acpguard acts on fileName only.
	Context contextSettings `json:"context"`
	// Env is Qwen Code's fallback environment: acpguard reads only
	// envSystemMD from it (agent_prompt.go); other names are listed with
	// the ignored keys.
	Env map[string]string `json:"env"`

	// Rules are the parsed permissions lists.
	Rules *permissionRules `json:"-"`
	// Warnings are what loaded but deserves the operator's notice (a
	// deprecated key), logged once at startup (warnSettings).
	Warnings []string `json:"-"`
	// Ignored are the Qwen Code keys the file sets that acpguard does not
	// act on, logged once at debug level.
	Ignored []string `json:"-"`
	// SkippedMCP are the servers mcp.allowed and mcp.excluded keep from
	// starting, logged once at debug level.
	SkippedMCP []string `json:"-"`
}

// ignoredNumber is a value that must be a JSON number and is then ignored.
type ignoredNumber struct{}

func (ignoredNumber) checkToken(at string, tok json.Token) error {
	if _, ok := tok.(json.Number); !ok {
		return shapeTypeError(at, "a number", jsonTokenKind(tok))
	}
	return nil
}

func (*ignoredNumber) UnmarshalJSON([]byte) error { return nil }

type toolsSettings struct {
	ApprovalMode string   `json:"approvalMode"`
	Disabled     []string `json:"disabled"`
	// Qwen Code's older tool lists: Exclude is a deny list like Disabled,
	// Allowed adds allow rules, and a non-empty Core registers only the
	// tools it names (DESIGN.md §10).
	Exclude []string `json:"exclude"`
	Core    []string `json:"core"`
	Allowed []string `json:"allowed"`
	// The sandbox keys (sandbox_flags.go): Qwen Code's tools.sandbox, and
	// acpguard's read, write, hide and protect lists and network and Unix choices.
	Sandbox        sandboxSetting `json:"sandbox"`
	SandboxRead    []string       `json:"sandboxRead"`
	SandboxWrite   []string       `json:"sandboxWrite"`
	SandboxHide    []string       `json:"sandboxHide"`
	SandboxProtect []string       `json:"sandboxProtect"`
	SandboxNetwork sandboxAccess  `json:"sandboxNetwork"`
	SandboxUnix    sandboxAccess  `json:"sandboxUnix"`
	// SandboxImage is Qwen Code's container image: refused, not ignored.
	SandboxImage *string `json:"sandboxImage"`
}

type permissionsSettings struct {
	Allow []string `json:"allow"`
	Ask   []string `json:"ask"`
	Deny  []string `json:"deny"`
}

// securitySettings are the keys of Qwen Code's security block acpguard
// reads: where http hooks may send their input (hooks_http.go).
type securitySettings struct {
	AllowedHTTPHookURLs      []string `json:"allowedHttpHookUrls"`
	AllowPrivateNetworkHooks bool     `json:"allowPrivateNetworkHooks"`
}

// hooksSettings has one list per event of Qwen Code's hooks: every event
// loads; hookEventsNeverFired names those acpguard never fires, and why.
type hooksSettings struct {
	PreToolUse          []hookMatcher `json:"PreToolUse"`
	PostToolUse         []hookMatcher `json:"PostToolUse"`
	UserPromptSubmit    []hookMatcher `json:"UserPromptSubmit"`
	PermissionRequest   []hookMatcher `json:"PermissionRequest"`
	UserPromptExpansion []hookMatcher `json:"UserPromptExpansion"`
	Stop                []hookMatcher `json:"Stop"`
	StopFailure         []hookMatcher `json:"StopFailure"`
	MessageDisplay      []hookMatcher `json:"MessageDisplay"`
	Notification        []hookMatcher `json:"Notification"`
	PostToolUseFailure  []hookMatcher `json:"PostToolUseFailure"`
	PostToolBatch       []hookMatcher `json:"PostToolBatch"`
	SessionStart        []hookMatcher `json:"SessionStart"`
	SessionEnd          []hookMatcher `json:"SessionEnd"`
	SessionDelete       []hookMatcher `json:"SessionDelete"`
	PreCompact          []hookMatcher `json:"PreCompact"`
	PostCompact         []hookMatcher `json:"PostCompact"`
	SubagentStart       []hookMatcher `json:"SubagentStart"`
	SubagentStop        []hookMatcher `json:"SubagentStop"`
	PermissionDenied    []hookMatcher `json:"PermissionDenied"`
	TodoCreated         []hookMatcher `json:"TodoCreated"`
	TodoCompleted       []hookMatcher `json:"TodoCompleted"`
	InstructionsLoaded  []hookMatcher `json:"InstructionsLoaded"`
}

// modelSettings: MaxSessionTurns is Qwen Code's name for the turn bound
// (-1 unlimited); maxTurns is acpguard's older name for it, still read, with
// a warning. MaxTurns is the bound that applies, from either key or the
// default: the model calls one prompt may make before it stops with
// max_turn_requests.
type modelSettings struct {
	Name            string `json:"name"`
	MaxSessionTurns *int   `json:"maxSessionTurns"`
	LegacyMaxTurns  *int   `json:"maxTurns"`
	MaxTurns        int    `json:"-"`
}

// contextSettings: FileName names the instruction files read from the Qwen
// home and the project (agent_prompt.go) in place of QWEN.md and AGENTS.md.
type contextSettings struct {
	FileName contextFileNames `json:"fileName"`
}

// maxContextFileNames bounds context.fileName: each name is looked for in
// every directory from the project root down to a session's cwd, at every
// session start.
const maxContextFileNames = 16

// contextFileNames is context.fileName: Qwen Code's one name or list of
// names, each trimmed; an empty string or list keeps the default names.
type contextFileNames []string

func (n *contextFileNames) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*n = nil
		if strings.TrimSpace(one) != "" {
			*n = contextFileNames{strings.TrimSpace(one)}
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("key %q: want a string or an array of strings", keyContextFileName)
	}
	*n = nil
	for _, name := range list {
		*n = append(*n, strings.TrimSpace(name))
	}
	return nil
}

// walkAs is the settings shape check (settings_schema.go): a string or an
// array of strings.
func (contextFileNames) walkAs(got string) (reflect.Type, string) {
	switch got {
	case "string":
		return reflect.TypeFor[string](), ""
	case "array":
		return reflect.TypeFor[[]string](), ""
	}
	return nil, "a string or an array of strings"
}

const keyContextFileName = "context.fileName"

// validate refuses a name that is not one plain Markdown file name: the
// names are joined to the Qwen home and to workspace directories, and a path
// ("../x", "docs/x") would read a file outside them into the model's
// context, another name a file that is no instructions (the Qwen home's
// .env, which holds the model key, or its settings).
func (n contextFileNames) validate() []string {
	var problems []string
	if len(n) > maxContextFileNames {
		problems = append(problems, fmt.Sprintf("key %q: %d names, at most %d", keyContextFileName, len(n), maxContextFileNames))
	}
	for i, name := range n {
		at := fmt.Sprintf("%s[%d]", keyContextFileName, i)
		switch {
		case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00"):
			problems = append(problems, fmt.Sprintf("key %q: %q is not a file name; give plain names such as %q, read in each directory", at, name, "QWEN.md"))
		case !strings.HasSuffix(strings.ToLower(name), contextFileSuffix) || len(name) == len(contextFileSuffix):
			problems = append(problems, fmt.Sprintf("key %q: %q is not a Markdown file name; instruction files end in %q, such as %q", at, name, contextFileSuffix, "QWEN.md"))
		}
	}
	return problems
}

// contextFileSuffix ends every instruction file name context.fileName
// gives: none names a key file or a settings file.
const contextFileSuffix = ".md"

type slashCommandsSettings struct {
	Disabled []string `json:"disabled"`
}

// mcpServerSettings is one MCP server. Timeout is in milliseconds, 0 when
// absent. Qwen Code chooses the transport by key: httpUrl (Streamable HTTP),
// else url (HTTP+SSE), else command (stdio); Type is its label, not read.
// Headers go with a remote server's requests, each value with $VAR or
// ${VAR} read from acpguard's environment (mcp_remote.go).
//
// Cwd is where the server starts (relative: to the session's directory);
// Trust skips the permission prompt for its tools, never the guard;
// IncludeTools and ExcludeTools filter its tools (exclude wins);
// DiscoveryTimeoutMs bounds its start and tools/list. Qwen Code's keys of
// sign-ins and transports acpguard does not have are refused by name
// (mcpRefusedKeys).
type mcpServerSettings struct {
	Command            string            `json:"command"`
	Args               []string          `json:"args"`
	Env                map[string]string `json:"env"`
	Timeout            int               `json:"timeout"`
	URL                string            `json:"url"`
	HTTPURL            string            `json:"httpUrl"`
	Headers            map[string]string `json:"headers"`
	Cwd                string            `json:"cwd"`
	Trust              bool              `json:"trust"`
	IncludeTools       []string          `json:"includeTools"`
	ExcludeTools       []string          `json:"excludeTools"`
	Type               string            `json:"type"`
	DiscoveryTimeoutMs int               `json:"discoveryTimeoutMs"`
}

// MCP discovery bounds (Qwen Code's): the start and tools/list of one server.
const (
	mcpMinDiscoveryMS = 100
	mcpMaxDiscoveryMS = 300000
)

// mcpMaxCallTimeout bounds a settings entry's timeout.
const mcpMaxCallTimeout = 24 * time.Hour

// mcpRefusedKeys are the keys of an mcpServers entry that Qwen Code's
// schema has and acpguard refuses at load, each with why and what to do:
// a sign-in acpguard does not run (the server would be reached without its
// credentials) or a transport it does not have. The schema walk accepts
// them (qwenIgnoredKeys) so that validate can name them.
var mcpRefusedKeys = []struct{ key, why string }{
	{"oauth", "uses OAuth, which acpguard does not support; remove oauth and give the token in headers (\"Authorization\": \"Bearer $VAR\")"},
	{"authProviderType", "names an auth provider, which acpguard does not support; remove authProviderType and give the credentials in headers"},
	{"tcp", "uses the tcp transport, which acpguard does not support; use httpUrl, url or command"},
}

// transport returns the entry's transport as Qwen Code chooses it, or the
// key that makes the entry one acpguard refuses (headers on a stdio entry).
func (e mcpServerSettings) transport(name string) (transport, key string, err error) {
	switch {
	case e.HTTPURL != "":
		return mcpTransportHTTP, "httpUrl", nil
	case e.URL != "":
		return mcpTransportSSE, "url", nil
	case e.Headers != nil:
		return "", "headers", fmt.Errorf("MCP server %q has headers but no url or httpUrl: headers apply only to http and sse servers", name)
	}
	return mcpTransportStdio, "command", nil
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
		transport, key, err := e.transport(name)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", "mcpServers."+name+"."+key, err)
		}
		c := mcpServerConfig{Name: name, Transport: transport, Cwd: e.Cwd, Trust: e.Trust,
			IncludeTools: e.IncludeTools, ExcludeTools: e.ExcludeTools,
			StartupTimeout: time.Duration(e.DiscoveryTimeoutMs) * time.Millisecond}
		if c.remote() {
			// The transport's key wins, as in Qwen Code: a command beside
			// it is not run.
			c.URL = e.HTTPURL
			if transport == mcpTransportSSE {
				c.URL = e.URL
			}
			for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
				c.Headers = append(c.Headers, mcpHeader{Name: k, Value: e.Headers[k]})
			}
		} else {
			c.Command, c.Args = e.Command, e.Args
		}
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			if c.remote() {
				break
			}
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("key %q: variable name %q is invalid", "mcpServers."+name+".env", k)
			}
			c.Env = append(c.Env, k+"="+e.Env[k])
		}
		if e.Timeout != 0 {
			if e.Timeout < 1 || int64(e.Timeout) > mcpMaxCallTimeout.Milliseconds() {
				return nil, fmt.Errorf("key %q: %d ms is not between 1 and %d", "mcpServers."+name+".timeout", e.Timeout, mcpMaxCallTimeout.Milliseconds())
			}
			c.CallTimeout = time.Duration(e.Timeout) * time.Millisecond
		}
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("key %q: %w", "mcpServers."+name, err)
		}
		configs = append(configs, c)
	}
	return configs, nil
}

// mcpSettings: CallTimeoutMs is acpguard's default per-call bound;
// Allowed and Excluded are Qwen Code's server name globs (* and ?).
type mcpSettings struct {
	CallTimeoutMs int      `json:"callTimeoutMs"`
	Allowed       []string `json:"allowed"`
	Excluded      []string `json:"excluded"`
}

// serverAllowed applies mcp.allowed and mcp.excluded to a server name:
// excluded wins; a set allowed list must name it.
func (m mcpSettings) serverAllowed(name string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, name); ok || g == name {
				return true
			}
		}
		return false
	}
	if match(m.Excluded) {
		return false
	}
	return m.Allowed == nil || match(m.Allowed)
}

// defaultSettings is what runs without a settings file.
func defaultSettings() *settings {
	return &settings{
		Tools: toolsSettings{ApprovalMode: defaultSettingsMode},
		Model: modelSettings{MaxTurns: defaultMaxTurns},
		Rules: &permissionRules{},
	}
}

// loadSettings reads, checks and parses a settings file.
func loadSettings(path string) (*settings, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read settings %q: %w", path, err)
	}
	s, err := parseSettings(data)
	if se := (*settingsError)(nil); errors.As(err, &se) {
		se.File = path
		return nil, se
	}
	if err != nil {
		return nil, fmt.Errorf("settings %q: %w", path, err)
	}
	return s, nil
}

// parseSettings checks every key of data against the key tree
// (checkSettingsKeys), then decodes and validates every value. Its error
// is a *settingsError listing every problem found, in file order.
func parseSettings(data []byte) (*settings, error) {
	if len(data) > maxSettingsBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxSettingsBytes)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	orig := data
	data = blankJSONC(data)
	if err := jsonSyntaxCheck(orig, data); err != nil {
		return nil, err
	}
	ignored, problems := checkSettingsKeys(data)
	if len(problems) > 0 {
		return nil, &settingsError{Problems: problems}
	}
	s := defaultSettings()
	if err := json.Unmarshal(data, s); err != nil {
		return nil, err // the walk above has already refused every bad shape
	}
	s.Ignored = ignored
	if problems := s.validate(); len(problems) > 0 {
		return nil, &settingsError{Problems: problems}
	}
	slices.Sort(s.SkippedMCP)
	return s, nil
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate checks every value and fills in what depends on it, returning
// every problem found.
func (s *settings) validate() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if mode, ok := approvalModeFromSettings(s.Tools.ApprovalMode); ok {
		if mode == "auto" {
			mode = modeDefault
			s.Warnings = append(s.Warnings, `settings key "tools.approvalMode": "auto" runs as "default": acpguard has no classifier, so edits, shell commands and MCP tools ask`)
		}
		s.Tools.ApprovalMode = mode
	} else {
		add("key %q: Invalid approval mode: %s. Valid values are: plan, default, auto-edit, auto, yolo", "tools.approvalMode", s.Tools.ApprovalMode)
	}
	for _, list := range []struct {
		key   string
		names []string
	}{{"tools.disabled", s.Tools.Disabled}, {"tools.exclude", s.Tools.Exclude}, {"tools.core", s.Tools.Core}} {
		for i, name := range list.names {
			if !knownToolName(name) {
				add("key %q: unknown tool %q", fmt.Sprintf("%s[%d]", list.key, i), name)
			}
		}
	}
	if err := s.Tools.validateSandbox(); err != nil {
		problems = append(problems, err.Error())
	}
	if s.Tools.SandboxImage != nil {
		add("key %q: Qwen Code's container sandbox is not supported: acpguard confines tools itself (tools.sandbox, DESIGN.md §5), and an ignored image would look like a confinement that is not there", "tools.sandboxImage")
	}
	allow := append(slices.Clip(s.Permissions.Allow), s.Tools.Allowed...)
	if rules, err := parsePermissionRules(allow, s.Permissions.Ask, s.Permissions.Deny); err != nil {
		msg := err.Error()
		if i := len(s.Permissions.Allow); len(s.Tools.Allowed) > 0 {
			// A rule from tools.allowed is named by its own key.
			for j := range s.Tools.Allowed {
				msg = strings.Replace(msg, fmt.Sprintf("%q", fmt.Sprintf("permissions.allow[%d]", i+j)), fmt.Sprintf("%q", fmt.Sprintf("tools.allowed[%d]", j)), 1)
			}
		}
		problems = append(problems, msg)
	} else {
		s.Rules = rules
	}
	problems = append(problems, s.validateHooks()...)
	if err := s.Model.resolveMaxTurns(&s.Warnings); err != nil {
		problems = append(problems, err.Error())
	}
	for i, c := range s.SlashCommands.Disabled {
		if name := strings.TrimPrefix(c, "/"); name == "" || strings.ContainsAny(name, " \t\r\n/") {
			add("key %q: invalid slash command %q", fmt.Sprintf("slashCommands.disabled[%d]", i), c)
		}
	}
	problems = append(problems, s.Context.FileName.validate()...)
	for _, name := range slices.Sorted(maps.Keys(s.MCPServers)) {
		refused := false
		for _, r := range mcpRefusedKeys {
			if at := "mcpServers." + name + "." + r.key; slices.Contains(s.Ignored, at) {
				add("key %q: MCP server %q %s", at, name, r.why)
				refused = true
			}
		}
		if !refused {
			problems = append(problems, validateMCPServer(name, s.MCPServers[name])...)
		}
	}
	if t := s.MCP.CallTimeoutMs; t != 0 && (t < mcpMinTimeoutMS || t > mcpMaxTimeoutMS) {
		add("key %q: %d ms is not between %d and %d", "mcp.callTimeoutMs", t, mcpMinTimeoutMS, mcpMaxTimeoutMS)
	}
	for _, list := range []struct {
		key   string
		globs []string
	}{{"mcp.allowed", s.MCP.Allowed}, {"mcp.excluded", s.MCP.Excluded}} {
		for i, g := range list.globs {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				add("key %q: invalid server name pattern %q (want a name with * and ?)", fmt.Sprintf("%s[%d]", list.key, i), g)
			}
		}
	}
	// A server that mcp.allowed does not name, or that mcp.excluded names,
	// is not started: it is dropped here, with a debug line.
	for name := range s.MCPServers {
		if !s.MCP.serverAllowed(name) {
			delete(s.MCPServers, name)
			s.SkippedMCP = append(s.SkippedMCP, name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if !envName.MatchString(k) {
			add("key %q: invalid environment variable name %q", "env", k)
			continue
		}
		if k != envSystemMD && !slices.Contains(s.Ignored, "env") {
			s.Ignored = append(s.Ignored, "env") // acpguard reads only QWEN_SYSTEM_MD from it
		}
	}
	return problems
}

// approvalModeFromSettings reads tools.approvalMode as Qwen Code does:
// any case, with autoEdit and auto_edit for auto-edit. "auto" is returned
// as is for the caller to map.
func approvalModeFromSettings(v string) (string, bool) {
	switch m := strings.ToLower(v); m {
	case modePlan, modeDefault, modeAutoEdit, modeYolo, "auto":
		return m, true
	case "autoedit", "auto_edit":
		return modeAutoEdit, true
	}
	return "", false
}

// knownToolName reports whether a tools list entry names a tool: a name or
// alias, optionally with a "(spec)" (tools.core's form), or an MCP name.
func knownToolName(name string) bool {
	if strings.HasPrefix(name, mcpToolPrefix) {
		return true
	}
	base, _, _ := strings.Cut(name, "(")
	_, ok := ruleToolNames(base)
	return ok
}

// validateMCPServer checks one mcpServers entry.
func validateMCPServer(name string, srv mcpServerSettings) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	at := "mcpServers." + name
	transport, key, err := srv.transport(name)
	if err != nil {
		add("key %q: %v", at+"."+key, err)
		return problems
	}
	// Any name runs under its sanitized form, as session/new's do.
	switch {
	case strings.TrimSpace(name) == "":
		add("key %q: empty MCP server name", at)
	case mcpNameAmbiguous(name) != nil:
		add("key %q: %v", at, mcpNameAmbiguous(name))
	case mcpServerNameTooLong(name) != nil:
		add("key %q: %v", at, mcpServerNameTooLong(name))
	case transport == mcpTransportStdio && strings.TrimSpace(srv.Command) == "":
		add("key %q: empty command; an MCP server needs httpUrl (Streamable HTTP), url (SSE) or command (stdio)", at+".command")
	case srv.Timeout != 0 && (srv.Timeout < mcpMinTimeoutMS || srv.Timeout > mcpMaxTimeoutMS):
		add("key %q: timeout %d ms is not between %d and %d", at+".timeout", srv.Timeout, mcpMinTimeoutMS, mcpMaxTimeoutMS)
	case srv.DiscoveryTimeoutMs != 0 && (srv.DiscoveryTimeoutMs < mcpMinDiscoveryMS || srv.DiscoveryTimeoutMs > mcpMaxDiscoveryMS):
		add("key %q: %d ms is not between %d and %d", at+".discoveryTimeoutMs", srv.DiscoveryTimeoutMs, mcpMinDiscoveryMS, mcpMaxDiscoveryMS)
	}
	for _, k := range slices.Sorted(maps.Keys(srv.Env)) {
		if !envName.MatchString(k) {
			add("key %q: invalid environment variable name %q", at+".env", k)
		}
	}
	if transport != mcpTransportStdio {
		c := mcpServerConfig{Name: name, Transport: transport, URL: srv.HTTPURL}
		if transport == mcpTransportSSE {
			c.URL = srv.URL
		}
		for _, h := range slices.Sorted(maps.Keys(srv.Headers)) {
			c.Headers = append(c.Headers, mcpHeader{Name: h, Value: srv.Headers[h]})
		}
		if err := c.validateRemote(); err != nil {
			add("key %q: %v", at+"."+key, err)
		}
	}
	if srv.Cwd != "" && filepath.IsAbs(srv.Cwd) {
		if fi, err := os.Stat(srv.Cwd); err != nil || !fi.IsDir() {
			add("key %q: directory %q does not exist", at+".cwd", srv.Cwd)
		}
	}
	for _, list := range []struct {
		key   string
		names []string
	}{{"includeTools", srv.IncludeTools}, {"excludeTools", srv.ExcludeTools}} {
		for i, n := range list.names {
			if strings.TrimSpace(n) == "" {
				add("key %q: empty tool name", fmt.Sprintf("%s.%s[%d]", at, list.key, i))
			}
		}
	}
	return problems
}

// validateHooks checks every hooks event: each matcher is compiled and
// each hook's type, command or URL, and timeout read (hookTimeoutMS); a
// prompt hook is refused. The events acpguard never fires are named in one
// warning. disableAllHooks true leaves no hook to run.
func (s *settings) validateHooks() []string {
	var problems, neverFired []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	pol := &hookHTTPPolicy{AllowPrivate: s.Security.AllowPrivateNetworkHooks}
	for i, p := range s.Security.AllowedHTTPHookURLs {
		re, err := compileHookURLPattern(p)
		if err != nil {
			add("key %q: invalid URL pattern %q: %v", fmt.Sprintf("security.allowedHttpHookUrls[%d]", i), p, err)
			continue
		}
		pol.Allowed = append(pol.Allowed, re)
	}
	if c := s.StopHookBlockingCap; c < 0 {
		add("key %q: %d is not 1 or more", "stopHookBlockingCap", c)
	}
	v := reflect.ValueOf(&s.Hooks).Elem()
	for i, f := range jsonFields(v.Type()) {
		list := v.Field(i).Interface().([]hookMatcher)
		if len(list) == 0 {
			continue
		}
		if hookEventsNeverFired[f.name] != "" {
			neverFired = append(neverFired, f.name)
		}
		for i := range list {
			m := &list[i]
			at := fmt.Sprintf("hooks.%s[%d]", f.name, i)
			if err := m.compile(); err != nil {
				add("key %q: %v", at+".matcher", err)
			}
			if len(m.Hooks) == 0 {
				add("key %q: no hooks", at+".hooks")
			}
			for j := range m.Hooks {
				h := &m.Hooks[j]
				h.http = pol
				hat := fmt.Sprintf("%s.hooks[%d]", at, j)
				switch {
				case h.Type == hookTypePrompt:
					named := ""
					if h.Name != "" {
						named = " " + h.label()
					}
					add("key %q: %s hook%s of type %q is not supported: acpguard does not send hook input to a model; use a command or http hook that asks one", hat+".type", f.name, named, h.Type)
				case h.Type == hookTypeHTTP:
					if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
						add("key %q: invalid URL %q (want http:// or https:// and a host)", hat+".url", h.URL)
					}
					for _, k := range h.AllowedEnvVars {
						if !envName.MatchString(k) {
							add("key %q: invalid environment variable name %q", hat+".allowedEnvVars", k)
						}
					}
					for k, val := range h.Headers {
						if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(val, "\r\n\x00") {
							add("key %q: invalid header %q", hat+".headers", k)
						}
					}
				case h.Type != hookTypeCommand:
					add("key %q: hook type %q is not supported (want \"command\" or \"http\")", hat+".type", h.Type)
				case strings.TrimSpace(h.Command) == "":
					add("key %q: empty command", hat+".command")
				case strings.IndexByte(h.Command, 0) >= 0:
					add("key %q: command contains a NUL byte", hat+".command")
				}
				ms, err := hookTimeoutMS(h.Timeout)
				if err != nil {
					add("key %q: %v", hat+".timeout", err)
				}
				h.Timeout = ms
				for _, k := range slices.Sorted(maps.Keys(h.Env)) {
					if !envName.MatchString(k) {
						add("key %q: invalid environment variable name %q", hat+".env", k)
					}
				}
			}
		}
	}
	if len(neverFired) > 0 && !s.DisableAllHooks {
		s.Warnings = append(s.Warnings, fmt.Sprintf("settings: hooks for %s load but never fire: acpguard has none of the features that fire them (the README lists each event)", strings.Join(neverFired, ", ")))
	}
	if s.DisableAllHooks {
		s.Hooks = hooksSettings{}
	}
	return problems
}

// hookSecretNames are the variables the settings' http hooks may read
// (allowedEnvVars): secrets, kept out of every child environment.
func (s *settings) hookSecretNames() []string {
	var names []string
	v := reflect.ValueOf(&s.Hooks).Elem()
	for i := range v.NumField() {
		for _, m := range v.Field(i).Interface().([]hookMatcher) {
			for _, h := range m.Hooks {
				names = append(names, h.AllowedEnvVars...)
			}
		}
	}
	return names
}

// resolveMaxTurns sets MaxTurns from model.maxSessionTurns or its deprecated
// alias model.maxTurns. acpguard bounds every prompt at maxMaxTurns model
// calls, so Qwen's -1 (unlimited) means that cap; any other value is
// between 1 and the cap.
func (m *modelSettings) resolveMaxTurns(warnings *[]string) error {
	switch {
	case m.MaxSessionTurns != nil && m.LegacyMaxTurns != nil:
		return fmt.Errorf("keys %q and %q: both set; keep only %q (%q is its deprecated alias)", "model.maxSessionTurns", "model.maxTurns", "model.maxSessionTurns", "model.maxTurns")
	case m.MaxSessionTurns != nil:
		n := *m.MaxSessionTurns
		if n == -1 {
			n = maxMaxTurns
		}
		if n < 1 || n > maxMaxTurns {
			return fmt.Errorf("key %q: %d is not -1 (unlimited, capped at %d) or between 1 and %d", "model.maxSessionTurns", n, maxMaxTurns, maxMaxTurns)
		}
		m.MaxTurns = n
	case m.LegacyMaxTurns != nil:
		n := *m.LegacyMaxTurns
		if n < 1 || n > maxMaxTurns {
			return fmt.Errorf("key %q: %d is not between 1 and %d", "model.maxTurns", n, maxMaxTurns)
		}
		m.MaxTurns = n
		*warnings = append(*warnings, `settings key "model.maxTurns" is deprecated: use "model.maxSessionTurns" (Qwen Code's name; -1 for unlimited)`)
	}
	return nil
}

// warnSettings logs each of the settings' warnings once, and at debug
// level the keys it ignores.
func warnSettings(log *slog.Logger, s *settings) {
	for _, w := range s.Warnings {
		log.Warn(w)
	}
	if len(s.Ignored) > 0 {
		log.Debug("settings: ignoring Qwen Code keys: " + strings.Join(s.Ignored, ", "))
	}
	for _, name := range s.SkippedMCP {
		log.Debug("settings: MCP server not started: mcp.allowed or mcp.excluded leaves it out", "server", name)
	}
}

// toolDisabled reports whether tools.disabled names the canonical tool,
// directly, through an alias (Bash, Read, ...) or as an MCP rule name
// (mcp__server covers the server's tools).
//
// tools.exclude is read as tools.disabled; a non-empty tools.core disables
// every tool it does not name.
func (s *settings) toolDisabled(tool string) bool { return s.disabledBy(tool) != "" }

// disabledBy is disabledBy of the policy's settings; no policy disables
// nothing.
func (p *callPolicy) disabledBy(tool string) string {
	if p == nil {
		return ""
	}
	return p.Settings.disabledBy(tool)
}

// disabledBy names the key that disables the tool, "" if none does.
func (s *settings) disabledBy(tool string) string {
	switch {
	case toolNamed(s.Tools.Disabled, tool):
		return "tools.disabled"
	case toolNamed(s.Tools.Exclude, tool):
		return "tools.exclude"
	case len(s.Tools.Core) > 0 && !toolNamed(s.Tools.Core, tool):
		return "tools.core"
	}
	return ""
}

// toolNamed reports whether a tools list names the canonical tool.
func toolNamed(list []string, tool string) bool {
	for _, name := range list {
		name, _, _ = strings.Cut(name, "(")
		if strings.HasPrefix(name, mcpToolPrefix) {
			if strings.HasPrefix(tool, mcpToolPrefix) && matchMCPRule(name, tool) {
				return true
			}
			continue
		}
		names, _ := ruleToolNames(name)
		for _, n := range names {
			if n == tool {
				return true
			}
		}
	}
	return false
}

// slashCommandDisabled reports whether slashCommands.disabled names the
// command (with or without its "/").
func (s *settings) slashCommandDisabled(name string) bool {
	name = strings.TrimPrefix(name, "/")
	for _, c := range s.SlashCommands.Disabled {
		if strings.TrimPrefix(c, "/") == name {
			return true
		}
	}
	return false
}
