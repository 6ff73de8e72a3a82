// guard_identity_diag.go owns the fast way to the socket facts the
// provider identity check needs: the kernel's sock_diag netlink interface,
// which any process may query for the TCP sockets of its network namespace.
// One exact lookup finds the provider-side socket of a connection by its
// addresses and ports, and one dump per address family lists the listening
// sockets; neither walks the established-connection table, which the
// /proc/net/tcp tables walk whole whatever they hold (on a machine with a
// large table that is milliseconds per connection). The /proc tables stay
// the fallback for a kernel without sock_diag and for a connection the
// kernel has not finished accepting, whose owner only they show.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Wire names and sizes of the sock_diag protocol.
const (
	netlinkSockDiag  = 4  // the netlink protocol number of sock_diag
	sockDiagByFamily = 20 // the message type of an inet socket query and its answers
	nlmsgHeaderLen   = 16 // length, type, flags, sequence, port id
	inetDiagReqLen   = 56 // family, protocol, extensions, pad, states, socket id
	inetDiagMsgLen   = 72 // family, state, timer, retransmits, socket id, expires, queues, uid, inode
	inetDiagIDLen    = 48 // ports, two 16-byte addresses, interface, cookie
	// inetDiagNoCookie asks for a socket by its addresses alone.
	inetDiagNoCookie = 0xFFFFFFFF
	// allTCPStates selects sockets in every state.
	allTCPStates = 0xFFFFFFFF
)

// Bounds on one query. The kernel sends at most 32 KiB per datagram, so
// the buffer always holds one whole; a dump of listening sockets over
// maxDiagDumpBytes is refused like an oversized /proc table. The receive
// timeout only guards against a kernel that never answers: it always does.
const (
	diagRecvBuffer   = 64 << 10
	maxDiagDumpBytes = 32 << 20
	diagRecvTimeout  = 2 * time.Second
)

// errDiagNotAccepted is an exact lookup that found the connection still in
// the kernel's handshake queue: sock_diag shows such an entry with uid 0,
// the /proc tables with its listener's owner.
var errDiagNotAccepted = errors.New("sock_diag: the connection is not yet accepted")

// diagRequest encodes one SOCK_DIAG_BY_FAMILY query for TCP sockets of
// family in states; with dump unset it asks for the one socket whose local
// end is src and remote end is dst.
func diagRequest(seq uint32, family uint8, states uint32, dump bool, src, dst netip.AddrPort) []byte {
	b := make([]byte, nlmsgHeaderLen+inetDiagReqLen)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], sockDiagByFamily)
	flags := uint16(syscall.NLM_F_REQUEST)
	if dump {
		flags |= syscall.NLM_F_DUMP
	}
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	r := b[nlmsgHeaderLen:]
	r[0] = family
	r[1] = syscall.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], states)
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putDiagAddr(id[4:20], src.Addr())
	putDiagAddr(id[20:36], dst.Addr())
	binary.NativeEndian.PutUint32(id[40:], inetDiagNoCookie)
	binary.NativeEndian.PutUint32(id[44:], inetDiagNoCookie)
	return b
}

// putDiagAddr writes an address as the socket id holds it: an IPv4
// address in the first four bytes, an IPv6 one in all sixteen.
func putDiagAddr(b []byte, a netip.Addr) {
	switch {
	case a.Is4():
		v := a.As4()
		copy(b, v[:])
	case a.Is6():
		v := a.As16()
		copy(b, v[:])
	}
}

// decodeDiagMsg decodes the fixed part of one answer: a socket of family
// AF_INET or AF_INET6.
func decodeDiagMsg(b []byte) (sockEntry, error) {
	if len(b) < inetDiagMsgLen {
		return sockEntry{}, fmt.Errorf("sock_diag answer of %d bytes, want at least %d", len(b), inetDiagMsgLen)
	}
	var e sockEntry
	addr := func(raw []byte) netip.Addr {
		if b[0] == syscall.AF_INET {
			return netip.AddrFrom4([4]byte(raw[:4]))
		}
		return netip.AddrFrom16([16]byte(raw[:16]))
	}
	if b[0] != syscall.AF_INET && b[0] != syscall.AF_INET6 {
		return e, fmt.Errorf("sock_diag answer of address family %d", b[0])
	}
	e.State = b[1]
	id := b[4 : 4+inetDiagIDLen]
	e.Local = netip.AddrPortFrom(addr(id[4:20]), binary.BigEndian.Uint16(id[0:]))
	e.Remote = netip.AddrPortFrom(addr(id[20:36]), binary.BigEndian.Uint16(id[2:]))
	e.UID = binary.NativeEndian.Uint32(b[64:])
	e.Inode = uint64(binary.NativeEndian.Uint32(b[68:]))
	return e, nil
}

// decodeDiagReply decodes one datagram of answers to query seq, calling
// visit for each socket. done reports the end of the answer: a dump's done
// message, or an error message, which for an exact lookup that found
// nothing (ENOENT) is no socket rather than an error.
func decodeDiagReply(b []byte, seq uint32, visit func(sockEntry)) (done bool, err error) {
	for len(b) > 0 {
		if len(b) < nlmsgHeaderLen {
			return false, fmt.Errorf("sock_diag: %d trailing bytes", len(b))
		}
		n := binary.NativeEndian.Uint32(b[0:])
		typ := binary.NativeEndian.Uint16(b[4:])
		if n < nlmsgHeaderLen || uint64(n) > uint64(len(b)) {
			return false, fmt.Errorf("sock_diag: message length %d in %d bytes", n, len(b))
		}
		if got := binary.NativeEndian.Uint32(b[8:]); got != seq {
			return false, fmt.Errorf("sock_diag: answer to query %d, want %d", got, seq)
		}
		body := b[nlmsgHeaderLen:n]
		switch typ {
		case syscall.NLMSG_DONE:
			return true, nil
		case syscall.NLMSG_ERROR:
			if len(body) < 4 {
				return false, errors.New("sock_diag: short error message")
			}
			switch errno := -int32(binary.NativeEndian.Uint32(body)); {
			case errno == 0, syscall.Errno(errno) == syscall.ENOENT:
				return true, nil
			case errno < 0:
				return false, fmt.Errorf("sock_diag: error message %d", -errno)
			default:
				return false, fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
			}
		case sockDiagByFamily:
			e, err := decodeDiagMsg(body)
			if err != nil {
				return false, err
			}
			visit(e)
		default:
			return false, fmt.Errorf("sock_diag: message type %d", typ)
		}
		aligned := (uint64(n) + 3) &^ 3
		if aligned >= uint64(len(b)) {
			break
		}
		b = b[aligned:]
	}
	return false, nil
}

// diagConn is one sock_diag socket, used for the queries of one check.
type diagConn struct {
	fd  int
	seq uint32
	buf []byte
}

func openDiag() (*diagConn, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	tv := syscall.NsecToTimeval(diagRecvTimeout.Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	return &diagConn{fd: fd, buf: make([]byte, diagRecvBuffer)}, nil
}

func (d *diagConn) close() { syscall.Close(d.fd) }

// query sends one request and passes every socket of its answer to visit.
func (d *diagConn) query(family uint8, states uint32, dump bool, src, dst netip.AddrPort, visit func(sockEntry)) error {
	d.seq++
	kernel := &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}
	if err := syscall.Sendto(d.fd, diagRequest(d.seq, family, states, dump, src, dst), 0, kernel); err != nil {
		return fmt.Errorf("sock_diag send: %w", err)
	}
	total := 0
	for {
		n, from, err := syscall.Recvfrom(d.fd, d.buf, syscall.MSG_TRUNC)
		if err != nil {
			return fmt.Errorf("sock_diag receive: %w", err)
		}
		if n > len(d.buf) {
			return fmt.Errorf("sock_diag: a %d-byte answer, over %d", n, len(d.buf))
		}
		if nl, ok := from.(*syscall.SockaddrNetlink); !ok || nl.Pid != 0 {
			return errors.New("sock_diag: an answer not from the kernel")
		}
		if total += n; total > maxDiagDumpBytes {
			return fmt.Errorf("sock_diag: answer over %d bytes", maxDiagDumpBytes)
		}
		done, err := decodeDiagReply(d.buf[:n], d.seq, visit)
		if err != nil {
			return err
		}
		if done || !dump {
			return nil
		}
	}
}

// diagSocket is the sock_diag socket of one provider client, opened at
// first use and kept: opening and closing one costs more than the queries
// of a check. Checks take turns on it.
type diagSocket struct {
	mu sync.Mutex
	d  *diagConn
}

// view is viewConnection through sock_diag. A socket that failed is closed
// and a new one opened next time: a late answer must not be taken for the
// next query's.
func (s *diagSocket) view(provider, local netip.AddrPort) (socketView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == nil {
		d, err := openDiag()
		if err != nil {
			return socketView{provider: provider, local: local}, err
		}
		s.d = d
	}
	v, err := s.d.view(provider, local)
	if err != nil && !errors.Is(err, errDiagNotAccepted) {
		s.d.close()
		s.d = nil
	}
	return v, err
}

// close closes the socket; a later view opens a new one.
func (s *diagSocket) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d != nil {
		s.d.close()
		s.d = nil
	}
}

// view asks for the connection from local to provider: the exact lookup
// of its provider-side socket (skipped for an invalid local), then the
// listening sockets.
func (d *diagConn) view(provider, local netip.AddrPort) (socketView, error) {
	v := socketView{provider: provider, local: local}
	family := uint8(syscall.AF_INET6)
	families := []uint8{syscall.AF_INET6}
	if provider.Addr().Is4() {
		// An IPv4 connection may have been accepted by a dual-stack
		// IPv6 listener.
		family = syscall.AF_INET
		families = []uint8{syscall.AF_INET, syscall.AF_INET6}
	}
	if local.IsValid() {
		pending := false
		err := d.query(family, allTCPStates, false, provider, local, func(e sockEntry) {
			if e.State == tcpSynRecv {
				pending = true
				return
			}
			if e.State != tcpListen { // a lookup that misses names the listener instead
				v.add(e)
			}
		})
		if err != nil {
			return v, err
		}
		if pending {
			return v, errDiagNotAccepted
		}
	}
	for _, f := range families {
		if err := d.query(f, 1<<tcpListen, true, netip.AddrPort{}, netip.AddrPort{}, v.add); err != nil {
			return v, err
		}
	}
	return v, nil
}
