// policy.go owns the layers that run before the guard: permission rules,
// approval modes and PreToolUse hooks. "The inherited PR #8032 order is
// permission handling, PreToolUse hooks, then this Guard, then the target
// executor." Nothing here executes a tool; it only says whether one may run.
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
	"slices"
	"strings"
	"syscall"
	"time"
)

// Approval modes, Qwen Code's names: "plan (only read-only tools run),
// default (edits and shell ask), auto-edit (edits run, shell asks), yolo
// (everything runs)".
const (
	modePlan     = "plan"
	modeDefault  = "default"
	modeAutoEdit = "auto-edit"
	modeYolo     = "yolo"
)

// verdict is what the permission layer says about one call.
type verdict string

// "priority deny > ask > allow > approval-mode default"
const (
	verdictAllow verdict = "allow"
	verdictAsk   verdict = "ask"
	verdictDeny  verdict = "deny"
)

// Limits of operator-written rules, so that matching stays cheap whatever
// the model sends.
const (
	maxRuleBytes      = 4096 // one permission rule
	maxRuleExpansions = 64   // patterns one {a,b} path specifier expands to
)

// permClass is how an approval mode treats a tool when no rule matched.
type permClass int

const (
	classRead    permClass = iota // read_file, list_directory, glob, grep_search
	classEdit                     // edit, write_file
	classExecute                  // run_shell_command and any other built-in
	classMCP                      // mcp__server__tool
)

// permToolClass classifies a canonical tool name. Only the four built-in
// read-only tools are read-only; an MCP tool is read-only only when its
// server marked it so.
func permToolClass(tool string) permClass {
	switch tool {
	case "read_file", "list_directory", "glob", "grep_search":
		return classRead
	case "edit", "write_file":
		return classEdit
	}
	if strings.HasPrefix(tool, mcpToolPrefix) {
		return classMCP
	}
	return classExecute
}

// ruleToolNames resolves the tool part of a rule to the canonical names it
// covers. "Aliases: Bash and Shell -> run_shell_command; Read -> read_file,
// grep_search, glob, list_directory; Edit -> edit, write_file; Write ->
// write_file". The other names are Qwen Code's own single-tool aliases, so
// that a copied rule means the same here.
func ruleToolNames(name string) ([]string, bool) {
	switch name {
	case "Bash", "Shell", "ShellTool", "run_shell_command":
		return []string{"run_shell_command"}, true
	case "Read":
		return []string{"read_file", "grep_search", "glob", "list_directory"}, true
	case "Edit":
		return []string{"edit", "write_file"}, true
	case "Write", "WriteFile", "WriteFileTool", "write_file":
		return []string{"write_file"}, true
	case "ReadFile", "ReadFileTool", "read_file":
		return []string{"read_file"}, true
	case "EditTool", "edit", "replace":
		return []string{"edit"}, true
	case "Grep", "GrepTool", "SearchFiles", "grep_search", "search_file_content":
		return []string{"grep_search"}, true
	case "Glob", "GlobTool", "FindFiles", "glob":
		return []string{"glob"}, true
	case "ListFiles", "ListFilesTool", "ReadFolder", "list_directory":
		return []string{"list_directory"}, true
	}
	if canonical, ok := qwenOnlyTools[name]; ok {
		return []string{canonical}, true
	}
	return nil, false
}

// qwenOnlyTools are Qwen Code's tools that this runtime does not have, by
// rule name and tool name (packages/core/src/tools/tool-names.ts, with its
// legacy names). A copied rule or tools.disabled entry that names one is
// accepted and can match nothing; any other unknown name is still refused,
// so that a typo in a deny rule cannot go unnoticed.
var qwenOnlyTools = map[string]string{
	"TaskCreate": "task_create", "task_create": "task_create",
	"TaskGet": "task_get", "task_get": "task_get",
	"TaskList": "task_list", "task_list": "task_list", "TodoWrite": "task_list", "todo_write": "task_list",
	"TaskUpdate": "task_update", "task_update": "task_update",
	"TaskStop": "task_stop", "task_stop": "task_stop",
	"TaskOutput": "task_output", "task_output": "task_output",
	"SaveMemory": "save_memory", "save_memory": "save_memory",
	"Agent": "agent", "agent": "agent", "Task": "agent", "task": "agent",
	"Skill": "skill", "skill": "skill",
	"ExitPlanMode": "exit_plan_mode", "exit_plan_mode": "exit_plan_mode",
	"WebFetch": "web_fetch", "web_fetch": "web_fetch",
	"WebSearch": "web_search", "web_search": "web_search",
	"Lsp": "lsp", "lsp": "lsp",
	"AskUserQuestion": "ask_user_question", "ask_user_question": "ask_user_question",
}

// permRule is one parsed rule.
type permRule struct {
	raw   string
	tools []string // canonical names; nil for an MCP rule
	// mcp is the MCP name pattern: "mcp__server" (every tool of the server),
	// "mcp__server__tool", or a prefix ending in "*".
	mcp     string
	command *regexp.Regexp // shell specifier
	paths   []string       // path specifier: glob patterns after brace expansion
}

// permissionRules is a parsed permissions section. The zero value has no rules.
type permissionRules struct {
	deny, ask, allow []permRule
}

// parsePermissionRules parses the three rule lists of a settings file.
func parsePermissionRules(allow, ask, deny []string) (*permissionRules, error) {
	var r permissionRules
	for _, l := range []struct {
		name string
		raw  []string
		out  *[]permRule
	}{{"deny", deny, &r.deny}, {"ask", ask, &r.ask}, {"allow", allow, &r.allow}} {
		for i, raw := range l.raw {
			rule, err := parsePermRule(raw)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", fmt.Sprintf("permissions.%s[%d]", l.name, i), err)
			}
			*l.out = append(*l.out, rule)
		}
	}
	return &r, nil
}

// parsePermRule parses `Tool` or `Tool(specifier)`.
func parsePermRule(raw string) (permRule, error) {
	if len(raw) > maxRuleBytes {
		return permRule{}, fmt.Errorf("rule longer than %d bytes", maxRuleBytes)
	}
	s := strings.TrimSpace(raw)
	rule := permRule{raw: s}
	if s == "" {
		return permRule{}, errors.New("empty rule")
	}
	name, spec, hasSpec := s, "", false
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return permRule{}, fmt.Errorf("rule %q: missing \")\" at the end", s)
		}
		name, spec, hasSpec = strings.TrimSpace(s[:i]), s[i+1:len(s)-1], true
		if strings.TrimSpace(spec) == "" {
			// Qwen Code reads "Bash()" as "Bash": every command. Too easy
			// to write by accident in an allow list.
			return permRule{}, fmt.Errorf("rule %q: empty specifier", s)
		}
	} else if strings.ContainsAny(s, ")") {
		return permRule{}, fmt.Errorf("rule %q: \")\" without \"(\"", s)
	}
	if strings.HasPrefix(name, mcpToolPrefix) {
		if hasSpec {
			return permRule{}, fmt.Errorf("rule %q: MCP rules take no specifier", s)
		}
		if err := checkMCPRuleName(name); err != nil {
			return permRule{}, fmt.Errorf("rule %q: %w", s, err)
		}
		rule.mcp = name
		return rule, nil
	}
	tools, ok := ruleToolNames(name)
	if !ok {
		return permRule{}, fmt.Errorf("rule %q: unknown tool %q", s, name)
	}
	rule.tools = tools
	if _, foreign := qwenOnlyTools[name]; !hasSpec || foreign {
		// A foreign tool's specifier (WebFetch(domain:...)) is Qwen Code's
		// to read; the rule matches nothing here either way.
		return rule, nil
	}
	var err error
	if tools[0] == "run_shell_command" {
		rule.command, err = compileCommandPattern(spec)
	} else {
		rule.paths, err = expandPathBraces(spec)
		for _, p := range rule.paths {
			if err == nil {
				err = checkPathPattern(p)
			}
		}
	}
	if err != nil {
		return permRule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	return rule, nil
}

func checkMCPRuleName(name string) error {
	body := strings.TrimSuffix(name, "*")
	if strings.Contains(body, "*") {
		return errors.New(`"*" is allowed only at the end of an MCP rule`)
	}
	for _, c := range body {
		if !(c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("character %q is not allowed in an MCP tool name", c)
		}
	}
	if body == mcpToolPrefix && !strings.HasSuffix(name, "*") {
		return errors.New("missing server name")
	}
	return nil
}

// compileCommandPattern turns a shell specifier into an anchored regexp with
// Qwen Code's semantics: a lone "*" matches any command; without "*" the
// pattern is a prefix ending at a word boundary ("git commit" matches "git
// commit -m x", not "git commitx"); " *" matches the rest of the words or
// nothing ("ls *" matches "ls" and "ls -la" but not "lsof"); any other "*"
// matches any text. The legacy form "git:*" means "git *".
func compileCommandPattern(spec string) (*regexp.Regexp, error) {
	if strings.HasSuffix(spec, ":*") {
		spec = strings.TrimSuffix(spec, ":*") + " *"
	}
	spec = collapseBlanks(strings.TrimSpace(spec))
	var b strings.Builder
	b.WriteString(`(?s)^`)
	switch {
	case spec == "*":
		b.WriteString(`.*`)
	case !strings.Contains(spec, "*"):
		b.WriteString(regexp.QuoteMeta(spec) + `(?: .*)?`)
	default:
		parts := strings.Split(spec, "*")
		for i, lit := range parts {
			if i == len(parts)-1 {
				b.WriteString(regexp.QuoteMeta(lit))
				break
			}
			if strings.HasSuffix(lit, " ") {
				b.WriteString(regexp.QuoteMeta(strings.TrimSuffix(lit, " ")) + `(?: .*)?`)
			} else {
				b.WriteString(regexp.QuoteMeta(lit) + `.*`)
			}
		}
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}

// collapseBlanks replaces each run of spaces and tabs with one space, so
// that "rm\t-rf" cannot slip past a rule written as "rm *".
func collapseBlanks(s string) string {
	var b strings.Builder
	blank := false
	for _, c := range s {
		if c == ' ' || c == '\t' {
			blank = true
			continue
		}
		if blank && b.Len() > 0 {
			b.WriteByte(' ')
		}
		blank = false
		b.WriteRune(c)
	}
	return b.String()
}

// expandPathBraces expands {a,b} alternatives in a path specifier. A brace
// left as a literal would make a deny rule like Read(**/*.{env,pem}) match
// nothing, silently.
func expandPathBraces(p string) ([]string, error) {
	open, depth := -1, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced \"}\" in %q", p)
			}
			depth--
			if depth > 0 {
				continue
			}
			var alts []string
			start, d := open+1, 0
			for j := open + 1; j < i; j++ {
				switch p[j] {
				case '\\':
					j++
				case '{':
					d++
				case '}':
					d--
				case ',':
					if d == 0 {
						alts = append(alts, p[start:j])
						start = j + 1
					}
				}
			}
			alts = append(alts, p[start:i])
			var out []string
			for _, a := range alts {
				more, err := expandPathBraces(p[:open] + a + p[i+1:])
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
				if len(out) > maxRuleExpansions {
					return nil, fmt.Errorf("%q expands to more than %d patterns", p, maxRuleExpansions)
				}
			}
			return out, nil
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced \"{\" in %q", p)
	}
	return []string{p}, nil
}

func checkPathPattern(p string) error {
	for _, seg := range strings.Split(p, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad path pattern %q: %w", p, err)
		}
	}
	return nil
}

// decide says whether one call may run: deny > ask > allow > the approval
// mode's default. tool is the canonical name, args the normalized arguments
// (absolute file_path / path; shell command), readOnly whether an MCP
// server marked the tool read-only (built-ins are classified by name), cwd
// the session cwd, which is also the project root of "/path" specifiers,
// and home the user's home directory for "~/path" ones. rule is the text of
// the rule that decided, "" when the approval mode did. Path rules look at
// the file system for symlinks; nothing else does.
func (r *permissionRules) decide(mode, tool string, readOnly bool, args map[string]any, cwd, home string) (v verdict, rule string) {
	class := permToolClass(tool)
	switch mode {
	case modePlan, modeDefault, modeAutoEdit, modeYolo:
	default:
		return verdictDeny, ""
	}
	if r == nil {
		r = &permissionRules{}
	}
	call := permCall{tool: tool, args: args, cwd: cwd, home: home}
	if tool == "run_shell_command" {
		if cmd, ok := args["command"].(string); ok {
			call.parts, call.complex = splitShellCommand(cmd)
			call.hasCommand = true
		}
	}
	for _, rl := range r.deny {
		if rl.matches(call, true) {
			return verdictDeny, rl.raw
		}
	}
	// "plan (only read-only tools run ...); everything else is refused, not
	// asked", whatever an ask or allow rule says.
	planReadOnly := class == classRead || class == classMCP && readOnly
	if mode == modePlan && !planReadOnly {
		return verdictDeny, ""
	}
	for _, rl := range r.ask {
		if rl.matches(call, true) {
			return verdictAsk, rl.raw
		}
	}
	for _, rl := range r.allow {
		if rl.command == nil && rl.matches(call, false) {
			return verdictAllow, rl.raw
		}
	}
	if rules := r.allowShellParts(call); rules != "" {
		return verdictAllow, rules
	}
	switch {
	case mode == modeYolo, class == classRead:
		return verdictAllow, ""
	case mode == modeAutoEdit && class == classEdit:
		return verdictAllow, ""
	case mode == modePlan:
		return verdictAllow, "" // read-only MCP tool
	}
	return verdictAsk, ""
}

// permissionDenialText is the user-visible text of a permission denial.
func permissionDenialText(tool, mode, rule string) string {
	if rule != "" {
		return fmt.Sprintf("Tool %q denied by permission rule %q", tool, rule)
	}
	if mode == modePlan {
		return fmt.Sprintf("Tool %q is not allowed in plan mode: only read-only tools run", tool)
	}
	return fmt.Sprintf("Tool %q denied: unknown approval mode %q", tool, mode)
}

// permCall is the part of a call a rule looks at. A shell command is split
// once, into parts.
type permCall struct {
	tool       string
	args       map[string]any
	cwd, home  string
	hasCommand bool
	parts      []string
	complex    bool
}

// matches reports whether the rule covers the call. strict is true for deny
// and ask rules: every doubt (a missing argument, a directory that may hold
// a matching file) counts as a match. For allow rules every doubt counts as
// no match. Allow rules with a command pattern go through allowShellParts.
func (rl permRule) matches(c permCall, strict bool) bool {
	if rl.mcp != "" || strings.HasPrefix(c.tool, mcpToolPrefix) {
		return rl.mcp != "" && matchMCPRule(rl.mcp, c.tool)
	}
	covered := false
	for _, t := range rl.tools {
		covered = covered || t == c.tool
	}
	switch {
	case !covered:
		return false
	case rl.command != nil:
		return !c.hasCommand || matchShellParts(rl.command, c.parts)
	case rl.paths != nil:
		return rl.matchPath(c, strict)
	}
	return true
}

// matchMCPRule: "mcp__server" covers every tool of that server,
// "mcp__server__tool" one tool, and a trailing "*" is a prefix.
func matchMCPRule(pattern, tool string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(tool, prefix)
	}
	if pattern == tool {
		return true
	}
	// The server name never contains "__" (settings refuse it), so the
	// first "__" after the prefix ends it.
	server := strings.TrimPrefix(pattern, mcpToolPrefix)
	return !strings.Contains(server, "__") && strings.HasPrefix(tool, pattern+"__")
}

// matchShellParts is how a deny or ask rule meets a command: it matches
// when any part does, including the commands inside $(...), `...` and
// (...), also with their leading NAME=value assignments removed.
func matchShellParts(re *regexp.Regexp, parts []string) bool {
	for _, p := range parts {
		if re.MatchString(p) || re.MatchString(stripEnvAssignments(p)) {
			return true
		}
	}
	return false
}

// allowShellParts is how allow rules with a command pattern meet a command:
// Qwen Code "splits compound commands and requires every part to match for
// allow", each part by some rule. A command this splitter does not fully
// understand is never allowed by a pattern. It returns the rules used,
// joined by ", ", or "".
func (r *permissionRules) allowShellParts(c permCall) string {
	if c.tool != "run_shell_command" || !c.hasCommand || c.complex || len(c.parts) == 0 {
		return ""
	}
	var used []string
	for _, p := range c.parts {
		found := ""
		for _, rl := range r.allow {
			if rl.command != nil && rl.command.MatchString(p) {
				found = rl.raw
				break
			}
		}
		if found == "" {
			return ""
		}
		if !slices.Contains(used, found) {
			used = append(used, found)
		}
	}
	return strings.Join(used, ", ")
}

// splitShellCommand splits a command on the unquoted operators && || ; | |&
// & and newlines, and on the bounds of $(...), `...`, <(...), >(...) and
// (...), so that the commands inside them become parts too. complex reports
// a construct whose parts it cannot vouch for: a substitution, a subshell,
// a brace group, a here-document, $'...' quoting, an unterminated quote or
// an output redirection to a file.
// Each part has its blanks collapsed.
func splitShellCommand(command string) (parts []string, complex bool) {
	var cur strings.Builder
	flush := func() {
		if p := collapseBlanks(strings.TrimSpace(cur.String())); p != "" {
			parts = append(parts, p)
		}
		cur.Reset()
	}
	inSingle, inDouble := false, false
	depth := 0 // open $( ... ) substitutions
	for i := 0; i < len(command); i++ {
		c := command[i]
		next := byte(0)
		if i+1 < len(command) {
			next = command[i+1]
		}
		switch {
		case inSingle:
			if c == '\'' {
				inSingle = false
			}
			cur.WriteByte(c)
			continue
		case c == '\\':
			cur.WriteByte(c)
			if i+1 < len(command) {
				i++
				cur.WriteByte(command[i])
			} else {
				complex = true
			}
			continue
		case c == '$' && next == '(', c == '`':
			complex = true
			flush()
			if c == '$' {
				depth++
				i++
			}
			continue
		case inDouble:
			if c == '"' {
				inDouble = false
			}
			if c == ')' && depth > 0 { // closes a $( opened inside the quotes
				depth--
				flush()
				continue
			}
			cur.WriteByte(c)
			continue
		case c == '\'':
			if i > 0 && command[i-1] == '$' {
				complex = true
			}
			inSingle = true
			cur.WriteByte(c)
			continue
		case c == '"':
			inDouble = true
			cur.WriteByte(c)
			continue
		}
		switch c {
		case '\n', ';':
			flush()
		case '(', ')':
			complex = true
			if c == ')' && depth > 0 {
				depth--
			}
			flush()
		case '|':
			flush()
			if next == '|' || next == '&' {
				i++
			}
		case '&':
			prev := byte(0)
			if i > 0 {
				prev = command[i-1]
			}
			if prev == '>' || prev == '<' || next == '>' {
				cur.WriteByte(c) // a redirection: 2>&1, &>file
				continue
			}
			flush()
			if next == '&' {
				i++
			}
		case '<':
			if next == '<' {
				complex = true // a here-document's body is not a command
			}
			if next == '(' {
				complex = true
				flush()
				i++
				continue
			}
			cur.WriteByte(c)
		case '>':
			if next == '(' {
				complex = true
				flush()
				i++
				continue
			}
			complex = complex || redirectsToFile(command[i+1:])
			cur.WriteByte(c)
		case '{', '}':
			if cur.Len() == 0 || strings.TrimSpace(cur.String()) == "" {
				complex = true // a brace group, not a literal brace
			}
			cur.WriteByte(c)
		default:
			cur.WriteByte(c)
		}
	}
	if inSingle || inDouble {
		complex = true
	}
	flush()
	return parts, complex
}

// redirectsToFile reports whether the output redirection whose ">" comes
// just before rest writes a file: anything but /dev/null or a descriptor
// (2>&1, >&-). An allow rule for "echo *" must not allow "echo x > ~/.bashrc".
func redirectsToFile(rest string) bool {
	rest = strings.TrimLeft(rest, ">|") // >> and >|
	dup := strings.HasPrefix(rest, "&")
	rest = strings.TrimLeft(strings.TrimPrefix(rest, "&"), " \t")
	end := strings.IndexAny(rest, " \t\n;|&<>()")
	if end < 0 {
		end = len(rest)
	}
	target := rest[:end]
	if target == "/dev/null" {
		return false
	}
	if dup && target != "" && strings.Trim(target, "0123456789-") == "" {
		return false
	}
	return true
}

// envAssignment is a leading NAME=value word, which bash runs the command
// after: "FOO=1 rm -rf x" runs rm.
var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"[^"]*"|[^ '"]*) `)

func stripEnvAssignments(p string) string {
	for {
		loc := envAssignment.FindStringIndex(p)
		if loc == nil {
			return p
		}
		p = p[loc[1]:]
	}
}

// permPathArg returns the path a path rule looks at and whether the tool
// reads a whole directory tree (list_directory, glob, grep_search).
func permPathArg(c permCall) (p string, tree, ok bool) {
	switch c.tool {
	case "read_file", "write_file", "edit":
		p, ok = c.args["file_path"].(string)
	case "list_directory":
		p, ok = c.args["path"].(string)
		tree = true
	case "glob", "grep_search":
		tree = true
		if v, present := c.args["path"]; present {
			p, ok = v.(string)
		} else {
			p, ok = c.cwd, true // the tools search the session cwd
		}
	}
	return p, tree, ok && path.IsAbs(p)
}

// resolvePathSpecifier anchors a path specifier: "//abs" is absolute,
// "~/p" is under home, "/p" under the project root (the session cwd), and
// "./p" or a bare "p" under the cwd. ok is false when it cannot be anchored.
func resolvePathSpecifier(spec, cwd, home string) (string, bool) {
	switch {
	case strings.HasPrefix(spec, "//"):
		return path.Clean(spec[1:]), true
	case strings.HasPrefix(spec, "~/"):
		if !path.IsAbs(home) {
			return "", false
		}
		return path.Join(home, spec[2:]), true
	}
	if !path.IsAbs(cwd) {
		return "", false
	}
	return path.Join(cwd, strings.TrimPrefix(spec, "./")), true
}

// matchPath: a file tool matches when its path matches; a tree tool
// matches a strict rule when any path in its tree could match, and an
// allow rule only when every path in its tree matches. The path is tried as
// given and as it resolves through symlinks: a strict rule matches when
// either does, an allow rule only when both do, so that a link in the
// workspace neither escapes a deny rule nor borrows an allow rule.
func (rl permRule) matchPath(c permCall, strict bool) bool {
	p, tree, ok := permPathArg(c)
	if !ok {
		return strict
	}
	p = path.Clean(p)
	real, err := permRealPath(p, c.cwd)
	if err != nil {
		return strict
	}
	// Normalization resolved p, so it may be spelled under the real cwd;
	// the rules anchored at the cwd as written see it there. A strict rule
	// also sees it as resolved, so a deny on the real location holds.
	spellings := []string{underCwd(p, c.cwd), real}
	if strict {
		spellings = append(spellings, p)
	}
	for _, candidate := range spellings {
		if rl.matchPathSpecs(c, candidate, tree, strict) == strict {
			return strict
		}
	}
	return !strict
}

// underCwd gives p, when it lies inside the resolved cwd, back under cwd as
// written, so that the rules anchored there apply to it.
func underCwd(p, cwd string) string {
	if realCwd, err := filepath.EvalSymlinks(cwd); err == nil {
		if rel, err := filepath.Rel(realCwd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return path.Join(cwd, rel)
		}
	}
	return p
}

// matchPathSpecs reports whether any of the rule's patterns matches p.
func (rl permRule) matchPathSpecs(c permCall, p string, tree, strict bool) bool {
	name := pathSegments(p)
	for _, spec := range rl.paths {
		abs, ok := resolvePathSpecifier(spec, c.cwd, c.home)
		if !ok {
			if strict {
				return true
			}
			continue
		}
		pat := pathSegments(abs)
		var m bool
		switch {
		case !tree:
			m = globSegments(pat, name, globFull)
		case strict:
			m = globSegments(pat, name, globAnyBelow)
		default:
			m = globSegments(pat, name, globAllBelow)
		}
		if m {
			return true
		}
	}
	return false
}

// permRealPath resolves the deepest existing ancestor of the absolute path
// p through symlinks and appends the rest. A result inside the resolved
// cwd is given back under cwd as written, so that the rules anchored there
// still apply.
func permRealPath(p, cwd string) (string, error) {
	// Walk down from the root: the cost is the depth that exists, not the
	// depth the model wrote.
	dir := "/"
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := os.Lstat(p[:i])
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", err
		}
		dir = p[:i]
	}
	rest := strings.TrimPrefix(p[len(dir):], "/")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	return underCwd(path.Join(real, rest), cwd), nil
}

func pathSegments(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// globMode says which paths a glob is tested against.
type globMode int

const (
	globFull     globMode = iota // the name itself
	globAnyBelow                 // some path at or below the name
	globAllBelow                 // every path at or below the name
)

// globSegments matches path segments against pattern segments, "**"
// standing for any number of segments, in O(len(pat)·len(name)) whatever
// the model sends.
func globSegments(pat, name []string, mode globMode) bool {
	np, nn := len(pat), len(name)
	onlyStars := make([]bool, np+1) // pat[i:] is one or more "**"
	for i := np - 1; i >= 0; i-- {
		onlyStars[i] = pat[i] == "**" && (i == np-1 || onlyStars[i+1])
	}
	// m[i][j]: pat[i:] against name[j:] (and what lies below it, by mode).
	m := make([][]bool, np+1)
	for i := range m {
		m[i] = make([]bool, nn+1)
	}
	for i := np; i >= 0; i-- {
		for j := nn; j >= 0; j-- {
			var v bool
			switch {
			case mode == globAnyBelow && j == nn:
				v = true // what is left of the pattern can name something below
			case mode == globAllBelow && onlyStars[i]:
				v = true
			case i == np:
				v = mode == globFull && j == nn
			case pat[i] == "**":
				v = m[i+1][j] || j < nn && m[i][j+1]
			case j < nn:
				ok, _ := path.Match(pat[i], name[j])
				v = ok && m[i+1][j+1]
			}
			m[i][j] = v
		}
	}
	return m[0][0]
}

// PreToolUse hooks.

// hookEventPreToolUse is the hook_event_name and hookEventName of this layer.
const hookEventPreToolUse = "PreToolUse"

// Hook limits. "timeout (default 60000 ms; kill the group), bounded
// stdout/stderr".
const (
	hookDefaultTimeoutMS = 60000
	hookMinTimeoutMS     = 100
	hookMaxTimeoutMS     = 600000
	maxHookOutputBytes   = 64 << 10 // each of stdout and stderr
	maxHookReasonBytes   = 2000     // a reason shown to the user and the model
	hookDrainGrace       = 2 * time.Second
	maxHookCommandShown  = 80 // bytes of a hook command quoted in a message
)

// hookMatcher is one entry of hooks.PreToolUse.
type hookMatcher struct {
	Matcher string        `json:"matcher"`
	Hooks   []hookCommand `json:"hooks"`
	re      *regexp.Regexp
	all     bool
}

// hookCommand is one command hook. Timeout is in milliseconds, 0 for the default.
type hookCommand struct {
	Type     string `json:"type"`
	Command  string `json:"command"`
	Timeout  int    `json:"timeout"`
	FailOpen bool   `json:"failOpen"`
}

// compile prepares the matcher with Qwen Code's rules: empty, "*" or ".*"
// match every tool; otherwise it is an unanchored regular expression over
// the canonical name, except that a "|" list not starting with "^" or "("
// is rebuilt from its trimmed entries, and an entry equal to the name or to
// one of its Claude Code names (Bash, Read, ...) matches exactly.
func (h *hookMatcher) compile() error {
	p := strings.TrimSpace(h.Matcher)
	if p == "" || p == "*" || p == ".*" {
		h.all = true
		return nil
	}
	expr := p
	if strings.Contains(p, "|") && !strings.HasPrefix(p, "^") && !strings.HasPrefix(p, "(") {
		var alts []string
		for _, e := range splitUnescapedBars(p) {
			if e = strings.TrimSpace(e); e == "*" || e == ".*" {
				h.all = true
				return nil
			} else if e != "" {
				alts = append(alts, e)
			}
		}
		expr = strings.Join(alts, "|")
		if expr == "" {
			expr = `[^\s\S]` // a matcher made only of "|" matches nothing
		}
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return fmt.Errorf("matcher %q: %w", h.Matcher, err)
	}
	h.re = re
	return nil
}

func splitUnescapedBars(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// hookToolAliases are the names Claude Code hooks use for our tools, as
// Qwen Code maps them; they match only exactly.
func hookToolAliases(tool string) []string {
	switch tool {
	case "run_shell_command":
		return []string{"Bash", "Shell"}
	case "read_file":
		return []string{"Read"}
	case "write_file":
		return []string{"Write"}
	case "edit":
		return []string{"Edit"}
	case "grep_search":
		return []string{"Grep"}
	case "glob":
		return []string{"Glob"}
	}
	return nil
}

// matchesTool reports whether the hooks of this entry run for tool. An
// entry that was not compiled (not loaded by loadSettings) is compiled into
// a copy, so that sessions sharing the settings never write to them. A
// matcher that does not compile is an error: the caller denies.
func (h *hookMatcher) matchesTool(tool string) (bool, error) {
	m := *h
	if m.re == nil && !m.all {
		if err := m.compile(); err != nil {
			return true, err
		}
	}
	if m.all {
		return true, nil
	}
	p := strings.TrimSpace(m.Matcher)
	list := strings.Contains(p, "|") && !strings.HasPrefix(p, "^") && !strings.HasPrefix(p, "(")
	for _, n := range append([]string{tool}, hookToolAliases(tool)...) {
		if p == n {
			return true, nil
		}
		if list {
			for _, e := range splitUnescapedBars(p) {
				if strings.TrimSpace(e) == n {
					return true, nil
				}
			}
		}
	}
	return m.re.MatchString(tool), nil
}

// hookInput is the JSON a PreToolUse hook reads on stdin. hook_event_name
// is always "PreToolUse"; runPreToolUseHooks sets it.
type hookInput struct {
	SessionID      string         `json:"session_id"`
	Cwd            string         `json:"cwd"`
	HookEventName  string         `json:"hook_event_name"`
	PermissionMode string         `json:"permission_mode"`
	ToolName       string         `json:"tool_name"`
	ToolInput      map[string]any `json:"tool_input"`
	ToolUseID      string         `json:"tool_use_id"`
}

// hookPermissionMode is the permission_mode a hook sees: Qwen Code spells
// the approval mode auto-edit as "auto_edit" in hook input.
func hookPermissionMode(mode string) string {
	if mode == modeAutoEdit {
		return "auto_edit"
	}
	return mode
}

// hookDecision is what the hooks of one call decided together.
type hookDecision string

const (
	hookNone  hookDecision = "none" // no hook ran, or none decided
	hookAllow hookDecision = "allow"
	hookAsk   hookDecision = "ask"
	hookDeny  hookDecision = "deny"
)

// hookOutcome is the result of the PreToolUse layer. Reason is user-visible
// text for deny and ask. Ignored lists the failures of failOpen hooks, for
// the log.
type hookOutcome struct {
	Decision hookDecision
	Reason   string
	Ignored  []string
}

// runPreToolUseHooks runs, one after the other, every hook whose matcher
// matches input.ToolName, and combines their answers: "any deny wins, then
// ask, then allow". The first deny ends the layer; later hooks do not run.
// env gives each hook its complete environment (procEnv.childEnv()) and its
// sandbox. When ctx ends, the running hook's process group is killed and the
// outcome is a deny; the caller reports the cancellation.
func runPreToolUseHooks(ctx context.Context, hooks []hookMatcher, input hookInput, env spawnEnv) hookOutcome {
	input.HookEventName = hookEventPreToolUse
	input.PermissionMode = hookPermissionMode(input.PermissionMode)
	if input.ToolInput == nil {
		input.ToolInput = map[string]any{} // an object, never null
	}
	out := hookOutcome{Decision: hookNone}
	var stdin []byte
	for i := range hooks {
		m := &hooks[i]
		match, err := m.matchesTool(input.ToolName)
		if err != nil {
			return hookOutcome{Decision: hookDeny, Reason: fmt.Sprintf("PreToolUse hook %s", err)}
		}
		if !match {
			continue
		}
		for _, h := range m.Hooks {
			if stdin == nil {
				if stdin, err = json.Marshal(input); err != nil {
					return hookOutcome{Decision: hookDeny, Reason: fmt.Sprintf("PreToolUse hook input: %v", err)}
				}
			}
			d, reason, failure := runHookCommand(ctx, h, stdin, input.Cwd, env)
			if ctx.Err() != nil {
				return hookOutcome{Decision: hookDeny, Reason: "PreToolUse hooks cancelled"}
			}
			if failure != "" {
				msg := fmt.Sprintf("PreToolUse hook %s %s", quoteHookCommand(h.Command), failure)
				// A hook the sandbox could not confine did not run at all:
				// failOpen covers a hook's own failures, not that.
				if !h.FailOpen || strings.HasPrefix(failure, hookNotConfined) {
					return hookOutcome{Decision: hookDeny, Reason: msg + " (the call is blocked: the hook fails closed)", Ignored: out.Ignored}
				}
				out.Ignored = append(out.Ignored, msg)
				continue
			}
			switch d {
			case hookDeny:
				if reason == "" {
					reason = "no reason given"
				}
				return hookOutcome{Decision: hookDeny, Reason: fmt.Sprintf("PreToolUse hook %s denied the call: %s", quoteHookCommand(h.Command), reason), Ignored: out.Ignored}
			case hookAsk:
				if out.Decision != hookAsk {
					out.Decision, out.Reason = hookAsk, reason
				}
			case hookAllow:
				if out.Decision == hookNone {
					out.Decision, out.Reason = hookAllow, reason
				}
			}
		}
	}
	return out
}

func quoteHookCommand(c string) string {
	if len(c) > maxHookCommandShown {
		c = strings.ToValidUTF8(c[:maxHookCommandShown], "") + "..."
	}
	return fmt.Sprintf("%q", c)
}

// hookNotConfined starts the failure of a hook the sandbox could not
// confine: it never ran, so it blocks the call even with failOpen.
const hookNotConfined = "could not be confined"

// runHookCommand runs one hook as `bash -c command` in its own process
// group and reads its answer. failure, when not empty, says how the hook
// failed to answer (it crashed, timed out or printed something that is not
// its JSON answer); exit 2 is an answer: a deny with stderr as the reason.
func runHookCommand(ctx context.Context, h hookCommand, stdin []byte, dir string, env spawnEnv) (d hookDecision, reason, failure string) {
	timeout := time.Duration(h.Timeout) * time.Millisecond
	if h.Timeout == 0 {
		timeout = hookDefaultTimeoutMS * time.Millisecond
	}
	if h.Type != "command" || strings.TrimSpace(h.Command) == "" {
		return "", "", fmt.Sprintf("is not a command hook (type %q)", h.Type)
	}
	if ctx.Err() != nil {
		return "", "", "was cancelled"
	}
	cmd := exec.Command("bash", "-c", h.Command)
	cmd.Env = env.Env.childEnv(env.Sandbox.env()...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = hookDrainGrace
	// Our own pipes: Wait then returns when bash exits, not when the last
	// descendant holding a pipe does, and the readers are bounded by a deadline.
	outR, outW, err := os.Pipe()
	if err != nil {
		return "", "", fmt.Sprintf("could not start: %v", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return "", "", fmt.Sprintf("could not start: %v", err)
	}
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	err = env.Sandbox.start(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		if se := (*sandboxStartError)(nil); errors.As(err, &se) {
			return "", "", fmt.Sprintf("%s: %v", hookNotConfined, err)
		}
		return "", "", fmt.Sprintf("could not start: %v", err)
	}
	pgid := cmd.Process.Pid
	stdout, stderr := newHookBuffer(), newHookBuffer()
	read := make(chan struct{}, 2)
	for _, p := range []struct {
		r *os.File
		b *hookBuffer
	}{{outR, stdout}, {errR, stderr}} {
		go func() {
			defer func() { read <- struct{}{} }()
			io.Copy(p.b, p.r)
		}()
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExited(pgid) // tools.go: the group id stays reserved until Wait
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	timedOut := false
	select {
	case <-exited:
	case <-timer.C:
		timedOut = true
	case <-stdout.full: // no valid answer can follow
	case <-ctx.Done():
	}
	// Kill the whole group before bash is reaped: its pid, and so the group
	// id, cannot be reused while it is an unreaped zombie.
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	cmd.Wait()
	deadline := time.Now().Add(hookDrainGrace)
	outR.SetReadDeadline(deadline)
	errR.SetReadDeadline(deadline)
	<-read
	<-read

	state := cmd.ProcessState
	switch {
	case ctx.Err() != nil:
		return "", "", "was cancelled"
	case timedOut:
		return "", "", fmt.Sprintf("timed out after %d ms", timeout.Milliseconds())
	case stdout.dropped > 0:
		return "", "", fmt.Sprintf("printed more than %d bytes", maxHookOutputBytes)
	case !state.Exited():
		return "", "", fmt.Sprintf("crashed: %v", state)
	case state.ExitCode() == 2:
		return hookDeny, hookReasonText(stderr.String()), ""
	case state.ExitCode() != 0:
		return "", "", fmt.Sprintf("failed with exit status %d", state.ExitCode())
	}
	d, reason, err = parseHookOutput(stdout.buf.Bytes())
	if err != nil {
		return "", "", fmt.Sprintf("printed an invalid answer: %v", err)
	}
	return d, reason, ""
}

// hookOutputJSON is a PreToolUse hook's answer on stdout. The top-level
// keys are Qwen Code's HookOutput (packages/core/src/hooks/types.ts); the
// hookSpecificOutput keys are its PreToolUseOutput. Anything else is refused.
type hookOutputJSON struct {
	Continue           *bool           `json:"continue"`
	StopReason         string          `json:"stopReason"`
	SuppressOutput     bool            `json:"suppressOutput"`
	SystemMessage      string          `json:"systemMessage"`
	TerminalSequence   string          `json:"terminalSequence"`
	Decision           string          `json:"decision"`
	Reason             string          `json:"reason"`
	HookSpecificOutput json.RawMessage `json:"hookSpecificOutput"` // decoded on its own: exact names
}

type hookPreToolUse struct {
	// Optional, as Qwen Code reads it; another event's name is refused.
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
	// Context for the model, which Qwen Code's PreToolUse also accepts;
	// it is read and not used. Any other key (updatedInput, say) asks for
	// something this runtime does not do, and blocks.
	AdditionalContext string `json:"additionalContext"`
}

// parseHookOutput reads the stdout of a hook that exited 0. Empty output is
// no decision. As in Qwen Code, hookSpecificOutput.permissionDecision wins
// over the generic decision ("approve" and "block" are its older names),
// and "continue": false stops the call.
func parseHookOutput(stdout []byte) (hookDecision, string, error) {
	if len(bytes.TrimSpace(stdout)) == 0 {
		return hookNone, "", nil
	}
	var o hookOutputJSON
	if err := decodeStrict(stdout, &o); err != nil {
		return "", "", err
	}
	reason := o.Reason
	d := hookNone
	switch o.Decision {
	case "":
	case "allow", "approve":
		d = hookAllow
	case "deny", "block":
		d = hookDeny
	case "ask":
		d = hookAsk
	default:
		return "", "", fmt.Errorf("unknown decision %q", o.Decision)
	}
	if o.HookSpecificOutput != nil && string(o.HookSpecificOutput) != "null" {
		s := &hookPreToolUse{}
		if err := decodeStrict(o.HookSpecificOutput, s); err != nil {
			return "", "", fmt.Errorf("hookSpecificOutput: %w", err)
		}
		if s.HookEventName != "" && s.HookEventName != hookEventPreToolUse {
			return "", "", fmt.Errorf("hookEventName %q is not %q", s.HookEventName, hookEventPreToolUse)
		}
		switch s.PermissionDecision {
		case "":
		case "allow":
			d = hookAllow
		case "deny":
			d = hookDeny
		case "ask":
			d = hookAsk
		default:
			return "", "", fmt.Errorf("unknown permissionDecision %q", s.PermissionDecision)
		}
		if s.PermissionDecisionReason != "" {
			reason = s.PermissionDecisionReason
		}
	}
	if o.Continue != nil && !*o.Continue {
		d = hookDeny
		if o.StopReason != "" {
			reason = o.StopReason
		}
	}
	return d, hookReasonText(reason), nil
}

// hookReasonText bounds a reason written by a hook.
func hookReasonText(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxHookReasonBytes {
		s = s[:maxHookReasonBytes] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// hookBuffer keeps the first max bytes written and counts the rest, so a
// hook that prints without end neither blocks nor fills memory. full is
// closed when the first byte is dropped.
type hookBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int
	full    chan struct{}
}

func newHookBuffer() *hookBuffer {
	return &hookBuffer{max: maxHookOutputBytes, full: make(chan struct{})}
}

func (b *hookBuffer) Write(p []byte) (int, error) {
	room := min(b.max-b.buf.Len(), len(p))
	b.buf.Write(p[:room])
	if b.dropped == 0 && room < len(p) {
		close(b.full)
	}
	b.dropped += len(p) - room
	return len(p), nil
}

func (b *hookBuffer) String() string { return b.buf.String() }

// Outcomes of asking the user about one call (session/request_permission).
type permissionOutcome int

const (
	permissionRejected permissionOutcome = iota // also any answer we cannot read
	permissionAllowed
	permissionCancelled
)

// Texts of calls the layers before the guard end.
const (
	permissionRejectedText = "The user rejected this tool call"
	hookDeniedDefaultText  = "Blocked by a PreToolUse hook"
)

// callPolicy is what a session applies before the guard.
type callPolicy struct {
	Settings *settings
	Mode     string // approval mode of the session when the call was made
	Home     string // for ~/ anchors in path rules
	// Ask puts the call to the user; it is only called for an ask verdict.
	Ask func(ctx context.Context, call toolCall, spec *toolSpec, args map[string]any) permissionOutcome
	// Log hears what a failOpen hook's failure let through.
	Log func(msg string, args ...any)
}

// checkPolicy runs the layers before the guard: tools.disabled, permission
// rules under the approval mode, the user's answer to an ask, then the
// PreToolUse hooks. ok is true only when every layer let the call through.
func checkPolicy(ctx context.Context, env *toolEnv, call toolCall, spec *toolSpec, args map[string]any) (res toolResult, ok bool) {
	p := env.Policy
	v, rule := p.Settings.Rules.decide(p.Mode, spec.Name, spec.ReadOnly, args, env.Cwd, p.Home)
	switch v {
	case verdictAllow:
	case verdictAsk:
		if res, ok := askUser(ctx, p, call, spec, args); !ok {
			return res, false
		}
	default:
		return failed(errTypeExecutionDenied, "%s", permissionDenialText(spec.Name, p.Mode, rule)), false
	}
	if len(p.Settings.Hooks.PreToolUse) == 0 {
		return toolResult{}, true
	}
	if ctx.Err() != nil {
		return cancelledResult(), false
	}
	out := runPreToolUseHooks(ctx, p.Settings.Hooks.PreToolUse, hookInput{
		SessionID: env.SessionID, Cwd: env.Cwd, PermissionMode: p.Mode,
		ToolName: spec.Name, ToolInput: args, ToolUseID: call.ID,
	}, spawnEnv{env.Env, env.Sandbox})
	if ctx.Err() != nil {
		return cancelledResult(), false
	}
	for _, ignored := range out.Ignored {
		if p.Log != nil {
			p.Log("PreToolUse hook failed open", "tool", spec.Name, "toolCallId", call.ID, "failure", ignored)
		}
	}
	switch out.Decision {
	case hookNone, hookAllow:
		return toolResult{}, true
	case hookAsk:
		return askUser(ctx, p, call, spec, args)
	default:
		reason := out.Reason
		if strings.TrimSpace(reason) == "" {
			reason = hookDeniedDefaultText
		}
		return failed(errTypeExecutionDenied, "%s", reason), false
	}
}

func askUser(ctx context.Context, p *callPolicy, call toolCall, spec *toolSpec, args map[string]any) (toolResult, bool) {
	if p.Ask == nil {
		return failed(errTypeExecutionDenied, "%s", permissionRejectedText), false
	}
	switch p.Ask(ctx, call, spec, args) {
	case permissionAllowed:
		if ctx.Err() != nil {
			return cancelledResult(), false
		}
		return toolResult{}, true
	case permissionCancelled:
		return cancelledResult(), false
	default:
		return failed(errTypeExecutionDenied, "%s", permissionRejectedText), false
	}
}
