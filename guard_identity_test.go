// guard_identity_test.go tests the provider identity check: the socket
// table parser against kernel-written vectors, the decisions over listeners
// and accepted sockets, and, with real processes on loopback, a provider
// killed and its port taken by a squatter, a SIGHUP that accepts a new
// provider, and a provider of another user restarted on its port.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// runSquatter binds addr and answers like a provider that allows everything:
// what a tool that killed the provider would run. Every request it receives
// is appended to the file its first argument names, with whether it carried
// an Authorization header.
func runSquatter(addr string) int {
	logPath := os.Args[1]
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "squatter: %v\n", err)
		return 1
	}
	fmt.Printf("squatting on %s\n", ln.Addr())
	http.Serve(ln, allowAllProvider(func(r *http.Request) {
		if f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			fmt.Fprintf(f, "%s %s authorization=%q\n", r.Method, r.URL.Path, r.Header.Get("Authorization"))
			f.Close()
		}
	}))
	return 0
}

// allowAllProvider answers every handshake and allows every call, with no
// check at all, after seen has seen the request.
func allowAllProvider(seen func(*http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		var req struct{ Nonce, RequestID string }
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", wireContentType)
		if r.URL.Path == wirePathHandshake {
			fmt.Fprintf(w, `{"protocolVersion":1,"nonce":%q,"capabilities":{"prepare":true}}`, req.Nonce)
			return
		}
		fmt.Fprintf(w, `{"protocolVersion":1,"requestId":%q,"allowed":true}`, req.RequestID)
	}
}

// socketLineVector is one line of testdata/socktable/lines.json.
type socketLineVector struct {
	Line   string `json:"line"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
	State  uint8  `json:"state"`
	UID    uint32 `json:"uid"`
	Inode  uint64 `json:"inode"`
	Error  string `json:"error"` // the field the error must name
}

func (v socketLineVector) entry() sockEntry {
	return sockEntry{Local: netip.MustParseAddrPort(v.Local), Remote: netip.MustParseAddrPort(v.Remote), State: v.State, UID: v.UID, Inode: v.Inode}
}

// loadSocketVectors reads one file of testdata/socktable: named vectors.
func loadSocketVectors[T any](t testing.TB, name string) map[string]T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "socktable", name))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]T
	if err := json.Unmarshal(data, &out); err != nil || len(out) == 0 {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// skipBigEndian skips a test of kernel-written addresses, which spell the
// host's byte order: the vectors were written by a little-endian kernel.
func skipBigEndian(t testing.TB) {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	if b[0] != 1 {
		t.Skip("the socket table vectors were written by a little-endian kernel")
	}
}

func TestSocketLineVectors(t *testing.T) {
	skipBigEndian(t)
	for name, v := range loadSocketVectors[socketLineVector](t, "lines.json") {
		t.Run(name, func(t *testing.T) {
			e, err := parseSocketLine([]byte(v.Line))
			if v.Error != "" {
				if err == nil || !strings.Contains(err.Error(), v.Error) {
					t.Fatalf("error = %v, want one naming %q", err, v.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := v.entry(); e != want {
				t.Errorf("entry = %+v, want %+v", e, want)
			}
		})
	}
}

// viewTables files the entries of the testdata tables under a connection.
func viewTables(t *testing.T, provider, local string) socketView {
	t.Helper()
	v := socketView{provider: netip.MustParseAddrPort(provider), local: netip.MustParseAddrPort(local)}
	tables := []string{"tcp6.txt"}
	if v.provider.Addr().Is4() {
		tables = []string{"tcp.txt", "tcp6.txt"}
	}
	for _, name := range tables {
		f, err := os.Open(filepath.Join("testdata", "socktable", name))
		if err != nil {
			t.Fatal(err)
		}
		err = scanSocketTable(f, v.add)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return v
}

func inodesOf(es []sockEntry) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.Inode)
	}
	return out
}

// TestSocketTableView: in whole kernel-written tables, a connection's
// listeners and its accepted socket are found, and nothing else: not our
// own end, not a pending connection of another client, not a TIME_WAIT
// entry, not a listener that cannot accept the connection's family.
func TestSocketTableView(t *testing.T) {
	skipBigEndian(t)
	tests := []struct {
		name, provider, local string
		listeners, peers      []uint64
		identity              string // identityOf, or the error it must contain
	}{
		{"ipv4 provider", "127.0.0.1:8787", "127.0.0.1:34264", []uint64{39433}, []uint64{39435}, "uid 1000, listening socket inode [39433]"},
		{"the pending connection", "127.0.0.1:8787", "127.0.0.1:34274", []uint64{39433}, []uint64{0}, "uid 1000, listening socket inode [39433]"},
		{"ipv4 through a dual-stack listener", "127.0.0.1:8789", "127.0.0.1:36768", []uint64{39439}, []uint64{39441}, "uid 65534, listening socket inode [39439]"},
		{"ipv6 provider", "[::1]:8788", "[::1]:58856", []uint64{39436}, []uint64{39438}, "uid 0, listening socket inode [39436]"},
		{"an ipv6 listener takes no ipv4", "127.0.0.1:8788", "127.0.0.1:58856", nil, nil, `no socket listens on "127.0.0.1:8788"`},
		{"no accepted socket", "127.0.0.1:8787", "127.0.0.1:40000", []uint64{39433}, nil, `no socket on "127.0.0.1:8787" holds the connection from "127.0.0.1:40000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viewTables(t, tt.provider, tt.local)
			if got := inodesOf(v.Listeners); !slices.Equal(got, tt.listeners) {
				t.Errorf("listeners = %v, want %v", got, tt.listeners)
			}
			if got := inodesOf(v.Peers); !slices.Equal(got, tt.peers) {
				t.Errorf("peers = %v, want %v", got, tt.peers)
			}
			id, err := identityOf(v)
			got := id.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.identity) {
				t.Errorf("identity = %s, want %s", got, tt.identity)
			}
		})
	}
}

func TestScanSocketTableRefusals(t *testing.T) {
	hdr := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	good := "   0: 0100007F:2253 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0\n"
	for name, tt := range map[string]struct{ table, err string }{
		"no header":    {good, "header"},
		"a bad line":   {hdr + good + "   1: garbage\n", "line 3: local address"},
		"a long line":  {hdr + good + strings.Repeat("x", socketTableBuffer+1) + "\n", "too long"},
		"empty is ok":  {"", ""},
		"header alone": {hdr, ""},
	} {
		err := scanSocketTable(strings.NewReader(tt.table), func(sockEntry) {})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: error %v, want %q", name, err, tt.err)
		}
	}
}

// TestProviderIdentityDecisions: what a later connection must meet.
func TestProviderIdentityDecisions(t *testing.T) {
	const self = 1000
	prov := netip.MustParseAddrPort("127.0.0.1:8787")
	local := netip.MustParseAddrPort("127.0.0.1:40000")
	listener := func(uid uint32, inode uint64) sockEntry {
		return sockEntry{Local: prov, State: tcpListen, UID: uid, Inode: inode}
	}
	peer := func(uid uint32) sockEntry {
		return sockEntry{Local: prov, Remote: local, State: tcpEstablished, UID: uid, Inode: 9}
	}
	view := func(ls []sockEntry, ps ...sockEntry) socketView {
		return socketView{provider: prov, local: local, Listeners: ls, Peers: ps}
	}
	own := &providerIdentity{UID: self, Inodes: []uint64{7}}
	other := &providerIdentity{UID: 65534, Inodes: []uint64{7}}
	tests := []struct {
		name string
		id   *providerIdentity
		v    socketView
		err  string // "" admits
	}{
		{"own uid, the same listener", own, view([]sockEntry{listener(self, 7)}, peer(self)), ""},
		{"own uid, a new listener", own, view([]sockEntry{listener(self, 8)}, peer(self)), "is inode 8, not one the handshake met ([7])"},
		{"own uid, another user's listener", own, view([]sockEntry{listener(0, 7)}, peer(0)), "belongs to uid 0, not uid 1000"},
		{"another uid, a new listener of that uid", other, view([]sockEntry{listener(65534, 8)}, peer(65534)), ""},
		{"another uid, a listener of ours", other, view([]sockEntry{listener(self, 8)}, peer(self)), "belongs to uid 1000, not uid 65534"},
		{"a second listener of ours beside the provider", other, view([]sockEntry{listener(65534, 7), listener(self, 8)}, peer(65534)), "belongs to uid 1000"},
		{"the accepting socket is not the listener's user", other, view([]sockEntry{listener(65534, 7)}, peer(self)), "accepted the connection from \"127.0.0.1:40000\" belongs to uid 1000"},
		{"no accepting socket", own, view([]sockEntry{listener(self, 7)}), "holds the connection"},
		{"no listener", own, view(nil, peer(self)), "no socket listens"},
		{"no handshake", nil, view([]sockEntry{listener(self, 7)}, peer(self)), "no handshake has recorded the provider"},
	}
	for _, tt := range tests {
		err := tt.id.admit(tt.v, self)
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: admit = %v, want %q", tt.name, err, tt.err)
		}
		if err != nil && !isIdentityError(err) {
			t.Errorf("%s: %v is not an identity failure", tt.name, err)
		}
	}
	if _, err := identityOf(view([]sockEntry{listener(self, 7), listener(0, 8)}, peer(self))); err == nil || !strings.Contains(err.Error(), "belong to uid 1000 and uid 0") {
		t.Errorf("listeners of two users at a handshake: %v", err)
	}
	if _, err := identityOf(view([]sockEntry{listener(self, 7)}, peer(0))); err == nil {
		t.Error("a handshake accepted a connection held by another user's socket")
	}
	id, err := identityOf(view([]sockEntry{listener(self, 9), listener(self, 7)}, peer(self)))
	if err != nil || !id.same(&providerIdentity{UID: self, Inodes: []uint64{7, 9}}) {
		t.Errorf("identity = %v, %v", id, err)
	}
}

// socketInode is the inode the kernel gave a listener's or a connection's socket.
func socketInode(t *testing.T, s interface{ File() (*os.File, error) }) uint64 {
	t.Helper()
	f, err := s.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// countingProvider serves a correct provider on ln and counts requests.
func countingProvider(t *testing.T, ln net.Listener) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	srv := &http.Server{Handler: allowAllProvider(func(*http.Request) { n.Add(1) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &n
}

// identityTestClient is a client of the provider on addr that has met none yet.
func identityTestClient(t testing.TB, addr string) *providerClient {
	c := newProviderClient(guardConfig{Mode: guardModeRequired, Endpoint: &url.URL{Scheme: "http", Host: addr}, Timeout: testTimeout(10 * time.Second), Token: providerTestToken})
	t.Cleanup(c.close)
	return c
}

// TestProviderIdentityRealSockets, over IPv4 and IPv6 loopback: the
// handshake records the very inode the kernel gave the provider's listener;
// a new listener of the same user on the same port gets no request at all
// and the call fails with category identity; a new handshake accepts it.
func TestProviderIdentityRealSockets(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "[::1]"} {
		t.Run(host, func(t *testing.T) {
			ln, err := net.Listen("tcp", host+":0")
			if err != nil {
				t.Skipf("no %s loopback: %v", host, err)
			}
			addr := ln.Addr().String()
			first := countingProvider(t, ln)
			c := identityTestClient(t, addr)
			if err := c.handshake(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := &providerIdentity{UID: uint32(os.Geteuid()), Inodes: []uint64{socketInode(t, ln.(*net.TCPListener))}}
			if !c.identity().same(want) {
				t.Fatalf("recorded %v, want %v", c.identity(), want)
			}
			if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
				t.Fatalf("prepare against the provider of the handshake: %+v", res)
			}
			ln.Close()
			c.close() // the old provider's keep-alive connection is gone with it
			ln2, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			second := countingProvider(t, ln2)
			res := c.prepare(context.Background(), providerTestCall)
			if res.Allowed || res.Category != failIdentity || res.Reason != "" {
				t.Fatalf("prepare against a new listener = %+v, want failure %q", res, failIdentity)
			}
			if !strings.Contains(res.Err.Error(), "not one the handshake met") || strings.Contains(res.Err.Error(), providerTestToken) {
				t.Errorf("failure detail = %v", res.Err)
			}
			if n := second.Load(); n != 0 {
				t.Fatalf("the new listener received %d requests before a handshake accepted it", n)
			}
			if err := c.handshake(context.Background()); err != nil {
				t.Fatal(err)
			}
			if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
				t.Fatalf("prepare after a new handshake: %+v", res)
			}
			if n := second.Load(); n != 2 || first.Load() != 2 {
				t.Errorf("requests: first provider %d, second %d; want 2 each", first.Load(), n)
			}
		})
	}
}

// TestProviderHandshakeFailureKeepsIdentity: a handshake that fails leaves
// the identity of the last successful one in force.
func TestProviderHandshakeFailureKeepsIdentity(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	countingProvider(t, ln)
	c := identityTestClient(t, ln.Addr().String())
	if err := c.handshake(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := c.identity()
	ln.Close()
	if err := c.handshake(context.Background()); err == nil {
		t.Fatal("a handshake with nothing listening succeeded")
	}
	if c.identity() != before {
		t.Errorf("identity after a failed handshake = %v, want %v", c.identity(), before)
	}
}

// diagReplyVector is one answer of testdata/socktable/diag.json.
type diagReplyVector struct {
	Hex     string             `json:"hex"`
	Seq     uint32             `json:"seq"`
	Entries []socketLineVector `json:"entries"`
	Done    bool               `json:"done"`
	Error   string             `json:"error"`
}

func TestDiagReplyVectors(t *testing.T) {
	skipBigEndian(t)
	for name, v := range loadSocketVectors[diagReplyVector](t, "diag.json") {
		t.Run(name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			var got []sockEntry
			done, err := decodeDiagReply(b, v.Seq, func(e sockEntry) { got = append(got, e) })
			if v.Error != "" {
				if err == nil || !strings.Contains(err.Error(), v.Error) {
					t.Fatalf("error = %v, want one saying %q", err, v.Error)
				}
				return
			}
			if err != nil || done != v.Done {
				t.Fatalf("done = %v, error = %v; want done %v", done, err, v.Done)
			}
			var want []sockEntry
			for _, e := range v.Entries {
				want = append(want, e.entry())
			}
			if !slices.Equal(got, want) {
				t.Errorf("sockets\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestSocketViewsAgree: on live loopback connections sock_diag and the
// /proc tables name the same listener and the same accepted socket, whose
// inode is the one the kernel gave the socket the provider accepted.
func TestSocketViewsAgree(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "[::1]"} {
		t.Run(host, func(t *testing.T) {
			ln, err := net.Listen("tcp", host+":0")
			if err != nil {
				t.Skipf("no %s loopback: %v", host, err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				conn, err := ln.Accept()
				if err == nil {
					accepted <- conn
				}
			}()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			peer := <-accepted
			defer peer.Close()
			provider, _ := addrPortOf(conn.RemoteAddr())
			local, _ := addrPortOf(conn.LocalAddr())
			var diag diagSocket
			defer diag.close()
			viaDiag, err := diag.view(provider, local)
			if err != nil {
				t.Fatalf("sock_diag: %v", err)
			}
			viaProc, err := viewConnectionTables(provider, local)
			if err != nil {
				t.Fatalf("/proc tables: %v", err)
			}
			for what, pair := range map[string][2][]sockEntry{"listeners": {viaDiag.Listeners, viaProc.Listeners}, "peers": {viaDiag.Peers, viaProc.Peers}} {
				if len(pair[0]) != 1 || !slices.Equal(pair[0], pair[1]) {
					t.Errorf("%s: sock_diag %+v, /proc %+v; want the same one", what, pair[0], pair[1])
				}
			}
			uid := uint32(os.Geteuid())
			if ino := socketInode(t, peer.(*net.TCPConn)); len(viaDiag.Peers) == 1 && (viaDiag.Peers[0].Inode != ino || viaDiag.Peers[0].UID != uid) {
				t.Errorf("accepted socket %+v, want inode %d uid %d", viaDiag.Peers[0], ino, uid)
			}
			if len(viaDiag.Listeners) == 1 && (viaDiag.Listeners[0].Inode != socketInode(t, ln.(*net.TCPListener)) || viaDiag.Listeners[0].UID != uid) {
				t.Errorf("listener %+v, want inode %d uid %d", viaDiag.Listeners[0], socketInode(t, ln.(*net.TCPListener)), uid)
			}
		})
	}
}

// encodeDiagMsg writes e as the kernel writes one sock_diag answer.
func encodeDiagMsg(e sockEntry, seq uint32) []byte {
	family := uint8(syscall.AF_INET6)
	if e.Local.Addr().Is4() {
		family = syscall.AF_INET
	}
	b := make([]byte, nlmsgHeaderLen+inetDiagMsgLen)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint32(b[8:], seq)
	m := b[nlmsgHeaderLen:]
	m[0], m[1] = family, e.State
	binary.BigEndian.PutUint16(m[4:], e.Local.Port())
	binary.BigEndian.PutUint16(m[6:], e.Remote.Port())
	putDiagAddr(m[8:24], e.Local.Addr())
	putDiagAddr(m[24:40], e.Remote.Addr())
	binary.NativeEndian.PutUint32(m[64:], e.UID)
	binary.NativeEndian.PutUint32(m[68:], uint32(e.Inode))
	return b
}

// FuzzSockDiagReply: the netlink answer decoder never panics, and every
// socket it decodes is exactly the one its kernel encoding decodes to.
func FuzzSockDiagReply(f *testing.F) {
	for _, v := range loadSocketVectors[diagReplyVector](f, "diag.json") {
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, v.Seq)
	}
	f.Fuzz(func(t *testing.T, data []byte, seq uint32) {
		decodeDiagReply(data, seq, func(e sockEntry) {
			if e.Local.Addr().Is4() != e.Remote.Addr().Is4() || e.Inode > 0xFFFFFFFF {
				t.Fatalf("decoded %+v from %x", e, data)
			}
			var again []sockEntry
			done, err := decodeDiagReply(encodeDiagMsg(e, seq), seq, func(e sockEntry) { again = append(again, e) })
			if err != nil || done || len(again) != 1 || again[0] != e {
				t.Fatalf("decoded %+v; its encoding decodes to %+v, %v", e, again, err)
			}
		})
	})
}

// formatSocketLine writes e as the kernel writes a table line.
func formatSocketLine(e sockEntry) string {
	addr := func(ap netip.AddrPort) string {
		a := ap.Addr()
		if a.Is4() {
			b := a.As4()
			return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(b[:]), ap.Port())
		}
		b := a.As16()
		var s strings.Builder
		for k := range 4 {
			fmt.Fprintf(&s, "%08X", binary.NativeEndian.Uint32(b[4*k:]))
		}
		return fmt.Sprintf("%s:%04X", s.String(), ap.Port())
	}
	return fmt.Sprintf("%4d: %s %s %02X 00000000:00000000 00:00000000 00000000 %5d %8d %d 1 0000000000000000 20 0 0 10 -1",
		7, addr(e.Local), addr(e.Remote), e.State, e.UID, 0, e.Inode)
}

// FuzzSocketLine: the line parser and the table scanner never panic, and
// an entry that parses is exactly the one its kernel spelling parses to.
func FuzzSocketLine(f *testing.F) {
	for _, v := range loadSocketVectors[socketLineVector](f, "lines.json") {
		f.Add([]byte(v.Line))
	}
	for _, name := range []string{"tcp.txt", "tcp6.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "socktable", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if e, err := parseSocketLine(data); err == nil {
			again, err := parseSocketLine([]byte(formatSocketLine(e)))
			if err != nil || again != e {
				t.Fatalf("%q parsed to %+v; its kernel spelling parses to %+v, %v", data, e, again, err)
			}
		}
		n := 0
		err := scanSocketTable(bytes.NewReader(data), func(sockEntry) { n++ })
		if err == nil && n > bytes.Count(data, []byte("\n")) {
			t.Fatalf("%d entries from %d lines", n, bytes.Count(data, []byte("\n"))+1)
		}
	})
}

// BenchmarkProviderIdentityCheck is the cost the check adds to each new
// connection to the provider (not to each call: the pool keeps
// connections): through sock_diag, and through the /proc tables that are
// its fallback, which walk the kernel's whole connection table.
func BenchmarkProviderIdentityCheck(b *testing.B) {
	for _, host := range []string{"127.0.0.1", "[::1]"} {
		ln, err := net.Listen("tcp", host+":0")
		if err != nil {
			b.Logf("no %s loopback: %v", host, err)
			continue
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
			}
		}()
		c := identityTestClient(b, ln.Addr().String())
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		var seen atomic.Pointer[providerIdentity]
		if err := c.checkConn(conn, &seen); err != nil {
			b.Fatal(err)
		}
		c.ident.Store(seen.Load())
		local, _ := addrPortOf(conn.LocalAddr())
		b.Run(host+"/sock_diag", func(b *testing.B) {
			for b.Loop() {
				if err := c.checkConn(conn, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(host+"/proc_tables", func(b *testing.B) {
			sockets := 0
			for b.Loop() {
				v, err := viewConnectionTables(c.dialAddr, local)
				if err == nil {
					err = c.ident.Load().admit(v, c.selfUID)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for _, p := range []string{procNetTCP, procNetTCP6} {
				readSocketTable(p, func(sockEntry) { sockets++ })
			}
			b.ReportMetric(float64(sockets), "sockets")
		})
	}
}

// providerProc is an "acpguard provider" or a squatter running as a real
// process.
type providerProc struct {
	cmd  *exec.Cmd
	addr string // host:port it listens on
}

// kill ends the process and waits for it, so its port is free.
func (p *providerProc) kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// startProviderProc starts the test binary as acpguard (args) or with env
// as something else, as cred's user when cred is set, and waits for the
// line on out (stdout or stderr) that starts with prefix and ends with the
// listening address.
func startProviderProc(t *testing.T, exe string, cred *syscall.Credential, stdout bool, prefix string, args []string, env ...string) *providerProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(append(os.Environ(), roleEnv("main"), "GORACE=atexit_sleep_ms=0"), env...)
	cmd.Dir = filepath.Dir(exe)
	cmd.WaitDelay = testTimeout(5 * time.Second)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out io.ReadCloser
	var err error
	if stdout {
		out, err = cmd.StdoutPipe()
	} else {
		out, err = cmd.StderrPipe()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &providerProc{cmd: cmd}
	t.Cleanup(func() { p.kill(); cancel() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			p.addr = strings.TrimPrefix(strings.TrimSpace(rest), "http://")
			break
		}
	}
	if p.addr == "" {
		t.Fatalf("%v exited without announcing its address: %v", args, cmd.Wait())
	}
	go io.Copy(io.Discard, out)
	return p
}

// startRefProviderProc runs "acpguard provider" on listen with policy.
func startRefProviderProc(t *testing.T, exe string, cred *syscall.Credential, listen, policy string, extra ...string) *providerProc {
	t.Helper()
	return startProviderProc(t, exe, cred, false, "acpguard provider: listening on ",
		append([]string{"provider", "--listen", listen, "--policy", policy}, extra...), envGuardToken+"="+providerTestToken)
}

// startSquatter binds addr in a process of the test's own user; its log
// file lists every request it receives.
func startSquatter(t *testing.T, addr string) (p *providerProc, log string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(t.TempDir(), "squatter.log")
	return startProviderProc(t, exe, nil, true, "squatting on ", []string{log}, roleEnv("squatter", addr)), log
}

// squatterRequests is what a squatter received: nothing, if all is well.
func squatterRequests(t *testing.T, log string) string {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// writeAllowAll writes a policy that allows every call into dir.
func writeAllowAll(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "allow-all.json")
	if err := os.WriteFile(path, []byte(`{"rules":[],"default":"allow"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitForText waits until text() contains want.
func waitForText(t *testing.T, what string, text func() string, want string) {
	t.Helper()
	for range 1500 {
		if strings.Contains(text(), want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never said %q:\n%s", what, want, text())
}

// TestServeProviderSquatter: serve's provider is killed and a process of
// the same user binds its port and would allow everything. The write it
// would allow is denied with category identity, the file is not written,
// the squatter receives no request (so never the token), and the failure
// is logged, in the decision log and counted. A SIGHUP while nothing
// listens fails and keeps the old identity; a legitimate new provider gets
// no request until a SIGHUP's handshake accepts it, and then calls work.
func TestServeProviderSquatter(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policy := writeAllowAll(t, dir)
	prov := startRefProviderProc(t, exe, nil, "127.0.0.1:0", policy)
	ws := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	sp := startServe(t, []string{"--workspace", ws, "--decision-log", logPath, "--settings", yoloSettings(t),
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", "http://" + prov.addr},
		envGuardToken+"="+providerTestToken)
	id := sp.newSession(t, "")
	sp.runTurn(t, id, writeCall("before.txt"))
	if !fileExists(filepath.Join(ws, "before.txt")) {
		t.Fatal("the write the provider allowed did not happen")
	}

	prov.kill()
	squatter, squatLog := startSquatter(t, prov.addr)
	_, evs := sp.runTurn(t, id, writeCall("squatted.txt"))
	wantDeniedWrite(t, evs, ws, "squatted.txt", guardFailedReason)
	if got := squatterRequests(t, squatLog); got != "" {
		t.Fatalf("the squatter received requests:\n%s", got)
	}
	waitForText(t, "serve's log", sp.stderr.String, "provider identity check failed: call denied")
	if strings.Contains(sp.stderr.String(), providerTestToken) {
		t.Error("serve's log shows the provider token")
	}
	if m := sp.scrape(t); m[`acpguard_serve_decision_failures_total{category="identity"}`] != 1 {
		t.Errorf("identity failures counted: %v", m[`acpguard_serve_decision_failures_total{category="identity"}`])
	}

	// A SIGHUP whose handshake fails keeps the identity: the squatter is
	// gone, nothing listens.
	squatter.kill()
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitForText(t, "serve's log", sp.stderr.String, "provider handshake on SIGHUP failed")

	// A legitimate provider on the port is not the one of the handshake
	// until a SIGHUP says so.
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	startRefProviderProc(t, exe, nil, prov.addr, policy, "--audit", audit)
	_, evs = sp.runTurn(t, id, writeCall("unaccepted.txt"))
	wantDeniedWrite(t, evs, ws, "unaccepted.txt", guardFailedReason)
	if data, _ := os.ReadFile(audit); len(data) != 0 {
		t.Fatalf("the new provider decided before a handshake accepted it:\n%s", data)
	}
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitForText(t, "serve's log", sp.stderr.String, "provider handshake on SIGHUP accepted")
	sp.runTurn(t, id, writeCall("after.txt"))
	if !fileExists(filepath.Join(ws, "after.txt")) {
		t.Fatal("after the SIGHUP's handshake the allowed write did not happen")
	}
	if recs := readProviderAudit(t, audit); len(recs) != 1 {
		t.Errorf("the new provider decided %d calls, want 1", len(recs))
	}

	data, _ := os.ReadFile(logPath)
	var outcomes []string
	for _, rec := range decisions(t, string(data)) {
		outcomes = append(outcomes, rec.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "allowed identity identity allowed" {
		t.Errorf("decision log outcomes = %q", got)
	}
}

// startGuardedACP starts standalone acp guarded by the provider on addr,
// with one yolo session; write asks its model for a write of name and
// reports whether the file is there.
func startGuardedACP(t *testing.T, addr string) (c *acpClient, write func(name string) bool) {
	c = startACP(t, nil, []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=http://" + addr},
		envGuardToken+"="+providerTestToken)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	ws := t.TempDir()
	sid := c.newYoloSession(ws)
	return c, func(name string) bool {
		t.Helper()
		c.prompt(sid, writeCall(name), "")
		return fileExists(filepath.Join(ws, name))
	}
}

// TestACPProviderSquatter: standalone acp's provider is killed and a
// process of the same user binds its port; the write it would allow is not
// made, it receives no request, and acp logs the identity failure. acp
// runs the handshake again only when it restarts: a legitimate provider on
// the port is refused too.
func TestACPProviderSquatter(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	policy := writeAllowAll(t, t.TempDir())
	prov := startRefProviderProc(t, exe, nil, "127.0.0.1:0", policy)
	c, write := startGuardedACP(t, prov.addr)
	if !write("first.txt") {
		t.Fatal("the write the provider allowed did not happen")
	}
	prov.kill()
	squatter, squatLog := startSquatter(t, prov.addr)
	if write("squatted.txt") {
		t.Fatal("a squatter on the provider's port allowed a write")
	}
	if got := squatterRequests(t, squatLog); got != "" {
		t.Fatalf("the squatter received requests:\n%s", got)
	}
	waitForText(t, "acp's log", c.stderrText, "provider identity check failed: call denied")
	if log := c.stderrText(); !strings.Contains(log, "not one the handshake met") || strings.Contains(log, providerTestToken) {
		t.Errorf("acp's log:\n%s", log)
	}
	squatter.kill()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	startRefProviderProc(t, exe, nil, prov.addr, policy, "--audit", audit)
	if write("restarted.txt") {
		t.Fatal("a provider restarted as acp's own user was accepted without a handshake")
	}
	if data, _ := os.ReadFile(audit); len(data) != 0 {
		t.Fatalf("the restarted provider decided without a handshake:\n%s", data)
	}
}

// sharedExecutable copies the test binary where another user can run it,
// next to files that user may read.
func sharedExecutable(t *testing.T) (exe, dir string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "acpguard-identity-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(dir, "acpguard")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, dir
}

// TestACPProviderOfAnotherUser: standalone acp (root here) whose provider
// runs as uid 65534. A provider of that user restarted on the same port is
// accepted by uid, without a new handshake; a squatter of acp's own user on
// that port gets no request and the call fails with category identity.
func TestACPProviderOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a provider as another user (uid 65534) needs root")
	}
	exe, dir := sharedExecutable(t)
	policy := writeAllowAll(t, dir)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	prov := startRefProviderProc(t, exe, nobody, "127.0.0.1:0", policy)
	c, write := startGuardedACP(t, prov.addr)
	if !write("first.txt") {
		t.Fatal("the write the provider allowed did not happen")
	}

	prov.kill()
	prov = startRefProviderProc(t, exe, nobody, prov.addr, policy)
	if !write("restarted.txt") {
		t.Fatalf("a provider of the same other user restarted on its port was refused; acp log:\n%s", c.stderrText())
	}

	prov.kill()
	_, squatLog := startSquatter(t, prov.addr)
	if write("squatted.txt") {
		t.Fatal("a squatter of acp's own user on the provider's port allowed a write")
	}
	if got := squatterRequests(t, squatLog); got != "" {
		t.Fatalf("the squatter received requests:\n%s", got)
	}
	waitForText(t, "acp's log", c.stderrText, "provider identity check failed: call denied")
	if log := c.stderrText(); !strings.Contains(log, "belongs to uid 0, not uid 65534") || strings.Contains(log, providerTestToken) {
		t.Errorf("acp's log:\n%s", log)
	}
}
