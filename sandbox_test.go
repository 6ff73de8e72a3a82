// sandbox_test.go proves the sandbox with real processes: what a confined
// tool, hook and MCP server can and cannot do, that the launcher restricts
// only the thread it starts from, that a setup failure starts nothing, and
// that the key cases hold for an ordinary user too.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// runShell runs `bash -c script` in dir through the launcher (sb nil:
// unconfined) and returns its output and exit code.
func runShell(t testing.TB, sb *sandboxSession, dir, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = sandboxTestEnv.childEnv(sb.env()...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := sb.start(cmd); err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	cmd.Wait()
	return out.String(), cmd.ProcessState.ExitCode()
}

// probeCommand is the shell command that replaces itself with a probe
// (so that the probe's parent is the shell's), writing to out.
func probeCommand(t testing.TB, out string, ops ...string) string {
	return fmt.Sprintf("exec env GORACE=atexit_sleep_ms=0 %q %q > %q 2>&1",
		roleEnv("sandbox-probe", strings.Join(ops, " ")), testExe(t), out)
}

// runProbe runs a probe in dir through the launcher (sb nil: unconfined).
func runProbe(t testing.TB, sb *sandboxSession, dir string, ops ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(testExe(t))
	cmd.Env = sandboxTestEnv.childEnv(sb.env(roleEnv("sandbox-probe", strings.Join(ops, " ")))...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := sb.start(cmd); err != nil {
		t.Fatalf("start the probe: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("probe %v: %v\n%s", ops, err, out.String())
	}
	return parseProbe(t, out.String(), ops)
}

// parseProbe reads a probe's lines "op result" and checks every op answered.
func parseProbe(t testing.TB, out string, ops []string) map[string]string {
	t.Helper()
	res := map[string]string{}
	for line := range strings.Lines(out) {
		if op, r, ok := strings.Cut(strings.TrimSpace(line), " "); ok && slices.Contains(ops, op) {
			res[op] = r
		}
	}
	for _, op := range ops {
		if _, ok := res[op]; !ok {
			t.Fatalf("the probe did not answer %q:\n%s", op, out)
		}
	}
	return res
}

// runSandboxProbe is the "sandbox-probe" role: ops are operations separated
// by spaces, each "op" or "op=arg" (in arg, PPID stands for the probe's
// parent process id); it tries each and prints "op ok" or "op <errno name>".
func runSandboxProbe(ops string) int {
	for _, op := range strings.Fields(ops) {
		name, arg, _ := strings.Cut(op, "=")
		arg = strings.ReplaceAll(arg, "PPID", strconv.Itoa(os.Getppid()))
		fmt.Printf("%s %s\n", op, probeOnce(name, arg))
	}
	return 0
}

// ipprotoMPTCP is IPPROTO_MPTCP: Multipath TCP reaches the peers TCP does.
const ipprotoMPTCP = 262

func probeOnce(op, arg string) string {
	switch op {
	case "read":
		_, err := os.ReadFile(arg)
		return errnoName(err)
	case "openw":
		f, err := os.OpenFile(arg, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return errnoName(err)
	case "kill":
		pid, _ := strconv.Atoi(arg)
		return errnoName(syscall.Kill(pid, syscall.SIGCONT))
	case "connect":
		c, err := net.DialTimeout("tcp", arg, testTimeout(10*time.Second))
		if err == nil {
			c.Close()
		}
		return errnoName(err)
	case "mptcp":
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, ipprotoMPTCP)
		if err != nil {
			return "socket:" + errnoName(err)
		}
		defer syscall.Close(fd)
		host, port, _ := net.SplitHostPort(arg)
		p, _ := strconv.Atoi(port)
		sa := &syscall.SockaddrInet4{Port: p}
		copy(sa.Addr[:], net.ParseIP(host).To4())
		return errnoName(syscall.Connect(fd, sa))
	case "tcp", "udp":
		// arg is ADDR,PAYLOAD: a connection that sends PAYLOAD, or one
		// datagram, the way a Go program makes them.
		addr, payload, _ := strings.Cut(arg, ",")
		c, err := net.DialTimeout(op, addr, testTimeout(10*time.Second))
		if err != nil {
			return errnoName(err)
		}
		defer c.Close()
		_, err = c.Write([]byte(payload))
		return errnoName(err)
	case "sock":
		// arg is FAMILY,TYPE,PROTOCOL in decimal.
		var family, typ, proto int
		if _, err := fmt.Sscanf(arg, "%d,%d,%d", &family, &typ, &proto); err != nil {
			return "bad-arg"
		}
		fd, err := syscall.Socket(family, typ|syscall.SOCK_CLOEXEC, proto)
		if err == nil {
			syscall.Close(fd)
		}
		return errnoName(err)
	case "pair":
		family, err := strconv.Atoi(arg)
		if err != nil {
			return "bad-arg"
		}
		fds, err := syscall.Socketpair(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
		}
		return errnoName(err)
	case "bind":
		l, err := net.Listen("tcp", arg)
		if err == nil {
			l.Close()
		}
		return errnoName(err)
	case "abstract":
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return "socket:" + errnoName(err)
		}
		defer syscall.Close(fd)
		return errnoName(syscall.Connect(fd, &syscall.SockaddrUnix{Name: "@" + arg}))
	case "unix", "inet":
		family := syscall.AF_UNIX
		if op == "inet" {
			family = syscall.AF_INET
		}
		fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fd)
		}
		return errnoName(err)
	case "unixpair":
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
		}
		return errnoName(err)
	case "uring":
		var params [120]byte // struct io_uring_params
		fd, _, e := syscall.Syscall(425, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if e != 0 {
			return errnoName(e)
		}
		syscall.Close(int(fd))
		return "ok"
	case "tiocsti":
		fd, err := syscall.Open("/dev/tty", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			return "open:" + errnoName(err)
		}
		defer syscall.Close(fd)
		c := byte('\n')
		_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		if e != 0 {
			return errnoName(e)
		}
		return "ok"
	case "status":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return errnoName(err)
		}
		return statusLine(string(b))
	}
	return "unknown-op"
}

// statusKeys are the /proc/<pid>/status fields the sandbox changes.
var statusKeys = []string{"NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}

// statusLine returns statusKeys from a status file as "Key:value,...".
func statusLine(status string) string {
	var out []string
	for line := range strings.Lines(status) {
		k, v, _ := strings.Cut(line, ":")
		if slices.Contains(statusKeys, k) {
			out = append(out, k+":"+strings.TrimSpace(v))
		}
	}
	return strings.Join(out, ",")
}

func statusFields(line string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(line, ",") {
		k, v, _ := strings.Cut(kv, ":")
		m[k] = v
	}
	return m
}

func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if !errors.As(err, &e) {
		return "error:" + strings.ReplaceAll(err.Error(), " ", "_")
	}
	for _, n := range []struct {
		errno syscall.Errno
		name  string
	}{{syscall.EACCES, "EACCES"}, {syscall.EPERM, "EPERM"}, {syscall.ENOENT, "ENOENT"}, {syscall.ESRCH, "ESRCH"},
		{syscall.ECONNREFUSED, "ECONNREFUSED"}, {syscall.EINVAL, "EINVAL"}, {syscall.EFAULT, "EFAULT"}, {syscall.ENOSYS, "ENOSYS"},
		{syscall.EAFNOSUPPORT, "EAFNOSUPPORT"}, {syscall.EPROTONOSUPPORT, "EPROTONOSUPPORT"}, {syscall.EOPNOTSUPP, "EOPNOTSUPP"}} {
		if e == n.errno {
			return n.name
		}
	}
	return fmt.Sprintf("errno%d", int(e))
}

func absent(t testing.TB, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	return errors.Is(err, os.ErrNotExist)
}

// sandboxTag makes names no other run uses.
func sandboxTag() string {
	return fmt.Sprintf("acpguard-sbtest-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// TestSandboxWorkspaceFiles: a confined shell writes, creates, removes and
// renames only under its cwd and its temp directory; anywhere else it gets
// EACCES and the file is absent afterwards. Each denied case first runs
// unconfined, so the case is one the sandbox alone decides.
func TestSandboxWorkspaceFiles(t *testing.T) {
	root := t.TempDir()
	ws, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb := newTestSandbox(t, workspaceConfig(), ws)
	home := sandboxTestEnv.lookup("HOME")
	tag := sandboxTag()
	keep := filepath.Join(outside, "keep.txt")

	denied := []struct {
		name, script, path string
		rootOnly           bool
	}{
		{"create in HOME", `echo x > "$HOME/` + tag + `"`, filepath.Join(home, tag), false},
		{"create in /tmp", `echo x > /tmp/` + tag, "/tmp/" + tag, false},
		{"create beside the workspace", `echo x > ../outside/new.txt`, filepath.Join(outside, "new.txt"), false},
		{"mkdir outside", `mkdir ../outside/dir`, filepath.Join(outside, "dir"), false},
		{"symlink outside", `ln -s /etc/passwd ../outside/link`, filepath.Join(outside, "link"), false},
		{"hard link outside", `echo x > h.txt && ln h.txt ../outside/hard`, filepath.Join(outside, "hard"), false},
		{"move out of the workspace", `echo x > m.txt && mv m.txt ../outside/moved`, filepath.Join(outside, "moved"), false},
		{"fifo outside", `mkfifo ../outside/fifo`, filepath.Join(outside, "fifo"), false},
		// No device nodes, not even in the workspace (only root can try).
		{"device node in the workspace", `mknod null c 1 3`, filepath.Join(ws, "null"), true},
	}
	for _, tt := range denied {
		t.Run(tt.name, func(t *testing.T) {
			if tt.rootOnly && os.Geteuid() != 0 {
				t.Skip("only root may make device nodes at all")
			}
			if out, code := runShell(t, nil, ws, tt.script); code != 0 || absent(t, tt.path) {
				t.Skipf("unconfined, the script fails too (exit %d: %s): the case proves nothing here", code, out)
			}
			if err := os.RemoveAll(tt.path); err != nil {
				t.Fatal(err)
			}
			out, code := runShell(t, sb, ws, tt.script)
			// A link or rename across directories Landlock refuses is EXDEV.
			if code == 0 || !strings.Contains(out, "Permission denied") && !strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "Invalid cross-device link") {
				t.Errorf("confined: exit %d, output %q; want a permission error", code, out)
			}
			if !absent(t, tt.path) {
				os.RemoveAll(tt.path)
				t.Errorf("confined, %s was created", tt.path)
			}
		})
	}

	// What a confined shell may not do to a file outside that already exists.
	for _, script := range []string{`: > ../outside/keep.txt`, `echo more >> ../outside/keep.txt`, `rm -f ../outside/keep.txt`, `mv ../outside/keep.txt k`, `truncate -s 0 ../outside/keep.txt`} {
		if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runShell(t, sb, ws, script)
		if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" || code == 0 {
			t.Errorf("confined %q (exit %d, %q) left keep.txt as %q, %v", script, code, out, b, err)
		}
	}

	// Everything a shell does with files under its cwd and temp directory.
	script := `set -e
echo hi > in.txt; cat in.txt >/dev/null; mkdir d; mv in.txt d/; ln -s d/in.txt link; ln d/in.txt hard
truncate -s 0 hard; echo again >| d/in.txt; mkfifo f; rm -r d link hard f
test "${TMPDIR#` + sb.tempDir() + `}" = ""
echo t > "$TMPDIR/t"; mkdir -p "$TMPDIR/x"; mv "$TMPDIR/t" "$TMPDIR/x/t"; mv "$TMPDIR/x/t" moved-from-tmp
echo null > /dev/null; head -c 4 /dev/zero | wc -c >/dev/null; cat /etc/passwd >/dev/null
echo done > final.txt`
	if out, code := runShell(t, sb, ws, script); code != 0 {
		t.Fatalf("confined work in the workspace failed: exit %d\n%s", code, out)
	}
	for _, f := range []string{"final.txt", "moved-from-tmp"} {
		if absent(t, filepath.Join(ws, f)) {
			t.Errorf("%s was not written", f)
		}
	}
}

// TestSandboxToolchains: a confined shell can init a git repository,
// build and run a Go and a C program and run Python with its socket module
// in its workspace, with the default access and with every socket family
// refused (network and Unix none: no tool here needs a socket, netlink
// included). The Go build uses this user's build cache, shared the way the
// README tells operators (a writable path, and GOCACHE naming it): a fresh
// cache compiles the standard library first, which takes minutes on a
// loaded two-core machine.
func TestSandboxToolchains(t *testing.T) {
	requireLandlock(t)
	gocache := ""
	var write []string
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		var st syscall.Stat_t
		if syscall.Stat(dir, &st) == nil && int(st.Uid) == os.Geteuid() {
			gocache = dir
			write = []string{dir}
		}
	}
	tests := []struct{ tool, script, want string }{
		{"git", `git init -q repo && git -C repo config user.email t@example.com && git -C repo config user.name t &&
echo x > repo/f && git -C repo add f && git -C repo commit -qm first && git -C repo status --short && git -C repo log --format=%s`, "first"},
		{"go", `mkdir hello && cd hello && printf 'module hello\n\ngo 1.21\n' > go.mod &&
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from go") }\n' > main.go &&
go build -o hello . && ./hello`, "hello from go"},
		{"gcc", `printf '#include <stdio.h>\nint main(void){puts("hello from c");return 0;}\n' > h.c && gcc -o hc h.c && ./hc`, "hello from c"},
		{"python3", `python3 -c 'import socket, ssl; print("hello from python")'`, "hello from python"},
	}
	for _, access := range []string{sandboxAll, sandboxNone} {
		t.Run("network and unix "+access, func(t *testing.T) {
			ws := t.TempDir()
			cfg := workspaceConfig()
			cfg.Write, cfg.Network, cfg.Unix = write, access, access
			sb, err := newSandboxSession(cfg, ws, newProcEnv(append(os.Environ(), "GOCACHE="+gocache)))
			if err != nil {
				t.Fatal(err)
			}
			defer sb.close()
			for _, tt := range tests {
				t.Run(tt.tool, func(t *testing.T) {
					if _, err := exec.LookPath(tt.tool); err != nil {
						t.Skipf("%s is not installed", tt.tool)
					}
					script := tt.script
					if tt.tool == "go" {
						if gocache == "" {
							t.Skip("no build cache of this user's to share: a fresh one compiles the standard library for minutes; the C build shows building works")
						}
						script = "export GOCACHE=" + gocache + "; " + script
					}
					out, code := runShell(t, sb, ws, script)
					if code != 0 || !strings.Contains(out, tt.want) {
						t.Errorf("exit %d, output:\n%s", code, out)
					}
				})
			}
		})
	}
}

// TestSandboxOtherProcesses: a confined process cannot read another
// process's environ, open its fd/0 for writing, signal it or reach its
// abstract Unix sockets: not its parent's, not the test's, not another
// confined process's. Unconfined, the same probe succeeds.
func TestSandboxOtherProcesses(t *testing.T) {
	ws := t.TempDir()
	sb := newTestSandbox(t, workspaceConfig(), ws)
	abi := requireLandlock(t)

	// Another confined process of the same session (a sibling domain).
	sibling := exec.Command("sleep", "60")
	sibling.Env = sandboxTestEnv.childEnv(sb.env()...)
	if err := sb.start(sibling); err != nil {
		t.Fatal(err)
	}
	defer func() { sibling.Process.Kill(); sibling.Wait() }()

	name := sandboxTag()
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	self := strconv.Itoa(os.Getpid())
	sib := strconv.Itoa(sibling.Process.Pid)
	ops := []string{"read=/proc/" + self + "/environ", "openw=/proc/" + self + "/fd/0", "read=/proc/" + sib + "/environ",
		"read=/proc/PPID/mem", "kill=" + self, "kill=" + sib, "abstract=" + name}
	free := runProbe(t, nil, ws, ops...)
	confined := runProbe(t, sb, ws, ops...)
	for _, op := range ops {
		want := "EACCES"
		switch {
		case strings.HasPrefix(op, "kill=") || strings.HasPrefix(op, "abstract="):
			if abi < landlockABIScope {
				continue // scoping needs ABI 6
			}
			want = "EPERM"
		case strings.HasSuffix(op, "/mem"):
			// reading mem at offset 0 fails even when the open succeeds
			if !strings.HasPrefix(free[op], "error:") && free[op] != "EIO" && free[op] != "ok" {
				t.Logf("unconfined %s: %s", op, free[op])
			}
			if confined[op] != "EACCES" {
				t.Errorf("confined %s = %s, want EACCES", op, confined[op])
			}
			continue
		}
		if free[op] != "ok" {
			t.Errorf("unconfined %s = %s, want ok: the case proves nothing", op, free[op])
		}
		if confined[op] != want {
			t.Errorf("confined %s = %s, want %s", op, confined[op], want)
		}
	}
}

// TestSandboxTerminalInjection: a confined process whose session has a
// controlling terminal can open it but cannot push input into it (TIOCSTI):
// what it typed would run in the user's shell, unconfined. Unconfined, it
// can (where the kernel still allows TIOCSTI at all).
func TestSandboxTerminalInjection(t *testing.T) {
	ws := t.TempDir()
	sb := newTestSandbox(t, workspaceConfig(), ws)
	if sb.abi < 5 {
		t.Skipf("Landlock ABI %d governs no ioctl (ABI 5 does)", sb.abi)
	}
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer m.Close()
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	go io.Copy(io.Discard, m)
	run := func(sb *sandboxSession) string {
		pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer pts.Close()
		cmd := exec.Command(testExe(t))
		cmd.Env = sandboxTestEnv.childEnv(sb.env(roleEnv("sandbox-probe", "tiocsti"))...)
		cmd.Stdin = pts // the session's terminal; the probe opens it by name
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := sb.start(cmd); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		return parseProbe(t, out.String(), []string{"tiocsti"})["tiocsti"]
	}
	if free := run(nil); free != "ok" {
		t.Skipf("unconfined, TIOCSTI = %s: this kernel refuses it anyway", free)
	}
	if got := run(sb); got != "EACCES" {
		t.Errorf("confined TIOCSTI on the controlling terminal = %s, want EACCES", got)
	}
}

// TestSandboxNetworkNone: with network none a confined process cannot
// connect to a loopback port the test listens on, nor bind one; with the
// default it can.
func TestSandboxNetworkNone(t *testing.T) {
	ws := t.TempDir()
	l, accepted := countingListener(t)
	// A port free a moment ago: binding it is what the rule is about.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()
	// Multipath TCP reaches the same listener; Landlock's TCP rules do not
	// cover it, the seccomp filter does.
	ops := []string{"connect=" + l.Addr().String(), "bind=" + freeAddr, "bind=127.0.0.1:0", "mptcp=" + l.Addr().String()}
	all := runProbe(t, newTestSandbox(t, workspaceConfig(), ws), ws, ops...)
	if all[ops[0]] != "ok" || all[ops[1]] != "ok" {
		t.Errorf("network all: %v, want connect and bind ok", all)
	}
	// Every connect that succeeded reaches the listener's accept loop in
	// its own time: wait for all of them, so none is counted against the
	// confined run below.
	var made int64
	for _, op := range []string{ops[0], ops[3]} {
		if all[op] == "ok" {
			made++
		}
	}
	waitFor(t, "the listener to accept the unconfined connections", func() bool { return accepted.Load() >= made })
	before := accepted.Load()
	cfg := workspaceConfig()
	cfg.Network = sandboxNone
	got := runProbe(t, newTestSandbox(t, cfg, ws), ws, ops...)
	if got[ops[0]] != "EACCES" || got[ops[1]] != "EACCES" || got[ops[2]] != "EACCES" {
		t.Errorf("network none: %v, want EACCES for connect and bind", got)
	}
	switch {
	case all[ops[3]] != "ok":
		t.Logf("network all: Multipath TCP = %s: this kernel has it off, nothing to prove", all[ops[3]])
	case got[ops[3]] != "socket:EACCES":
		t.Errorf("network none: Multipath TCP connect = %s, want socket:EACCES", got[ops[3]])
	}
	if n := accepted.Load(); n != before {
		t.Errorf("network none: the listener accepted %d connections", n-before)
	}
}

// TestSandboxNetworkNoneSenders: with network none, and Unix sockets
// allowed, no byte reaches a loopback TCP or UDP port the test listens on,
// whoever sends it: bash's /dev/tcp and /dev/udp, python3, a Go program.
// Each is refused its socket with EACCES ("Permission denied"). Unconfined,
// each sender's bytes arrive, so each case can fail.
func TestSandboxNetworkNoneSenders(t *testing.T) {
	ws := t.TempDir()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is one of the senders: %v; install it", err)
	}
	r := newPayloadReceiver(t)
	tcpPort, udpPort := r.ports()
	tcpAddr, udpAddr := r.tcp.Addr().String(), r.udp.LocalAddr().String()
	// A shell sender says "socket: Permission denied" when its socket is
	// refused; python3 is made to say the same.
	shell := func(script string) func(*testing.T, *sandboxSession, string) string {
		return func(t *testing.T, sb *sandboxSession, payload string) string {
			script := strings.NewReplacer("PAYLOAD", payload, "TCPPORT", strconv.Itoa(tcpPort),
				"UDPPORT", strconv.Itoa(udpPort), "PYTHON", python).Replace(script)
			out, code := runShell(t, sb, ws, script)
			switch {
			case code == 0:
				return "ok"
			case strings.Contains(out, "socket: Permission denied"):
				return "EACCES"
			}
			return fmt.Sprintf("exit %d: %s", code, out)
		}
	}
	probe := func(op, addr string) func(*testing.T, *sandboxSession, string) string {
		return func(t *testing.T, sb *sandboxSession, payload string) string {
			o := op + "=" + addr + "," + payload
			return runProbe(t, sb, ws, o)[o]
		}
	}
	const pySocket = `PYTHON -c 'import socket, sys
try:
    s = socket.socket(socket.AF_INET, socket.%s)
except OSError as e:
    sys.exit("socket: " + e.strerror)
%s'`
	senders := []struct {
		name string
		send func(t *testing.T, sb *sandboxSession, payload string) string
	}{
		{"bash tcp", shell(`echo PAYLOAD >/dev/tcp/127.0.0.1/TCPPORT`)},
		{"bash udp", shell(`echo PAYLOAD >/dev/udp/127.0.0.1/UDPPORT`)},
		{"python3 tcp", shell(fmt.Sprintf(pySocket, "SOCK_STREAM", `s.connect(("127.0.0.1", TCPPORT)); s.sendall(b"PAYLOAD")`))},
		{"python3 udp", shell(fmt.Sprintf(pySocket, "SOCK_DGRAM", `s.sendto(b"PAYLOAD", ("127.0.0.1", UDPPORT))`))},
		{"go tcp", probe("tcp", tcpAddr)},
		{"go udp", probe("udp", udpAddr)},
	}
	cfg := workspaceConfig()
	cfg.Network = sandboxNone
	sb := newTestSandbox(t, cfg, ws)
	for i, s := range senders {
		t.Run(s.name, func(t *testing.T) {
			free := fmt.Sprintf("free-%d", i)
			if got := s.send(t, nil, free); got != "ok" {
				t.Fatalf("unconfined: %s, want ok: the case proves nothing", got)
			}
			waitFor(t, "the unconfined "+s.name+" bytes", func() bool { return r.has(free) })
			if got := s.send(t, sb, fmt.Sprintf("confined-%d", i)); got != "EACCES" {
				t.Errorf("network none: %s, want EACCES", got)
			}
		})
	}
	r.sync(t, "sync")
	for _, p := range r.received() {
		if !strings.HasPrefix(p, "free-") && p != "tcp-sync" && p != "udp-sync" {
			t.Errorf("network none: the receiver got %q", p)
		}
	}
}

// TestSandboxNetworkNoneFamilies: with network none a confined process
// makes no socket of any family but AF_UNIX, whatever its type and
// protocol (TCP, Multipath TCP, UDP, ICMP, raw IP, packet, netlink route
// and sock_diag, vsock, the kernel's crypto), nor a socket pair of one,
// nor an io_uring. A socket fails with EACCES, in python3 too (raw and
// packet); with unix none as well, AF_UNIX fails too, so no socket is
// left. Unconfined, none of the calls fails with EACCES (raw and packet
// sockets are made by root, an AF_INET socket pair is EOPNOTSUPP), so each
// case can fail; with network all, the sandbox refuses no family (raw and
// packet sockets aside: it keeps no capability).
func TestSandboxNetworkNoneFamilies(t *testing.T) {
	ws := t.TempDir()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is one of the callers: %v; install it", err)
	}
	const (
		afVsock = 40 // AF_VSOCK
		afAlg   = 38 // AF_ALG
	)
	sock := func(family, typ, proto int) string { return fmt.Sprintf("sock=%d,%d,%d", family, typ, proto) }
	// free is what the call gives unconfined: "" where the kernel's
	// configuration decides (logged when it refuses, the case then proves
	// nothing); root, that only root gets it.
	calls := []struct {
		op, free string
		root     bool
		unix     bool // an AF_UNIX call: network none leaves it
	}{
		{sock(syscall.AF_INET, syscall.SOCK_STREAM, 0), "ok", false, false},
		{sock(syscall.AF_INET, syscall.SOCK_STREAM, ipprotoMPTCP), "", false, false},
		{sock(syscall.AF_INET, syscall.SOCK_DGRAM, 0), "ok", false, false},
		{sock(syscall.AF_INET6, syscall.SOCK_DGRAM, 0), "", false, false},
		{sock(syscall.AF_INET, syscall.SOCK_DGRAM, syscall.IPPROTO_ICMP), "", false, false},
		{sock(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP), "ok", true, false},
		{sock(syscall.AF_PACKET, syscall.SOCK_RAW, 0), "ok", true, false},
		{sock(syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_ROUTE), "ok", false, false},
		{sock(syscall.AF_NETLINK, syscall.SOCK_DGRAM, netlinkSockDiag), "ok", false, false},
		{sock(afVsock, syscall.SOCK_STREAM, 0), "", false, false},
		{sock(afAlg, syscall.SOCK_SEQPACKET, 0), "", false, false},
		{"pair=" + strconv.Itoa(syscall.AF_INET), "EOPNOTSUPP", false, false},
		{sock(syscall.AF_UNIX, syscall.SOCK_STREAM, 0), "ok", false, true},
		{sock(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0), "ok", false, true},
		{"pair=" + strconv.Itoa(syscall.AF_UNIX), "ok", false, true},
	}
	ops := []string{"uring"}
	for _, c := range calls {
		ops = append(ops, c.op)
	}
	root := os.Geteuid() == 0
	free := runProbe(t, nil, ws, ops...)
	for _, c := range calls {
		switch {
		case c.free == "" || c.root && !root:
			if free[c.op] == "EACCES" {
				t.Logf("unconfined %s = EACCES: the case proves nothing here", c.op)
			}
		case free[c.op] != c.free:
			t.Errorf("unconfined %s = %s, want %s: the case proves nothing", c.op, free[c.op], c.free)
		}
	}

	all := runProbe(t, newTestSandbox(t, workspaceConfig(), ws), ws, ops...)
	for _, c := range calls {
		if c.free == "ok" && !c.root && all[c.op] != "ok" {
			t.Errorf("network all: %s = %s, want ok", c.op, all[c.op])
		}
	}

	for _, unix := range []string{sandboxAll, sandboxNone} {
		cfg := workspaceConfig()
		cfg.Network, cfg.Unix = sandboxNone, unix
		got := runProbe(t, newTestSandbox(t, cfg, ws), ws, ops...)
		for _, c := range calls {
			want := "EACCES"
			if c.unix && unix == sandboxAll {
				want = "ok"
			}
			if got[c.op] != want {
				t.Errorf("network none, unix %s: %s = %s, want %s (unconfined: %s)", unix, c.op, got[c.op], want, free[c.op])
			}
		}
		if got["uring"] != "EPERM" {
			t.Errorf("network none, unix %s: io_uring_setup = %s, want EPERM", unix, got["uring"])
		}
	}

	// python3 sees the refusal as PermissionError, errno 13; unconfined
	// root gets the socket, an ordinary user EPERM ("Operation not
	// permitted"), which is no EACCES either.
	cfg := workspaceConfig()
	cfg.Network = sandboxNone
	sb := newTestSandbox(t, cfg, ws)
	for _, c := range []struct{ name, args string }{
		{"packet", "socket.AF_PACKET, socket.SOCK_RAW"},
		{"raw", "socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP"},
		{"udp", "socket.AF_INET, socket.SOCK_DGRAM"},
		{"netlink", "socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE"},
	} {
		script := fmt.Sprintf(`%s -c 'import socket, sys
try:
    socket.socket(%s)
except OSError as e:
    sys.exit("socket: errno %%d" %% e.errno)
print("socket: made")'`, python, c.args)
		out, code := runShell(t, nil, ws, script)
		switch {
		case code == 0 && strings.Contains(out, "socket: made"):
		case !root && (c.name == "packet" || c.name == "raw") && strings.Contains(out, fmt.Sprintf("socket: errno %d", syscall.EPERM)):
		default:
			t.Errorf("python3 %s unconfined: exit %d: %s", c.name, code, out)
		}
		out, code = runShell(t, sb, ws, script)
		if code == 0 || !strings.Contains(out, fmt.Sprintf("socket: errno %d", syscall.EACCES)) {
			t.Errorf("python3 %s, network none: exit %d: %s; want errno %d", c.name, code, out, syscall.EACCES)
		}
	}
}

// TestSandboxUnixNone: with unix none a confined process cannot make an
// AF_UNIX socket or socket pair (EACCES) nor an io_uring (EPERM), but can
// make an AF_INET socket; with the default it can make all of them.
func TestSandboxUnixNone(t *testing.T) {
	ws := t.TempDir()
	ops := []string{"unix", "unixpair", "inet", "uring", "status"}
	free := runProbe(t, newTestSandbox(t, workspaceConfig(), ws), ws, ops...)
	for _, op := range []string{"unix", "unixpair", "inet"} {
		if free[op] != "ok" {
			t.Errorf("unix all: %s = %s, want ok", op, free[op])
		}
	}
	cfg := workspaceConfig()
	cfg.Unix = sandboxNone
	got := runProbe(t, newTestSandbox(t, cfg, ws), ws, ops...)
	for op, want := range map[string]string{"unix": "EACCES", "unixpair": "EACCES", "inet": "ok"} {
		if got[op] != want {
			t.Errorf("unix none: %s = %s, want %s", op, got[op], want)
		}
	}
	if free["uring"] != "EPERM" && got["uring"] != "EPERM" {
		t.Errorf("unix none: io_uring_setup = %s, want EPERM", got["uring"])
	}
	if st := statusFields(got["status"]); st["Seccomp"] != "2" {
		t.Errorf("unix none: status %v, want Seccomp 2 (filter)", st)
	}
}

// TestSandboxDropsCapabilities: a confined process has no_new_privs and no
// capability in any set; started by root, its bounding set is empty too.
func TestSandboxDropsCapabilities(t *testing.T) {
	plain, repo := t.TempDir(), t.TempDir()
	gitInit(t, repo)
	for _, tt := range []struct {
		name, ws string
		staged   bool
	}{{"on its own thread", plain, false}, {"through the mount stage", repo, true}} {
		t.Run(tt.name, func(t *testing.T) {
			sb := newTestSandbox(t, workspaceConfig(), tt.ws)
			if staged := len(sb.protect.Mounts) > 0; staged != tt.staged {
				t.Fatalf("the session's mounts %v: staged %v, want %v", sb.protect.Mounts, staged, tt.staged)
			}
			if tt.staged {
				// The stage's own namespace, not this process's.
				own, _ := os.Readlink("/proc/self/ns/mnt")
				if out, _ := runShell(t, sb, tt.ws, "readlink /proc/self/ns/mnt"); strings.TrimSpace(out) == own {
					t.Errorf("the command runs in this process's mount namespace %s, not the stage's", own)
				}
			}
			const zero = "0000000000000000"
			st := statusFields(runProbe(t, sb, tt.ws, "status")["status"])
			for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
				if st[k] != zero {
					t.Errorf("confined %s = %s, want %s", k, st[k], zero)
				}
			}
			if st["NoNewPrivs"] != "1" {
				t.Errorf("confined NoNewPrivs = %s, want 1", st["NoNewPrivs"])
			}
			if os.Geteuid() != 0 {
				t.Logf("not root: the bounding set (%s) is left, no_new_privs keeps it from granting anything", st["CapBnd"])
				return
			}
			if st["CapBnd"] != zero {
				t.Errorf("confined by root: CapBnd = %s, want %s", st["CapBnd"], zero)
			}
			if free := statusFields(runProbe(t, nil, tt.ws, "status")["status"]); free["CapEff"] == zero {
				t.Errorf("unconfined root has no effective capabilities (%v): the case proves nothing", free)
			}
		})
	}
}

// restrictedThreads returns the sandbox fields of every thread of this process
// that differ from the process's own (its first thread, which the launcher
// never restricts).
func restrictedThreads(t testing.TB) []string {
	t.Helper()
	main, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	want := statusLine(string(main))
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	var odd []string
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if got := statusLine(string(b)); got != want {
			odd = append(odd, p+": "+got)
		}
	}
	return odd
}

// TestSandboxLauncherThreads: the restriction reaches the started process
// (os/exec forks on the launching thread) and nothing else: after many
// starts, every thread of this process is as unrestricted as its first, also
// when the launching goroutine found itself on the main thread.
func TestSandboxLauncherThreads(t *testing.T) {
	ws := t.TempDir()
	cfg := workspaceConfig()
	cfg.Unix = sandboxNone // adds a seccomp filter: visible in status
	sb := newTestSandbox(t, cfg, ws)
	waitUnrestricted(t, "before any start") // a test before may have left a thread ending
	base := statusFields(statusLine(mustRead(t, "/proc/self/status")))

	var mainCalls atomic.Int32
	defer func(f func() bool) { onMainThread = f }(onMainThread)
	// The first launch plays the main thread; the real one stays exempt.
	onMainThread = func() bool { return mainCalls.Add(1) == 1 || syscall.Gettid() == syscall.Getpid() }

	for i := range 20 {
		st := statusFields(runProbe(t, sb, ws, "status")["status"])
		if st["NoNewPrivs"] != "1" || st["Seccomp"] != "2" || st["Seccomp_filters"] == base["Seccomp_filters"] {
			t.Fatalf("start %d: the child is not restricted (%v; this process %v): it was not forked by the restricted thread", i, st, base)
		}
	}
	if mainCalls.Load() < 2 {
		t.Fatalf("the main-thread branch was not taken (%d calls)", mainCalls.Load())
	}
	waitUnrestricted(t, "after the starts")
}

// waitUnrestricted waits until no thread of this process is restricted; a
// thread the runtime is ending may still show for a moment.
func waitUnrestricted(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout(30 * time.Second))
	for odd := restrictedThreads(t); len(odd) > 0; odd = restrictedThreads(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%s, restricted threads remain: %v", when, odd)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSandboxSessionTempDir: the session's temp directory is 0700, is TMPDIR
// with the build caches under it, and is removed on close with what tools
// left there (a directory without permissions included). A cache the
// operator's environment puts under a writable path is kept.
func TestSandboxSessionTempDir(t *testing.T) {
	requireLandlock(t)
	ws, shared := t.TempDir(), t.TempDir()
	cfg := workspaceConfig()
	cfg.Write = []string{shared}
	env := newProcEnv([]string{"PATH=" + os.Getenv("PATH"), "GOCACHE=" + filepath.Join(shared, "go"), "PIP_CACHE_DIR=/elsewhere"})
	sb, err := newSandboxSession(cfg, ws, env)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.close()
	tmp := sb.tempDir()
	if fi, err := os.Stat(tmp); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(tmp) != filepath.Clean(os.TempDir()) {
		t.Fatalf("temp dir %q: %v %v", tmp, fi, err)
	}
	got := env.childEnv(sb.env("A=1")...)
	want := []string{"TMPDIR=" + tmp, "GOCACHE=" + filepath.Join(shared, "go"),
		"npm_config_cache=" + filepath.Join(tmp, "npm"), "PIP_CACHE_DIR=" + filepath.Join(tmp, "pip"), "A=1"}
	for _, kv := range want {
		if !slices.Contains(got, kv) {
			t.Errorf("environment %q lacks %q", got, kv)
		}
	}
	cmd := exec.Command("bash", "-c", `mkdir -p "$TMPDIR/a/b" && echo x > "$TMPDIR/a/b/f" && echo y > "$GOCACHE.txt" && chmod 000 "$TMPDIR/a"`)
	cmd.Env = env.childEnv(sb.env()...)
	if err := sb.start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writing the temp dir and the shared cache: %v", err)
	}
	sb.close()
	if !absent(t, tmp) {
		t.Errorf("the temp dir %q outlived close", tmp)
	}
	if absent(t, filepath.Join(shared, "go.txt")) {
		t.Error("the shared cache directory was not writable")
	}
	// Off: no temp dir, no environment, no cost.
	if off, err := newSandboxSession(sandboxConfig{}, ws, env); off != nil || err != nil {
		t.Errorf("off = %v, %v; want nil, nil", off, err)
	}
	if a := (*sandboxSession)(nil).env("A=1"); !slices.Equal(a, []string{"A=1"}) {
		t.Errorf("off env = %q", a)
	}
}

// TestSandboxLandlockABIs: the ruleset of every ABI up to the kernel's
// handles only the rights that ABI knows, and confines writes to the
// workspace at each level.
func TestSandboxLandlockABIs(t *testing.T) {
	abi := requireLandlock(t)
	table := map[int]uint64{1: 1<<13 - 1, 2: 1<<14 - 1, 3: 1<<15 - 1, 4: 1<<15 - 1, 5: 1<<16 - 1, 6: 1<<16 - 1, 7: 1<<16 - 1}
	for level, want := range table {
		if got := landlockHandledFS(level); got != want {
			t.Errorf("ABI %d handles %#x, want %#x", level, got, want)
		}
	}
	defer func(f func() (int, error)) { probeLandlock = f }(probeLandlock)
	tag := sandboxTag()
	for level := 1; level <= abi; level++ {
		probeLandlock = func() (int, error) { return level, nil }
		ws := t.TempDir()
		sb := newTestSandbox(t, workspaceConfig(), ws)
		out, code := runShell(t, sb, ws, `echo in > in.txt && echo out > /tmp/`+tag)
		if code == 0 || absent(t, filepath.Join(ws, "in.txt")) || !absent(t, "/tmp/"+tag) {
			os.Remove("/tmp/" + tag)
			t.Errorf("ABI %d: exit %d (%s): want in.txt written and /tmp/%s refused", level, code, out, tag)
		}
	}
}

// TestSandboxSetupFailsClosed: without Landlock, with a network rule the ABI
// cannot express, or when the thread cannot be restricted, nothing starts:
// no session, no tool (foreground or background), no hook (even a failOpen
// one: the call is blocked), no MCP server; each error names what failed.
func TestSandboxSetupFailsClosed(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), sandboxTempPattern+"*"))

	realProbe := probeLandlock
	defer func() { probeLandlock = realProbe }()
	probeLandlock = func() (int, error) {
		return 0, fmt.Errorf("landlock_create_ruleset version probe: %w", syscall.ENOSYS)
	}
	_, err := newSandboxSession(workspaceConfig(), ws, sandboxTestEnv)
	if want := `sandbox "workspace": the kernel has no Landlock (landlock_create_ruleset version probe: function not implemented); start with --sandbox off to run tools unconfined`; err == nil || err.Error() != want {
		t.Errorf("no Landlock: %v, want %q", err, want)
	}
	probeLandlock = func() (int, error) { return 3, nil }
	cfg := workspaceConfig()
	cfg.Network = sandboxNone
	_, err = newSandboxSession(cfg, ws, sandboxTestEnv)
	if want := `sandbox network "none": needs Landlock ABI 4, this kernel has ABI 3`; err == nil || err.Error() != want {
		t.Errorf("network none on ABI 3: %v, want %q", err, want)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), sandboxTempPattern+"*"))
	for _, d := range after {
		if !slices.Contains(before, d) {
			t.Errorf("a failed setup left the temp directory %s", d)
		}
	}
	probeLandlock = realProbe
	if _, err := socketFilter("riscv64", true, false); err == nil || err.Error() != `sandbox: no seccomp filter for architecture "riscv64" (unix "none" and network "none" need one)` {
		t.Errorf("unknown architecture: %v", err)
	}

	// A ruleset the kernel refuses: the restriction fails on the launching thread.
	sb := newTestSandbox(t, workspaceConfig(), ws)
	good := sb.ruleset
	sb.ruleset = -1
	defer func() { sb.ruleset = good }()
	marker := filepath.Join(ws, "ran")
	bash, _ := exec.LookPath("bash")
	wantErr := fmt.Sprintf(`sandbox: confine %q: landlock_restrict_self: bad file descriptor`, bash)

	cmd := exec.Command("bash", "-c", "touch "+marker)
	cmd.Env = sandboxTestEnv.childEnv(sb.env()...)
	var se *sandboxStartError
	if err := sb.start(cmd); !errors.As(err, &se) || err.Error() != wantErr {
		t.Errorf("start = %v, want %q", err, wantErr)
	}
	if cmd.Process != nil {
		t.Error("the process started")
	}

	env := &toolEnv{SessionID: "s", Cwd: ws, Env: sandboxTestEnv, Sandbox: sb, Background: &processSet{}, Observer: nopObserver{}}
	defer env.Background.killAll()
	for _, args := range []string{`{"command":"touch ` + marker + `"}`, `{"command":"touch ` + marker + `","is_background":true}`} {
		res := runTool(context.Background(), env, toolCall{ID: "c", Name: toolShell, Args: json.RawMessage(args)})
		if res.Status != statusFailed || !strings.Contains(res.Output, wantErr) {
			t.Errorf("run_shell_command %s = %s %q, want failed with %q", args, res.Status, res.Output, wantErr)
		}
	}

	hooks := []hookMatcher{{Hooks: []hookCommand{{Type: "command", Command: "touch " + marker, FailOpen: true}}}}
	out := runPreToolUseHooks(context.Background(), hooks, testHookInput(ws), spawnEnv{Env: sandboxTestEnv, Sandbox: sb})
	if want := `PreToolUse hook "touch ` + marker + `" could not be confined: ` + wantErr + ` (the call is blocked: the hook fails closed)`; out.Decision != hookDeny || out.Reason != want {
		t.Errorf("failOpen hook = %+v, want a deny with %q", out, want)
	}

	h := newHelperServer(t, "h")
	exe, args := helperCommand(t)
	set := startMCPServers(context.Background(), []mcpServerConfig{{Name: "h", Command: exe, Args: args, Env: h.environ()}},
		mcpOptions{Cwd: ws, Env: sandboxTestEnv, Sandbox: sb, Log: slog.New(slog.DiscardHandler)}, nil)
	defer set.close()
	if notes := set.takeNotices(); len(set.servers) != 0 || len(notes) != 1 || !strings.Contains(notes[0], fmt.Sprintf(`sandbox: confine %q: landlock_restrict_self: bad file descriptor`, exe)) {
		t.Errorf("MCP server with a failing sandbox: %d servers, notices %q", len(set.servers), notes)
	}
	if !absent(t, h.log) {
		t.Errorf("the MCP server ran: %s", mustRead(t, h.log))
	}
	if !absent(t, marker) {
		t.Error("something ran: the marker exists")
	}

	// A closed session's sandbox starts nothing.
	sb.ruleset = good
	sb.close()
	cmd = exec.Command("true")
	cmd.Env = sandboxTestEnv.childEnv()
	if err := sb.start(cmd); err == nil || !strings.Contains(err.Error(), "its session ended") {
		t.Errorf("start after close = %v", err)
	}
}

// TestSandboxSeccompProgram runs the socket filter in a BPF interpreter,
// also over the cases a real process cannot show: foreign architectures,
// the x32 ABI, families this kernel lacks, a family with bits in the high
// half of its register. The protocol never matters: network none refuses
// every family but AF_UNIX, whatever runs over it.
func TestSandboxSeccompProgram(t *testing.T) {
	type call struct {
		arch, nr   uint32
		arg0, arg2 uint64
	}
	const (
		seccompDataArg2 = 32 // u64 args[2]: the protocol of socket
		afVsock         = 40 // AF_VSOCK: to the hypervisor or another VM
		afTIPC          = 30 // AF_TIPC: has a socketpair of its own
	)
	amd, arm := seccompArches["amd64"], seccompArches["arm64"]
	eacces, eperm := uint32(seccompRetErrno|uint32(syscall.EACCES)), uint32(seccompRetErrno|uint32(syscall.EPERM))
	const allow, kill = seccompRetAllow, seccompRetKillProcess
	tests := []struct {
		goarch    string
		unix, net bool
		c         call
		want      uint32
	}{
		{"amd64", true, false, call{amd.audit, amd.socket, afUnix, 0}, eacces},
		{"amd64", true, false, call{amd.audit, amd.socketpair, afUnix, 0}, eacces},
		{"amd64", true, false, call{amd.audit, amd.socket, 1<<32 | afUnix, 0}, eacces}, // the kernel reads an int
		{"amd64", true, false, call{amd.audit, amd.socket, syscall.AF_INET, ipprotoMPTCP}, allow},
		{"amd64", true, false, call{amd.audit, amd.socket, syscall.AF_INET, syscall.IPPROTO_UDP}, allow},
		{"amd64", true, false, call{amd.audit, amd.socket, syscall.AF_NETLINK, 0}, allow},
		{"amd64", true, false, call{amd.audit, amd.socketpair, syscall.AF_INET, 0}, allow},
		{"amd64", true, false, call{amd.audit, amd.ioUringSetup, 1, 0}, eperm},
		{"amd64", true, false, call{amd.audit, 1 /* write */, afUnix, 0}, allow},
		{"amd64", true, false, call{amd.audit, x32SyscallBit | amd.socket, afUnix, 0}, kill},
		{"amd64", true, false, call{0x40000003 /* i386 */, 359, afUnix, 0}, kill},
		{"amd64", true, false, call{0x40000003 /* i386 */, 102 /* socketcall */, 1, 0}, kill},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_INET, syscall.IPPROTO_TCP}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_INET, ipprotoMPTCP}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_INET6, ipprotoMPTCP}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_INET, syscall.IPPROTO_UDP}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_INET6, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_INET, syscall.IPPROTO_RAW}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_PACKET, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_NETLINK, syscall.NETLINK_ROUTE}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, afVsock, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, syscall.AF_UNSPEC, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, 1<<8 | afUnix, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, 1<<32 | syscall.AF_INET, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socket, 1<<32 | afUnix, 0}, allow}, // the kernel reads AF_UNIX
		{"amd64", false, true, call{amd.audit, amd.socket, afUnix, 0}, allow},
		{"amd64", false, true, call{amd.audit, amd.socket, afUnix, ipprotoMPTCP}, allow},
		{"amd64", false, true, call{amd.audit, amd.socketpair, afUnix, 0}, allow},
		{"amd64", false, true, call{amd.audit, amd.socketpair, syscall.AF_INET, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.socketpair, afTIPC, 0}, eacces},
		{"amd64", false, true, call{amd.audit, amd.ioUringSetup, 1, 0}, eperm},
		{"amd64", false, true, call{amd.audit, 44 /* sendto */, syscall.AF_INET, 0}, allow},
		{"amd64", false, true, call{amd.audit, x32SyscallBit | amd.socket, syscall.AF_INET, 0}, kill},
		{"amd64", false, true, call{0x40000003 /* i386 */, 102 /* socketcall */, 1, 0}, kill},
		{"amd64", true, true, call{amd.audit, amd.socket, afUnix, 0}, eacces},
		{"amd64", true, true, call{amd.audit, amd.socketpair, afUnix, 0}, eacces},
		{"amd64", true, true, call{amd.audit, amd.socket, syscall.AF_INET, 0}, eacces},
		{"amd64", true, true, call{amd.audit, amd.socket, syscall.AF_NETLINK, 0}, eacces},
		{"amd64", true, true, call{amd.audit, amd.ioUringSetup, 1, 0}, eperm},
		{"amd64", true, true, call{amd.audit, 1 /* write */, afUnix, 0}, allow},
		{"arm64", true, false, call{arm.audit, arm.socket, afUnix, 0}, eacces},
		{"arm64", true, false, call{arm.audit, arm.socketpair, afUnix, 0}, eacces},
		{"arm64", true, false, call{arm.audit, arm.socket, syscall.AF_INET6, 0}, allow},
		{"arm64", true, false, call{arm.audit, arm.ioUringSetup, 1, 0}, eperm},
		{"arm64", true, false, call{arm.audit, x32SyscallBit | arm.socket, afUnix, 0}, allow}, // no x32 on arm64: no such call
		{"arm64", true, false, call{0x40000028 /* arm */, 281, afUnix, 0}, kill},
		{"arm64", false, true, call{arm.audit, arm.socket, syscall.AF_INET, ipprotoMPTCP}, eacces},
		{"arm64", false, true, call{arm.audit, arm.socket, syscall.AF_INET, syscall.IPPROTO_UDP}, eacces},
		{"arm64", false, true, call{arm.audit, arm.socket, syscall.AF_NETLINK, 0}, eacces},
		{"arm64", false, true, call{arm.audit, arm.socket, afUnix, 0}, allow},
		{"arm64", false, true, call{arm.audit, arm.socketpair, syscall.AF_INET, 0}, eacces},
		{"arm64", false, true, call{arm.audit, arm.ioUringSetup, 1, 0}, eperm},
		{"arm64", false, true, call{0x40000028 /* arm */, 281, syscall.AF_INET, 0}, kill},
		{"arm64", true, true, call{arm.audit, arm.socket, afUnix, 0}, eacces},
		{"arm64", true, true, call{arm.audit, arm.socket, syscall.AF_INET6, 0}, eacces},
	}
	for _, tt := range tests {
		prog, err := socketFilter(tt.goarch, tt.unix, tt.net)
		if err != nil {
			t.Fatal(err)
		}
		var data [64]byte
		put := func(off int, v uint64) {
			for i := range 8 {
				data[off+i] = byte(v >> (8 * i))
			}
		}
		put(seccompDataNR, uint64(tt.c.nr)|uint64(tt.c.arch)<<32)
		put(seccompDataArg0, tt.c.arg0)
		put(seccompDataArg2, tt.c.arg2)
		if got := runBPF(t, prog, data[:]); got != tt.want {
			t.Errorf("%s unix none=%v network none=%v %+v = %#x, want %#x", tt.goarch, tt.unix, tt.net, tt.c, got, tt.want)
		}
	}
	if prog, err := socketFilter("amd64", false, false); prog != nil || err != nil {
		t.Errorf("nothing to deny: %v, %v; want no filter", prog, err)
	}
}

// runBPF interprets the classic BPF subset the filter uses.
func runBPF(t *testing.T, prog []syscall.SockFilter, data []byte) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS:
			k := in.K
			acc = uint32(data[k]) | uint32(data[k+1])<<8 | uint32(data[k+2])<<16 | uint32(data[k+3])<<24
		case syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case syscall.BPF_JMP | syscall.BPF_JGE | syscall.BPF_K:
			if acc >= in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case syscall.BPF_RET | syscall.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: unknown code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// sandboxSettings writes settings: yolo, a PreToolUse hook on
// run_shell_command that appends to hook.log in the cwd, one on write_file
// that writes outside first, and the helper MCP server.
func sandboxSettings(t *testing.T, outside string, h *helperServer) string {
	exe, args := helperCommand(t)
	env := map[string]string{}
	for _, kv := range h.environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	s := map[string]any{
		"tools": map[string]any{"approvalMode": "yolo"},
		"hooks": map[string]any{"PreToolUse": []any{
			map[string]any{"matcher": "run_shell_command", "hooks": []any{map[string]any{"type": "command", "command": "echo ran >> hook.log"}}},
			map[string]any{"matcher": "write_file", "hooks": []any{map[string]any{"type": "command", "command": "echo x > " + filepath.Join(outside, "hook.txt")}}},
		}},
		"mcpServers": map[string]any{h.name: map[string]any{"command": exe, "args": args, "env": env}},
	}
	b, _ := json.Marshal(s)
	f := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSandboxACPEndToEnd drives a real acp whose sandbox is on: its
// foreground and background shell commands, its PreToolUse hooks and its MCP
// server run confined, with TMPDIR the session's temp directory, which
// session/close removes. The same steps without the sandbox write outside,
// so each assertion is one the sandbox decides.
func TestSandboxACPEndToEnd(t *testing.T) {
	abi := requireLandlock(t)
	for _, confined := range []bool{true, false} {
		t.Run(fmt.Sprintf("confined=%v", confined), func(t *testing.T) {
			root := t.TempDir()
			ws, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
			for _, d := range []string{ws, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			h := newHelperServer(t, "h")
			h.log, h.envFile = filepath.Join(ws, "mcp.log"), filepath.Join(ws, "mcp.environ")
			env := []string{envTestSandbox + "="} // off, even where the whole suite runs confined
			if confined {
				env = []string{envTestSandbox + "=" + sandboxWorkspace}
			}
			c := startACP(t, nil, []string{"--settings", sandboxSettings(t, outside, h)}, env...)
			c.mustCall(methodInitialize, initializeParams(""), nil)
			sid := c.newYoloSession(ws)

			out := func(name string) string { return filepath.Join(outside, name) }
			c.prompt(sid, shellCall(`echo in > inside.txt; echo x > `+out("fg.txt")+`; echo "$TMPDIR" > tmpdir.txt; `+
				probeCommand(t, "probe.out", "read=/proc/PPID/environ", "openw=/proc/PPID/fd/0", "kill=PPID", "read=/proc/"+strconv.Itoa(os.Getpid())+"/environ"), false), "")
			c.prompt(sid, shellCall(`echo x > `+out("bg.txt")+`; echo $? > bg.done`, true), "")
			c.prompt(sid, `call write_file {"file_path":"written.txt","content":"w"}`, "")
			c.prompt(sid, `call mcp__h__write {"path":"mcp-inside.txt","content":"m"}`, "")
			c.prompt(sid, `call mcp__h__write {"path":"`+out("mcp.txt")+`","content":"m"}`, "")
			waitForFile(t, filepath.Join(ws, "bg.done"))
			ups := c.sessionUpdates(sid)
			answers := agentText(ups)

			for _, f := range []string{"inside.txt", "hook.log", "mcp-inside.txt", "probe.out"} {
				if absent(t, filepath.Join(ws, f)) {
					t.Errorf("%s was not written in the workspace; answers:\n%s", f, answers)
				}
			}
			if confined {
				for _, f := range []string{"fg.txt", "bg.txt", "hook.txt", "mcp.txt"} {
					if !absent(t, out(f)) {
						t.Errorf("a confined process wrote %s outside the workspace", f)
					}
				}
				if !strings.Contains(answers, "write_file: denied") || !absent(t, filepath.Join(ws, "written.txt")) {
					t.Errorf("the hook that failed to write outside did not block write_file:\n%s", answers)
				}
				if b := mustRead(t, filepath.Join(ws, "bg.done")); strings.TrimSpace(b) == "0" {
					t.Error("the background command's write outside succeeded")
				}
				ops := []string{"read=/proc/PPID/environ", "openw=/proc/PPID/fd/0", "kill=PPID", "read=/proc/" + strconv.Itoa(os.Getpid()) + "/environ"}
				got := parseProbe(t, mustRead(t, filepath.Join(ws, "probe.out")), ops)
				want := map[string]string{ops[0]: "EACCES", ops[1]: "EACCES", ops[2]: "EPERM", ops[3]: "EACCES"}
				if abi < landlockABIScope {
					delete(want, ops[2])
				}
				for op, w := range want {
					if got[op] != w {
						t.Errorf("confined tool: %s = %s, want %s", op, got[op], w)
					}
				}
				tmp := strings.TrimSpace(mustRead(t, filepath.Join(ws, "tmpdir.txt")))
				if !strings.HasPrefix(filepath.Base(tmp), sandboxTempPattern) {
					t.Fatalf("TMPDIR = %q, want the session's temp directory", tmp)
				}
				if !strings.Contains(mustRead(t, h.envFile), "TMPDIR="+tmp+"\x00") {
					t.Error("the MCP server's TMPDIR is not the session's temp directory")
				}
				if absent(t, tmp) {
					t.Error("the session's temp directory is gone while the session runs")
				}
				c.mustCall(methodSessionClose, map[string]any{"sessionId": sid}, nil)
				if !absent(t, tmp) {
					t.Errorf("session/close left the temp directory %s", tmp)
				}
				return
			}
			for _, f := range []string{"fg.txt", "bg.txt", "hook.txt", "mcp.txt"} {
				if absent(t, out(f)) {
					t.Errorf("unconfined, %s was not written outside: the confined case proves nothing", f)
				}
			}
			if !strings.Contains(answers, "write_file: completed") {
				t.Errorf("unconfined, write_file did not complete:\n%s", answers)
			}
		})
	}
}

// TestSandboxServeProcesses: under serve, a confined tool gets EACCES
// reading serve's environ and cannot signal serve; as root, an unconfined
// tool can read it (serve is not dumpable, but root may read anyway).
func TestSandboxServeProcesses(t *testing.T) {
	abi := requireLandlock(t)
	for _, confined := range []bool{true, false} {
		if !confined && os.Geteuid() != 0 {
			continue // not root: serve's environ is closed to every same-user tool anyway
		}
		ws := t.TempDir()
		env := []string{envTestSandbox + "="} // off, even where the whole suite runs confined
		if confined {
			env = []string{envTestSandbox + "=" + sandboxWorkspace}
		}
		sp := startServe(t, []string{"--workspace", ws, "--settings", yoloSettings(t)}, env...)
		serve := strconv.Itoa(sp.cmd.Process.Pid)
		ops := []string{"read=/proc/" + serve + "/environ", "openw=/proc/" + serve + "/fd/0", "kill=" + serve}
		id := sp.newSession(t, "")
		sp.runTurn(t, id, shellCall(probeCommand(t, "probe.out", ops...), false))
		got := parseProbe(t, mustRead(t, filepath.Join(ws, "probe.out")), ops)
		if !confined {
			if got[ops[0]] != "ok" {
				t.Errorf("unconfined root tool: %s = %s, want ok: the confined case proves nothing", ops[0], got[ops[0]])
			}
			continue
		}
		want := map[string]string{ops[0]: "EACCES", ops[1]: "EACCES", ops[2]: "EPERM"}
		if abi < landlockABIScope {
			delete(want, ops[2])
		}
		for op, w := range want {
			if got[op] != w {
				t.Errorf("confined tool under serve: %s = %s, want %s", op, got[op], w)
			}
		}
	}
}

// runSandboxRacer is the racer of TestSandboxRaceNewACP: it reads "pid MARKER"
// lines, attacks that process's environ and fd/0 (for writing) in a tight
// loop until the next line, then prints "pid attempts environ-results
// fd0-results leaked".
func runSandboxRacer(string) int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		pid, marker, _ := strings.Cut(in.Text(), " ")
		var stop atomic.Bool
		var wg sync.WaitGroup
		var attempts int
		envRes, fdRes := map[string]bool{}, map[string]bool{}
		leaked := false
		wg.Go(func() {
			buf := make([]byte, 1<<16)
			for !stop.Load() || attempts == 0 {
				attempts++
				if fd, err := syscall.Open("/proc/"+pid+"/environ", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
					envRes[errnoName(err)] = true
				} else {
					n, err := syscall.Read(fd, buf)
					syscall.Close(fd)
					if n > 0 && bytes.Contains(buf[:n], []byte(marker)) {
						leaked = true
					}
					envRes["opened:"+errnoName(err)] = true
				}
				if fd, err := syscall.Open("/proc/"+pid+"/fd/0", syscall.O_WRONLY|syscall.O_CLOEXEC, 0); err != nil {
					fdRes[errnoName(err)] = true
				} else {
					syscall.Close(fd)
					fdRes["ok"] = true
					leaked = true
				}
			}
		})
		if !in.Scan() {
			stop.Store(true)
			wg.Wait()
			break
		}
		stop.Store(true)
		wg.Wait()
		fmt.Printf("%s %d %s %s %v\n", pid, attempts, strings.Join(slices.Sorted(mapKeys(envRes)), "+"), strings.Join(slices.Sorted(mapKeys(fdRes)), "+"), leaked)
	}
	return 0
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// racer is a running runSandboxRacer.
type racer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startRacer(t *testing.T, sb *sandboxSession, dir string) *racer {
	t.Helper()
	cmd := exec.Command(testExe(t))
	cmd.Env = sandboxTestEnv.childEnv(sb.env(roleEnv("sandbox-racer"))...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.start(cmd); err != nil {
		t.Fatal(err)
	}
	r := &racer{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return r
}

// race starts a new acp with marker in its environment, has the racer
// attack it from the moment its pid is known until it has answered
// initialize (its start-up window is then over), and returns the racer's
// report: attempts, environ results, fd/0 results, leaked.
func (r *racer) race(t *testing.T, marker string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"acp"}, "ACPGUARD_RACE_SECRET="+marker)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(r.in, "%d %s\n", cmd.Process.Pid, marker)
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n")
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("acp did not answer initialize: %v", err)
	}
	fmt.Fprintf(r.in, "stop -\n")
	line, err := r.out.ReadString('\n')
	if err != nil {
		t.Fatalf("the racer stopped: %v", err)
	}
	stdin.Close()
	cmd.Wait()
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("racer report %q", line)
	}
	return f[1:]
}

// TestSandboxRaceNewACP races a confined tool for the /proc entries of 50
// newly started acp processes, from the moment each pid is known until
// each has answered initialize: it never reads an environ or opens fd/0
// for writing. As root, an unconfined racer does, so the check can fail.
func TestSandboxRaceNewACP(t *testing.T) {
	ws := t.TempDir()
	sb := newTestSandbox(t, workspaceConfig(), ws)
	r := startRacer(t, sb, ws)
	const rounds = 50
	for i := range rounds {
		marker := fmt.Sprintf("race-secret-%d-%d", os.Getpid(), i)
		rep := r.race(t, marker)
		attempts, _ := strconv.Atoi(rep[0])
		if attempts == 0 || rep[3] != "false" || strings.Contains(rep[1], "opened") || rep[2] != "EACCES" {
			t.Errorf("round %d: attempts %s, environ %s, fd/0 %s, leaked %s: want only EACCES", i, rep[0], rep[1], rep[2], rep[3])
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	free := startRacer(t, nil, ws)
	if rep := free.race(t, fmt.Sprintf("race-secret-%d-free", os.Getpid())); rep[3] != "true" {
		t.Errorf("unconfined root racer: %v, want leaked: the confined rounds prove nothing", rep)
	}
}

// sandboxUserTests are the tests TestSandboxAsOrdinaryUser repeats as uid 65534.
var sandboxUserTests = []string{
	"TestSandboxWorkspaceFiles", "TestSandboxToolchains", "TestSandboxOtherProcesses", "TestSandboxNetworkNone",
	"TestSandboxNetworkNoneSenders", "TestSandboxNetworkNoneFamilies",
	"TestSandboxUnixNone", "TestSandboxTerminalInjection", "TestSandboxDropsCapabilities", "TestSandboxLauncherThreads", "TestSandboxACPEndToEnd",
	"TestSandboxRaceNewACP", "TestSandboxProtectGit", "TestSandboxProtectHome", "TestSandboxProtectACPHome",
	"TestSandboxProtectServeHome", "TestSandboxProtectRefused", "TestSandboxProtectUnreadable",
}

// TestSandboxAsOrdinaryUser runs the key sandbox tests again as nobody
// (uid and gid 65534) from a copy of this binary, with a home and a temp
// directory of its own; each must pass, not skip.
func TestSandboxAsOrdinaryUser(t *testing.T) {
	requireLandlock(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the other tests already ran as an ordinary user")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("", "acpguard-asuser-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	home, tmp := filepath.Join(base, "home"), filepath.Join(base, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(base, "acpguard.test")
	data, err := os.ReadFile(testExe(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(10*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^("+strings.Join(sandboxUserTests, "|")+")$", "-test.v", "-test.count=1")
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "TMPDIR" && k != "GOCACHE" && k != "GOPATH" && k != "GOMODCACHE" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HOME="+home, "TMPDIR="+tmp, "GOPATH="+filepath.Join(home, "go"), "GORACE=atexit_sleep_ms=0")
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests as uid %d failed: %v\n%s", nobody, err, out)
	}
	for _, name := range sandboxUserTests {
		if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) {
			t.Errorf("%s did not pass as uid %d", name, nobody)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
		return
	}
	var summary []string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(strings.TrimSpace(line), "--- ") || strings.Contains(line, "sandbox_test.go:") {
			summary = append(summary, strings.TrimRight(line, "\n"))
		}
	}
	t.Logf("as uid %d:\n%s", nobody, strings.Join(summary, "\n"))
}
