// run_budget.go extends run with its budgets, as Qwen Code's headless mode
// has them: the model turns of the run (--max-session-turns), the tool calls
// the model proposes (--max-tool-calls) and the run's wall time
// (--max-wall-time); what an exceeded one ends the run with (exit status 53
// or 55, nothing on stdout, one JSON line on stderr in Qwen Code's words).
// The turn and call budgets sit between the agent and its model: a model
// call past the turn budget is never made, and a turn whose calls would pass
// the call budget reaches no tool, not even the guard.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Exit statuses of an aborted run, Qwen Code's, so that a script branches on
// the reason as it does for qwen.
const (
	exitTurnLimit = 53 // --max-session-turns (or the settings' model.maxSessionTurns)
	exitBudget    = 55 // --max-tool-calls, --max-wall-time
)

// The names of the budget flags, which the messages name too.
const (
	flagMaxSessionTurns = "max-session-turns"
	flagMaxToolCalls    = "max-tool-calls"
	flagMaxWallTime     = "max-wall-time"
)

// Qwen Code's error types and the turn limit's message, word for word: CI
// scripts match them.
const (
	budgetErrorType    = "FatalBudgetExceededError"
	turnLimitErrorType = "FatalTurnLimitedError"
	turnLimitMessage   = "Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json."
)

// runLimits are a run's budgets as its flags set them.
type runLimits struct {
	MaxTurns     int           // model turns; 0: only the settings' model.maxSessionTurns
	MaxToolCalls int           // proposed tool calls; -1: no budget
	MaxWallTime  time.Duration // 0: no budget
}

// runAbort is why a run was aborted: Qwen Code's error object, printed as
// one JSON line on stderr, and the exit status.
type runAbort struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func (a *runAbort) Error() string { return a.Message }

// report prints the abort as Qwen Code does: {"error":{...}} on one line.
func (a *runAbort) report(w io.Writer) {
	line, _ := json.Marshal(struct {
		Error *runAbort `json:"error"`
	}{a})
	w.Write(append(line, '\n'))
}

// turnLimitAbort is the abort of a run that needed more model turns than
// it may make.
func turnLimitAbort() *runAbort {
	return &runAbort{Type: turnLimitErrorType, Message: turnLimitMessage, Code: exitTurnLimit}
}

// runBudget counts one run's model turns and proposed calls against its
// limits; the first budget exceeded is kept and ends the run.
type runBudget struct {
	limits runLimits
	start  time.Time

	mu       sync.Mutex
	turns    int
	calls    int
	exceeded *runAbort
}

func newRunBudget(limits runLimits, start time.Time) *runBudget {
	return &runBudget{limits: limits, start: start}
}

// abort is the budget exceeded first, nil while none is.
func (b *runBudget) abort() *runAbort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exceeded
}

// exceed records a, unless a budget was exceeded before, and returns the
// one that ends the run.
func (b *runBudget) exceed(a *runAbort) *runAbort {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exceeded == nil {
		b.exceeded = a
	}
	return b.exceeded
}

// wallTimeOver records that the run's wall time ran out at now.
func (b *runBudget) wallTimeOver(now time.Time) {
	b.exceed(&runAbort{Type: budgetErrorType, Code: exitBudget, Message: fmt.Sprintf(
		"Run aborted: wall-time budget of %s exceeded (--%s); observed %s.", b.limits.MaxWallTime, flagMaxWallTime, now.Sub(b.start).Round(time.Millisecond))})
}

// startTurn counts one model call; an error when it is one more than the
// run may make, or when a budget already ended the run.
func (b *runBudget) startTurn() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exceeded != nil {
		return b.exceeded
	}
	b.turns++
	if b.limits.MaxTurns > 0 && b.turns > b.limits.MaxTurns {
		b.exceeded = turnLimitAbort()
		return b.exceeded
	}
	return nil
}

// takeCalls counts the n calls of one turn; an error, and none of them
// runs, when they take the run past its call budget.
func (b *runBudget) takeCalls(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exceeded != nil {
		return b.exceeded
	}
	b.calls += n
	if b.limits.MaxToolCalls >= 0 && b.calls > b.limits.MaxToolCalls {
		b.exceeded = &runAbort{Type: budgetErrorType, Code: exitBudget, Message: fmt.Sprintf(
			"Run aborted: tool-call budget of %d exceeded (--%s); observed %d.", b.limits.MaxToolCalls, flagMaxToolCalls, b.calls)}
		return b.exceeded
	}
	return nil
}

// wrap puts the budget between a session and its model (acpOptions.WrapModel).
func (b *runBudget) wrap(m model) model { return budgetedModel{m, b} }

// budgetedModel is a session's model under a run's budgets.
type budgetedModel struct {
	model
	budget *runBudget
}

func (m budgetedModel) next(ctx context.Context, history []message, tools []*toolSpec, text func(string)) (modelTurn, error) {
	if err := m.budget.startTurn(); err != nil {
		return modelTurn{}, err
	}
	turn, err := m.model.next(ctx, history, tools, text)
	if err != nil {
		return turn, err
	}
	if err := m.budget.takeCalls(len(turn.Calls)); err != nil {
		return modelTurn{}, err
	}
	return turn, nil
}
