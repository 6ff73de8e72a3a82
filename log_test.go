package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTestLogs writes a decision log and an audit log as serve and the
// provider write them, one decision per entry of calls: "allow", "deny" or
// a failure category (no provider answer, so no audit line). It returns
// the two files.
func writeTestLogs(t *testing.T, calls []string) (decisions, audit string) {
	t.Helper()
	dir := t.TempDir()
	decisions, audit = filepath.Join(dir, "decisions.jsonl"), filepath.Join(dir, "audit.jsonl")
	dl, err := openLineLog(decisions)
	if err != nil {
		t.Fatal(err)
	}
	al, err := openLineLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.close()
	defer al.close()
	prov := &providerServer{audit: al}
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i, c := range calls {
		tool := []string{toolWriteFile, toolShell}[i%2]
		session := fmt.Sprintf("s%d", i%3)
		rec := decisionRecord{
			Time: start.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano), SessionID: session, PromptID: "p",
			ToolCallID: fmt.Sprintf("c%d", i), RequestID: fmt.Sprintf("r%d", i), ToolName: tool, Outcome: c,
		}
		switch c {
		case "allow", "deny":
			arec := providerAuditRecord{RequestID: rec.RequestID, SessionID: session, PromptID: "p", ToolCallID: rec.ToolCallID, ToolName: tool, Decision: c, Outcome: outcomeAllowed, Rule: i}
			rec.Outcome = outcomeAllowed
			if c == "deny" {
				arec.Outcome, arec.Reason, rec.Outcome, rec.Reason = outcomeDenied, "No \x1b[31mshell", outcomeDenied, "No \x1b[31mshell"
			}
			if err := prov.record(&arec); err != nil {
				t.Fatal(err)
			}
		default:
			rec.RequestID, rec.Reason = "", guardFailedReason
		}
		if err := (&decisionLog{lines: dl}).write(rec); err != nil {
			t.Fatal(err)
		}
	}
	return decisions, audit
}

func TestLogSummaryCountsEveryDecisionOnce(t *testing.T) {
	calls := []string{"allow", "deny", "allow", failTimeout, "deny", "allow", failTransport}
	decisions, audit := writeTestLogs(t, calls)
	// A torn line, as an old acpguard left on a full disk, is skipped.
	f, err := os.OpenFile(decisions, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-12-06T09:01:00Z","sess` + "\n")
	f.Close()

	code, stdout, stderr := runAcpguard(t, []string{"log", "--summary", decisions, audit})
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	want := strings.Join([]string{
		fmt.Sprintf("%-40s %8s %8s %8s", "tool", "allowed", "denied", "failed"),
		fmt.Sprintf("%-40s %8d %8d %8d", toolShell, 1, 1, 1),
		fmt.Sprintf("%-40s %8d %8d %8d", toolWriteFile, 2, 1, 1),
		"",
		"top deny reasons",
		fmt.Sprintf("%8d  %s", 2, `No \x1b[31mshell`),
		"",
		fmt.Sprintf("%-40s %8s %8s %8s", "session", "allowed", "denied", "failed"),
		fmt.Sprintf("%-40s %8d %8d %8d", "s0", 1, 0, 2),
		fmt.Sprintf("%-40s %8d %8d %8d", "s1", 0, 2, 0),
		fmt.Sprintf("%-40s %8d %8d %8d", "s2", 2, 0, 0),
		"",
	}, "\n")
	if stdout != want {
		t.Errorf("summary:\n%s\nwant:\n%s", stdout, want)
	}
	if wantErr := fmt.Sprintf("acpguard log: %q line %d: not a JSON record: skipped\n", decisions, len(calls)+1); stderr != wantErr {
		t.Errorf("stderr %q, want %q", stderr, wantErr)
	}
}

func TestLogJoinsAndFilters(t *testing.T) {
	decisions, audit := writeTestLogs(t, []string{"allow", "deny", failTimeout})
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{decisions, audit}, []string{
			"2026-12-06T09:00:00Z allowed   write_file session=s0 prompt=p call=c0 request=r0 rule=0",
			`2026-12-06T09:00:01Z denied    run_shell_command session=s1 prompt=p call=c1 request=r1 rule=1 reason="No \x1b[31mshell"`,
			`2026-12-06T09:00:02Z timeout   write_file session=s2 prompt=p call=c2 reason="Tool invocation guard failed"`,
		}},
		// Flags after the files; the audit log alone.
		{[]string{audit, "--outcome", "denied"}, []string{
			`2026-12-06T09:00:01Z denied    run_shell_command session=s1 prompt=p call=c1 request=r1 rule=1 reason="No \x1b[31mshell"`,
		}},
		{[]string{"--outcome=failed", decisions}, []string{
			`2026-12-06T09:00:02Z timeout   write_file session=s2 prompt=p call=c2 reason="Tool invocation guard failed"`,
		}},
		{[]string{decisions, "--tool", "write_file", "--session", "s0"}, []string{
			"2026-12-06T09:00:00Z allowed   write_file session=s0 prompt=p call=c0 request=r0",
		}},
		{[]string{decisions, "--since", "2026-12-06T09:00:02Z"}, []string{
			`2026-12-06T09:00:02Z timeout   write_file session=s2 prompt=p call=c2 reason="Tool invocation guard failed"`,
		}},
	}
	for _, tt := range tests {
		code, stdout, stderr := runAcpguard(t, append([]string{"log"}, tt.args...))
		if tt.args[0] == audit {
			// The provider stamps its own time: compare the rest.
			var b strings.Builder
			for line := range strings.Lines(stdout) {
				_, rest, _ := strings.Cut(line, " ")
				b.WriteString("2026-12-06T09:00:01Z " + rest)
			}
			stdout = b.String()
		}
		if want := strings.Join(tt.want, "\n") + "\n"; code != 0 || stdout != want || stderr != "" {
			t.Errorf("log %v: exit %d, stdout\n%s\nwant\n%s\nstderr %q", tt.args, code, stdout, want, stderr)
		}
	}
}

func TestLogUsage(t *testing.T) {
	tests := []struct {
		args []string
		err  string
	}{
		{nil, `no log file given: name serve's --decision-log file, the provider's --audit file, or both; run "acpguard log --help"`},
		{[]string{"f", "--bogus"}, `unknown flag "--bogus"; run "acpguard log --help"`},
		{[]string{"f", "--since", "yesterday"}, `--since "yesterday": want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (90m, 24h)`},
		{[]string{"f", "--outcome", "deny"}, `--outcome "deny": want one of allowed, denied, failed, timeout`},
		{[]string{"f", "--follow", "--summary"}, "--follow and --summary: both given"},
	}
	for _, tt := range tests {
		code, _, stderr := runAcpguard(t, append([]string{"log"}, tt.args...))
		if code != exitUsage || !strings.HasPrefix(stderr, "acpguard: error: "+tt.err) {
			t.Errorf("log %v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.err)
		}
	}
}

// --follow prints a record appended after the start, and a line being
// written only once its newline arrives.
func TestLogFollow(t *testing.T) {
	decisions, _ := writeTestLogs(t, []string{"allow"})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(30*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"log", "--follow", decisions})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.Contains(lines.Text(), "request=r0") {
		t.Fatalf("first line %q, %v", lines.Text(), lines.Err())
	}
	f, err := os.OpenFile(decisions, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := string(appendDecisionRecord(nil, decisionRecord{Time: "2026-12-06T10:00:00Z", ToolName: "edit", RequestID: "late", Outcome: outcomeAllowed}))
	half := len(line) / 2
	f.WriteString(line[:half])
	f.WriteString(line[half:])
	if !lines.Scan() || lines.Text() != "2026-12-06T10:00:00Z allowed   edit session= prompt= call= request=late" {
		t.Fatalf("followed line %q, %v", lines.Text(), lines.Err())
	}
}

// Over the logs of a real run (serve in required mode, the reference
// provider on examples/policy.json, allowed and denied calls), acpguard log
// --summary counts each decision once, both logs joined; with
// --decision-log-arguments each decision line carries the arguments.
func TestLogSummaryOfARealRun(t *testing.T) {
	dir := t.TempDir()
	audit, decisions := filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "decisions.jsonl")
	prov := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit})
	ws := t.TempDir()
	sp := startServe(t, []string{"--workspace", ws, "--decision-log", decisions, "--decision-log-arguments", "--settings", yoloSettings(t),
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.url},
		envGuardToken+"="+providerTestToken)
	id := sp.newSession(t, "")
	const allowed, denied = 3, 2
	for i := range allowed {
		sp.runTurn(t, id, writeCall(fmt.Sprintf("f%d.txt", i)))
	}
	for range denied {
		sp.runTurn(t, id, `call run_shell_command {"command":"sudo true"}`)
	}
	// With the arguments in it, the decision log is hidden from tools: an
	// allowed cat of it shows none of its lines.
	_, evs := sp.runTurn(t, id, `call run_shell_command {"command":"cat `+decisions+`"}`)
	for _, ev := range evs {
		if strings.Contains(string(ev.data), "argumentsSha256") {
			t.Errorf("a tool read the decision log: %s", ev.data)
		}
	}
	sp.stop()
	code, stdout, stderr := runAcpguard(t, []string{"log", "--summary", decisions, audit})
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("%-40s %8d %8d %8d", toolShell, 1, denied, 0),
		fmt.Sprintf("%-40s %8d %8d %8d", toolWriteFile, allowed, 0, 0),
		fmt.Sprintf("%8d  %s", denied, "Destructive and network shell commands are not allowed by policy"),
		fmt.Sprintf("%-40s %8d %8d %8d", id, allowed+1, denied, 0),
	} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	data, err := os.ReadFile(decisions)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `"arguments":{`); n != allowed+denied+1 {
		t.Errorf("%d decision lines carry arguments, want %d:\n%s", n, allowed+denied+1, data)
	}
}
