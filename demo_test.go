// demo_test.go runs "acpguard demo" as a user would and reads its transcript.
package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDemoTranscript(t *testing.T) {
	code, stdout, stderr := runAcpguard(t, []string{"demo"})
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if got := warningLines(stdout + stderr); len(got) != 0 {
		t.Errorf("the demo warned of no guard: %q", got)
	}
	want := []string{
		`(?m)^1\. The model writes hello\.txt`,
		`(?m)^   decision   allowed by the provider in \d+ µs$`,
		`(?m)^   on disk    hello\.txt exists \(27 bytes\)$`,
		`(?m)^   decision   denied by the provider in \d+ µs$`,
		`(?m)^   result     failed: Network downloads and destructive shell commands are not allowed by policy$`,
		`(?m)^   on disk    installer\.sh does not exist$`,
		`(?m)^   decision   none: the provider call failed \(transport\) after \d+ µs, so the call is denied$`,
		`(?m)^   result     failed: Tool invocation guard failed$`,
		`(?m)^   on disk    after-stop\.txt does not exist$`,
	}
	for _, re := range want {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("transcript lacks %s\n%s", re, stdout)
		}
	}
	ws := regexp.MustCompile(`(?m)^  workspace  (\S+)$`).FindStringSubmatch(stdout)
	if ws == nil {
		t.Fatalf("no workspace line:\n%s", stdout)
	}
	if _, err := os.Stat(ws[1]); !os.IsNotExist(err) {
		t.Errorf("the demo left its workspace %s behind (%v)", ws[1], err)
	}
}

func TestDemoKeep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"demo", "--keep"})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var transcript strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		transcript.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
			break
		}
	}
	for _, s := range []string{"on disk    hello.txt exists", "on disk    after-stop.txt does not exist",
		"The provider is back on http://127.0.0.1:", `curl -N -H "$H" http://127.0.0.1:`, "/events &", "/prompt -H 'Content-Type: application/json'"} {
		if !strings.Contains(transcript.String(), s) {
			t.Errorf("--keep output lacks %q:\n%s", s, transcript.String())
		}
	}
	// The kept stack decides again: a call driven by hand is allowed and runs.
	ws := regexp.MustCompile(`(?m)^  workspace  (\S+)$`).FindStringSubmatch(transcript.String())
	prompt := regexp.MustCompile(`curl -s -H "\$H" -X POST (http://127\.0\.0\.1:\d+/session/[^/]+/prompt)`).FindStringSubmatch(transcript.String())
	if ws == nil || prompt == nil {
		t.Fatalf("no workspace or prompt URL in:\n%s", transcript.String())
	}
	body := `{"prompt":[{"type":"text","text":"call write_file {\"file_path\":\"kept.txt\",\"content\":\"x\"}"}]}`
	tokenFile := regexp.MustCompile(`(?m)^  host token (\S+)$`).FindStringSubmatch(transcript.String())
	if tokenFile == nil || !strings.Contains(transcript.String(), `H="Authorization: Bearer $(cat `+tokenFile[1]+`)"`) {
		t.Fatalf("no host token file, or curl commands without it, in:\n%s", transcript.String())
	}
	hostToken, err := readSecretFile(flagHostTokenFile, tokenFile[1])
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Post(prompt[1], "application/json", strings.NewReader(body)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a prompt without the host token: %v %v, want 401", resp, err)
	}
	req, _ := http.NewRequest("POST", prompt[1], strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+hostToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(testTimeout(10 * time.Second))
	for !fileExists(filepath.Join(ws[1], "kept.txt")) {
		if time.Now().After(deadline) {
			t.Fatalf("the call driven by hand did not write kept.txt (prompt answered %d)", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("demo --keep after SIGINT: %v", err)
	}
}
