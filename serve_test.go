// serve_test.go runs "acpguard serve" as a real process with real
// "acpguard acp" children and the scripted model, against a counting
// provider on a loopback socket, as a host and an operator would observe it;
// its start-up and shutdown; and where its host token comes from (the flags
// and the variable, the token file, the generated token, tokenless loopback).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// finalStatus returns the terminal status each toolCallId reached.
func finalStatus(ups []hostToolUpdate) map[string]string {
	out := map[string]string{}
	for _, u := range ups {
		if u.Status == "completed" || u.Status == "failed" {
			out[u.ToolCallID] = u.Status
		}
	}
	return out
}

func TestServeE2EGuardedToolCalls(t *testing.T) {
	prov := newTestProvider(t)
	prov.verdict = func(tool string, args json.RawMessage) (int, bool, string) {
		switch {
		case strings.Contains(string(args), "deny-me"):
			return 200, false, "not this one"
		case strings.Contains(string(args), "break-me"):
			return 500, false, ""
		}
		return 200, true, ""
	}
	ws := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	args, tokenEnv := guardArgs(t, prov, ws, logPath)
	sp := startServe(t, args, tokenEnv)
	id := sp.newSession(t, "")

	// Allowed: one prepare, the executor runs once.
	pid, evs := sp.runTurn(t, id, `call run_shell_command {"command":"echo run >> allowed.count"}`)
	ups := toolUpdates(t, evs)
	if len(ups) == 0 {
		t.Fatalf("no tool updates in %v", evs)
	}
	callID := ups[0].ToolCallID
	if ups[0].SessionUpdate != "tool_call" || finalStatus(ups)[callID] != "completed" {
		t.Errorf("allowed call updates = %+v", ups)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "allowed.count")); string(data) != "run\n" {
		t.Errorf("allowed executor ran %q, want exactly once", data)
	}
	if _, calls := prov.counts(); calls != 1 {
		t.Fatalf("provider saw %d prepares, want 1", calls)
	}
	c := prov.calls[0]
	for k, want := range map[string]string{"sessionId": id, "promptId": pid, "toolCallId": callID, "toolName": "run_shell_command"} {
		if string(c[k]) != strconv.Quote(want) {
			t.Errorf("provider %s = %s, want %q (matching the SSE events)", k, c[k], want)
		}
	}

	// Denied and failed: one prepare each, the executor never runs.
	for _, tt := range []struct{ marker, text string }{
		{"deny-me", "not this one"},
		{"break-me", guardFailedReason},
	} {
		_, calls0 := prov.counts()
		_, evs := sp.runTurn(t, id, `call run_shell_command {"command":"echo run >> `+tt.marker+`.count"}`)
		ups := toolUpdates(t, evs)
		last := ups[len(ups)-1]
		if last.Status != "failed" || !strings.Contains(string(last.RawOutput), errTypeExecutionDenied) || !strings.Contains(string(last.RawOutput), tt.text) {
			t.Errorf("%s: final update = %+v, want failed %s %q", tt.marker, last, errTypeExecutionDenied, tt.text)
		}
		for _, u := range ups {
			if u.Status == "in_progress" {
				t.Errorf("%s: the call reached in_progress", tt.marker)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, tt.marker+".count")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: executor ran (marker file: %v)", tt.marker, err)
		}
		if _, calls := prov.counts(); calls != calls0+1 {
			t.Errorf("%s: provider saw %d prepares, want exactly 1 (no retry)", tt.marker, calls-calls0)
		}
	}

	// Nested and delegated agents are refused before any provider request.
	_, calls0 := prov.counts()
	_, evs = sp.runTurn(t, id, `call agent {"prompt":"do it"}`)
	if ups := toolUpdates(t, evs); len(ups) == 0 || ups[len(ups)-1].Status != "failed" {
		t.Errorf("agent call updates = %+v", ups)
	}
	if _, calls := prov.counts(); calls != calls0 {
		t.Errorf("a nested agent call reached the provider")
	}

	// Every session of the channel is guarded, not just the first.
	id2 := sp.newSession(t, "")
	pid2, _ := sp.runTurn(t, id2, `call run_shell_command {"command":"echo run >> second.count"}`)
	if _, calls := prov.counts(); calls != calls0+1 || string(prov.calls[calls0]["promptId"]) != strconv.Quote(pid2) {
		t.Errorf("second session: provider saw %d new prepares", calls-calls0)
	}

	data, _ := os.ReadFile(logPath)
	var outcomes []string
	for _, rec := range decisions(t, string(data)) {
		outcomes = append(outcomes, rec.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "allowed denied http_status allowed" {
		t.Errorf("decision log outcomes = %q", got)
	}
}

func TestServeE2ETokenNeverReachesChildren(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	const hostToken = "host-token-must-not-leak"
	sp := startServe(t, args, tokenEnv, envServerToken+"="+hostToken)
	auth := []string{"Authorization", "Bearer " + hostToken}
	r := sp.do(t, "POST", "/session", "", auth...)
	var created newSessionResponse
	if r.status != 200 || decodeStrict(r.body, &created) != nil {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	body := `{"prompt":[{"type":"text","text":"call run_shell_command {\"command\":\"env > env.out\"}"}]}`
	if r := sp.do(t, "POST", "/session/"+created.SessionID+"/prompt", body, auth...); r.status != 202 {
		t.Fatalf("prompt = %d %s", r.status, r.body)
	}
	envOut := filepath.Join(ws, "env.out")
	for i := 0; i < 600; i++ {
		if data, _ := os.ReadFile(envOut); len(data) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	shellEnv, err := os.ReadFile(envOut)
	if err != nil || len(shellEnv) == 0 {
		t.Fatalf("run_shell_command wrote no environment: %v\n%s", err, sp.stderr.String())
	}
	children := childPIDs(t, sp.cmd.Process.Pid)
	if len(children) != 1 {
		t.Fatalf("serve has children %v, want one ACP child", children)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", children[0]))
	if err != nil {
		t.Fatal(err)
	}
	childEnv := strings.ReplaceAll(string(raw), "\x00", "\n")
	for where, text := range map[string]string{"child /proc environ": childEnv, "env run by run_shell_command": string(shellEnv)} {
		for _, secret := range []string{prov.token, hostToken, envGuardToken + "=", envServerToken + "="} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains %q", where, secret)
			}
		}
	}
	// The private markers reach the child's initial environment but not its tools.
	if !strings.Contains(childEnv, envPrivateGuard+"="+privateGuardMarker) || strings.Contains(string(shellEnv), "QWEN_CODE_PRIVATE_") {
		t.Errorf("markers: child environ has guard marker %v; tool env has a private marker %v",
			strings.Contains(childEnv, envPrivateGuard), strings.Contains(string(shellEnv), "QWEN_CODE_PRIVATE_"))
	}
}

func TestServeE2EOffModeNoProvider(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	// Endpoint and token without mode=required activate nothing.
	sp := startServe(t, []string{"--workspace", ws, "--settings", yoloSettings(t), "--external-tool-guard-endpoint", prov.srv.URL}, envGuardToken+"="+prov.token)
	var caps capabilitiesBody
	decodeStrict(sp.do(t, "GET", "/capabilities", "").body, &caps)
	if strings.Contains(strings.Join(caps.Features, ","), featureExternalToolGuard) {
		t.Errorf("off mode features = %v", caps.Features)
	}
	id := sp.newSession(t, "")
	_, evs := sp.runTurn(t, id, `call write_file {"file_path":"a.txt","content":"x"}`)
	if data, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(data) != "x" {
		t.Errorf("off mode write_file: %q %v; events %v", data, err, evs)
	}
	children := childPIDs(t, sp.cmd.Process.Pid)
	if len(children) != 1 {
		t.Fatalf("children = %v", children)
	}
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", children[0]))
	if strings.Contains(string(raw), "QWEN_CODE_PRIVATE_") || strings.Contains(string(raw), prov.token) {
		t.Errorf("off-mode child environment carries a marker or the token")
	}
	if conns, calls := prov.counts(); conns != 0 || calls != 0 {
		t.Errorf("off mode: %d provider connections, %d prepares", conns, calls)
	}
}

func TestServeE2EStartupFailures(t *testing.T) {
	prov := newTestProvider(t)
	for _, tt := range []struct {
		name string
		args []string
		env  []string
		code int
		text string
	}{
		{"bad mode", []string{"--external-tool-guard-mode", "maybe"}, nil, exitUsage, "--external-tool-guard-mode"},
		{"no token", []string{"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL}, nil, exitUsage, envGuardToken},
		{"wrong token", []string{"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL}, []string{envGuardToken + "=wrong"}, exitRuntime, "handshake"},
		{"non-loopback without token", []string{"--hostname", "0.0.0.0"}, nil, exitUsage, "0.0.0.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAcpguard(t, append([]string{"serve", "--port", "0"}, tt.args...), tt.env...)
			if code != tt.code || strings.Contains(stdout, serveListenPrefix) || !strings.Contains(stderr, tt.text) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, one line naming %q, no listener", code, stdout, stderr, tt.code, tt.text)
			}
		})
	}
	if conns, calls := prov.counts(); calls != 0 || conns != 1 {
		t.Errorf("provider saw %d connections and %d prepares; want only the failed handshake", conns, calls)
	}
}

func TestServeE2ESignalEndsEverything(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, args, tokenEnv)
	id := sp.newSession(t, "")
	stream := sp.openEvents(t, id, "")
	const mark = "acpguard-e2e-orphan-check"
	sp.prompt(t, id, `call run_shell_command {"command":"sleep 60; echo `+mark+`"}`)
	readSSE(t, stream, func(ev sseEvent) bool { return strings.Contains(string(ev.data), `"in_progress"`) })
	children := childPIDs(t, sp.cmd.Process.Pid)
	if len(children) != 1 {
		t.Fatalf("children = %v", children)
	}
	if err := sp.stop(); err != nil {
		t.Fatalf("serve after SIGTERM: %v (want exit 0)\n%s", err, sp.stderr.String())
	}
	if err := syscall.Kill(children[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("ACP child %d outlived serve", children[0])
	}
	// The tool's shell runs in its own process group; it must be gone too.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(cmdline), mark) {
			t.Errorf("process %s (%q) outlived serve", e.Name(), cmdline)
		}
	}
}

// TestServeE2EPermissionBeforeGuard: in the default approval mode the child
// asks the host first, with Qwen Code's options; a rejection ends the call
// with no provider request, an allow leads to exactly one. acpguard's old
// ids still vote, and a vote naming an option not offered is Qwen's 400.
func TestServeE2EPermissionBeforeGuard(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	sp := startServe(t, []string{"--workspace", ws, "--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token)
	id := sp.newSession(t, "")
	stream := sp.openEvents(t, id, "")
	wantOptions := []hostPermissionOption{
		{OptionID: "proceed_always", Name: "Allow All Edits", Kind: "allow_always"},
		{OptionID: "proceed_once", Name: "Allow", Kind: "allow_once"},
		{OptionID: "cancel", Name: "Reject", Kind: "reject_once"},
	}
	for _, tt := range []struct {
		option, file string
		calls        int
		written      bool
		resolved     string // the optionId permission_resolved names
	}{
		{"cancel", "rejected.txt", 0, false, "cancel"},
		{"proceed_once", "allowed.txt", 1, true, "proceed_once"},
		{"allow_once", "legacy.txt", 2, true, "proceed_once"}, // legacy alias
	} {
		pid := sp.prompt(t, id, `call write_file {"file_path":"`+tt.file+`","content":"x"}`)
		evs := readSSE(t, stream, func(ev sseEvent) bool { return ev.typ == eventPermissionRequest })
		var req permissionRequestEvent
		if err := decodeStrict(parseEnvelope(t, evs[len(evs)-1]).Data, &req); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(req.Options, wantOptions) {
			t.Errorf("options = %+v, want %+v", req.Options, wantOptions)
		}
		if _, calls := prov.counts(); calls != 0 && tt.calls == 0 {
			t.Fatalf("provider called before the permission vote")
		}
		r := sp.do(t, "POST", "/session/"+id+"/permission/"+req.RequestID, `{"outcome":{"outcome":"selected","optionId":"proceed_always_project"}}`)
		wantBody := fmt.Sprintf(`{"error":"Permission %s: optionId \"proceed_always_project\" is not in the set of options the agent offered.","code":"invalid_option_id","requestId":%q,"optionId":"proceed_always_project"}`,
			req.RequestID, req.RequestID)
		if r.status != 400 || strings.TrimSpace(string(r.body)) != wantBody {
			t.Errorf("vote for an option not offered = %d %s, want 400 %s", r.status, r.body, wantBody)
		}
		r = sp.do(t, "POST", "/session/"+id+"/permission/"+req.RequestID, `{"outcome":{"outcome":"selected","optionId":"`+tt.option+`"}}`)
		if r.status != 200 {
			t.Fatalf("vote = %d %s", r.status, r.body)
		}
		evs = readSSE(t, stream, untilTurnEnd(pid))
		resolved := 0
		for _, ev := range evs {
			if ev.typ != eventPermissionResolved {
				continue
			}
			resolved++
			var res permissionResolvedEvent
			if err := decodeStrict(parseEnvelope(t, ev).Data, &res); err != nil {
				t.Fatal(err)
			}
			if res.Outcome.OptionID != tt.resolved {
				t.Errorf("%s: permission_resolved names %q, want %q", tt.option, res.Outcome.OptionID, tt.resolved)
			}
		}
		if resolved != 1 {
			t.Errorf("%s: %d permission_resolved events, want 1", tt.option, resolved)
		}
		if _, calls := prov.counts(); calls != tt.calls {
			t.Errorf("%s: provider saw %d prepares, want %d", tt.option, calls, tt.calls)
		}
		if _, err := os.Stat(filepath.Join(ws, tt.file)); (err == nil) != tt.written {
			t.Errorf("%s: file written = %v, want %v", tt.option, err == nil, tt.written)
		}
	}
}

// TestServeE2EMCPGuardedOnce: an MCP tool through serve is one guarded
// invocation, and a transport error is not retried (DESIGN.md §1).
func TestServeE2EMCPGuardedOnce(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	h := newHelperServer(t, "helper")
	cmd, args := helperCommand(t)
	env := map[string]string{}
	for _, kv := range h.environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	settings, _ := json.Marshal(map[string]any{
		"tools":      map[string]string{"approvalMode": "yolo"},
		"mcpServers": map[string]any{"helper": map[string]any{"command": cmd, "args": args, "env": env}},
	})
	settingsPath := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settingsPath, settings, 0o600); err != nil {
		t.Fatal(err)
	}
	sp := startServe(t, append([]string{"--workspace", ws, "--settings", settingsPath,
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.srv.URL}, h.writable()...), envGuardToken+"="+prov.token)
	id := sp.newSession(t, "")
	target := filepath.Join(ws, "m.txt")
	pid, _ := sp.runTurn(t, id, `call mcp__helper__write {"path":"`+target+`","content":"x"}`)
	if data, err := os.ReadFile(target); err != nil || string(data) != "x" {
		t.Errorf("allowed MCP write: %q %v\n%s", data, err, sp.stderr.String())
	}
	sp.runTurn(t, id, `call mcp__helper__crash {}`)
	if _, calls := prov.counts(); calls != 2 {
		t.Fatalf("provider saw %d prepares, want 2", calls)
	}
	if got := string(prov.calls[0]["toolName"]); got != `"mcp__helper__write"` || string(prov.calls[0]["promptId"]) != strconv.Quote(pid) {
		t.Errorf("MCP prepare = %s %s", got, prov.calls[0]["promptId"])
	}
	if calls := h.events("tools/call crash"); len(calls) != 1 {
		t.Errorf("the crashing MCP call reached the server %d times, want exactly 1", len(calls))
	}
}

// TestServeE2EStartEnvironmentHidden: serve holds the provider token, which
// os.Unsetenv leaves in /proc/<pid>/environ; it makes itself not dumpable so
// that its tools (same user) cannot read that file.
func TestServeE2EStartEnvironmentHidden(t *testing.T) {
	prov := newTestProvider(t)
	args, env := guardArgs(t, prov, t.TempDir(), filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, append(args, "--log-level", "debug"), env)
	if log := sp.stderr.String(); !strings.Contains(log, `msg="start environment hidden from other processes" dumpable=0`) {
		t.Errorf("serve's log does not show it made itself not dumpable:\n%s", log)
	}
}

func TestServeShutdownEndsChildren(t *testing.T) {
	td := startTestDaemon(t, serveOptions{}, fakeChildEnv(""))
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	td.prompt(t, id, "report pid\nwait")
	evs := readSSE(t, stream, childUpdate)
	pid, _ := strconv.Atoi(texts(t, evs)[0])
	if err := td.stop(); err != nil {
		t.Fatalf("serveDaemon after cancel = %v, want nil", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d outlived the daemon (kill 0: %v)", pid, err)
	}
	if _, err := http.Get(td.url + "/health"); err == nil {
		t.Error("daemon still accepts connections after shutdown")
	}
}

func TestServeHandshakeFailure(t *testing.T) {
	prov := newTestProvider(t)
	g := prov.guard(t)
	g.Token = "wrong-token"
	sys := &system{env: newProcEnv(nil), stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	err := serveDaemon(context.Background(), sys, serveOptions{Hostname: bindAddr{"127.0.0.1", true}, Workspaces: []string{t.TempDir()}, MaxPendingPrompts: 5, Guard: g}, func(string) {
		t.Error("listener opened after a failed handshake")
	})
	if err == nil || exitCode(err) != exitRuntime || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), g.Token) {
		t.Errorf("serveDaemon = %v, want a one-line runtime error without the token", err)
	}
}

// TestFaultSIGTERMWithPromptsRunning: serve, as a real process, gets
// SIGTERM while sessions run shell tools; it exits 0 and leaves nothing.
func TestFaultSIGTERMWithPromptsRunning(t *testing.T) {
	prov := newTestProvider(t)
	ws := t.TempDir()
	args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
	sp := startServe(t, args, tokenEnv)
	const mark = "acpguard-fault-sigterm"
	var pids []int
	for i := range 4 {
		id := sp.newSession(t, "")
		sp.prompt(t, id, `call run_shell_command {"command":"echo $$ > s`+strconv.Itoa(i)+`.pid; sleep 30; echo `+mark+`"}`)
		pids = append(pids, readPIDFile(t, filepath.Join(ws, "s"+strconv.Itoa(i)+".pid")))
	}
	children := childPIDs(t, sp.cmd.Process.Pid)
	start := time.Now()
	if err := sp.stop(); err != nil {
		t.Fatalf("serve after SIGTERM: %v, want exit 0\n%s", err, sp.stderr.String())
	}
	t.Logf("serve exited %v after SIGTERM with 4 running prompts", time.Since(start).Round(time.Millisecond))
	for _, pid := range append(children, pids...) {
		if !pidGoneWithin(pid, 10*time.Second) {
			t.Errorf("process %d outlived serve", pid)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(cmdline), mark) {
			t.Errorf("process %s (%q) outlived serve", e.Name(), cmdline)
		}
	}
}

func TestServeHostTokenSources(t *testing.T) {
	dir := t.TempDir()
	ws := []string{"--workspace", t.TempDir()}
	file := writeSecret(t, dir, "host", "from-file\n", 0o600)
	missing := filepath.Join(dir, "new-token")
	req := required("http://127.0.0.1:1")
	tf := "--" + flagHostTokenFile
	tl := "--" + flagAllowTokenlessLoopback
	tests := []struct {
		name      string
		args      []string
		env       []string
		token     string // want opts.Token
		tokenFile string
		generate  bool
		tokenless bool
		err       string
	}{
		{name: "off mode, none", args: ws},
		{name: "off mode, tokenless flag", args: append([]string{tl}, ws...), tokenless: true},
		{name: "required, none: generated", args: append(req, ws...), generate: true},
		{name: "required, tokenless", args: append(append(req, tl), ws...), tokenless: true},
		{name: "required, --token", args: append(append(req, "--token", "t1"), ws...), token: "t1"},
		{name: "required, variable", args: append(req, ws...), env: []string{envServerToken + "=t2"}, token: "t2"},
		{name: "file read", args: append([]string{tf, file}, ws...), token: "from-file", tokenFile: file},
		{name: "file missing: generated into it", args: append(append(req, tf, missing), ws...), tokenFile: missing, generate: true},
		{name: "file missing in off mode too", args: append([]string{tf, missing}, ws...), tokenFile: missing, generate: true},
		{name: "file makes non-loopback possible", args: append([]string{tf, missing, "--hostname", "0.0.0.0"}, ws...), tokenFile: missing, generate: true},
		{name: "file and --token", args: append([]string{tf, file, "--token", "t"}, ws...), err: tf + ` "` + file + `" and --token: both set; give the host token one way`},
		{name: "file and variable", args: append([]string{tf, file}, ws...), env: []string{envServerToken + "=t"}, err: envServerToken + ": both set"},
		{name: "tokenless and --token", args: append(append(req, tl, "--token", "t"), ws...), err: tl + ": a host token is also given"},
		{name: "tokenless and variable", args: append(append(req, tl), ws...), env: []string{envServerToken + "=t"}, err: tl + ": a host token is also given"},
		{name: "tokenless and file", args: append([]string{tl, tf, missing}, ws...), err: tl + ": a host token is also given"},
		{name: "tokenless off loopback", args: append([]string{tl, "--hostname", "0.0.0.0"}, ws...), err: tl + `: --hostname "0.0.0.0" is not a loopback address`},
		{name: "required off loopback without token", args: append(append(req, "--hostname", "0.0.0.0"), ws...), err: `--hostname "0.0.0.0": a non-loopback address requires --token, --token-file or QWEN_SERVER_TOKEN`},
		{name: "empty file name", args: append([]string{tf, ""}, ws...), err: tf + ` "": must name a file`},
		{name: "file too open", args: append([]string{tf, writeSecret(t, dir, "open", "x", 0o644)}, ws...), err: "mode 0644"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{envGuardToken + "=g"}, tt.env...)
			sys, _, _ := testSystem(env...)
			opts, err := parseServeArgs(tt.args, sys)
			if tt.err != "" {
				if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want exit 2 with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if opts.Token != tt.token || opts.TokenFile != tt.tokenFile || opts.GenerateToken != tt.generate || opts.AllowTokenlessLoopback != tt.tokenless {
				t.Errorf("token %q, file %q, generate %v, tokenless %v; want %q, %q, %v, %v",
					opts.Token, opts.TokenFile, opts.GenerateToken, opts.AllowTokenlessLoopback, tt.token, tt.tokenFile, tt.generate, tt.tokenless)
			}
		})
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Errorf("parsing created %s", missing)
	}
}

// nextLine returns the next line of stdout, failing the test after a while.
func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(testTimeout(30 * time.Second)):
		t.Fatal("serve printed no further line")
		return ""
	}
}

// TestServeGeneratesHostToken runs serve in required mode with no token: it
// writes a new token to a file only its user can read, prints the file after
// the listening line, accepts only that token, and removes the file at exit.
func TestServeGeneratesHostToken(t *testing.T) {
	prov := newTestProvider(t)
	runtimeDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", t.TempDir(),
		"--external-tool-guard-mode=required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token, envRuntimeDir+"="+runtimeDir)
	url, lines, stderr, stop := servedLines(t, cmd)
	path, ok := strings.CutPrefix(nextLine(t, lines), hostTokenAnnouncement)
	if !ok || filepath.Dir(filepath.Dir(path)) != runtimeDir || filepath.Base(path) != hostTokenFileName {
		t.Fatalf("second line names %q, want a file %s in a fresh directory under %s", path, hostTokenFileName, runtimeDir)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): os.ModeDir | 0o700} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode(), err, want)
		}
	}
	token, err := readSecretFile(flagHostTokenFile, path)
	if err != nil || len(token) != 2*hostTokenBytes {
		t.Fatalf("token file: %q, %v", token, err)
	}
	td := &testDaemon{url: url}
	if r := td.do(t, "GET", "/capabilities", ""); r.status != 401 {
		t.Errorf("GET /capabilities without the token = %d, want 401", r.status)
	}
	if r := td.do(t, "GET", "/health", "", "Authorization", "Bearer "+token); r.status != 200 {
		t.Errorf("GET /health with the token = %d %s, want 200", r.status, r.body)
	}
	if strings.Contains(stderr.String(), token) {
		t.Errorf("stderr shows the token:\n%s", stderr.String())
	}
	if err := stop(); err != nil {
		t.Errorf("serve: %v\n%s", err, stderr.String())
	}
	if _, err := os.Lstat(filepath.Dir(path)); err == nil {
		t.Errorf("the token's directory %s is left after exit", filepath.Dir(path))
	}
}

// TestHostTokenBase: a generated host token goes to $XDG_RUNTIME_DIR, else
// to a runtime or shared memory directory before the temporary directory,
// whose way is long on a long-running machine (sandbox_hide.go).
func TestHostTokenBase(t *testing.T) {
	rt := t.TempDir()
	if got := hostTokenBase(newProcEnv([]string{envRuntimeDir + "=" + rt})); got != rt {
		t.Errorf("with %s=%s: %q", envRuntimeDir, rt, got)
	}
	var st syscall.Stat_t
	if syscall.Stat(sharedMemoryDir, &st) != nil || st.Mode&syscall.S_ISVTX == 0 {
		t.Skipf("%s is no sticky directory here", sharedMemoryDir)
	}
	for _, env := range [][]string{nil, {envRuntimeDir + "=relative"}} {
		if got := hostTokenBase(newProcEnv(env)); got == os.TempDir() {
			t.Errorf("env %q: %q, want a runtime or shared memory directory first", env, got)
		}
	}
}

// TestServeTokenFileKept names --token-file: the first start creates it, a
// second start reads the same token from it.
func TestServeTokenFileKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.token")
	var tokens []string
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
		defer cancel()
		cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", t.TempDir(), "--" + flagHostTokenFile, path})
		url, lines, stderr, stop := servedLines(t, cmd)
		if got := nextLine(t, lines); got != hostTokenAnnouncement+path {
			t.Errorf("start %d: second line %q, want the token file", i, got)
		}
		token, err := readSecretFile(flagHostTokenFile, path)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, token)
		td := &testDaemon{url: url}
		if r := td.do(t, "GET", "/health", "", "Authorization", "Bearer "+token); r.status != 200 {
			t.Errorf("start %d: GET /health with the file's token = %d", i, r.status)
		}
		if r := td.do(t, "GET", "/capabilities", ""); r.status != 401 {
			t.Errorf("start %d: GET /capabilities without a token = %d, want 401", i, r.status)
		}
		if err := stop(); err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
	}
	if tokens[0] != tokens[1] {
		t.Errorf("the second start used another token than the file's")
	}
}

// TestServeTokenlessLoopback: --allow-tokenless-loopback in required mode
// serves without a token, writes no token file and warns exactly once.
func TestServeTokenlessLoopback(t *testing.T) {
	prov := newTestProvider(t)
	runtimeDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", t.TempDir(), "--" + flagAllowTokenlessLoopback,
		"--external-tool-guard-mode=required", "--external-tool-guard-endpoint", prov.srv.URL},
		envGuardToken+"="+prov.token, envRuntimeDir+"="+runtimeDir)
	url, lines, stderr, stop := servedLines(t, cmd)
	td := &testDaemon{url: url}
	if r := td.do(t, "GET", "/health", ""); r.status != 200 {
		t.Errorf("GET /health without a token = %d, want 200", r.status)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		t.Errorf("serve printed %q after the listening line", l)
	}
	if n := strings.Count(stderr.String(), "required mode without a host token"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, stderr.String())
	}
	if entries, _ := os.ReadDir(runtimeDir); len(entries) != 0 {
		t.Errorf("a token directory was created: %v", entries)
	}
}
