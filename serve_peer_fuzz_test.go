// serve_peer_fuzz_test.go fuzzes the readers of the kernel's /proc text
// that decide whether a host connection comes from serve's descendants.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// formatProcNetTCPLine writes e as the kernel writes a line of
// /proc/net/tcp (IPv4 addresses) or /proc/net/tcp6.
func formatProcNetTCPLine(slot int, e procTCPEntry) string {
	addr := func(a netip.AddrPort) string {
		b := a.Addr().AsSlice()
		s := ""
		for i := 0; i < len(b); i += 4 {
			s += fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b[i:]))
		}
		return fmt.Sprintf("%s:%04X", s, a.Port())
	}
	return fmt.Sprintf("%4d: %s %s 01 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000 20 4 30 10 -1\n",
		slot, addr(e.Local), addr(e.Remote), e.UID, e.Inode)
}

func FuzzProcNetTCPLine(f *testing.F) {
	for _, seed := range []string{
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
		"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 27614 1 0000000000000000 100 0 0 10 0\n",
		"   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 0 1 0000000000000000 20 4 30 10 -1\n",
		"   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n",
		"   0: 0000000000000000FFFF00000100007F:9C40 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000 0 0 99",
		"0: 0100007F:1F90 0100007F:1F90 01 0:0 0:0 0 4294967296 0 1",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseProcNetTCPLine(line)
		if err != nil {
			return
		}
		if !e.Local.IsValid() || !e.Remote.IsValid() || e.Local.Addr().BitLen() != e.Remote.Addr().BitLen() {
			t.Fatalf("%q parsed to invalid or mixed addresses %+v", line, e)
		}
		// What parses is what the kernel would print for it.
		again, err := parseProcNetTCPLine([]byte(formatProcNetTCPLine(0, e)))
		if err != nil || again != e {
			t.Fatalf("%q -> %+v -> %+v, %v", line, e, again, err)
		}
	})
}

func FuzzStatPPID(f *testing.F) {
	for _, seed := range []string{
		"1234 (bash) S 1 1234 1234 34816 1234 4194304 ...",
		"77 (a) b) c) R 76 77 77 0 -1",
		"9 () Z 0 ",
		"9 (x) S -1 ",
		"9 (x) S 99999999999999999999 ",
		"no parenthesis",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stat []byte) {
		ppid, ok := parseStatPPID(stat)
		if !ok {
			return
		}
		if ppid < 0 {
			t.Fatalf("%q: negative ppid %d", stat, ppid)
		}
		// The same text after another comm gives the same parent.
		if again, ok := parseStatPPID(append([]byte("1 (s) p) q"), stat...)); !ok || again != ppid {
			t.Fatalf("%q: ppid %d, after a longer comm %d %v", stat, ppid, again, ok)
		}
	})
}

func FuzzSockDiagReply(f *testing.F) {
	ne := binary.NativeEndian
	msg := func(typ uint16, seq uint32, body []byte) []byte {
		b := make([]byte, nlmsgHeaderLen, nlmsgHeaderLen+len(body))
		ne.PutUint32(b[0:], uint32(nlmsgHeaderLen+len(body)))
		ne.PutUint16(b[4:], typ)
		ne.PutUint32(b[8:], seq)
		return append(b, body...)
	}
	diag := make([]byte, inetDiagMsgLen)
	diag[0], diag[1] = 2, 1 // AF_INET, established
	putDiagSockID(diag[4:], netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:4170"))
	ne.PutUint32(diag[64:], 65534)
	ne.PutUint32(diag[68:], 12345)
	enoent := make([]byte, 20)
	ne.PutUint32(enoent, uint32(0xfffffffe)) // -ENOENT
	f.Add(msg(sockDiagByFamily, 1, diag))
	f.Add(msg(2, 1, enoent))
	f.Add(append(msg(sockDiagByFamily, 7, diag), msg(sockDiagByFamily, 1, diag)...))
	f.Add(msg(sockDiagByFamily, 1, diag[:40]))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, found, err := parseSockDiagReply(b, 1)
		if err != nil || !found {
			if e != (procTCPEntry{}) {
				t.Fatalf("%x: not found but an entry %+v", b, e)
			}
			return
		}
		if !e.Local.IsValid() || !e.Remote.IsValid() || e.Local.Addr().Is4In6() || e.Remote.Addr().Is4In6() {
			t.Fatalf("%x: entry %+v has an invalid or mapped address", b, e)
		}
		// What is read is what a request for it would have asked for.
		req := sockDiagRequest(1, e.Local, e.Remote)
		var id [36]byte
		putDiagSockID(id[:], e.Local, e.Remote)
		if !bytes.Equal(req[nlmsgHeaderLen+8:nlmsgHeaderLen+8+36], id[:]) {
			t.Fatalf("%x: request id differs", b)
		}
	})
}
