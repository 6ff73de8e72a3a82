// agent_hooks.go owns where the agent fires the hooks of hooks_events.go:
// a session's start and end, its instruction files, a prompt's submit and
// stop, each call's result and each batch, permission prompts and denials
// (DESIGN.md §10). PreToolUse and PermissionRequest fire in the call's
// layers (perms.go).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Hook texts and bounds of the agent, as Qwen Code 0.24.4 words and sets
// them: the tag around UserPromptSubmit context, a blocked prompt's notice,
// the Stop cap's notice, the permission prompt's notification, and how long
// a batch's PostToolBatch hooks may take before the batch goes on unchanged.
const (
	hookPromptContextOpen  = "<qwen:user-prompt-submit-context>"
	hookPromptContextClose = "</qwen:user-prompt-submit-context>"
	hookPromptBlockedText  = "\u2717 **UserPromptSubmit blocked**: "
	hookStopCapText        = "Stop hook blocked continuation %d consecutive %s; overriding and ending the turn."
	hookPermissionTitle    = "Permission needed"
	hookPermissionPrompt   = "permission_prompt"
	postToolBatchTimeout   = 15 * time.Second
	sessionEndTimeout      = 30 * time.Second
)

// sessionEndReason and sessionStartSource are the matcher targets acpguard
// fires with: a session/close ends a session for a reason Qwen Code has no
// name for; a session starts new or is loaded.
const (
	sessionEndReason    = "other"
	sessionStartNew     = "startup"
	sessionStartResumed = "resume"
)

// metaSubmittedPrompt in session/prompt _meta is the text the user
// submitted, as a Qwen Code client declares it; UserPromptSubmit hooks read
// it as submitted_prompt.
const metaSubmittedPrompt = "qwen.submittedPrompt"

// fireHooks runs the hooks of event in session s, in its sandbox, and logs
// what failed open and every system message. mode "" is the session's.
func (a *agent) fireHooks(ctx context.Context, s *session, event, target, promptID, mode string, fields map[string]any) hookAnswer {
	hooks := s.settings.Hooks.hooksFor(event)
	if len(hooks) == 0 {
		return hookAnswer{}
	}
	if mode == "" {
		s.mu.Lock()
		mode = s.mode
		s.mu.Unlock()
	}
	ans := runEventHooks(ctx, hooks, hookFiring{
		Event: event, Target: target, Fields: fields,
		Common: hookCommon{SessionID: s.id, Cwd: s.cwd, PermissionMode: mode, PromptID: promptID},
	}, spawnEnv{a.env, s.sandbox, newHookParent(a.parentConn(), s.id, promptID)})
	for _, f := range ans.Failures {
		a.log.Warn("hook failed open", "event", event, "session", s.id, "failure", f)
	}
	for _, m := range ans.Messages {
		a.log.Info("hook system message", "event", event, "session", s.id, "message", m)
	}
	return ans
}

// parentConn is serve's channel in a managed child, which POSTs the
// child's http hooks (hooks_parent.go); nil elsewhere.
func (a *agent) parentConn() *rpcConn {
	if !a.managed {
		return nil
	}
	return a.conn
}

// agentText sends text to the client as agent message text.
func (a *agent) agentText(s *session, text string) {
	a.update(s.id, map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]string{"type": "text", "text": text},
	})
}

// sessionStarted fires SessionStart (source startup or resume) and
// InstructionsLoaded for each instruction file the session's prompt read
// (its path and memory type).
// SessionStart's context joins the system prompt, the session's first
// context for the model.
func (a *agent) sessionStarted(ctx context.Context, s *session, source string, instructions [][2]string) {
	for _, f := range instructions {
		a.fireHooks(ctx, s, hookEventInstructionsLoaded, f[0], "", "", map[string]any{
			"file_path": f[0], "memory_type": f[1], "load_reason": "session_start",
		})
	}
	model := ""
	if m, ok := s.model.(*openAIModel); ok {
		model = m.name
	}
	ans := a.fireHooks(ctx, s, hookEventSessionStart, source, "", "", map[string]any{"source": source, "model": model})
	if c := ans.contextText(); c != "" {
		s.mu.Lock()
		if s.system != "" {
			s.system += "\n" + c + "\n"
		}
		s.mu.Unlock()
	}
}

// sessionEnded fires SessionEnd as a session closes or the agent ends,
// and SessionDelete when serve's host deleted it; their hooks get
// sessionEndTimeout in all, as Qwen Code gives them.
func (a *agent) sessionEnded(s *session, deleted bool) {
	ctx, cancel := context.WithTimeout(context.Background(), sessionEndTimeout)
	defer cancel()
	a.fireHooks(ctx, s, hookEventSessionEnd, sessionEndReason, "", "", map[string]any{"reason": sessionEndReason})
	if deleted {
		a.fireHooks(ctx, s, hookEventSessionDelete, "", "", "", map[string]any{"deleted_session_id": s.id})
	}
}

// promptSubmitted fires UserPromptSubmit for a prompt's text. A block, or
// a hook that fails (it fails closed), stops the prompt: the client is told
// why and ok is false. Otherwise text is what the model receives: with the
// hooks' context after it, in Qwen Code's tag.
func (a *agent) promptSubmitted(ctx context.Context, s *session, promptID, text, submitted string) (string, bool) {
	fields := map[string]any{"prompt": text}
	if strings.TrimSpace(submitted) != "" {
		fields["submitted_prompt"] = submitted
	}
	ans := a.fireHooks(ctx, s, hookEventUserPromptSubmit, "", promptID, "", fields)
	if ctx.Err() != nil {
		return text, false
	}
	if ans.Blocked || ans.Stop {
		a.agentText(s, hookPromptBlockedText+ans.Reason)
		return text, false
	}
	if c := ans.contextText(); c != "" {
		text += "\n\n" + hookPromptContextOpen + "\n" + c + "\n" + hookPromptContextClose
	}
	return text, true
}

// stopHookCap is the Stop hooks' blocking cap of s: stopHookBlockingCap,
// else Qwen Code's default.
func stopHookCap(s *session) int {
	if c := s.settings.StopHookBlockingCap; c > 0 {
		return c
	}
	return hookStopBlockingCapDefault
}

// turnStopping fires Stop as a turn is about to end with the model's last
// text; active says the turn goes on because a Stop hook blocked before.
// It returns the reason to continue with, "" to stop; a system message is
// shown to the client. blocks counts the blocks in a row: past the cap the
// turn ends with Qwen Code's notice.
func (a *agent) turnStopping(ctx context.Context, s *session, promptID, last string, blocks *int) string {
	ans := a.fireHooks(ctx, s, hookEventStop, "", promptID, "", map[string]any{
		"stop_hook_active": *blocks > 0, "last_assistant_message": last,
	})
	for _, m := range ans.Messages {
		a.agentText(s, m)
	}
	if !ans.Blocked && !ans.Stop || ctx.Err() != nil {
		*blocks = 0
		return ""
	}
	*blocks++
	if cap := stopHookCap(s); *blocks >= cap {
		times := "times"
		if cap == 1 {
			times = "time"
		}
		a.agentText(s, fmt.Sprintf(hookStopCapText, cap, times))
		return ""
	}
	return ans.Reason
}

// turnFailed fires StopFailure for a model error that ends a turn: its
// output is not read, as in Qwen Code.
func (a *agent) turnFailed(s *session, promptID string, err error) {
	kind := stopFailureKind(err.Error())
	a.fireHooks(context.Background(), s, hookEventStopFailure, kind, promptID, "", map[string]any{
		"error": kind, "error_details": err.Error(),
	})
}

// stopFailureKind classifies a model error as Qwen Code does, from its
// text, in Qwen Code's order.
func stopFailureKind(msg string) string {
	m := strings.ToLower(msg)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(m, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("status 429", "rate limit"):
		return "rate_limit"
	case has("status 401", "unauthorized"):
		return "authentication_failed"
	case has("status 402", "status 403", "billing", "quota"):
		return "billing_error"
	case has("status 400", "invalid"):
		return "invalid_request"
	case has("status 5"):
		return "server_error"
	case has("max_tokens", "token limit"):
		return "max_output_tokens"
	}
	return "unknown"
}

// input is a call's tool_input for its hooks: the normalized arguments
// its PreToolUse hooks read, else the object as proposed.
func (o *callObserver) input(call toolCall) any {
	if o.args != nil {
		return o.args
	}
	return rawInputOf(call.Args)
}

// callFinished fires a call's hooks as it ends: PostToolUse after it
// completed, whose context is appended to what the model reads and whose
// stop (continue false) turns the result into an error; PostToolUseFailure
// after it failed running, whose context is appended too; PermissionDenied
// after a layer or the guard refused it. It returns the result the model
// reads.
func (a *agent) callFinished(ctx context.Context, s *session, promptID string, call toolCall, tool string, input any, res toolResult, took time.Duration) toolResult {
	base := map[string]any{"tool_name": tool, "tool_input": input, "tool_use_id": call.ID, "tool_call_id": call.ID}
	switch {
	case res.Status == statusCompleted:
		f := withFields(base, map[string]any{"tool_response": map[string]any{"llmContent": res.Output, "returnDisplay": res.Output}, "duration_ms": took.Milliseconds()})
		ans := a.fireHooks(ctx, s, hookEventPostToolUse, tool, promptID, "", f)
		if ans.Stop {
			return failed(errTypeExecutionDenied, "%s", ans.Reason)
		}
		if c := ans.contextText(); c != "" {
			res.Output += "\n\n" + c
		}
		if ans.Blocked {
			// A block (exit 2, decision block) is feedback, not a stop.
			res.Output += "\n\n" + escapeHookContext(ans.Reason)
		}
	case res.ErrorType == errTypeExecutionDenied:
		a.fireHooks(ctx, s, hookEventPermissionDenied, tool, promptID, "", withFields(base, map[string]any{"reason": "policy_denied"}))
	case res.Status == statusFailed || res.Status == statusCancelled:
		f := withFields(base, map[string]any{"error": res.Output, "is_interrupt": res.Status == statusCancelled, "duration_ms": took.Milliseconds()})
		if c := a.fireHooks(ctx, s, hookEventPostToolUseFailure, tool, promptID, "", f).contextText(); c != "" {
			res.Output += "\n\n" + c
		}
	}
	return res
}

// batchFinished fires PostToolBatch once every call of a turn has a result:
// its context is appended to the last result, and a block or stop turns
// that result into an error carrying the reason, as Qwen Code does. Its
// hooks get postToolBatchTimeout in all; past it, the batch goes on
// unchanged.
func (a *agent) batchFinished(ctx context.Context, s *session, promptID string, inputs []any, results []message) {
	if len(results) == 0 || len(s.settings.Hooks.PostToolBatch) == 0 {
		return
	}
	list := make([]map[string]any, len(results))
	for i, r := range results {
		status := "success"
		switch {
		case r.Result.Status == statusCancelled:
			status = "cancelled"
		case r.Result.Status != statusCompleted:
			status = "error"
		}
		list[i] = map[string]any{"tool_name": r.Tool, "tool_input": inputs[i], "tool_use_id": r.CallID, "tool_call_id": r.CallID,
			"status": status, "tool_response": map[string]any{"result_display": r.Result.Output, "error_type": r.Result.ErrorType, "execution_status": r.Result.Status}}
	}
	bctx, cancel := context.WithTimeout(ctx, postToolBatchTimeout)
	defer cancel()
	ans := a.fireHooks(bctx, s, hookEventPostToolBatch, "", promptID, "", map[string]any{"tool_calls": list})
	if bctx.Err() != nil {
		return
	}
	last := &results[len(results)-1].Result
	if ans.Blocked || ans.Stop {
		*last = failed(errTypeExecutionDenied, "%s", ans.Reason)
	}
	if c := ans.contextText(); c != "" {
		last.Output += "\n\n" + c
	}
}

// permissionPrompted fires Notification as the client is asked for a
// permission, as Qwen Code's permission_prompt.
func (a *agent) permissionPrompted(ctx context.Context, s *session, tool string) {
	a.fireHooks(ctx, s, hookEventNotification, hookPermissionPrompt, "", "", map[string]any{
		"message": "acpguard needs your permission to use " + tool, "notification_type": hookPermissionPrompt, "title": hookPermissionTitle,
	})
}

// withFields is base with more fields, base unchanged.
func withFields(base, more map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(more))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// deletedMeta reports whether a session/close's _meta says serve's host
// deleted the session (metaSessionDeleted).
func deletedMeta(meta json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return false
	}
	return string(m[metaSessionDeleted]) == "true"
}

// warnSettingsOnce is warnSettings with each warning logged once by this
// agent: the user's files are read again for each workspace, and a warning
// of theirs (hooks that never fire, say) is news only the first time.
func (a *agent) warnSettingsOnce(log *slog.Logger, st *settings) {
	cp := *st
	cp.Warnings = nil
	a.mu.Lock()
	if a.warned == nil {
		a.warned = map[string]bool{}
	}
	for _, w := range st.Warnings {
		if !a.warned[w] {
			a.warned[w] = true
			cp.Warnings = append(cp.Warnings, w)
		}
	}
	a.mu.Unlock()
	warnSettings(log, &cp)
}
