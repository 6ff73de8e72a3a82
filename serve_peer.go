// serve_peer.go owns, at the connection, that tools cannot act as hosts
// (DESIGN.md §2, §7): serve resolves the process at the other end of each
// accepted TCP connection it can see in this machine's socket tables, and refuses a peer that is one of
// its own descendants (a tool, a hook, an MCP server, or anything they
// started), serve's own process excepted: 403 host_is_descendant.
//
// How: the peer's socket is the TCP socket whose own address is the
// connection's remote address and whose peer is the connection's local
// address. One sock_diag lookup (or, where that cannot see it, the socket
// tables /proc/net/tcp and tcp6) gives its inode and owner uid, whoever
// holds it, without reading any process's /proc entries. A socket of
// another user than serve's and root's is a host's (see
// ownerMayBeDescendant). Otherwise serve walks its descendants down from
// itself (the children files of their threads, proc_stat.go: no other
// process is visited, and a tree that cannot be read whole is refused) and
// looks for that inode among the descriptors of each of their threads
// (/proc/<pid>/task/<tid>/fd: a thread may have a
// descriptor table of its own; one that kcmp(2) says shares the table
// already read is skipped). serve's own descriptors are read last, and only
// when a descendant would be refused: serve's own process may be its host.
// A process whose descriptors serve may not read (one that made itself not dumpable) counts as holding the socket when
// it runs as the socket's owner, and so does one that holds an io_uring
// instance (which can keep a socket without a descriptor): when serve cannot
// rule a descendant out, the connection is refused. serve's own ACP children
// are the exception: they are not dumpable by design, run serve's own
// binary, open no connection to serve and accept no descriptor from anyone.
//
// The check runs once per accepted connection, at its first request, and
// its verdict holds for every later request on that connection.
// It sees the process tree and the descriptors at that one moment: DESIGN.md
// §2 says what a tool that can read the host token can do unseen, and the
// sandbox setting that keeps the token from tools.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// Link texts of /proc/<pid>/fd entries.
const (
	socketLinkPrefix = "socket:["
	ioUringLink      = "anon_inode:[io_uring]"
)

// findPeerSocket returns the socket of the other end of the TCP connection
// between local (serve's end) and remote, and whether there is one in this
// network namespace. It asks sock_diag for that one socket; when sock_diag
// does not know it, serve's own end tells whether sock_diag sees this
// connection's sockets at all, and if it does not (no TCP handler in this
// kernel, netlink refused), the socket tables in /proc answer instead.
// Reading those costs about a millisecond of kernel time whatever the
// number of sockets, as the kernel walks its whole hash table.
func findPeerSocket(local, remote netip.AddrPort) (sockEntry, bool, error) {
	local, remote = unmapAddrPort(local), unmapAddrPort(remote)
	if d, err := openDiag(); err == nil {
		defer d.close()
		e, found, err := diagFindSocket(d, remote, local)
		if err == nil && found {
			return e, true, nil
		}
		if err == nil {
			if _, own, err := diagFindSocket(d, local, remote); err == nil && own {
				return sockEntry{}, false, nil
			}
		}
	}
	return tableFindSocket(remote, local)
}

// diagFindSocket asks sock_diag for the TCP socket whose own address is
// sockLocal and whose peer is sockRemote (both unmapped). A lookup that
// misses answers with a listening socket of the port, which is not it.
func diagFindSocket(d *diagConn, sockLocal, sockRemote netip.AddrPort) (sockEntry, bool, error) {
	family := uint8(syscall.AF_INET6)
	if sockLocal.Addr().Is4() {
		family = syscall.AF_INET
	}
	var found sockEntry
	ok := false
	err := d.query(family, allTCPStates, false, sockLocal, sockRemote, func(e sockEntry) {
		if e.State != tcpListen && unmapAddrPort(e.Local) == sockLocal && unmapAddrPort(e.Remote) == sockRemote {
			found, ok = e, true
		}
	})
	return found, ok, err
}

// tableFindSocket is diagFindSocket through the socket tables of /proc: an
// IPv4 socket may be an IPv6 one with mapped addresses, so both are read.
func tableFindSocket(sockLocal, sockRemote netip.AddrPort) (sockEntry, bool, error) {
	var found sockEntry
	ok := false
	for _, table := range []string{procNetTCP, procNetTCP6} {
		err := readSocketTable(table, func(e sockEntry) {
			if !ok && e.State != tcpListen && unmapAddrPort(e.Local) == sockLocal && unmapAddrPort(e.Remote) == sockRemote {
				found, ok = e, true
			}
		})
		if err != nil {
			return sockEntry{}, false, fmt.Errorf("find the peer's socket: %w", err)
		}
		if ok {
			return found, true, nil
		}
	}
	return sockEntry{}, false, nil
}

// holding is what serve can tell about one process and one socket.
type holding int

const (
	holdsNot     holding = iota
	holdsSocket          // a descriptor of it names the socket
	holdsUnknown         // its descriptors cannot be read, or it has an io_uring
)

// processHolds looks for socket:[inode] among the descriptors of every
// thread of pid.
func processHolds(pid int, inode uint64) holding {
	return threadsHold(pid, inode, fdDirHolds)
}

// threadsHold is processHolds reading each fd directory with read. A
// thread that kcmp(2) says shares the descriptor table of the first thread
// read (the threads of a process normally share one) is not read again;
// when kcmp cannot tell, for any reason, the thread's directory is read.
func threadsHold(pid int, inode uint64, read func(fdDir, want string) holding) holding {
	taskDir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(taskDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return holdsNot // it ended
		}
		return holdsUnknown
	}
	want := socketLinkPrefix + strconv.FormatUint(inode, 10) + "]"
	verdict := holdsNot
	first := 0 // compared with this one thread only, the cost stays linear in threads
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		switch {
		case err != nil || tid <= 0:
		case first == 0:
			first = tid
		case sameFDTable(first, tid):
			continue
		}
		switch read(taskDir+"/"+task.Name()+"/fd/", want) {
		case holdsSocket:
			return holdsSocket
		case holdsUnknown:
			verdict = holdsUnknown
		}
	}
	return verdict
}

// kcmpFiles is KCMP_FILES, kcmp(2)'s question "do these two tasks share one
// descriptor table", answered 0 when they do.
const kcmpFiles = 2

// sysKcmp is kcmp(2)'s system call number per architecture; on another,
// every thread's descriptors are read.
var sysKcmp = map[string]uintptr{
	"amd64": 312,
	"arm64": 272,
}

// sameFDTable reports whether kcmp(2) says threads a and b share one
// descriptor table; any failure (no kcmp in this kernel, a thread that
// ended, one serve may not look at) answers false, and so does a /proc of
// another pid namespace than serve's, whose numbers kcmp would take for
// other threads.
func sameFDTable(a, b int) bool {
	nr, ok := sysKcmp[runtime.GOARCH]
	if !ok || !procIsOwnPIDNamespace() {
		return false
	}
	r, _, e := syscall.RawSyscall6(nr, uintptr(a), uintptr(b), kcmpFiles, 0, 0, 0)
	return e == 0 && r == 0
}

// procIsOwnPIDNamespace reports whether /proc numbers processes as serve's
// pid namespace does: /proc/self names serve's own pid.
var procIsOwnPIDNamespace = sync.OnceValue(func() bool {
	link, err := os.Readlink("/proc/self")
	return err == nil && link == strconv.Itoa(os.Getpid())
})

// fdDirHolds looks for the link text want in a /proc fd directory ("/"
// at the end). A directory that is gone holds nothing.
func fdDirHolds(fdDir, want string) holding {
	fds, err := os.ReadDir(fdDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return holdsNot
	case err != nil:
		return holdsUnknown
	}
	verdict := holdsNot
	buf := make([]byte, 64)
	for _, fd := range fds {
		n, err := syscall.Readlink(fdDir+fd.Name(), buf)
		if err != nil {
			continue // closed meanwhile
		}
		switch string(buf[:n]) {
		case want:
			return holdsSocket
		case ioUringLink:
			verdict = holdsUnknown
		}
	}
	return verdict
}

// processRunsAs reports whether uid is among the real, effective, saved and
// file-system uids of pid (/proc/<pid>/status, readable for any process).
// A process that cannot be looked at counts as running as uid.
func processRunsAs(pid int, uid uint32) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if errors.Is(err, fs.ErrNotExist) {
		return false // it ended
	}
	if err != nil {
		return true
	}
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		for _, f := range bytes.Fields(rest) {
			if u, err := strconv.ParseUint(string(f), 10, 32); err != nil || uint32(u) == uid {
				return true
			}
		}
		return false
	}
	return true
}

// peerVerdict is the outcome of one connection's check.
type peerVerdict struct {
	refused bool
	pid     int    // the descendant that holds the socket, 0 when unknown
	why     string // for the error message and the log
}

// ownerMayBeDescendant reports whether a socket owned by sockUID may have
// been made by a descendant of a daemon running as selfUID. A daemon that is
// not root has descendants of its own user, and of another only through a
// set-user-ID program: root's, or one of a user that is neither the host's
// nor serve's, whose identity a tool cannot take. So a socket of another
// user than serve's and root is a host's; the walk is skipped, which makes
// the check of a host running as its own user one sock_diag lookup.
func ownerMayBeDescendant(selfUID, sockUID uint32) bool {
	return selfUID == 0 || sockUID == 0 || sockUID == selfUID
}

// checkPeer decides whether the peer of the connection local-remote may be
// a host of the daemon whose process is self, running as selfUID (its
// effective uid); managed are serve's own ACP children.
func checkPeer(self int, selfUID uint32, local, remote netip.AddrPort, managed func(pid int) bool) peerVerdict {
	entry, found, err := findPeerSocket(local, remote)
	switch {
	case err != nil:
		return peerVerdict{refused: true, why: err.Error()}
	case !found && !remote.Addr().Unmap().IsLoopback():
		// A peer on another machine: only the host token can tell.
		return peerVerdict{}
	case !found || entry.Inode == 0:
		return peerVerdict{refused: true, why: "its socket is not in this machine's socket table or no process holds it"}
	}
	if !ownerMayBeDescendant(selfUID, entry.UID) {
		return peerVerdict{}
	}
	return holderVerdict(self, entry, managed, systemProbe)
}

// peerProbe is how holderVerdict looks at processes: the tests count its
// questions.
type peerProbe struct {
	ownHolds    func(self int, inode uint64) holding
	descendants func(root int) ([]int, error)
	holds       func(pid int, inode uint64) holding
	runsAs      func(pid int, uid uint32) bool
}

var systemProbe = peerProbe{
	// serve's own threads share one descriptor table.
	ownHolds: func(self int, inode uint64) holding {
		return fdDirHolds("/proc/"+strconv.Itoa(self)+"/fd/", socketLinkPrefix+strconv.FormatUint(inode, 10)+"]")
	},
	descendants: descendantsOf,
	holds:       processHolds,
	runsAs:      processRunsAs,
}

// holderVerdict decides on the socket entry of a peer that may be a
// descendant of self: refused when a descendant holds it or may hold it
// unseen, unless self holds it itself (the daemon's own process may be its
// host). self's own descriptors, which grow with its connections, are read
// only when they can change the verdict: after a refusal.
func holderVerdict(self int, entry sockEntry, managed func(pid int) bool, p peerProbe) peerVerdict {
	v := descendantsVerdict(self, entry, managed, p)
	if v.refused && p.ownHolds(self, entry.Inode) == holdsSocket {
		return peerVerdict{}
	}
	return v
}

// descendantsVerdict refuses the socket when a descendant of self holds it,
// or one that is not a managed child, runs as the socket's owner and hides
// its descriptors may hold it.
func descendantsVerdict(self int, entry sockEntry, managed func(pid int) bool, p peerProbe) peerVerdict {
	procs, err := p.descendants(self)
	if err != nil {
		return peerVerdict{refused: true, why: err.Error()}
	}
	var unknown int
	for _, pid := range procs {
		switch p.holds(pid, entry.Inode) {
		case holdsSocket:
			return peerVerdict{refused: true, pid: pid, why: fmt.Sprintf("process %d, a descendant of this daemon, holds its socket", pid)}
		case holdsUnknown:
			if unknown == 0 && !managed(pid) && p.runsAs(pid, entry.UID) {
				unknown = pid
			}
		}
	}
	if unknown != 0 {
		return peerVerdict{refused: true, pid: unknown, why: fmt.Sprintf("process %d, a descendant of this daemon running as the socket's owner (uid %d), hides its descriptors, so it may hold the socket", unknown, entry.UID)}
	}
	return peerVerdict{}
}

// connPeerKey keys the connection's *connPeer in a request context.
type connPeerKey struct{}

// connPeer is one accepted connection and its verdict, decided once.
type connPeer struct {
	conn    net.Conn
	once    sync.Once
	verdict peerVerdict
}

// peerConnContext is the http.Server's ConnContext: it remembers the
// connection, so its first request can check the peer.
func (d *daemon) peerConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connPeerKey{}, &connPeer{conn: c})
}

// peerAllowed answers 403 host_is_descendant, and closes the connection,
// when the request's peer is refused. A request that came over no accepted
// connection of the daemon (a handler test) is not checked.
func (d *daemon) peerAllowed(w http.ResponseWriter, r *http.Request) bool {
	cp, _ := r.Context().Value(connPeerKey{}).(*connPeer)
	if cp == nil {
		return true
	}
	cp.once.Do(func() { cp.verdict = d.checkConnPeer(cp.conn) })
	if !cp.verdict.refused {
		return true
	}
	d.obs.logger().Warn("host request refused", "code", codeHostIsDescendant, "peer", r.RemoteAddr, "pid", cp.verdict.pid, "reason", cp.verdict.why)
	w.Header().Set("Connection", "close")
	writeHostError(w, http.StatusForbidden, codeHostIsDescendant,
		fmt.Sprintf("refuse host request from %q: %s; tools of this daemon cannot act as hosts, run the host outside it", r.RemoteAddr, cp.verdict.why))
	return false
}

// checkConnPeer resolves the connection's two addresses and checks its peer.
func (d *daemon) checkConnPeer(c net.Conn) peerVerdict {
	local, lok := addrPortOf(c.LocalAddr())
	remote, rok := addrPortOf(c.RemoteAddr())
	if !lok || !rok {
		return peerVerdict{refused: true, why: fmt.Sprintf("not a TCP connection (%s)", c.RemoteAddr().Network())}
	}
	managed := d.managedChildPIDs()
	return checkPeer(os.Getpid(), uint32(os.Geteuid()), local, remote, func(pid int) bool { return managed[pid] })
}

// managedChildPIDs returns the pids of the ACP children serve started.
func (d *daemon) managedChildPIDs() map[int]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[int]bool, len(d.chans))
	for ch := range d.chans {
		if ch.cmd != nil && ch.cmd.Process != nil {
			out[ch.cmd.Process.Pid] = true
		}
	}
	return out
}
