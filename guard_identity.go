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
// or the socket tables /proc/net/tcp and /proc/net/tcp6 (proc_net.go).
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
)

// identityHint is how an operator makes acpguard accept a provider that
// now listens on another socket.
const identityHint = "a new handshake accepts a restarted provider: send SIGHUP to serve or acp; " +
	"a provider running as another user is accepted by uid"

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
