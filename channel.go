// channel.go owns the private channel between serve and each ACP child it
// starts: Unix socket pairs made per child, serve's end that believes only
// bytes the child itself wrote, the child's refusal of any other channel,
// and the session ids both ends share (their ACP vocabulary: channel_acp.go).
//
// What each end holds. There is one socket pair per direction. The child
// holds one end of each, as its stdin (what serve sends) and its stdout
// (what it sends serve). serve holds the other two, created close-on-exec
// inside serve, which is not dumpable, so no other process can reach them;
// it only writes to the first and only reads the second, and shuts the
// other direction of each down. Nothing that crosses them is a credential:
// the provider token and the model key stay in serve, and the child's
// environment holds only the required-v1 marker.
//
// What a process of the same user can and cannot do:
//   - It cannot open the channel through /proc/<child>/fd/N: the kernel
//     refuses to open a socket by that path (a pipe it would open). So
//     nothing but serve can write to a child.
//   - From the child's execve until it makes itself not dumpable (Go runtime
//     start-up and flag parsing), pidfd_getfd(2) can still copy the child's
//     ends. A thief holding such a copy can read what serve sends before the
//     child does (session ids, prompts, model output; no credential), and
//     can write to serve as if it were the child. It can never write to the
//     child: a socket pair delivers what one end writes only to the other.
//   - What the thief writes is detected: serve reads with SO_PASSCRED, the
//     kernel never returns bytes of two writers in one read, and it names
//     the writing process, which no process can forge. Bytes from any
//     process but the child end the channel and the child (fail closed).
//     Were that check gone, serve's ownership and active-prompt checks, and
//     the provider's decision on every call, would still hold against a
//     forged child.
//   - The sandbox closes the start-up window itself for tools.
//
// Why one pair per direction: a socket wakes its writer's poller each time
// the reader takes data (a pipe only when it was full), so one socket used
// both ways costs each side a spurious thread wake per message, about 70 µs
// per guarded call on two cores. An end that is only written stays off the
// runtime's poller; its writes block only when the reader stopped reading.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// channelExitDrain is how long serve keeps reading a channel after its
// child exited. What the child wrote before it exited is already queued
// and is read at once; the bound matters only when another process still
// holds a copy of the child's end, so that the end of the child is not
// missed.
const channelExitDrain = time.Second

// channelCredSpace is room for exactly one SCM_CREDENTIALS message per read:
// a writer that also sends descriptors (SCM_RIGHTS) makes the read truncated,
// which is refused, and the kernel closes those descriptors undelivered.
var channelCredSpace = syscall.CmsgSpace(syscall.SizeofUcred)

// channelEnds are one child's channel before it starts: serve's two ends,
// and the child's stdin and stdout.
type channelEnds struct {
	read        *net.UnixConn // serve reads the child's messages, SO_PASSCRED
	write       *os.File      // serve writes to the child; blocking, off the poller
	childStdin  *os.File
	childStdout *os.File
}

// newChannel makes one child's channel. Every end is close-on-exec: no other
// child started meanwhile inherits one.
func newChannel() (*channelEnds, error) {
	var toChild, fromChild [2]int
	var err error
	if toChild, err = syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("create the private channel: socketpair: %w", err)
	}
	if fromChild, err = syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0); err != nil {
		syscall.Close(toChild[0])
		syscall.Close(toChild[1])
		return nil, fmt.Errorf("create the private channel: socketpair: %w", err)
	}
	fail := func(what string, err error) (*channelEnds, error) {
		for _, fd := range []int{toChild[0], toChild[1], fromChild[0], fromChild[1]} {
			syscall.Close(fd)
		}
		return nil, fmt.Errorf("create the private channel: %s: %w", what, err)
	}
	// Each of serve's ends carries one direction only: what a copy of the
	// child's stdin writes fails (EPIPE), and a copy of its stdout reads
	// only the end of input.
	if err := syscall.Shutdown(toChild[0], syscall.SHUT_RD); err != nil {
		return fail("shutdown", err)
	}
	if err := syscall.Shutdown(fromChild[0], syscall.SHUT_WR); err != nil {
		return fail("shutdown", err)
	}
	if err := syscall.SetsockoptInt(fromChild[0], syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1); err != nil {
		return fail("SO_PASSCRED", err)
	}
	own := os.NewFile(uintptr(fromChild[0]), "acp-channel-in")
	conn, err := net.FileConn(own) // a close-on-exec copy on the runtime's poller
	own.Close()
	if err != nil {
		fromChild[0] = -1
		return fail("read end", err)
	}
	return &channelEnds{
		read:        conn.(*net.UnixConn),
		write:       os.NewFile(uintptr(toChild[0]), "acp-channel-out"),
		childStdin:  os.NewFile(uintptr(toChild[1]), "acp-channel-child-stdin"),
		childStdout: os.NewFile(uintptr(fromChild[1]), "acp-channel-child-stdout"),
	}, nil
}

// closeChild closes the child's ends in serve, once the child has them or
// will never start.
func (e *channelEnds) closeChild() {
	e.childStdin.Close()
	e.childStdout.Close()
}

// closeAll closes every end: the child did not start.
func (e *channelEnds) closeAll() {
	e.closeChild()
	e.read.Close()
	e.write.Close()
}

// channelConn is serve's side of one child's channel.
type channelConn struct {
	read  *net.UnixConn
	raw   syscall.RawConn // read's descriptor, for recvmsg with credentials
	write *os.File
	pid   int // the child: the only process whose bytes are read

	// recvmsg's arguments and results, kept for the one reading goroutine
	// so that a read allocates nothing.
	oob   []byte
	iov   syscall.Iovec
	msg   syscall.Msghdr
	n     int
	errno syscall.Errno
	recv  func(fd uintptr) bool
}

// conn is serve's side of the channel of the started child pid.
func (e *channelEnds) conn(childPID int) *channelConn {
	c := &channelConn{read: e.read, write: e.write, pid: childPID, oob: make([]byte, channelCredSpace)}
	c.raw, _ = e.read.SyscallConn() // a *net.UnixConn always has one
	c.recv = func(fd uintptr) bool {
		for {
			r, _, errno := syscall.Syscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.msg)), syscall.MSG_CMSG_CLOEXEC)
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller
			}
			c.n, c.errno = int(r), errno
			return true
		}
	}
	return c
}

func (c *channelConn) Write(p []byte) (int, error) { return c.write.Write(p) }

// CloseWrite ends what serve sends: the child reads the end of its input.
func (c *channelConn) CloseWrite() error { return shutdownWrite(c.write) }

// shutdownWrite shuts down the writing side of socket f; after f was closed
// it does nothing (the descriptor's number may belong to another file).
func shutdownWrite(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Shutdown(int(fd), syscall.SHUT_WR) }); err != nil {
		return err
	}
	return serr
}

// Close closes both of serve's ends.
func (c *channelConn) Close() error {
	err := c.read.Close()
	if werr := c.write.Close(); err == nil {
		err = werr
	}
	return err
}

// foreignWriterError is a read of bytes that the child did not write.
type foreignWriterError struct {
	child, writer int // writer 0: the kernel named no writer
	why           string
}

func (e *foreignWriterError) Error() string {
	return fmt.Sprintf("read the private channel of ACP child %d: %s (pid %d); the channel is closed", e.child, e.why, e.writer)
}

// Read returns bytes only if the child wrote them. It waits in the runtime's
// poller, and honours the read deadline of drainAfterExit.
func (c *channelConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.iov.Base = &p[0]
	c.iov.SetLen(len(p))
	c.msg = syscall.Msghdr{Iov: &c.iov, Iovlen: 1, Control: &c.oob[0]}
	c.msg.SetControllen(len(c.oob))
	err := c.raw.Read(c.recv)
	c.iov.Base = nil // p is the caller's again
	switch {
	case err != nil:
		return 0, err
	case c.errno != 0:
		return 0, os.NewSyscallError("recvmsg", c.errno)
	case c.n == 0:
		return 0, io.EOF
	}
	if werr := c.checkWriter(); werr != nil {
		return 0, werr
	}
	return c.n, nil
}

// checkWriter accepts the last read only if its control data is exactly the
// child's credentials.
func (c *channelConn) checkWriter() error {
	if c.msg.Flags&syscall.MSG_CTRUNC != 0 {
		return &foreignWriterError{child: c.pid, why: "the writer sent control data other than its credentials"}
	}
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&c.oob[0]))
	if int(c.msg.Controllen) != len(c.oob) || int(h.Len) != syscall.CmsgLen(syscall.SizeofUcred) ||
		h.Level != syscall.SOL_SOCKET || h.Type != syscall.SCM_CREDENTIALS {
		return &foreignWriterError{child: c.pid, why: "the kernel named no writer"}
	}
	cred := (*syscall.Ucred)(unsafe.Pointer(&c.oob[syscall.CmsgLen(0)]))
	if int(cred.Pid) != c.pid {
		return &foreignWriterError{child: c.pid, writer: int(cred.Pid), why: "bytes written by another process"}
	}
	return nil
}

// drainAfterExit bounds reading once the child has exited (channelExitDrain)
// and returns a channel closed when it has done so.
func (c *channelConn) drainAfterExit() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitExited(c.pid) // tools.go; it returns at once if pid was reaped
		c.read.SetReadDeadline(time.Now().Add(channelExitDrain))
	}()
	return done
}

// checkParentChannel refuses to run a child that takes decisions or model
// output from its parent over anything but a Unix socket on both stdin and
// stdout: any process of the same user can open a pipe through
// /proc/<pid>/fd and write to it, and a socket it cannot.
func checkParentChannel() error {
	for fd, name := range []string{"stdin", "stdout"} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return fmt.Errorf("check the private channel: %s: %w", name, err)
		}
		kind := fileKind(st.Mode)
		if kind == "socket" {
			domain, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_DOMAIN)
			if err == nil && domain == syscall.AF_UNIX {
				continue
			}
			kind = "non-Unix socket"
		}
		return fmt.Errorf("check the private channel: %s is a %q, not a Unix socket; a managed child (%s or --model %s) runs only on the socket pair acpguard serve hands it", name, kind, envPrivateGuard, modelParent)
	}
	return nil
}

// fileKind names a file type for an error message.
func fileKind(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFIFO:
		return "pipe"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFREG:
		return "regular file"
	case syscall.S_IFDIR:
		return "directory"
	}
	return "file"
}

// pollableOut returns stdout written through the runtime's poller when
// pollable made it non-blocking: a client that hands one socket as both
// stdin and stdout hands one open file, so switching stdin switched stdout
// too, and a write that would block must then wait in the poller instead of
// failing with EAGAIN. serve's children have a socket pair per direction.
func pollableOut(f *os.File) io.Writer {
	if f.SetWriteDeadline(time.Time{}) == nil {
		return f // already written through the poller
	}
	flags, err := fcntlGetfl(int(f.Fd()))
	if err != nil || flags&syscall.O_NONBLOCK == 0 {
		return f
	}
	return os.NewFile(f.Fd(), f.Name())
}

func fcntlGetfl(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Wire names of the model proxy: ACP extension methods, private to serve and
// its children ("_" names are free for extensions in ACP).
const (
	// methodModelComplete is the child's request: modelCompleteParams; its
	// result, a modelChunk with the reply's last bytes or none and no
	// streamId, comes after every chunk of the reply: so the end of a
	// reply costs no notification of its own. The last read's bytes, and
	// those that end an event stream with data: [DONE], which wait for the
	// reply's end, come in the result, which names the media type when no
	// chunk did: a reply read whole in one read is then one line.
	methodModelComplete = "_acpguard/model/complete"
	// methodModelChunk is serve's notification: the reply's bytes, in
	// order, the first chunk with the reply's media type (alone only when
	// a read gave no byte the child may yet be shown). One chunk carries
	// every byte one read of the reply gave: each is a wake of the child.
	methodModelChunk = "_acpguard/model/chunk"
)

// Wire names of remote MCP servers under serve: a child never holds a
// remote server's header values, so serve reaches the server for it
// (serve_mcp.go, mcp_parent.go).
const (
	// methodMCPList is the child's request at session start:
	// {sessionId, server}; the result is {tools}, the server's listed
	// tools as serve read them.
	methodMCPList = "_acpguard/mcp/list"
	// methodMCPCall is the child's request for one call the guard allowed:
	// {sessionId, promptId, server, tool, arguments}; the result is the
	// call's {status, output, rawOutput?, errorType?}.
	methodMCPCall = "_acpguard/mcp/call"
)

// Wire name of http hooks under serve: a child never holds the variables
// a hook's allowedEnvVars name, so serve POSTs the hook for it
// (serve_hooks.go, hooks_parent.go).
const (
	// methodHookHTTP is the child's request for one http hook:
	// {sessionId, promptId?, event, matcher, hook, url, headers?, input},
	// the hook named by its place in the child's settings with its URL and
	// headers as written; the result is {body?, json?} or {failure}.
	methodHookHTTP = "_acpguard/hook/http"
)

// Wire name of the variables serve learns are secrets after a child
// started (serve_secrets.go): serve's notification {names}, on which the
// child takes them out of its environment, as it takes those a session's
// settings name, before it starts anything more.
const methodEnvHide = "_acpguard/env/hide"

// maxEnvHideNames bounds the names one methodEnvHide carries: each is a
// variable a remote MCP server's header or an http hook names.
const maxEnvHideNames = 1024

// envHideParams is methodEnvHide's params.
type envHideParams struct {
	Names []string `json:"names"`
}

// The models serve tells a child to run: "acpguard acp --model parent"
// asks serve for each call; "--model scripted" runs the built-in scripted
// model, when serve has no model service.
const (
	modelParent   = "parent"
	modelScripted = "scripted"
)

// modelCompleteParams is one model call of a child.
type modelCompleteParams struct {
	SessionID string          `json:"sessionId"`
	PromptID  string          `json:"promptId"`
	StreamID  string          `json:"streamId"` // names the chunks of this call's reply
	Request   json.RawMessage `json:"request"`  // the chat completions body, "model" left empty
	Meta      json.RawMessage `json:"_meta,omitempty"`
}

// modelChunk is one piece of a reply: its media type once, then its bytes.
type modelChunk struct {
	StreamID    string `json:"streamId"`
	ContentType string `json:"contentType,omitempty"`
	Data        []byte `json:"data,omitempty"` // base64 on the wire: a cut may split a UTF-8 sequence
}

// maxSessionIDLen bounds the session ids a child names: they travel in URL
// paths and logs.
const maxSessionIDLen = 128

// validSessionID is the one shape of a session id, checked by serve on what a
// child returns and by the child on what serve names.
func validSessionID(id string) bool {
	if id == "" || len(id) > maxSessionIDLen {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)
		if !ok {
			return false
		}
	}
	return true
}
