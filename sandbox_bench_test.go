// sandbox_bench_test.go measures what the sandbox adds to one tool start,
// the way the launcher does it (a restricted thread) against the other way
// (a re-exec of the binary that restricts itself and execs the command).
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runSandboxReexec is the re-exec way of entering the sandbox, for
// BenchmarkSandboxToolStart: dirs are the session's writable directories,
// separated by ":"; it confines itself and execs its last argument.
func runSandboxReexec(dirs string) int {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runtime.LockOSThread()
	abi, err := probeLandlock()
	if err != nil {
		fail(err)
	}
	ruleset, err := landlockRuleset(abi, workspaceConfig(), strings.Split(dirs, ":"))
	if err != nil {
		fail(err)
	}
	if err := restrictThread(ruleset, nil); err != nil {
		fail(err)
	}
	args := os.Args[len(os.Args)-1:]
	path, err := exec.LookPath(args[0])
	if err != nil {
		fail(err)
	}
	fail(syscall.Exec(path, args, os.Environ()))
	return 1
}

// BenchmarkSandboxToolStart starts and waits for `true` three ways in turn,
// so that the machine's load weighs on each alike: unconfined, through the
// launcher with the workspace profile (in-thread), and by the re-exec way.
// It reports the mean of each in ms per start, and what each way adds.
func BenchmarkSandboxToolStart(b *testing.B) {
	ws := b.TempDir()
	sb := newTestSandbox(b, workspaceConfig(), ws)
	exe := testExe(b)
	// A workspace holding a repository: its hooks, config and gitdir are
	// mounted by the mount stage at every start (sandbox_stage.go).
	repo := b.TempDir()
	mustWrite(b, filepath.Join(repo, ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\n")
	mustWrite(b, filepath.Join(repo, ".git", "config"), "[core]\n")
	staged := newTestSandbox(b, workspaceConfig(), repo)
	if len(staged.protect.Mounts) == 0 {
		b.Fatal("the repository's workspace has no mounts to make")
	}
	// ACPGUARD_BENCH_STAGE names a release build to run as the stage: the
	// test binary's own start is slower than acpguard's.
	if exe := os.Getenv("ACPGUARD_BENCH_STAGE"); exe != "" {
		saved := stageExecutable
		stageExecutable = exe
		b.Cleanup(func() { stageExecutable = saved })
	}
	stagedCmd := func() *exec.Cmd {
		cmd := exec.Command("true")
		cmd.Env = sandboxTestEnv.childEnv(staged.env()...)
		cmd.Dir = repo
		return cmd
	}
	trueCmd := func() *exec.Cmd {
		cmd := exec.Command("true")
		cmd.Env = sandboxTestEnv.childEnv(sb.env()...)
		cmd.Dir = ws
		return cmd
	}
	reexecCmd := func() *exec.Cmd {
		cmd := exec.Command(exe, "--", "true")
		cmd.Env = sandboxTestEnv.childEnv(sb.env(roleEnv("sandbox-reexec", ws, sb.tempDir()))...)
		cmd.Dir = ws
		return cmd
	}
	ways := []struct {
		name   string
		cmd    func() *exec.Cmd
		launch func(*exec.Cmd) error
		total  time.Duration
	}{
		{"off", trueCmd, (*sandboxSession)(nil).start, 0},
		{"in-thread", trueCmd, sb.start, 0},
		{"re-exec", reexecCmd, (*sandboxSession)(nil).start, 0},
		{"mount-stage", stagedCmd, staged.start, 0},
	}
	n := 0
	for b.Loop() {
		for i := range ways {
			w := &ways[i]
			cmd := w.cmd()
			t0 := time.Now()
			if err := w.launch(cmd); err != nil {
				b.Fatalf("%s: %v", w.name, err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatalf("%s: %v", w.name, err)
			}
			w.total += time.Since(t0)
		}
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	for _, w := range ways {
		b.ReportMetric(ms(w.total), w.name+"-ms/start")
	}
	b.ReportMetric(ms(ways[1].total-ways[0].total), "in-thread-added-ms")
	b.ReportMetric(ms(ways[2].total-ways[0].total), "re-exec-added-ms")
	b.ReportMetric(ms(ways[3].total-ways[1].total), "mount-stage-over-in-thread-ms")
	b.ReportMetric(float64(len(staged.protect.Mounts)), "mounts")
}

// BenchmarkSandboxRestrictThread measures the launcher's own work without a
// process: a fresh goroutine locks its thread, restricts it, and ends it.
func BenchmarkSandboxRestrictThread(b *testing.B) {
	sb := newTestSandbox(b, workspaceConfig(), b.TempDir())
	for b.Loop() {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			done <- restrictThread(sb.ruleset, sb.filter)
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSandboxRuleset measures making a session's ruleset, which each
// session pays once, at its first process start: the whole filesystem
// readable, and the same with a hidden file two levels below the temp
// directory, which makes a rule of each entry of every directory on its
// way (sandbox_hide.go). It reports how many entries that was.
func BenchmarkSandboxRuleset(b *testing.B) {
	abi := requireLandlock(b)
	ws := b.TempDir()
	hidden := filepath.Join(b.TempDir(), "dir", "host-token")
	entries := 0
	for d := filepath.Dir(hidden); d != "/"; d = filepath.Dir(d) {
		if es, err := os.ReadDir(filepath.Dir(d)); err == nil {
			entries += len(es)
		}
	}
	for _, tt := range []struct {
		name string
		hide []string
	}{{"whole", nil}, {"hide", []string{hidden}}} {
		b.Run(tt.name, func(b *testing.B) {
			cfg := workspaceConfig()
			cfg.Hide = tt.hide
			for b.Loop() {
				r, err := landlockRuleset(abi, cfg, []string{ws})
				if err != nil {
					b.Fatal(err)
				}
				syscall.Close(r)
			}
			if tt.hide != nil {
				b.ReportMetric(float64(entries), "entries")
			}
		})
	}
}
