// model.go owns the model behind the prompt loop: the small interface the
// loop talks to, and the built-in scripted model that lets anyone try a
// policy end to end without a model service.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Roles of the messages in a session's history.
const (
	roleSystem    = "system" // only ever the first message a model call sends (agent_prompt.go)
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// message is one entry of a session's history, in the shape model APIs use.
type message struct {
	Role   string
	Text   string
	Images []promptImage // user: the prompt's images, after its text
	Calls  []toolCall    // assistant: the calls it proposed

	// tool: which call this result answers and how it ended.
	CallID string
	Tool   string
	Result toolResult
}

// promptImage is one image of a prompt: an accepted mime type and its data,
// checked standard base64 (acp.go's contentBlock.image).
type promptImage struct {
	MimeType string
	Data     string
}

// modelTurn is one assistant turn: text, then zero or more proposed calls.
type modelTurn struct {
	Text  string
	Calls []toolCall
	// Usage is the token counts the model service reported; nil when it
	// reported none (the scripted model never does).
	Usage *modelUsage
}

// modelUsage is a model call's token counts, with Qwen Code's keys
// (DESIGN.md §7).
type modelUsage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	TotalTokens      int64 `json:"totalTokens"`
	ThoughtTokens    int64 `json:"thoughtTokens"`
	CachedReadTokens int64 `json:"cachedReadTokens"`
}

// model proposes the next assistant turn from the history. text receives
// model text as it arrives, so a streaming model can forward chunks; the
// returned Text is what was already sent through it.
type model interface {
	next(ctx context.Context, history []message, tools []*toolSpec, text func(string)) (modelTurn, error)
}

// scriptedModel reads the prompt text, never its images: each line `call <tool_name> <json-object>`
// is one proposed call, all in one turn; after their results it reports one
// line per call and ends the turn. A prompt with no call line is echoed.
type scriptedModel struct{}

// scriptedCallPrefix starts a call line in a scripted prompt.
const scriptedCallPrefix = "call "

func (scriptedModel) next(ctx context.Context, history []message, _ []*toolSpec, text func(string)) (modelTurn, error) {
	if err := ctx.Err(); err != nil {
		return modelTurn{}, err
	}
	if len(history) == 0 {
		return modelTurn{}, fmt.Errorf("scripted model: empty history")
	}
	last := history[len(history)-1]
	switch last.Role {
	case roleUser:
		calls := parseScriptedCalls(last.Text)
		if len(calls) == 0 {
			text(last.Text)
			return modelTurn{Text: last.Text}, nil
		}
		return modelTurn{Calls: calls}, nil
	case roleTool:
		// Report every result since the last assistant turn, in call order.
		start := len(history) - 1
		for start > 0 && history[start-1].Role == roleTool {
			start--
		}
		var b strings.Builder
		for _, m := range history[start:] {
			fmt.Fprintf(&b, "%s: %s\n", m.Tool, scriptedOutcome(m.Result))
		}
		text(b.String())
		return modelTurn{Text: b.String()}, nil
	default:
		return modelTurn{}, fmt.Errorf("scripted model: nothing to answer after a %q message", last.Role)
	}
}

// scriptedOutcome is the one word the scripted model reports for a result.
func scriptedOutcome(r toolResult) string {
	switch {
	case r.Status == statusCompleted:
		return "completed"
	case r.Status == statusCancelled:
		return "cancelled"
	case r.ErrorType == errTypeExecutionDenied:
		return "denied"
	default:
		return "failed"
	}
}

// parseScriptedCalls returns the calls of a scripted prompt. The arguments
// are passed on as written: a call whose arguments are not a JSON object is
// still proposed, and fails at the execution boundary like a model's would.
func parseScriptedCalls(prompt string) []toolCall {
	var calls []toolCall
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, scriptedCallPrefix) {
			continue
		}
		rest := strings.TrimSpace(line[len(scriptedCallPrefix):])
		name, args, _ := strings.Cut(rest, " ")
		if name == "" {
			continue
		}
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		calls = append(calls, toolCall{ID: newCallID(), Name: name, Args: json.RawMessage(args)})
	}
	return calls
}

// newCallID returns a model-style tool call id: call_ and 24 hex digits.
func newCallID() string { return "call_" + randomHex(12) }
