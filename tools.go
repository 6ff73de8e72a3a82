// tools.go owns the built-in tools: their argument schemas, normalization
// against the session cwd, and their executors. Executors are reachable only
// through the spec table below; runTool in guard.go is their one caller.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Canonical tool names and argument names, as Qwen Code spells them:
// "read_file {file_path, offset?, limit?}; write_file {file_path, content};
// edit {file_path, old_string, new_string, replace_all?}; list_directory
// {path}; glob {pattern, path?}; grep_search {pattern, path?, glob?, limit?};
// run_shell_command {command, is_background?, timeout?, description?, directory?}."
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

// "Aliases replace -> edit and search_file_content -> grep_search are
// canonicalized before anything else sees the name."
func canonicalToolName(name string) string {
	switch name {
	case "replace":
		return toolEdit
	case "search_file_content":
		return toolGrepSearch
	}
	return name
}

// nestedAgentRefusal is the text for the names managed mode refuses: "In
// managed (required) mode the names agent, workflow, create_sub_session,
// send_message are rejected with the text `Managed external tool guard v1
// does not support nested or delegated agent execution.` and no provider request."
const nestedAgentRefusal = "Managed external tool guard v1 does not support nested or delegated agent execution."

func isNestedAgentTool(name string) bool {
	switch name {
	case "agent", "workflow", "create_sub_session", "send_message":
		return true
	}
	return false
}

// Limits of what a tool reads and returns: "bounded captured output".
const (
	maxToolOutput     = 1 << 20  // bytes of text one call returns
	maxReadFileBytes  = 10 << 20 // bytes read_file and edit load
	readDefaultLines  = 2000     // lines read_file returns without a limit, as Qwen Code
	binarySniffBytes  = 8000     // a NUL byte in this prefix marks a binary file
	maxGlobResults    = 1000     // paths glob returns
	grepDefaultLimit  = 100      // matches grep_search returns without a limit
	grepMaxLimit      = 1000     // the largest limit grep_search accepts
	maxGrepLineRunes  = 500      // characters of one matching line shown
	maxPatternBytes   = 4096     // a glob or regexp pattern
	maxBraceExpansion = 64       // alternatives one {a,b} glob pattern expands to
)

// "a timeout (default 120 s, max 600 s)", given in milliseconds.
const (
	shellDefaultTimeoutMS = 120000
	shellMaxTimeoutMS     = 600000
)

// shellDrainGrace bounds how long output is still read after a shell's
// process group was killed: a descendant that left the group may hold the pipe.
const shellDrainGrace = 2 * time.Second

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

// builtinTool is the table of built-in tools. It builds the spec on each
// call so that no caller can change what another sees.
func builtinTool(name string) (toolSpec, bool) {
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
			normalize: normalizePathArgs("file_path"),
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
			normalize: normalizePathArgs("path"),
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
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("decode arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode arguments: trailing data after JSON object")
	}
	if args == nil {
		return nil, errors.New("decode arguments: arguments must be a JSON object, got null")
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

func argInt(args map[string]any, name string, def int64) int64 {
	if i, ok := args[name].(int64); ok {
		return i
	}
	return def
}

func argBool(args map[string]any, name string) bool {
	b, _ := args[name].(bool)
	return b
}

// resolveWorkspacePath makes p absolute against cwd, cleans it, and rejects
// it when it leaves cwd: "a path that leaves the session cwd (also through a
// symlink) is an error before any permission or guard step." The deepest
// existing ancestor is resolved through symlinks and compared with the
// resolved cwd; that resolved path is what the guard sees and the tool uses.
func resolveWorkspacePath(cwd, p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("session cwd %q is not absolute", cwd)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, abs)
	}
	abs = filepath.Clean(abs)
	realCwd, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", fmt.Errorf("resolve session cwd %q: %w", cwd, err)
	}
	real, err := resolveExisting(abs)
	if err != nil {
		return "", err
	}
	if !withinDir(realCwd, real) {
		return "", fmt.Errorf("path %q is outside the workspace %q", p, cwd)
	}
	// The resolved path, not the spelling: the provider decides over the
	// file that will be opened, so a symlink inside the workspace
	// (docs -> secrets) cannot dodge a rule written for secrets/.
	return real, nil
}

// resolveExisting resolves the deepest existing ancestor of abs through
// symlinks and appends the components that do not exist yet. An existing
// entry that cannot be resolved (a dangling or looping symlink) is an error:
// writing through it could land anywhere.
func resolveExisting(abs string) (string, error) {
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(dir); err == nil {
			real, err := filepath.EvalSymlinks(dir)
			if err != nil {
				return "", fmt.Errorf("resolve path %q: %w", abs, err)
			}
			return filepath.Join(real, rest), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("resolve path %q: %w", abs, err)
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("resolve path %q: no existing ancestor", abs)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

func withinDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// normalizePathArgs returns a normalizer that resolves the named path
// arguments, when present, against the session cwd.
func normalizePathArgs(names ...string) func(env *toolEnv, args map[string]any) (map[string]any, error) {
	return func(env *toolEnv, args map[string]any) (map[string]any, error) {
		for _, name := range names {
			p, ok := args[name].(string)
			if !ok {
				continue
			}
			abs, err := resolveWorkspacePath(env.Cwd, p)
			if err != nil {
				return nil, fmt.Errorf("invalid argument %q: %w", name, err)
			}
			args[name] = abs
		}
		return args, nil
	}
}

// setDefault fills in an optional argument the model left out with the
// value its executor uses, so that the permission rules, the hooks and the
// guard all decide over the call that will run: a search without a path
// searches the session cwd, and a deny rule on that folder must see it.
// The README's table of built-in tools lists every default filled in.
func setDefault(args map[string]any, name string, v any) {
	if _, ok := args[name]; !ok {
		args[name] = v
	}
}

func normalizeReadFile(env *toolEnv, args map[string]any) (map[string]any, error) {
	if n, ok := args["offset"].(int64); ok && n < 0 {
		return nil, fmt.Errorf("invalid argument \"offset\": %d is negative", n)
	}
	if n, ok := args["limit"].(int64); ok && n < 1 {
		return nil, fmt.Errorf("invalid argument \"limit\": %d is not positive", n)
	}
	setDefault(args, "offset", int64(0))
	setDefault(args, "limit", int64(readDefaultLines))
	return normalizePathArgs("file_path")(env, args)
}

func normalizeEdit(env *toolEnv, args map[string]any) (map[string]any, error) {
	setDefault(args, "replace_all", false)
	return normalizePathArgs("file_path")(env, args)
}

func normalizeGlob(env *toolEnv, args map[string]any) (map[string]any, error) {
	if _, err := compileGlob(argStr(args, "pattern")); err != nil {
		return nil, fmt.Errorf("invalid argument \"pattern\": %w", err)
	}
	setDefault(args, "path", env.Cwd) // resolved below, as a given path is
	return normalizePathArgs("path")(env, args)
}

func normalizeGrep(env *toolEnv, args map[string]any) (map[string]any, error) {
	pat := argStr(args, "pattern")
	if len(pat) > maxPatternBytes {
		return nil, fmt.Errorf("invalid argument \"pattern\": longer than %d bytes", maxPatternBytes)
	}
	if _, err := regexp.Compile(pat); err != nil {
		return nil, fmt.Errorf("invalid argument \"pattern\": %w", err)
	}
	if g, ok := args["glob"].(string); ok {
		if _, err := compileGlob(g); err != nil {
			return nil, fmt.Errorf("invalid argument \"glob\": %w", err)
		}
	}
	if n, ok := args["limit"].(int64); ok && (n < 1 || n > grepMaxLimit) {
		return nil, fmt.Errorf("invalid argument \"limit\": %d is not between 1 and %d", n, grepMaxLimit)
	}
	setDefault(args, "path", env.Cwd)
	setDefault(args, "limit", int64(grepDefaultLimit))
	return normalizePathArgs("path")(env, args)
}

func normalizeShell(env *toolEnv, args map[string]any) (map[string]any, error) {
	if strings.TrimSpace(argStr(args, "command")) == "" {
		return nil, errors.New("invalid argument \"command\": command is empty")
	}
	if n, ok := args["timeout"].(int64); ok && (n < 1 || n > shellMaxTimeoutMS) {
		return nil, fmt.Errorf("invalid argument \"timeout\": %d ms is not between 1 and %d", n, shellMaxTimeoutMS)
	}
	setDefault(args, "is_background", false)
	if !argBool(args, "is_background") {
		// A background command has no timeout: none is filled in for it.
		setDefault(args, "timeout", int64(shellDefaultTimeoutMS))
	}
	setDefault(args, "directory", env.Cwd)
	return normalizePathArgs("directory")(env, args)
}

func failed(errType, format string, a ...any) toolResult {
	return toolResult{Status: statusFailed, ErrorType: errType, Output: fmt.Sprintf(format, a...)}
}

func completed(output string, raw any) toolResult {
	return toolResult{Status: statusCompleted, Output: output, RawOutput: raw}
}

// workspaceRoot opens the session cwd as an os.Root and gives p, a path
// resolveWorkspacePath returned ("" for the cwd itself), relative to it.
// Executors open files only through the root: a directory that a running
// process swapped for a symlink after the guard decided cannot lead outside
// the workspace. The caller closes the root.
func workspaceRoot(env *toolEnv, p string) (*os.Root, string, error) {
	realCwd, err := filepath.EvalSymlinks(env.Cwd)
	if err != nil {
		return nil, "", fmt.Errorf("resolve session cwd %q: %w", env.Cwd, err)
	}
	rel := "."
	if p != "" {
		if rel, err = filepath.Rel(realCwd, p); err != nil || !withinDir(realCwd, p) {
			return nil, "", fmt.Errorf("path %q is outside the workspace %q", p, env.Cwd)
		}
	}
	root, err := os.OpenRoot(realCwd)
	if err != nil {
		return nil, "", fmt.Errorf("open the workspace: %w", err)
	}
	return root, rel, nil
}

// readTextFile loads the file rel of root, shown as p, of at most
// maxReadFileBytes that is not binary.
func readTextFile(root *os.Root, rel, p string) ([]byte, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%q is a directory", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReadFileBytes {
		return nil, fmt.Errorf("file %q is larger than %d bytes", p, maxReadFileBytes)
	}
	if isBinary(data) {
		return nil, fmt.Errorf("file %q is binary", p)
	}
	return data, nil
}

func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0
}

func execReadFile(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p := argStr(args, "file_path")
	root, rel, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "read file: %v", err)
	}
	defer root.Close()
	data, err := readTextFile(root, rel, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "read file: %v", err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	offset := argInt(args, "offset", 0)
	limit := argInt(args, "limit", readDefaultLines)
	if offset > int64(len(lines)) {
		return failed(errTypeExecutionFailed, "read file: offset %d is past the end of %q (%d lines)", offset, p, len(lines))
	}
	// offset <= len(lines) here, so this cannot overflow as offset+limit can.
	end := offset + min(limit, int64(len(lines))-offset)
	var out limitedBuffer
	out.max = maxToolOutput
	for _, l := range lines[offset:end] {
		out.WriteString(l)
	}
	text := out.String()
	if end < int64(len(lines)) {
		text += fmt.Sprintf("\n[showing lines %d-%d of %d; use offset and limit for more]", offset+1, end, len(lines))
	}
	return completed(text, map[string]any{"path": p, "lines": len(lines)})
}

func execWriteFile(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p, content := argStr(args, "file_path"), argStr(args, "content")
	root, rel, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "write file: %v", err)
	}
	defer root.Close()
	if err := writeFile(root, rel, p, content); err != nil {
		return failed(errTypeExecutionFailed, "write file: %v", err)
	}
	return completed(fmt.Sprintf("Wrote %d bytes to %s", len(content), p), map[string]any{"path": p, "bytes": len(content)})
}

// writeFile writes content to the file rel of root, shown as p, creating
// the parent directories; an existing file keeps its mode.
func writeFile(root *os.Root, rel, p, content string) error {
	if fi, err := root.Stat(rel); err == nil && fi.IsDir() {
		return fmt.Errorf("%q is a directory", p)
	}
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return err
	}
	return root.WriteFile(rel, []byte(content), 0o644)
}

func execEdit(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p := argStr(args, "file_path")
	oldS, newS := argStr(args, "old_string"), argStr(args, "new_string")
	root, rel, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "edit: %v", err)
	}
	defer root.Close()
	data, err := readTextFile(root, rel, p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && oldS == "":
		if err := writeFile(root, rel, p, newS); err != nil {
			return failed(errTypeExecutionFailed, "edit: %v", err)
		}
		return completed("Created "+p, map[string]any{"path": p, "created": true})
	case err != nil:
		return failed(errTypeExecutionFailed, "edit: %v", err)
	case oldS == "":
		return failed(errTypeExecutionFailed, "edit: file %q already exists; an empty old_string only creates a new file", p)
	case oldS == newS:
		return failed(errTypeExecutionFailed, "edit: old_string and new_string are identical; nothing to change in %q", p)
	}
	text := string(data)
	n := strings.Count(text, oldS)
	switch {
	case n == 0:
		return failed(errTypeExecutionFailed, "edit: old_string not found in %q", p)
	case n > 1 && !argBool(args, "replace_all"):
		return failed(errTypeExecutionFailed, "edit: old_string occurs %d times in %q; it must occur exactly once unless replace_all is true", n, p)
	}
	if err := writeFile(root, rel, p, strings.ReplaceAll(text, oldS, newS)); err != nil {
		return failed(errTypeExecutionFailed, "edit: %v", err)
	}
	return completed(fmt.Sprintf("Replaced %d occurrence(s) in %s", n, p), map[string]any{"path": p, "replacements": n})
}

func execListDirectory(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	p := argStr(args, "path")
	root, rel, err := workspaceRoot(env, p)
	if err != nil {
		return failed(errTypeExecutionFailed, "list directory: %v", err)
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), filepath.ToSlash(rel))
	if err != nil {
		return failed(errTypeExecutionFailed, "list directory: %v", err)
	}
	// Directories first, each group by name, as Qwen Code lists them.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].IsDir() && !entries[j].IsDir() })
	var out limitedBuffer
	out.max = maxToolOutput
	fmt.Fprintf(&out, "Directory listing for %s:\n", p)
	for _, e := range entries {
		if e.IsDir() {
			fmt.Fprintf(&out, "[DIR] %s\n", e.Name())
		} else {
			fmt.Fprintf(&out, "%s\n", e.Name())
		}
	}
	return completed(out.String(), map[string]any{"path": p, "entries": len(entries)})
}

// globMatcher matches slash-separated paths relative to a search root.
type globMatcher struct {
	alternatives [][]string // brace-expanded patterns, split into segments
}

// compileGlob checks a glob pattern: relative, no "..", valid path.Match
// segments, "**" for any number of directories, {a,b} alternatives.
func compileGlob(pattern string) (*globMatcher, error) {
	if pattern == "" {
		return nil, errors.New("pattern is empty")
	}
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("pattern is longer than %d bytes", maxPatternBytes)
	}
	pats, err := expandBraces(pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	m := &globMatcher{}
	for _, p := range pats {
		if strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("pattern %q is absolute; give a pattern relative to path", pattern)
		}
		segs := strings.Split(p, "/")
		for _, s := range segs {
			if s == ".." {
				return nil, fmt.Errorf("pattern %q leaves the search directory", pattern)
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: %w", pattern, err)
			}
		}
		m.alternatives = append(m.alternatives, segs)
	}
	return m, nil
}

// expandBraces expands {a,b} alternatives, nested or not.
func expandBraces(p string) ([]string, error) {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		if strings.IndexByte(p, '}') >= 0 {
			return nil, errors.New("unbalanced '}'")
		}
		return []string{p}, nil
	}
	depth, start := 0, open+1
	var parts []string
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				parts = append(parts, p[start:i])
				var out []string
				for _, part := range parts {
					tails, err := expandBraces(part + p[i+1:])
					if err != nil {
						return nil, err
					}
					for _, t := range tails {
						out = append(out, p[:open]+t)
						if len(out) > maxBraceExpansion {
							return nil, fmt.Errorf("more than %d alternatives", maxBraceExpansion)
						}
					}
				}
				return out, nil
			}
		case ',':
			if depth == 1 {
				parts = append(parts, p[start:i])
				start = i + 1
			}
		}
	}
	return nil, errors.New("unbalanced '{'")
}

func (m *globMatcher) match(rel string) bool {
	name := strings.Split(rel, "/")
	for _, alt := range m.alternatives {
		if matchSegments(alt, name) {
			return true
		}
	}
	return false
}

// matchSegments matches pattern segments against name segments in
// O(len(pat)*len(name)) time, whatever the number of "**".
func matchSegments(pat, name []string) bool {
	cur := make([]bool, len(name)+1) // cur[j]: the segments so far match name[:j]
	cur[0] = true
	next := make([]bool, len(name)+1)
	for _, seg := range pat {
		clear(next)
		if seg == "**" {
			seen := false
			for j := range cur {
				seen = seen || cur[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(name); j++ {
				if cur[j-1] {
					next[j], _ = path.Match(seg, name[j-1])
				}
			}
		}
		cur, next = next, cur
	}
	return cur[len(name)]
}

// walkFiles calls fn for each regular file under the search root p (""
// for the session cwd) with the file's path as shown (under shown), its path
// relative to the search root with slashes, and the root its contents are
// read through; .git is skipped and symlinks are not followed. fn returns
// false to stop.
func walkFiles(ctx context.Context, env *toolEnv, p, shown string, fn func(abs, rel string, read func() ([]byte, error)) bool) error {
	root, start, err := workspaceRoot(env, p)
	if err != nil {
		return err
	}
	defer root.Close()
	start = filepath.ToSlash(start)
	return fs.WalkDir(root.FS(), start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == start {
				return err
			}
			return nil // an unreadable entry is skipped, not fatal
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" && name != start {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel := name
		switch {
		case name == start:
			rel = d.Name() // the search root is a file: match it by its name
		case start != ".":
			rel = strings.TrimPrefix(name, start+"/")
		}
		abs := shown
		if name != start {
			abs = filepath.Join(shown, filepath.FromSlash(rel))
		}
		read := func() ([]byte, error) { return readTextFile(root, filepath.FromSlash(name), abs) }
		if !fn(abs, rel, read) {
			return fs.SkipAll
		}
		return nil
	})
}

func searchRoot(env *toolEnv, args map[string]any) string {
	if p := argStr(args, "path"); p != "" {
		return p
	}
	return filepath.Clean(env.Cwd)
}

func execGlob(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	m, err := compileGlob(argStr(args, "pattern"))
	if err != nil {
		return failed(errTypeInvalidParams, "glob: %v", err)
	}
	root := searchRoot(env, args)
	var found []string
	truncated := false
	err = walkFiles(ctx, env, argStr(args, "path"), root, func(abs, rel string, _ func() ([]byte, error)) bool {
		if !m.match(rel) {
			return true
		}
		if len(found) == maxGlobResults {
			truncated = true
			return false
		}
		found = append(found, abs)
		return true
	})
	if err != nil {
		return failed(errTypeExecutionFailed, "glob: %v", err)
	}
	sort.Strings(found)
	var out limitedBuffer
	out.max = maxToolOutput
	if len(found) == 0 {
		fmt.Fprintf(&out, "No files found matching %q in %s", argStr(args, "pattern"), root)
	} else {
		fmt.Fprintf(&out, "Found %d file(s) matching %q in %s:\n%s", len(found), argStr(args, "pattern"), root, strings.Join(found, "\n"))
	}
	if truncated {
		fmt.Fprintf(&out, "\n[results limited to %d files]", maxGlobResults)
	}
	return completed(out.String(), map[string]any{"files": found, "truncated": truncated})
}

func execGrep(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	re, err := regexp.Compile(argStr(args, "pattern"))
	if err != nil {
		return failed(errTypeInvalidParams, "grep: %v", err)
	}
	var filter *globMatcher
	if g, ok := args["glob"].(string); ok {
		if filter, err = compileGlob(g); err != nil {
			return failed(errTypeInvalidParams, "grep: %v", err)
		}
	}
	limit := int(argInt(args, "limit", grepDefaultLimit))
	root := searchRoot(env, args)
	var out limitedBuffer
	out.max = maxToolOutput
	matches, truncated := 0, false
	err = walkFiles(ctx, env, argStr(args, "path"), root, func(abs, rel string, read func() ([]byte, error)) bool {
		if filter != nil {
			subject := rel
			if !strings.Contains(argStr(args, "glob"), "/") {
				subject = path.Base(rel) // a bare "*.go" filters by file name at any depth
			}
			if !filter.match(subject) {
				return true
			}
		}
		data, err := read()
		if err != nil {
			return true // binary, too large or unreadable: not searched
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if matches == limit {
				truncated = true
				return false
			}
			matches++
			if r := []rune(line); len(r) > maxGrepLineRunes {
				line = string(r[:maxGrepLineRunes]) + "..."
			}
			fmt.Fprintf(&out, "%s:%d:%s\n", abs, i+1, line)
		}
		return true
	})
	if err != nil {
		return failed(errTypeExecutionFailed, "grep: %v", err)
	}
	if matches == 0 {
		return completed(fmt.Sprintf("No matches for %q in %s", argStr(args, "pattern"), root), map[string]any{"matches": 0})
	}
	text := out.String()
	if truncated {
		text += fmt.Sprintf("[results limited to %d matches]", limit)
	}
	return completed(text, map[string]any{"matches": matches, "truncated": truncated})
}

// limitedBuffer keeps the first max bytes written and counts the rest, so
// a writer never blocks on or grows with a chatty producer.
type limitedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := min(len(p), b.max-b.buf.Len())
	b.buf.Write(p[:keep])
	b.dropped += int64(len(p) - keep)
	return len(p), nil
}

func (b *limitedBuffer) WriteString(s string) (int, error) {
	return b.Write([]byte(s))
}

// String returns what was kept and, when something was dropped, a note saying so.
func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return b.buf.String()
	}
	return fmt.Sprintf("%s\n[output truncated at %d bytes; %d bytes dropped]", b.buf.String(), b.max, b.dropped)
}

func shellDir(env *toolEnv, args map[string]any) string {
	if d := argStr(args, "directory"); d != "" {
		return d
	}
	return filepath.Clean(env.Cwd)
}

// shellCmd builds `bash -c command` in its own process group, with the
// scrubbed environment and empty stdin.
func shellCmd(env *toolEnv, args map[string]any) (*exec.Cmd, error) {
	if env.Env == nil {
		return nil, errors.New("no process environment configured")
	}
	cmd := exec.Command("bash", "-c", argStr(args, "command"))
	cmd.Env = env.Env.childEnv() // never nil: nil would inherit everything
	cmd.Dir = shellDir(env, args)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

func execShell(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	if argBool(args, "is_background") {
		return startBackground(env, args)
	}
	cmd, err := shellCmd(env, args)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	timeout := time.Duration(argInt(args, "timeout", shellDefaultTimeoutMS)) * time.Millisecond
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Our own pipe: Wait then returns when bash exits, not when the last
	// descendant holding the pipe does, and the reader is bounded by a deadline.
	r, w, err := os.Pipe()
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	out := &limitedBuffer{max: maxToolOutput}
	if err := cmd.Start(); err != nil {
		w.Close()
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	w.Close()
	pgid := cmd.Process.Pid
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, r)
	}()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExited(pgid)
	}()
	select {
	case <-exited:
	case <-tctx.Done():
	}
	// Kill the whole group before bash is reaped: its pid, and so the group
	// id, cannot be reused while it is an unreaped zombie.
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	werr := cmd.Wait()
	r.SetReadDeadline(time.Now().Add(shellDrainGrace))
	<-copied

	code := cmd.ProcessState.ExitCode()
	raw := map[string]any{"exitCode": code, "pid": pgid}
	text := out.String()
	switch {
	case ctx.Err() != nil:
		return toolResult{Status: statusCancelled, Output: text + "\n[command cancelled]", RawOutput: raw}
	case tctx.Err() != nil:
		raw["timedOut"] = true
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[command timed out after %d ms and was killed]", text, timeout.Milliseconds())}
	case werr != nil && code < 0:
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[command ended: %v]", text, werr)}
	case code != 0:
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[exit code %d]", text, code)}
	}
	return completed(fmt.Sprintf("%s\n[exit code 0]", text), raw)
}

// pidTypePID is waitid's P_PID.
const pidTypePID = 1

// waitExited blocks until process pid has exited, leaving it unreaped
// (WNOWAIT) so that its pid stays reserved until cmd.Wait reaps it.
func waitExited(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pidTypePID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

func startBackground(env *toolEnv, args map[string]any) toolResult {
	if env.Background == nil {
		return failed(errTypeExecutionFailed, "run shell command: background processes are not available in this session")
	}
	cmd, err := shellCmd(env, args)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	pid, err := env.Background.start(cmd)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	return completed(fmt.Sprintf("Started background process %d", pid), map[string]any{"pid": pid, "background": true})
}

// processSet tracks the background process groups a session started, so
// that they end with it: "the runtime kills it when the session ends or the
// process exits". The zero value is ready to use.
type processSet struct {
	mu     sync.Mutex
	pgids  map[int]struct{}
	closed bool
	wg     sync.WaitGroup // one reaper per started process
}

// start starts cmd (already in its own process group) and tracks it until
// it exits. Its output goes nowhere: nobody would read it.
func (p *processSet) start(cmd *exec.Cmd) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errors.New("the session is ending; no new background process starts")
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	if p.pgids == nil {
		p.pgids = make(map[int]struct{})
	}
	p.pgids[pid] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		waitExited(pid)
		p.mu.Lock()
		delete(p.pgids, pid)
		// The leader is gone; what it left in its group goes with it.
		syscall.Kill(-pid, syscall.SIGKILL)
		p.mu.Unlock()
		cmd.Wait()
	}()
	return pid, nil
}

// killAll ends every tracked process group, refuses new ones, and waits
// until every started process is reaped.
func (p *processSet) killAll() {
	p.mu.Lock()
	p.closed = true
	for pgid := range p.pgids {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
