// tools_shell.go owns run_shell_command: bash -c in its own process group,
// in the foreground with a timeout or in the background set of the session.
package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
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
	timedOut, err := runGroup(ctx, cmd, env.Sandbox, out, nil, timeout, nil)
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	code := cmd.ProcessState.ExitCode()
	raw := map[string]any{"exitCode": code, "pid": cmd.Process.Pid}
	text := out.String()
	switch {
	case ctx.Err() != nil:
		return toolResult{Status: statusCancelled, Output: text + "\n[command cancelled]", RawOutput: raw}
	case timedOut:
		raw["timedOut"] = true
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[command timed out after %d ms and was killed]", text, timeout.Milliseconds())}
	case code < 0:
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[command ended: %v]", text, cmd.ProcessState)}
	case code != 0:
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[exit code %d]", text, code)}
	}
	return completed(fmt.Sprintf("%s\n[exit code 0]", text), raw)
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
}

// start starts cmd in its own process group in sb and tracks it until it
// exits. Its output goes nowhere: nobody would read it.
func (p *processSet) start(cmd *exec.Cmd, sb *sandboxSession) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errors.New("the session is ending; no new background process starts")
	}
	g, err := startGroup(cmd, sb, nil)
	if err != nil {
		return 0, err
	}
	if p.groups == nil {
		p.groups = make(map[*procGroup]struct{})
	}
	p.groups[g] = struct{}{}
	p.wg.Go(func() {
		<-g.exited
		p.mu.Lock()
		delete(p.groups, g)
		p.mu.Unlock()
	})
	return cmd.Process.Pid, nil
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
