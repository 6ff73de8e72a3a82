// run_terminal_test.go tests run's terminal face as a person at a terminal
// meets it: the real binary on a pseudo-terminal, the test typing on its
// master (lines, Ctrl-C, Ctrl-D) and reading what the terminal shows. A
// permission question answered allow, always or reject; Ctrl-C during a
// long shell command; escape sequences from a tool and the model shown
// inert; a budget.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Keys a person types.
const (
	keyCtrlC = "\x03"
	keyCtrlD = "\x04"
	keyEnter = "\r"
)

// termRun is acpguard run on a pseudo-terminal.
type termRun struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	copied chan struct{}

	mu    sync.Mutex
	shown bytes.Buffer // everything the terminal showed
	seen  int          // how much of it expect has passed
}

// startTermRun starts "acpguard run" with args in dir as a shell on a
// terminal does: the slave of a new pseudo-terminal its stdin, stdout and
// stderr, the controlling terminal of its session, whose leader is the
// shell (the tty-shell role), and run in the foreground process group.
// Sessions are not saved and no user settings file is read. Colours are
// off (NO_COLOR=1) unless env sets NO_COLOR.
func startTermRun(t *testing.T, dir string, args []string, env ...string) *termRun {
	t.Helper()
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, envNoColor+"=") }) {
		env = append(env, envNoColor+"=1")
	}
	master, slave := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(time.Minute))
	t.Cleanup(cancel)
	args = append([]string{"run", offMode, "--state-dir", "off"}, args...)
	cmd := acpguardCmd(t, ctx, args, append([]string{envQwenHome + "=" + t.TempDir(), roleEnv("tty-shell")}, env...)...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the master reads EIO once the child's copies are closed
	r := &termRun{t: t, master: master, cmd: cmd, copied: make(chan struct{})}
	go func() {
		defer close(r.copied)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			r.mu.Lock()
			r.shown.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return r
}

// runTTYShell plays the shell of a terminal for startTermRun: the leader
// of the terminal's session, it runs acpguard with its own arguments in
// its process group, the foreground one, leaves Ctrl-C's SIGINT to it and
// exits with its status.
func runTTYShell(string) int {
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitRuntime
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), roleEnv("main"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	fmt.Fprintln(os.Stderr, err)
	return exitRuntime
}

// all is everything the terminal showed so far.
func (r *termRun) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shown.String()
}

// expect waits until the terminal shows text after what expect passed
// before, and passes it.
func (r *termRun) expect(text string) {
	r.t.Helper()
	bound := testTimeout(time.Minute)
	deadline := time.Now().Add(bound)
	for {
		r.mu.Lock()
		i := strings.Index(r.shown.String()[r.seen:], text)
		if i >= 0 {
			r.seen += i + len(text)
		}
		r.mu.Unlock()
		if i >= 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the terminal did not show %q within %v; it showed:\n%s", text, bound, r.all())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// typeKeys types s on the terminal.
func (r *termRun) typeKeys(s string) {
	r.t.Helper()
	if _, err := r.master.WriteString(s); err != nil {
		r.t.Fatalf("type %q: %v", s, err)
	}
}

// exitCode waits for run to exit and for the terminal to show all it
// wrote, and returns its exit status.
func (r *termRun) exitCode() int {
	r.t.Helper()
	err := r.cmd.Wait()
	<-r.copied
	if err == nil {
		return 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		r.t.Fatalf("wait for run: %v", err)
	}
	return ee.ExitCode()
}

// TestRunTerminalPermission: a write in the default mode asks on the
// terminal, showing the call, its arguments and its diff; the answer
// decides whether the file is written; an answer no option has is asked
// again, never taken for one; "always" lets the next edit run unasked.
func TestRunTerminalPermission(t *testing.T) {
	const write = `call write_file {"file_path":"a.txt","content":"x"}`
	tests := []struct {
		name    string
		answers []string // typed in turn; all but the last are asked again
		chosen  string   // the option shown as chosen
		written bool
		outcome string // how the call ended, as shown
	}{
		{"allow once", []string{"2"}, "Allow", true, "write_file: completed"},
		{"allow by its letter", []string{"y"}, "Allow", true, "write_file: completed"},
		{"reject", []string{"3"}, "Reject", false, "write_file: denied: "},
		{"no default: asked again until an option is named", []string{"", "maybe", "n"}, "Reject", false, "write_file: denied: "},
		{"always", []string{"a"}, "Allow All Edits", true, "write_file: completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			r := startTermRun(t, dir, nil)
			r.expect(termPromptMark)
			r.typeKeys(write + keyEnter)
			r.expect("* write_file")
			r.expect(`{"content":"x","file_path":"` + filepath.Join(dir, "a.txt") + `"}`)
			r.expect("  ~ " + filepath.Join(dir, "a.txt") + " (new file)")
			r.expect("  + x")
			r.expect("? allow write_file")
			r.expect("  1  Allow All Edits\r\n  2  Allow\r\n  3  Reject\r\n")
			for _, a := range tt.answers {
				r.expect("answer 1-3 or a/y/n: ")
				r.typeKeys(a + keyEnter)
			}
			r.expect("  " + tt.chosen + "\r\n")
			r.expect(tt.outcome)
			r.expect(termPromptMark)
			if got := fileExists(filepath.Join(dir, "a.txt")); got != tt.written {
				t.Errorf("a.txt written: %v, want %v", got, tt.written)
			}
			if tt.chosen == "Allow All Edits" {
				r.typeKeys(`call write_file {"file_path":"b.txt","content":"y"}` + keyEnter)
				r.expect("write_file: completed")
				r.expect(termPromptMark)
				if !fileExists(filepath.Join(dir, "b.txt")) {
					t.Errorf("the edit after always was not made")
				}
				if n := strings.Count(r.all(), "? allow"); n != 1 {
					t.Errorf("asked %d times, want once: the edit after always runs unasked", n)
				}
			}
			r.typeKeys(keyCtrlD)
			if code := r.exitCode(); code != exitOK {
				t.Errorf("Ctrl-D at the prompt line: exit %d, want 0\n%s", code, r.all())
			}
		})
	}
}

// TestRunTerminalColour: without NO_COLOR the terminal shows a little
// colour: the tool's name bold, an allow green, a denial red.
func TestRunTerminalColour(t *testing.T) {
	if os.Getenv(envNoColor) != "" {
		t.Skipf("%s is set in this environment", envNoColor)
	}
	r := startTermRun(t, t.TempDir(), []string{"-y"}, envNoColor+"=")
	r.expect(termPromptMark)
	r.typeKeys(`call write_file {"file_path":"a.txt","content":"x"}` + keyEnter)
	r.expect(sgrBold + "* write_file" + sgrReset)
	r.expect("write_file: " + sgrGreen + "allowed" + sgrReset)
	r.expect(termPromptMark)
	r.typeKeys(`call write_file {"file_path":"/etc/acpguard-colour-test","content":"x"}` + keyEnter)
	r.expect("write_file: " + sgrRed)
	r.expect(termPromptMark)
	r.typeKeys(keyCtrlD)
	if code := r.exitCode(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestRunTerminalCtrlC: Ctrl-C during a long shell command (the prompt
// words, run first) cancels the turn: the command's process is gone and
// the prompt line is back; a second Ctrl-C leaves with status 130.
func TestRunTerminalCtrlC(t *testing.T) {
	dir := t.TempDir()
	r := startTermRun(t, dir, []string{"-y", `call run_shell_command {"command":"echo $$ > pid; exec sleep 30"}`})
	r.expect("* run_shell_command")
	r.expect("run_shell_command: allowed")
	waitForFile(t, filepath.Join(dir, "pid"))
	pid := readPIDFile(t, filepath.Join(dir, "pid"))
	r.typeKeys(keyCtrlC)
	r.expect("cancelling the turn; Ctrl-C again exits")
	r.expect("run_shell_command: cancelled")
	r.expect("turn cancelled")
	r.expect(termPromptMark)
	waitFor(t, "the cancelled command to end", func() bool { return processGone(pid) })
	r.typeKeys(keyCtrlC)
	if code := r.exitCode(); code != exitInterrupted {
		t.Errorf("a second Ctrl-C: exit %d, want %d\n%s", code, exitInterrupted, r.all())
	}
}

// TestRunTerminalCtrlCAtQuestion: Ctrl-C while a question waits cancels
// the turn: the question is withdrawn, the call not made, and a line typed
// after it is a prompt, not an answer.
func TestRunTerminalCtrlCAtQuestion(t *testing.T) {
	dir := t.TempDir()
	r := startTermRun(t, dir, nil)
	r.expect(termPromptMark)
	r.typeKeys(`call write_file {"file_path":"a.txt","content":"x"}` + keyEnter)
	r.expect("answer 1-3 or a/y/n: ")
	r.typeKeys(keyCtrlC)
	r.expect("cancelling the turn; Ctrl-C again exits")
	r.expect("turn cancelled")
	r.expect(termPromptMark)
	// The call's end and the withdrawal come in either order.
	for _, want := range []string{"write_file: cancelled", "the question was withdrawn"} {
		if !strings.Contains(r.all(), want) {
			t.Errorf("the terminal did not show %q:\n%s", want, r.all())
		}
	}
	r.typeKeys("y" + keyEnter)
	r.expect("y\r\ny\r\n") // the echo, then the model's answer to the prompt "y"
	r.expect(termPromptMark)
	if fileExists(filepath.Join(dir, "a.txt")) {
		t.Errorf("a.txt written after the question was cancelled")
	}
	r.typeKeys(keyCtrlD)
	if code := r.exitCode(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestRunTerminalCtrlCAtPrompt: at the prompt line one Ctrl-C only says
// how to leave; a line typed after it starts over, so two more are needed.
func TestRunTerminalCtrlCAtPrompt(t *testing.T) {
	r := startTermRun(t, t.TempDir(), nil)
	r.expect(termPromptMark)
	r.typeKeys(keyCtrlC)
	r.expect("Ctrl-C again or Ctrl-D exits")
	r.expect(termPromptMark)
	r.typeKeys("hello" + keyEnter)
	r.expect("hello\r\n")
	r.expect(termPromptMark)
	r.typeKeys(keyCtrlC)
	r.expect("Ctrl-C again or Ctrl-D exits")
	r.expect(termPromptMark)
	r.typeKeys(keyCtrlC)
	if code := r.exitCode(); code != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", code, exitInterrupted, r.all())
	}
}

// TestRunTerminalEscapes: escape sequences a tool prints (a window title,
// a screen clear, a bidi override, a C1 CSI) and one in the model's text
// reach the terminal as visible escapes, and a tool cannot open /dev/tty
// to write one past run: with NO_COLOR set, not one ESC byte, U+202E or
// U+009B comes out of the terminal.
func TestRunTerminalEscapes(t *testing.T) {
	r := startTermRun(t, t.TempDir(), []string{"-y"}, envNoColor+"=1")
	r.expect(termPromptMark)
	r.typeKeys(`call run_shell_command {"command":"printf '\\033]0;pwned\\007\\033[2J\\342\\200\\256\\302\\233fake? allow'"}` + keyEnter)
	r.expect("run_shell_command: completed")
	r.expect(termGutter + `Output: \x1b]0;pwned\a\x1b[2J\u202e\u009bfake? allow`)
	r.expect(termPromptMark)
	// A tool has no controlling terminal to write to.
	r.typeKeys(`call run_shell_command {"command":"printf '\\033[2J' > /dev/tty; echo rc=$?"}` + keyEnter)
	r.expect(termGutter + "Output: bash: ")
	r.expect("/dev/tty: No such device or address")
	r.expect(termGutter + "rc=1")
	r.expect(termPromptMark)
	// The kernel echoes the typed ESC as ^[; the model's text has it.
	r.typeKeys("model \x1b[2J text" + keyEnter)
	r.expect(`model \x1b[2J text`)
	r.expect(termPromptMark)
	r.typeKeys(keyCtrlD)
	if code := r.exitCode(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	shown := r.all()
	for _, raw := range []string{"\x1b", "\u202e", "\u009b", "\a"} {
		if strings.Contains(shown, raw) {
			t.Errorf("the terminal got %q raw:\n%q", raw, shown)
		}
	}
	if strings.Contains(shown, "\r\n? allow") {
		t.Errorf("a question line was shown, none was asked:\n%q", shown)
	}
}

// TestRunTerminalBudget: a budget exceeded at the terminal ends the run
// as it ends a headless one: its stderr line and exit status 55, the call
// not run.
func TestRunTerminalBudget(t *testing.T) {
	dir := t.TempDir()
	r := startTermRun(t, dir, []string{"-y", "--max-tool-calls", "0"})
	r.expect(termPromptMark)
	r.typeKeys(`call write_file {"file_path":"a.txt","content":"x"}` + keyEnter)
	r.expect(`{"error":{"type":"FatalBudgetExceededError","message":"Run aborted: tool-call budget of 0 exceeded (--max-tool-calls); observed 1.","code":55}}`)
	if code := r.exitCode(); code != exitBudget {
		t.Errorf("exit %d, want %d\n%s", code, exitBudget, r.all())
	}
	if fileExists(filepath.Join(dir, "a.txt")) {
		t.Errorf("a.txt written past the budget")
	}
}
