// tools.go owns the tool registry: names, specs, argument schemas and
// normalization against the session cwd. Executors are reachable only
// through the spec table; runTool in guard.go is their one caller.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
)

// Canonical tool and argument names, as Qwen Code spells them.
const (
	toolReadFile      = "read_file"
	toolWriteFile     = "write_file"
	toolEdit          = "edit"
	toolListDirectory = "list_directory"
	toolGlob          = "glob"
	toolGrepSearch    = "grep_search"
	toolShell         = "run_shell_command"
)

// ACP tool kinds.
const (
	kindRead    = "read"
	kindEdit    = "edit"
	kindSearch  = "search"
	kindExecute = "execute"
	kindOther   = "other"
)

// canonicalToolName maps Qwen Code's aliases of edit and grep_search to
// them, before anything else sees the name.
func canonicalToolName(name string) string {
	switch name {
	case "replace":
		return toolEdit
	case "search_file_content":
		return toolGrepSearch
	}
	return name
}

// nestedAgentRefusal is the text Qwen Code shows for the names managed mode
// refuses, with no provider request (DESIGN.md §1); kept word for word
// (DESIGN.md §11).
const nestedAgentRefusal = "Managed external tool guard v1 does not support nested or delegated agent execution."

func isNestedAgentTool(name string) bool {
	switch name {
	case "agent", "workflow", "create_sub_session", "send_message":
		return true
	}
	return false
}

// Limits of what a tool reads and returns (DESIGN.md §6).
const (
	maxToolOutput    = 1 << 20  // bytes of text one call returns
	maxReadFileBytes = 10 << 20 // bytes read_file and edit load
	readDefaultLines = 2000     // lines read_file returns without a limit, as Qwen Code
	binarySniffBytes = 8000     // a NUL byte in this prefix marks a binary file
	maxGlobResults   = 1000     // paths glob returns
	grepDefaultLimit = 100      // matches grep_search returns without a limit
	grepMaxLimit     = 1000     // the largest limit grep_search accepts
	maxGrepLineRunes = 500      // characters of one matching line shown
)

// argType is the JSON type of one argument.
type argType int

const (
	argString argType = iota
	argInteger
	argBoolean
)

func (t argType) String() string {
	return [...]string{"string", "integer", "boolean"}[t]
}

// toolParam declares one argument.
type toolParam struct {
	Name        string
	Type        argType
	Required    bool
	Description string
}

// toolSpec is one tool: what the model is told, how arguments are checked
// and normalized, and the executor that only runTool calls.
type toolSpec struct {
	Name        string
	Kind        string
	Description string
	ReadOnly    bool
	Params      []toolParam // checked before normalize; nil: normalize checks everything
	// Schema, when set, is the argument schema as a server gave it (MCP);
	// otherwise the schema is built from Params.
	Schema json.RawMessage
	// Trusted skips the default permission prompt (an MCP server's trust):
	// deny and ask rules and the guard still apply.
	Trusted bool
	// title is a short human label for the client, over normalized arguments.
	title func(args map[string]any) string
	// normalize returns the final arguments from type-checked ones; an error
	// is reported as invalid_tool_params.
	normalize func(env *toolEnv, args map[string]any) (map[string]any, error)
	exec      func(ctx context.Context, env *toolEnv, args map[string]any) toolResult
}

// builtinToolNames lists the built-ins in the order the model sees them.
func builtinToolNames() []string {
	return []string{toolReadFile, toolWriteFile, toolEdit, toolListDirectory, toolGlob, toolGrepSearch, toolShell}
}

// readOnlyToolNames lists the built-ins whose spec is ReadOnly.
func readOnlyToolNames() []string {
	var out []string
	for _, n := range builtinToolNames() {
		if spec, _ := builtinTool(n); spec.ReadOnly {
			out = append(out, n)
		}
	}
	return out
}

// builtinTool is the table of built-in tools. It builds the spec on each
// call so that no caller can change what another sees, but its parameters
// schema, which the model request carries for every tool on every call,
// only once per tool (builtinSchemas): nothing writes a schema.
func builtinTool(name string) (toolSpec, bool) {
	s, ok := newBuiltinTool(name)
	if ok {
		if v, made := builtinSchemas.Load(name); made {
			s.Schema = v.(json.RawMessage)
		} else {
			s.Schema = s.parametersSchema()
			builtinSchemas.Store(name, s.Schema)
		}
	}
	return s, ok
}

// builtinSchemas holds each built-in tool's parameters schema, by name.
var builtinSchemas sync.Map

// newBuiltinTool builds the spec of the built-in tool name.
func newBuiltinTool(name string) (toolSpec, bool) {
	switch name {
	case toolReadFile:
		return toolSpec{
			Name: toolReadFile, Kind: kindRead, ReadOnly: true,
			Description: "Reads a text file inside the workspace. offset is the 0-based first line, limit the number of lines.",
			Params: []toolParam{
				{"file_path", argString, true, "Path of the file to read."},
				{"offset", argInteger, false, "0-based line number to start from."},
				{"limit", argInteger, false, "Number of lines to read."},
			},
			title:     func(a map[string]any) string { return "Read " + argStr(a, "file_path") },
			normalize: normalizeReadFile,
			exec:      execReadFile,
		}, true
	case toolWriteFile:
		return toolSpec{
			Name: toolWriteFile, Kind: kindEdit,
			Description: "Writes content to a file inside the workspace, creating it and its directories if needed.",
			Params: []toolParam{
				{"file_path", argString, true, "Path of the file to write."},
				{"content", argString, true, "The complete new content."},
			},
			title:     func(a map[string]any) string { return "Write " + argStr(a, "file_path") },
			normalize: normalizeWriteFile,
			exec:      execWriteFile,
		}, true
	case toolEdit:
		return toolSpec{
			Name: toolEdit, Kind: kindEdit,
			Description: "Replaces old_string with new_string in a file. old_string must occur exactly once unless replace_all is true; an empty old_string creates a missing file.",
			Params: []toolParam{
				{"file_path", argString, true, "Path of the file to edit."},
				{"old_string", argString, true, "Exact text to replace."},
				{"new_string", argString, true, "Replacement text."},
				{"replace_all", argBoolean, false, "Replace every occurrence."},
			},
			title:     func(a map[string]any) string { return "Edit " + argStr(a, "file_path") },
			normalize: normalizeEdit,
			exec:      execEdit,
		}, true
	case toolListDirectory:
		return toolSpec{
			Name: toolListDirectory, Kind: kindSearch, ReadOnly: true,
			Description: "Lists the entries of a directory inside the workspace.",
			Params: []toolParam{
				{"path", argString, true, "Directory to list."},
			},
			title:     func(a map[string]any) string { return "List " + argStr(a, "path") },
			normalize: normalizeListDirectory,
			exec:      execListDirectory,
		}, true
	case toolGlob:
		return toolSpec{
			Name: toolGlob, Kind: kindSearch, ReadOnly: true,
			Description: "Finds files whose path relative to path (default: the workspace) matches a glob pattern; ** matches any number of directories, {a,b} alternatives.",
			Params: []toolParam{
				{"pattern", argString, true, "Glob pattern, e.g. **/*.go."},
				{"path", argString, false, "Directory to search in."},
			},
			title:     func(a map[string]any) string { return "Glob " + argStr(a, "pattern") },
			normalize: normalizeGlob,
			exec:      execGlob,
		}, true
	case toolGrepSearch:
		return toolSpec{
			Name: toolGrepSearch, Kind: kindSearch, ReadOnly: true,
			Description: "Searches text files under path (default: the workspace) for a Go regular expression; glob filters file names.",
			Params: []toolParam{
				{"pattern", argString, true, "Regular expression (Go syntax)."},
				{"path", argString, false, "Directory to search in."},
				{"glob", argString, false, "Only files matching this glob, e.g. *.{ts,tsx}."},
				{"limit", argInteger, false, "Maximum number of matching lines."},
			},
			title:     func(a map[string]any) string { return "Grep " + strconv.Quote(argStr(a, "pattern")) },
			normalize: normalizeGrep,
			exec:      execGrep,
		}, true
	case toolShell:
		return toolSpec{
			Name: toolShell, Kind: kindExecute,
			Description: "Runs a command with bash -c in the workspace (or directory). is_background starts it and returns its PID at once; timeout is in milliseconds.",
			Params: []toolParam{
				{"command", argString, true, "The bash command."},
				{"is_background", argBoolean, false, "Start in the background and return its PID."},
				{"timeout", argInteger, false, "Timeout in milliseconds (default 120000, max 600000)."},
				{"description", argString, false, "What the command does, for the user."},
				{"directory", argString, false, "Working directory inside the workspace."},
			},
			title:     func(a map[string]any) string { return argStr(a, "command") },
			normalize: normalizeShell,
			exec:      execShell,
		}, true
	}
	return toolSpec{}, false
}

// lookupTool finds a canonical name among the built-ins, then among the
// session's extra tools.
func lookupTool(env *toolEnv, name string) (toolSpec, bool) {
	if spec, ok := builtinTool(name); ok {
		return spec, true
	}
	// An incomplete extra spec is not a tool: it could not be run safely.
	if spec, ok := env.Extra[name]; ok && spec != nil && spec.title != nil && spec.normalize != nil && spec.exec != nil {
		return *spec, true
	}
	return toolSpec{}, false
}

// offeredTools is what the model is told it may call in env: the built-ins,
// then the session's extra tools by name.
func offeredTools(env *toolEnv) []*toolSpec {
	var out []*toolSpec
	for _, name := range builtinToolNames() {
		if spec, ok := builtinTool(name); ok {
			out = append(out, &spec)
		}
	}
	names := make([]string, 0, len(env.Extra))
	for name := range env.Extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if spec, ok := lookupTool(env, name); ok && spec.Name == name {
			out = append(out, &spec)
		}
	}
	return out
}

// parametersSchema is the JSON Schema of the arguments, for model APIs.
func (s *toolSpec) parametersSchema() json.RawMessage {
	if s.Schema != nil {
		return s.Schema
	}
	props := map[string]any{}
	required := []string{}
	for _, p := range s.Params {
		props[p.Name] = map[string]any{"type": p.Type.String(), "description": p.Description}
		if p.Required {
			required = append(required, p.Name)
		}
	}
	b, err := json.Marshal(map[string]any{
		"type": "object", "properties": props, "required": required, "additionalProperties": false,
	})
	if err != nil {
		panic(err) // only maps of strings: cannot fail
	}
	return b
}

// decodeArgs decodes a call's arguments: one JSON object, numbers kept exact.
// Empty arguments are the empty object.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	args, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("decode arguments: %w", err)
	}
	return args, nil
}

// checkParams enforces the declared arguments: no unknown names, every
// required one present, every value of its JSON type. Integers become int64.
func checkParams(params []toolParam, args map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(args))
	for name := range args {
		if !hasParam(params, name) {
			return nil, fmt.Errorf("unknown argument %q", name)
		}
	}
	for _, p := range params {
		v, ok := args[p.Name]
		if !ok {
			if p.Required {
				return nil, fmt.Errorf("missing required argument %q", p.Name)
			}
			continue
		}
		switch p.Type {
		case argString:
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("argument %q must be a string, got %s", p.Name, jsonTypeName(v))
			}
			out[p.Name] = s
		case argBoolean:
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("argument %q must be a boolean, got %s", p.Name, jsonTypeName(v))
			}
			out[p.Name] = b
		case argInteger:
			n, ok := v.(json.Number)
			if !ok {
				return nil, fmt.Errorf("argument %q must be an integer, got %s", p.Name, jsonTypeName(v))
			}
			i, err := strconv.ParseInt(n.String(), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("argument %q must be an integer, got %s", p.Name, n)
			}
			out[p.Name] = i
		}
	}
	return out, nil
}

func hasParam(params []toolParam, name string) bool {
	for _, p := range params {
		if p.Name == name {
			return true
		}
	}
	return false
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func argStr(args map[string]any, name string) string {
	s, _ := args[name].(string)
	return s
}

func failed(errType, format string, a ...any) toolResult {
	return toolResult{Status: statusFailed, ErrorType: errType, Output: fmt.Sprintf(format, a...)}
}

func completed(output string, raw any) toolResult {
	return toolResult{Status: statusCompleted, Output: output, RawOutput: raw}
}
