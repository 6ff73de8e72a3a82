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
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

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
	// Env is Qwen Code's fallback environment: acpguard reads only
	// QWEN_SYSTEM_MD from it (agent_prompt.go); other names warn.
	Env map[string]string `json:"env"`

	// Rules are the parsed permissions lists.
	Rules *permissionRules `json:"-"`
	// Warnings are what loaded but deserves the operator's notice (a
	// deprecated key), logged once at startup (warnSettings).
	Warnings []string `json:"-"`
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
	// The sandbox keys (sandbox_flags.go): Qwen Code's tools.sandbox, and
	// acpguard's read and write lists and network and Unix choices.
	Sandbox        sandboxSetting `json:"sandbox"`
	SandboxRead    []string       `json:"sandboxRead"`
	SandboxWrite   []string       `json:"sandboxWrite"`
	SandboxNetwork sandboxAccess  `json:"sandboxNetwork"`
	SandboxUnix    sandboxAccess  `json:"sandboxUnix"`
}

type permissionsSettings struct {
	Allow []string `json:"allow"`
	Ask   []string `json:"ask"`
	Deny  []string `json:"deny"`
}

type hooksSettings struct {
	PreToolUse []hookMatcher `json:"PreToolUse"`
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

type slashCommandsSettings struct {
	Disabled []string `json:"disabled"`
}

// mcpServerSettings is one stdio MCP server. Timeout is in milliseconds, 0
// when absent. URL, HTTPURL and Headers are Qwen Code's keys of an sse or
// http server: read so that such an entry is refused by name (stdioOnly).
type mcpServerSettings struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Timeout int               `json:"timeout"`
	URL     string            `json:"url"`
	HTTPURL string            `json:"httpUrl"`
	Headers map[string]string `json:"headers"`
}

// mcpMaxCallTimeout bounds a settings entry's timeout.
const mcpMaxCallTimeout = 24 * time.Hour

// stdioOnly refuses an entry of another transport, naming the key that
// makes it one. Qwen Code reads httpUrl as streamable HTTP and url as SSE,
// both before command, so such an entry is not a stdio server with extras;
// headers belong to those transports only.
func (e mcpServerSettings) stdioOnly(name string) (key string, err error) {
	switch {
	case e.HTTPURL != "":
		return "httpUrl", mcpTransportRefused(name, "http")
	case e.URL != "":
		return "url", mcpTransportRefused(name, "sse")
	case e.Headers != nil:
		return "headers", fmt.Errorf("MCP server %q has headers but no url or httpUrl: headers apply only to http and sse servers", name)
	}
	return "", nil
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
		if key, err := e.stdioOnly(name); err != nil {
			return nil, fmt.Errorf("key %q: %w", "mcpServers."+name+"."+key, err)
		}
		c := mcpServerConfig{Name: name, Command: e.Command, Args: e.Args}
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
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

type mcpSettings struct {
	CallTimeoutMs int `json:"callTimeoutMs"`
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
	if err != nil {
		return nil, fmt.Errorf("settings %q: %w", path, err)
	}
	return s, nil
}

// parseSettings checks the shape of data against the settings types, key by
// key (checkShape), then decodes and validates every value.
func parseSettings(data []byte) (*settings, error) {
	if len(data) > maxSettingsBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxSettingsBytes)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	data = blankJSONC(data)
	if err := checkShape(data, reflect.TypeFor[settings](), maxSettingsStringBytes); err != nil {
		return nil, err
	}
	s := defaultSettings()
	if err := json.Unmarshal(data, s); err != nil {
		return nil, err // the walk above has already refused every bad shape
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate checks every value and fills in what depends on it.
func (s *settings) validate() error {
	switch s.Tools.ApprovalMode {
	case modePlan, modeDefault, modeAutoEdit, modeYolo:
	default:
		return fmt.Errorf("key %q: unknown approval mode %q (want plan, default, auto-edit or yolo)", "tools.approvalMode", s.Tools.ApprovalMode)
	}
	for i, name := range s.Tools.Disabled {
		if _, ok := ruleToolNames(name); !ok && !strings.HasPrefix(name, mcpToolPrefix) {
			return fmt.Errorf("key %q: unknown tool %q", fmt.Sprintf("tools.disabled[%d]", i), name)
		}
	}
	if err := s.Tools.validateSandbox(); err != nil {
		return err
	}
	rules, err := parsePermissionRules(s.Permissions.Allow, s.Permissions.Ask, s.Permissions.Deny)
	if err != nil {
		return err
	}
	s.Rules = rules
	for i := range s.Hooks.PreToolUse {
		m := &s.Hooks.PreToolUse[i]
		at := fmt.Sprintf("hooks.PreToolUse[%d]", i)
		if err := m.compile(); err != nil {
			return fmt.Errorf("key %q: %w", at+".matcher", err)
		}
		if len(m.Hooks) == 0 {
			return fmt.Errorf("key %q: no hooks", at+".hooks")
		}
		for j, h := range m.Hooks {
			hat := fmt.Sprintf("%s.hooks[%d]", at, j)
			switch {
			case h.Type != "command":
				return fmt.Errorf("key %q: hook type %q is not supported (want \"command\")", hat+".type", h.Type)
			case strings.TrimSpace(h.Command) == "":
				return fmt.Errorf("key %q: empty command", hat+".command")
			case strings.IndexByte(h.Command, 0) >= 0:
				return fmt.Errorf("key %q: command contains a NUL byte", hat+".command")
			case h.Timeout != 0 && (h.Timeout < hookMinTimeoutMS || h.Timeout > hookMaxTimeoutMS):
				return fmt.Errorf("key %q: timeout %d ms is not between %d and %d", hat+".timeout", h.Timeout, hookMinTimeoutMS, hookMaxTimeoutMS)
			}
		}
	}
	if err := s.Model.resolveMaxTurns(&s.Warnings); err != nil {
		return err
	}
	for i, c := range s.SlashCommands.Disabled {
		if name := strings.TrimPrefix(c, "/"); name == "" || strings.ContainsAny(name, " \t\r\n/") {
			return fmt.Errorf("key %q: invalid slash command %q", fmt.Sprintf("slashCommands.disabled[%d]", i), c)
		}
	}
	for name, srv := range s.MCPServers {
		at := "mcpServers." + name
		if key, err := srv.stdioOnly(name); err != nil {
			return fmt.Errorf("key %q: %w", at+"."+key, err)
		}
		// Any name runs under its sanitized form, as session/new's do.
		switch {
		case strings.TrimSpace(name) == "":
			return fmt.Errorf("key %q: empty MCP server name", at)
		case mcpNameAmbiguous(name) != nil:
			return fmt.Errorf("key %q: %w", at, mcpNameAmbiguous(name))
		case strings.TrimSpace(srv.Command) == "":
			return fmt.Errorf("key %q: empty command", at+".command")
		case srv.Timeout != 0 && (srv.Timeout < mcpMinTimeoutMS || srv.Timeout > mcpMaxTimeoutMS):
			return fmt.Errorf("key %q: timeout %d ms is not between %d and %d", at+".timeout", srv.Timeout, mcpMinTimeoutMS, mcpMaxTimeoutMS)
		}
		for k := range srv.Env {
			if !envName.MatchString(k) {
				return fmt.Errorf("key %q: invalid environment variable name %q", at+".env", k)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if !envName.MatchString(k) {
			return fmt.Errorf("key %q: invalid environment variable name %q", "env", k)
		}
		if k != envSystemMD {
			s.Warnings = append(s.Warnings, fmt.Sprintf("settings key %q is ignored: acpguard reads only %s from env", "env."+k, envSystemMD))
		}
	}
	if t := s.MCP.CallTimeoutMs; t != 0 && (t < mcpMinTimeoutMS || t > mcpMaxTimeoutMS) {
		return fmt.Errorf("key %q: %d ms is not between %d and %d", "mcp.callTimeoutMs", t, mcpMinTimeoutMS, mcpMaxTimeoutMS)
	}
	return nil
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

// warnSettings logs each of the settings' warnings once.
func warnSettings(log *slog.Logger, s *settings) {
	for _, w := range s.Warnings {
		log.Warn(w)
	}
}

// toolDisabled reports whether tools.disabled names the canonical tool,
// directly, through an alias (Bash, Read, ...) or as an MCP rule name
// (mcp__server covers the server's tools).
func (s *settings) toolDisabled(tool string) bool {
	for _, name := range s.Tools.Disabled {
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
