// secret_files.go owns secrets kept in files: reading a token or key file an
// operator names (only a regular file of the current user that no one else
// may read, opened without following a final symbolic link, checked on the
// descriptor that is then read), and creating a new secret file that only
// this user can read. Their contents follow the token rules of parseSecret.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Where a user's runtime files live: the variable that names the runtime
// directory, and the directory holding each user's, named by uid, where
// systemd-logind makes them. serve's generated host token goes there; the
// sandbox looks there for the user's service sockets.
const (
	envRuntimeDir   = "XDG_RUNTIME_DIR"
	userRuntimeDirs = "/run/user"
)

// Flags that name a secret file.
const (
	flagGuardTokenFile = "external-tool-guard-token-file"
	flagModelKeyFile   = "model-key-file"
	flagHostTokenFile  = "token-file"
)

// maxTokenUTF16 is a token's bound (DESIGN.md §6).
const maxTokenUTF16 = 8192

// maxSecretFileBytes bounds what a secret file may hold: a token is at most
// 8192 UTF-16 code units (at most 3 bytes of UTF-8 each) plus the white
// space around it that the token rules trim. A larger file is refused, not
// read whole.
const maxSecretFileBytes = 64 << 10

// secretFileGroupOtherBits are the permission bits that let another user
// (the file's group or everyone) read, write or execute a secret file.
const secretFileGroupOtherBits = 0o077

// readSecretFile reads the secret in the file path that flag names, once:
// the file must be a regular file owned by the current user with no group
// or other permission bits (mode 0600 or stricter). One trailing newline is
// removed, then the token rules of parseSecret apply. Errors name the flag
// and the file, the rule broken and the fix; never the contents.
func readSecretFile(flag, path string) (string, error) {
	what := fmt.Sprintf("--%s %q", flag, path)
	if path == "" {
		return "", usagef("%s: must name a file", what)
	}
	f, err := openSecretFile(what, path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	if len(data) > maxSecretFileBytes {
		return "", usagef("%s: larger than %d bytes; it must hold only the secret", what, maxSecretFileBytes)
	}
	raw := strings.TrimSuffix(string(data), "\n")
	return parseSecret(what, raw)
}

// openSecretFile opens path for reading without following a final symbolic
// link and without blocking on a FIFO, then checks the opened descriptor, so
// that a file swapped in after a check cannot be read instead.
func openSecretFile(what, path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil, usagef("%s: no such file", what)
	case errors.Is(err, syscall.ELOOP):
		return nil, usagef("%s: is a symbolic link; name the file itself", what)
	case errors.Is(err, syscall.EACCES):
		return nil, usagef("%s: permission denied; the file must belong to the user acpguard runs as", what)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkSecretFile(what, path, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkSecretFile checks the opened file: regular, owned by the effective
// user, no group or other permission bits.
func checkSecretFile(what, path string, f *os.File) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", what, err)
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return usagef("%s: not a regular file", what)
	case st.Uid != uid:
		return usagef("%s: owned by uid %d, not by the current user (uid %d); a secret file must be the user's own: chown it or write a new one", what, st.Uid, uid)
	case st.Mode&secretFileGroupOtherBits != 0:
		return usagef("%s: mode %04o gives its group or other users access; a secret file must be mode 0600 or stricter: run chmod 600 %s", what, st.Mode&0o7777, shellQuote(path))
	}
	return nil
}

// secretFileExists reports whether path names something (a file, a link, a
// directory) rather than nothing; any other failure to look is an error.
func secretFileExists(flag, path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, usagef("--%s %q: %v", flag, path, err)
	}
}

// createSecretFile writes secret and a newline to a new file path that only
// the current user can read (mode 0600). The file is created exclusively
// (an existing file or link is never overwritten or followed) in a directory
// owned by this user or root that no other user can write to, so no one
// else can replace or remove it. The directory is checked on the descriptor
// the file is then created in.
func createSecretFile(flag, path, secret string) error {
	what := fmt.Sprintf("--%s %q", flag, path)
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return usagef("%s: must name a file", what)
	}
	if dir == "" {
		dir = "."
	}
	dfd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return usagef("%s: open its directory %q: %v", what, dir, err)
	}
	defer syscall.Close(dfd)
	var st syscall.Stat_t
	if err := syscall.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("stat the directory of %s: %w", what, err)
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Uid != uid && st.Uid != 0:
		return usagef("%s: its directory %q belongs to uid %d; a secret file must be created in a directory of the current user (uid %d) or root", what, dir, st.Uid, uid)
	case st.Mode&0o022 != 0:
		return usagef("%s: its directory %q (mode %04o) is writable by other users, who could replace the file; use a directory only this user can write to (chmod go-w)", what, dir, st.Mode&0o7777)
	}
	fd, err := syscall.Openat(dfd, base, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("create %s: the file appeared meanwhile; start again to read it", what)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	f := os.NewFile(uintptr(fd), path)
	// The umask can only take bits away; this also sets the exact mode.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(secret + "\n")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		syscall.Unlinkat(dfd, base)
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs quoting, so that a
// hint such as "run chmod 600 FILE" can be pasted as it is.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:,@%=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseSecret applies the token rules (DESIGN.md §8) to the secret named
// name: no control character, trimmed, not blank, at most maxTokenUTF16.
func parseSecret(name, raw string) (string, error) {
	if !utf8.ValidString(raw) {
		return "", usagef("%s: must be valid UTF-8 (value not shown)", name)
	}
	if strings.IndexFunc(raw, isControl) >= 0 {
		return "", usagef("%s: must not contain a control character (value not shown)", name)
	}
	// The white space of JavaScript's String.prototype.trim, which Qwen Code uses.
	tok := strings.TrimFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
	if tok == "" {
		return "", usagef("%s: must not be blank", name)
	}
	units := 0
	for _, r := range tok {
		units += utf16Len(r)
	}
	if units > maxTokenUTF16 {
		return "", usagef("%s: must be at most %d UTF-16 code units, got %d (value not shown)", name, maxTokenUTF16, units)
	}
	return tok, nil
}

// isControl is the control-character set of the token and reason rules.
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7F && r <= 0x9F) || r == '\u2028' || r == '\u2029'
}

func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}
