// serve_status_test.go tests the startup line a host parses, GET
// /capabilities and GET /daemon/status on a real serve.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// topKeys returns the sorted top-level keys of a JSON object.
func topKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestServeStartupLineAndStatus runs serve as a host of Qwen Code's serve
// would: it takes the URL from the startup line with a regexp, then reads
// /capabilities and /daemon/status, both behind the host token.
func TestServeStartupLineAndStatus(t *testing.T) {
	ws := t.TempDir()
	const token = "status-host-token"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(2*time.Minute))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"serve", "--port", "0", "--workspace", ws, "--token", token, "--" + flagSandbox, "off"})
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM: serve reaps its child and removes what it made for it.
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	m := serveListenRe.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
	if m == nil || !strings.HasPrefix(m[1], "http://127.0.0.1:") || m[2] != "http-bridge" || m[3] != ws {
		t.Fatalf("startup line %q does not read as Qwen Code's (url, mode=http-bridge, workspace=%s); stderr:\n%s", line, ws, stderr.String())
	}
	td := &testDaemon{url: m[1]}
	auth := []string{"Authorization", "Bearer " + token}

	r := td.do(t, "GET", "/capabilities", "", auth...)
	if r.status != 200 {
		t.Fatalf("GET /capabilities = %d %s", r.status, r.body)
	}
	want := []string{"acpguardVersion", "console", "features", "guard", "limits", "mode", "modelServices", "policy", "protocolVersions", "qwenCodeVersion", "supportedLanguages", "transports", "v", "workspaceCwd", "workspaces"}
	if got := topKeys(t, r.body); !slices.Equal(got, want) {
		t.Errorf("capabilities keys = %v, want %v", got, want)
	}
	var caps capabilitiesBody
	if err := decodeStrict(r.body, &caps); err != nil {
		t.Fatal(err)
	}
	if caps.ProtocolVersions.Current != "v1" || !slices.Equal(caps.ProtocolVersions.Supported, []string{"v1"}) ||
		caps.AcpguardVersion != version || !slices.Equal(caps.Transports, []string{"rest"}) || caps.Policy.Permission != "first-responder" ||
		caps.Limits.MaxPendingPromptsPerSession != defaultMaxPendingPrompts || caps.Limits.MaxSessions != defaultMaxSessions ||
		caps.Limits.MaxTotalSessions != defaultMaxSessions || caps.Limits.MaxSessionsPerWorkspace != defaultMaxSessions || caps.Limits.MaxRegisteredWorkspaces != 1 ||
		caps.QwenCodeVersion != "0.24.4" || caps.ModelServices == nil || caps.SupportedLanguages == nil ||
		len(caps.Workspaces) != 1 || caps.Workspaces[0] != (hostWorkspace{ID: ws, Cwd: ws, Primary: true, Trusted: true}) {
		t.Errorf("capabilities = %s", r.body)
	}
	if !slices.Contains(caps.Features, "daemon_status") || !slices.Contains(caps.Features, "permission_vote") || slices.Contains(caps.Features, featureExternalToolGuard) {
		t.Errorf("features = %v", caps.Features)
	}

	if r := td.do(t, "GET", "/daemon/status", ""); r.status != 401 {
		t.Errorf("GET /daemon/status without the token = %d %s, want 401", r.status, r.body)
	}
	r = td.do(t, "GET", "/daemon/status", "", auth...)
	if r.status != 200 {
		t.Fatalf("GET /daemon/status = %d %s", r.status, r.body)
	}
	want = []string{"capabilities", "daemon", "detail", "generatedAt", "issues", "limits", "runtime", "security", "status", "v"}
	if got := topKeys(t, r.body); !slices.Equal(got, want) {
		t.Errorf("status keys = %v, want %v", got, want)
	}
	var st daemonStatusBody
	if err := decodeStrict(r.body, &st); err != nil {
		t.Fatal(err)
	}
	gen, err := time.Parse(time.RFC3339Nano, st.GeneratedAt)
	if st.V != 1 || st.Detail != "summary" || st.Status != "ok" || st.Issues == nil || len(st.Issues) != 0 ||
		err != nil || time.Since(gen) > time.Minute || !strings.HasSuffix(st.GeneratedAt, "Z") {
		t.Errorf("status = %s", r.body)
	}
	if st.Daemon.PID != cmd.Process.Pid || st.Daemon.UptimeMs < 0 || st.Daemon.Mode != "http-bridge" ||
		st.Daemon.WorkspaceCwd != ws || st.Daemon.AcpguardVersion != version || st.Daemon.QwenCodeVersion != "0.24.4" ||
		st.Capabilities.Mode != "http-bridge" || st.Capabilities.QwenCodeVersion != "0.24.4" {
		t.Errorf("status daemon = %+v, want pid %d", st.Daemon, cmd.Process.Pid)
	}
	if st.Security != (statusSecurity{TokenConfigured: true, RequireAuth: false, LoopbackBind: true}) || st.Limits != caps.Limits ||
		st.Runtime.Sessions.Active != 0 || st.Runtime.Permissions.Pending != 0 {
		t.Errorf("status = %s", r.body)
	}
	// A session made is a session counted.
	if r := td.do(t, "POST", "/session", "", auth...); r.status != 200 {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	r = td.do(t, "GET", "/daemon/status", "", auth...)
	if err := decodeStrict(r.body, &st); err != nil || st.Runtime.Sessions.Active != 1 {
		t.Errorf("status after one session = %s (%v)", r.body, err)
	}
}
