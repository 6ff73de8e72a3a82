// proc.go owns the process groups every tool, hook and MCP server runs in:
// waiting without reaping, ending the group, and bounded output (DESIGN.md §9).
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// limitedBuffer keeps the first max bytes written and counts the rest, so
// a writer never blocks on or grows with a chatty producer. full, when not
// nil, is closed at the first byte dropped.
type limitedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
	full    chan struct{}
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := min(len(p), b.max-b.buf.Len())
	b.buf.Write(p[:keep])
	if b.full != nil && b.dropped == 0 && keep < len(p) {
		close(b.full)
	}
	b.dropped += int64(len(p) - keep)
	return len(p), nil
}

func (b *limitedBuffer) WriteString(s string) (int, error) {
	return b.Write([]byte(s))
}

// String returns what was kept and, when something was dropped, a note saying so.
func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return b.buf.String()
	}
	return fmt.Sprintf("%s\n[output truncated at %d bytes; %d bytes dropped]", b.buf.String(), b.max, b.dropped)
}

// pidTypePID is waitid's P_PID.
const pidTypePID = 1

// waitExited blocks until process pid has exited, leaving it unreaped
// (WNOWAIT) so that its pid stays reserved until cmd.Wait reaps it.
func waitExited(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pidTypePID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// procDrainGrace bounds how long output is still read after a process
// group was killed: a descendant that left the group may hold the pipe.
const procDrainGrace = 2 * time.Second

// procGroup is a started process that leads its own process group. Its
// watcher waits for the leader to exit without reaping it, kills the whole
// group while the leader is an unreaped zombie (so the group id cannot name
// a newer group yet), then reaps the leader.
type procGroup struct {
	cmd    *exec.Cmd
	mu     sync.Mutex // guards reaped against signalling a reused group id
	reaped bool
	exited chan struct{} // the group was killed and the leader reaped
}

// startGroup starts cmd through sb as the leader of a new process group and
// watches it. onExit, when not nil, runs once the leader has exited, before
// its group is killed.
func startGroup(cmd *exec.Cmd, sb *sandboxSession, onExit func()) (*procGroup, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := sb.start(cmd); err != nil {
		return nil, err
	}
	g := &procGroup{cmd: cmd, exited: make(chan struct{})}
	go func() {
		waitExited(cmd.Process.Pid)
		if onExit != nil {
			onExit()
		}
		g.mu.Lock()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		g.reaped = true
		g.mu.Unlock()
		cmd.Wait()
		close(g.exited)
	}()
	return g, nil
}

// signal sends sig to the whole group unless its leader was reaped.
func (g *procGroup) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.reaped {
		syscall.Kill(-g.cmd.Process.Pid, sig)
	}
}

// runGroup runs cmd through sb as the leader of its own process group, its
// stdout and stderr (stderr nil: stdout's pipe) copied into the writers
// through pipes of our own, so that it returns when the leader exits, not
// when the last descendant holding a pipe does. It waits until the leader
// exits, ctx ends, timeout passes or stop is closed (nil: never); then the
// group is killed, the leader reaped, and output read for procDrainGrace at
// most. err is a start error; the run's own outcome is in cmd.ProcessState.
func runGroup(ctx context.Context, cmd *exec.Cmd, sb *sandboxSession, stdout, stderr io.Writer, timeout time.Duration, stop <-chan struct{}) (timedOut bool, err error) {
	sinks := []io.Writer{stdout}
	if stderr != nil {
		sinks = append(sinks, stderr)
	}
	var reads, writes []*os.File
	defer func() {
		for _, f := range append(reads, writes...) {
			f.Close()
		}
	}()
	for range sinks {
		r, w, err := os.Pipe()
		if err != nil {
			return false, err
		}
		reads, writes = append(reads, r), append(writes, w)
	}
	cmd.Stdout, cmd.Stderr = writes[0], writes[len(writes)-1]
	g, err := startGroup(cmd, sb, nil)
	for _, w := range writes {
		w.Close()
	}
	writes = nil
	if err != nil {
		return false, err
	}
	var copies sync.WaitGroup
	for i, r := range reads {
		copies.Go(func() { io.Copy(sinks[i], r) })
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-g.exited:
	case <-timer.C:
		timedOut = true
	case <-stop:
	case <-ctx.Done():
	}
	g.signal(syscall.SIGKILL)
	<-g.exited
	deadline := time.Now().Add(procDrainGrace)
	for _, r := range reads {
		r.SetReadDeadline(deadline)
	}
	copies.Wait()
	return timedOut, nil
}
