// provider_test.go tests the reference provider in process over real
// loopback sockets: the request vectors in testdata/wire/request, any body
// fuzzed, the audit log, and SIGHUP reloads.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestProviderRequestVectors(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	unauthorized := map[string]string{}
	for name, v := range loadWireVectors[wireRequestVector](t, "request") {
		t.Run(name, func(t *testing.T) {
			resp := v.send(t, hc, p.url)
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxWireResponse+1))
			if resp.StatusCode != v.ExpectStatus {
				t.Errorf("status %d, want %d (body %s)", resp.StatusCode, v.ExpectStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); !wireContentTypeOK(ct) || len(body) > maxWireResponse || !json.Valid(body) {
				t.Errorf("reply %q %q is not a bounded JSON body", ct, body)
			}
			if v.ExpectStatus == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("405 with Allow %q, want POST", resp.Header.Get("Allow"))
			}
			if v.ExpectStatus == http.StatusUnauthorized {
				if !resp.Close {
					t.Error("a 401 keeps the connection open")
				}
				h := resp.Header.Clone()
				h.Del("Date")
				unauthorized[name] = fmt.Sprintf("%d %v %s", resp.StatusCode, h, body)
			}
		})
	}
	// Every 401 is identical, whatever was wrong with the credentials.
	var first string
	for name, r := range unauthorized {
		if first == "" {
			first = r
		}
		if r != first {
			t.Errorf("401 for %s differs:\n%s\n%s", name, r, first)
		}
	}
	if len(unauthorized) < 5 {
		t.Errorf("only %d 401 vectors", len(unauthorized))
	}
}

// TestProviderWithClient drives the reference provider on the example policy
// with the real client: every decision shape passes the client's strict
// decoders, and each one leaves exactly one audit line.
func TestProviderWithClient(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit})
	c := testProviderClient(t, p.url, 5*time.Second)
	if err := c.handshake(context.Background()); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	const defaultReason = "No policy rule allows this tool call"
	tests := []struct {
		tool, args string
		allowed    bool
		reason     string
		rule       int
	}{
		{"read_file", `{"file_path":"/etc/hosts"}`, true, "", 0},
		{"grep_search", `{"pattern":"x"}`, true, "", 3},
		{"write_file", `{"file_path":"/tmp/demo/out.txt","content":"hi"}`, true, "", 5},
		{"write_file", `{"file_path":"/tmp/../etc/passwd","content":"x"}`, false, "File paths containing .. are not allowed by policy", 4},
		{"write_file", `{"file_path":"/etc/passwd","content":"x"}`, false, defaultReason, -1},
		{"write_file", `{"content":"no path"}`, false, defaultReason, -1},
		{"run_shell_command", `{"command":"rm -rf /"}`, false, "Destructive and network shell commands are not allowed by policy", 8},
		{"run_shell_command", `{"command":"curl http://127.0.0.1/x | sh"}`, false, "Destructive and network shell commands are not allowed by policy", 8},
		{"run_shell_command", `{"command":"ls -la /tmp"}`, true, "", 10},
		{"run_shell_command", `{"command":"git status"}`, true, "", 11},
		{"run_shell_command", `{"command":"ls; touch /tmp/x"}`, false, defaultReason, -1},
		{"run_shell_command", `{"command":"echo $(id)"}`, false, defaultReason, -1},
		{"run_shell_command", `{"command":"ls\ntouch /tmp/x"}`, false, defaultReason, -1},
		{"run_shell_command", `{"command":"ls /tmp\rtouch /tmp/x"}`, false, defaultReason, -1},
		{"run_shell_command", `{"command":"ls\ttmp"}`, true, "", 10},
		{"mcp__files__delete", `{}`, false, "MCP tools are not enabled by this policy", 22},
		{"agent", `{"prompt":"do it"}`, false, defaultReason, -1},
	}
	for i, tt := range tests {
		call := prepareRequest{SessionID: "s", PromptID: "p", ToolCallID: fmt.Sprint("call-", i), ToolName: tt.tool, Arguments: json.RawMessage(tt.args)}
		res := c.prepare(context.Background(), call)
		if res.Category != "" {
			t.Fatalf("%s %s: failure %q: %v", tt.tool, tt.args, res.Category, res.Err)
		}
		if res.Allowed != tt.allowed || res.Reason != tt.reason {
			t.Errorf("%s %s: allowed=%v reason=%q, want %v %q", tt.tool, tt.args, res.Allowed, res.Reason, tt.allowed, tt.reason)
		}
	}

	lines := readProviderAudit(t, audit)
	if len(lines) != len(tests) {
		t.Fatalf("audit log has %d lines, want %d", len(lines), len(tests))
	}
	for i, tt := range tests {
		l := lines[i]
		var args any
		json.Unmarshal([]byte(tt.args), &args)
		canonical, _ := json.Marshal(args)
		sum := sha256.Sum256(canonical)
		decision := map[bool]string{true: "allow", false: "deny"}[tt.allowed]
		if l.ToolName != tt.tool || l.ToolCallID != fmt.Sprint("call-", i) || l.SessionID != "s" || l.PromptID != "p" ||
			l.Decision != decision || l.Reason != tt.reason || l.Rule != tt.rule || l.ArgumentsSHA256 != hex.EncodeToString(sum[:]) ||
			len(l.RequestID) != 32 || l.Arguments != nil {
			t.Errorf("audit line %d = %+v, want %s %s rule %d", i, l, tt.tool, decision, tt.rule)
		}
		if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil {
			t.Errorf("audit line %d time: %v", i, err)
		}
	}
	if st, err := os.Stat(audit); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v, %v; want 0600", st.Mode(), err)
	}
	if raw, _ := os.ReadFile(audit); bytes.Contains(raw, []byte("/etc/passwd")) {
		t.Error("audit log holds raw arguments without --audit-arguments")
	}
}

func TestProviderAuditArguments(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit, AuditArguments: true})
	call := providerTestCall
	call.Arguments = json.RawMessage(`{"z":1.50,"file_path":"/tmp/a","n":{"b":true,"a":null}}`)
	if res := testProviderClient(t, p.url, 5*time.Second).prepare(context.Background(), call); !res.Allowed {
		t.Fatalf("result %+v", res)
	}
	lines := readProviderAudit(t, audit)
	const canonical = `{"file_path":"/tmp/a","n":{"a":null,"b":true},"z":1.50}`
	sum := sha256.Sum256([]byte(canonical))
	if len(lines) != 1 || string(lines[0].Arguments) != canonical || lines[0].ArgumentsSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("audit %+v, want arguments %s", lines, canonical)
	}
}

func TestProviderAuditToStdout(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: "-"})
	c := testProviderClient(t, p.url, 5*time.Second)
	for range 3 {
		c.prepare(context.Background(), providerTestCall)
	}
	if n := strings.Count(p.stdout.String(), "\n"); n != 3 {
		t.Errorf("stdout has %d audit lines, want 3: %q", n, p.stdout.String())
	}
	if !strings.Contains(p.stderr.String(), "acpguard provider: listening on "+p.url+"\n") {
		t.Errorf("stderr %q does not announce %s", p.stderr.String(), p.url)
	}
}

// TestProviderAuditFailureDenies: an allow that cannot be recorded is a deny.
func TestProviderAuditFailureDenies(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: "/dev/full"})
	res := testProviderClient(t, p.url, 5*time.Second).prepare(context.Background(), providerTestCall)
	if res.Allowed || res.Reason != auditFailedReason || res.Category != "" {
		t.Errorf("result %+v, want a deny with %q", res, auditFailedReason)
	}
	if !strings.Contains(p.stderr.String(), "audit log write failed") {
		t.Errorf("stderr %q does not log the audit failure", p.stderr.String())
	}
}

func TestProviderStartupRefusals(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "p.json")
	os.WriteFile(bad, []byte(`{"rules":[{"tool":"read_file","decision":"allow"},{"tool":"glob","decision":"allow"},{"tool":"edit","decision":"allow"},{"tool":"run_shell_command","match":{"/command":"(rm"},"decision":"deny"}]}`), 0o600)
	tests := []struct {
		name string
		opts providerOptions
		code int
		err  string
	}{
		{"empty token", providerOptions{Listen: mustListen("127.0.0.1:0"), Token: " ", PolicyFile: "examples/policy.json"}, exitUsage, "token"},
		{"bad regexp", providerOptions{Listen: mustListen("127.0.0.1:0"), Token: "t", PolicyFile: bad}, exitUsage,
			fmt.Sprintf("policy %q: rule 3: invalid regexp for \"/command\": error parsing regexp: missing closing ): `(rm`", bad)},
		{"missing policy", providerOptions{Listen: mustListen("127.0.0.1:0"), Token: "t", PolicyFile: filepath.Join(dir, "none.json")}, exitUsage, "no such file"},
		{"audit unwritable", providerOptions{Listen: mustListen("127.0.0.1:0"), Token: "t", PolicyFile: "examples/policy.json", AuditPath: filepath.Join(dir, "no", "dir")}, exitRuntime, "open audit log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr := &syncBuffer{}
			err := serveProvider(context.Background(), &system{stdout: io.Discard, stderr: stderr}, tt.opts, func(string) { t.Error("provider listened") })
			if code := exitCode(err); code != tt.code || err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v (exit %d), want exit %d containing %q", err, code, tt.code, tt.err)
			}
			if strings.Contains(stderr.String(), "listening") {
				t.Errorf("stderr %q", stderr.String())
			}
		})
	}
}

func TestProviderListensOnLoopbackNames(t *testing.T) {
	for _, listen := range []string{"localhost:0", "127.0.0.1:0", "[::1]:0"} {
		t.Run(listen, func(t *testing.T) {
			if strings.HasPrefix(listen, "[") {
				ln, err := net.Listen("tcp", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				ln.Close()
			}
			p := startRefProvider(t, providerOptions{Listen: mustListen(listen), PolicyFile: "examples/policy.json"})
			if err := testProviderClient(t, p.url, 5*time.Second).handshake(context.Background()); err != nil {
				t.Errorf("handshake with %s: %v", p.url, err)
			}
		})
	}
}

func TestProviderReloadOnSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.json")
	write := func(s string) {
		t.Helper()
		// Replace, never truncate in place: a reload must never read half a file.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"rules":[{"tool":"read_file","decision":"allow"}]}`)
	p := startRefProvider(t, providerOptions{PolicyFile: file})
	c := testProviderClient(t, p.url, 5*time.Second)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(testTimeout(20 * time.Second)); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never saw %s; stderr %q", what, p.stderr.String())
			}
		}
	}
	if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
		t.Fatalf("before reload: %+v", res)
	}
	write(`{"rules":[{"tool":"read_file","decision":"deny","reason":"Reads are frozen"}]}`)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitFor("the reload log line", func() bool { return strings.Contains(p.stderr.String(), "reloaded policy") })
	if res := c.prepare(context.Background(), providerTestCall); res.Allowed || res.Reason != "Reads are frozen" {
		t.Fatalf("after reload: %+v", res)
	}
	write(`{"rules":[{"tool":"read_file","decision":"allow","reason":"x"}]}`)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitFor("the failed reload log line", func() bool { return strings.Contains(p.stderr.String(), "reload failed, keeping the previous policy") })
	if res := c.prepare(context.Background(), providerTestCall); res.Allowed || res.Reason != "Reads are frozen" {
		t.Fatalf("after an invalid reload: %+v, want the previous policy", res)
	}
	if !strings.Contains(p.stderr.String(), "rule 0: a reason is only allowed on a deny") {
		t.Errorf("stderr %q does not say why", p.stderr.String())
	}
}

// TestProviderProcess runs "acpguard provider" as a real process: it
// announces its URL, answers a handshake, reloads on SIGHUP without dying,
// and exits 0 on SIGTERM.
func TestProviderProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"provider", "--listen", "127.0.0.1:0", "--policy", "examples/policy.json"},
		"QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN="+providerTestToken)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var url string
	for line := range lines {
		if u, ok := strings.CutPrefix(line, "acpguard provider: listening on "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatalf("provider exited without announcing its URL: %v", cmd.Wait())
	}
	c := testProviderClient(t, url, 5*time.Second)
	if err := c.handshake(ctx); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	for line := range lines {
		if strings.Contains(line, "reloaded policy") {
			break
		}
	}
	if res := c.prepare(ctx, providerTestCall); !res.Allowed {
		t.Errorf("after SIGHUP: %+v", res)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("provider after SIGTERM: %v, want exit 0", err)
	}
}

// TestProviderAuditConcurrent: concurrent decisions never interleave lines.
func TestProviderAuditConcurrent(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit, AuditArguments: true})
	c := testProviderClient(t, p.url, 10*time.Second)
	call := providerTestCall
	call.ToolName = "write_file"
	call.Arguments = json.RawMessage(`{"file_path":"/tmp/x","content":"` + strings.Repeat("y", 8<<10) + `"}`)
	const workers, each = 16, 4
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if res := c.prepare(context.Background(), call); !res.Allowed {
					t.Errorf("result %+v", res)
				}
			}
		})
	}
	wg.Wait()
	if lines := readProviderAudit(t, audit); len(lines) != workers*each {
		t.Errorf("%d audit lines, want %d", len(lines), workers*each)
	}
}

// TestProviderShutdownWithUnusedConnection: a connection that never sent a
// request (a client transport's spare dial) does not hold up a stop or turn
// it into an error.
func TestProviderShutdownWithUnusedConnection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveProvider(ctx, &system{stdout: io.Discard, stderr: io.Discard},
			providerOptions{Listen: mustListen("127.0.0.1:0"), Token: providerTestToken, PolicyFile: "examples/policy.json"}, func(a string) { addr <- a })
	}()
	var conn net.Conn
	select {
	case a := <-addr:
		var err error
		if conn, err = net.Dial("tcp", a); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	case err := <-done:
		t.Fatalf("provider did not start: %v", err)
	}
	// A request on another connection proves the server accepted conn first.
	if err := testProviderClient(t, "http://"+conn.RemoteAddr().String(), 5*time.Second).handshake(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("provider stopped with %v, want a clean stop", err)
	}
}

// FuzzProviderRequest feeds the reference provider any body on either route:
// it answers 200 or 400, always inside the client's limits, and every 200
// passes the client's strict decoder.
func FuzzProviderRequest(f *testing.F) {
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range loadWireVectors[wireRequestVector](f, "request") {
		if len(v.Body) < 4096 {
			f.Add(v.Path == wirePathHandshake, []byte(v.Body))
		}
	}
	f.Fuzz(func(t *testing.T, handshake bool, body []byte) {
		p := &providerServer{token: providerTestToken, log: slog.New(slog.DiscardHandler), metrics: newProviderMetrics(false)}
		p.current.Store(pol)
		route := wirePathPrepare
		if handshake {
			route = wirePathHandshake
		}
		req := httptest.NewRequest(http.MethodPost, route, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+providerTestToken)
		req.Header.Set("Content-Type", wireContentType)
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		reply := w.Body.Bytes()
		if len(reply) > maxWireResponse || !wireContentTypeOK(w.Header().Get("Content-Type")) {
			t.Fatalf("reply of %d bytes, content type %q", len(reply), w.Header().Get("Content-Type"))
		}
		switch w.Code {
		case http.StatusBadRequest:
		case http.StatusOK:
			var in struct{ Nonce, RequestID string }
			json.Unmarshal(body, &in)
			if handshake {
				if werr := decodeHandshakeResponse(reply, in.Nonce); werr != nil {
					t.Fatalf("client rejects handshake reply %s: %v", reply, werr)
				}
			} else if _, werr := decodePrepareResponse(reply, in.RequestID); werr != nil {
				t.Fatalf("client rejects prepare reply %s: %v", reply, werr)
			}
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}
