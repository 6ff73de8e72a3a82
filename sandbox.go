// sandbox.go owns the enforcement of the sandbox: the per-session Landlock
// ruleset and temp directory, the seccomp filter that refuses sockets,
// the capability drop, and the one launcher that every process a tool, a
// PreToolUse hook or an MCP server runs is started through.
//
// How a process enters the sandbox: Go runs no code of ours between fork
// and exec, but no_new_privs, the capability sets, a seccomp filter and a
// Landlock domain all belong to one thread, and a child inherits the state
// of the thread that forked it. So the launcher starts the process from a
// fresh goroutine locked to its OS thread, restricts that thread first, and
// returns without unlocking it: the runtime then ends the thread with the
// goroutine, and no other Go code ever runs restricted. os/exec forks on the
// calling thread (sandbox_test.go proves it). The other way, a hidden
// re-exec of acpguard that restricts itself and execs the command, costs a
// whole process start (sandbox_bench_test.go measures both).
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// Landlock system calls beside sysLandlockCreateRuleset (sandbox_config.go);
// the numbers are the same on x86-64 and arm64.
const (
	sysLandlockAddRule      = 445
	sysLandlockRestrictSelf = 446
	landlockRulePathBeneath = 1 // LANDLOCK_RULE_PATH_BENEATH
)

// Landlock filesystem rights (LANDLOCK_ACCESS_FS_*), by the ABI that
// introduced them. A ruleset may handle only the rights its kernel's ABI
// knows, or landlock_create_ruleset fails.
const (
	llExecute    = 1 << 0 // ABI 1
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llRemoveDir  = 1 << 4
	llRemoveFile = 1 << 5
	llMakeChar   = 1 << 6
	llMakeDir    = 1 << 7
	llMakeReg    = 1 << 8
	llMakeSock   = 1 << 9
	llMakeFifo   = 1 << 10
	llMakeBlock  = 1 << 11
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2: link and rename across directories
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5

	// Rights a rule on a file (not a directory) may grant.
	llFileRights = llExecute | llWriteFile | llReadFile | llTruncate | llIoctlDev
	// Reading and executing, what the whole filesystem (or --sandbox-read) gets.
	llReadRights = llExecute | llReadFile | llReadDir
	// Device nodes: a process that may make a block device can write to any
	// disk, so no directory grants these, the workspace included.
	llDeviceNodes = llMakeChar | llMakeBlock
)

// Landlock network rights (ABI 4) and scopes (ABI 6).
const (
	llNetBindTCP      = 1 << 0
	llNetConnectTCP   = 1 << 1
	llScopeAbstractUn = 1 << 0 // abstract Unix sockets of processes outside the domain
	llScopeSignal     = 1 << 1 // signals to processes outside the domain

	landlockABINetwork = 4
	landlockABIScope   = 6
)

// landlockHandledFS is every filesystem right the kernel's ABI knows: the
// ruleset handles them all, so what no rule grants is denied.
func landlockHandledFS(abi int) uint64 {
	fs := uint64(llExecute | llWriteFile | llReadFile | llReadDir | llRemoveDir | llRemoveFile |
		llMakeChar | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym)
	if abi >= 2 {
		fs |= llRefer
	}
	if abi >= 3 {
		fs |= llTruncate
	}
	if abi >= 5 {
		fs |= llIoctlDev
	}
	return fs
}

// sandboxDevices are the character devices a shell writes to; they get file
// rules of their own, never the right to make one. With ABI 5 they also get
// ioctl, except the terminal: TIOCSTI on it would type commands into the
// shell of a user whose terminal is acpguard's controlling one.
var sandboxDevices = []struct {
	path  string
	ioctl bool
}{{"/dev/null", true}, {"/dev/tty", false}, {"/dev/zero", true}, {"/dev/full", true}}

// sandboxCaches are the build caches a confined tool gets under its
// session's temp directory, so that go, npm and pip work without a
// writable home. A value already in acpguard's environment is kept when it
// lies beneath one of the operator's writable paths: that is how an
// operator shares a cache (and trusts every confined tool with its
// contents).
var sandboxCaches = []struct{ name, dir string }{
	{"GOCACHE", "go-build"},
	{"npm_config_cache", "npm"},
	{"PIP_CACHE_DIR", "pip"},
}

// sandboxTempPattern names the per-session temp directory (0700, made by
// acpguard under its own temp directory).
const sandboxTempPattern = "acpguard-session-"

// sandboxSession is the sandbox of one session: its Landlock ruleset, its
// temp directory and what confined processes find in their environment. A
// nil *sandboxSession is the sandbox off: the launcher then starts processes
// as they are, at no added cost.
//
// The ruleset and the temp directory are made when the session first starts
// a process or asks for either, not at session/new: most sessions of a
// shared child run no tool for a while, and each would otherwise hold a
// directory and a file descriptor. A failure to make them is kept: the
// session then starts nothing (DESIGN.md §5).
type sandboxSession struct {
	abi    int // the kernel's Landlock ABI the ruleset is built for
	filter []syscall.SockFilter
	// What making the ruleset and the temp directory takes.
	cfg sandboxConfig
	cwd string
	pe  *procEnv

	// mu keeps close from releasing the ruleset while a start uses it, and
	// guards what follows.
	mu      sync.RWMutex
	closed  bool
	made    bool  // the ruleset and the temp directory were made, or failed
	madeErr error // why they could not be made
	ruleset int   // landlock ruleset fd, close-on-exec; restricts every start
	tmp     string
	envAdd  []string // TMPDIR and the caches, for childEnv

	// protect is the session's protection (sandbox_protect.go): with
	// mounts, every start goes through the mount stage.
	protect *protectPlan
}

// spawnEnv is what starting a process for a session takes: the one
// environment builder and the session's sandbox (nil: off). Parent, in a
// serve child, is serve's channel: serve POSTs the session's http hooks
// (hooks_parent.go); nil elsewhere.
type spawnEnv struct {
	Env     *procEnv
	Sandbox *sandboxSession
	Parent  *hookParent
}

// sandboxTestOverride is nil in acpguard. The test binary, when it runs as
// acpguard (main_test.go), may set it from its own environment so that
// end-to-end tests confine the tools of a real acp.
var sandboxTestOverride *sandboxConfig

// newSandboxSession builds the sandbox of a session whose tools work in
// cwd: nil when cfg is off. Any failure is returned: the session must not
// start unconfined.
func newSandboxSession(cfg sandboxConfig, cwd string, e *procEnv) (*sandboxSession, error) {
	if !cfg.on() {
		return nil, nil
	}
	abi, err := probeLandlock()
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: the kernel has no Landlock (%v); start with --sandbox off to run tools unconfined", cfg.Profile, err)
	}
	s := &sandboxSession{abi: abi, ruleset: -1}
	if cfg.Network == sandboxNone && abi < landlockABINetwork {
		return nil, fmt.Errorf("sandbox network %q: needs Landlock ABI %d, this kernel has ABI %d", cfg.Network, landlockABINetwork, abi)
	}
	if s.filter, err = socketFilter(runtime.GOARCH, cfg.Unix == sandboxNone, cfg.Network == sandboxNone); err != nil {
		return nil, err
	}
	// os checks once per process whether pidfds work, by signalling this
	// process and cloning a child. Done here, unrestricted: on a kernel
	// whose signal scope also covers this process's own threads, a first
	// check on a restricted thread would turn pidfds off for good.
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
	s.cfg, s.cwd, s.pe = cfg, cwd, e
	if s.protect, err = sessionProtection(cfg, cwd); err != nil {
		return nil, err
	}
	return s, nil
}

// sessionProtection plans what the session's tools may not change and
// checks that it can be enforced: the git walk must have finished, and
// mounts need the mount stage; where the system refuses it, a session with
// a protected path in reach is refused (DESIGN.md §5).
func sessionProtection(cfg sandboxConfig, cwd string) (*protectPlan, error) {
	given := slices.Concat(cfg.Trusted, operatorProtect(cfg.Protect))
	pl, err := planProtection(given, append([]string{cwd}, cfg.Write...))
	if err != nil {
		return nil, err
	}
	if pl.Cut != "" {
		return nil, fmt.Errorf("sandbox: %s beneath %q, so not every repository's hooks and config would be protected; start the session in a smaller directory", pl.Cut, cwd)
	}
	if len(pl.Mounts) == 0 {
		return pl, nil
	}
	if err := mountStageWorks(); err != nil {
		return nil, fmt.Errorf("sandbox: %q is protected (%s) and lies in the writable %q, and this system cannot mount over it (%v); start the session in a directory that does not contain it, or enable unprivileged user namespaces (sysctl user.max_user_namespaces, and kernel.apparmor_restrict_unprivileged_userns=0 where AppArmor restricts them)", pl.First, pl.FirstRule, pl.FirstRoot, err)
	}
	return pl, pl.make()
}

// make makes the session's temp directory and ruleset, once; it returns
// why they could not be made, then and at every later call.
func (s *sandboxSession) make() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("the session's sandbox is closed: its session ended")
	}
	if s.made {
		return s.madeErr
	}
	s.made = true
	tmp, err := os.MkdirTemp(s.cfg.TempParent, sandboxTempPattern)
	if err != nil {
		s.madeErr = fmt.Errorf("sandbox: make the session's temp directory: %w", err)
		return s.madeErr
	}
	writable := append([]string{s.cwd, tmp}, s.cfg.Write...)
	if s.ruleset, err = landlockRuleset(s.abi, s.cfg, writable); err != nil {
		removeTree(tmp)
		s.madeErr = err
		return err
	}
	s.tmp = tmp
	s.envAdd = []string{"TMPDIR=" + tmp}
	for _, c := range sandboxCaches {
		if v := s.pe.lookup(c.name); v != "" && filepath.IsAbs(v) && beneathAny(v, s.cfg.Write) {
			continue
		}
		s.envAdd = append(s.envAdd, c.name+"="+filepath.Join(tmp, c.dir))
	}
	return nil
}

// beneathAny reports whether p is one of dirs or lies beneath one.
func beneathAny(p string, dirs []string) bool {
	p = filepath.Clean(p)
	for _, d := range dirs {
		if rel, err := filepath.Rel(filepath.Clean(d), p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// close releases the ruleset and removes the temp directory with whatever
// tools left in it. The session's processes must be gone.
func (s *sandboxSession) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.made && s.madeErr == nil {
		syscall.Close(s.ruleset)
		removeTree(s.tmp)
	}
}

// removeTree removes dir even where a tool took the permissions off one of
// its directories.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// tempDir is the session's temp directory, "" when off or when it could not
// be made.
func (s *sandboxSession) tempDir() string {
	if s == nil || s.make() != nil {
		return ""
	}
	return s.tmp
}

// env returns add followed by what a confined process finds in its
// environment (TMPDIR, the build caches), for procEnv.childEnv. Off, it is
// add as it is.
func (s *sandboxSession) env(add ...string) []string {
	if s == nil {
		return add
	}
	// Unmade, the session starts nothing (start), whatever env holds.
	if s.make() != nil {
		return add
	}
	return append(slices.Clip(add), s.envAdd...)
}

// start is the one launcher: every process a tool, a hook or an MCP server
// runs is started here (envscrub_test.go checks the source). Off, it is
// cmd.Start. On, cmd starts from a thread restricted for it alone; if any
// step of the restriction fails, cmd does not start and the error, a
// *sandboxStartError, names the step.
func (s *sandboxSession) start(cmd *exec.Cmd) error {
	if s == nil {
		return cmd.Start()
	}
	if err := s.make(); err != nil {
		return &sandboxStartError{cmd.Path, err}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return &sandboxStartError{cmd.Path, errors.New("the session's sandbox is closed: its session ended")}
	}
	if s.protect != nil && len(s.protect.Mounts) > 0 {
		path := cmd.Path
		plan, restore, err := stageCmd(cmd, s.protect.Mounts, s.cfg.Unix == sandboxNone, s.cfg.Network == sandboxNone)
		if err != nil {
			return &sandboxStartError{path, err}
		}
		err = startStaged(cmd, plan, s.ruleset)
		restore()
		if err != nil {
			return &sandboxStartError{path, err}
		}
		return nil
	}
	done := make(chan error, 1)
	go s.startOnOwnThread(cmd, done)
	return <-done
}

// sandboxStartError says a process did not start because it could not be
// confined.
type sandboxStartError struct {
	path string
	err  error
}

func (e *sandboxStartError) Error() string {
	return fmt.Sprintf("sandbox: confine %q: %v", e.path, e.err)
}

func (e *sandboxStartError) Unwrap() error { return e.err }

// onMainThread reports whether the calling thread is the process's first
// one. It is a variable so that a test can take that branch.
var onMainThread = func() bool { return syscall.Gettid() == syscall.Getpid() }

// startOnOwnThread locks its goroutine to the thread it runs on, restricts
// that thread and starts cmd from it. It never unlocks: when it returns, the
// runtime ends the restricted thread. The main thread is the exception: the
// runtime parks it for good instead of ending it, and the process's /proc
// entries (ptrace checks, signals) are judged by it, so it is never
// restricted: holding it, a second goroutine, which can then run only on
// another thread, does the work.
func (s *sandboxSession) startOnOwnThread(cmd *exec.Cmd, done chan<- error) {
	runtime.LockOSThread()
	if onMainThread() {
		inner := make(chan error, 1)
		go s.startOnOwnThread(cmd, inner)
		err := <-inner
		runtime.UnlockOSThread()
		done <- err
		return
	}
	if err := restrictThread(s.ruleset, s.filter); err != nil {
		done <- &sandboxStartError{cmd.Path, err}
		return
	}
	done <- cmd.Start()
}

// prctl options and capability constants the syscall package lacks.
const (
	prSetNoNewPrivs       = 38 // PR_SET_NO_NEW_PRIVS
	prCapAmbient          = 47 // PR_CAP_AMBIENT
	prCapAmbientClearAll  = 4  // PR_CAP_AMBIENT_CLEAR_ALL
	seccompModeFilter     = 2  // SECCOMP_MODE_FILTER
	capSetPCap            = 8  // CAP_SETPCAP: needed to shrink the bounding set
	capMaxProbe           = 64 // PR_CAPBSET_DROP answers EINVAL past the kernel's last capability
	linuxCapabilityV3     = 0x20080522
	linuxCapabilityU32s   = 2        // _LINUX_CAPABILITY_U32S_3
	oPath                 = 0x200000 // O_PATH, the same on x86-64 and arm64
	landlockRestrictFlags = 0        // denials are audited as the kernel does by default
)

type capHeader struct {
	version uint32
	pid     int32 // 0: the calling thread
}

type capData struct {
	effective, permitted, inheritable uint32
}

// restrictThread confines the calling thread for good, in this order:
// no_new_privs (nothing it execs gains privileges, and Landlock and seccomp
// need it), the bounding set emptied (when the thread may: a root daemon's),
// the ambient set cleared, the effective, permitted and inheritable sets
// emptied and read back, the seccomp filter if any, then the Landlock
// domain. Each step only takes away.
func restrictThread(ruleset int, filter []syscall.SockFilter) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_NO_NEW_PRIVS: %w", e)
	}
	hdr := capHeader{version: linuxCapabilityV3}
	var data [linuxCapabilityU32s]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	if data[0].effective&(1<<capSetPCap) != 0 {
		for c := uintptr(0); c < capMaxProbe; c++ {
			_, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_CAPBSET_DROP, c, 0)
			if e == syscall.EINVAL {
				break // past the last capability this kernel knows
			}
			if e != 0 {
				return fmt.Errorf("prctl PR_CAPBSET_DROP %d: %w", c, e)
			}
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		return fmt.Errorf("prctl PR_CAP_AMBIENT_CLEAR_ALL: %w", e)
	}
	hdr = capHeader{version: linuxCapabilityV3}
	data = [linuxCapabilityU32s]capData{}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	hdr = capHeader{version: linuxCapabilityV3}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	if data != ([linuxCapabilityU32s]capData{}) {
		return fmt.Errorf("capset: capabilities remain: %+v", data)
	}
	if len(filter) > 0 {
		prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_SECCOMP, seccompModeFilter, uintptr(unsafe.Pointer(&prog))); e != 0 {
			return fmt.Errorf("prctl PR_SET_SECCOMP: %w", e)
		}
		runtime.KeepAlive(filter)
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, uintptr(ruleset), landlockRestrictFlags, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// landlockRuleset builds the workspace profile for the kernel's ABI: read
// and execute everywhere (or only beneath cfg.Read) but on the hidden paths
// (sandbox_hide.go), everything but making device nodes beneath writable,
// read and write on the shell's character devices; with ABI 4, TCP bind and
// connect denied when cfg.Network is none; with ABI 6, signals and abstract
// Unix sockets scoped to the domain. The seccomp filter already refuses the
// TCP sockets a process makes under network none; the TCP rules stay for
// one it did not make (inherited, or received over a Unix socket), which
// the filter never sees, and answer EACCES as the filter does.
func landlockRuleset(abi int, cfg sandboxConfig, writable []string) (int, error) {
	handled := landlockHandledFS(abi)
	// struct landlock_ruleset_attr: handled_access_fs, handled_access_net,
	// scoped. An older kernel accepts the longer struct when the fields it
	// does not know are zero.
	var attr [3]uint64
	attr[0] = handled
	if cfg.Network == sandboxNone {
		attr[1] = llNetBindTCP | llNetConnectTCP
	}
	if abi >= landlockABIScope {
		attr[2] = llScopeAbstractUn | llScopeSignal
	}
	r, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return -1, fmt.Errorf("sandbox: landlock_create_ruleset (ABI %d): %w", abi, e)
	}
	ruleset := int(r)
	fail := func(err error) (int, error) {
		syscall.Close(ruleset)
		return -1, err
	}
	read := cfg.Read
	if read == nil {
		read = []string{"/"}
	}
	hide := realPaths(cfg.Hide)
	for _, p := range read {
		if err := landlockAllowExcept(ruleset, p, llReadRights&handled, hide); err != nil {
			return fail(err)
		}
	}
	for _, p := range writable {
		if h := hiddenIn(p, hide); h != "" {
			return fail(fmt.Errorf("sandbox: the writable %q holds the hidden %q, which tools could then read or replace; keep secret files and --%s paths out of session directories", p, h, flagSandboxHide))
		}
		if err := landlockAllow(ruleset, p, handled&^(llDeviceNodes|llIoctlDev)); err != nil {
			return fail(err)
		}
	}
	for _, d := range sandboxDevices {
		var st syscall.Stat_t
		if syscall.Stat(d.path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
			continue // absent here: nothing to grant
		}
		access := uint64(llReadFile | llWriteFile | llTruncate)
		if d.ioctl {
			access |= llIoctlDev
		}
		if err := landlockAllow(ruleset, d.path, access&handled); err != nil {
			return fail(err)
		}
	}
	return ruleset, nil
}

// landlockAllow grants access beneath path (on path itself when it is not a
// directory, limited to the rights a file rule may hold).
func landlockAllow(ruleset int, path string, access uint64) error {
	fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: open %q for a Landlock rule: %w", path, err)
	}
	defer syscall.Close(fd)
	return landlockAddRule(ruleset, fd, path, access)
}

// landlockAddRule grants access beneath the open file fd (path, for errors),
// limited to the rights a file rule may hold when it is not a directory.
func landlockAddRule(ruleset, fd int, path string, access uint64) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("sandbox: stat %q: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		access &= llFileRights
	}
	// struct landlock_path_beneath_attr is packed: allowed_access (u64),
	// parent_fd (s32).
	var attr [12]byte
	binary.NativeEndian.PutUint64(attr[0:], access)
	binary.NativeEndian.PutUint32(attr[8:], uint32(int32(fd)))
	_, _, e := syscall.Syscall6(sysLandlockAddRule, uintptr(ruleset), landlockRulePathBeneath, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if e != 0 {
		return fmt.Errorf("sandbox: landlock_add_rule %q: %w", path, e)
	}
	return nil
}

// Seccomp filter return values and the fields of struct seccomp_data it reads.
const (
	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000
	seccompDataNR         = 0  // int nr
	seccompDataArch       = 4  // u32 arch
	seccompDataArg0       = 16 // u64 args[0]; its low half on little-endian
	afUnix                = 1  // AF_UNIX (AF_LOCAL)
	x32SyscallBit         = 0x40000000
)

// seccompArch is what the filter knows of one architecture.
type seccompArch struct {
	audit                            uint32 // AUDIT_ARCH_*
	socket, socketpair, ioUringSetup uint32
	x32                              bool // syscall numbers with x32SyscallBit are another ABI
}

var seccompArches = map[string]seccompArch{
	"amd64": {audit: 0xc000003e, socket: 41, socketpair: 53, ioUringSetup: 425, x32: true},
	"arm64": {audit: 0xc00000b7, socket: 198, socketpair: 199, ioUringSetup: 425},
}

// socketFilter is the classic BPF program that completes what Landlock
// cannot say. socket and socketpair are judged by their family, the int
// in the low half of args[0] (the kernel ignores the high half):
//
//   - with denyNet (--sandbox-network none), every family but AF_UNIX fails
//     with EACCES: AF_INET and AF_INET6 whatever the type and protocol (TCP,
//     Multipath TCP, UDP, ICMP, SCTP, raw), AF_PACKET, AF_NETLINK, AF_VSOCK
//     and every other: Landlock's TCP rules cover only TCP. AF_NETLINK is
//     refused too. It reaches no other host, but nothing a tool runs
//     without a network needs it (glibc's getaddrinfo still answers from
//     /etc/hosts when it cannot ask netlink which families are configured;
//     git, go build, gcc and python3 run, sandbox_test.go shows), while it
//     would hand a tool the namespace's interfaces, routes and every TCP
//     socket with its owner (sock_diag), and each netlink protocol is more
//     kernel code within its reach;
//   - with denyUnix (--sandbox-unix none), AF_UNIX fails with EACCES; with
//     both, every socket does.
//
// Either way io_uring_setup fails with EPERM (an io_uring makes sockets
// without the socket system call), and a system call of another
// architecture or ABI (x32, 32-bit compat, where socketcall makes sockets
// too), whose numbers the filter does not know, kills the process. Neither:
// no filter.
func socketFilter(goarch string, denyUnix, denyNet bool) ([]syscall.SockFilter, error) {
	if !denyUnix && !denyNet {
		return nil, nil
	}
	a, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("sandbox: no seccomp filter for architecture %q (unix %q and network %q need one)", goarch, sandboxNone, sandboxNone)
	}
	ld := func(off uint32) bpfIns {
		return bpfIns{op: syscall.SockFilter{Code: syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS, K: off}}
	}
	jeq := func(k uint32, jt, jf string) bpfIns {
		return bpfIns{op: syscall.SockFilter{Code: syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K, K: k}, jt: jt, jf: jf}
	}
	ret := func(label string, k uint32) bpfIns {
		return bpfIns{label: label, op: syscall.SockFilter{Code: syscall.BPF_RET | syscall.BPF_K, K: k}}
	}
	verdict := func(deny bool) string {
		if deny {
			return "eacces"
		}
		return "allow"
	}
	prog := []bpfIns{ld(seccompDataArch), jeq(a.audit, "", "kill"), ld(seccompDataNR)}
	if a.x32 {
		prog = append(prog, bpfIns{op: syscall.SockFilter{Code: syscall.BPF_JMP | syscall.BPF_JGE | syscall.BPF_K, K: x32SyscallBit}, jt: "kill"})
	}
	family := ld(seccompDataArg0)
	family.label = "family"
	prog = append(prog,
		jeq(a.ioUringSetup, "eperm", ""),
		jeq(a.socket, "family", ""),
		jeq(a.socketpair, "family", "allow"),
		family,
		jeq(afUnix, verdict(denyUnix), verdict(denyNet)),
		ret("allow", seccompRetAllow),
		ret("eacces", seccompRetErrno|uint32(syscall.EACCES)),
		ret("eperm", seccompRetErrno|uint32(syscall.EPERM)),
		ret("kill", seccompRetKillProcess),
	)
	return assembleBPF(prog)
}

// bpfIns is one classic BPF instruction whose jumps name their targets.
type bpfIns struct {
	op     syscall.SockFilter
	label  string // this instruction's name, if any
	jt, jf string // jump targets; "" is the next instruction
}

// assembleBPF resolves the jump labels of prog: every target lies ahead,
// at most 255 instructions on.
func assembleBPF(prog []bpfIns) ([]syscall.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	out := make([]syscall.SockFilter, len(prog))
	for i, in := range prog {
		out[i] = in.op
		for _, j := range []struct {
			label string
			off   *uint8
		}{{in.jt, &out[i].Jt}, {in.jf, &out[i].Jf}} {
			if j.label == "" {
				continue
			}
			target, ok := at[j.label]
			if !ok || target <= i || target-i-1 > 255 {
				return nil, fmt.Errorf("sandbox: seccomp filter: instruction %d jumps to %q", i, j.label)
			}
			*j.off = uint8(target - i - 1)
		}
	}
	return out, nil
}
