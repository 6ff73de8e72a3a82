// proc.go owns the process groups every tool, hook and MCP server runs in:
// waiting without reaping, ending the group, and bounded output (DESIGN.md §9).
package main

import (
	"bytes"
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// limitedBuffer keeps the first max bytes written and counts the rest, so
// a writer never blocks on or grows with a chatty producer.
type limitedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := min(len(p), b.max-b.buf.Len())
	b.buf.Write(p[:keep])
	b.dropped += int64(len(p) - keep)
	return len(p), nil
}

func (b *limitedBuffer) WriteString(s string) (int, error) {
	return b.Write([]byte(s))
}

// String returns what was kept and, when something was dropped, a note saying so.
func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return b.buf.String()
	}
	return fmt.Sprintf("%s\n[output truncated at %d bytes; %d bytes dropped]", b.buf.String(), b.max, b.dropped)
}

// pidTypePID is waitid's P_PID.
const pidTypePID = 1

// waitExited blocks until process pid has exited, leaving it unreaped
// (WNOWAIT) so that its pid stays reserved until cmd.Wait reaps it.
func waitExited(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pidTypePID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
