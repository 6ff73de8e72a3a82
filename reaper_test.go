// reaper_test.go checks that what a SIGKILLed ACP child leaves behind is
// ended and reaped, whatever its environment or session, that nothing else
// is, and that a child's environment carries no mark.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procGoneOrReaped waits until the process p names has no /proc entry left,
// not even a zombie's (its pid may name a newer process by then).
func procGoneOrReaped(p procInfo, within time.Duration) bool {
	deadline := time.Now().Add(testTimeout(within))
	for time.Now().Before(deadline) {
		now, err := readProcStat(p.pid)
		if err != nil || now.start != p.start {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// startUnrelated starts a process of the test's own, as another part of the
// program that hosts serve would: os/exec waits for it, nobody else may.
func startUnrelated(t *testing.T, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestReaperEndsWhatAKilledChildLeft: an ACP child killed with SIGKILL
// leaves a background tool's process group, a process that left it with
// setsid, one that also cleared its environment, one that only cleared it,
// and a setsid escaper whose parent exited at once (re-parented to serve
// while the child still lived). All are ended, and those that died as this
// process's children are reaped. Two processes this test started itself,
// after the child, one in a session of its own, run on untouched.
func TestReaperEndsWhatAKilledChildLeft(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: yoloSettings(t)}, quickRaceExit)
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	script := strings.Join([]string{
		"echo $PPID > acp.pid",
		"sleep 300 & echo $! > group.pid",
		// Each escaper writes its pid once it has its own session.
		"setsid sh -c 'echo $$ > setsid.pid; exec sleep 300' &",
		"env -i setsid sh -c 'echo $$ > cleared-setsid.pid; exec sleep 300' &",
		"env -i sleep 300 & echo $! > cleared.pid",
		"( setsid sh -c 'echo $$ > orphan.pid; exec sleep 300' & )",
		"echo $$ > leader.pid",
		"exec sleep 300",
	}, "\n")
	td.runTurn(t, id, shellCall(script, true))
	left := map[string]procInfo{}
	for _, name := range []string{"group", "setsid", "cleared-setsid", "cleared", "orphan", "leader"} {
		pid := readPIDFile(t, filepath.Join(ws, name+".pid"))
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		left[name] = mustProcStat(t, pid)
	}
	child := readPIDFile(t, filepath.Join(ws, "acp.pid"))
	if p := mustProcStat(t, child); p.ppid != os.Getpid() || p.sid != child {
		t.Fatalf("ACP child %d: parent %d, session %d; want this process and a session of its own", child, p.ppid, p.sid)
	}
	// The orphan is re-parented to serve as soon as its subshell exits.
	deadline := time.Now().Add(testTimeout(30 * time.Second))
	for parentPID(left["orphan"].pid) != os.Getpid() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := parentPID(left["orphan"].pid); got != os.Getpid() {
		t.Fatalf("orphan %d has parent %d, want serve %d (child subreaper)", left["orphan"].pid, got, os.Getpid())
	}
	if s := left["setsid"]; s.sid != s.pid || left["cleared-setsid"].sid == child {
		t.Fatalf("escapers did not leave the child's session: %+v %+v", s, left["cleared-setsid"])
	}
	plain := startUnrelated(t, nil)
	ownSession := startUnrelated(t, &syscall.SysProcAttr{Setsid: true})

	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// session_died is published after the reaper has run.
	readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	for name, p := range left {
		if !procGoneOrReaped(p, 30*time.Second) {
			now, _ := readProcStat(p.pid)
			t.Errorf("%s process %d is still there: %+v", name, p.pid, now)
		}
	}
	for _, cmd := range []*exec.Cmd{plain, ownSession} {
		if !processAlive(cmd.Process.Pid) {
			t.Errorf("unrelated process %d of the test was ended", cmd.Process.Pid)
		}
	}
	if !strings.Contains(td.stderr.String(), "ended processes the ACP child left behind") {
		t.Errorf("no warning about the ended processes:\n%s", td.stderr.String())
	}
}

// TestServeOffModeChildEnvironment: with the guard off, an ACP child's start
// environment (what the kernel shows in /proc/<pid>/environ) is exactly the
// scrubbed start environment of serve: nothing is added.
func TestServeOffModeChildEnvironment(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the ACP child is not dumpable: only root reads its /proc/<pid>/environ")
	}
	// No model key: it is the one entry an ACP child may get on top.
	t.Setenv(envModelKey, "")
	os.Unsetenv(envModelKey)
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: yoloSettings(t)}, quickRaceExit)
	id := td.newSession(t, "")
	td.runTurn(t, id, shellCall("echo $PPID > acp.pid", false))
	child := readPIDFile(t, filepath.Join(ws, "acp.pid"))
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	// What startTestDaemon gives serve as its start environment.
	want := newProcEnv(append(append(os.Environ(), roleEnv("main")), quickRaceExit)).childEnv()
	if !slices.Equal(got, want) {
		for _, kv := range got {
			if !slices.Contains(want, kv) {
				t.Errorf("child environment has %q, which serve's scrubbed environment does not", kv)
			}
		}
		for _, kv := range want {
			if !slices.Contains(got, kv) {
				t.Errorf("child environment lacks %q", kv)
			}
		}
		if !t.Failed() {
			t.Errorf("child environment is in another order:\n%q\nwant\n%q", got, want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// tty tpgid flags, eight counters, priority nice threads itrealvalue
	// starttime, and more.
	tail := " 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"
	tests := []struct {
		line string
		want procInfo
		ok   bool
	}{
		{"12 (sleep) S 1 12 12" + tail, procInfo{pid: 12, ppid: 1, pgid: 12, sid: 12, state: 'S', start: 4242}, true},
		// comm is the process's own choice: spaces and parentheses.
		{"7 (a) Z 9 (b) ) R 3 4 5" + tail, procInfo{pid: 7, ppid: 3, pgid: 4, sid: 5, state: 'R', start: 4242}, true},
		{"7 () T 3 4 5" + tail, procInfo{pid: 7, ppid: 3, pgid: 4, sid: 5, state: 'T', start: 4242}, true},
		{"12 (sleep) S 1 12 12 0 0", procInfo{}, false},
		{"12 sleep S 1 12 12" + tail, procInfo{}, false},
		{"x (sleep) S 1 12 12" + tail, procInfo{}, false},
		{"12 (sleep) S -1 12 12" + tail, procInfo{}, false},
		{"12 (sleep) SS 1 12 12" + tail, procInfo{}, false},
		{"", procInfo{}, false},
	}
	for _, tt := range tests {
		got, err := parseProcStat([]byte(tt.line))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseProcStat(%q) = %+v, %v; want %+v, ok %v", tt.line, got, err, tt.want, tt.ok)
		}
	}
	self := mustProcStat(t, os.Getpid())
	if self.ppid != os.Getppid() || self.pgid != syscall.Getpgrp() || self.sid != ownSession() || self.state != 'R' && self.state != 'S' {
		t.Errorf("this process reads as %+v", self)
	}
}

// BenchmarkReaperScan is one look of the reaper: every process's stat line
// and this process's pidfds. A child's end costs one or two of them when it
// left nothing behind.
func BenchmarkReaperScan(b *testing.B) {
	for b.Loop() {
		if len(scanProcs()) == 0 {
			b.Fatal("no processes")
		}
		heldPidfds()
	}
	b.ReportMetric(float64(len(scanProcs())), "procs")
}
