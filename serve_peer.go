// serve_peer.go owns "tools cannot act as hosts" at the connection: serve
// resolves the process at the other end of each accepted TCP connection it
// can see in this machine's socket tables, and refuses a peer that is one of
// its own descendants (a tool, a hook, an MCP server, or anything they
// started), serve's own process excepted: 403 host_is_descendant.
//
// How: the peer's socket is the TCP socket whose own address is the
// connection's remote address and whose peer is the connection's local
// address. One sock_diag lookup (or, where that cannot see it, the socket
// tables /proc/net/tcp and tcp6) gives its inode and owner uid, whoever
// holds it, without reading any process's /proc entries. A socket of
// another user than serve's and root's is a host's (see
// ownerMayBeDescendant). Otherwise serve walks its descendants (the ppid
// links of /proc/<pid>/stat) and looks for that inode among the descriptors
// of each of their threads (/proc/<pid>/task/<tid>/fd: a thread may have a
// descriptor table of its own). A process whose descriptors serve may not
// read (one that made itself not dumpable) counts as holding the socket when
// it runs as the socket's owner, and so does one that holds an io_uring
// instance (which can keep a socket without a descriptor): when serve cannot
// rule a descendant out, the connection is refused. serve's own ACP children
// are the exception: they are not dumpable by design, run serve's own
// binary, open no connection to serve and accept no descriptor from anyone.
//
// The check runs once per accepted connection, at its first request, and
// its verdict holds for every later request on that connection.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// codeHostIsDescendant is the host API error code of a refused peer.
const codeHostIsDescendant = "host_is_descendant"

// The kernel's socket tables, one line per socket of this network namespace.
const (
	procNetTCP  = "/proc/net/tcp"
	procNetTCP6 = "/proc/net/tcp6"
)

// Bounds on what serve reads of /proc for one check: a socket table line is
// about 150 bytes (tcp6), a stat line a few hundred bytes even with a long
// comm; a longer line or file is not one the kernel wrote.
const (
	maxProcNetLine  = 1 << 10
	maxProcStatSize = 4 << 10
)

// Link texts of /proc/<pid>/fd entries.
const (
	socketLinkPrefix = "socket:["
	ioUringLink      = "anon_inode:[io_uring]"
)

// procTCPEntry is one line of /proc/net/tcp or /proc/net/tcp6.
type procTCPEntry struct {
	Local, Remote netip.AddrPort // as the socket's owner sees them
	UID           uint32
	Inode         uint64 // 0 for a socket no descriptor holds any more
}

// parseProcNetTCPLine parses one socket line of /proc/net/tcp or tcp6:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//
// Addresses are the 4 or 16 bytes of the address printed as 32-bit words in
// the kernel's byte order, then ':' and the port in hex. The header line
// and anything else malformed is an error.
func parseProcNetTCPLine(line []byte) (procTCPEntry, error) {
	var f [10][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " \t")
		end := bytes.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			return procTCPEntry{}, errors.New("socket line: too few fields")
		}
		f[i], rest = rest[:end], rest[end:]
	}
	if !bytes.HasSuffix(f[0], []byte(":")) {
		return procTCPEntry{}, fmt.Errorf("socket line: slot %q does not end in ':'", f[0])
	}
	var e procTCPEntry
	var err error
	if e.Local, err = parseProcNetAddr(f[1]); err != nil {
		return procTCPEntry{}, err
	}
	if e.Remote, err = parseProcNetAddr(f[2]); err != nil {
		return procTCPEntry{}, err
	}
	if e.Local.Addr().BitLen() != e.Remote.Addr().BitLen() {
		return procTCPEntry{}, errors.New("socket line: local and remote address families differ")
	}
	uid, err := strconv.ParseUint(string(f[7]), 10, 32)
	if err != nil {
		return procTCPEntry{}, fmt.Errorf("socket line: uid %q: not a decimal number", f[7])
	}
	if e.Inode, err = strconv.ParseUint(string(f[9]), 10, 64); err != nil {
		return procTCPEntry{}, fmt.Errorf("socket line: inode %q: not a decimal number", f[9])
	}
	e.UID = uint32(uid)
	return e, nil
}

// parseProcNetAddr parses "0100007F:1F90" (IPv4) or 32 hex digits and a
// port (IPv6).
func parseProcNetAddr(b []byte) (netip.AddrPort, error) {
	ipHex, portHex, ok := bytes.Cut(b, []byte(":"))
	if !ok || len(portHex) != 4 || (len(ipHex) != 8 && len(ipHex) != 32) {
		return netip.AddrPort{}, fmt.Errorf("socket line: address %q: want 8 or 32 hex digits, ':' and 4", b)
	}
	port, err := parseHexUint(portHex)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("socket line: address %q: %v", b, err)
	}
	var ip [16]byte
	for i := 0; i < len(ipHex)/8; i++ {
		w, err := parseHexUint(ipHex[8*i : 8*i+8])
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("socket line: address %q: %v", b, err)
		}
		// The kernel prints each 32-bit word of the address as a number in
		// its own byte order.
		binary.NativeEndian.PutUint32(ip[4*i:], uint32(w))
	}
	if len(ipHex) == 8 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[:4])), uint16(port)), nil
	}
	return netip.AddrPortFrom(netip.AddrFrom16(ip), uint16(port)), nil
}

// parseHexUint parses upper- or lower-case hex digits, nothing else.
func parseHexUint(b []byte) (uint64, error) {
	var n uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, fmt.Errorf("%q is not hex", b)
		}
		n = n<<4 | uint64(d)
	}
	return n, nil
}

// findPeerSocket returns the socket entry of the other end of the TCP
// connection between local (serve's end) and remote, and whether there is
// one in this network namespace. It asks sock_diag for that one socket; when
// sock_diag does not know it, serve's own end tells whether sock_diag sees
// this connection's sockets at all, and if it does not (no TCP handler in
// this kernel, netlink refused), the socket tables in /proc answer instead.
// Reading those costs about a millisecond of kernel time whatever the
// number of sockets, as the kernel walks its whole hash table.
func findPeerSocket(local, remote netip.AddrPort) (procTCPEntry, bool, error) {
	local, remote = unmapAddrPort(local), unmapAddrPort(remote)
	e, found, err := sockDiagFind(remote, local)
	if err == nil && found {
		return e, true, nil
	}
	if err == nil {
		if _, own, err := sockDiagFind(local, remote); err == nil && own {
			return procTCPEntry{}, false, nil
		}
	}
	return procNetFind(local, remote)
}

// procNetFind is findPeerSocket through the socket tables of /proc.
func procNetFind(local, remote netip.AddrPort) (procTCPEntry, bool, error) {
	for _, table := range []string{procNetTCP, procNetTCP6} {
		data, err := os.ReadFile(table)
		if errors.Is(err, fs.ErrNotExist) && table == procNetTCP6 {
			continue // a kernel without IPv6
		}
		if err != nil {
			return procTCPEntry{}, false, fmt.Errorf("read the socket table: %w", err)
		}
		for line := range bytes.Lines(data) {
			if len(line) > maxProcNetLine {
				continue
			}
			e, err := parseProcNetTCPLine(line)
			if err != nil {
				continue // the header line
			}
			if unmapAddrPort(e.Local) == remote && unmapAddrPort(e.Remote) == local {
				return e, true, nil
			}
		}
	}
	return procTCPEntry{}, false, nil
}

// sock_diag (netlink): the kernel looks up one TCP socket by its four
// addresses and answers with its state, owner uid and inode, without
// reading any process's /proc entries.
const (
	netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	nlmsgHeaderLen   = 16 // struct nlmsghdr
	inetDiagReqV2Len = 56 // struct inet_diag_req_v2
	inetDiagMsgLen   = 72 // struct inet_diag_msg
	tcpStateListen   = 10 // TCP_LISTEN
	// The lookup answers at once; a kernel that does not within this bound
	// is not one to wait for.
	sockDiagTimeout = time.Second
	// One reply is one message of inet_diag_msg and its attributes.
	sockDiagReplyBuf = 8 << 10
)

// sockDiagFind asks sock_diag for the TCP socket whose own address is
// sockLocal and whose peer is sockRemote.
func sockDiagFind(sockLocal, sockRemote netip.AddrPort) (procTCPEntry, bool, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return procTCPEntry{}, false, fmt.Errorf("open sock_diag: %w", err)
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(sockDiagTimeout.Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return procTCPEntry{}, false, fmt.Errorf("sock_diag timeout: %w", err)
	}
	const seq = 1
	if err := syscall.Sendto(fd, sockDiagRequest(seq, sockLocal, sockRemote), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return procTCPEntry{}, false, fmt.Errorf("ask sock_diag: %w", err)
	}
	buf := make([]byte, sockDiagReplyBuf)
	for {
		n, from, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return procTCPEntry{}, false, fmt.Errorf("read sock_diag: %w", err)
		}
		if nl, ok := from.(*syscall.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue // only the kernel answers
		}
		e, found, err := parseSockDiagReply(buf[:n], seq)
		if err != nil || !found {
			return procTCPEntry{}, false, err
		}
		// The lookup falls back to a listening socket of the port: that is
		// not the socket asked for.
		if e.Local != sockLocal || e.Remote != sockRemote {
			return procTCPEntry{}, false, nil
		}
		return e, true, nil
	}
}

// sockDiagRequest is a SOCK_DIAG_BY_FAMILY request (not a dump) for the
// TCP socket local-remote, in the family of its addresses.
func sockDiagRequest(seq uint32, local, remote netip.AddrPort) []byte {
	b := make([]byte, nlmsgHeaderLen+inetDiagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], sockDiagByFamily)
	ne.PutUint16(b[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(b[8:], seq)
	r := b[nlmsgHeaderLen:]
	r[0] = syscall.AF_INET6
	if local.Addr().Is4() {
		r[0] = syscall.AF_INET
	}
	r[1] = syscall.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	putDiagSockID(r[8:], local, remote)
	// No interface; the cookie is INET_DIAG_NOCOOKIE.
	ne.PutUint32(r[8+40:], ^uint32(0))
	ne.PutUint32(r[8+44:], ^uint32(0))
	return b
}

// putDiagSockID writes the ports and addresses of struct inet_diag_sockid:
// ports and addresses in network byte order.
func putDiagSockID(id []byte, local, remote netip.AddrPort) {
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	copy(id[4:20], local.Addr().AsSlice())
	copy(id[20:36], remote.Addr().AsSlice())
}

// parseSockDiagReply reads the kernel's answer to request seq: one
// inet_diag_msg (found), or an error message, where ENOENT means no such
// socket. A listening socket is not a connection's end.
func parseSockDiagReply(b []byte, seq uint32) (procTCPEntry, bool, error) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHeaderLen {
		n := int(ne.Uint32(b[0:]))
		if n < nlmsgHeaderLen || n > len(b) {
			return procTCPEntry{}, false, fmt.Errorf("sock_diag reply: message length %d of %d bytes", n, len(b))
		}
		typ, mseq, body := ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[nlmsgHeaderLen:n]
		b = b[min(len(b), (n+3)&^3):] // messages are 4-byte aligned
		if mseq != seq {
			continue
		}
		switch typ {
		case syscall.NLMSG_ERROR:
			if len(body) < 4 {
				return procTCPEntry{}, false, errors.New("sock_diag reply: short error message")
			}
			errno := -int32(ne.Uint32(body))
			if errno == 0 {
				continue // an acknowledgement
			}
			if syscall.Errno(errno) == syscall.ENOENT {
				return procTCPEntry{}, false, nil
			}
			return procTCPEntry{}, false, fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
		case sockDiagByFamily:
			if len(body) < inetDiagMsgLen {
				return procTCPEntry{}, false, fmt.Errorf("sock_diag reply: %d bytes, want at least %d", len(body), inetDiagMsgLen)
			}
			var size int
			switch body[0] {
			case syscall.AF_INET:
				size = 4
			case syscall.AF_INET6:
				size = 16
			default:
				return procTCPEntry{}, false, fmt.Errorf("sock_diag reply: address family %d", body[0])
			}
			if body[1] == tcpStateListen {
				return procTCPEntry{}, false, nil
			}
			id := body[4:52]
			local := netip.AddrPortFrom(diagAddr(id[4:20], size), binary.BigEndian.Uint16(id[0:]))
			remote := netip.AddrPortFrom(diagAddr(id[20:36], size), binary.BigEndian.Uint16(id[2:]))
			return procTCPEntry{
				Local: unmapAddrPort(local), Remote: unmapAddrPort(remote),
				UID: ne.Uint32(body[64:]), Inode: uint64(ne.Uint32(body[68:])),
			}, true, nil
		}
	}
	return procTCPEntry{}, false, errors.New("sock_diag reply: no answer to the request")
}

func diagAddr(b []byte, size int) netip.Addr {
	if size == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}

func unmapAddrPort(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// parseStatPPID returns the parent pid from the text of /proc/<pid>/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses,
// so the fields are counted after the last ')'.
func parseStatPPID(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	rest := stat[i+1:]
	var fields [2][]byte
	for k := range fields {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end <= 0 {
			return 0, false
		}
		fields[k], rest = rest[:end], rest[end:]
	}
	if len(fields[0]) != 1 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil || ppid < 0 {
		return 0, false
	}
	return ppid, true
}

// descendantsOf returns the processes below root (root not included), found
// through the parent links of every process in /proc.
func descendantsOf(root int) ([]int, error) {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	children := make(map[int][]int)
	buf := make([]byte, maxProcStatSize)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		n, err := readSmallFile("/proc/"+name+"/stat", buf)
		if err != nil {
			continue // it ended meanwhile
		}
		if ppid, ok := parseStatPPID(buf[:n]); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if c != root {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out, nil
}

// readSmallFile reads a /proc file of at most len(buf) bytes with one read.
func readSmallFile(path string, buf []byte) (int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	return syscall.Read(fd, buf)
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
	for _, task := range tasks {
		switch fdDirHolds(taskDir+"/"+task.Name()+"/fd/", want) {
		case holdsSocket:
			return holdsSocket
		case holdsUnknown:
			verdict = holdsUnknown
		}
	}
	return verdict
}

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
	// serve's own threads share one descriptor table.
	want := socketLinkPrefix + strconv.FormatUint(entry.Inode, 10) + "]"
	if fdDirHolds("/proc/"+strconv.Itoa(self)+"/fd/", want) == holdsSocket {
		return peerVerdict{}
	}
	procs, err := descendantsOf(self)
	if err != nil {
		return peerVerdict{refused: true, why: err.Error()}
	}
	var unknown int
	for _, pid := range procs {
		switch processHolds(pid, entry.Inode) {
		case holdsSocket:
			return peerVerdict{refused: true, pid: pid, why: fmt.Sprintf("process %d, a descendant of this daemon, holds its socket", pid)}
		case holdsUnknown:
			if unknown == 0 && !managed(pid) && processRunsAs(pid, entry.UID) {
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
	local, lok := tcpAddrPort(c.LocalAddr())
	remote, rok := tcpAddrPort(c.RemoteAddr())
	if !lok || !rok {
		return peerVerdict{refused: true, why: fmt.Sprintf("not a TCP connection (%s)", c.RemoteAddr().Network())}
	}
	managed := d.managedChildPIDs()
	return checkPeer(os.Getpid(), uint32(os.Geteuid()), local, remote, func(pid int) bool { return managed[pid] })
}

func tcpAddrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	return t.AddrPort(), true
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
