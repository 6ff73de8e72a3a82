// readme_test.go keeps the README true: its quickstart's shell blocks run
// step by step against the built binary, and docs/architecture.md's code map
// lists every source file.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickstartBlocks returns the README's ```sh quickstart blocks in order,
// their list indentation removed.
func quickstartBlocks(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	indent, in := "", false
	for line := range strings.Lines(string(readme)) {
		line = strings.TrimRight(line, "\n")
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case !in && trimmed == "```sh quickstart":
			in, indent, cur = true, line[:len(line)-len(trimmed)], nil
		case in && line == indent+"```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	if in {
		t.Fatal("README: a quickstart block is not closed")
	}
	return blocks
}

// TestREADMEQuickstart runs the quickstart as a newcomer would, in one shell,
// block by block, with free ports for 8787 and 4170 and the test binary as
// ./acpguard. Between blocks it waits for what a person would see first (the
// listener, the permission request, the end of the turn); the blocks
// themselves are run as written.
func TestREADMEQuickstart(t *testing.T) { runQuickstart(t, false) }

// TestREADMEQuickstartPastedAtOnce runs every block but the stop step as
// one paste, with no wait of the test's between them: the README's own
// waits must carry it.
func TestREADMEQuickstartPastedAtOnce(t *testing.T) { runQuickstart(t, true) }

func runQuickstart(t *testing.T, pasted bool) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	blocks := quickstartBlocks(t)
	if len(blocks) < 8 {
		t.Fatalf("README has %d quickstart blocks, want the whole walkthrough", len(blocks))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "acpguard")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec "+shellQuote(exe)+` "$@"`+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	provPort, servePort := freeLoopbackPort(t), freeLoopbackPort(t)
	subst := strings.NewReplacer("./acpguard", bin, "127.0.0.1:8787", "127.0.0.1:"+provPort, "127.0.0.1:4170", "127.0.0.1:"+servePort, "--port 4170", "--port "+servePort)

	markR, markW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer markR.Close()
	var out syncBuffer
	sh := exec.Command("bash", "--norc", "--noprofile")
	sh.Env = append(os.Environ(), roleEnv("main"), "GORACE=atexit_sleep_ms=0")
	sh.Stdout, sh.Stderr = &out, &out
	sh.ExtraFiles = []*os.File{markW}
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	markW.Close()
	t.Cleanup(func() {
		stdin.Close()
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		sh.Wait()
	})
	marks := bufio.NewScanner(markR)
	markLines := make(chan string)
	go func() {
		for marks.Scan() {
			markLines <- marks.Text()
		}
		close(markLines)
	}()
	// run sends script to the shell and returns its exit status and $D.
	run := func(step int, script string) string {
		t.Helper()
		fmt.Fprintf(stdin, "%s\nprintf '__done %%s %%s\\n' \"$?\" \"$D\" >&3\n", script)
		select {
		case line, ok := <-markLines:
			if !ok {
				t.Fatalf("step %d: the shell ended\n%s", step, out.String())
			}
			return line
		case <-time.After(testTimeout(30 * time.Second)):
			t.Fatalf("step %d did not finish:\n%s\noutput:\n%s", step, script, out.String())
		}
		return ""
	}
	var dir string
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	waitFor := func(step int, what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(testTimeout(20 * time.Second))
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("before step %d: no %s\noutput:\n%s\nserve log:\n%s\nevents:\n%s", step, what, out.String(), read("serve.log"), read("events"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	dials := func(port string) func() bool {
		return func() bool {
			c, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				c.Close()
			}
			return err == nil
		}
	}
	votes := 0
	checked := false
	if pasted {
		blocks = []string{strings.Join(blocks[:len(blocks)-1], "\n"), blocks[len(blocks)-1]}
	}
	for i, block := range blocks {
		step := i + 1
		if pasted {
			if strings.Contains(block, `rm -rf "$D"`) {
				checkQuickstartEffects(t, dir, read("decisions.jsonl"), read("events"))
				checked = true
			}
		} else if strings.Contains(block, "R=$(") {
			votes++
			waitFor(step, "permission_request event", func() bool {
				return strings.Count(read("events"), `"type":"permission_request"`) >= votes
			})
		}
		if !pasted && strings.Contains(block, `"$W`) {
			waitFor(step, "turn_complete event", func() bool {
				return strings.Count(read("events"), "event: turn_complete") >= votes
			})
		}
		if !pasted && strings.Contains(block, `rm -rf "$D"`) {
			checkQuickstartEffects(t, dir, read("decisions.jsonl"), read("events"))
			checked = true
		}
		got := strings.Fields(run(step, subst.Replace(block)))
		if len(got) < 2 || got[1] != "0" {
			t.Fatalf("step %d exited %q:\n%s\noutput:\n%s\nserve log:\n%s", step, got, block, out.String(), read("serve.log"))
		}
		if dir == "" {
			if len(got) == 3 {
				dir = got[2]
			}
			if !strings.HasPrefix(dir, "/tmp/") {
				t.Fatalf("step 1 made no workspace under /tmp: %q", dir)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
		}
		switch {
		case pasted:
		case strings.Contains(block, "./acpguard provider"):
			waitFor(step+1, "provider listening", dials(provPort))
		case strings.Contains(block, "./acpguard serve"):
			waitFor(step+1, "serve listening", dials(servePort))
		}
	}
	if !checked {
		t.Fatal("the quickstart has no stop step (rm -rf \"$D\")")
	}
	if left, err := exec.Command("find", dir).CombinedOutput(); err == nil {
		t.Errorf("the stop step left %s:\n%s\noutput:\n%s", dir, left, out.String())
	}
	if !strings.Contains(out.String(), `{"status":"ok"}`) {
		t.Errorf("the quickstart's health check printed no ok:\n%s", out.String())
	}
}

// checkQuickstartEffects: the allowed write happened, the denied command did
// not run, and the provider decided each exactly once.
func checkQuickstartEffects(t *testing.T, dir, decisions, events string) {
	t.Helper()
	if reason := "Destructive and network shell commands are not allowed by policy"; !strings.Contains(events, reason) {
		t.Errorf("the events do not show the policy's reason %q:\n%s", reason, events)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "work", "hello.txt")); err != nil || string(b) != "hello" {
		t.Errorf("the allowed write_file: hello.txt = %q, %v; want \"hello\"", b, err)
	}
	var got []string
	for line := range strings.Lines(decisions) {
		var d struct{ ToolName, Outcome string }
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision log line %q: %v", line, err)
		}
		got = append(got, d.ToolName+" "+d.Outcome)
	}
	if want := []string{"write_file allowed", "run_shell_command denied"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("decisions = %q, want %q", got, want)
	}
}

// TestArchitectureCodeMap: docs/architecture.md's code map names every
// non-test Go file of the package, and no file that is gone.
func TestArchitectureCodeMap(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| ([a-z_]+\.go) \|`).FindAllSubmatch(doc, -1) {
		listed[string(m[1])] = true
	}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if !listed[f] {
			t.Errorf("docs/architecture.md's code map lacks %s", f)
		}
		delete(listed, f)
	}
	for f := range listed {
		t.Errorf("docs/architecture.md's code map lists %s, which does not exist", f)
	}
}

// TestREADMELinks: every relative link of the README and docs/ reaches a
// file, and every #anchor a heading of its file.
func TestREADMELinks(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join("docs", "*.md"))
	link := regexp.MustCompile(`\]\(([^)\s]*)\)`)
	anchors := func(path string) map[string]bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		set := map[string]bool{}
		for line := range strings.Lines(string(b)) {
			if h, ok := strings.CutPrefix(line, "#"); ok {
				h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
				h = regexp.MustCompile("[^a-z0-9 _-]").ReplaceAllString(h, "")
				set[strings.ReplaceAll(h, " ", "-")] = true
			}
		}
		return set
	}
	for _, file := range append([]string{"README.md"}, docs...) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			if path == "" {
				path = file
			} else {
				path = filepath.Join(filepath.Dir(file), path)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", file, target, err)
				continue
			}
			if anchor != "" && !anchors(path)[anchor] {
				t.Errorf("%s: link %q: no such heading in %s", file, target, path)
			}
		}
	}
}
