// proc_system.go extends the proc group with what every subcommand is
// handed of the process it runs in: the captured environment and the
// standard streams (system), the logger it writes to stderr, the release
// version it reports, and the error that marks a bad argument or
// configuration, which main.go turns into exit status 2; and the one
// decimal reader (parseDigits). The commands take
// these from here, never from main.go or the configuration files.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// system is what a subcommand may touch of the process it runs in. Tests
// build their own; main builds the real one.
type system struct {
	env    *procEnv
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// envOf returns the captured environment of sys; a system built without one
// (in a test) has an empty environment, so no secret is ever assumed present.
func envOf(sys *system) *procEnv {
	if sys.env == nil {
		return &procEnv{}
	}
	return sys.env
}

// version is the release version; a release build may set it with -ldflags -X.
var version = "0.1.0-dev"

// newLogger is the slog logger every subcommand writes to stderr.
func newLogger(w io.Writer, logJSON bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// usageError marks a bad argument or configuration: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// parseDigits reads a non-empty run of ASCII digits whose value fits N: the
// one decimal reader of flags, /proc/<pid>/stat lines and socket tables.
func parseDigits[N int | uint32 | uint64, T string | []byte](raw T) (N, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(raw); i++ {
		d := uint64(raw[i]) - '0'
		if d > 9 || n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	v := N(n)
	if uint64(v) != n || v < 0 {
		return 0, false
	}
	return v, true
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// visibleText is s with every character a terminal could act on written
// as a Go escape: the control characters (C0 and C1: ESC, CR, BEL,
// backspace, CSI as U+009B), the formatting characters (the bidi overrides
// such as U+202E), every other character that is not printable, and each
// byte that is not UTF-8 (\x9b); a backslash is doubled, so that an escape
// of s is told from one made here. A log line, a tool's output or a
// model's text cannot move the cursor, retitle the window or reorder what
// the terminal shows.
func visibleText(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !visibleRune(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case visibleRune(r, n):
			b.WriteString(s[i : i+n])
		case r == '\\':
			b.WriteString(`\\`)
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// visibleRune reports whether the rune r, n bytes of its text, is shown as
// it is by visibleText.
func visibleRune(r rune, n int) bool {
	return unicode.IsPrint(r) && r != '\\' && !(r == utf8.RuneError && n == 1)
}
