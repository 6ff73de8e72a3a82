// channel_test.go tests serve's end of the private channel: it believes only
// bytes its child wrote, and takes no descriptor from anyone.
package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// fdsOpenOn counts this process's descriptors open on path.
func fdsOpenOn(t *testing.T, path string) int {
	t.Helper()
	names, err := readDirNames("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if target, err := os.Readlink("/proc/self/fd/" + name); err == nil && target == path {
			n++
		}
	}
	return n
}

func TestChannelConnReadsOnlyItsChild(t *testing.T) {
	ends, err := newChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ends.closeAll()
	child := exec.Command("/bin/sh", "-c", "echo from-the-child")
	child.Stdout = ends.childStdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	conn := ends.conn(child.Process.Pid)
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); line != "from-the-child\n" || err != nil {
		t.Fatalf("the child's line: %q, %v", line, err)
	}
	child.Wait()

	// Another process holding the child's end (here: this one) writes.
	if _, err := ends.childStdout.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"allowed":true}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	fw, ok := errors.AsType[*foreignWriterError](err)
	if !ok || fw.writer != os.Getpid() || fw.child != child.Process.Pid || line != "" {
		t.Fatalf("a forged line read as %q, %v; want a foreign writer error naming pid %d", line, err, os.Getpid())
	}
}

// A writer that sends descriptors is refused, and none of them is left open
// in the reader.
func TestChannelConnRefusesDescriptors(t *testing.T) {
	ends, err := newChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ends.closeAll()
	conn := ends.conn(os.Getpid())
	// A file nothing else in this process opens.
	path := filepath.Join(t.TempDir(), "passed")
	passed, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	rights := syscall.UnixRights(int(passed.Fd()), int(passed.Fd()), int(passed.Fd()))
	if err := syscall.Sendmsg(int(ends.childStdout.Fd()), []byte("x\n"), rights, nil, 0); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(make([]byte, 64))
	if _, ok := errors.AsType[*foreignWriterError](err); !ok || n != 0 {
		t.Fatalf("read of bytes sent with descriptors: %d, %v; want a refusal", n, err)
	}
	if n := fdsOpenOn(t, path); n != 1 {
		t.Errorf("%d descriptors are open on the passed file, want only the sender's: a passed descriptor was installed", n)
	}
}

// Each of serve's ends carries one direction: what a copy of the child's
// stdin writes is refused, and serve never writes where the child writes.
func TestChannelOneDirectionEach(t *testing.T) {
	ends, err := newChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ends.closeAll()
	if _, err := ends.childStdin.Write([]byte("x\n")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to serve through the child's stdin: %v, want EPIPE", err)
	}
	if n, err := ends.childStdout.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("read from the child's stdout: %d, %v; want the end of input", n, err)
	}
	conn := ends.conn(os.Getpid())
	if _, err := conn.Write([]byte("to the child\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(ends.childStdin).ReadString('\n'); line != "to the child\n" || err != nil {
		t.Errorf("the child read %q, %v", line, err)
	}
}
