// run_output.go extends run with its output formats, Qwen Code's headless
// shapes (the family of Claude Code's --output-format json|stream-json):
// the session/update notifications of one prompt become a system init
// message, one assistant message per model turn (its text and tool_use
// items), one user message per tool result, and a result with the
// permission denials, the usage and the stats. text prints the final
// assistant text, json one array of the messages at the end, stream-json
// one message per line as they happen, with stream_event lines.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Output formats of run (-o/--output-format).
const (
	runFormatText       = "text"
	runFormatJSON       = "json"
	runFormatStreamJSON = "stream-json"
)

// Message types and subtypes of the output, Qwen Code's.
const (
	runMsgSystem      = "system"
	runMsgAssistant   = "assistant"
	runMsgUser        = "user"
	runMsgResult      = "result"
	runMsgStreamEvent = "stream_event"
	runSubtypeInit    = "init"
	runSubtypeSuccess = "success"
	runSubtypeError   = "error_during_execution"
	runStopToolUse    = "tool_use"
)

// runTokens is a model call's token counts, or a run's total, in the
// output's names.
type runTokens struct {
	InputTokens          int64 `json:"input_tokens"`
	OutputTokens         int64 `json:"output_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
	TotalTokens          int64 `json:"total_tokens"`
}

func (u *runTokens) add(m modelUsage) {
	u.InputTokens += m.InputTokens
	u.OutputTokens += m.OutputTokens
	u.CacheReadInputTokens += m.CachedReadTokens
	u.TotalTokens += m.TotalTokens
}

// Content items of a message.
type (
	runTextBlock struct {
		Type string `json:"type"` // text
		Text string `json:"text"`
	}
	runToolUseBlock struct {
		Type  string          `json:"type"` // tool_use
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	runToolResultBlock struct {
		Type      string `json:"type"` // tool_result
		ToolUseID string `json:"tool_use_id"`
		IsError   bool   `json:"is_error"`
		Content   string `json:"content"`
	}
)

// runInit is the system init message.
type runInit struct {
	Type            string            `json:"type"`
	Subtype         string            `json:"subtype"`
	UUID            string            `json:"uuid"`
	SessionID       string            `json:"session_id"`
	Cwd             string            `json:"cwd"`
	Tools           []string          `json:"tools"`
	MCPServers      []runMCPServer    `json:"mcp_servers"`
	Model           string            `json:"model"`
	PermissionMode  string            `json:"permission_mode"`
	SlashCommands   []string          `json:"slash_commands"`
	AcpguardVersion string            `json:"acpguard_version"`
	Agents          []json.RawMessage `json:"agents"`
}

type runMCPServer struct {
	Name string `json:"name"`
}

// runAssistant is one model turn.
type runAssistant struct {
	Type            string           `json:"type"`
	UUID            string           `json:"uuid"`
	SessionID       string           `json:"session_id"`
	ParentToolUseID *string          `json:"parent_tool_use_id"`
	Message         runAssistantBody `json:"message"`
}

// runAssistantBody is an assistant message's message member.
type runAssistantBody struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"` // message
	Role       string    `json:"role"`
	Model      string    `json:"model"`
	Content    []any     `json:"content"`
	StopReason *string   `json:"stop_reason"`
	Usage      runTokens `json:"usage"`
}

// runUser is one tool result.
type runUser struct {
	Type            string  `json:"type"`
	UUID            string  `json:"uuid"`
	SessionID       string  `json:"session_id"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	Message         struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	} `json:"message"`
}

// runEvent is a stream_event's event, an Anthropic streaming event, its
// members in their order.
type runEvent struct {
	Type         string `json:"type"`
	Index        *int   `json:"index,omitempty"`
	Message      any    `json:"message,omitempty"`
	ContentBlock any    `json:"content_block,omitempty"`
	Delta        any    `json:"delta,omitempty"`
}

// runDelta is a content_block_delta's delta.
type runDelta struct {
	Type        string `json:"type"` // text_delta or input_json_delta
	Text        string `json:"text,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
}

// runStreamEvent is a stream_event line of stream-json.
type runStreamEvent struct {
	Type            string  `json:"type"`
	UUID            string  `json:"uuid"`
	SessionID       string  `json:"session_id"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	Event           any     `json:"event"`
}

// runDenial is one call the permission layers or the guard did not let run.
type runDenial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input"`
}

// runResult is the last message.
type runResult struct {
	Type              string      `json:"type"`
	Subtype           string      `json:"subtype"`
	UUID              string      `json:"uuid"`
	SessionID         string      `json:"session_id"`
	IsError           bool        `json:"is_error"`
	DurationMs        int64       `json:"duration_ms"`
	DurationAPIMs     int64       `json:"duration_api_ms"`
	NumTurns          int         `json:"num_turns"`
	Result            string      `json:"result"`
	Error             *runErrText `json:"error,omitempty"`
	Usage             runTokens   `json:"usage"`
	PermissionDenials []runDenial `json:"permission_denials"`
	Stats             *runStats   `json:"stats,omitempty"`
}

type runErrText struct {
	Message string `json:"message"`
}

// runStats are the run's statistics in Qwen Code's shape.
type runStats struct {
	Models map[string]*runModelStats `json:"models"`
	Tools  runToolStats              `json:"tools"`
	Files  runFileStats              `json:"files"`
}

type runModelStats struct {
	API struct {
		TotalRequests  int   `json:"totalRequests"`
		TotalErrors    int   `json:"totalErrors"`
		TotalLatencyMs int64 `json:"totalLatencyMs"`
	} `json:"api"`
	Tokens struct {
		Prompt     int64 `json:"prompt"`
		Candidates int64 `json:"candidates"`
		Total      int64 `json:"total"`
		Cached     int64 `json:"cached"`
		Thoughts   int64 `json:"thoughts"`
		Tool       int64 `json:"tool"`
	} `json:"tokens"`
}

type runDecisions struct {
	Accept     int `json:"accept"`
	Reject     int `json:"reject"`
	Modify     int `json:"modify"`
	AutoAccept int `json:"auto_accept"`
}

type runToolStats struct {
	TotalCalls      int                         `json:"totalCalls"`
	TotalSuccess    int                         `json:"totalSuccess"`
	TotalFail       int                         `json:"totalFail"`
	TotalDurationMs int64                       `json:"totalDurationMs"`
	TotalDecisions  runDecisions                `json:"totalDecisions"`
	ByName          map[string]*runToolNameStat `json:"byName"`
}

type runToolNameStat struct {
	Count      int          `json:"count"`
	Success    int          `json:"success"`
	Fail       int          `json:"fail"`
	DurationMs int64        `json:"durationMs"`
	Decisions  runDecisions `json:"decisions"`
}

type runFileStats struct {
	TotalLinesAdded   int `json:"totalLinesAdded"`
	TotalLinesRemoved int `json:"totalLinesRemoved"`
}

// runUpdate is what run reads of one session/update: the agent's own
// notifications, in this process.
type runUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content"`
	ToolCallID    string          `json:"toolCallId"`
	Status        string          `json:"status"`
	Title         string          `json:"title"`
	RawInput      json.RawMessage `json:"rawInput"`
	RawOutput     json.RawMessage `json:"rawOutput"`
	Meta          struct {
		ToolName   string      `json:"toolName"`
		Usage      *modelUsage `json:"usage"`
		DurationMs int64       `json:"durationMs"`
		// ShellOutput marks a running command's live output: run shows
		// the output once, with the call's end.
		ShellOutput *liveOutputMeta `json:"shellOutput"`
	} `json:"_meta"`
	AvailableCommands []struct {
		Name string `json:"name"`
	} `json:"availableCommands"`
	CurrentModeID string `json:"currentModeId"`
}

// runToolContent is one item of a tool call's content.
type runToolContent struct {
	Type    string `json:"type"` // content or diff
	Content struct {
		Text string `json:"text"`
	} `json:"content"`
	Path    string  `json:"path"`
	OldText *string `json:"oldText"` // nil or "": a new file
	NewText string  `json:"newText"`
}

// runTurn is the model turn being read: its items, and the results of its
// calls, held until the turn ends so that its one assistant message, with
// every tool_use, comes before them.
type runTurn struct {
	id      string
	content []any
	text    strings.Builder // all its text, for the result
	open    int             // index of the text item being written; -1: none
	calls   bool            // a tool_call was read: text from now on is another turn's
	usage   runTokens
	results []runUser
}

// runCall is a call between its tool_call and its end.
type runCall struct {
	name  string
	input json.RawMessage
	start time.Time
}

// runTranscript turns one prompt's updates into the output of its format.
// Its methods may be called from the connection's read goroutine and the
// run's, one at a time.
type runTranscript struct {
	mu      sync.Mutex
	format  string
	partial bool // stream-json: text deltas as stream_event lines
	stdout  io.Writer
	stderr  io.Writer
	start   time.Time
	// terminal: stdout is a terminal, where the final text is shown with
	// its control characters made visible.
	terminal bool

	init     runInit
	initSent bool

	turn       *runTurn
	lastText   string // the text of the last turn that ended
	numTurns   int
	usage      runTokens
	apiMs      int64
	denials    []runDenial
	calls      map[string]*runCall
	stats      runStats
	messages   []any // json: everything, written at the end
	writeErr   error
	nullParent *string
}

// newRunTranscript is the transcript of a prompt in format; its init
// message is set once the session is open, before the prompt is sent.
func newRunTranscript(format string, partial bool, stdout, stderr io.Writer, start time.Time) *runTranscript {
	out, _ := stdout.(*os.File)
	t := &runTranscript{format: format, partial: partial, stdout: stdout, stderr: stderr, start: start, terminal: out != nil && isTerminal(out),
		calls: map[string]*runCall{}, denials: []runDenial{},
		stats: runStats{Models: map[string]*runModelStats{}, Tools: runToolStats{ByName: map[string]*runToolNameStat{}}}}
	return t
}

// emit outputs one message: kept for the json array, a line of stream-json.
func (t *runTranscript) emit(v any) {
	switch t.format {
	case runFormatJSON:
		t.messages = append(t.messages, v)
	case runFormatStreamJSON:
		line, err := runJSON(v)
		if err == nil {
			_, err = t.stdout.Write(append(line, '\n'))
		}
		if err != nil && t.writeErr == nil {
			t.writeErr = fmt.Errorf("write the output: %w", err)
		}
	}
}

// event outputs one stream_event line (stream-json only).
func (t *runTranscript) event(e any) {
	if t.format == runFormatStreamJSON {
		t.emit(runStreamEvent{Type: runMsgStreamEvent, UUID: newUUID(), SessionID: t.init.SessionID, ParentToolUseID: t.nullParent, Event: e})
	}
}

// runJSON is v encoded as the output has it: compact, < > & as they are.
func runJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// sendInit outputs the system init message once, before anything else of
// the prompt: the slash commands are known from its first update.
func (t *runTranscript) sendInit() {
	if t.initSent {
		return
	}
	t.initSent = true
	t.init.Type, t.init.Subtype, t.init.UUID = runMsgSystem, runSubtypeInit, newUUID()
	if t.init.SlashCommands == nil {
		t.init.SlashCommands = []string{}
	}
	t.emit(t.init)
}

// update reads one session/update's update member.
func (t *runTranscript) update(raw json.RawMessage) {
	var u runUpdate
	if json.Unmarshal(raw, &u) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch u.SessionUpdate {
	case "available_commands_update":
		if !t.initSent {
			t.init.SlashCommands = []string{}
			for _, c := range u.AvailableCommands {
				t.init.SlashCommands = append(t.init.SlashCommands, c.Name)
			}
		}
		t.sendInit()
	case "current_mode_update":
		if !t.initSent {
			t.init.PermissionMode = u.CurrentModeID
		}
	case "agent_message_chunk":
		t.sendInit()
		var c runTextBlock
		json.Unmarshal(u.Content, &c)
		if u.Meta.Usage != nil {
			t.modelTurn().usage.add(*u.Meta.Usage)
			t.usage.add(*u.Meta.Usage)
			t.apiMs += u.Meta.DurationMs
			t.modelStats().API.TotalLatencyMs += u.Meta.DurationMs
			t.addTokens(*u.Meta.Usage)
		}
		if c.Text != "" {
			t.text(c.Text)
		}
	case "agent_thought_chunk":
		t.sendInit()
		t.modelTurn() // thinking starts a turn; it is shown nowhere else
	case "tool_call":
		t.sendInit()
		t.toolCall(u)
	case "tool_call_update":
		if u.Status == "completed" || u.Status == "failed" {
			t.toolEnd(u)
		}
	}
}

// modelTurn is the turn model output belongs to: the open one, or a new
// one once the open one's calls were read.
func (t *runTranscript) modelTurn() *runTurn {
	if t.turn != nil && t.turn.calls {
		t.endTurn()
	}
	if t.turn == nil {
		t.turn = &runTurn{id: newUUID(), open: -1}
		t.event(runEvent{Type: "message_start", Message: runAssistantBody{
			ID: t.turn.id, Type: "message", Role: roleAssistant, Model: t.init.Model, Content: []any{}}})
	}
	return t.turn
}

// text adds model text to the turn's text item.
func (t *runTranscript) text(s string) {
	turn := t.modelTurn()
	if turn.open < 0 {
		turn.open = len(turn.content)
		turn.content = append(turn.content, &runTextBlock{Type: "text"})
		i := turn.open
		t.event(runEvent{Type: "content_block_start", Index: &i, ContentBlock: runTextBlock{Type: "text"}})
	}
	block := turn.content[turn.open].(*runTextBlock)
	block.Text += s
	turn.text.WriteString(s)
	if t.partial {
		i := turn.open
		t.event(runEvent{Type: "content_block_delta", Index: &i, Delta: runDelta{Type: "text_delta", Text: s}})
	}
}

// closeText ends the turn's text item, if one is open.
func (t *runTranscript) closeText() {
	if t.turn != nil && t.turn.open >= 0 {
		i := t.turn.open
		t.event(runEvent{Type: "content_block_stop", Index: &i})
		t.turn.open = -1
	}
}

// toolCall adds a call to the turn that proposed it.
func (t *runTranscript) toolCall(u runUpdate) {
	turn := t.turn
	if turn == nil {
		turn = t.modelTurn()
	}
	t.closeText()
	turn.calls = true
	input := u.RawInput
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	name := u.Meta.ToolName
	t.calls[u.ToolCallID] = &runCall{name: name, input: input, start: time.Now()}
	index := len(turn.content)
	turn.content = append(turn.content, runToolUseBlock{Type: "tool_use", ID: u.ToolCallID, Name: name, Input: input})
	t.event(runEvent{Type: "content_block_start", Index: &index,
		ContentBlock: runToolUseBlock{Type: "tool_use", ID: u.ToolCallID, Name: name, Input: json.RawMessage("{}")}})
	if t.partial {
		t.event(runEvent{Type: "content_block_delta", Index: &index, Delta: runDelta{Type: "input_json_delta", PartialJSON: string(input)}})
	}
	t.event(runEvent{Type: "content_block_stop", Index: &index})
}

// toolEnd reads how a call ended: its result for the turn, a denial, the
// stats, and on stderr in text format why it did not run.
func (t *runTranscript) toolEnd(u runUpdate) {
	c := t.calls[u.ToolCallID]
	if c == nil {
		return // not a call of this prompt
	}
	delete(t.calls, u.ToolCallID)
	var items []runToolContent
	json.Unmarshal(u.Content, &items)
	var text string
	added, removed := 0, 0
	for _, it := range items {
		switch it.Type {
		case "content":
			text += it.Content.Text
		case "diff":
			a, r := diffLineCounts(it.OldText, it.NewText)
			added, removed = added+a, removed+r
		}
	}
	var out struct {
		ErrorType string `json:"errorType"`
	}
	json.Unmarshal(u.RawOutput, &out)
	failed := u.Status == "failed"
	denied := failed && out.ErrorType == errTypeExecutionDenied
	if denied {
		t.denials = append(t.denials, runDenial{ToolName: c.name, ToolUseID: u.ToolCallID, ToolInput: c.input})
		if t.format == runFormatText {
			fmt.Fprintf(t.stderr, "acpguard run: %s not run: %s\n", visibleText(c.name), visibleText(text))
		}
	}
	t.toolStats(c, failed, denied, added, removed)
	var msg runUser
	msg.Type, msg.UUID, msg.SessionID, msg.ParentToolUseID = runMsgUser, newUUID(), t.init.SessionID, t.nullParent
	msg.Message.Role = roleUser
	msg.Message.Content = []any{runToolResultBlock{Type: "tool_result", ToolUseID: u.ToolCallID, IsError: failed, Content: text}}
	if t.turn == nil {
		t.emit(msg) // a call outside any turn: reported at once
		return
	}
	t.turn.results = append(t.turn.results, msg)
}

// endTurn outputs the open turn: its assistant message, then its results.
func (t *runTranscript) endTurn() {
	turn := t.turn
	if turn == nil {
		return
	}
	t.closeText()
	t.turn = nil
	t.numTurns++
	t.modelStats().API.TotalRequests++
	t.lastText = turn.text.String()
	t.event(runEvent{Type: "message_stop"})
	var msg runAssistant
	msg.Type, msg.UUID, msg.SessionID, msg.ParentToolUseID = runMsgAssistant, newUUID(), t.init.SessionID, t.nullParent
	msg.Message.ID, msg.Message.Type, msg.Message.Role, msg.Message.Model = turn.id, "message", roleAssistant, t.init.Model
	msg.Message.Content = make([]any, 0, len(turn.content))
	for _, c := range turn.content {
		if b, ok := c.(*runTextBlock); ok {
			c = *b
		}
		msg.Message.Content = append(msg.Message.Content, c)
	}
	if turn.calls {
		stop := runStopToolUse
		msg.Message.StopReason = &stop
	}
	msg.Message.Usage = turn.usage
	t.emit(msg)
	for _, r := range turn.results {
		t.emit(r)
	}
}

func (t *runTranscript) modelStats() *runModelStats {
	m := t.stats.Models[t.init.Model]
	if m == nil {
		m = &runModelStats{}
		t.stats.Models[t.init.Model] = m
	}
	return m
}

func (t *runTranscript) addTokens(u modelUsage) {
	tok := &t.modelStats().Tokens
	tok.Prompt += u.InputTokens
	tok.Candidates += u.OutputTokens
	tok.Total += u.TotalTokens
	tok.Cached += u.CachedReadTokens
	tok.Thoughts += u.ThoughtTokens
}

// toolStats counts one ended call. Nobody is asked in a headless run: a
// call that ran was accepted without asking, a denied one rejected.
func (t *runTranscript) toolStats(c *runCall, failed, denied bool, added, removed int) {
	ms := time.Since(c.start).Milliseconds()
	s := &t.stats.Tools
	n := s.ByName[c.name]
	if n == nil {
		n = &runToolNameStat{}
		s.ByName[c.name] = n
	}
	s.TotalCalls++
	n.Count++
	s.TotalDurationMs += ms
	n.DurationMs += ms
	if failed {
		s.TotalFail++
		n.Fail++
	} else {
		s.TotalSuccess++
		n.Success++
	}
	if denied {
		s.TotalDecisions.Reject++
		n.Decisions.Reject++
	} else {
		s.TotalDecisions.AutoAccept++
		n.Decisions.AutoAccept++
	}
	t.stats.Files.TotalLinesAdded += added
	t.stats.Files.TotalLinesRemoved += removed
}

// diffLineCounts counts the lines an edit added and removed: those of one
// text the other does not hold as often. oldText nil is a new file.
func diffLineCounts(oldText *string, newText string) (added, removed int) {
	count := map[string]int{}
	if oldText != nil {
		for l := range strings.Lines(*oldText) {
			count[strings.TrimSuffix(l, "\n")]++
		}
	}
	for l := range strings.Lines(newText) {
		l = strings.TrimSuffix(l, "\n")
		if count[l] > 0 {
			count[l]--
			continue
		}
		added++
	}
	for _, n := range count {
		removed += n
	}
	return added, removed
}

// finish ends the output of a prompt that ended, with errText when it
// failed: the last turn, the result, and for json the array; for text the
// final assistant text.
func (t *runTranscript) finish(errText string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sendInit()
	t.endTurn()
	res := runResult{Type: runMsgResult, Subtype: runSubtypeSuccess, UUID: newUUID(), SessionID: t.init.SessionID,
		DurationMs: time.Since(t.start).Milliseconds(), DurationAPIMs: t.apiMs, NumTurns: t.numTurns,
		Result: t.lastText, Usage: t.usage, PermissionDenials: t.denials}
	if errText != "" {
		res.Subtype, res.IsError, res.Result, res.Error = runSubtypeError, true, "", &runErrText{errText}
		t.modelStats().API.TotalErrors++
	}
	if t.format == runFormatJSON {
		res.Stats = &t.stats
	}
	t.emit(res)
	switch {
	case t.writeErr != nil:
		return t.writeErr
	case t.format == runFormatJSON:
		b, err := runJSON(t.messages)
		if err != nil {
			return fmt.Errorf("write the output: %w", err)
		}
		if _, err := t.stdout.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("write the output: %w", err)
		}
	case t.format == runFormatText && errText == "" && t.lastText != "":
		text := t.lastText
		if t.terminal {
			// Model text cannot move the cursor or retitle the window.
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			for i, l := range lines {
				lines[i] = visibleText(l)
			}
			text = strings.Join(lines, "\n")
		}
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if _, err := io.WriteString(t.stdout, text); err != nil {
			return fmt.Errorf("write the output: %w", err)
		}
	}
	return nil
}
