// guard.go owns runTool, the single execution boundary: the one function in
// the code base that calls a tool executor, and the guard step before it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
)

// runTool runs one call: the single execution boundary. It is the only
// function that calls a tool executor (guard_test.go checks the source).
// Order: canonical name, lookup, the managed nested-agent refusal, argument
// validation and normalization, toolPending, [permission rules and PreToolUse
// hooks], the guard when one is configured, toolRunning, the executor.
func runTool(ctx context.Context, env *toolEnv, call toolCall) toolResult {
	spec, args, res, ok := prepareTool(env, &call)
	if !ok {
		return res
	}
	// Permission rules and PreToolUse hooks run after normalization and
	// before the guard (DESIGN.md §10): a denial here makes no provider
	// request.
	if env.Policy != nil {
		if res, ok := filterCall(ctx, env, call, spec, args); !ok {
			return res
		}
		// What the rules refuse to read, the search tools do not reach
		// (a copy: the caller's env is not written).
		e := *env
		e.ReadDenied = env.Policy.readDenied(env.Cwd)
		env = &e
	}
	if env.Guard != nil {
		// Only here: with no guard the path copies nothing, allocates
		// nothing more and starts no goroutine.
		if res, ok := checkGuard(ctx, env, call, spec.Name, args); !ok {
			return res
		}
	}
	env.Observer.toolRunning(call)
	return spec.exec(ctx, env, args)
}

// prepareTool resolves the tool and its final arguments and announces the
// call with toolPending, exactly once, whatever fails. call.Name becomes the
// canonical name. ok is false when the call ended here with res.
func prepareTool(env *toolEnv, call *toolCall) (spec toolSpec, args map[string]any, res toolResult, ok bool) {
	call.Name = canonicalToolName(call.Name)
	if env.Managed && isNestedAgentTool(call.Name) {
		return pendingFailure(env, *call, failed(errTypeExecutionDenied, "%s", nestedAgentRefusal))
	}
	spec, found := lookupTool(env, call.Name)
	if !found {
		return pendingFailure(env, *call, failed(errTypeToolNotRegistered, "tool %q is not registered", call.Name))
	}
	// tools.disabled refuses the name whatever the arguments (DESIGN.md §10).
	if key := disabledBy(env.Policy, call.Name); key != "" {
		return pendingFailure(env, *call, failed(errTypeExecutionDenied, "tool %q is disabled by settings (%s)", call.Name, key))
	}
	args, err := decodeArgs(call.Args)
	if err == nil && spec.Params != nil {
		args, err = checkParams(spec.Params, args)
	}
	if err == nil {
		args, err = spec.normalize(env, args)
	}
	if err != nil {
		return pendingFailure(env, *call, failed(errTypeInvalidParams, "%s: %v", call.Name, err))
	}
	env.Observer.toolPending(*call, spec.title(args), spec.Kind, args)
	return spec, args, toolResult{}, true
}

// pendingFailure announces a call that could not be prepared, with its raw
// arguments when they decode, and ends it with res.
func pendingFailure(env *toolEnv, call toolCall, res toolResult) (toolSpec, map[string]any, toolResult, bool) {
	raw, _ := decodeArgs(call.Args)
	env.Observer.toolPending(call, call.Name, kindOther, raw)
	return toolSpec{}, nil, res, false
}

// filterCall runs env.Policy, the layers before the guard, on copies of
// the session and of the final arguments: the filter can end the call, and
// nothing it does reaches what the guard then sees or what runs.
func filterCall(ctx context.Context, env *toolEnv, call toolCall, spec toolSpec, args map[string]any) (res toolResult, ok bool) {
	clone, err := cloneValue(args)
	if err != nil {
		return failed(errTypeInvalidParams, "%s: %v", call.Name, err), false
	}
	e := *env
	return env.Policy.check(ctx, &e, call, spec, clone.(map[string]any))
}

// disabledBy names the settings key that refuses the tool whatever its
// arguments, "" when none does or there is no policy.
func disabledBy(p callFilter, tool string) string {
	if p == nil {
		return ""
	}
	return p.disabledBy(tool)
}

// checkGuard asks env.Guard about the final call. ok is true only for an
// explicit allow with the call's context still live, checked before the
// guard and again after it; a cancellation ends the call cancelled, anything
// else but an allow ends it execution_denied (DESIGN.md §1).
func checkGuard(ctx context.Context, env *toolEnv, call toolCall, name string, args map[string]any) (res toolResult, ok bool) {
	if ctx.Err() != nil {
		return cancelledResult(), false
	}
	clone, err := cloneValue(args)
	if err != nil {
		return failed(errTypeExecutionDenied, "%s", guardFailedReason), false
	}
	d, err := callGuard(ctx, env.Guard, GuardRequest{
		SessionID:  env.SessionID,
		PromptID:   env.PromptID,
		ToolCallID: call.ID,
		ToolName:   name,
		Arguments:  clone.(map[string]any),
	})
	if ctx.Err() != nil {
		return cancelledResult(), false
	}
	switch {
	case err != nil, d.Allowed && d.Reason != "":
		// An allow carries no reason: anything else is malformed.
		return failed(errTypeExecutionDenied, "%s", guardFailedReason), false
	case !d.Allowed:
		return failed(errTypeExecutionDenied, "%s", deniedReason(d.Reason)), false
	}
	return toolResult{}, true
}

// callGuard calls g, turning a panic into a failure.
func callGuard(ctx context.Context, g Guard, req GuardRequest) (d Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = Decision{}, fmt.Errorf("guard panicked: %v", r)
		}
	}()
	return g(ctx, req)
}

// cloneValue deep-copies final arguments so that a guard cannot change what
// runs; a map stays a map[string]any. A value of a type JSON cannot carry is
// a clone failure.
func cloneValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool, json.Number, int64, float64:
		return v, nil
	case map[string]any:
		if v == nil {
			return map[string]any(nil), nil
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := cloneValue(e)
			if err != nil {
				return nil, fmt.Errorf("clone argument %q: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	case []any:
		if v == nil {
			return []any(nil), nil
		}
		out := make([]any, len(v))
		for i, e := range v {
			c, err := cloneValue(e)
			if err != nil {
				return nil, fmt.Errorf("clone element %d: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot clone a value of type %T", v)
}
