// serve_peer_test.go checks that serve refuses host requests from its own
// descendants (403 host_is_descendant) and serves everyone else, with real
// processes and real loopback connections; serve and its tools run as an
// ordinary user (nobody) when the tests run as root.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The "peer-client" role is a tiny host: it sends GET /health to serve's URL
// (with envPeerToken as bearer token when set) and writes "STATUS CODE" to
// the file envPeerOut names; with envPeerHide=1 it first makes itself not
// dumpable, so no other process of its user can read its descriptors.
const (
	envPeerToken = "ACPGUARD_TEST_PEER_TOKEN"
	envPeerOut   = "ACPGUARD_TEST_PEER_OUT"
	envPeerHide  = "ACPGUARD_TEST_PEER_HIDE"
)

// envPeerOwnTable=1 makes the "peer-hold" role connect from a thread with a
// descriptor table of its own, which no other thread's /proc fd directory
// shows.
const envPeerOwnTable = "ACPGUARD_TEST_PEER_OWN_TABLE"

// runPeerHold connects to addr and holds the connection until stdin closes.
func runPeerHold(addr string) int {
	if os.Getenv(envPeerOwnTable) == "1" {
		if err := holdFromOwnTable(addr); err != nil {
			fmt.Fprintln(os.Stderr, "peer-hold:", err)
			return 1
		}
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 1
	}
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	return 0
}

// holdFromOwnTable connects to addr from a thread that unshared its
// descriptor table and stays there, holding the socket.
func holdFromOwnTable(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("address %q: want IPv4", addr)
	}
	done := make(chan error)
	retry := errors.New("on the main thread")
	for err = retry; err == retry; err = <-done {
		go holdOnThread(ap, done, retry)
	}
	return err
}

// holdOnThread is holdFromOwnTable on one locked thread; the main thread,
// whose table /proc/<pid>/fd shows, answers retry and stays locked.
func holdOnThread(ap netip.AddrPort, done chan<- error, retry error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the process
	if syscall.Gettid() == os.Getpid() {
		done <- retry
		select {}
	}
	if err := syscall.Unshare(syscall.CLONE_FILES); err != nil {
		done <- err
		select {}
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err == nil {
		err = syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	}
	done <- err
	select {}
}

func runPeerClient(url string) int {
	out := "error"
	defer func() {
		if p := os.Getenv(envPeerOut); p != "" {
			os.WriteFile(p, []byte(out), 0o644)
		} else {
			fmt.Println(out)
		}
	}()
	if os.Getenv(envPeerHide) == "1" {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
			out = "prctl: " + e.Error()
			return 1
		}
	}
	req, err := http.NewRequest("GET", url+"/health", nil)
	if err != nil {
		out = err.Error()
		return 1
	}
	if tok := os.Getenv(envPeerToken); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: testTimeout(time.Minute)}
	resp, err := client.Do(req)
	if err != nil {
		out = err.Error()
		return 1
	}
	defer resp.Body.Close()
	var body errorBody
	data, _ := io.ReadAll(resp.Body)
	json.Unmarshal(data, &body)
	out = strconv.Itoa(resp.StatusCode) + " " + body.Code
	if resp.StatusCode == http.StatusForbidden && !resp.Close {
		out += " (connection kept open)"
	}
	return 0
}

// loopbackPair returns both ends of a new loopback TCP connection made in
// this process: the client's and the accepted one.
func loopbackPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	return loopbackPairOn(t, "127.0.0.1:0")
}

func loopbackPairOn(t testing.TB, addr string) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func addrPorts(c net.Conn) (local, remote netip.AddrPort) {
	return c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
}

// TestFindPeerSocket: the entry found for an accepted connection is the
// client's socket, the one its descriptor links to, owned by this user.
func TestFindPeerSocket(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			if ln, err := net.Listen("tcp", addr); err != nil {
				t.Skipf("no %s here: %v", addr, err)
			} else {
				ln.Close()
			}
			testFindPeerSocket(t, addr)
		})
	}
}

func testFindPeerSocket(t *testing.T, addr string) {
	client, server := loopbackPairOn(t, addr)
	local, remote := addrPorts(server)
	e, found, err := findPeerSocket(local, remote)
	if err != nil || !found {
		t.Fatalf("findPeerSocket = %v, %v", found, err)
	}
	raw, err := client.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	raw.Control(func(fd uintptr) { link, _ = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) })
	if want := fmt.Sprintf("socket:[%d]", e.Inode); link != want {
		t.Errorf("client descriptor links to %q, the entry found names %q", link, want)
	}
	if e.UID != uint32(os.Geteuid()) || unmapAddrPort(e.Local) != remote || unmapAddrPort(e.Remote) != local {
		t.Errorf("entry %+v, want uid %d, local %v, remote %v", e, os.Geteuid(), remote, local)
	}
	// sock_diag and the socket tables in /proc agree.
	d, err := openDiag()
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	for name, find := range map[string]func(l, r netip.AddrPort) (sockEntry, bool, error){
		"sock_diag": func(l, r netip.AddrPort) (sockEntry, bool, error) { return diagFindSocket(d, l, r) },
		"/proc":     tableFindSocket,
	} {
		got, found, err := find(remote, local)
		if err != nil || !found || unmapAddrPort(got.Local) != remote || unmapAddrPort(got.Remote) != local || got.UID != e.UID || got.Inode != e.Inode {
			t.Errorf("%s: %+v %v %v, want %+v", name, got, found, err, e)
		}
	}
	// A connection that does not exist has no peer.
	if _, found, err := findPeerSocket(local, netip.AddrPortFrom(remote.Addr(), remote.Port()^1)); found || err != nil {
		t.Errorf("a made-up peer was found (%v)", err)
	}
	// The daemon's own process may be its host.
	if v := checkPeer(os.Getpid(), uint32(os.Geteuid()), local, remote, func(int) bool { return false }); v.refused {
		t.Errorf("own process refused: %s", v.why)
	}
}

// TestCheckPeerHolder: a connection held by a child of this process is
// refused with the child's pid when this process is the daemon, and allowed
// when the child itself is (its own process), or when the connection is
// held by a process that is not below the daemon.
func TestCheckPeerHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(time.Minute))
	defer cancel()
	exe, _ := os.Executable()
	holder := exec.CommandContext(ctx, exe)
	holder.Env = append(os.Environ(), roleEnv("peer-hold", ln.Addr().String()))
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	local, remote := addrPorts(conn)
	never := func(int) bool { return false }
	v := checkPeer(os.Getpid(), uint32(os.Geteuid()), local, remote, never)
	if !v.refused || v.pid != holder.Process.Pid || !strings.Contains(v.why, fmt.Sprintf("process %d, a descendant of this daemon, holds its socket", holder.Process.Pid)) {
		t.Errorf("descendant holder: %+v, want refused naming pid %d", v, holder.Process.Pid)
	}
	if v := checkPeer(holder.Process.Pid, uint32(os.Geteuid()), local, remote, never); v.refused {
		t.Errorf("the holder as the daemon itself: refused: %s", v.why)
	}
	// This process's own connection, seen from the holder as the daemon:
	// not a descendant of it.
	client, server := loopbackPair(t)
	_ = client
	l2, r2 := addrPorts(server)
	if v := checkPeer(holder.Process.Pid, uint32(os.Geteuid()), l2, r2, never); v.refused {
		t.Errorf("a non-descendant refused: %s", v.why)
	}
}

func TestOwnerMayBeDescendant(t *testing.T) {
	for _, tt := range []struct {
		self, sock uint32
		want       bool
	}{
		{0, 0, true}, {0, 1000, true}, // root's descendants may be anyone
		{1000, 1000, true}, // serve's own user
		{1000, 0, true},    // root, through a set-user-ID program
		{1000, 1001, false},
	} {
		if got := ownerMayBeDescendant(tt.self, tt.sock); got != tt.want {
			t.Errorf("serve uid %d, socket uid %d: %v, want %v", tt.self, tt.sock, got, tt.want)
		}
	}
}

// peerUser is who serve, its tools and the second host run as: nobody when
// the tests run as root (so that serve cannot read a hidden descendant's
// descriptors), else the current user.
type peerUser struct {
	cred *syscall.Credential // nil: the current user
	exe  string              // a copy of the test binary this user may run
	dir  string              // a directory this user owns
}

func newPeerUser(t *testing.T) peerUser {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return peerUser{exe: exe, dir: t.TempDir()}
	}
	// t.TempDir's parent is mode 0700: make a tree nobody may enter.
	base, err := os.MkdirTemp("", "acpguard-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	u := peerUser{cred: &syscall.Credential{Uid: 65534, Gid: 65534}, exe: filepath.Join(base, "acpguard.test"), dir: filepath.Join(base, "home")}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(u.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(u.dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return u
}

// command runs the test binary as u with env added to the test's own.
func (u peerUser) command(ctx context.Context, args []string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, u.exe, args...)
	cmd.Env = append(append(os.Environ(), roleEnv("main"), "GORACE=atexit_sleep_ms=0", "HOME="+u.dir), env...)
	cmd.Dir = u.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	cmd.WaitDelay = testTimeout(5 * time.Second)
	return cmd
}

// TestServeRefusesDescendantHost runs serve, as an ordinary user when the
// test runs as root, and asks it from four places: this test process and a
// second host process of serve's own user (not descendants: 200), and an
// allowed run_shell_command of one of serve's sessions, once plain and once
// after making itself not dumpable (descendants: 403 host_is_descendant,
// with the right host token, and the connection closed).
func TestServeRefusesDescendantHost(t *testing.T) {
	u := newPeerUser(t)
	ws := filepath.Join(u.dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if u.cred != nil {
		os.Chown(ws, int(u.cred.Uid), int(u.cred.Gid))
	}
	settings := filepath.Join(u.dir, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "host-token-the-tool-knows"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
	defer cancel()
	cmd := u.command(ctx, []string{"serve", "--port", "0", "--workspace", ws, "--settings", settings}, envServerToken+"="+token)
	url, _, stderr, stop := servedLines(t, cmd)
	defer stop() // SIGTERM: serve reaps its child and removes what it made for it
	td := &testDaemon{url: url, stderr: stderr}
	auth := []string{"Authorization", "Bearer " + token}

	if r := td.do(t, "GET", "/health", "", auth...); r.status != 200 {
		t.Fatalf("GET /health from the test (not a descendant) = %d %s", r.status, r.body)
	}
	r := td.do(t, "POST", "/session", "", auth...)
	var created newSessionResponse
	if r.status != 200 || decodeStrict(r.body, &created) != nil {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	// A host of serve's own user that serve did not start, asking while
	// serve's ACP child (not dumpable, serve's user) runs.
	out := filepath.Join(u.dir, "second-host.out")
	host := u.command(ctx, nil, roleEnv("peer-client", url), envPeerToken+"="+token, envPeerOut+"="+out)
	if b, err := host.CombinedOutput(); err != nil {
		t.Fatalf("second host: %v %s", err, b)
	}
	if got, _ := os.ReadFile(out); string(got) != "200 " {
		t.Errorf("second host of serve's user, not a descendant: %q, want 200\nserve stderr:\n%s", got, stderr.String())
	}
	for _, hide := range []string{"0", "1"} {
		out := filepath.Join(ws, "tool-"+hide+".out")
		command := fmt.Sprintf("%s %s=%s %s=%s %s=%s %s", roleEnv("peer-client", url), envPeerToken, token, envPeerOut, out, envPeerHide, hide, shellQuote(u.exe))
		text, _ := json.Marshal("call run_shell_command " + mustJSON(t, map[string]string{"command": command}))
		body := `{"prompt":[{"type":"text","text":` + string(text) + `}]}`
		if r := td.do(t, "POST", "/session/"+created.SessionID+"/prompt", body, auth...); r.status != 202 {
			t.Fatalf("prompt = %d %s", r.status, r.body)
		}
		got := waitForContent(t, out)
		if got != "403 "+codeHostIsDescendant {
			t.Errorf("tool (not dumpable: %s) asking serve: %q, want 403 %s and the connection closed\nserve stderr:\n%s", hide, got, codeHostIsDescendant, stderr.String())
		}
	}
	if n := strings.Count(stderr.String(), "code="+codeHostIsDescendant); n != 2 {
		t.Errorf("%d refusals logged, want 2:\n%s", n, stderr.String())
	}
	// And the test, still not a descendant, is still served.
	if r := td.do(t, "GET", "/health", "", auth...); r.status != 200 {
		t.Errorf("GET /health from the test after the tools = %d %s", r.status, r.body)
	}
}

// waitForContent returns the contents of path once it is there and not empty.
func waitForContent(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(testTimeout(time.Minute))
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
			return string(data)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was not written within a minute", path)
	return ""
}

// BenchmarkPeerCheck measures the check of one accepted connection whose
// peer is not a descendant: the socket table lookup, the daemon's own
// descriptors, the walk of its descendants and the descriptors
// of each descendant's threads. The daemon here is a shell with two
// children; the peer is this process.
func BenchmarkPeerCheck(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "sleep 600 & sleep 600 & wait")
	startShellGroup(b, sh)
	for i := 0; ; i++ {
		if kids, _ := descendantsOf(sh.Process.Pid); len(kids) == 2 {
			break
		}
		if i > 500 {
			b.Fatal("the shell did not start its children")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, server := loopbackPair(b)
	local, remote := addrPorts(server)
	never := func(int) bool { return false }
	procs, _ := os.ReadDir("/proc")
	b.ReportMetric(float64(len(procs)), "proc-entries")
	b.Run("not-descendant", func(b *testing.B) {
		for b.Loop() {
			if v := checkPeer(sh.Process.Pid, uint32(os.Geteuid()), local, remote, never); v.refused {
				b.Fatal(v.why)
			}
		}
	})
	b.Run("walk-only", func(b *testing.B) {
		for b.Loop() {
			if kids, err := descendantsOf(sh.Process.Pid); len(kids) != 2 || err != nil {
				b.Fatal(kids, err)
			}
		}
	})
	b.Run("lookup-only", func(b *testing.B) {
		for b.Loop() {
			if _, found, err := findPeerSocket(local, remote); !found || err != nil {
				b.Fatal(found, err)
			}
		}
	})
	b.Run("own-process", func(b *testing.B) {
		for b.Loop() {
			if v := checkPeer(os.Getpid(), uint32(os.Geteuid()), local, remote, never); v.refused {
				b.Fatal(v.why)
			}
		}
	})
}

// BenchmarkPeerCheckBusyDaemon measures the check where its cost is felt: a
// daemon with many descriptors of its own (as serve has one per event
// stream and per child channel) and, among its descendants, a Go program
// whose threads share one descriptor table; the peer is this process, not
// a descendant.
func BenchmarkPeerCheckBusyDaemon(b *testing.B) {
	const ownFDs = 200
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	script := fmt.Sprintf(`sleep 600 & sleep 600 & sleep 600 | "$0" &
for i in $(seq 10 %d); do eval "exec $i</dev/null"; done
wait`, 9+ownFDs)
	sh := exec.CommandContext(ctx, "bash", "-c", script, exe)
	sh.Env = append(os.Environ(), roleEnv("peer-hold", ln.Addr().String()))
	startShellGroup(b, sh)
	held, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer held.Close()
	selfFD := "/proc/" + strconv.Itoa(sh.Process.Pid) + "/fd"
	for i := 0; ; i++ {
		kids, _ := descendantsOf(sh.Process.Pid)
		fds, _ := os.ReadDir(selfFD)
		if len(kids) == 4 && len(fds) >= ownFDs {
			break
		}
		if i > 500 {
			b.Fatalf("the daemon did not start: %d descendants, %d descriptors", len(kids), len(fds))
		}
		time.Sleep(10 * time.Millisecond)
	}
	threads := 0
	kids, _ := descendantsOf(sh.Process.Pid)
	for _, k := range kids {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(k) + "/task")
		threads += len(tasks)
	}
	_, server := loopbackPair(b)
	local, remote := addrPorts(server)
	never := func(int) bool { return false }
	b.ReportMetric(float64(threads), "descendant-threads")
	for b.Loop() {
		if v := checkPeer(sh.Process.Pid, uint32(os.Geteuid()), local, remote, never); v.refused {
			b.Fatal(v.why)
		}
	}
}

// TestDescendantsOf: the walk down the children files finds what the
// parent links of every process in /proc say is below the root, and no
// other process.
func TestDescendantsOf(t *testing.T) {
	sh := exec.Command("bash", "-c", `bash -c "sleep 600 & wait" & sleep 600 & wait`)
	startShellGroup(t, sh)
	below := func(root int) []int {
		children := map[int][]int{}
		for _, p := range scanProcs() {
			children[p.ppid] = append(children[p.ppid], p.pid)
		}
		var out []int
		for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
			out = append(out, children[queue[0]]...)
			queue = append(queue, children[queue[0]]...)
		}
		slices.Sort(out)
		return out
	}
	deadline := time.Now().Add(testTimeout(10 * time.Second))
	for len(below(sh.Process.Pid)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not start its three descendants: %v", below(sh.Process.Pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := below(sh.Process.Pid)
	got, err := descendantsOf(sh.Process.Pid)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("descendantsOf(%d) = %v, %v; the parent links say %v", sh.Process.Pid, got, err, want)
	}
	mine, err := descendantsOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(want, sh.Process.Pid) {
		if !slices.Contains(mine, pid) {
			t.Errorf("descendantsOf(self) = %v, without %d", mine, pid)
		}
	}
	if slices.Contains(mine, os.Getppid()) || slices.Contains(mine, os.Getpid()) {
		t.Errorf("descendantsOf(self) = %v holds this process or its parent", mine)
	}
	// A tree over the bound is an error, never a shorter list: the check
	// then refuses. Three processes and their threads, against bounds
	// below and at their count.
	for _, limit := range []int{1, 2} {
		if got, err := descendantsWithin(sh.Process.Pid, limit); err == nil || got != nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d processes", limit)) {
			t.Errorf("descendantsWithin(%d, %d) = %v, %v; want the bound's error", sh.Process.Pid, limit, got, err)
		}
	}
	if got, err := descendantsWithin(sh.Process.Pid, 64); err != nil || len(got) != 3 {
		t.Errorf("descendantsWithin(%d, 64) = %v, %v; want the three", sh.Process.Pid, got, err)
	}
}

// checkPeerOwnFirst is holderVerdict as it was with serve's own descriptors
// read first: the reference TestHolderVerdictOrder compares it with.
func checkPeerOwnFirst(self int, entry sockEntry, managed func(pid int) bool, p peerProbe) peerVerdict {
	if p.ownHolds(self, entry.Inode) == holdsSocket {
		return peerVerdict{}
	}
	return descendantsVerdict(self, entry, managed, p)
}

// TestHolderVerdictOrder: reading the daemon's own descriptors last, and
// only after a refusal, gives the verdict of reading them first, over
// every combination of (held by the daemon, held by a descendant, a
// descendant that hides its descriptors, managed or not, of the socket's
// owner or not, the process list unreadable); and the daemon's own
// descriptors are not read when the verdict is to allow.
func TestHolderVerdictOrder(t *testing.T) {
	const self, a, b = 100, 101, 102
	entry := sockEntry{Inode: 7, UID: 1000}
	states := []holding{holdsNot, holdsSocket, holdsUnknown}
	cases := 0
	for _, own := range states {
		for _, ha := range states {
			for _, hb := range states {
				for _, managedA := range []bool{false, true} {
					for _, runsAsB := range []bool{false, true} {
						for _, listErr := range []bool{false, true} {
							ownReads := 0
							p := peerProbe{
								ownHolds: func(pid int, inode uint64) holding {
									if pid != self || inode != entry.Inode {
										t.Fatalf("ownHolds(%d, %d)", pid, inode)
									}
									ownReads++
									return own
								},
								descendants: func(root int) ([]int, error) {
									if listErr {
										return nil, errors.New("list processes: gone")
									}
									return []int{a, b}, nil
								},
								holds: func(pid int, _ uint64) holding {
									if pid == a {
										return ha
									}
									return hb
								},
								runsAs: func(pid int, _ uint32) bool { return pid == a || runsAsB },
							}
							managed := func(pid int) bool { return pid == a && managedA }
							name := fmt.Sprintf("own=%d a=%d b=%d managedA=%v runsAsB=%v listErr=%v", own, ha, hb, managedA, runsAsB, listErr)
							want := checkPeerOwnFirst(self, entry, managed, p)
							ownReads = 0
							got := holderVerdict(self, entry, managed, p)
							if got != want {
								t.Errorf("%s: %+v, want %+v", name, got, want)
							}
							if !got.refused && own != holdsSocket && ownReads != 0 {
								t.Errorf("%s: allowed after reading the daemon's own descriptors", name)
							}
							cases++
						}
					}
				}
			}
		}
	}
	if cases != 216 {
		t.Fatalf("%d cases", cases)
	}
}

// startPeerHolder starts the "peer-hold" role connected to ln, with env
// added, and returns it and the accepted connection's addresses.
func startPeerHolder(t *testing.T, ln net.Listener, env ...string) (*exec.Cmd, netip.AddrPort, netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(time.Minute))
	exe, _ := os.Executable()
	holder := exec.CommandContext(ctx, exe)
	holder.Env = append(append(os.Environ(), roleEnv("peer-hold", ln.Addr().String())), env...)
	holder.Stderr = os.Stderr
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); holder.Wait(); cancel() })
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	local, remote := addrPorts(conn)
	return holder, local, remote
}

// TestThreadsHold: a socket held by a multi-threaded descendant is found,
// and so is one held only in a thread that has a descriptor table of its
// own; threads that share the table already read are not read again when
// kcmp(2) can tell.
func TestThreadsHold(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	never := func(int) bool { return false }
	for _, own := range []string{"0", "1"} {
		t.Run("own-table="+own, func(t *testing.T) {
			holder, local, remote := startPeerHolder(t, ln, envPeerOwnTable+"="+own)
			pid := holder.Process.Pid
			entry, found, err := findPeerSocket(local, remote)
			if err != nil || !found {
				t.Fatalf("findPeerSocket = %v, %v", found, err)
			}
			want := socketLinkPrefix + strconv.FormatUint(entry.Inode, 10) + "]"
			if main := fdDirHolds("/proc/"+strconv.Itoa(pid)+"/fd/", want); own == "1" && main != holdsNot {
				t.Fatalf("the main thread's table holds the socket (%d): the test does not test a table of its own", main)
			}
			if got := processHolds(pid, entry.Inode); got != holdsSocket {
				t.Errorf("processHolds = %d, want the holder found", got)
			}
			v := checkPeer(os.Getpid(), uint32(os.Geteuid()), local, remote, never)
			if !v.refused || v.pid != pid {
				t.Errorf("checkPeer = %+v, want refused naming pid %d", v, pid)
			}
			// Another socket: every distinct table is read, no shared one twice.
			tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
			defer func() { t.Logf("kcmp works: %v, %d threads", kcmpWorks(), len(tasks)) }()
			reads := 0
			count := func(fdDir, want string) holding { reads++; return fdDirHolds(fdDir, want) }
			if got := threadsHold(pid, 1, count); got != holdsNot {
				t.Errorf("threadsHold of a socket nobody holds = %d", got)
			}
			tables := 1
			if own == "1" {
				tables = 2
			}
			if len(tasks) < 2 {
				t.Fatalf("the holder has %d threads", len(tasks))
			}
			if kcmpWorks() && reads != tables {
				t.Errorf("%d fd directories read for %d threads and %d tables", reads, len(tasks), tables)
			} else if !kcmpWorks() && reads != len(tasks) {
				t.Errorf("without kcmp: %d fd directories read for %d threads", reads, len(tasks))
			}
		})
	}
}

// kcmpWorks reports whether kcmp tells this process's threads share a table.
func kcmpWorks() bool {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		if tid, _ := strconv.Atoi(task.Name()); tid != os.Getpid() && tid > 0 {
			return sameFDTable(os.Getpid(), tid)
		}
	}
	return false
}

// startShellGroup starts sh in a process group of its own, skips b when
// bash cannot start, and kills the group when b ends.
func startShellGroup(b testing.TB, sh *exec.Cmd) {
	b.Helper()
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		b.Skip("no bash:", err)
	}
	b.Cleanup(func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		sh.Wait()
	})
}
