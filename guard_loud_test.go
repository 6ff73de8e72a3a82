// guard_loud_test.go tests that off mode is loud: serve and acp print one
// warning line at start unless off was chosen explicitly, serve's children
// stay quiet, and /capabilities names the guard mode.
package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

const unguardedWarningText = "warning: no external tool guard: every tool call the approval mode allows runs without a policy decision (start a provider and pass --external-tool-guard-mode required; pass --external-tool-guard-mode=off to silence this)"

// warningLines returns the lines of stderr that carry the unguarded warning.
func warningLines(stderr string) []string {
	var out []string
	for line := range strings.SplitSeq(stderr, "\n") {
		if strings.Contains(line, "no external tool guard") {
			out = append(out, line)
		}
	}
	return out
}

func TestServeWarnsOnceWhenUnguarded(t *testing.T) {
	ws := t.TempDir()
	sp := startServe(t, []string{"--workspace", ws, "--settings", yoloSettings(t)})
	var caps capabilitiesBody
	if err := decodeStrict(sp.do(t, "GET", "/capabilities", "").body, &caps); err != nil {
		t.Fatal(err)
	}
	if caps.Guard != "off" {
		t.Errorf("capabilities guard = %q, want off", caps.Guard)
	}
	// Two sessions' children start: serve warned, they do not.
	for range 2 {
		id := sp.newSession(t, "")
		sp.runTurn(t, id, `call write_file {"file_path":"a.txt","content":"x"}`)
	}
	got := warningLines(sp.stderr.String())
	if len(got) != 1 || got[0] != "acpguard serve: "+unguardedWarningText {
		t.Errorf("warning lines = %q, want exactly %q; stderr:\n%s", got, "acpguard serve: "+unguardedWarningText, sp.stderr.String())
	}
}

func TestServeExplicitOffIsQuiet(t *testing.T) {
	ws := t.TempDir()
	for _, flag := range [][]string{{"--external-tool-guard-mode=off"}, {"--external-tool-guard-mode", "off"}} {
		sp := startServe(t, append([]string{"--workspace", ws, "--settings", yoloSettings(t)}, flag...))
		id := sp.newSession(t, "")
		sp.runTurn(t, id, `call write_file {"file_path":"a.txt","content":"x"}`)
		if got := warningLines(sp.stderr.String()); len(got) != 0 {
			t.Errorf("%q: warning lines = %q, want none", flag, got)
		}
		sp.stop()
	}
}

func TestServeCapabilitiesGuardRequired(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, args, tokenEnv)
	var caps capabilitiesBody
	if err := decodeStrict(sp.do(t, "GET", "/capabilities", "").body, &caps); err != nil {
		t.Fatal(err)
	}
	if caps.Guard != "required" {
		t.Errorf("capabilities guard = %q, want required", caps.Guard)
	}
	if got := warningLines(sp.stderr.String()); len(got) != 0 {
		t.Errorf("required mode warned: %q", got)
	}
}

func TestACPWarnsWhenUnguarded(t *testing.T) {
	home := "HOME=" + t.TempDir()
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"acp"}, 1},
		{[]string{"acp", "--external-tool-guard-mode=off"}, 0},
		{[]string{"acp", "--external-tool-guard-mode", "off"}, 0},
	}
	for _, tt := range tests {
		code, _, stderr := runAcpguard(t, tt.args, home)
		if code != 0 {
			t.Fatalf("%q: exit %d, stderr:\n%s", tt.args, code, stderr)
		}
		got := warningLines(stderr)
		if len(got) != tt.want || (tt.want == 1 && got[0] != "acpguard acp: "+unguardedWarningText) {
			t.Errorf("%q: warning lines = %q, want %d; stderr:\n%s", tt.args, got, tt.want, stderr)
		}
	}
}

// With --log-format json the warning is one JSON log record.
func TestACPWarnsUnguardedAsJSONLog(t *testing.T) {
	code, _, stderr := runAcpguard(t, []string{"acp", "--log-format", "json", "--log-level", "error"}, "HOME="+t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	got := warningLines(stderr)
	if len(got) != 1 {
		t.Fatalf("warning lines = %q, want one; stderr:\n%s", got, stderr)
	}
	var rec struct{ Level, Msg, Command string }
	if err := json.Unmarshal([]byte(got[0]), &rec); err != nil || rec.Level != "WARN" || rec.Command != "acp" ||
		rec.Msg != strings.TrimPrefix(unguardedWarningText, "warning: ") {
		t.Errorf("warning record %s (%v)", got[0], err)
	}
}
