// reaper.go owns the last line of DESIGN.md §9: ending what a dead ACP
// child left behind. Every process a child starts (tools, hooks,
// MCP servers) runs in a process group of its own, so a child killed with
// SIGKILL cannot end them itself. Nothing is added to a child's environment
// to find them; the kernel keeps the facts instead:
//
//   - serve is a child subreaper, so a descendant of a child whose parent
//     dies is re-parented to serve, whatever its environment or session;
//   - each child leads a session of its own (lifeline.go), so every
//     descendant that did not call setsid carries the child's session id,
//     which /proc/<pid>/stat shows even for a process that is not dumpable.
//
// When a child is gone, serve ends every process of the child's session,
// every descendant of those, and every orphan re-parented to serve that
// escaped with setsid, together with the sessions all of those lead. It
// first stops them (a stopped process cannot fork) and looks again until no
// new one appears, then kills them, and reaps those that are now its own
// children with wait4 on each pid: never wait4(-1), which would take the
// statuses os/exec waits for.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	// reaperMaxRounds bounds the stop-and-look-again rounds of one child's
	// cleanup. A stopped process cannot fork, so two or three rounds are
	// the rule; the bound keeps a process that forks faster than the reaper
	// scans from holding it forever (whatever was found is still killed).
	reaperMaxRounds = 32
	// reaperSettle bounds the wait for signalled processes to stop or to
	// die: a process in uninterruptible sleep takes its signal late.
	reaperSettle = 5 * time.Second
	// reaperPoll is how often /proc is read while waiting for them.
	reaperPoll = 2 * time.Millisecond
)

// Linux interfaces the syscall package does not name; the system call
// numbers are the asm-generic ones, shared by amd64 and arm64.
const (
	sysPidfdSendSignal  = 424
	sysPidfdOpen        = 434
	prSetChildSubreaper = 36 // prctl PR_SET_CHILD_SUBREAPER
)

// pidfdLink is what /proc/self/fd/N reads for a pidfd.
const pidfdLink = "anon_inode:[pidfd]"

// heldPidfds returns the processes this process holds a pidfd for: os/exec
// keeps one for every child it started until Wait has reaped it, so these are
// the children that are somebody's to wait for.
func heldPidfds() map[int]bool {
	held := map[int]bool{}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return held
	}
	for _, e := range entries {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || link != pidfdLink {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for line := range bytes.Lines(info) {
			if v, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
				if pid, err := strconv.Atoi(string(bytes.TrimSpace(v))); err == nil && pid > 0 {
					held[pid] = true
				}
			}
		}
	}
	return held
}

// reaper is the process-wide state: serve's children are this process's.
var reaper struct {
	setup    sync.Once
	setupErr error

	// mu orders child starts against the reaper's decisions: a child is
	// registered before any scan can see it unregistered.
	mu      sync.Mutex
	started map[int]uint64 // pid -> start time of every child startChild started and forgetChild has not released
}

// enableReaper makes this process a child subreaper, once, and from then on
// reaps every orphan that dies while re-parented to it.
func enableReaper() error {
	reaper.setup.Do(func() {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
			reaper.setupErr = fmt.Errorf("become the reaper of orphaned descendants: prctl PR_SET_CHILD_SUBREAPER: %w", e)
			return
		}
		reaper.started = map[int]uint64{}
		chld := make(chan os.Signal, 1)
		signal.Notify(chld, syscall.SIGCHLD)
		go func() {
			for range chld {
				reapOrphans()
			}
		}()
	})
	return reaper.setupErr
}

// startChild starts a managed ACP child (lifeline.go says how) and registers
// it, so the reaper never takes it for an orphan.
func startChild(cmd *exec.Cmd) error {
	if err := enableReaper(); err != nil {
		return err
	}
	cmd.SysProcAttr = managedChildAttr()
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if err := startOnLifeline(cmd); err != nil {
		return err
	}
	// The child is not reaped before forgetChild, so its pid still names it.
	p, err := readProcStat(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("read the new child's start time: %w", err)
	}
	reaper.started[p.pid] = p.start
	return nil
}

// forgetChild releases a child once os/exec has reaped it.
func forgetChild(pid int) {
	reaper.mu.Lock()
	delete(reaper.started, pid)
	reaper.mu.Unlock()
}

// orphanLocked reports whether p is an orphan re-parented to this process:
// its child, not one os/exec or startChild started, outside this process's
// own session (a child's descendants never share it). reaper.mu is held.
func orphanLocked(p procInfo, self, selfSid int, held map[int]bool) bool {
	_, registered := reaper.started[p.pid]
	return p.ppid == self && !registered && !held[p.pid] && p.sid != selfSid
}

// doomedProc is one process a cleanup ends, pinned by a pidfd when the
// kernel gives one, so that a signal never reaches a process that took a
// dead one's pid.
type doomedProc struct {
	procInfo
	fd       int // pidfd, or -1
	wasAlive bool
}

func (d *doomedProc) signal(sig syscall.Signal) {
	if d.fd >= 0 {
		syscall.Syscall6(sysPidfdSendSignal, uintptr(d.fd), uintptr(sig), 0, 0, 0, 0)
		return
	}
	syscall.Kill(d.pid, sig)
}

// current reports whether the process d names still exists, and its state.
func (d *doomedProc) current() (procInfo, bool) {
	p, err := readProcStat(d.pid)
	if err != nil || p.start != d.start {
		return procInfo{}, false
	}
	return p, true
}

// pin opens a pidfd for p and confirms it names the process scanned.
func pin(p procInfo) *doomedProc {
	d := &doomedProc{procInfo: p, fd: -1, wasAlive: !p.dead()}
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(p.pid), 0, 0)
	if e != 0 {
		if e == syscall.ESRCH {
			return nil
		}
		return d // no pidfd: signals go by pid, checked by start time
	}
	d.fd = int(fd)
	syscall.CloseOnExec(d.fd)
	if _, ok := d.current(); !ok {
		syscall.Close(d.fd)
		return nil // gone, or its pid already names another process
	}
	return d
}

// endLeftBehind ends what the child with this pid left behind and returns
// how many running processes it ended. Call it after the child has exited
// and before os/exec reaps it: the unreaped child keeps its pid, and with it
// its session id, from being reused.
func endLeftBehind(child int) int {
	reaper.mu.Lock()
	since, ok := reaper.started[child]
	reaper.mu.Unlock()
	if !ok {
		return 0
	}
	c := &cleanup{
		child: child, self: os.Getpid(), selfSid: ownSession(), since: since,
		doomed:   map[int]*doomedProc{},
		sessions: map[int]bool{child: true},
	}
	defer c.close()
	for range reaperMaxRounds {
		fresh := c.stopRound()
		if len(fresh) == 0 {
			break
		}
		settle(fresh, func(p procInfo) bool { return p.dead() || p.state == 'T' || p.state == 't' })
	}
	return c.kill()
}

// cleanup is one child's cleanup: the processes found so far and the
// sessions they make part of it.
type cleanup struct {
	child, self, selfSid int
	since                uint64 // the child's start time
	doomed               map[int]*doomedProc
	sessions             map[int]bool
}

// close releases the pidfds the cleanup holds.
func (c *cleanup) close() {
	for _, d := range c.doomed {
		if d.fd >= 0 {
			syscall.Close(d.fd)
		}
	}
}

// belongs decides one process of a scan; byPid is the scan. reaper.mu is
// held.
func (c *cleanup) belongs(p procInfo, byPid map[int]procInfo, held map[int]bool) bool {
	_, registered := reaper.started[p.pid]
	switch {
	case p.pid == c.self || p.pid == c.child || registered || held[p.pid]:
		return false
	case p.sid == c.selfSid || p.sid == 0 || p.start < c.since:
		// Every descendant of the child started after it, outside
		// serve's session.
		return false
	case c.sessions[p.sid]:
		return true
	}
	if parent, ok := c.doomed[p.ppid]; ok {
		if now, ok := byPid[p.ppid]; ok && now.start == parent.start {
			return true
		}
	}
	return orphanLocked(p, c.self, c.selfSid, held)
}

// stopRound scans the processes once, adds every one that belongs until
// none is added, stops the new ones that run, and returns them.
func (c *cleanup) stopRound() []*doomedProc {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	procs := scanProcs()
	held := heldPidfds()
	byPid := make(map[int]procInfo, len(procs))
	for _, p := range procs {
		byPid[p.pid] = p
	}
	var fresh []*doomedProc
	for grew := true; grew; {
		grew = false
		for _, p := range procs {
			old := c.doomed[p.pid]
			if old != nil && old.start == p.start {
				continue
			}
			if !c.belongs(p, byPid, held) {
				continue
			}
			d := pin(p)
			if d == nil {
				continue
			}
			if old != nil && old.fd >= 0 {
				syscall.Close(old.fd) // that one is gone: its pid names p now
			}
			c.doomed[p.pid] = d
			c.sessions[p.sid] = true
			fresh = append(fresh, d)
			grew = true
		}
	}
	for _, d := range fresh {
		if d.wasAlive {
			d.signal(syscall.SIGSTOP)
		}
	}
	return fresh
}

// kill kills every process found, waits for them to die, reaps those that
// died as this process's children, and returns how many were running.
func (c *cleanup) kill() int {
	all := make([]*doomedProc, 0, len(c.doomed))
	n := 0
	for _, d := range c.doomed {
		all = append(all, d)
		if d.wasAlive {
			d.signal(syscall.SIGKILL)
			n++
		}
	}
	settle(all, procInfo.dead)

	// What died as a child of this process (re-parented to it, or its
	// parent died first) is a zombie now: reap it by its own pid.
	reaper.mu.Lock()
	for _, d := range all {
		if p, ok := d.current(); ok && p.dead() && p.ppid == c.self {
			var ws syscall.WaitStatus
			syscall.Wait4(d.pid, &ws, syscall.WNOHANG, nil)
		}
	}
	reaper.mu.Unlock()
	return n
}

// settle waits, up to reaperSettle, until every process is done (by done)
// or gone.
func settle(procs []*doomedProc, done func(procInfo) bool) {
	deadline := time.Now().Add(reaperSettle)
	for _, d := range procs {
		for {
			p, ok := d.current()
			if !ok || done(p) || time.Now().After(deadline) {
				break
			}
			time.Sleep(reaperPoll)
		}
	}
}

// reapOrphans reaps every orphan that died while re-parented to this
// process; nobody else will.
func reapOrphans() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	self := os.Getpid()
	selfSid := ownSession()
	var held map[int]bool
	for _, pid := range childrenOfSelf() {
		p, err := readProcStat(pid)
		if err != nil || p.ppid != self || !p.dead() {
			continue
		}
		if held == nil {
			held = heldPidfds()
		}
		if orphanLocked(p, self, selfSid, held) {
			var ws syscall.WaitStatus
			syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// childrenOfSelf lists this process's children, from every thread's
// children file: the kernel may hand an orphan to any thread of a subreaper.
// A file that cannot be read is skipped: the next SIGCHLD looks again.
func childrenOfSelf() []int {
	var r childReader
	kids, _ := r.childrenOf("self")
	return kids
}

// ownSession returns this process's session id.
func ownSession() int {
	sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	return int(sid)
}

// endOwnSession kills every other process of this process's session when
// it leads one, as every child of serve does: they are all its descendants,
// and once it is gone nobody else could tell. A process that left for a
// process group of its own inside the session is ended with the rest.
func endOwnSession() int {
	self := os.Getpid()
	if ownSession() != self {
		return 0
	}
	n := 0
	for range reaperMaxRounds {
		found := 0
		for _, p := range scanProcs() {
			if p.sid != self || p.pid == self || p.dead() {
				continue
			}
			if d := pin(p); d != nil {
				d.signal(syscall.SIGKILL)
				if d.fd >= 0 {
					syscall.Close(d.fd)
				}
				found++
			}
		}
		if found == 0 {
			break
		}
		n += found
		time.Sleep(reaperPoll) // a killed process takes a moment to die
	}
	return n
}
