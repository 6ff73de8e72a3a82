// tools_shell.go owns run_shell_command: bash -c in its own process group,
// in the foreground with a timeout or in the background set of the session.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// "a timeout (default 120 s, max 600 s)", given in milliseconds.
const (
	shellDefaultTimeoutMS = 120000
	shellMaxTimeoutMS     = 600000
)

// shellDrainGrace bounds how long output is still read after a shell's
// process group was killed: a descendant that left the group may hold the pipe.
const shellDrainGrace = 2 * time.Second

func shellDir(env *toolEnv, args map[string]any) string {
	if d := argStr(args, "directory"); d != "" {
		return d
	}
	return filepath.Clean(env.Cwd)
}

// shellCmd builds `bash -c command` in its own process group, with the
// scrubbed environment and empty stdin.
func shellCmd(env *toolEnv, args map[string]any) (*exec.Cmd, error) {
	if env.Env == nil {
		return nil, errors.New("no process environment configured")
	}
	cmd := exec.Command("bash", "-c", argStr(args, "command"))
	cmd.Env = env.Env.childEnv(env.Sandbox.env()...) // never nil: nil would inherit everything
	cmd.Dir = shellDir(env, args)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Our own pipe: Wait then returns when bash exits, not when the last
	// descendant holding the pipe does, and the reader is bounded by a deadline.
	r, w, err := os.Pipe()
	if err != nil {
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	out := &limitedBuffer{max: maxToolOutput}
	if err := env.Sandbox.start(cmd); err != nil {
		w.Close()
		return failed(errTypeExecutionFailed, "run shell command: %v", err)
	}
	w.Close()
	pgid := cmd.Process.Pid
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, r)
	}()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExited(pgid)
	}()
	select {
	case <-exited:
	case <-tctx.Done():
	}
	// Kill the whole group before bash is reaped: its pid, and so the group
	// id, cannot be reused while it is an unreaped zombie.
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	werr := cmd.Wait()
	r.SetReadDeadline(time.Now().Add(shellDrainGrace))
	<-copied

	code := cmd.ProcessState.ExitCode()
	raw := map[string]any{"exitCode": code, "pid": pgid}
	text := out.String()
	switch {
	case ctx.Err() != nil:
		return toolResult{Status: statusCancelled, Output: text + "\n[command cancelled]", RawOutput: raw}
	case tctx.Err() != nil:
		raw["timedOut"] = true
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[command timed out after %d ms and was killed]", text, timeout.Milliseconds())}
	case werr != nil && code < 0:
		return toolResult{Status: statusFailed, ErrorType: errTypeExecutionFailed, RawOutput: raw,
			Output: fmt.Sprintf("%s\n[command ended: %v]", text, werr)}
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
// that they end with it: "the runtime kills it when the session ends or the
// process exits". The zero value is ready to use.
type processSet struct {
	mu     sync.Mutex
	pgids  map[int]struct{}
	closed bool
	wg     sync.WaitGroup // one reaper per started process
}

// start starts cmd (already in its own process group) in sb and tracks it
// until it exits. Its output goes nowhere: nobody would read it.
func (p *processSet) start(cmd *exec.Cmd, sb *sandboxSession) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errors.New("the session is ending; no new background process starts")
	}
	if err := sb.start(cmd); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	if p.pgids == nil {
		p.pgids = make(map[int]struct{})
	}
	p.pgids[pid] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		waitExited(pid)
		p.mu.Lock()
		delete(p.pgids, pid)
		// The leader is gone; what it left in its group goes with it.
		syscall.Kill(-pid, syscall.SIGKILL)
		p.mu.Unlock()
		cmd.Wait()
	}()
	return pid, nil
}

// killAll ends every tracked process group, refuses new ones, and waits
// until every started process is reaped.
func (p *processSet) killAll() {
	p.mu.Lock()
	p.closed = true
	for pgid := range p.pgids {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
