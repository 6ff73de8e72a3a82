package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The bash completion, sourced in a real bash, completes subcommands and
// each one's flags as its --help lists them; every flag it offers is one
// the command accepts.
func TestCompletionBash(t *testing.T) {
	code, script, stderr := runAcpguard(t, []string{"completion", "bash"})
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"acpguard", "pro"}, "provider"},
		{[]string{"acpguard", "serve", "--sandbox-p"}, "--sandbox-private --sandbox-protect"},
		{[]string{"acpguard", "provider", "--tls-"}, "--tls-cert --tls-key"},
		{[]string{"acpguard", "provider", "check", "--ca"}, "--cases"},
		{[]string{"acpguard", "log", "--s"}, "--session --since --summary"},
		{[]string{"acpguard", "completion", "f"}, "fish"},
	} {
		cmd := exec.Command("bash", "-c", script+"\nCOMP_WORDS=("+strings.Join(tt.words, " ")+"); COMP_CWORD="+
			strconv.Itoa(len(tt.words)-1)+"; _acpguard; echo \"${COMPREPLY[*]}\"")
		out, err := cmd.Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
			t.Errorf("%v: completions %q (%v), want %q", tt.words, got, err, tt.want)
		}
	}
	for _, c := range completedCommands() {
		if c.usage == "" || c.name == "completion" {
			continue
		}
		for _, f := range usageFlags(c.usage) {
			if f == "--help" {
				continue
			}
			// "=x" then --help: a value flag takes x and help ends the parse, a
			// switch refuses x; neither starts the command.
			_, _, stderr := runAcpguard(t, append(strings.Fields(c.name), f+"=x", "--help"))
			if strings.Contains(stderr, "unknown flag") {
				t.Errorf("%s: completion offers %s, which the command refuses: %s", c.name, f, stderr)
			}
		}
	}
}

func TestCompletionShells(t *testing.T) {
	for _, shell := range completionShells {
		code, out, _ := runAcpguard(t, []string{"completion", shell})
		if code != 0 || !strings.HasPrefix(out, "#") || !strings.Contains(out, "sandbox-protect") {
			t.Errorf("%s: exit %d, script %.80q", shell, code, out)
		}
		if path, err := exec.LookPath(shell); err == nil && shell != "bash" {
			check := exec.Command(path, "-n")
			if shell == "fish" {
				check = exec.Command(path, "--no-execute")
			}
			check.Stdin = strings.NewReader(out)
			if msg, err := check.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v: %s", shell, err, msg)
			}
		}
	}
	if code, _, stderr := runAcpguard(t, []string{"completion", "ksh"}); code != exitUsage || !strings.Contains(stderr, `completion "ksh": want one of bash, zsh, fish`) {
		t.Errorf("completion ksh: exit %d, stderr %q", code, stderr)
	}
}
