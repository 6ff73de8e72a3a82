// secret_files_test.go checks the secret file flags: what a token or key
// file must be to be read, what is read from it, and that a file serve
// creates is its user's alone.
package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadSecretFile(t *testing.T) {
	const secret = "s3cret-value-never-shown"
	dir := t.TempDir()
	good := writeSecret(t, dir, "good", secret+"\n", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want, rule string
		usage                  bool // exit 2
	}{
		{name: "mode 0600, one newline trimmed", path: good, want: secret},
		{name: "mode 0400, no newline", path: writeSecret(t, dir, "ro", secret, 0o400), want: secret},
		{name: "crlf is not a newline", path: writeSecret(t, dir, "crlf", secret+"\r\n", 0o600), rule: "must not contain a control character", usage: true},
		{name: "two newlines", path: writeSecret(t, dir, "two", secret+"\n\n", 0o600), rule: "must not contain a control character", usage: true},
		{name: "surrounding spaces trimmed", path: writeSecret(t, dir, "spaces", "  "+secret+" \n", 0o600), want: secret},
		{name: "group readable", path: writeSecret(t, dir, "g", secret, 0o640), rule: "mode 0640 gives its group or other users access; a secret file must be mode 0600 or stricter: run chmod 600 ", usage: true},
		{name: "world readable", path: writeSecret(t, dir, "o", secret, 0o604), rule: "mode 0604", usage: true},
		{name: "group executable only", path: writeSecret(t, dir, "x", secret, 0o610), rule: "mode 0610", usage: true},
		{name: "symbolic link", path: link, rule: "is a symbolic link; name the file itself", usage: true},
		{name: "directory", path: dir, rule: "not a regular file", usage: true},
		{name: "fifo, not waited on", path: fifo, rule: "not a regular file", usage: true},
		{name: "missing", path: filepath.Join(dir, "none"), rule: "no such file", usage: true},
		{name: "empty", path: writeSecret(t, dir, "empty", "", 0o600), rule: "must not be blank", usage: true},
		{name: "only a newline", path: writeSecret(t, dir, "nl", "\n", 0o600), rule: "must not be blank", usage: true},
		{name: "too large", path: writeSecret(t, dir, "big", strings.Repeat("a", maxSecretFileBytes+1), 0o600), rule: "larger than 65536 bytes", usage: true},
		{name: "too long a token", path: writeSecret(t, dir, "long", strings.Repeat("a", maxTokenUTF16+1), 0o600), rule: "at most 8192 UTF-16 code units", usage: true},
		{name: "empty name", path: "", rule: "must name a file", usage: true},
	}
	if os.Geteuid() == 0 {
		other := writeSecret(t, dir, "other", secret, 0o600)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name, path, want, rule string
			usage                  bool
		}{name: "another user's", path: other, rule: "owned by uid 65534, not by the current user (uid 0)", usage: true})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readSecretFile(flagGuardTokenFile, tt.path)
			if tt.rule == "" {
				if err != nil || got != tt.want {
					t.Fatalf("read = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("read %q, want an error %q", got, tt.rule)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "--"+flagGuardTokenFile+` "`+tt.path+`": `) || !strings.Contains(msg, tt.rule) {
				t.Errorf("error %q, want the flag, the quoted file and %q", msg, tt.rule)
			}
			if strings.Contains(msg, secret) || strings.Contains(msg, "aaaa") {
				t.Errorf("error %q shows the file's contents", msg)
			}
			if tt.usage && exitCode(err) != exitUsage {
				t.Errorf("exit code %d, want %d", exitCode(err), exitUsage)
			}
		})
	}
}

func TestCreateSecretFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	old := syscall.Umask(0)
	err := createSecretFile(flagHostTokenFile, path, "tok")
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o600 {
		t.Errorf("mode %v, want -rw------- whatever the umask", fi.Mode())
	}
	if got, err := readSecretFile(flagHostTokenFile, path); err != nil || got != "tok" {
		t.Errorf("read back %q, %v", got, err)
	}
	// Never written through an existing file or link.
	target := writeSecret(t, dir, "target", "keep", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, link} {
		if err := createSecretFile(flagHostTokenFile, p, "new"); err == nil || !strings.Contains(err.Error(), "appeared meanwhile") {
			t.Errorf("create over %s = %v, want refused", p, err)
		}
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Errorf("the link's target now holds %q", data)
	}
	// A directory other users can write to is refused, with the fix.
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o777 | os.ModeSticky, 0o770} {
		if err := os.Chmod(shared, mode); err != nil {
			t.Fatal(err)
		}
		err := createSecretFile(flagHostTokenFile, filepath.Join(shared, "t"), "x")
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "is writable by other users") || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("mode %v: %v, want a usage error naming the rule and the fix", mode, err)
		}
		if _, err := os.Lstat(filepath.Join(shared, "t")); err == nil {
			t.Errorf("mode %v: the file was created", mode)
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(shared, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(shared, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := createSecretFile(flagHostTokenFile, filepath.Join(shared, "t"), "x"); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("another user's directory: %v, want refused", err)
		}
	}
}

// TestSecretFileFlags parses acp and serve with the token and key files:
// the value read is the one used, and a file together with its variable is
// exit 2 naming both.
func TestSecretFileFlags(t *testing.T) {
	dir := t.TempDir()
	guardFile := writeSecret(t, dir, "guard", "guard-from-file\n", 0o600)
	keyFile := writeSecret(t, dir, "key", "sk-from-file\n", 0o600)
	badFile := writeSecret(t, dir, "bad", "x", 0o644)
	ws := t.TempDir()
	gf := "--" + flagGuardTokenFile + "=" + guardFile
	kf := "--" + flagModelKeyFile + "=" + keyFile

	sys, _, _ := testSystem()
	opts, err := parseACPArgs(required("http://127.0.0.1:1", gf), sys)
	if err != nil || opts.Guard.Token != "guard-from-file" {
		t.Errorf("acp guard token from file = %q, %v", opts.Guard.Token, err)
	}
	sys, _, _ = testSystem(envModelBaseURL+"=http://127.0.0.1:9", envModelName+"=m")
	opts, err = parseACPArgs([]string{kf}, sys)
	if err != nil || opts.Model != modelOpenAI || opts.OpenAI.APIKey != "sk-from-file" {
		t.Errorf("acp model key from file = %+v, %v", opts.OpenAI, err)
	}
	sys, _, _ = testSystem()
	sopts, err := parseServeArgs(append(required("http://127.0.0.1:1", gf, kf, "--workspace", ws), "--"+flagAllowTokenlessLoopback), sys)
	if err != nil || sopts.Guard.Token != "guard-from-file" || !sys.env.modelKeySet || sys.env.modelKey != "sk-from-file" {
		t.Errorf("serve: guard token %q, model key %q (set %v), %v", sopts.Guard.Token, sys.env.modelKey, sys.env.modelKeySet, err)
	}
	// Off mode does not read the guard token file.
	sys, _, _ = testSystem()
	if _, err := parseACPArgs([]string{"--" + flagGuardTokenFile + "=" + badFile}, sys); err != nil {
		t.Errorf("off mode read the token file: %v", err)
	}

	both := []struct {
		cmd  string
		args []string
		env  string
		want string
	}{
		{"acp", required("http://127.0.0.1:1", gf), envGuardToken + "=t", "--" + flagGuardTokenFile + ` "` + guardFile + `" and ` + envGuardToken + ": both set"},
		{"acp", []string{gf}, envGuardToken + "=t", "both set"}, // off mode too
		{"acp", []string{kf}, envModelKey + "=k", "--" + flagModelKeyFile + ` "` + keyFile + `" and ` + envModelKey + ": both set"},
		{"serve", required("http://127.0.0.1:1", gf, "--workspace", ws), envGuardToken + "=t", "both set"},
		{"serve", []string{kf, "--workspace", ws}, envModelKey + "=k", envModelKey + ": both set"},
		{"acp", required("http://127.0.0.1:1", "--"+flagGuardTokenFile+"="+badFile), "", "mode 0644"},
		{"serve", []string{"--" + flagModelKeyFile + "=" + badFile, "--workspace", ws}, "", "mode 0644"},
	}
	for _, tt := range both {
		var env []string
		if tt.env != "" {
			env = append(env, tt.env)
		}
		sys, _, _ := testSystem(env...)
		var err error
		if tt.cmd == "acp" {
			_, err = parseACPArgs(tt.args, sys)
		} else {
			_, err = parseServeArgs(tt.args, sys)
		}
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v with %q: %v, want exit 2 with %q", tt.cmd, tt.args, tt.env, err, tt.want)
		}
	}
}

// TestSecretFileThroughBinary starts acp with its token in a file and none in
// its environment: it runs, and a bad file exits 2 with one error line.
func TestSecretFileThroughBinary(t *testing.T) {
	dir := t.TempDir()
	bad := writeSecret(t, dir, "token", "t\n", 0o644)
	code, _, stderr := runAcpguard(t, []string{"acp", "--external-tool-guard-mode=required",
		"--external-tool-guard-endpoint=http://127.0.0.1:1", "--" + flagGuardTokenFile, bad})
	want := "acpguard: error: --" + flagGuardTokenFile + ` "` + bad + `": mode 0644 gives its group or other users access; a secret file must be mode 0600 or stricter: run chmod 600 ` + bad + "\n"
	if code != exitUsage || stderr != want {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, want)
	}
}
