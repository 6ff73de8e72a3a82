// config_usage_test.go tests the top-level usage: it lists every command,
// "provider check" included, and each one's --help exists.
package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestMainUsageListsEveryCommand(t *testing.T) {
	code, stdout, _ := runAcpguard(t, []string{"help"})
	if code != 0 {
		t.Fatalf("help exit %d", code)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^  acpguard ([a-z]+(?: [a-z]+)?) +`).FindAllStringSubmatch(stdout, -1) {
		listed = append(listed, strings.TrimSpace(m[1]))
	}
	want := []string{"serve", "acp", "run", "provider", "provider check", "demo", "log", "doctor", "completion", "version", "help"}
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Errorf("usage lists %q, want %q:\n%s", listed, want, stdout)
	}
	for _, cmd := range want[:len(want)-1] {
		args := append(strings.Fields(cmd), "--help")
		code, out, stderr := runAcpguard(t, args)
		if code != 0 || !strings.HasPrefix(out, "Usage: acpguard "+cmd) {
			t.Errorf("%q: exit %d, stdout %.80q, stderr %.200q", args, code, out, stderr)
		}
	}
}
