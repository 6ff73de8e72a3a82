// lifeline.go owns how an ACP runtime outlives its parent long enough to
// clean up: a broken output pipe is a shutdown, not a death by SIGPIPE, and
// a managed child is told by the kernel when serve dies, by a signal that
// runs its normal shutdown (prompts cancelled, tool and background process
// groups killed, MCP servers closed).
package main

import (
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
)

// childDeathSignal is what the kernel sends a managed child when serve dies
// (PR_SET_PDEATHSIG). SIGTERM, not SIGKILL: the child's shutdown ends its
// tool, background and MCP process groups before it exits, and nobody else
// is left to end them once serve is gone.
const childDeathSignal = syscall.SIGTERM

// catchBrokenPipe keeps a write to a closed stdout or stderr from killing
// the process. Go ends a program with SIGPIPE when such a write happens and
// nobody asked for the signal; once it is asked for, the write fails with
// EPIPE instead, and rpcConn treats that as the end of its input, so the
// shutdown runs. Notify rather than Ignore: an ignored signal stays ignored
// across exec, and tools must start with the default disposition.
func catchBrokenPipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// managedChildAttr is how serve starts every ACP child: as the leader of a
// session of its own, so that everything it starts without calling setsid
// shares its session id (reaper.go), and with the kernel's parent-death
// signal.
func managedChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: childDeathSignal}
}

// lifeline runs child starts on one OS thread that never exits. The kernel
// sends the parent-death signal when the thread that forked the child ends,
// not the process; Go ends a thread only when a goroutine locked to it
// returns, so a locked goroutine that never returns forks every child.
var lifeline struct {
	once sync.Once
	jobs chan func()
}

// onLifeline runs f on the lifeline thread and returns when it is done.
func onLifeline(f func()) {
	lifeline.once.Do(func() {
		lifeline.jobs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for job := range lifeline.jobs {
				job()
			}
		}()
	})
	done := make(chan struct{})
	lifeline.jobs <- func() { f(); close(done) }
	<-done
}

// startOnLifeline starts cmd from the lifeline thread.
func startOnLifeline(cmd *exec.Cmd) error {
	var err error
	onLifeline(func() { err = cmd.Start() })
	return err
}
