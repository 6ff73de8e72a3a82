// perms.go owns the permission layer before the guard: approval modes,
// permission rules and the user's answer to an ask (DESIGN.md §10). It only
// says whether a call may run; it never runs one.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Approval modes, Qwen Code's names (DESIGN.md §10): in plan only read-only
// tools run, default asks before edits and shell, auto-edit asks before
// shell, yolo runs everything.
const (
	modePlan     = "plan"
	modeDefault  = "default"
	modeAutoEdit = "auto-edit"
	modeYolo     = "yolo"
)

// verdict is what the permission layer says about one call.
type verdict string

// Verdicts, in priority: deny, ask, allow, then the mode's default (DESIGN.md §10).
const (
	verdictAllow verdict = "allow"
	verdictAsk   verdict = "ask"
	verdictDeny  verdict = "deny"
)

// maxRuleBytes bounds one operator-written rule, so that matching stays
// cheap whatever the model sends.
const maxRuleBytes = 4096

// permClass is how an approval mode treats a tool when no rule matched.
type permClass int

const (
	classRead    permClass = iota // a read-only built-in
	classEdit                     // a built-in of kind edit
	classExecute                  // any other built-in or unknown name
	classMCP                      // mcp__server__tool
)

// builtinClasses is each built-in's class, read once from its spec.
var builtinClasses = func() map[string]permClass {
	m := map[string]permClass{}
	for _, n := range builtinToolNames() {
		switch spec, _ := builtinTool(n); {
		case spec.ReadOnly:
			m[n] = classRead
		case spec.Kind == kindEdit:
			m[n] = classEdit
		default:
			m[n] = classExecute
		}
	}
	return m
}()

// permToolClass classifies a canonical tool name. An MCP tool is read-only
// only when its server marked it so.
func permToolClass(tool string) permClass {
	if c, ok := builtinClasses[tool]; ok {
		return c
	}
	if strings.HasPrefix(tool, mcpToolPrefix) {
		return classMCP
	}
	return classExecute
}

// ruleToolNames resolves the tool part of a rule to the canonical names it
// covers: Bash and Shell name the shell tool, Read the read and search
// tools, Edit the edit and write tools, Write the write tool. The other names are Qwen Code's own single-tool aliases, so
// that a copied rule means the same here.
func ruleToolNames(name string) ([]string, bool) {
	switch name {
	case "Bash", "Shell", "ShellTool", toolShell:
		return []string{toolShell}, true
	case "Read":
		return readOnlyToolNames(), true
	case "Edit":
		return []string{toolEdit, toolWriteFile}, true
	case "Write", "WriteFile", "WriteFileTool", toolWriteFile:
		return []string{toolWriteFile}, true
	case "ReadFile", "ReadFileTool", toolReadFile:
		return []string{toolReadFile}, true
	case "EditTool", toolEdit, "replace":
		return []string{toolEdit}, true
	case "Grep", "GrepTool", "SearchFiles", toolGrepSearch, "search_file_content":
		return []string{toolGrepSearch}, true
	case "Glob", "GlobTool", "FindFiles", toolGlob:
		return []string{toolGlob}, true
	case "ListFiles", "ListFilesTool", "ReadFolder", toolListDirectory:
		return []string{toolListDirectory}, true
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
	// longOpts are the long options the shell specifier names (--eval,
	// -vettool), which a deny or ask rule meets in every spelling
	// (commandPatternOptions).
	longOpts []string
	paths    []string // path specifier: glob patterns after brace expansion
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
	if tools[0] == toolShell {
		rule.command, err = compileCommandPattern(spec)
		rule.longOpts = commandPatternOptions(spec)
	} else {
		rule.paths, err = expandBraces(spec)
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
	call := permCall{tool: tool, args: args, cwd: cwd, home: home, realCwd: &resolvedCwdOnce{}}
	if tool == toolShell {
		if cmd, ok := args["command"].(string); ok {
			call.shellView = viewShellCommand(cmd)
			call.hasCommand = true
		}
	}
	if rule, ok := r.denies(call); ok {
		return verdictDeny, rule
	}
	// In plan mode a call that is not read-only is refused, not asked,
	// whatever an ask or allow rule says (DESIGN.md §10).
	planReadOnly := class == classRead || class == classMCP && readOnly
	if mode == modePlan && !planReadOnly {
		return verdictDeny, ""
	}
	for _, rl := range r.ask {
		if rl.matches(call, true) {
			return verdictAsk, rl.raw
		}
	}
	// A shell command that opens a socket by a redirection, or may (a
	// target known only when bash runs, a command not read whole), is
	// allowed by no rule and no mode, yolo included: the user is asked,
	// and where nobody answers it does not run (DESIGN.md §10).
	if call.hasCommand && (call.network || call.unread) {
		return verdictAsk, ""
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

// denies is decide's first step: the first deny rule that covers the call.
func (r *permissionRules) denies(call permCall) (rule string, ok bool) {
	for _, rl := range r.deny {
		if rl.matches(call, true) {
			return rl.raw, true
		}
	}
	return "", false
}

// readDenied is the check the search tools make on each path they reach
// (toolEnv.ReadDenied): whether a deny rule refuses read_file of the
// absolute path, as decide would refuse the call, in the session cwd cwd.
// nil when the rules deny nothing. The check serves one call: it resolves
// cwd once, and is not for concurrent use.
func (p *callPolicy) readDenied(cwd string) func(string) bool {
	if p == nil || p.Settings == nil || p.Settings.Rules == nil || len(p.Settings.Rules.deny) == 0 {
		return nil
	}
	r, home, realCwd := p.Settings.Rules, p.Home, &resolvedCwdOnce{}
	return func(file string) bool {
		_, ok := r.denies(permCall{tool: toolReadFile, args: map[string]any{"file_path": file}, cwd: cwd, home: home, realCwd: realCwd})
		return ok
	}
}

// permissionDenialText is the user-visible text of a permission denial.
func permissionDenialText(tool, mode, rule string) string {
	if rule != "" {
		return fmt.Sprintf("tool %q denied by permission rule %q", tool, rule)
	}
	if mode == modePlan {
		return fmt.Sprintf("tool %q is not allowed in plan mode: only read-only tools run", tool)
	}
	return fmt.Sprintf("tool %q denied: unknown approval mode %q", tool, mode)
}

// permCall is the part of a call a rule looks at. A shell command is
// parsed once (viewShellCommand).
type permCall struct {
	tool       string
	args       map[string]any
	cwd, home  string
	hasCommand bool
	shellView
	// realCwd is cwd resolved through symlinks, once for all the rules
	// that look at one call.
	realCwd *resolvedCwdOnce
}

// resolvedCwdOnce resolves a cwd through symlinks at most once.
type resolvedCwdOnce struct {
	done bool
	path string
	err  error
}

// resolve returns cwd resolved through symlinks: the same answer each
// time, for one call.
func (r *resolvedCwdOnce) resolve(cwd string) (string, error) {
	if r == nil {
		return filepath.EvalSymlinks(cwd)
	}
	if !r.done {
		r.path, r.err = filepath.EvalSymlinks(cwd)
		r.done = true
	}
	return r.path, r.err
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
		return !c.hasCommand || c.unread || matchShellParts(rl.command, c.deny) || rl.matchOptionSpellings(c)
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

// permPathArg returns the path a path rule looks at and whether the tool
// reads a whole directory tree (list_directory, glob, grep_search).
func permPathArg(c permCall) (p string, tree, ok bool) {
	switch c.tool {
	case toolReadFile, toolWriteFile, toolEdit:
		p, ok = c.args["file_path"].(string)
	case toolListDirectory:
		p, ok = c.args["path"].(string)
		tree = true
	case toolGlob, toolGrepSearch:
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
	real, err := c.realPath(p)
	if err != nil {
		return strict
	}
	// Normalization resolved p, so it may be spelled under the real cwd;
	// the rules anchored at the cwd as written see it there. A strict rule
	// also sees it as resolved, so a deny on the real location holds.
	spellings := []string{c.underCwd(p), real}
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
func (c permCall) underCwd(p string) string {
	if realCwd, err := c.realCwd.resolve(c.cwd); err == nil {
		if rel, err := filepath.Rel(realCwd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return path.Join(c.cwd, rel)
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

// realPath resolves the deepest existing ancestor of the absolute path
// p through symlinks and appends the rest. A result inside the resolved
// cwd is given back under cwd as written, so that the rules anchored there
// still apply.
func (c permCall) realPath(p string) (string, error) {
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
	return c.underCwd(path.Join(real, rest)), nil
}

// Outcomes of asking the user about one call (session/request_permission).
type permissionOutcome int

const (
	permissionRejected permissionOutcome = iota // also any answer we cannot read
	permissionAllowed
	permissionCancelled
	// permissionDeclined: nobody can be asked (a run without a terminal),
	// so the call is declined unasked, as Qwen Code's headless mode does.
	permissionDeclined
)

// hookPermissionDeniedText is the text of a PermissionRequest hook's deny
// that gave no message.
func hookPermissionDeniedText(tool string) string {
	return `Permission to use "` + tool + `" was denied by a PermissionRequest hook.`
}

// hookDeniedDefaultText is the text of a PreToolUse hook's deny that gave
// no reason.
const hookDeniedDefaultText = "blocked by a PreToolUse hook"

// policyCancelledText is Qwen Code's text of a call whose prompt was
// cancelled in the layers before the guard: during its permission request
// or its hooks (DESIGN.md §10). The guard's own cancel keeps
// cancelledBeforeExecution (DESIGN.md §1).
const policyCancelledText = "Tool call was cancelled before execution."

func policyCancelled() toolResult {
	return toolResult{Status: statusCancelled, ErrorType: errTypeExecutionDenied, Output: policyCancelledText}
}

// canceledByUserText is Qwen Code's text of a call the user rejected, for
// the model and the client alike (DESIGN.md §10).
func canceledByUserText(tool string) string {
	return `Tool "` + tool + `" was canceled by the user.`
}

// declinedPermissionText is Qwen Code's headless text of a call that needed
// the user's approval where nobody can be asked, under this product's name.
func declinedPermissionText(tool string) string {
	return `acpguard requires permission to use "` + tool + `", but that permission was declined.`
}

// callPolicy is what a session applies before the guard.
type callPolicy struct {
	Settings *settings
	Mode     string // approval mode of the session when the call was made
	Home     string // for ~/ anchors in path rules
	// Ask puts the call to the user; it is only called for an ask verdict.
	Ask func(ctx context.Context, call toolCall, spec *toolSpec, args map[string]any) permissionOutcome
	// Log hears what a failOpen hook's failure let through.
	Log func(msg string, args ...any)
	// Parent is serve's channel in a serve child: serve POSTs the http
	// hooks (hooks_parent.go); nil elsewhere.
	Parent *rpcConn
}

// check runs the layers before the guard after tools.disabled: permission
// rules under the approval mode, the user's answer to an ask, then the
// PreToolUse hooks. ok is true only when every layer let the call through.
func (p *callPolicy) check(ctx context.Context, env *toolEnv, call toolCall, sp toolSpec, args map[string]any) (res toolResult, ok bool) {
	spec := &sp
	v, rule := p.Settings.Rules.decide(p.Mode, spec.Name, spec.ReadOnly, args, env.Cwd, p.Home)
	switch v {
	case verdictAllow:
	case verdictAsk:
		if spec.Trusted && rule == "" {
			break
		}
		if res, ok := askUser(ctx, p, env, call, spec, args); !ok {
			return res, false
		}
	default:
		return failed(errTypeExecutionDenied, "%s", permissionDenialText(spec.Name, p.Mode, rule)), false
	}
	if len(p.Settings.Hooks.PreToolUse) == 0 {
		return toolResult{}, true
	}
	if ctx.Err() != nil {
		return policyCancelled(), false
	}
	out := runPreToolUseHooks(ctx, p.Settings.Hooks.PreToolUse, hookInput{
		SessionID: env.SessionID, Cwd: env.Cwd, PermissionMode: p.Mode, PromptID: env.PromptID,
		ToolName: spec.Name, ToolInput: args, ToolUseID: call.ID,
	}, spawnEnv{env.Env, env.Sandbox, newHookParent(p.Parent, env.SessionID, env.PromptID)})
	if ctx.Err() != nil {
		return policyCancelled(), false
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
		return askUser(ctx, p, env, call, spec, args)
	default:
		reason := out.Reason
		if strings.TrimSpace(reason) == "" {
			reason = hookDeniedDefaultText
		}
		return failed(errTypeExecutionDenied, "%s", reason), false
	}
}

// askUser puts a call to the user, after its PermissionRequest hooks: a
// hook's allow answers for the user, a deny or block refuses the call, and
// a hook that fails refuses it too (it fails closed).
func askUser(ctx context.Context, p *callPolicy, env *toolEnv, call toolCall, spec *toolSpec, args map[string]any) (toolResult, bool) {
	if hooks := p.Settings.Hooks.PermissionRequest; len(hooks) > 0 {
		ans := runEventHooks(ctx, hooks, hookFiring{
			Event: hookEventPermissionRequest, Target: spec.Name,
			Common: hookCommon{SessionID: env.SessionID, Cwd: env.Cwd, PermissionMode: p.Mode, PromptID: env.PromptID},
			Fields: map[string]any{"tool_name": spec.Name, "tool_input": args, "permission_suggestions": []any{}},
		}, spawnEnv{env.Env, env.Sandbox, newHookParent(p.Parent, env.SessionID, env.PromptID)})
		for _, f := range ans.Failures {
			if p.Log != nil {
				p.Log("PermissionRequest hook failed open", "tool", spec.Name, "toolCallId", call.ID, "failure", f)
			}
		}
		switch {
		case ctx.Err() != nil:
			return policyCancelled(), false
		case ans.Blocked || ans.Stop:
			return failed(errTypeExecutionDenied, "%s", ans.Reason), false
		case ans.Behavior == "allow":
			return toolResult{}, true
		case ans.Behavior == "deny":
			msg := ans.Message
			if msg == "" {
				msg = hookPermissionDeniedText(spec.Name)
			}
			return failed(errTypeExecutionDenied, "%s", msg), false
		}
	}
	if p.Ask == nil {
		return failed(errTypeExecutionDenied, "%s", canceledByUserText(spec.Name)), false
	}
	switch p.Ask(ctx, call, spec, args) {
	case permissionAllowed:
		if ctx.Err() != nil {
			return policyCancelled(), false
		}
		return toolResult{}, true
	case permissionCancelled:
		return policyCancelled(), false
	case permissionDeclined:
		return failed(errTypeExecutionDenied, "%s", declinedPermissionText(spec.Name)), false
	default:
		return failed(errTypeExecutionDenied, "%s", canceledByUserText(spec.Name)), false
	}
}
