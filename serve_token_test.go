// serve_token_test.go checks where serve's host token comes from: the
// flags and the variable, the token file, the token serve generates in
// required mode, and --allow-tokenless-loopback.
package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeHostTokenSources(t *testing.T) {
	dir := t.TempDir()
	ws := []string{"--workspace", t.TempDir()}
	file := writeSecret(t, dir, "host", "from-file\n", 0o600)
	missing := filepath.Join(dir, "new-token")
	req := required("http://127.0.0.1:1")
	tf := "--" + flagHostTokenFile
	tl := "--" + flagAllowTokenlessLoopback
	tests := []struct {
		name      string
		args      []string
		env       []string
		token     string // want opts.Token
		tokenFile string
		generate  bool
		tokenless bool
		err       string
	}{
		{name: "off mode, none", args: ws},
		{name: "off mode, tokenless flag", args: append([]string{tl}, ws...), tokenless: true},
		{name: "required, none: generated", args: append(req, ws...), generate: true},
		{name: "required, tokenless", args: append(append(req, tl), ws...), tokenless: true},
		{name: "required, --token", args: append(append(req, "--token", "t1"), ws...), token: "t1"},
		{name: "required, variable", args: append(req, ws...), env: []string{envServerToken + "=t2"}, token: "t2"},
		{name: "file read", args: append([]string{tf, file}, ws...), token: "from-file", tokenFile: file},
		{name: "file missing: generated into it", args: append(append(req, tf, missing), ws...), tokenFile: missing, generate: true},
		{name: "file missing in off mode too", args: append([]string{tf, missing}, ws...), tokenFile: missing, generate: true},
		{name: "file makes non-loopback possible", args: append([]string{tf, missing, "--hostname", "0.0.0.0"}, ws...), tokenFile: missing, generate: true},
		{name: "file and --token", args: append([]string{tf, file, "--token", "t"}, ws...), err: tf + ` "` + file + `" and --token: both set; give the host token one way`},
		{name: "file and variable", args: append([]string{tf, file}, ws...), env: []string{envServerToken + "=t"}, err: envServerToken + ": both set"},
		{name: "tokenless and --token", args: append(append(req, tl, "--token", "t"), ws...), err: tl + ": a host token is also given"},
		{name: "tokenless and variable", args: append(append(req, tl), ws...), env: []string{envServerToken + "=t"}, err: tl + ": a host token is also given"},
		{name: "tokenless and file", args: append([]string{tl, tf, missing}, ws...), err: tl + ": a host token is also given"},
		{name: "tokenless off loopback", args: append([]string{tl, "--hostname", "0.0.0.0"}, ws...), err: tl + `: --hostname "0.0.0.0" is not a loopback address`},
		{name: "required off loopback without token", args: append(append(req, "--hostname", "0.0.0.0"), ws...), err: `--hostname "0.0.0.0": a non-loopback address requires --token, --token-file or QWEN_SERVER_TOKEN`},
		{name: "empty file name", args: append([]string{tf, ""}, ws...), err: tf + ` "": must name a file`},
		{name: "file too open", args: append([]string{tf, writeSecret(t, dir, "open", "x", 0o644)}, ws...), err: "mode 0644"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{envGuardToken + "=g"}, tt.env...)
			sys, _, _ := testSystem(env...)
			opts, err := parseServeArgs(tt.args, sys)
			if tt.err != "" {
				if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want exit 2 with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if opts.Token != tt.token || opts.TokenFile != tt.tokenFile || opts.GenerateToken != tt.generate || opts.AllowTokenlessLoopback != tt.tokenless {
				t.Errorf("token %q, file %q, generate %v, tokenless %v; want %q, %q, %v, %v",
					opts.Token, opts.TokenFile, opts.GenerateToken, opts.AllowTokenlessLoopback, tt.token, tt.tokenFile, tt.generate, tt.tokenless)
			}
		})
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Errorf("parsing created %s", missing)
	}
}

// servedLines starts cmd and returns the URL of its listening line and the
// lines of stdout after it; serve is stopped with SIGTERM when the test
// ends (stop does it earlier and waits).
func servedLines(t *testing.T, cmd *exec.Cmd) (url string, lines <-chan string, stderr *syncBuffer, stop func() error) {
	t.Helper()
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	all := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			all <- sc.Text()
		}
		close(all)
		exited <- cmd.Wait()
	}()
	stopped := false
	var exitErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			exitErr = <-exited
		}
		return exitErr
	}
	t.Cleanup(func() { stop() })
	select {
	case line, ok := <-all:
		if u, found := strings.CutPrefix(line, serveListenPrefix); ok && found {
			return u, all, stderr, stop
		}
		stop()
		t.Fatalf("serve printed %q first, stderr:\n%s", line, stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve printed nothing in a minute, stderr:\n%s", stderr.String())
	}
	return "", nil, nil, nil
}

// nextLine returns the next line of stdout, failing the test after a while.
func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("serve printed no further line")
		return ""
	}
}

// TestServeGeneratesHostToken runs serve in required mode with no token: it
// writes a new token to a file only its user can read, prints the file after
// the listening line, accepts only that token, and removes the file at exit.
func TestServeGeneratesHostToken(t *testing.T) {
	prov := newTestProvider(t)
	runtimeDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", t.TempDir(),
		"--external-tool-guard-mode=required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token, envRuntimeDir+"="+runtimeDir)
	url, lines, stderr, stop := servedLines(t, cmd)
	path, ok := strings.CutPrefix(nextLine(t, lines), hostTokenAnnouncement)
	if !ok || filepath.Dir(filepath.Dir(path)) != runtimeDir || filepath.Base(path) != hostTokenFileName {
		t.Fatalf("second line names %q, want a file %s in a fresh directory under %s", path, hostTokenFileName, runtimeDir)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): os.ModeDir | 0o700} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode(), err, want)
		}
	}
	token, err := readSecretFile(flagHostTokenFile, path)
	if err != nil || len(token) != 2*hostTokenBytes {
		t.Fatalf("token file: %q, %v", token, err)
	}
	td := &testDaemon{url: url}
	if r := td.do(t, "GET", "/health", ""); r.status != 401 {
		t.Errorf("GET /health without the token = %d, want 401", r.status)
	}
	if r := td.do(t, "GET", "/health", "", "Authorization", "Bearer "+token); r.status != 200 {
		t.Errorf("GET /health with the token = %d %s, want 200", r.status, r.body)
	}
	if strings.Contains(stderr.String(), token) {
		t.Errorf("stderr shows the token:\n%s", stderr.String())
	}
	if err := stop(); err != nil {
		t.Errorf("serve: %v\n%s", err, stderr.String())
	}
	if _, err := os.Lstat(filepath.Dir(path)); err == nil {
		t.Errorf("the token's directory %s is left after exit", filepath.Dir(path))
	}
}

// TestServeTokenFileKept names --token-file: the first start creates it, a
// second start reads the same token from it.
func TestServeTokenFileKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.token")
	var tokens []string
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", t.TempDir(), "--" + flagHostTokenFile, path})
		url, lines, stderr, stop := servedLines(t, cmd)
		if got := nextLine(t, lines); got != hostTokenAnnouncement+path {
			t.Errorf("start %d: second line %q, want the token file", i, got)
		}
		token, err := readSecretFile(flagHostTokenFile, path)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, token)
		td := &testDaemon{url: url}
		if r := td.do(t, "GET", "/health", "", "Authorization", "Bearer "+token); r.status != 200 {
			t.Errorf("start %d: GET /health with the file's token = %d", i, r.status)
		}
		if r := td.do(t, "GET", "/health", ""); r.status != 401 {
			t.Errorf("start %d: GET /health without a token = %d, want 401", i, r.status)
		}
		if err := stop(); err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
	}
	if tokens[0] != tokens[1] {
		t.Errorf("the second start used another token than the file's")
	}
}

// TestServeTokenlessLoopback: --allow-tokenless-loopback in required mode
// serves without a token, writes no token file and warns exactly once.
func TestServeTokenlessLoopback(t *testing.T) {
	prov := newTestProvider(t)
	runtimeDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", t.TempDir(), "--" + flagAllowTokenlessLoopback,
		"--external-tool-guard-mode=required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token, envRuntimeDir+"="+runtimeDir)
	url, lines, stderr, stop := servedLines(t, cmd)
	td := &testDaemon{url: url}
	if r := td.do(t, "GET", "/health", ""); r.status != 200 {
		t.Errorf("GET /health without a token = %d, want 200", r.status)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		t.Errorf("serve printed %q after the listening line", l)
	}
	if n := strings.Count(stderr.String(), "required mode without a host token"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, stderr.String())
	}
	if entries, _ := os.ReadDir(runtimeDir); len(entries) != 0 {
		t.Errorf("a token directory was created: %v", entries)
	}
}

// tokenlessRequired reports whether serve args and env ask for required mode
// and give no host token and no --allow-tokenless-loopback.
func tokenlessRequired(args, env []string) bool {
	required := false
	for i, a := range args {
		switch {
		case a == "--"+flagGuardMode+"="+guardModeRequired,
			a == "--"+flagGuardMode && i+1 < len(args) && args[i+1] == guardModeRequired:
			required = true
		case a == "--token", strings.HasPrefix(a, "--token="), a == "--"+flagHostTokenFile,
			strings.HasPrefix(a, "--"+flagHostTokenFile+"="), a == "--"+flagAllowTokenlessLoopback:
			return false
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, envServerToken+"=") {
			return false
		}
	}
	return required
}
