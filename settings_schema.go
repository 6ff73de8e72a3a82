// settings_schema.go owns the key tree of a settings file: the keys
// acpguard acts on (the settings types), the keys of Qwen Code 0.24.4's
// schema it accepts and ignores, and the walk that checks a file against
// both, reporting every problem of the file at once (DESIGN.md §10).
package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// qwenIgnoredKeys are the keys of Qwen Code 0.24.4's settings schema that
// acpguard accepts and does not act on: whatever is under one is accepted
// unchecked, and a file that sets one gets a debug line naming it. "*" is
// any name of a map (an MCP server), "[]" any element of an array.
var qwenIgnoredKeys = []string{
	// Whole subtrees about the interactive CLI, telemetry and features
	// acpguard does not have.
	"general", "ui", "ide", "privacy", "telemetry", "outboundCorrelation",
	"output", "dualOutput", "review", "memory", "agents", "experimental",
	"artifact", "worktree", "goals", "channels", "modelPricing", "omni",
	"advanced", "skills", "modelProviders", "providerProtocol",
	"proxy", "plansDirectory", "policy", "serve",
	"fastModel", "advisorModel", "visionModel", "compactionModel", "imageModel",
	"voiceModel", "modelFallbacks", "visionBridgeTimeoutMs",
	"security.auth", "security.folderTrust", "security.allowedInsecureVoiceBaseUrls",
	// context: what the CLI's file discovery, imports and compaction use.
	"context.fileFiltering", "context.includeDirectories", "context.loadFromIncludeDirectories",
	"context.importFormat", "context.autoCompactThreshold", "context.clearContextOnIdle",
	// tools: the CLI's own tool behaviour.
	"tools.autoAccept", "tools.visible", "tools.eager", "tools.executionSandbox",
	"tools.codeModeOnly", "tools.shell", "tools.truncateToolOutputThreshold",
	"tools.truncateToolOutputLines", "tools.toolOutputBatchBudget",
	"tools.discoveryCommand", "tools.callCommand", "tools.useRipgrep",
	"tools.useBuiltinRipgrep", "tools.toolSearch", "tools.listDirectory",
	"tools.todoWrite", "tools.webSearch", "tools.workflowsEnabled",
	"tools.workflowSizeGuideline", "tools.workflowNameOnly",
	// permissions: auto mode's classifier, which acpguard does not have.
	"permissions.autoMode",
	// model: what the CLI's own model client and loop use.
	"model.baseUrl", "model.reasoningEffort", "model.maxWallTimeSeconds",
	"model.maxToolCalls", "model.maxToolCallsPerTurn", "model.maxSubagentDepth",
	"model.sessionTokenLimit", "model.goalTokenBudget", "model.goalMaxTurns",
	"model.goalMaxActiveMinutes", "model.goalCheckpointTimeoutSeconds",
	"model.chatCompression", "model.skipNextSpeakerCheck", "model.skipLoopDetection",
	"model.skipWorkflowUsageWarning", "model.skipStartupContext",
	"model.enableOpenAILogging", "model.openAILoggingDir",
	"model.openAILogRetentionDays", "model.generationConfig",
	// mcp and one server: remote transports' and the CLI's own keys.
	"mcp.serverCommand", "mcp.toolIdleTimeoutMs",
	"mcpServers.*.description", "mcpServers.*.targetAudience",
	// Refused by validate with a reason (mcpRefusedKeys).
	"mcpServers.*.oauth", "mcpServers.*.authProviderType", "mcpServers.*.tcp",
	"mcpServers.*.targetServiceAccount", "mcpServers.*.alwaysLoadTools",
	"mcpServers.*.versionNegotiation",
	// one hook: the keys of prompt hooks (refused by type) and the CLI's
	// own scheduling.
	"hooks.*[].sequential",
	"hooks.*[].hooks[].prompt", "hooks.*[].hooks[].model",
	"hooks.*[].hooks[].async", "hooks.*[].hooks[].once", "hooks.*[].hooks[].shell",
	"hooks.*[].hooks[].description", "hooks.*[].hooks[].statusMessage",
}

// qwenIgnored indexes qwenIgnoredKeys: the set, and each parent's names
// (for "did you mean").
// A "hooks.*" key stands for each event's.
var qwenIgnored, qwenIgnoredChildren = func() (map[string]bool, map[string][]string) {
	set, children := map[string]bool{}, map[string][]string{}
	var keys []string
	for _, k := range qwenIgnoredKeys {
		rest, ok := strings.CutPrefix(k, "hooks.*")
		if !ok {
			keys = append(keys, k)
			continue
		}
		for _, f := range jsonFields(reflect.TypeFor[hooksSettings]()) {
			keys = append(keys, "hooks."+f.name+rest)
		}
	}
	for _, k := range keys {
		set[k] = true
		parent, name := "", k
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			parent, name = k[:i], k[i+1:]
		}
		children[parent] = append(children[parent], name)
	}
	return set, children
}()

// settingsError is every problem of one settings file, in file order, one
// per line; File is set by loadSettings.
type settingsError struct {
	File     string
	Problems []string
}

func (e *settingsError) Error() string {
	if e.File == "" {
		return strings.Join(e.Problems, "\n")
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = fmt.Sprintf("settings %q: %s", e.File, p)
	}
	return strings.Join(lines, "\n")
}

// checkSettingsKeys walks data (blanked JSONC) against the settings types
// and Qwen Code's ignored keys. It returns the ignored keys the file sets,
// in file order, and every problem found: an unknown key (with the closest
// known name), a value of the wrong type, a duplicate key, an overlong
// string. A syntax error ends the walk.
func checkSettingsKeys(data []byte) (ignored []string, problems []string) {
	w := &settingsWalker{walk: wireWalk{data: data, check: walkSyntax}}
	if err := w.value(reflect.TypeFor[settings](), "", ""); err != nil {
		return w.ignored, append(w.problems, err.Error())
	}
	if w.walk.space(); w.walk.i != len(data) {
		w.problems = append(w.problems, "more than one JSON value")
	}
	return w.ignored, w.problems
}

// settingsWalker follows a settings file along the settings types, on the
// one JSON walk (jsonstrict.go), which checks the syntax as it goes. Its
// methods' error is a syntax error, which ends the walk; every other
// problem is collected and the walk goes on.
type settingsWalker struct {
	walk     wireWalk
	ignored  []string
	problems []string
}

func (w *settingsWalker) problem(err error) { w.problems = append(w.problems, err.Error()) }

// value walks one value of type t at path at; spath is the same path in
// the key tree's spelling (map names as "*", indexes as "[]").
func (w *settingsWalker) value(t reflect.Type, at, spath string) error {
	if w.walk.space(); w.walk.i >= len(w.walk.data) {
		return w.syntax(errStrictEnd)
	}
	got := jsonKind(w.walk.data[w.walk.i])
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(want string) error {
		w.problem(shapeTypeError(at, want, got))
		return w.skip()
	}
	if c, ok := reflect.Zero(t).Interface().(kindChooser); ok {
		alt, want := c.walkAs(got)
		if alt == nil {
			return wrong(want)
		}
		t = alt
	}
	if c, ok := reflect.Zero(t).Interface().(tokenChecker); ok {
		tok, err := w.token()
		if err != nil {
			return err
		}
		if err := c.checkToken(at, tok); err != nil {
			w.problem(err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if got != "object" {
			return wrong("an object")
		}
		fields := map[string]reflect.Type{}
		var names []string
		for _, f := range jsonFields(t) {
			fields[f.name] = f.typ
			names = append(names, f.name)
		}
		return w.object(at, func(key, p string) error {
			sp := joinKey(spath, key)
			if ft, ok := fields[key]; ok {
				return w.value(ft, p, sp)
			}
			if qwenIgnored[sp] {
				w.ignored = append(w.ignored, p)
				return w.skip()
			}
			msg := fmt.Sprintf("key %q: unknown key", p)
			if near := closestKey(key, append(names, qwenIgnoredChildren[spath]...)); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", joinKey(at, near))
			}
			w.problems = append(w.problems, msg)
			return w.skip()
		})
	case reflect.Map:
		if got != "object" {
			return wrong("an object")
		}
		return w.object(at, func(_, p string) error { return w.value(t.Elem(), p, spath+".*") })
	case reflect.Slice:
		if got != "array" {
			return wrong("an array")
		}
		w.walk.i++ // '['
		for i := 0; ; i++ {
			more, err := w.walk.nextElement(i)
			if err != nil || !more {
				return w.syntax(err)
			}
			if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", at, i), spath+"[]"); err != nil {
				return err
			}
		}
	case reflect.String:
		if got != "string" {
			return wrong("a string")
		}
		tok, err := w.token()
		if err != nil {
			return err
		}
		if err := checkStringLen(at, tok.(string), maxSettingsStringBytes); err != nil {
			w.problem(err)
		}
	case reflect.Bool:
		if got != "boolean" {
			return wrong("a boolean")
		}
		return w.skip()
	case reflect.Int:
		if got != "number" {
			return wrong("an integer")
		}
		raw, err := w.raw()
		if err != nil {
			return err
		}
		if _, err := strconv.ParseInt(string(raw), 10, 32); err != nil {
			w.problem(fmt.Errorf("key %q: want an integer, got %s", at, raw))
		}
	default:
		w.problem(fmt.Errorf("key %q: unsupported type %s", at, t))
		return w.skip()
	}
	return nil
}

// object walks the members of the object at the walk's position, refusing
// a key given twice.
func (w *settingsWalker) object(at string, member func(key, p string) error) error {
	w.walk.i++ // '{'
	seen := map[string]bool{}
	for n := 0; ; n++ {
		name, more, err := w.walk.nextMember(n, true)
		if err != nil || !more {
			return w.syntax(err)
		}
		key := string(name)
		p := joinKey(at, key)
		if seen[key] {
			w.problem(fmt.Errorf("duplicate key %q", p))
			if err := w.skip(); err != nil {
				return err
			}
			continue
		}
		seen[key] = true
		if err := member(key, p); err != nil {
			return err
		}
	}
}

// raw moves past one whole value, checking its syntax, and returns it as
// written.
func (w *settingsWalker) raw() ([]byte, error) {
	start := w.walk.i
	if err := w.walk.checked(0); err != nil {
		return nil, w.syntax(err)
	}
	return w.walk.data[start:w.walk.i], nil
}

// skip moves past one whole value.
func (w *settingsWalker) skip() error {
	_, err := w.raw()
	return err
}

// token moves past one whole value and returns it as a json.Decoder with
// UseNumber reads its first token: a scalar decoded, a number as written,
// an object or an array as its opening delimiter.
func (w *settingsWalker) token() (json.Token, error) {
	raw, err := w.raw()
	if err != nil {
		return nil, err
	}
	switch raw[0] {
	case '{', '[':
		return json.Delim(raw[0]), nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, w.syntax(err)
		}
		return s, nil
	case 't', 'f':
		return raw[0] == 't', nil
	case 'n':
		return nil, nil
	}
	return json.Number(raw), nil
}

// syntax is the error of a syntax error err found at the walk's position,
// nil when err is.
func (w *settingsWalker) syntax(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("invalid JSON at byte %d: %w", w.walk.i, err)
}

// tokenChecker is a type of one JSON scalar that may take more than one JSON
// type (tools.sandbox: a boolean or a string), checked by the type itself.
type tokenChecker interface {
	checkToken(at string, tok json.Token) error
}

// kindChooser is a type that takes more than one JSON shape, not all of
// them scalars (context.fileName: a string or an array of strings): it
// names the type a value of JSON type got is walked as, or nil and what it
// wants.
type kindChooser interface {
	walkAs(got string) (reflect.Type, string)
}

// jsonTokenKind names the JSON type of tok, a json.Decoder token.
func jsonTokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return jsonKind(byte(v))
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// jsonKind names the JSON type of the value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// checkStringLen refuses a string value longer than max bytes.
func checkStringLen(at, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("key %q: string longer than %d bytes", at, max)
	}
	return nil
}

func joinKey(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// closestKey is the candidate nearest to key: equal but for case, or
// within two edits; "" if none is.
func closestKey(key string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if strings.EqualFold(c, key) {
			return c
		}
		// Lengths further apart than two cannot be within two edits: a
		// long key costs nothing.
		if n := len(key) - len(c); n > 2 || n < -2 {
			continue
		}
		if d := editDistance(key, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
