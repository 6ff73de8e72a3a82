// reaper_test.go checks that marked process groups are ended, and nothing else.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKillMarkedEndsMarkedGroupsOnly(t *testing.T) {
	dir := t.TempDir()
	value, err := randomHex(8)
	if err != nil {
		t.Fatal(err)
	}
	env := newProcEnv(os.Environ())
	start := func(mark bool, script string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", script)
		if mark {
			cmd.Env = env.childEnv(envChannelMark + "=" + value)
		} else {
			cmd.Env = env.childEnv(envChannelMark + "=someone-else")
		}
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	// A marked shell whose background child cleared its environment: the
	// group kill still ends it.
	marked := start(true, "env -i sleep 30 & echo $! > bg.pid; sleep 30")
	other := start(false, "sleep 30")
	var bg int
	deadline := time.Now().Add(10 * time.Second)
	for bg == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(dir, "bg.pid"))
		bg, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(5 * time.Millisecond)
	}
	if bg == 0 {
		t.Fatal("the background process did not start")
	}
	if n := killMarked(value); n != 1 {
		t.Errorf("killMarked found %d processes, want 1 (env -i hides the other)", n)
	}
	marked.Wait()
	if !pidGone(bg, 5*time.Second) {
		t.Errorf("background process %d of the marked group survived", bg)
	}
	if syscall.Kill(other.Process.Pid, 0) != nil {
		t.Error("an unmarked process was killed")
	}
}

// pidGone waits until pid no longer runs (gone or a zombie).
func pidGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
