// run_terminal.go extends run with its terminal face, shown when stdin and
// stdout are a terminal and no -o is given: a prompt line, the assistant's
// text as it streams, each tool call with its arguments and, for an edit,
// its diff, what the permission layers and the guard decided and why, the
// agent's permission questions answered on the terminal, Ctrl-C to cancel
// the running turn and a second Ctrl-C or Ctrl-D to leave. The terminal
// keeps its own mode: the kernel edits the line, Ctrl-C is SIGINT and
// Ctrl-D ends the input, so there is no mode to restore however run ends.
// Everything the agent sends (a tool's output, the model's text, a path)
// reaches the terminal through visibleText, line by line: no escape
// sequence moves the cursor, retitles the window or draws a question, and
// a tool's output is indented, so no line of it stands where a question
// does.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// What one call shows, a screenful each; the rest is counted, not shown
// (the model gets all of it).
const (
	maxTermArgsBytes   = 2048 // a call's arguments
	maxTermDiffLines   = 60   // an edit's removed and added lines together
	maxTermOutputLines = 40   // a call's output
)

// envNoColor set to anything but "" turns the terminal face's colours off
// (no-color.org).
const envNoColor = "NO_COLOR"

// The terminal face's few colours, SGR sequences written only by paint:
// tool names bold, denials and failures red, an allow green, notes dim.
const (
	sgrBold  = "\x1b[1m"
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
	sgrGreen = "\x1b[32m"
	sgrReset = "\x1b[0m"
)

// ioctlTCFLSH is Linux's TCFLSH request (asm-generic/ioctls.h, the same
// on amd64 and arm64), which the syscall package lacks on amd64: it drops
// what the terminal holds of the input.
const ioctlTCFLSH = 0x540b

// termPromptMark starts the prompt line.
const termPromptMark = "> "

// termGutter starts every line of a call's output (a diff's lines start
// with "  - " and "  + "): no line a tool prints starts where the face's
// own lines do.
const termGutter = "  | "

// runPermissionDismissed answers a permission request nobody chose an
// option for: the agent takes it as a reject, or as the cancel it is when
// the prompt was cancelled.
var runPermissionDismissed = map[string]any{"outcome": map[string]string{"outcome": outcomeCancelled}}

// runTerminal runs the terminal face: the session of opts in the current
// directory, then one prompt per line read (the prompt words, when given,
// first) until Ctrl-D or a second Ctrl-C. Ctrl-D leaves with status 0, a
// second Ctrl-C or SIGTERM with 130; the budgets are the whole run's, and
// an exceeded one ends it as it ends a headless run.
func runTerminal(ctx context.Context, sys *system, opts runOptions) error {
	if len(opts.Prompt) > maxRunPromptBytes {
		return usagef("the prompt: more than %d bytes", maxRunPromptBytes)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the current directory, the session's cwd: %w", err)
	}
	// Ctrl-C cancels the running turn, not the run: run takes SIGINT and
	// SIGTERM itself from here on and no longer follows ctx, which ends at
	// the first of either.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if ctx.Err() != nil {
		return &exitStatusError{code: exitInterrupted, err: errors.New("run interrupted")}
	}
	stdin, _ := sys.stdin.(*os.File)
	releaseTerminal(stdin)
	start := time.Now()
	budget := newRunBudget(opts.Limits, start)
	agentOpts := opts.ACP
	agentOpts.WrapModel = budget.wrap
	agentCtx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgent()
	term := newRunTerm(sys.stdout, envOf(sys).lookup(envNoColor) == "")
	c, err := startRunAgent(agentCtx, sys, agentOpts, term)
	if err != nil {
		return err
	}
	// Before the session is open there is no turn to cancel: Ctrl-C or
	// SIGTERM ends the agent at once, as it ends a headless run's.
	opened, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-sigs:
			stopAgent()
		case <-opened:
		}
	}()
	sid, mode, err := c.open(agentCtx, opts, cwd)
	close(opened)
	<-watched
	if err != nil || agentCtx.Err() != nil {
		agentErr := c.close()
		switch {
		case agentCtx.Err() != nil:
			return &exitStatusError{code: exitInterrupted, err: errors.New("run interrupted")}
		case errors.Is(err, errAgentStart) && agentErr != nil:
			return agentErr // its own error says why, its type the status
		}
		return err
	}
	c.watch(sid)
	l := &runTermLoop{c: c, term: term, sid: sid, agentCtx: agentCtx, budget: budget, sigs: sigs,
		stdin: stdin, lines: make(chan runTermInput), abort: make(chan struct{}), done: make(chan struct{})}
	defer close(l.done)
	go l.read(stdin)
	if opts.Limits.MaxWallTime > 0 {
		t := time.AfterFunc(opts.Limits.MaxWallTime, func() {
			budget.wallTimeOver(time.Now())
			close(l.abort)
		})
		defer t.Stop()
	}
	term.notef("acpguard run: session %s in %s, approval mode %s; Ctrl-C cancels a turn, Ctrl-D exits", sid, cwd, mode)
	endErr := l.run(opts.Prompt)
	term.endLine()
	agentErr := c.close()
	if a := budget.abort(); a != nil {
		a.report(sys.stderr)
		return &exitStatusError{code: a.Code}
	}
	if endErr != nil {
		return endErr
	}
	return agentErr
}

// releaseTerminal gives up run's controlling terminal (TIOCNOTTY on f, its
// descriptors kept), before the agent starts anything: what it starts
// (tools, hooks, MCP servers) has no controlling terminal, so /dev/tty
// opens nothing and what a tool prints reaches the terminal only through
// visibleText. Ctrl-C still signals run, which stays in the terminal's
// foreground process group. A session leader keeps its terminal: giving
// it up would hang the terminal up for run's own process group and end
// Ctrl-C's signal.
func releaseTerminal(f *os.File) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if f == nil || errno != 0 || int(sid) == os.Getpid() {
		return
	}
	syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCNOTTY, 0)
}

// runTermInput is one read of the terminal: a line, or the end of the
// input (Ctrl-D at the start of a line, or the terminal gone).
type runTermInput struct {
	line string
	end  bool
}

// runTermLoop is the prompt line of one run and the turns it starts.
type runTermLoop struct {
	c        *runClient
	term     *runTerm
	sid      string
	agentCtx context.Context
	budget   *runBudget
	sigs     chan os.Signal
	stdin    *os.File
	lines    chan runTermInput
	abort    chan struct{} // closed when the wall time is over
	done     chan struct{} // closed when the run ends: the reader stops
	// armed: the last thing typed was a Ctrl-C; the next one leaves.
	armed bool
}

// errTermQuit, errTermTerminated and errTermBudget end the prompt line:
// a second Ctrl-C, SIGTERM, a budget exceeded.
var (
	errTermQuit       = &exitStatusError{code: exitInterrupted}
	errTermTerminated = &exitStatusError{code: exitInterrupted, err: errors.New("run interrupted")}
	errTermBudget     = errors.New("a budget was exceeded")
)

// read hands the terminal's lines to the loop until the terminal is gone
// or the run ends. The kernel edits each line; Ctrl-D at a line's start
// ends the input once, and the terminal can still be read after it.
func (l *runTermLoop) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		s, err := br.ReadString('\n')
		in := runTermInput{line: strings.TrimSuffix(s, "\n"), end: err != nil}
		select {
		case l.lines <- in:
		case <-l.done:
			return
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return // the terminal is gone
		}
	}
}

// run reads prompt lines and runs each as a turn, first the prompt words
// when given; nil when Ctrl-D ended it.
func (l *runTermLoop) run(first string) error {
	text := first
	for {
		if strings.TrimSpace(text) != "" {
			if err := l.turn(text); err != nil {
				return termEnd(err)
			}
		}
		l.term.promptLine()
		var err error
		if text, err = l.readPrompt(); err != nil {
			return termEnd(err)
		}
	}
}

// termEnd is the error run ends with: nil for Ctrl-D, nil for a budget
// (runTerminal reports it).
func termEnd(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, errTermBudget) {
		return nil
	}
	return err
}

// readPrompt waits for the next prompt line. Ctrl-C drops the line being
// typed; a second one in a row leaves.
func (l *runTermLoop) readPrompt() (string, error) {
	for {
		select {
		case in := <-l.lines:
			if in.end {
				l.term.leftMidLine()
				return "", io.EOF
			}
			l.term.lineRead()
			l.armed = false
			if len(in.line) > maxRunPromptBytes {
				l.term.notef("the line is more than %d bytes: not sent", maxRunPromptBytes)
				l.term.promptLine()
				continue
			}
			return in.line, nil
		case s := <-l.sigs:
			l.term.leftMidLine()
			if s != os.Interrupt {
				return "", errTermTerminated
			}
			if l.armed {
				return "", errTermQuit
			}
			l.armed = true
			l.term.notef("Ctrl-C again or Ctrl-D exits")
			l.term.promptLine()
		case <-l.abort:
			l.term.leftMidLine()
			return "", errTermBudget
		}
	}
}

// turn sends one prompt and shows it to its end, answering the agent's
// permission questions from the terminal. Ctrl-C cancels it through ACP;
// a second Ctrl-C or SIGTERM leaves at once (closing the connection ends
// what the agent runs), Ctrl-D once the turn has ended.
func (l *runTermLoop) turn(text string) error {
	type result struct {
		stop string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stop, err := l.c.prompt(l.agentCtx, l.sid, text)
		done <- result{stop, err}
	}()
	var (
		q          *runQuestion
		leave      error // how the run ends once the turn has
		cancelled  bool
		cancelWait <-chan time.Time
		abort      = l.abort
	)
	cancel := func() {
		if !cancelled {
			cancelled = true
			l.c.cancelPrompt()
			cancelWait = time.After(runCancelWait)
		}
	}
	endInput := func() {
		if q != nil {
			q.answer <- runPermissionDismissed
			q = nil
		}
		leave = io.EOF
		cancel()
	}
	for {
		var questions chan *runQuestion
		var withdrawn <-chan struct{}
		if q == nil {
			questions = l.term.questions
		} else {
			withdrawn = q.ctx.Done()
		}
		select {
		case r := <-done:
			if q != nil {
				l.term.notef("the question was withdrawn") // with its turn
			}
			if r.err != nil {
				var failed *runPromptError
				if !errors.As(r.err, &failed) {
					return r.err
				}
				if l.budget.abort() != nil {
					return errTermBudget
				}
				l.term.failed(failed.msg)
			} else {
				l.term.turnEnded(r.stop)
			}
			if l.budget.abort() != nil {
				return errTermBudget
			}
			return leave
		case nq := <-questions:
			q = nq
			if l.flushInput() {
				endInput()
				continue
			}
			l.term.ask(q)
		case <-withdrawn:
			l.term.notef("the question was withdrawn")
			q = nil
		case in := <-l.lines:
			switch {
			case in.end:
				l.term.leftMidLine()
				endInput()
			case q == nil:
				l.term.lineRead()
				l.term.notef("a turn is running: the line is not sent (Ctrl-C cancels the turn)")
			default:
				l.term.lineRead()
				o := q.choose(in.line)
				if o == nil {
					l.term.askAgain(q)
					continue
				}
				l.term.answered(o) // before the call it lets run shows anything
				q.answer <- runPermissionAnswer(o.OptionID)
				q = nil
			}
		case s := <-l.sigs:
			l.term.leftMidLine()
			if s != os.Interrupt {
				return errTermTerminated
			}
			if l.armed {
				return errTermQuit
			}
			l.armed = true
			l.term.notef("cancelling the turn; Ctrl-C again exits")
			cancel()
		case <-abort:
			abort = nil
			cancel()
		case <-cancelWait:
			return fmt.Errorf("cancel the turn: it did not end within %s of session/cancel; the agent is ended", runCancelWait)
		}
	}
}

// flushInput drops what was typed before a permission question is shown,
// in the terminal and read already: only a line typed after the question
// answers it. It reports whether the input ended meanwhile.
func (l *runTermLoop) flushInput() (ended bool) {
	if l.stdin != nil {
		syscall.Syscall(syscall.SYS_IOCTL, l.stdin.Fd(), ioctlTCFLSH, syscall.TCIFLUSH)
	}
	for {
		select {
		case in := <-l.lines:
			ended = ended || in.end
		default:
			return ended
		}
	}
}

// runQuestion is one permission request waiting for its answer on the
// terminal.
type runQuestion struct {
	ctx     context.Context // ends when the agent withdraws the request
	tool    string
	title   string
	input   json.RawMessage
	options []permissionOption
	answer  chan any // buffered: the asker may be gone
}

// choose is the offered option a typed answer names: its number, or y, a
// or n for the option that allows once, always or rejects; nil for
// anything else, which is asked again. Nothing is chosen by default.
func (q *runQuestion) choose(line string) *permissionOption {
	s := strings.ToLower(strings.TrimSpace(line))
	if n, ok := parseDigits[int](s); ok && n >= 1 && n <= len(q.options) {
		return &q.options[n-1]
	}
	for i, o := range q.options {
		if k, ok := termOptionKeys[o.Kind]; ok && (s == k[0] || s == k[1]) {
			return &q.options[i]
		}
	}
	return nil
}

// termOptionKeys are the letter and the word that choose an option of
// each kind that has them.
var termOptionKeys = map[string][2]string{
	kindAllowOnce:   {"y", "yes"},
	kindAllowAlways: {"a", "always"},
	kindRejectOnce:  {"n", "no"},
}

// runTerm is the terminal's side of the run: what it shows, and the
// permission questions handed from the connection to the prompt line.
type runTerm struct {
	colour    bool
	questions chan *runQuestion

	mu      sync.Mutex // one writer at a time: the connection's updates, the prompt line
	out     io.Writer
	midLine bool              // what was written last did not end its line
	shown   map[string]string // the tool's name by toolCallId, of the calls shown
}

func newRunTerm(out io.Writer, colour bool) *runTerm {
	return &runTerm{out: out, colour: colour, questions: make(chan *runQuestion), shown: map[string]string{}}
}

// update shows one session/update of the prompt.
func (t *runTerm) update(raw json.RawMessage) {
	var u runUpdate
	if json.Unmarshal(raw, &u) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch u.SessionUpdate {
	case "agent_message_chunk":
		var c runTextBlock
		json.Unmarshal(u.Content, &c)
		t.text(c.Text)
	case "tool_call":
		t.toolCall(u)
	case "tool_call_update":
		t.toolUpdate(u)
	}
}

// askPermission hands the request to the prompt line as a question and
// returns the option chosen there, or nothing once the agent withdraws it.
func (t *runTerm) askPermission(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		ToolCall struct {
			Title    string          `json:"title"`
			RawInput json.RawMessage `json:"rawInput"`
			Meta     struct {
				ToolName string `json:"toolName"`
			} `json:"_meta"`
		} `json:"toolCall"`
		Options []permissionOption `json:"options"`
	}
	if err := json.Unmarshal(params, &p); err != nil || len(p.Options) == 0 {
		return runPermissionDismissed, nil // nothing to offer: a reject
	}
	q := &runQuestion{ctx: ctx, tool: p.ToolCall.Meta.ToolName, title: p.ToolCall.Title, input: p.ToolCall.RawInput,
		options: p.Options, answer: make(chan any, 1)}
	select {
	case t.questions <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-q.answer:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// paint is s in the colour sgr, when colours are on.
func (t *runTerm) paint(sgr, s string) string {
	if !t.colour {
		return s
	}
	return sgr + s + sgrReset
}

// write writes s; t.mu is held. A terminal that is gone is noticed by the
// reader, not here.
func (t *runTerm) write(s string) {
	if s != "" {
		io.WriteString(t.out, s)
		t.midLine = !strings.HasSuffix(s, "\n")
	}
}

// freshLine ends the line being written, if one is; t.mu is held.
func (t *runTerm) freshLine() {
	if t.midLine {
		t.write("\n")
	}
}

// endLine ends the line being written, if one is.
func (t *runTerm) endLine() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
}

// notef shows a note of run's own on a line of its own.
func (t *runTerm) notef(format string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	t.write(t.paint(sgrDim, visibleText(fmt.Sprintf(format, a...))) + "\n")
}

// promptLine shows the prompt mark on a line of its own.
func (t *runTerm) promptLine() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	t.write(t.paint(sgrBold, termPromptMark))
}

// lineRead notes that the kernel echoed the newline of a line read: the
// cursor is at the start of a line.
func (t *runTerm) lineRead() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.midLine = false
}

// leftMidLine notes that the cursor stays where typing left it: after the
// kernel's ^C, after Ctrl-D, which it does not echo, or after the prompt
// mark.
func (t *runTerm) leftMidLine() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.midLine = true
}

// text shows model text as it streams, its line breaks kept.
func (t *runTerm) text(s string) {
	if s == "" {
		return
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		lines[i] = termLine(line)
	}
	t.write(strings.Join(lines, "\n"))
}

// termLine is one line of text as the terminal shows it: a CR before its
// end dropped, tabs as spaces, every other control character visible.
func termLine(s string) string {
	s = strings.TrimSuffix(s, "\r")
	return visibleText(strings.ReplaceAll(s, "\t", "    "))
}

// toolCall shows a call as it is proposed: its tool, its arguments and,
// for an edit, its diff.
func (t *runTerm) toolCall(u runUpdate) {
	t.freshLine()
	name := cmp.Or(u.Meta.ToolName, u.Title, "tool")
	t.shown[u.ToolCallID] = name
	t.write(t.paint(sgrBold, "* "+visibleText(name)) + " " + termArgs(u.RawInput) + "\n")
	var items []runToolContent
	json.Unmarshal(u.Content, &items)
	for _, it := range items {
		if it.Type == "diff" {
			t.diff(it)
		}
	}
}

// termArgs is a call's arguments on one line: compact JSON in which every
// character visibleText would escape is written as JSON's own \u escape
// (the same value, shown inert, its backslashes as JSON has them), within
// maxTermArgsBytes. Arguments that are not JSON go through visibleText.
func termArgs(raw json.RawMessage) string {
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return visibleText(termBounded(string(raw)))
	}
	s := termBounded(compact.String())
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case visibleRune(r, n) || r == '\\':
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\ufffd`)
		default:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		}
		i += n
	}
	return b.String()
}

// termBounded is s within maxTermArgsBytes, cut at a character's start,
// the bytes left out counted.
func termBounded(s string) string {
	if len(s) <= maxTermArgsBytes {
		return s
	}
	cut := maxTermArgsBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s ... (%d more bytes)", s[:cut], len(s)-cut)
}

// diff shows an edit's change: the lines between the texts' common first
// and last lines, removed then added, within maxTermDiffLines.
func (t *runTerm) diff(d runToolContent) {
	head := "  ~ " + visibleText(d.Path)
	// The agent sends "" for a file that does not exist yet, as Qwen Code
	// does (an empty file looks the same); null from another agent.
	if d.OldText == nil || *d.OldText == "" {
		head += " (new file)"
	}
	t.write(head + "\n")
	removed, added := termDiffLines(d.OldText, d.NewText)
	shown := 0
	for _, part := range []struct {
		mark, sgr string
		lines     []string
	}{{"-", sgrRed, removed}, {"+", sgrGreen, added}} {
		for _, line := range part.lines {
			if shown == maxTermDiffLines {
				break
			}
			t.write(t.paint(part.sgr, "  "+part.mark+" "+termLine(line)) + "\n")
			shown++
		}
	}
	if rest := len(removed) + len(added) - shown; rest > 0 {
		t.write(fmt.Sprintf("  ... %d more lines\n", rest))
	}
}

// termDiffLines are the lines an edit of oldText (nil: none) into newText
// removed and added, between the lines both start and end with.
func termDiffLines(oldText *string, newText string) (removed, added []string) {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	var old []string
	if oldText != nil {
		old = split(*oldText)
	}
	cur := split(newText)
	p := 0
	for p < len(old) && p < len(cur) && old[p] == cur[p] {
		p++
	}
	s := 0
	for s < len(old)-p && s < len(cur)-p && old[len(old)-1-s] == cur[len(cur)-1-s] {
		s++
	}
	return old[p : len(old)-s], cur[p : len(cur)-s]
}

// toolUpdate shows how a call goes on: allowed and running, or its end
// (its output; the reason of a denial).
func (t *runTerm) toolUpdate(u runUpdate) {
	if u.Meta.ShellOutput != nil {
		return
	}
	name, ok := t.shown[u.ToolCallID]
	if !ok {
		name = cmp.Or(u.Meta.ToolName, u.Title, "tool")
	}
	var text strings.Builder
	var items []runToolContent
	json.Unmarshal(u.Content, &items)
	for _, it := range items {
		if it.Type == "content" {
			text.WriteString(it.Content.Text)
		}
	}
	var out struct {
		ErrorType string `json:"errorType"`
		Status    string `json:"status"`  // a cancelled call's
		Outcome   string `json:"outcome"` // a shell command's
	}
	json.Unmarshal(u.RawOutput, &out)
	label := "  " + visibleText(name) + ": "
	switch u.Status {
	case "in_progress":
		t.freshLine()
		t.write(label + t.paint(sgrGreen, "allowed") + ", running\n")
		return
	case "completed":
		t.freshLine()
		t.write(label + "completed\n")
		t.output(text.String())
	case "failed":
		t.freshLine()
		switch {
		case out.Status == statusCancelled || out.Outcome == shellOutcomeCancelled:
			t.write(label + t.paint(sgrDim, "cancelled") + "\n")
			t.output(text.String())
		case out.ErrorType == errTypeExecutionDenied:
			reason, rest, _ := strings.Cut(text.String(), "\n")
			t.write(label + t.paint(sgrRed, "denied") + ": " + termLine(reason) + "\n")
			t.output(rest)
		default:
			t.write(label + t.paint(sgrRed, "failed") + "\n")
			t.output(text.String())
		}
	default:
		return
	}
	delete(t.shown, u.ToolCallID)
}

// output shows a call's output behind the gutter, within
// maxTermOutputLines.
func (t *runTerm) output(s string) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if i == maxTermOutputLines {
			t.write(fmt.Sprintf("%s... %d more lines\n", termGutter, len(lines)-i))
			break
		}
		t.write(termGutter + termLine(line) + "\n")
	}
}

// ask shows a permission question: the tool, its arguments, the options
// by number, and the letters that choose them.
func (t *runTerm) ask(q *runQuestion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	title := ""
	if q.title != "" && q.title != q.tool {
		title = " (" + visibleText(q.title) + ")"
	}
	t.write(t.paint(sgrBold, "? allow "+visibleText(cmp.Or(q.tool, "tool"))) + title + " " + termArgs(q.input) + "\n")
	for i, o := range q.options {
		t.write(fmt.Sprintf("  %d  %s\n", i+1, visibleText(o.Name)))
	}
	t.write(t.question(q))
}

// askAgain repeats what a question takes, after an answer it does not.
func (t *runTerm) askAgain(q *runQuestion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	t.write(t.question(q))
}

// question is the line that asks for an answer.
func (t *runTerm) question(q *runQuestion) string {
	var keys []string
	for _, o := range q.options {
		if k, ok := termOptionKeys[o.Kind]; ok {
			keys = append(keys, k[0])
		}
	}
	s := "answer 1-" + strconv.Itoa(len(q.options))
	if len(keys) > 0 {
		s += " or " + strings.Join(keys, "/")
	}
	return t.paint(sgrBold, s+": ")
}

// answered shows the option chosen.
func (t *runTerm) answered(o *permissionOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	sgr := sgrGreen
	if o.Kind == kindRejectOnce {
		sgr = sgrRed
	}
	t.write("  " + t.paint(sgr, visibleText(o.Name)) + "\n")
}

// failed shows that the prompt failed, and why.
func (t *runTerm) failed(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	t.write(t.paint(sgrRed, "error: "+termLine(msg)) + "\n")
}

// turnEnded shows how a turn ended, when not at its end.
func (t *runTerm) turnEnded(stop string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freshLine()
	switch stop {
	case stopEndTurn:
	case stopCancelled:
		t.write(t.paint(sgrDim, "turn cancelled") + "\n")
	case stopMaxTurnRequests:
		t.write(t.paint(sgrRed, "turn limit reached (model.maxSessionTurns): the prompt ended") + "\n")
	default:
		t.write(t.paint(sgrDim, "turn ended: "+visibleText(stop)) + "\n")
	}
}
