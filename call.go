// call.go owns the shared types of one tool call: the call, its result and
// statuses, the session it runs in, its observer and the guard it asks. The
// boundary (guard.go), the rules and the executors all build on them.
package main

import (
	"context"
	"encoding/json"
)

// GuardRequest is what a guard decides over: the runtime-owned identity,
// the runtime-accepted call id, the canonical tool name and a deep copy of the
// final arguments.
type GuardRequest struct {
	SessionID  string
	PromptID   string
	ToolCallID string
	ToolName   string
	Arguments  map[string]any
}

// Guard decides whether one call may execute now. An error is a guard
// failure: the call is denied with guardFailedReason.
type Guard func(ctx context.Context, req GuardRequest) (Decision, error)

// Tool error types reported in failed tool results.
const (
	errTypeExecutionDenied   = "execution_denied"
	errTypeToolNotRegistered = "tool_not_registered"
	errTypeInvalidParams     = "invalid_tool_params"
	errTypeExecutionFailed   = "execution_failed"
)

// Tool call statuses of a finished call.
const (
	statusCompleted = "completed"
	statusFailed    = "failed"
	statusCancelled = "cancelled"
)

// toolCall is one call as the model proposed it.
type toolCall struct {
	ID   string
	Name string
	Args json.RawMessage // as proposed; must decode to a JSON object
}

// toolResult is how one call ended.
type toolResult struct {
	Status    string // statusCompleted, statusFailed or statusCancelled
	Output    string // text for the model and the client
	RawOutput any    // structured result for rawOutput
	ErrorType string // "" unless failed

	// Diff is the change an edit or write made, within its bound: the
	// client is shown it, the model is not (tools_fs.go).
	Diff *fileDiff `json:"-"`
}

// toolObserver hears a call's lifecycle. runTool calls toolPending exactly
// once for every call (with the normalized arguments, or the raw ones when
// they could not be normalized), and toolRunning just before the executor.
type toolObserver interface {
	toolPending(call toolCall, title, kind string, args map[string]any)
	toolRunning(call toolCall)
}

// callFilter is a session's layers before the guard (DESIGN.md §10):
// tools.disabled, the permission rules under the approval mode, the user's
// answer to an ask, the PreToolUse hooks. runTool hands it copies of the
// session and of the final arguments and takes from it only a refusal: it
// can end a call, never let one past the guard nor change what runs, so it
// lies outside the trusted core (DESIGN.md §1), as the executors and the
// observer do.
type callFilter interface {
	// disabledBy names the settings key that refuses the tool whatever
	// its arguments, "" if none does.
	disabledBy(tool string) string
	// check runs the layers in order; ok is true only when every one let
	// the call through, and res is the call's end otherwise.
	check(ctx context.Context, env *toolEnv, call toolCall, spec toolSpec, args map[string]any) (res toolResult, ok bool)
	// readDenied reports whether the layers refuse reading an absolute
	// path, as they would refuse read_file of it.
	readDenied(cwd string) func(string) bool
}

// toolEnv is the session a call runs in.
type toolEnv struct {
	SessionID  string
	PromptID   string
	Cwd        string
	Guard      Guard // nil: no guard, the plain path
	Managed    bool  // required mode: nested and delegated agent names are refused
	Env        *procEnv
	Sandbox    *sandboxSession // confines every process a tool starts; nil: off
	Background *processSet
	Observer   toolObserver
	Workspace  *workspace // the session's cwd, opened once (tools_fs.go); nil: per call
	// Extra holds the session's tools beyond the built-ins (MCP tools), by
	// canonical name, every function field set; a built-in of the same name wins.
	Extra map[string]*toolSpec
	// Policy is the layers before the guard: settings, approval mode, hooks.
	// nil runs none of them (tests of the boundary alone).
	Policy callFilter
	// ReadDenied reports whether those layers refuse reading the absolute
	// path it is given, as they would refuse read_file of it: the search
	// tools skip such paths. runTool sets it from Policy; nil: none is.
	ReadDenied func(string) bool
}

// Texts of calls that end before their executor for reasons of our own.
const cancelledBeforeExecution = "Tool invocation cancelled before execution"

func cancelledResult() toolResult {
	return toolResult{Status: statusCancelled, ErrorType: errTypeExecutionDenied, Output: cancelledBeforeExecution}
}
