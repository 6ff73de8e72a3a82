// main_test.go holds the end-to-end harness: the test binary re-executes
// itself as acpguard, so tests drive real processes without a separate build.
package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// envRunAsMain makes the test binary behave as the acpguard binary. It is
// inherited by the children acpguard starts, so a serve started by a test
// spawns ACP children that are acpguard too.
const envRunAsMain = "ACPGUARD_TEST_RUN_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsMain) == "1" {
		setTestSandbox() // sandbox_test.go
		main()
		return
	}
	os.Exit(m.Run())
}

// acpguardCmd returns a command that runs acpguard with args. extraEnv
// entries ("K=V") are added to the test's own environment.
func acpguardCmd(t testing.TB, ctx context.Context, args []string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	// The race detector otherwise sleeps a second at every exit.
	cmd.Env = append(append(os.Environ(), envRunAsMain+"=1", "GORACE=atexit_sleep_ms=0"), extraEnv...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// syncBuffer is an io.Writer that tests may read while a server writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runAcpguard runs acpguard to completion and returns its exit code and output.
func runAcpguard(t testing.TB, args []string, extraEnv ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := acpguardCmd(t, ctx, args, extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stderr = &errb
	var err error
	if managedStart(args, extraEnv) {
		// serve's child runs only on its socket pairs; empty ones here.
		ends, perr := newChannel()
		if perr != nil {
			t.Fatal(perr)
		}
		defer ends.closeAll()
		channelWriter{ends.write}.Close()
		cmd.Stdin, cmd.Stdout = ends.childStdin, ends.childStdout
		copied := make(chan struct{})
		go func() { io.Copy(&out, ends.read); close(copied) }()
		err = cmd.Start()
		ends.closeChild()
		if err == nil {
			err = cmd.Wait()
		}
		<-copied
	} else {
		cmd.Stdout = &out
		err = cmd.Run()
	}
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run acpguard %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

func TestCommandDispatch(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, exitUsage, "", "acpguard: error: no command given"},
		{[]string{"bogus"}, exitUsage, "", `acpguard: error: unknown command "bogus"`},
		{[]string{"help"}, exitOK, "acpguard serve", ""},
		{[]string{"version"}, exitOK, "acpguard ", ""},
		{[]string{"version", "extra"}, exitUsage, "", `version takes no arguments, got "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			code, stdout, stderr := runAcpguard(t, tt.args)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			if !strings.Contains(stdout, tt.inStdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.inStdout)
			}
			if !strings.Contains(stderr, tt.inStderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.inStderr)
			}
		})
	}
}
