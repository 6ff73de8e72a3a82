// proc_net.go extends the proc group with what the kernel's socket tables,
// /proc/net/tcp and /proc/net/tcp6, say: the one parser of them, which the
// provider identity check (guard_identity.go) reads, and who holds a
// listening port, which a refused listen names.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// portHolder names who listens on TCP port, as /proc shows it: "process
// PID (COMM)" when the listening socket is in a process this user may see,
// "a process of uid N" otherwise, "" when no table shows a listener.
func portHolder(port uint16) string {
	var l *sockEntry
	for _, table := range []string{procNetTCP, procNetTCP6} {
		readSocketTable(table, func(e sockEntry) {
			if l == nil && e.State == tcpListen && e.Local.Port() == port {
				l = &e
			}
		})
	}
	if l == nil {
		return ""
	}
	want := "socket:[" + strconv.FormatUint(l.Inode, 10) + "]"
	for _, p := range scanProcs() {
		dir := "/proc/" + strconv.Itoa(p.pid)
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			if target, _ := os.Readlink(dir + "/fd/" + fd.Name()); target == want && l.Inode != 0 {
				comm, _ := os.ReadFile(dir + "/comm")
				return fmt.Sprintf("process %d (%s)", p.pid, visibleText(strings.TrimSpace(string(comm))))
			}
		}
	}
	return fmt.Sprintf("a process of uid %d", l.UID)
}

// listenError is the error of a refused listen on addr: for an address in
// use it names who holds the port and the flag that chooses another.
func listenError(addr string, port uint16, flag string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		if who := portHolder(port); who != "" {
			return fmt.Errorf("listen on %q: port %d is in use by %s: stop it, or choose another port with --%s", addr, port, who, flag)
		}
		return fmt.Errorf("listen on %q: port %d is in use: choose another port with --%s", addr, port, flag)
	}
	return fmt.Errorf("listen on %q: %w", addr, err)
}
