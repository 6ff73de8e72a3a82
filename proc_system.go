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
	"syscall"
	"unicode"
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

// visibleText is s with every control character, and every character that
// is not printable, written as a Go escape: a log line cannot move the
// cursor or retitle a terminal.
func visibleText(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '\\' {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}
