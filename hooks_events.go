// hooks_events.go owns the hooks of every event but PreToolUse's (hooks.go):
// their names, which acpguard never fires and why, the input JSON each
// reads (Qwen Code 0.24.4's), and reading their answers. The agent and
// serve fire them; this file only runs them (DESIGN.md §10).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// Qwen Code's hook events (hookEventPreToolUse is hooks.go's).
const (
	hookEventPostToolUse         = "PostToolUse"
	hookEventPostToolUseFailure  = "PostToolUseFailure"
	hookEventPostToolBatch       = "PostToolBatch"
	hookEventUserPromptSubmit    = "UserPromptSubmit"
	hookEventStop                = "Stop"
	hookEventStopFailure         = "StopFailure"
	hookEventSessionStart        = "SessionStart"
	hookEventSessionEnd          = "SessionEnd"
	hookEventSessionDelete       = "SessionDelete"
	hookEventPermissionRequest   = "PermissionRequest"
	hookEventPermissionDenied    = "PermissionDenied"
	hookEventNotification        = "Notification"
	hookEventInstructionsLoaded  = "InstructionsLoaded"
	hookEventUserPromptExpansion = "UserPromptExpansion"
)

// hookEventsNeverFired are the events of features acpguard does not have:
// their hooks load, and the start names them once (validateHooks).
var hookEventsNeverFired = map[string]string{
	hookEventUserPromptExpansion: "acpguard's slash commands never expand into a prompt for the model",
	"MessageDisplay":             "acpguard has no message display to stream a reply into",
	"PreCompact":                 "acpguard never compacts a conversation",
	"PostCompact":                "acpguard never compacts a conversation",
	"SubagentStart":              "acpguard has no subagents",
	"SubagentStop":               "acpguard has no subagents",
	"TodoCreated":                "acpguard has no todo list",
	"TodoCompleted":              "acpguard has no todo list",
}

// hookFailsClosed reports whether a failure of an event's hook (a crash, a
// timeout, an unreadable answer, a non-2xx status) stops what it guards:
// the events whose answer can stop something do, deliberately unlike Qwen
// Code; every other event fails open, logged, as Qwen Code's do.
func hookFailsClosed(event string) bool {
	switch event {
	case hookEventPreToolUse, hookEventPermissionRequest, hookEventUserPromptSubmit:
		return true
	}
	return false
}

// hookEventMatches reports whether an event's hooks have a matcher: the
// events of Qwen Code that fire for no tool, source or reason ignore it.
func hookEventMatches(event string) bool {
	switch event {
	case hookEventPostToolBatch, hookEventUserPromptSubmit, hookEventStop, hookEventSessionDelete:
		return false
	}
	return true
}

// hookPlainTextContext are the events where a command hook's plain stdout
// (not a JSON object) is context for the model; elsewhere it is a system
// message.
func hookPlainTextContext(event string) bool {
	return event == hookEventSessionStart || event == hookEventUserPromptSubmit
}

// Hook limits of the other events: Qwen Code's default Stop blocking cap,
// and the bound of one additionalContext given to the model.
const (
	hookStopBlockingCapDefault = 8
	maxHookContextBytes        = 10000
)

// hookCommon are the input fields every event's hooks read.
type hookCommon struct {
	SessionID      string
	Cwd            string
	PermissionMode string
	PromptID       string
}

// hookFiring is one firing of an event: what its matchers match (Target:
// a tool name, a source, a reason, a file path; "" for events without a
// matcher) and its own input fields.
type hookFiring struct {
	Event  string
	Target string
	Common hookCommon
	Fields map[string]any
}

// hookAnswer is what the hooks of one firing said together. Blocked: one
// blocked (a block or deny decision, exit 2) or, for an event that fails
// closed, failed; Stop: one answered continue false; Reason is why. Context are their
// additionalContext values for the model, escaped as Qwen Code escapes them;
// Messages their system messages; Behavior and Message a PermissionRequest
// decision. Failures are the failures an event that fails open let pass,
// for the log.
type hookAnswer struct {
	Blocked   bool
	Stop      bool
	Reason    string
	Context   []string
	Messages  []string
	Behavior  string
	Message   string
	Interrupt bool
	Failures  []string
}

// contextText is the answer's context for the model, "" without any.
func (a hookAnswer) contextText() string { return strings.Join(a.Context, "\n") }

// hooksFor returns the hooks of event in h.
func (h *hooksSettings) hooksFor(event string) []hookMatcher {
	v := reflect.ValueOf(h).Elem()
	for i, f := range jsonFields(v.Type()) {
		if f.name == event {
			return v.Field(i).Interface().([]hookMatcher)
		}
	}
	return nil
}

// hookInputJSON is the input of one firing: Qwen Code's common fields
// (transcript_path is empty: acpguard keeps no transcript file) and the
// event's own.
func hookInputJSON(f hookFiring) ([]byte, error) {
	in := map[string]any{
		"session_id":      f.Common.SessionID,
		"transcript_path": "",
		"cwd":             f.Common.Cwd,
		"hook_event_name": f.Event,
		"timestamp":       hookTimestamp(),
		"permission_mode": hookPermissionMode(f.Common.PermissionMode),
	}
	if f.Common.PromptID != "" {
		in["prompt_id"] = f.Common.PromptID
	}
	for k, v := range f.Fields {
		in[k] = v
	}
	return json.Marshal(in)
}

// hookTimestamp is the timestamp of a hook's input, as JavaScript's
// toISOString writes it.
func hookTimestamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

// runEventHooks runs, one after the other, every hook of the firing's event
// whose matcher matches its target, and combines their answers. A block
// ends the firing: later hooks do not run. For an event that fails closed
// a failure is a block; for the others it is listed in Failures.
func runEventHooks(ctx context.Context, hooks []hookMatcher, f hookFiring, env spawnEnv) hookAnswer {
	var out hookAnswer
	var stdin []byte
	closed := hookFailsClosed(f.Event)
	for i := range hooks {
		m := &hooks[i]
		match, err := m.matchesTool(f.Target)
		if !hookEventMatches(f.Event) {
			match, err = true, nil // its matcher is ignored, as in Qwen Code
		}
		if err != nil {
			if closed {
				return hookAnswer{Blocked: true, Reason: fmt.Sprintf("%s hook %s", f.Event, err)}
			}
			out.Failures = append(out.Failures, fmt.Sprintf("%s hook %s", f.Event, err))
			continue
		}
		if !match {
			continue
		}
		for j, h := range m.Hooks {
			h.at = hookAt{Matcher: i, Hook: j}
			if stdin == nil {
				if stdin, err = hookInputJSON(f); err != nil {
					return hookAnswer{Blocked: closed, Reason: fmt.Sprintf("%s hook input: %v", f.Event, err)}
				}
			}
			a, failure := runOneEventHook(ctx, h, f.Event, stdin, f.Common.Cwd, env)
			if failure != "" {
				msg := fmt.Sprintf("%s hook %s %s", f.Event, h.label(), failure)
				if closed {
					out.Blocked, out.Reason = true, msg+" (stopped: the hook fails closed)"
					return out
				}
				out.Failures = append(out.Failures, msg)
				continue
			}
			out.Context = append(out.Context, a.Context...)
			out.Messages = append(out.Messages, a.Messages...)
			if a.Behavior != "" && out.Behavior != "deny" {
				out.Behavior, out.Message, out.Interrupt = a.Behavior, a.Message, a.Interrupt
			}
			if a.Blocked || a.Stop {
				out.Blocked, out.Stop, out.Reason = a.Blocked, a.Stop, a.Reason
				return out
			}
		}
	}
	return out
}

// runOneEventHook runs one hook and reads its answer as Qwen Code does:
// exit 0 with a JSON object is its answer; other text is context on the
// events of hookPlainTextContext, a system message elsewhere; exit 2 blocks
// with stderr as the reason; any other exit status is a failure.
func runOneEventHook(ctx context.Context, h hookCommand, event string, stdin []byte, dir string, env spawnEnv) (hookAnswer, string) {
	rep, failure := execHook(ctx, h, event, stdin, dir, env)
	switch {
	case failure != "":
		return hookAnswer{}, failure
	case rep.Exit == 2:
		return hookAnswer{Blocked: true, Reason: hookBlockReason(rep.Stderr)}, ""
	case rep.Exit != 0:
		return hookAnswer{}, fmt.Sprintf("failed with exit status %d", rep.Exit)
	}
	text := bytes.TrimSpace(rep.Stdout)
	switch {
	case len(text) == 0:
		return hookAnswer{}, ""
	case rep.HTTP && !rep.JSON, !rep.HTTP && text[0] != '{':
		s := hookReasonText(string(text))
		if !rep.HTTP && hookPlainTextContext(event) {
			return hookAnswer{Context: []string{escapeHookContext(s)}}, ""
		}
		return hookAnswer{Messages: []string{s}}, ""
	}
	a, err := parseEventHookOutput(event, text)
	if err != nil {
		return hookAnswer{}, fmt.Sprintf("printed an invalid answer: %v", err)
	}
	return a, ""
}

// hookEventSpecific is an answer's hookSpecificOutput for the events of
// this file: the context every event may give, and a PermissionRequest's
// decision. Any other key asks for something acpguard does not do (an
// updatedInput, say), and is refused.
type hookEventSpecific struct {
	HookEventName     string                 `json:"hookEventName"`
	AdditionalContext *string                `json:"additionalContext"`
	Decision          *hookPermissionVerdict `json:"decision"`
}

// hookPermissionVerdict is a PermissionRequest hook's decision.
type hookPermissionVerdict struct {
	Behavior  string `json:"behavior"`
	Message   string `json:"message"`
	Interrupt bool   `json:"interrupt"`
}

// parseEventHookOutput reads a hook's JSON answer (Qwen Code's HookOutput).
// A block: decision "block" or "deny", or continue false; its reason is
// stopReason, else reason.
func parseEventHookOutput(event string, out []byte) (hookAnswer, error) {
	var o hookOutputJSON
	if err := decodeStrict(out, &o); err != nil {
		return hookAnswer{}, err
	}
	var a hookAnswer
	switch o.Decision {
	case "", "allow", "approve", "ask":
	case "block", "deny":
		a.Blocked = true
	default:
		return hookAnswer{}, fmt.Errorf("unknown decision %q", o.Decision)
	}
	a.Stop = o.Continue != nil && !*o.Continue
	if a.Blocked || a.Stop {
		a.Reason = o.StopReason
		if a.Reason == "" {
			a.Reason = o.Reason
		}
		a.Reason = hookBlockReason(a.Reason)
	}
	if o.SystemMessage != "" && !o.SuppressOutput {
		a.Messages = append(a.Messages, hookReasonText(o.SystemMessage))
	}
	if o.HookSpecificOutput != nil && string(o.HookSpecificOutput) != "null" {
		var s hookEventSpecific
		if err := decodeStrict(o.HookSpecificOutput, &s); err != nil {
			return hookAnswer{}, fmt.Errorf("hookSpecificOutput: %w", err)
		}
		if s.HookEventName != "" && s.HookEventName != event {
			return hookAnswer{}, fmt.Errorf("hookEventName %q is not %q", s.HookEventName, event)
		}
		if s.AdditionalContext != nil && *s.AdditionalContext != "" {
			a.Context = append(a.Context, escapeHookContext(*s.AdditionalContext))
		}
		if d := s.Decision; d != nil {
			if event != hookEventPermissionRequest {
				return hookAnswer{}, fmt.Errorf("hookSpecificOutput.decision is a %s answer", hookEventPermissionRequest)
			}
			if d.Behavior != "allow" && d.Behavior != "deny" {
				return hookAnswer{}, fmt.Errorf("unknown decision.behavior %q", d.Behavior)
			}
			a.Behavior, a.Message, a.Interrupt = d.Behavior, hookReasonText(d.Message), d.Interrupt
		}
	}
	return a, nil
}

// hookBlockReason is a block's reason: Qwen Code's text when none is given.
func hookBlockReason(s string) string {
	if s = hookReasonText(s); s == "" {
		return "No reason provided"
	}
	return s
}

// escapeHookContext escapes a hook's context for the model as Qwen Code
// does (< and > as entities, so it cannot close or forge a tag around it),
// bounded at maxHookContextBytes.
func escapeHookContext(s string) string {
	s = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
	if len(s) > maxHookContextBytes {
		s = s[:maxHookContextBytes]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
