// sandbox_stage.go owns the mount stage (DESIGN.md §5): the short-lived
// acpguard process a confined start re-executes itself into when its session
// has protected paths beneath a writable root (sandbox_protect.go), and the
// plan it reads. Whether this system lets it work is probed where the
// sandbox in force is found (sandbox_report.go).
//
// Landlock only grants, so a writable directory cannot hold a read-only
// path; a private mount namespace can. unshare(CLONE_NEWUSER) fails with
// EINVAL in a multithreaded process, and mounting must come before the
// Landlock domain (a domain forbids mount), so the launcher starts
// /proc/self/exe with clone flags for a new user namespace, which maps the
// caller's own uid and gid, and a new mount namespace, keeping CAP_SYS_ADMIN
// (with CAP_SETUID, CAP_SETGID and CAP_SETPCAP) of that namespace across
// the exec as ambient capabilities. The stage
// reads its plan from an inherited socket (never from its environment or
// argv), writes its own uid and gid maps (acp is not dumpable, so its
// /proc entries, and those of a child not yet exec'd, are root's: it could
// not write them for the child), clones every tree it will mount before it mounts any, makes the
// protected ones read-only, attaches them shallowest first, enters the
// command's directory again so that its cwd is the covered one, drops every
// capability, installs the seccomp filter and the Landlock domain on its
// thread, and execs the command from that thread. It writes the failing
// step back on the socket and exits instead: the command never runs
// unconfined or unprotected.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// sandboxStageArg is argv[1] of the stage. A tool that runs acpguard with
// it gains nothing: it reads its plan from a descriptor the tool gives it,
// and inside a Landlock domain it may not mount.
const sandboxStageArg = "__sandbox-stage"

// The stage's inherited descriptors: the plan socket, then the Landlock
// ruleset.
const (
	stageChannelFd = 3
	stageRulesetFd = 4
)

// maxStagePlanBytes bounds the plan the stage reads: an environment and
// argv the kernel would take (ARG_MAX is 2 MiB on Linux) and the mounts.
const maxStagePlanBytes = 4 << 20

// maxStageErrorBytes bounds the failure text the launcher reads back.
const maxStageErrorBytes = 4096

// stageTimeout bounds the launcher's wait for the stage, from its start to
// its exec: the stage mounts in milliseconds, but an open_tree over a hung
// network filesystem must not hold a tool's start, and with it the session,
// for ever. A stage past it is killed and the start fails. A variable, so
// that a test can play a stage that hangs.
var stageTimeout = 30 * time.Second

// stageExitFailed is the stage's exit status when a step failed; the
// launcher reaps it and reports the step instead.
const stageExitFailed = 126

// stageMount is one bind mount of the plan: the tree at Path cloned and
// attached over itself, read-only or not (a writable one pins the name:
// a mount point cannot be renamed or removed).
type stageMount struct {
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly"`
}

// stagePlan is what the launcher sends the stage.
type stagePlan struct {
	// Path, Args, Env and Dir are the command's; Path "" is the probe,
	// which mounts and exits 0.
	Path   string       `json:"path"`
	Args   []string     `json:"args"`
	Env    []string     `json:"env"`
	Dir    string       `json:"dir"`
	Mounts []stageMount `json:"mounts"`
	// UID and GID are the launcher's, mapped to themselves.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// DenyUnix and DenyNetwork choose the seccomp filter (socketFilter).
	DenyUnix    bool `json:"denyUnix"`
	DenyNetwork bool `json:"denyNetwork"`
}

// Mount API system calls (Linux 5.12, older than Landlock ABI 1) and their
// flags; the numbers are the same on x86-64 and arm64.
const (
	sysOpenTree         = 428
	sysMoveMount        = 429
	sysMountSetattr     = 442
	openTreeClone       = 0x1     // OPEN_TREE_CLONE
	openTreeCloexec     = 0x80000 // OPEN_TREE_CLOEXEC (O_CLOEXEC)
	atRecursive         = 0x8000  // AT_RECURSIVE
	atSymlinkNoFollow   = 0x100   // AT_SYMLINK_NOFOLLOW
	atEmptyPath         = 0x1000  // AT_EMPTY_PATH
	moveMountFEmptyPath = 0x4     // MOVE_MOUNT_F_EMPTY_PATH
	mountAttrRdonly     = 0x1     // MOUNT_ATTR_RDONLY
	capSetgid           = 6       // CAP_SETGID: to write the gid map
	capSetuid           = 7       // CAP_SETUID: to write the uid map
	capSysAdmin         = 21      // CAP_SYS_ADMIN: to mount
)

// runSandboxStageIfAsked runs the stage when this process is one; it does
// not return then. main and the test binary call it first.
func runSandboxStageIfAsked() {
	if len(os.Args) == 2 && os.Args[1] == sandboxStageArg {
		os.Exit(runSandboxStage())
	}
}

// runSandboxStage is the stage: it returns only on failure, after writing
// the failing step on the channel.
func runSandboxStage() int {
	runtime.LockOSThread()
	syscall.CloseOnExec(stageChannelFd)
	ch := os.NewFile(stageChannelFd, "sandbox-stage")
	fail := func(err error) int {
		ch.WriteString(err.Error())
		return stageExitFailed
	}
	data, err := io.ReadAll(io.LimitReader(ch, maxStagePlanBytes+1))
	if err != nil {
		return fail(fmt.Errorf("read the plan: %w", err))
	}
	if len(data) > maxStagePlanBytes {
		return fail(fmt.Errorf("read the plan: more than %d bytes", maxStagePlanBytes))
	}
	p, err := decodeStagePlan(data)
	if err != nil {
		return fail(err)
	}
	if err := writeIDMaps(p.UID, p.GID); err != nil {
		return fail(err)
	}
	if err := mountPlan(p.Mounts); err != nil {
		return fail(err)
	}
	if p.Path == "" {
		return 0 // the probe
	}
	syscall.CloseOnExec(stageRulesetFd)
	if p.Dir != "" {
		// The cwd the stage inherited is the directory under the mounts:
		// enter it again through them.
		if err := syscall.Chdir(p.Dir); err != nil {
			return fail(fmt.Errorf("enter %q again: %w", p.Dir, err))
		}
	}
	filter, err := socketFilter(runtime.GOARCH, p.DenyUnix, p.DenyNetwork)
	if err != nil {
		return fail(err)
	}
	if err := restrictThread(stageRulesetFd, filter); err != nil {
		return fail(err)
	}
	err = syscall.Exec(p.Path, p.Args, p.Env)
	return fail(&os.PathError{Op: "exec", Path: p.Path, Err: err})
}

// decodeStagePlan reads the plan the launcher sent, strictly: every
// member known, the mounts absolute and clean.
func decodeStagePlan(data []byte) (stagePlan, error) {
	var p stagePlan
	if err := decodeStrict(data, &p); err != nil {
		return stagePlan{}, fmt.Errorf("read the plan: %w", err)
	}
	for _, m := range p.Mounts {
		if !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path {
			return stagePlan{}, fmt.Errorf("read the plan: mount %q: want a clean absolute path", m.Path)
		}
	}
	return p, nil
}

// writeIDMaps maps uid and gid of the parent namespace to themselves in
// the stage's own, after refusing setgroups, as an unprivileged process may.
func writeIDMaps(uid, gid int) error {
	for _, w := range []struct{ file, data string }{
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1", uid, uid)},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1", gid, gid)},
	} {
		if err := os.WriteFile(w.file, []byte(w.data), 0); err != nil {
			return fmt.Errorf("map the user namespace: %w", err)
		}
	}
	return nil
}

// mountPlan clones every tree first, as the namespace began, so that a
// writable tree attached inside a read-only one is the original; then makes
// the read-only clones read-only, beneath too; then attaches them in order,
// shallowest first, each over its own path.
func mountPlan(mounts []stageMount) error {
	fds := make([]int, 0, len(mounts))
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for _, m := range mounts {
		fd, err := openTree(m.Path)
		if err != nil {
			return fmt.Errorf("mount %q: open_tree: %w", m.Path, err)
		}
		fds = append(fds, fd)
	}
	for i, m := range mounts {
		if !m.ReadOnly {
			continue
		}
		if err := mountSetReadOnly(fds[i]); err != nil {
			return fmt.Errorf("mount %q read-only: mount_setattr: %w", m.Path, err)
		}
	}
	for i, m := range mounts {
		if err := moveMount(fds[i], m.Path); err != nil {
			return fmt.Errorf("mount %q: move_mount: %w", m.Path, err)
		}
	}
	return nil
}

func openTree(path string) (int, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	fd, _, e := syscall.Syscall(sysOpenTree, uintptr(atFdcwd), uintptr(unsafe.Pointer(p)), openTreeClone|openTreeCloexec|atRecursive|atSymlinkNoFollow)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// atFdcwd is AT_FDCWD as the system call takes it.
var atFdcwd = -100

func mountSetReadOnly(fd int) error {
	// struct mount_attr: attr_set, attr_clr, propagation, userns_fd.
	attr := [4]uint64{mountAttrRdonly, 0, 0, 0}
	empty := [1]byte{}
	_, _, e := syscall.Syscall6(sysMountSetattr, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), atEmptyPath|atRecursive, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	runtime.KeepAlive(&attr)
	if e != 0 {
		return e
	}
	return nil
}

func moveMount(fd int, to string) error {
	p, err := syscall.BytePtrFromString(to)
	if err != nil {
		return err
	}
	empty := [1]byte{}
	_, _, e := syscall.Syscall6(sysMoveMount, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(atFdcwd), uintptr(unsafe.Pointer(p)), moveMountFEmptyPath, 0)
	if e != 0 {
		return e
	}
	return nil
}

// stageCmd turns cmd into a start of the stage: the stage's own path and
// argv, an empty environment (the command's travels in the plan), the
// namespaces and the ambient capability. It returns the plan and a restore
// that gives cmd back its own path and argv once started.
func stageCmd(cmd *exec.Cmd, mounts []stageMount, denyUnix, denyNetwork bool) (stagePlan, func(), error) {
	if len(cmd.ExtraFiles) > 0 {
		return stagePlan{}, nil, errors.New("a command with inherited files cannot go through the mount stage")
	}
	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	if attr.Cloneflags != 0 || attr.Credential != nil || attr.Chroot != "" || len(attr.UidMappings) > 0 || len(attr.AmbientCaps) > 0 {
		return stagePlan{}, nil, errors.New("a command with its own namespaces or credentials cannot go through the mount stage")
	}
	dir := cmd.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return stagePlan{}, nil, fmt.Errorf("the working directory: %w", err)
		}
		dir = wd
	}
	plan := stagePlan{Path: cmd.Path, Args: cmd.Args, Env: cmd.Environ(), Dir: dir, Mounts: mounts,
		UID: os.Getuid(), GID: os.Getgid(), DenyUnix: denyUnix, DenyNetwork: denyNetwork}
	attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	// CAP_SETPCAP lets restrictThread empty the bounding set, as it does for
	// a root launcher: the stage runs unmapped at its exec, so it gets only
	// what is ambient.
	attr.AmbientCaps = []uintptr{capSetgid, capSetuid, capSetPCap, capSysAdmin}
	path, args, sys := cmd.Path, cmd.Args, cmd.SysProcAttr
	cmd.Path, cmd.Args, cmd.SysProcAttr = stageExecutable, []string{stageExecutable, sandboxStageArg}, &attr
	// The stage's own environment is empty: the command's travels in the
	// plan, and stays there (cmd.Environ is the stage's once started).
	cmd.Env = (&procEnv{}).childEnv()
	restore := func() { cmd.Path, cmd.Args, cmd.SysProcAttr = path, args, sys }
	return plan, restore, nil
}

// stageExecutable is this very binary, whatever its name on disk now. A
// variable, so that a benchmark can time the release binary as the stage.
var stageExecutable = "/proc/self/exe"

// startStaged starts cmd through the mount stage with the session's
// ruleset (-1: none, the probe) and waits until the stage has either
// exec'd the command (its end of the channel closes on exec) or reported
// the step that failed, in which case the stage is reaped and that step is
// the error.
func startStaged(cmd *exec.Cmd, plan stagePlan, ruleset int) error {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair for the mount stage: %w", err)
	}
	// Non-blocking, so that the runtime's poller gives our end a deadline.
	if err := syscall.SetNonblock(pair[0], true); err != nil {
		syscall.Close(pair[0])
		syscall.Close(pair[1])
		return fmt.Errorf("socketpair for the mount stage: %w", err)
	}
	ours := os.NewFile(uintptr(pair[0]), "sandbox-stage")
	defer ours.Close()
	theirs := os.NewFile(uintptr(pair[1]), "sandbox-stage")
	files := []*os.File{theirs}
	if ruleset >= 0 {
		dup, err := fcntlDupCloexec(ruleset)
		if err != nil {
			theirs.Close()
			return fmt.Errorf("pass the Landlock ruleset: %w", err)
		}
		rf := os.NewFile(uintptr(dup), "landlock-ruleset")
		defer rf.Close()
		files = append(files, rf)
	}
	cmd.ExtraFiles = files
	err = cmd.Start()
	cmd.ExtraFiles = nil
	theirs.Close()
	if err != nil {
		return err
	}
	ours.SetDeadline(time.Now().Add(stageTimeout))
	data, err := json.Marshal(plan)
	if err == nil {
		_, err = ours.Write(data)
	}
	if err == nil {
		err = syscall.Shutdown(pair[0], syscall.SHUT_WR)
	}
	reply, rerr := io.ReadAll(io.LimitReader(ours, maxStageErrorBytes))
	if len(reply) == 0 && rerr == nil && err == nil {
		return nil
	}
	cmd.Process.Kill()
	cmd.Wait()
	switch {
	case len(reply) > 0:
		return errors.New(strings.ToValidUTF8(string(bytes.TrimSpace(reply)), "?"))
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(rerr, os.ErrDeadlineExceeded):
		return fmt.Errorf("the mount stage did not exec the command within %v (a mount that hangs?); it was killed", stageTimeout)
	case err != nil:
		return fmt.Errorf("send the mount stage its plan: %w", err)
	}
	return fmt.Errorf("read the mount stage's answer: %w", rerr)
}

// fcntlDupCloexec duplicates fd, close-on-exec.
func fcntlDupCloexec(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}
