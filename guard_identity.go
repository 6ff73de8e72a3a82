// guard_identity.go owns the proof that a connection to the provider
// reaches the provider the handshake met. Over http:// nothing else proves
// it: a process of the same user can kill the provider, bind its freed port
// and collect the bearer token. So the handshake records the owner uid and
// the inode of the provider's listening socket, and every later connection,
// after connect and before its first byte, must reach a listener with the
// same owner uid and, when that uid is acpguard's own, the same inode; the
// socket that accepted the connection must belong to that uid too.
// Otherwise the call fails with category identity until a new handshake
// accepts the new listener.
//
// The facts come from the kernel's view of the TCP sockets of this network
// namespace, which any process may read and which needs nothing of the
// provider's own /proc entries (a provider of another user, or a
// non-dumpable one, hides those): sock_diag (guard_identity_diag.go),
// or the socket tables /proc/net/tcp and /proc/net/tcp6 parsed here.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
)

// The socket tables: IPv4 sockets in one, IPv6 sockets (dual-stack
// listeners and the IPv4 connections they accept included) in the other.
const (
	procNetTCP  = "/proc/net/tcp"
	procNetTCP6 = "/proc/net/tcp6"
)

// TCP states as the kernel numbers them in the tables' st column.
const (
	tcpEstablished = 0x01
	tcpSynRecv     = 0x03 // also a connection not yet accepted: it shows its listener's uid
	tcpListen      = 0x0A
)

// Bounds on one table read. A line is under 200 bytes, so a table over
// 32 MiB holds more than 150 000 sockets; reading more would stall every new
// provider connection, so the check fails closed instead. The buffer reads
// a table in a few system calls.
const (
	maxSocketTableBytes = 32 << 20
	socketTableBuffer   = 32 << 10
)

// identityHint is how an operator makes acpguard accept a provider that
// now listens on another socket.
const identityHint = "a new handshake accepts a restarted provider: send SIGHUP to serve, or restart acp; " +
	"a provider running as another user is accepted by uid"

// sockEntry is one TCP socket as the kernel shows it: a line of a socket
// table, or one sock_diag answer.
type sockEntry struct {
	Local, Remote netip.AddrPort // exactly as the kernel spells them (IPv4 in IPv6 stays mapped)
	State         uint8
	UID           uint32
	Inode         uint64 // 0 for a socket no process holds yet
}

// nextField returns the first space-separated field of b and the rest.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' {
		j++
	}
	return b[i:j], b[j:]
}

// parseHexField decodes exactly len(b) hex digits, at most 8.
func parseHexField(b []byte) (uint32, bool) {
	if len(b) == 0 || len(b) > 8 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b), 16, 32)
	return uint32(v), err == nil
}

// parseSocketAddr decodes an address:port field. The kernel prints each
// 32-bit word of the address as it lies in memory, read in the host's byte
// order, so the host's byte order turns it back; the port is a plain number.
func parseSocketAddr(b []byte) (netip.AddrPort, bool) {
	i := bytes.IndexByte(b, ':')
	if i < 0 || len(b)-i-1 != 4 {
		return netip.AddrPort{}, false
	}
	port, ok := parseHexField(b[i+1:])
	if !ok {
		return netip.AddrPort{}, false
	}
	hexAddr := b[:i]
	var addr netip.Addr
	switch len(hexAddr) {
	case 8:
		w, ok := parseHexField(hexAddr)
		if !ok {
			return netip.AddrPort{}, false
		}
		var a [4]byte
		binary.NativeEndian.PutUint32(a[:], w)
		addr = netip.AddrFrom4(a)
	case 32:
		var a [16]byte
		for k := range 4 {
			w, ok := parseHexField(hexAddr[8*k : 8*k+8])
			if !ok {
				return netip.AddrPort{}, false
			}
			binary.NativeEndian.PutUint32(a[4*k:], w)
		}
		addr = netip.AddrFrom16(a)
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// parseSocketLine parses one entry of /proc/net/tcp or /proc/net/tcp6:
//
//	slot: local remote st tx:rx tr:when retrnsmt uid timeout inode ...
//	   3: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 4242 1 ...
//
// The fields after the inode are not used; every field up to it must be
// there and well formed.
func parseSocketLine(line []byte) (sockEntry, error) {
	var e sockEntry
	slot, rest := nextField(line)
	if len(slot) < 2 || slot[len(slot)-1] != ':' {
		return e, fmt.Errorf("slot %q is not a number and a colon", slot)
	}
	if _, ok := parseDigits[uint64](slot[:len(slot)-1]); !ok {
		return e, fmt.Errorf("slot %q is not a number and a colon", slot)
	}
	var f []byte
	var ok bool
	f, rest = nextField(rest)
	if e.Local, ok = parseSocketAddr(f); !ok {
		return e, fmt.Errorf("local address %q is not hex address:port", f)
	}
	f, rest = nextField(rest)
	if e.Remote, ok = parseSocketAddr(f); !ok {
		return e, fmt.Errorf("remote address %q is not hex address:port", f)
	}
	f, rest = nextField(rest)
	st, ok := parseHexField(f)
	if !ok || len(f) != 2 {
		return e, fmt.Errorf("state %q is not two hex digits", f)
	}
	e.State = uint8(st)
	for _, name := range [...]string{"queues", "timer", "retransmits"} {
		if f, rest = nextField(rest); len(f) == 0 {
			return e, fmt.Errorf("no %s field", name)
		}
	}
	f, rest = nextField(rest)
	if e.UID, ok = parseDigits[uint32](f); !ok {
		return e, fmt.Errorf("uid %q is not a number", f)
	}
	if f, rest = nextField(rest); len(f) == 0 {
		return e, errors.New("no timeout field")
	}
	f, _ = nextField(rest)
	if e.Inode, ok = parseDigits[uint64](f); !ok {
		return e, fmt.Errorf("inode %q is not a number", f)
	}
	return e, nil
}

// scanSocketTable calls visit for every entry of one table. The first line
// is the column header; any other line that does not parse fails the read.
func scanSocketTable(r io.Reader, visit func(sockEntry)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, socketTableBuffer), socketTableBuffer)
	total := 0
	for n := 0; sc.Scan(); n++ {
		line := sc.Bytes()
		if total += len(line) + 1; total > maxSocketTableBytes {
			return fmt.Errorf("socket table over %d bytes", maxSocketTableBytes)
		}
		if n == 0 {
			if f, _ := nextField(line); string(f) != "sl" {
				return fmt.Errorf("socket table header %q: want the sl column first", line)
			}
			continue
		}
		e, err := parseSocketLine(line)
		if err != nil {
			return fmt.Errorf("socket table line %d: %w", n+1, err)
		}
		visit(e)
	}
	return sc.Err()
}

// readSocketTable scans the table at path. A kernel without IPv6 has no
// tcp6 table: that is an empty one.
func readSocketTable(path string, visit func(sockEntry)) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := scanSocketTable(f, visit); err != nil {
		return fmt.Errorf("read %q: %w", path, err)
	}
	return nil
}

// socketView is what the kernel says about one connection from local to
// the provider's address.
type socketView struct {
	provider, local netip.AddrPort
	// Listeners are the listening sockets that could have accepted it: on
	// the provider's port, at its address or at a wildcard of a family
	// that can accept it (an IPv6 wildcard counts for IPv4 even when it
	// is IPv6-only, which the kernel does not show: in doubt, it must
	// pass too).
	Listeners []sockEntry
	// Peers are the provider-side sockets of this very connection: local
	// is the provider's address, remote is ours.
	Peers []sockEntry
}

// add files one table entry under what it is to this connection, if
// anything.
func (v *socketView) add(e sockEntry) {
	if e.Local.Port() != v.provider.Port() {
		return
	}
	at := e.Local.Addr().Unmap()
	switch e.State {
	case tcpListen:
		wildcard := at.IsUnspecified() && (v.provider.Addr().Is4() || at.Is6())
		if at == v.provider.Addr() || wildcard {
			v.Listeners = append(v.Listeners, e)
		}
	case tcpEstablished, tcpSynRecv:
		if v.local.IsValid() && at == v.provider.Addr() && e.Remote.Addr().Unmap() == v.local.Addr() && e.Remote.Port() == v.local.Port() {
			v.Peers = append(v.Peers, e)
		}
	}
}

// viewConnection finds what the kernel says about the connection from
// local to provider (both IPv4 or both IPv6, unmapped): through sock_diag,
// or, when that fails, through the /proc tables. An invalid local asks for
// the listeners only.
func viewConnection(diag *diagSocket, provider, local netip.AddrPort) (socketView, error) {
	v, err := diag.view(provider, local)
	if err == nil {
		return v, nil
	}
	v, perr := viewConnectionTables(provider, local)
	if perr != nil {
		return v, fmt.Errorf("%v; %w", err, perr)
	}
	return v, nil
}

// viewConnectionTables reads the /proc socket tables for the connection.
// An IPv4 connection may have been accepted by a dual-stack IPv6 listener,
// so it reads both tables.
func viewConnectionTables(provider, local netip.AddrPort) (socketView, error) {
	v := socketView{provider: provider, local: local}
	tables := []string{procNetTCP6}
	if provider.Addr().Is4() {
		tables = []string{procNetTCP, procNetTCP6}
	}
	for _, path := range tables {
		if err := readSocketTable(path, v.add); err != nil {
			return v, err
		}
	}
	return v, nil
}

// providerIdentity is the provider as the handshake met it.
type providerIdentity struct {
	UID    uint32
	Inodes []uint64 // its listening sockets, sorted
}

func (id *providerIdentity) String() string {
	if id == nil {
		return "none"
	}
	return fmt.Sprintf("uid %d, listening socket inode %v", id.UID, id.Inodes)
}

// same reports whether a and b name the same listeners.
func (id *providerIdentity) same(other *providerIdentity) bool {
	if id == nil || other == nil {
		return id == other
	}
	return id.UID == other.UID && slices.Equal(id.Inodes, other.Inodes)
}

// identityError is a connection that did not reach the provider of the
// handshake, or whose provider could not be established; the provider
// client files it under failIdentity.
type identityError struct{ msg string }

func (e *identityError) Error() string { return "check provider identity: " + e.msg }

func identityFail(format string, a ...any) error {
	return &identityError{msg: fmt.Sprintf(format, a...)}
}

// peersOwnedBy checks that the connection has a provider-side socket and
// that every one belongs to uid.
func (v *socketView) peersOwnedBy(uid uint32) error {
	if len(v.Peers) == 0 {
		return identityFail("no socket on %q holds the connection from %q", v.provider, v.local)
	}
	for _, p := range v.Peers {
		if p.UID != uid {
			return identityFail("the socket on %q that accepted the connection from %q belongs to uid %d, not uid %d; %s",
				v.provider, v.local, p.UID, uid, identityHint)
		}
	}
	return nil
}

// identityOf is the provider a handshake's connection met: its listeners
// must share one owner, the one whose socket accepted the connection.
func identityOf(v socketView) (*providerIdentity, error) {
	if len(v.Listeners) == 0 {
		return nil, identityFail("no socket listens on %q", v.provider)
	}
	id := &providerIdentity{UID: v.Listeners[0].UID}
	for _, l := range v.Listeners {
		if l.UID != id.UID {
			return nil, identityFail("the sockets listening on %q belong to uid %d and uid %d", v.provider, id.UID, l.UID)
		}
		id.Inodes = append(id.Inodes, l.Inode)
	}
	slices.Sort(id.Inodes)
	if err := v.peersOwnedBy(id.UID); err != nil {
		return nil, err
	}
	return id, nil
}

// admit checks a later connection against the identity of the handshake.
// self is acpguard's own uid: a listener of that uid could be any process
// of the same user, so only the very sockets of the handshake are admitted;
// a listener of another uid could only have been opened by that user.
func (id *providerIdentity) admit(v socketView, self uint32) error {
	if id == nil {
		return identityFail("no handshake has recorded the provider on %q", v.provider)
	}
	if len(v.Listeners) == 0 {
		return identityFail("no socket listens on %q", v.provider)
	}
	for _, l := range v.Listeners {
		if l.UID != id.UID {
			return identityFail("the socket listening on %q belongs to uid %d, not uid %d as at the handshake; %s",
				v.provider, l.UID, id.UID, identityHint)
		}
		if id.UID == self && !slices.Contains(id.Inodes, l.Inode) {
			return identityFail("the socket listening on %q is inode %d, not one the handshake met (%v); %s",
				v.provider, l.Inode, id.Inodes, identityHint)
		}
	}
	return v.peersOwnedBy(id.UID)
}

// dial connects to the provider and, before the connection carries a byte,
// checks it: against the recorded identity, or, for a handshake (seen not
// nil), by recording what it met in seen.
func (c *providerClient) dial(ctx context.Context, seen *atomic.Pointer[providerIdentity]) (net.Conn, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.dialAddr.String())
	if err != nil {
		return nil, err
	}
	if err := c.checkConn(conn, seen); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (c *providerClient) checkConn(conn net.Conn, seen *atomic.Pointer[providerIdentity]) error {
	local, ok := addrPortOf(conn.LocalAddr())
	if !ok {
		return identityFail("connection to %q has no TCP local address", c.dialAddr)
	}
	v, err := viewConnection(&c.diag, c.dialAddr, local)
	if err != nil {
		return &identityError{msg: err.Error()}
	}
	if seen != nil {
		id, err := identityOf(v)
		if err != nil {
			return err
		}
		seen.Store(id)
		return nil
	}
	return c.ident.Load().admit(v, c.selfUID)
}

// handshakeClient is a one-request client whose connection records the
// provider it meets in seen: a fresh connection, never one from the pool,
// so that what the handshake accepts is the listener that answers it.
func (c *providerClient) handshakeClient(seen *atomic.Pointer[providerIdentity]) *http.Client {
	if c.http == nil { // a refused configuration: post fails before using it
		return nil
	}
	tr := c.http.Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx, seen) }
	return &http.Client{Transport: tr, CheckRedirect: c.http.CheckRedirect}
}

// acceptIdentity makes the provider a successful handshake met the one
// later connections must reach, and drops idle connections to any other.
func (c *providerClient) acceptIdentity(seen *atomic.Pointer[providerIdentity]) *wireError {
	id := seen.Load()
	if id == nil {
		return wireFail(failIdentity, "the handshake's connection recorded no provider")
	}
	c.ident.Store(id)
	c.http.CloseIdleConnections()
	return nil
}

// identity is the provider the last successful handshake met (nil before
// one).
func (c *providerClient) identity() *providerIdentity { return c.ident.Load() }
