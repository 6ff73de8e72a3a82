// settings.go owns the settings file (--settings FILE): its keys mirror
// Qwen Code's settings "so a section can be copied across", every key and
// value is checked, and an error names the file, the key path and the value.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Settings limits and defaults. "Defaults when absent: approval mode
// `default`, no rules, no hooks", and maxTurns "(default 50, then stopReason
// max_turn_requests)".
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
	Tools         toolsSettings                `json:"tools"`
	Permissions   permissionsSettings          `json:"permissions"`
	Hooks         hooksSettings                `json:"hooks"`
	Model         modelSettings                `json:"model"`
	SlashCommands slashCommandsSettings        `json:"slashCommands"`
	MCPServers    map[string]mcpServerSettings `json:"mcpServers"`
	MCP           mcpSettings                  `json:"mcp"`

	// Rules are the parsed permissions lists.
	Rules *permissionRules `json:"-"`
}

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

type modelSettings struct {
	Name     string `json:"name"`
	MaxTurns int    `json:"maxTurns"`
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
// key, then decodes and validates every value.
func parseSettings(data []byte) (*settings, error) {
	if len(data) > maxSettingsBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxSettingsBytes)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := settingsWalker{dec: dec}
	if err := w.value(reflect.TypeFor[settings](), ""); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
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

// settingsWalker follows the JSON tokens of a settings file along the Go
// types, so that an unknown key, a duplicate key or a wrong type is named
// by its path ("tools.approvalMode", "permissions.allow[2]").
type settingsWalker struct {
	dec *json.Decoder
}

func (w settingsWalker) value(t reflect.Type, at string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return settingsSyntaxError(w.dec, err)
	}
	got := jsonTokenKind(tok)
	if c, ok := reflect.Zero(t).Interface().(settingsTokenChecker); ok {
		return c.checkSettingsToken(at, tok)
	}
	switch t.Kind() {
	case reflect.Struct:
		if got != "object" {
			return settingsTypeError(at, "an object", got)
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.IsExported() && name != "-" && name != "" {
				fields[name] = f.Type
			}
		}
		return w.object(at, func(key string) (reflect.Type, bool) {
			ft, ok := fields[key]
			return ft, ok
		})
	case reflect.Map:
		if got != "object" {
			return settingsTypeError(at, "an object", got)
		}
		return w.object(at, func(string) (reflect.Type, bool) { return t.Elem(), true })
	case reflect.Slice:
		if got != "array" {
			return settingsTypeError(at, "an array", got)
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return w.end()
	case reflect.String:
		if got != "string" {
			return settingsTypeError(at, "a string", got)
		}
		if len(tok.(string)) > maxSettingsStringBytes {
			return fmt.Errorf("key %q: string longer than %d bytes", at, maxSettingsStringBytes)
		}
	case reflect.Bool:
		if got != "boolean" {
			return settingsTypeError(at, "a boolean", got)
		}
	case reflect.Int:
		if got != "number" {
			return settingsTypeError(at, "an integer", got)
		}
		if _, err := strconv.ParseInt(tok.(json.Number).String(), 10, 32); err != nil {
			return fmt.Errorf("key %q: want an integer, got %s", at, tok)
		}
	default:
		return fmt.Errorf("key %q: unsupported settings type %s", at, t)
	}
	return nil
}

// settingsTokenChecker is a settings type of one JSON scalar that may take
// more than one JSON type (tools.sandbox: a boolean or a string), checked by
// the type itself.
type settingsTokenChecker interface {
	checkSettingsToken(at string, tok json.Token) error
}

// object walks the members of an object whose '{' was read.
func (w settingsWalker) object(at string, field func(string) (reflect.Type, bool)) error {
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return settingsSyntaxError(w.dec, err)
		}
		key := tok.(string)
		p := key
		if at != "" {
			p = at + "." + key
		}
		if seen[key] {
			return fmt.Errorf("duplicate key %q", p)
		}
		seen[key] = true
		ft, ok := field(key)
		if !ok {
			return fmt.Errorf("unknown key %q", p)
		}
		if err := w.value(ft, p); err != nil {
			return err
		}
	}
	return w.end()
}

// end reads the '}' or ']' that closes an object or array.
func (w settingsWalker) end() error {
	if _, err := w.dec.Token(); err != nil {
		return settingsSyntaxError(w.dec, err)
	}
	return nil
}

func settingsTypeError(at, want, got string) error {
	if at == "" {
		return fmt.Errorf("want %s, got %s", want, got)
	}
	return fmt.Errorf("key %q: want %s, got %s", at, want, got)
}

func settingsSyntaxError(dec *json.Decoder, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("invalid JSON at byte %d: %w", dec.InputOffset(), err)
}

func jsonTokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "object"
		}
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
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
	if s.Model.MaxTurns < 1 || s.Model.MaxTurns > maxMaxTurns {
		return fmt.Errorf("key %q: %d is not between 1 and %d", "model.maxTurns", s.Model.MaxTurns, maxMaxTurns)
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
	if t := s.MCP.CallTimeoutMs; t != 0 && (t < mcpMinTimeoutMS || t > mcpMaxTimeoutMS) {
		return fmt.Errorf("key %q: %d ms is not between %d and %d", "mcp.callTimeoutMs", t, mcpMinTimeoutMS, mcpMaxTimeoutMS)
	}
	return nil
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
