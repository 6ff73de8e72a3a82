// settings_files.go owns settings discovery and merge as Qwen Code does it
// (DESIGN.md §10): which settings files are read, in which order, how their
// layers merge, the legacy flat keys and $VAR expansion, and the trust of
// the workspace's own file. settings.go checks each layer and the result.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// The scopes of the settings files, lowest priority first. The operator's
// --settings file comes last and wins.
const (
	scopeSystemDefaults = "system-defaults"
	scopeUser           = "user"
	scopeWorkspace      = "workspace"
	scopeSystem         = "system"
	scopeOperator       = "settings flag"
)

// Where Qwen Code looks for its settings files, and the variables that move
// them.
const (
	defaultSystemSettingsPath = "/etc/qwen-code/settings.json"
	systemDefaultsFileName    = "system-defaults.json"
	envSystemSettingsPath     = "QWEN_CODE_SYSTEM_SETTINGS_PATH"
	envSystemDefaultsPath     = "QWEN_CODE_SYSTEM_DEFAULTS_PATH"
	envQwenHome               = "QWEN_HOME"
	qwenDirName               = ".qwen"
	settingsFileName          = "settings.json"
)

// settingsSources are the inputs of discovery, taken from the environment
// the process started with (settingsSourcesOf), so a test can point them at
// a temporary directory.
type settingsSources struct {
	Home           string // $HOME, "" unset
	QwenHome       string // $QWEN_HOME, "" unset
	System         string // the System file
	SystemDefaults string // the SystemDefaults file
	TrustedFolders string // the trust rules file (settings_trust.go), "" none
	// Lookup returns a variable for $VAR expansion; ok false when unset.
	Lookup func(name string) (string, bool)
}

// settingsSourcesOf reads the settings locations from env.
func settingsSourcesOf(env *procEnv) settingsSources {
	lookup := func(name string) (string, bool) {
		// A hidden secret (a header's or an http hook's variable) is never
		// expanded into a settings value: only its hook or server reads it.
		if env.hiddenName(name) {
			return "", false
		}
		for _, kv := range env.snapshot {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, true
			}
		}
		return "", false
	}
	src := settingsSources{Home: env.lookup("HOME"), QwenHome: env.lookup(envQwenHome), Lookup: lookup}
	src.System = defaultSystemSettingsPath
	if p := env.lookup(envSystemSettingsPath); p != "" {
		src.System = p
	}
	src.SystemDefaults = filepath.Join(filepath.Dir(src.System), systemDefaultsFileName)
	if p := env.lookup(envSystemDefaultsPath); p != "" {
		src.SystemDefaults = p
	}
	if p := env.lookup(envTrustedFoldersPath); p != "" {
		src.TrustedFolders = p
	} else if dir := src.qwenHome(); dir != "" {
		src.TrustedFolders = filepath.Join(dir, trustedFoldersFileName)
	}
	return src
}

// qwenHome is the Qwen home directory: $QWEN_HOME, else ~/.qwen; "" when
// neither is set.
func (s settingsSources) qwenHome() string {
	switch {
	case s.QwenHome != "":
		return s.QwenHome
	case s.Home != "":
		return filepath.Join(s.Home, qwenDirName)
	}
	return ""
}

// settingsLoadOptions are the flags and mode that choose the layers.
type settingsLoadOptions struct {
	Operator       string // the --settings file, absolute; "" none
	Workspace      string // the workspace directory; "" none
	NoUser         bool   // --no-user-settings: neither the user nor the workspace file
	TrustWorkspace bool   // --trust-workspace-settings
	Required       bool   // the guard is required: the workspace file is untrusted
}

// settingsFileRead is one settings file that was read.
type settingsFileRead struct {
	Scope string
	Path  string
}

// settingsLoad is the merged, validated settings and what the operator is
// told about how they were found.
type settingsLoad struct {
	Settings *settings
	Files    []settingsFileRead
	Warnings []string // legacy keys ignored, workspace keys dropped
	// Trust is what the trust rules say of the workspace (settings_trust.go).
	Trust folderTrust
	// ExcludedEnvVars is advanced.excludedEnvVars (settings_dotenv.go), nil
	// unset.
	ExcludedEnvVars []string
	// DotEnv is what the .env files gave at start, nil none read.
	DotEnv *dotEnvLoad
	// origin maps a top-level key and its first nested key ("tools.sandbox")
	// to the last file that set it, for errors found after the merge.
	origin map[string]string
}

// originOf returns the last file that set key ("tools.sandbox" or "hooks"),
// or the operator's file name when none did.
func (l *settingsLoad) originOf(key, fallback string) string {
	if p, ok := l.origin[key]; ok {
		return p
	}
	return fallback
}

// logSettingsFiles logs every file read, at info in required mode (so the
// operator sees what a daemon runs on) and at debug otherwise, then every
// warning.
func logSettingsFiles(log *slog.Logger, l *settingsLoad, required bool) {
	if l == nil {
		return
	}
	level := slog.LevelDebug
	if required {
		level = slog.LevelInfo
	}
	for _, f := range l.Files {
		log.Log(context.Background(), level, fmt.Sprintf("settings: read %s (%s)", f.Path, f.Scope))
	}
	for _, w := range l.Warnings {
		log.Warn(w)
	}
}

// loadSettingsFiles discovers, reads and merges the settings layers:
// SystemDefaults < User < Workspace < System < --settings. A missing file is
// skipped; one that cannot be read or is invalid stops the start with its
// path. acpguard never rewrites a settings file.
func loadSettingsFiles(src settingsSources, o settingsLoadOptions) (*settingsLoad, error) {
	// The workspace file is read once its folder's trust is known: folder
	// trust is the other layers' to enable, as in Qwen Code, so a
	// workspace file cannot decide its own trust.
	var read []settingsLayerObject
	for _, ly := range settingsLayers(src, o) {
		if ly.path == "" {
			continue
		}
		read = append(read, settingsLayerObject{settingsLayer: ly})
		if ly.scope != scopeWorkspace && ly.scope != scopeProject {
			if err := read[len(read)-1].read(src.Lookup); err != nil {
				return nil, err
			}
		}
	}
	l := &settingsLoad{origin: map[string]string{}}
	enabled, err := folderTrustEnabled(read)
	if err != nil {
		return nil, err
	}
	l.Trust = folderTrust{Enabled: enabled, Trusted: true, File: src.TrustedFolders}
	if o.Workspace != "" {
		if l.Trust, err = decideFolderTrust(enabled, src.TrustedFolders, o.Workspace); err != nil {
			return nil, err
		}
	}
	merged := map[string]any{}
	// rawMCP is each project server's entry as its file gave it: its
	// approval is bound to a hash of it (settings_mcpjson.go).
	rawMCP := map[string]map[string]any{}
	for i := range read {
		ly := &read[i]
		if ly.scope == scopeWorkspace || ly.scope == scopeProject {
			if _, err := os.Lstat(ly.path); err == nil && l.Trust.untrusted() {
				l.Warnings = append(l.Warnings, fmt.Sprintf("settings %q: not read: the folder is not trusted: %s", ly.path, l.Trust.why()))
				continue
			}
			if err := ly.read(src.Lookup); err != nil {
				return nil, err
			}
		}
		obj := ly.obj
		if obj == nil {
			continue // missing
		}
		l.Files = append(l.Files, settingsFileRead{ly.scope, ly.path})
		l.Warnings = append(l.Warnings, ly.warnings...)
		if ly.scope == scopeWorkspace || ly.scope == scopeProject {
			l.Warnings = append(l.Warnings, filterWorkspaceSettings(obj, merged, ly.path, o)...)
			servers, _ := obj[mcpServersSettingsKey].(map[string]any)
			for name, e := range servers {
				if entry, ok := e.(map[string]any); ok {
					entry = maps.Clone(entry)
					if h, ok := entry["headers"].(map[string]any); ok && ly.scope == scopeWorkspace {
						// Qwen Code hashes the workspace entry as it loaded it: expanded.
						entry["headers"] = expandSettingsEnv(maps.Clone(h), src.Lookup)
					}
					rawMCP[name] = entry
				}
			}
		}
		// Each layer is checked alone, after what the workspace file may
		// not set is gone, so an error names its file.
		if err := checkSettingsLayer(obj, ly.raw); err != nil {
			return nil, fmt.Errorf("settings %q: %w", ly.path, err)
		}
		for k, v := range obj {
			l.origin[k] = ly.path
			if m, ok := v.(map[string]any); ok {
				for k2 := range m {
					l.origin[k+"."+k2] = ly.path
				}
			}
		}
		merged = mergeSettingsLayer(merged, obj, "")
	}
	if l.Trust.untrusted() {
		l.Warnings = append(l.Warnings, untrustedFolderApprovalMode(merged, o.Workspace)...)
	}
	if l.ExcludedEnvVars, err = excludedEnvVarsOf(merged); err != nil {
		return nil, fmt.Errorf("settings %q: %w", l.originOf("advanced.excludedEnvVars", "advanced"), err)
	}
	data, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("merge settings: %w", err)
	}
	st, err := parseSettings(data)
	if err != nil {
		return nil, fmt.Errorf("merge settings files %s: %w", strings.Join(l.paths(), ", "), err)
	}
	gateProjectMCPServers(st, l, src, o.Workspace, rawMCP)
	l.Settings = st
	return l, nil
}

// settingsLayerObject is one settings file: its layer and, once read, its
// decoded object (nil: missing), its bytes as written and the warnings of
// its reading.
type settingsLayerObject struct {
	settingsLayer
	obj      map[string]any
	raw      []byte
	warnings []string
}

func (ly *settingsLayerObject) read(lookup func(string) (string, bool)) error {
	var err error
	if ly.scope == scopeProject {
		ly.obj, err = readProjectMCPLayer(ly.path)
		return err
	}
	ly.obj, ly.raw, ly.warnings, err = readSettingsLayer(ly.path, lookup, ly.scope == scopeOperator)
	return err
}

// untrustedFolderApprovalMode makes the merged approval mode at most
// default, plan staying plan, as Qwen Code does in a folder it does not
// trust, and says so when it was looser.
func untrustedFolderApprovalMode(merged map[string]any, dir string) []string {
	tools, _ := merged["tools"].(map[string]any)
	mode, _ := tools["approvalMode"].(string)
	if mode == "" || approvalModeRank(mode) <= approvalModeRank(modeDefault) {
		return nil
	}
	tools = maps.Clone(tools)
	tools["approvalMode"] = modeDefault
	merged["tools"] = tools
	return []string{fmt.Sprintf("settings: approval mode %q runs as %q in %q: the folder is not trusted", mode, modeDefault, dir)}
}

// settingsLayer is one settings file to read: its scope and path.
type settingsLayer struct{ scope, path string }

// settingsLayers lists the files loadSettingsFiles reads, lowest priority
// first.
func settingsLayers(src settingsSources, o settingsLoadOptions) []settingsLayer {
	type layer = settingsLayer
	var layers []layer
	layers = append(layers, layer{scopeSystemDefaults, src.SystemDefaults})
	if !o.NoUser {
		if dir := src.qwenHome(); dir != "" {
			layers = append(layers, layer{scopeUser, filepath.Join(dir, settingsFileName)})
		}
		if o.Workspace != "" {
			// Qwen Code's order: user < .mcp.json < workspace, system.
			layers = append(layers, layer{scopeProject, filepath.Join(o.Workspace, projectMCPFileName)})
		}
		if o.Workspace != "" && !sameDir(o.Workspace, src.Home) {
			layers = append(layers, layer{scopeWorkspace, filepath.Join(o.Workspace, qwenDirName, settingsFileName)})
		}
	}
	layers = append(layers, layer{scopeSystem, src.System})
	if o.Operator != "" {
		layers = append(layers, layer{scopeOperator, o.Operator})
	}
	return layers
}

func (l *settingsLoad) paths() []string {
	var out []string
	for _, f := range l.Files {
		out = append(out, fmt.Sprintf("%q", f.Path))
	}
	return out
}

// sameDir reports whether a and b name the same directory once symbolic
// links are resolved; Qwen Code skips the workspace file of the home
// directory, which is the user file already.
func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// readSettingsLayer reads one settings file: at most maxSettingsBytes, its
// comments blanked, decoded with duplicate keys refused, legacy flat keys
// moved to their nested names, $VAR expanded in string values, then checked
// later by checkSettingsLayer. A missing file returns nil, nil, unless it is the
// operator's (must).
func readSettingsLayer(path string, lookup func(string) (string, bool), must bool) (obj map[string]any, raw []byte, warnings []string, err error) {
	f, err := openSettingsFile(path)
	if errors.Is(err, os.ErrNotExist) && !must {
		return nil, nil, nil, nil
	}
	// A file this user cannot even see (a directory above it that it may
	// not search, such as another user's home) is missing to it; one it
	// sees but may not read stops the start.
	if _, serr := os.Stat(path); errors.Is(err, os.ErrPermission) && errors.Is(serr, os.ErrPermission) && !must {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read settings %q: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, nil, nil, fmt.Errorf("read settings %q: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, nil, nil, fmt.Errorf("read settings %q: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsBytes+1))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read settings %q: %w", path, err)
	}
	fail := func(err error) (map[string]any, []byte, []string, error) {
		return nil, nil, nil, fmt.Errorf("settings %q: %w", path, err)
	}
	if len(data) > maxSettingsBytes {
		return fail(fmt.Errorf("larger than %d bytes", maxSettingsBytes))
	}
	if !utf8.Valid(data) {
		return fail(errors.New("not valid UTF-8"))
	}
	raw = data
	data = blankJSONC(data)
	obj, err = decodeObject(data)
	if err == nil {
		err = duplicateMember(data)
	}
	if err != nil {
		// parseSettings names the place of a syntax error in the file as
		// written.
		if _, perr := parseSettings(raw); perr != nil {
			err = perr
		}
		return fail(err)
	}
	warnings = migrateLegacySettings(obj, path)
	late := detachLateValues(obj)
	expandSettingsEnv(obj, lookup)
	late()
	return obj, raw, warnings, nil
}

// checkSettingsLayer checks one layer's object with parseSettings: the
// file's bytes as written (raw) when nothing was migrated, expanded or
// dropped, so an error's place is the file's.
func checkSettingsLayer(obj map[string]any, raw []byte) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if orig, err := decodeObject(blankJSONC(raw)); err == nil && sameJSON(orig, obj) {
		data = raw
	}
	_, err = parseSettings(data)
	return err
}

// legacySettingsKeys are Qwen Code's flat keys of settings $version 1 and
// their nested names.
var legacySettingsKeys = map[string]string{
	"theme":                "ui.theme",
	"model":                "model.name",
	"selectedAuthType":     "security.auth.selectedType",
	"approvalMode":         "tools.approvalMode",
	"autoAccept":           "tools.autoAccept",
	"coreTools":            "tools.core",
	"allowedTools":         "tools.allowed",
	"excludeTools":         "tools.exclude",
	"allowMCPServers":      "mcp.allowed",
	"excludeMCPServers":    "mcp.excluded",
	"maxSessionTurns":      "model.maxSessionTurns",
	"sessionTokenLimit":    "model.sessionTokenLimit",
	"skipNextSpeakerCheck": "model.skipNextSpeakerCheck",
	"skipLoopDetection":    "model.skipLoopDetection",
	"sandbox":              "tools.sandbox",
}

// migrateLegacySettings moves the legacy flat keys of obj to their nested
// names in memory, as Qwen Code's v1 to v2 migration does when $version is
// missing or below 2. With a later $version a legacy key is dropped with
// Qwen's warning. A nested name already set wins over its flat key. A flat
// key whose value is an object is not legacy ("model": {...}).
func migrateLegacySettings(obj map[string]any, path string) []string {
	version := 0.0
	if v, ok := obj["$version"].(json.Number); ok {
		version, _ = v.Float64()
	}
	var warnings []string
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		to, legacy := legacySettingsKeys[k]
		if !legacy {
			continue
		}
		v := obj[k]
		if _, isObject := v.(map[string]any); isObject {
			continue
		}
		delete(obj, k)
		if version >= 2 {
			warnings = append(warnings, fmt.Sprintf("settings %q: Legacy setting '%s' will be ignored. Please use '%s' instead.", path, k, to))
			continue
		}
		parent, leaf, _ := strings.Cut(to, ".")
		m, ok := obj[parent].(map[string]any)
		if !ok {
			m = map[string]any{}
			obj[parent] = m
		}
		for strings.Contains(leaf, ".") {
			var head string
			head, leaf, _ = strings.Cut(leaf, ".")
			next, ok := m[head].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[head] = next
			}
			m = next
		}
		if _, set := m[leaf]; !set {
			m[leaf] = v
		}
	}
	return warnings
}

// neverExpanded are the variables Qwen Code never substitutes into
// settings: session ids and tokens.
var neverExpanded = []string{"SESSION_ID", "QWEN_CODE_SESSION_ID", envServerToken, "QWEN_DAEMON_TOKEN", envGuardToken}

var settingsVarRef = regexp.MustCompile(`\$(?:\{([^}]*)\}|(\w+))`)

// expandSettingsEnv replaces $NAME and ${NAME} in every string value (never
// in keys) with the variable's value, as Qwen Code does; an unset variable,
// one of neverExpanded and ${NAME:-default} are kept as written.
func expandSettingsEnv(v any, lookup func(string) (string, bool)) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = expandSettingsEnv(e, lookup)
		}
	case []any:
		for i, e := range t {
			t[i] = expandSettingsEnv(e, lookup)
		}
	case string:
		return settingsVarRef.ReplaceAllStringFunc(t, func(ref string) string {
			m := settingsVarRef.FindStringSubmatch(ref)
			name := m[1] + m[2]
			if slices.Contains(neverExpanded, name) || lookup == nil {
				return ref
			}
			if val, ok := lookup(name); ok {
				return val
			}
			return ref
		})
	}
	return v
}

// hookLateKeys are the keys of a hook whose variables are replaced when it
// runs, from its allowedEnvVars alone (hooks_http.go), never at load: a
// header could otherwise carry any variable of the environment.
var hookLateKeys = []string{"url", "headers"}

// mcpLateKeys are the keys of an MCP server whose variables the remote
// client replaces when it connects (mcp_remote.go), which holds each
// variable named out of every child's environment: it could not with the
// value already in place.
var mcpLateKeys = []string{"headers"}

// detachLateValues takes the hookLateKeys values of every hook and the
// mcpLateKeys values of every MCP server out of obj, a settings file's
// object, and returns what puts them back.
func detachLateValues(obj map[string]any) (restore func()) {
	type kept struct {
		owner map[string]any
		key   string
		val   any
	}
	var all []kept
	detach := func(owner map[string]any, keys []string) {
		for _, k := range keys {
			if v, ok := owner[k]; ok {
				all = append(all, kept{owner, k, v})
				delete(owner, k)
			}
		}
	}
	events, _ := obj["hooks"].(map[string]any)
	for _, list := range events {
		matchers, _ := list.([]any)
		for _, m := range matchers {
			mm, _ := m.(map[string]any)
			hooks, _ := mm["hooks"].([]any)
			for _, h := range hooks {
				hm, _ := h.(map[string]any)
				detach(hm, hookLateKeys)
			}
		}
	}
	servers, _ := obj["mcpServers"].(map[string]any)
	for _, e := range servers {
		if entry, ok := e.(map[string]any); ok {
			detach(entry, mcpLateKeys)
		}
	}
	return func() {
		for _, k := range all {
			k.owner[k.key] = k.val
		}
	}
}

// The merge strategies of Qwen Code's settings paths; every other object
// merges deep, and every other scalar or array is replaced.
var (
	shallowMergePaths = []string{"mcpServers", "env", "channels", "serve", "agents.modelGrades", "agents.maxParallelAgentsByModel"}
	unionMergePaths   = []string{"permissions.allow", "permissions.ask", "permissions.deny", "permissions.autoMode.environment",
		"tools.exclude", "tools.disabled", "tools.visible", "slashCommands.disabled", "advanced.excludedEnvVars"}
	unionMergePrefixes = []string{"permissions.autoMode.hints.", "skills."}
	concatMergePaths   = []string{"mcp.allowed", "mcp.excluded", "context.includeDirectories"}
	concatMergePrefix  = "hooks."
)

// mergeSettingsLayer merges over onto base (both decoded objects) at path
// and returns the result; later layers win.
func mergeSettingsLayer(base, over map[string]any, path string) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		p := k
		if path != "" {
			p = path + "." + k
		}
		out[k] = mergeSettingsValue(out[k], v, p)
	}
	return out
}

func mergeSettingsValue(base, over any, path string) any {
	bl, bIsList := base.([]any)
	ol, oIsList := over.([]any)
	bm, bIsObj := base.(map[string]any)
	om, oIsObj := over.(map[string]any)
	switch {
	case bIsList && oIsList && (slices.Contains(unionMergePaths, path) || hasAnyPrefix(path, unionMergePrefixes)):
		out := append([]any(nil), bl...)
		for _, e := range ol {
			if !slices.ContainsFunc(out, func(x any) bool { return sameJSON(x, e) }) {
				out = append(out, e)
			}
		}
		return out
	case bIsList && oIsList && (slices.Contains(concatMergePaths, path) || strings.HasPrefix(path, concatMergePrefix)):
		return append(append([]any(nil), bl...), ol...)
	case bIsObj && oIsObj && slices.Contains(shallowMergePaths, path):
		out := make(map[string]any, len(bm)+len(om))
		for k, v := range bm {
			out[k] = v
		}
		for k, v := range om {
			out[k] = v
		}
		return out
	case bIsObj && oIsObj:
		return mergeSettingsLayer(bm, om, path)
	}
	return over
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// workspaceAlwaysDropped are the keys Qwen Code itself never takes from a
// workspace file, trusted or not, and security.allowedHttpHookUrls, which
// acpguard reads from user and system settings only (Qwen Code takes it from
// a workspace when no other file sets it).
var workspaceAlwaysDropped = []string{"tools.executionSandbox", "tools.workflowsEnabled", "security.allowPrivateNetworkHooks", "security.allowedHttpHookUrls",
	"security.allowedInsecureVoiceBaseUrls", "goals.modelProposed", "outboundCorrelation.allowDynamicHeaderValues", "serve.tokenQr"}

// workspaceUntrustedKeys are what an untrusted workspace file may not set
// (DESIGN.md §10): what runs commands (hooks, MCP servers, tool discovery),
// what allows without asking, the sandbox, where model calls go, the
// environment, and which files of the Qwen home reach the model's context. tools.approvalMode is checked apart: it may only tighten.
var workspaceUntrustedKeys = []string{
	"hooks", "disableAllHooks", "mcpServers", "mcp.allowed", "mcp.serverCommand",
	"permissions.allow", "permissions.autoMode.hints.allow",
	"tools.allowed", "tools.core", "tools.autoAccept", "tools.discoveryCommand", "tools.callCommand",
	"tools.sandbox", "tools.sandboxImage", "tools.sandboxRead", "tools.sandboxWrite", "tools.sandboxHide", "tools.sandboxProtect",
	"tools.sandboxNetwork", "tools.sandboxUnix", "context.fileName", "model.baseUrl", "modelProviders", "providerProtocol", "security.auth", "security.allowedHttpHookUrls", "proxy", "env",
}

// approvalModeRank orders the approval modes from strictest: a workspace
// file may only move to a lower rank.
func approvalModeRank(mode string) int {
	switch strings.ToLower(strings.ReplaceAll(mode, "_", "-")) {
	case "plan":
		return 0
	case "default", "auto":
		return 1
	case "auto-edit", "autoedit":
		return 2
	}
	return 3 // yolo, and what is unknown
}

// filterWorkspaceSettings removes from the workspace file's object what it
// may not set and returns a warning for each removal. below is the merge of
// the layers under it, whose approval mode the file may only tighten.
func filterWorkspaceSettings(obj, below map[string]any, path string, o settingsLoadOptions) []string {
	var warnings []string
	for _, key := range workspaceAlwaysDropped {
		if deleteSettingsKey(obj, key) {
			warnings = append(warnings, fmt.Sprintf("settings %q: ignore key %q: it is read from user and system settings only, never from a workspace file", path, key))
		}
	}
	if !o.Required || o.TrustWorkspace {
		why := "the guard is not required"
		if o.Required {
			why = "--trust-workspace-settings"
		}
		return append(warnings, fmt.Sprintf("settings %q: workspace file applied as trusted (%s)", path, why))
	}
	drop := func(key string) {
		warnings = append(warnings, fmt.Sprintf("settings %q: drop key %q: the workspace file is untrusted in required mode; give --trust-workspace-settings to apply it", path, key))
	}
	for _, key := range workspaceUntrustedKeys {
		if deleteSettingsKey(obj, key) {
			drop(key)
		}
	}
	if tools, ok := obj["tools"].(map[string]any); ok {
		if mode, ok := tools["approvalMode"].(string); ok {
			current := defaultSettingsMode
			if bt, ok := below["tools"].(map[string]any); ok {
				if m, ok := bt["approvalMode"].(string); ok {
					current = m
				}
			}
			if approvalModeRank(mode) > approvalModeRank(current) {
				delete(tools, "approvalMode")
				drop("tools.approvalMode")
			}
		}
	}
	return warnings
}

// deleteSettingsKey removes the dotted key from obj and reports whether it
// was there.
func deleteSettingsKey(obj map[string]any, key string) bool {
	m := obj
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	last := parts[len(parts)-1]
	if _, ok := m[last]; !ok {
		return false
	}
	delete(m, last)
	return true
}

// sessionSettings are the settings that govern one session, loaded from
// its cwd's workspace (DESIGN.md §10), and what is derived from them: the
// MCP servers every session of that workspace starts and their call bound.
// A value is shared by the sessions of a workspace and never changed.
type sessionSettings struct {
	Load           *settingsLoad
	Settings       *settings
	MCP            []mcpServerConfig
	MCPCallTimeout time.Duration
	// Sandbox is the sandbox its sessions' tools, hooks and MCP servers
	// start in, resolved from these settings (config_sandbox.go); nil: the
	// agent's.
	Sandbox *sandboxConfig
	// SystemPrompt is its sessions' replacement prompt when their settings
	// name it (agent_prompt.go); nil: the agent's.
	SystemPrompt *systemPromptSource
}

// settingsStamp is what shows that a settings file changed: whether it is
// there, its size and its modification time.
type settingsStamp struct {
	path  string
	found bool
	size  int64
	mtime int64 // nanoseconds
}

func stampSettingsFiles(layers []settingsLayer) []settingsStamp {
	out := make([]settingsStamp, 0, len(layers))
	for _, ly := range layers {
		st := settingsStamp{path: ly.path}
		if fi, err := os.Stat(ly.path); err == nil {
			st.found, st.size, st.mtime = true, fi.Size(), fi.ModTime().UnixNano()
		}
		out = append(out, st)
	}
	return out
}

// maxSettingsCacheEntries bounds the workspaces whose settings are kept.
const maxSettingsCacheEntries = 64

// settingsCache loads the settings of each session's workspace
// (loadSettingsFiles with the workspace's file) and keeps the result, or
// the error, until a stamp of one of its files changes, so that session/new
// does not read unchanged files again. derive turns a load into a session's
// settings; its error is the load's.
type settingsCache struct {
	src    settingsSources
	opts   settingsLoadOptions // Workspace is set per call
	derive func(*settingsLoad) (*sessionSettings, error)

	mu      sync.Mutex
	entries map[string]*settingsCacheEntry
}

type settingsCacheEntry struct {
	stamps []settingsStamp
	value  *sessionSettings
	err    error
}

func newSettingsCache(src settingsSources, o settingsLoadOptions, derive func(*settingsLoad) (*sessionSettings, error)) *settingsCache {
	return &settingsCache{src: src, opts: o, derive: derive, entries: map[string]*settingsCacheEntry{}}
}

// get returns the settings of the workspace dir; fresh says the files were
// read for this call (the caller logs what was read then, once).
func (c *settingsCache) get(workspace string) (v *sessionSettings, fresh bool, err error) {
	o := c.opts
	o.Workspace = workspace
	layers := append(settingsLayers(c.src, o), settingsLayer{"trusted folders", c.src.TrustedFolders})
	// The stamps are taken before the files are read: a file that changes
	// during the read is read again by the next call.
	stamps := stampSettingsFiles(layers)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[workspace]; ok && slices.Equal(e.stamps, stamps) {
		return e.value, false, e.err
	}
	load, err := loadSettingsFiles(c.src, o)
	if err == nil {
		v, err = c.derive(load)
	}
	if len(c.entries) >= maxSettingsCacheEntries {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[workspace] = &settingsCacheEntry{stamps: stamps, value: v, err: err}
	return v, true, err
}

// deriveSessionSettings makes a session's settings of a load: the
// --disabled-slash-commands added to its list, its MCP servers, a relative
// cwd of one resolved against the workspace of the file that named it
// (resolveMCPCwds). A server that cannot run is an error naming that file.
func deriveSessionSettings(l *settingsLoad, disabledSlash []string) (*sessionSettings, error) {
	st := *l.Settings
	st.SlashCommands.Disabled = append(slices.Clip(st.SlashCommands.Disabled), disabledSlash...)
	servers, err := mcpServersFromSettings(st.MCPServers)
	if err != nil {
		return nil, fmt.Errorf("settings %q: %w", l.originOf("mcpServers", "mcpServers"), err)
	}
	resolveMCPCwds(servers, func(name string) string { return l.workspaceOf("mcpServers." + name) })
	if l.Trust.untrusted() {
		// A server's trust counts in a trusted folder only, as in Qwen Code.
		for i := range servers {
			servers[i].Trust = false
		}
	}
	return &sessionSettings{Load: l, Settings: &st, MCP: servers,
		MCPCallTimeout: time.Duration(st.MCP.CallTimeoutMs) * time.Millisecond}, nil
}

// workspaceOf returns the workspace directory of the file that last set key
// when that is a workspace file (the directory holding its .qwen), else "".
func (l *settingsLoad) workspaceOf(key string) string {
	p, ok := l.origin[key]
	if !ok {
		return ""
	}
	for _, f := range l.Files {
		if f.Path == p && f.Scope == scopeWorkspace {
			return filepath.Dir(filepath.Dir(p))
		}
	}
	return ""
}

// openSettingsFile opens a settings file, or a file read beside them (the
// trust rules, .mcp.json, the MCP approvals), without waiting: a FIFO a
// workspace holds in a settings file's place never blocks the open, and
// its reader then refuses what is not a regular file.
func openSettingsFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
