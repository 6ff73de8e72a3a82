// sandbox_hide_test.go proves that hidden paths stay out of a confined
// process's reach with real processes: acpguard's secret files under a
// real serve, the operator's --sandbox-hide paths, names made later, links,
// and the configurations refused because Landlock could not hide them.
package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSandboxHidesPaths: a confined shell cannot read a hidden file, a file
// in a hidden directory, a hidden name made after the ruleset, or a hidden
// file through a link, while it reads their neighbours and lists the
// directories on the way.
func TestSandboxHidesPaths(t *testing.T) {
	root := shortWayDir(t)
	ws, keys, hdir := filepath.Join(root, "ws"), filepath.Join(root, "keys"), filepath.Join(root, "hdir")
	mustWrite(t, filepath.Join(ws, "README"), "work")
	mustWrite(t, filepath.Join(keys, "token"), "TOKEN")
	mustWrite(t, filepath.Join(keys, "other"), "OTHER")
	mustWrite(t, filepath.Join(hdir, "x"), "HX")
	mustWrite(t, filepath.Join(root, "beside"), "BESIDE")
	if err := os.Symlink(filepath.Join(keys, "token"), filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	// A socket and a FIFO among the entries on the way, as in a runtime
	// directory: each gets its rule like any file.
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := workspaceConfig()
	cfg.Hide = []string{filepath.Join(keys, "token"), hdir, filepath.Join(root, "later", "file")}
	sb := newTestSandbox(t, cfg, ws)

	// Made after the ruleset: a hidden name, and a new entry in a
	// directory on the way to a hidden path (which nothing grants).
	mustWrite(t, filepath.Join(root, "later", "file"), "LATER")
	mustWrite(t, filepath.Join(keys, "new"), "NEW")

	denied := []string{filepath.Join(keys, "token"), filepath.Join(hdir, "x"), filepath.Join(root, "alias"),
		filepath.Join(root, "later", "file"), filepath.Join(keys, "new"),
		"/proc/self/root" + filepath.Join(keys, "token"), "/proc/self/cwd/../keys/token"}
	for _, p := range denied {
		if out, code := runShell(t, nil, ws, "cat "+shellQuote(p)); code != 0 {
			t.Fatalf("unconfined cat %s: exit %d %q: the case proves nothing", p, code, out)
		}
		out, code := runShell(t, sb, ws, "cat "+shellQuote(p))
		if code == 0 || !strings.Contains(out, "Permission denied") {
			t.Errorf("confined cat %s: exit %d, output %q; want Permission denied", p, code, out)
		}
	}
	// A hard link into the workspace would give the file the workspace's
	// rights: Landlock refuses it (EXDEV from ABI 2, any reparenting on 1).
	if out, code := runShell(t, sb, ws, "ln "+shellQuote(filepath.Join(keys, "token"))+" stolen && cat stolen"); code == 0 || strings.Contains(out, "TOKEN") {
		t.Errorf("confined hard link of the hidden file: exit %d, output %q", code, out)
	}
	allowed := map[string]string{
		"cat " + shellQuote(filepath.Join(keys, "other")):  "OTHER",
		"cat " + shellQuote(filepath.Join(root, "beside")): "BESIDE",
		"ls " + shellQuote(keys):                           "new\nother\ntoken\n",
		"ls " + shellQuote(hdir):                           "x\n",
		"head -c 4 /etc/passwd":                            "",
		"echo in > in.txt && cat in.txt":                   "in\n",
	}
	for script, want := range allowed {
		out, code := runShell(t, sb, ws, script)
		if code != 0 || want != "" && out != want {
			t.Errorf("confined %q: exit %d, output %q; want %q", script, code, out, want)
		}
	}
}

// TestSandboxHideRefused: configurations in which Landlock could not keep a
// hidden path out of reach, or a list contradicts it, are refused with the
// path and the fix; the same paths apart are accepted.
func TestSandboxHideRefused(t *testing.T) {
	root := shortWayDir(t)
	shared, keys := filepath.Join(root, "shared"), filepath.Join(root, "keys")
	token := filepath.Join(keys, "token")
	mustWrite(t, token, "TOKEN")
	mustWrite(t, filepath.Join(shared, "README"), "shared")
	tests := []struct {
		name      string
		cfg       func(c *sandboxConfig)
		workspace string
		err       string
	}{
		{"apart", func(c *sandboxConfig) { c.Hide, c.Write = []string{token}, []string{shared} }, shared, ""},
		{"in a writable directory", func(c *sandboxConfig) { c.Hide, c.Write = []string{filepath.Join(shared, "k")}, []string{shared} },
			"", `--sandbox-write "` + shared + `": holds the hidden "` + filepath.Join(shared, "k") + `", which tools could then read or replace; move the file out, or leave the directory out`},
		{"in a workspace", func(c *sandboxConfig) { c.Hide = []string{token} }, keys,
			`workspace "` + keys + `": holds the hidden "` + token + `", which tools could then read or replace; keep acpguard's token and key files and --sandbox-hide paths out of every workspace`},
		{"read path hidden", func(c *sandboxConfig) { c.Hide, c.Read = []string{keys}, []string{"/usr", token} }, "",
			`--sandbox-read "` + token + `": is hidden by "` + keys + `"; leave it out of one of the lists`},
		{"off hides nothing", func(c *sandboxConfig) { *c = sandboxConfig{Profile: sandboxOff, Hide: []string{token}} }, keys, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := workspaceConfig()
			tt.cfg(&c)
			var ws []string
			if tt.workspace != "" {
				ws = []string{tt.workspace}
			}
			err := c.checkHidden(ws...)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("checkHidden: %v", err)
			case tt.err != "" && (err == nil || err.Error() != tt.err || exitCode(err) != exitUsage):
				t.Fatalf("checkHidden = %v, want exit 2 with\n%s", err, tt.err)
			}
		})
	}

	// A session whose cwd holds a hidden path starts nothing.
	c := workspaceConfig()
	c.Hide = []string{filepath.Join(shared, "k")}
	sb, err := newSandboxSession(c, shared, sandboxTestEnv)
	if err != nil {
		t.Skip(err)
	}
	defer sb.close()
	want := `sandbox: the writable "` + shared + `" holds the hidden "` + filepath.Join(shared, "k") + `"`
	if err := sb.make(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("make = %v, want %q", err, want)
	}

	// A directory on the way with more entries than the bound: refused at
	// start, and by a session that starts a tool anyway.
	big := filepath.Join(root, "big")
	for i := 0; i <= maxHideEntries; i++ {
		mustWrite(t, filepath.Join(big, strconv.Itoa(i)), "")
	}
	c = workspaceConfig()
	c.Hide = []string{filepath.Join(big, "token")}
	want = `sandbox: "` + big + `" holds more than 4096 entries on the way to the hidden "` + filepath.Join(big, "token") + `"`
	if err := c.checkHideWays(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkHideWays = %v, want %q", err, want)
	}
	sb, err = newSandboxSession(c, shared, sandboxTestEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.close()
	if err := sb.make(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("make = %v, want %q", err, want)
	}
	c.Hide = []string{filepath.Join(shared, "token")}
	if err := c.checkHideWays(); err != nil {
		t.Errorf("checkHideWays beside the big directory: %v", err)
	}

	// The flags: paths, and hide given to a sandbox that is off.
	for _, tt := range []struct{ args, err string }{
		{"--sandbox-hide relative", `--sandbox-hide "relative": must be an absolute path`},
		{"--sandbox-hide /", `--sandbox-hide "/": would hide the whole filesystem`},
		{"--sandbox off --sandbox-hide /x", `--sandbox-hide "/x": confines nothing with --sandbox off`},
		{"--sandbox off --sandbox-private /x", ""},
	} {
		sys, _, _ := testSystem()
		_, err := parseACPArgs(strings.Fields(tt.args), sys)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("acp %s: %v, want %q", tt.args, err, tt.err)
		}
	}
}

// TestServeHidesSecretFiles: under a real serve in required mode, a
// confined tool cannot read the generated host token or the provider token
// file, though it lists the token's directory; with --sandbox off the same
// tool reads both, so the confined case is the sandbox's doing.
func TestServeHidesSecretFiles(t *testing.T) {
	requireLandlock(t)
	prov := newTestProvider(t)
	for _, confined := range []bool{true, false} {
		runtimeDir, ws := shortWayDir(t), t.TempDir()
		guardFile := filepath.Join(shortWayDir(t), "guard.token")
		if err := createSecretFile(flagGuardTokenFile, guardFile, prov.token); err != nil {
			t.Fatal(err)
		}
		args := []string{"serve", "--port", "0", "--workspace", ws, "--settings", yoloSettings(t),
			"--external-tool-guard-mode=required", "--external-tool-guard-endpoint", prov.srv.URL,
			"--" + flagGuardTokenFile, guardFile}
		if !confined {
			args = append(args, "--"+flagSandbox, sandboxOff)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
		defer cancel()
		// envTestSandbox empty: the real sandbox, not the suite's override.
		cmd := acpguardCmd(t, ctx, args, envRuntimeDir+"="+runtimeDir, envTestSandbox+"=")
		url, lines, stderr, stop := servedLines(t, cmd)
		tokenFile, ok := strings.CutPrefix(nextLine(t, lines), hostTokenAnnouncement)
		if !ok {
			t.Fatal("serve announced no token file")
		}
		token, err := readSecretFile(flagHostTokenFile, tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		td := &testDaemon{url: url, token: token}
		id := td.newSession(t, "")
		td.runTurn(t, id, shellCall("cat "+shellQuote(tokenFile)+" > host.out 2>&1; cat "+shellQuote(guardFile)+" > guard.out 2>&1; ls "+shellQuote(filepath.Dir(tokenFile))+" > list.out 2>&1", false))
		host, guard, list := mustRead(t, filepath.Join(ws, "host.out")), mustRead(t, filepath.Join(ws, "guard.out")), mustRead(t, filepath.Join(ws, "list.out"))
		if err := stop(); err != nil {
			t.Errorf("serve: %v\n%s", err, stderr.String())
		}
		if n := strings.Count(stderr.String(), "sandbox off: every tool can read the host token file"); n != map[bool]int{true: 0, false: 1}[confined] {
			t.Errorf("confined=%v: %d warnings about the token file:\n%s", confined, n, stderr.String())
		}
		if !confined {
			if strings.TrimSpace(host) != token || strings.TrimSpace(guard) != prov.token {
				t.Errorf("unconfined tool read %q and %q: the confined case proves nothing", host, guard)
			}
			continue
		}
		for name, out := range map[string]string{"host token": host, "provider token": guard} {
			if !strings.Contains(out, "Permission denied") || strings.Contains(out, token) || strings.Contains(out, prov.token) {
				t.Errorf("confined tool reading the %s file: %q, want Permission denied", name, out)
			}
		}
		if strings.TrimSpace(list) != hostTokenFileName {
			t.Errorf("confined ls of the token's directory: %q, want its name listed", list)
		}
	}
}

// TestACPHidesSecretFiles: a standalone acp hides the secret files it was
// given from its tools, in the sandbox it starts with and in each
// session's.
func TestACPHidesSecretFiles(t *testing.T) {
	dir := t.TempDir()
	guardFile, keyFile := filepath.Join(dir, "guard"), filepath.Join(dir, "key")
	for _, f := range []string{guardFile, keyFile} {
		if err := createSecretFile(flagGuardTokenFile, f, "secret"); err != nil {
			t.Fatal(err)
		}
	}
	sys, _, _ := testSystem()
	opts, err := parseACPArgs([]string{"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", "http://127.0.0.1:9",
		"--" + flagGuardTokenFile, guardFile, "--" + flagModelKeyFile, keyFile, "--" + flagSandboxHide, "/x/ssh"}, sys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/x/ssh", guardFile, keyFile}
	if !slices.Equal(opts.Sandbox.Hide, want) {
		t.Errorf("start sandbox hides %q, want %q", opts.Sandbox.Hide, want)
	}
	sess, err := opts.SessionSandbox(opts.SettingsLoad)
	if err != nil || !slices.Equal(sess.Hide, want) {
		t.Errorf("session sandbox hides %q (%v), want %q", sess.Hide, err, want)
	}
}
