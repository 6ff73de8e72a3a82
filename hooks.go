// hooks.go owns the PreToolUse hooks: matchers, running each hook (a
// command in its own process group, or an HTTP request: hooks_http.go), and
// reading its answer (DESIGN.md §10). The other events' hooks are
// hooks_events.go's.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// hookEventPreToolUse is the hook_event_name and hookEventName of this layer.
const hookEventPreToolUse = "PreToolUse"

// Hook limits (DESIGN.md §6, §10): a timeout that kills the group, and
// bounded output.
const (
	hookDefaultTimeoutMS = 60000
	hookMaxTimeoutMS     = 600000
	maxHookOutputBytes   = 64 << 10 // each of stdout and stderr
	maxHookReasonBytes   = 2000     // a reason shown to the user and the model
	maxHookCommandShown  = 80       // bytes of a hook command quoted in a message
)

// hookMatcher is one entry of hooks.PreToolUse.
type hookMatcher struct {
	Matcher string        `json:"matcher"`
	Hooks   []hookCommand `json:"hooks"`
	re      *regexp.Regexp
	all     bool
}

// hookCommand is one hook: a command (Command, Env) or an HTTP request
// (URL, Headers, AllowedEnvVars: hooks_http.go). Timeout is in
// milliseconds, 0 for the default: the settings file gives it in seconds as
// Qwen Code does, and validate converts it (hookTimeoutMS). Name and
// Description label the hook in logs; Env is added to a command's
// environment. http is the HTTP policy of the settings it was loaded from.
type hookCommand struct {
	Type           string            `json:"type"`
	Command        string            `json:"command"`
	URL            string            `json:"url"`
	Headers        map[string]string `json:"headers"`
	AllowedEnvVars []string          `json:"allowedEnvVars"`
	Timeout        int               `json:"timeout"`
	FailOpen       bool              `json:"failOpen"`
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	Env            map[string]string `json:"env"`
	http           *hookHTTPPolicy
	at             hookAt // its place in its event's list (hooks_parent.go)
}

// Hook types (Qwen Code's): acpguard runs command and http hooks and
// refuses prompt hooks at load.
const (
	hookTypeCommand = "command"
	hookTypeHTTP    = "http"
	hookTypePrompt  = "prompt"
)

// envList is the hook's env as NAME=value entries.
func (h hookCommand) envList() []string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(h.Env)) {
		kv = append(kv, k+"="+h.Env[k])
	}
	return kv
}

// label names the hook in messages: its name when it has one, else its
// command.
func (h hookCommand) label() string {
	switch {
	case h.Name != "":
		return fmt.Sprintf("%q", h.Name)
	case h.Type == hookTypeHTTP:
		return quoteHookCommand(h.URL)
	}
	return quoteHookCommand(h.Command)
}

// projectDirEnv are the variables naming the project directory in every
// command hook's environment, as Qwen Code sets them.
var projectDirEnv = []string{"QWEN_PROJECT_DIR", "CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR"}

// hookTimeoutMS reads a hook's timeout as Qwen Code does: seconds, except
// that a value of 1000 or more is the older milliseconds; 0 is the default.
func hookTimeoutMS(v int) (int, error) {
	switch {
	case v == 0:
		return 0, nil
	case v >= 1 && v <= hookMaxTimeoutMS/1000:
		return v * 1000, nil
	case v >= 1000 && v <= hookMaxTimeoutMS:
		return v, nil
	}
	return 0, fmt.Errorf("timeout %d is not between 1 and %d seconds (a value of 1000 or more is read as milliseconds, up to %d)", v, hookMaxTimeoutMS/1000, hookMaxTimeoutMS)
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
	case toolShell:
		return []string{"Bash", "Shell"}
	case toolReadFile:
		return []string{"Read"}
	case toolWriteFile:
		return []string{"Write"}
	case toolEdit:
		return []string{"Edit"}
	case toolGrepSearch:
		return []string{"Grep"}
	case toolGlob:
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
	TranscriptPath string         `json:"transcript_path"` // empty: acpguard keeps no transcript file
	Cwd            string         `json:"cwd"`
	HookEventName  string         `json:"hook_event_name"`
	Timestamp      string         `json:"timestamp"`
	PermissionMode string         `json:"permission_mode"`
	PromptID       string         `json:"prompt_id,omitempty"`
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
// matches input.ToolName, and combines their answers: a deny wins over an
// ask, an ask over an allow. The first deny ends the layer; later hooks do not run.
// env gives each hook its complete environment (procEnv.childEnv()) and its
// sandbox. When ctx ends, the running hook's process group is killed and the
// outcome is a deny; the caller reports the cancellation.
func runPreToolUseHooks(ctx context.Context, hooks []hookMatcher, input hookInput, env spawnEnv) hookOutcome {
	input.HookEventName = hookEventPreToolUse
	input.Timestamp = hookTimestamp()
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
		for j, h := range m.Hooks {
			h.at = hookAt{Matcher: i, Hook: j}
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
				msg := fmt.Sprintf("PreToolUse hook %s %s", h.label(), failure)
				// A hook the sandbox could not confine did not run at all:
				// failOpen covers a hook's own failures, not that.
				if !h.FailOpen || hookNeverRan(failure) {
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
				return hookOutcome{Decision: hookDeny, Reason: fmt.Sprintf("PreToolUse hook %s denied the call: %s", h.label(), reason), Ignored: out.Ignored}
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

// The failures of a serve child's http hook that serve refused or that
// never reached serve: like hookNotConfined, the hook did not run.
const (
	hookRefusedByServe = "was refused by serve"
	hookNotSentToServe = "could not be sent through serve"
)

// hookNeverRan reports whether failure says the hook did not run at all,
// which failOpen never covers: it covers a hook's own failures.
func hookNeverRan(failure string) bool {
	for _, p := range []string{hookNotConfined, hookRefusedByServe, hookNotSentToServe} {
		if strings.HasPrefix(failure, p) {
			return true
		}
	}
	return false
}

// runHookCommand runs one PreToolUse hook and reads its answer. failure,
// when not empty, says how the hook failed to answer (it crashed, timed
// out or printed something that is not its JSON answer); exit 2 is an
// answer: a deny with stderr as the reason.
func runHookCommand(ctx context.Context, h hookCommand, stdin []byte, dir string, env spawnEnv) (d hookDecision, reason, failure string) {
	rep, failure := execHook(ctx, h, hookEventPreToolUse, stdin, dir, env)
	switch {
	case failure != "":
		return "", "", failure
	case rep.Exit == 2:
		return hookDeny, hookReasonText(rep.Stderr), ""
	case rep.Exit != 0:
		return "", "", fmt.Sprintf("failed with exit status %d", rep.Exit)
	case rep.HTTP && !rep.JSON:
		return hookNone, "", "" // a text answer is a system message, no decision
	}
	d, reason, err := parseHookOutput(rep.Stdout)
	if err != nil {
		return "", "", fmt.Sprintf("printed an invalid answer: %v", err)
	}
	return d, reason, ""
}

// hookReply is what one hook answered: a command's stdout, stderr and exit
// status, or an HTTP hook's 2xx body (Exit 0; JSON when its Content-Type
// says so).
type hookReply struct {
	Stdout []byte
	Stderr string
	Exit   int
	HTTP   bool
	JSON   bool
}

// execHook runs one hook of event with stdin as its input: a command as
// `bash -c command` in its own process group and in the sandbox, an HTTP
// hook as a POST (hooks_http.go), which serve makes for its child
// (env.Parent, hooks_parent.go). failure, when not empty, says how it
// failed to answer.
func execHook(ctx context.Context, h hookCommand, event string, stdin []byte, dir string, env spawnEnv) (hookReply, string) {
	timeout := time.Duration(h.Timeout) * time.Millisecond
	if ctx.Err() != nil {
		return hookReply{}, "was cancelled"
	}
	switch {
	case h.Type == hookTypeHTTP && strings.TrimSpace(h.URL) != "":
		if h.Timeout == 0 {
			timeout = hookHTTPDefaultTimeoutMS * time.Millisecond
		}
		if env.Parent != nil {
			return env.Parent.post(ctx, h, event, stdin, timeout)
		}
		return runHTTPHook(ctx, h, stdin, timeout, env.Env)
	case h.Type != hookTypeCommand || strings.TrimSpace(h.Command) == "":
		return hookReply{}, fmt.Sprintf("is not a command or http hook (type %q)", h.Type)
	}
	if h.Timeout == 0 {
		timeout = hookDefaultTimeoutMS * time.Millisecond
	}
	cmd := exec.Command("bash", "-c", h.Command)
	add := h.envList()
	for _, k := range projectDirEnv {
		add = append(add, k+"="+dir)
	}
	cmd.Env = env.Env.childEnv(env.Sandbox.env(add...)...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.WaitDelay = procDrainGrace
	stdout := &limitedBuffer{max: maxHookOutputBytes, full: make(chan struct{})}
	stderr := &limitedBuffer{max: maxHookOutputBytes}
	// A full stdout ends the hook: no valid answer can follow.
	timedOut, err := runGroup(ctx, cmd, env.Sandbox, stdout, stderr, timeout, stdout.full)
	if err != nil {
		if se := (*sandboxStartError)(nil); errors.As(err, &se) {
			return hookReply{}, fmt.Sprintf("%s: %v", hookNotConfined, err)
		}
		return hookReply{}, fmt.Sprintf("could not start: %v", err)
	}
	state := cmd.ProcessState
	switch {
	case ctx.Err() != nil:
		return hookReply{}, "was cancelled"
	case timedOut:
		return hookReply{}, fmt.Sprintf("timed out after %d ms", timeout.Milliseconds())
	case stdout.dropped > 0:
		return hookReply{}, fmt.Sprintf("printed more than %d bytes", maxHookOutputBytes)
	case !state.Exited():
		return hookReply{}, fmt.Sprintf("crashed: %v", state)
	}
	return hookReply{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.String(), Exit: state.ExitCode()}, ""
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
