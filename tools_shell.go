// tools_shell.go owns run_shell_command: bash -c in its own process group,
// in the foreground with a timeout (its output shown live, tools_shell_live.go)
// or in the background set of the session, and its result text and rawOutput
// in Qwen Code's layout.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A foreground command's timeout in milliseconds: its default and its bound.
const (
	shellDefaultTimeoutMS = 120000
	shellMaxTimeoutMS     = 600000
)

// shellCmd builds `bash -c command` with the scrubbed environment and
// empty stdin, to run in its own process group.
func shellCmd(env *toolEnv, args map[string]any) (*exec.Cmd, error) {
	if env.Env == nil {
		return nil, errors.New("no process environment configured")
	}
	cmd := exec.Command("bash", "-c", argStr(args, "command"))
	cmd.Env = env.Env.childEnv(env.Sandbox.env()...) // never nil: nil would inherit everything
	cmd.Dir = argDir(env, args, "directory")
	return cmd, nil
}

func execShell(ctx context.Context, env *toolEnv, args map[string]any) toolResult {
	if argBool(args, "is_background") {
		return startBackground(env, args)
	}
	cmd, err := shellCmd(env, args)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	timeout := time.Duration(argInt(args, "timeout", shellDefaultTimeoutMS)) * time.Millisecond
	out := &limitedBuffer{max: maxToolOutput}
	var sink io.Writer = out
	if live := startLiveOutput(env); live != nil {
		sink = io.MultiWriter(out, live)
		defer live.close()
	}
	timedOut, err := runGroup(ctx, cmd, env.Sandbox, sink, nil, timeout, nil)
	command := argStr(args, "command")
	raw := shellRawOutput{Type: "shell_result", Version: 1, Directory: cmd.Dir, Notices: []string{}, OutputFiles: []string{}}
	if err != nil {
		msg := fmt.Sprintf("run shell command: %v", err)
		raw.Error, raw.Outcome, raw.Text = &msg, shellOutcomeFailed, "Command failed: "+msg
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: shellText(env, command, cmd.Dir, "", msg, nil, nil, nil)}
	}
	raw.Output, raw.Truncated, raw.PID = strings.TrimRight(out.String(), "\n"), out.truncated(), cmd.Process.Pid
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Exited() {
		code := ws.ExitStatus()
		raw.ExitCode = &code
	} else if ws.Signaled() {
		name := signalName(ws.Signal())
		raw.Signal = &name
	}
	switch {
	case ctx.Err() != nil:
		raw.Outcome, raw.Text = shellOutcomeCancelled, orText(raw.Output, "Command was cancelled by user before it could complete.")
		return toolResult{Status: statusCancelled, RawOutput: raw,
			Output: "Command was cancelled by user before it could complete." + shellBefore(raw.Output, "was cancelled")}
	case timedOut:
		msg := fmt.Sprintf("Command timed out after %dms before it could complete.", timeout.Milliseconds())
		raw.Outcome, raw.Text = shellOutcomeTimedOut, orText(raw.Output, msg)
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: msg + shellBefore(raw.Output, "timed out")}
	}
	var sig *int
	if ws.Signaled() {
		n := int(ws.Signal())
		sig = &n
	}
	text := shellText(env, command, cmd.Dir, raw.Output, "", raw.ExitCode, sig, &raw.PID)
	switch {
	case raw.Signal != nil:
		raw.Outcome, raw.Text = shellOutcomeFailed, orText(raw.Output, "Command terminated by signal: "+*raw.Signal)
	case raw.ExitCode != nil && *raw.ExitCode != 0:
		raw.Text = orText(raw.Output, fmt.Sprintf("Command exited with code: %d", *raw.ExitCode))
		if shellExitFails(command, *raw.ExitCode) {
			raw.Outcome = shellOutcomeFailed
		}
	default:
		raw.Text = raw.Output
	}
	if raw.Outcome == shellOutcomeFailed {
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw, Output: text}
	}
	raw.Outcome = shellOutcomeCompleted
	return completed(text, raw)
}

// shellRawOutput is a foreground call's rawOutput, with Qwen Code's keys
// and values (DESIGN.md §7): outcome is one of the shellOutcome values,
// truncated says acpguard's output limit cut the output.
type shellRawOutput struct {
	Type        string   `json:"type"`
	Version     int      `json:"version"`
	Text        string   `json:"text"`
	Output      string   `json:"output"`
	Directory   string   `json:"directory"`
	ExitCode    *int     `json:"exitCode"`
	Signal      *string  `json:"signal"`
	PID         int      `json:"pid"`
	Error       *string  `json:"error"`
	Outcome     string   `json:"outcome"`
	Notices     []string `json:"notices"`
	Truncated   bool     `json:"truncated"`
	OutputFiles []string `json:"outputFiles"`
}

const (
	shellOutcomeCompleted = "completed"
	shellOutcomeFailed    = "failed"
	shellOutcomeCancelled = "cancelled"
	shellOutcomeTimedOut  = "timed_out"
)

// shellText is the text the model and the client see for a command that
// ran or failed to start, in Qwen Code's layout and placeholders.
func shellText(env *toolEnv, command, dir, output, errMsg string, code, sig, pgid *int) string {
	rel, root := "(root)", filepath.Clean(env.Cwd)
	if r, err := resolvedCwd(env); err == nil {
		root = r // the directory argument is resolved before it runs
	}
	if r, err := filepath.Rel(root, dir); err == nil && r != "." {
		rel = r
	}
	lines := []string{
		"Command: " + command,
		"Directory: " + rel,
		"Output: " + orText(output, "(empty)"),
		"Error: " + orText(errMsg, "(none)"),
		"Exit Code: " + orInt(code),
		"Signal: " + orInt(sig),
		"Process Group PGID: " + orInt(pgid),
	}
	return strings.Join(lines, "\n")
}

// shellBefore ends a timeout or cancel text with the output read before it.
func shellBefore(output, what string) string {
	if strings.TrimSpace(output) == "" {
		return " There was no output before it " + what + "."
	}
	return " Below is the output before it " + what + ":\n" + output
}

func orText(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	return s
}

func orInt(n *int) string {
	if n == nil {
		return "(none)"
	}
	return strconv.Itoa(*n)
}

// shellExitFails is Qwen Code's rule: an exit code of 2 or more fails the
// call, and 1 does too unless the command is one whose 1 means "no" rather
// than "broken" (no match, files differ, test false).
func shellExitFails(command string, code int) bool {
	if code != 1 {
		return code != 0
	}
	for _, w := range strings.Fields(command) {
		if strings.Contains(w, "=") && !strings.HasPrefix(w, "=") {
			continue // an environment assignment before the command
		}
		switch filepath.Base(w) {
		case "grep", "rg", "diff", "test", "[", "[[":
			return false
		}
		return true
	}
	return true
}

// signalNames name the signals a command usually dies of, as rawOutput
// reports them; another is reported by number.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return strconv.Itoa(int(s))
}

// truncated says whether the buffer dropped output.
func (b *limitedBuffer) truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped > 0
}

func startBackground(env *toolEnv, args map[string]any) toolResult {
	if env.Background == nil {
		return failed(errTypeExecutionFailed, "run shell command: background processes are not available in this session")
	}
	cmd, err := shellCmd(env, args)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	pid, err := env.Background.start(cmd, env.Sandbox)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	return completed(fmt.Sprintf("Started background process %d", pid), map[string]any{"pid": pid, "background": true})
}

// processSet tracks the background process groups a session started, so
// that they end with it or with the process (DESIGN.md §9). The zero value is ready to use.
type processSet struct {
	mu     sync.Mutex
	groups map[*procGroup]struct{}
	closed bool
	wg     sync.WaitGroup // one per started process, done once it is reaped

	// notify, when set before the first start, hears each change between
	// none running and some running, numbered from 1 in the order they
	// happened: calls from different goroutines may cross, the highest
	// seq is the newest. The change to running is heard before start
	// returns.
	notify func(running bool, seq uint64)
	seq    uint64
}

// start starts cmd in its own process group in sb and tracks it until it
// exits. Its output goes nowhere: nobody would read it.
func (p *processSet) start(cmd *exec.Cmd, sb *sandboxSession) (int, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, errors.New("the session is ending; no new background process starts")
	}
	g, err := startGroup(cmd, sb, nil)
	if err != nil {
		p.mu.Unlock()
		return 0, err
	}
	if p.groups == nil {
		p.groups = make(map[*procGroup]struct{})
	}
	p.groups[g] = struct{}{}
	seq := p.changedLocked(len(p.groups) == 1)
	p.wg.Go(func() {
		<-g.exited
		p.mu.Lock()
		delete(p.groups, g)
		seq := p.changedLocked(len(p.groups) == 0)
		p.mu.Unlock()
		p.tell(false, seq)
	})
	p.mu.Unlock()
	p.tell(true, seq)
	return cmd.Process.Pid, nil
}

// changedLocked numbers a change when changed is true: 0 for none.
func (p *processSet) changedLocked(changed bool) uint64 {
	if !changed || p.notify == nil {
		return 0
	}
	p.seq++
	return p.seq
}

// tell hands notify the change numbered seq, if there was one.
func (p *processSet) tell(running bool, seq uint64) {
	if seq != 0 {
		p.notify(running, seq)
	}
}

// killAll ends every tracked process group, refuses new ones, and waits
// until every started process is reaped.
func (p *processSet) killAll() {
	p.mu.Lock()
	p.closed = true
	for g := range p.groups {
		g.signal(syscall.SIGKILL)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
