// doctor_test.go tests "acpguard doctor" as a user meets it: the real
// binary against a real provider and a model server on loopback, each
// broken setup of the README named with its fix, the exit status, the
// JSON shape, and no token or key in any output.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The secrets of the doctor tests: each must never be printed.
const (
	doctorModelName = "doctor-model"
	doctorModelKey  = "doctor-model-key-5f1c"
	doctorWrongKey  = "doctor-wrong-token-9a7e"
)

// doctorSetup is a working setup of the README's sections, each part a
// field a case may break: the provider and its token, the model server,
// a settings file with a PreToolUse hook and an MCP server, the state
// directory.
type doctorSetup struct {
	endpoint, token string
	modelURL        string // OPENAI_BASE_URL
	hook, mcp       string // the hook's command, the MCP server's command
	stateDir        string
	workspace       string
	extraArgs       []string
	extraEnv        []string
}

func newDoctorSetup(t *testing.T, p *refProvider, model *httptest.Server) *doctorSetup {
	t.Helper()
	ws := t.TempDir()
	script := filepath.Join(ws, "hook.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return &doctorSetup{endpoint: p.url, token: providerTestToken, modelURL: model.URL + "/v1",
		hook: script, mcp: script, stateDir: state, workspace: ws}
}

// run runs doctor on the setup and returns its exit code and output.
func (s *doctorSetup) run(t *testing.T, more ...string) (code int, stdout, stderr string) {
	t.Helper()
	settings := map[string]any{
		"hooks": map[string]any{"PreToolUse": []any{map[string]any{"matcher": "*", "hooks": []any{
			map[string]any{"type": "command", "name": "deny", "command": s.hook}}}}},
		"mcpServers": map[string]any{"tool": map[string]any{"command": s.mcp}},
	}
	b, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	file := writeFileAll(t, filepath.Join(t.TempDir(), "settings.json"), string(b))
	args := append([]string{"doctor", "--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + s.endpoint,
		"--settings", file, "--workspace", s.workspace, "--state-dir", s.stateDir, "--port", "0"}, s.extraArgs...)
	env := append(isolatedSettingsEnv(t), envGuardToken+"="+s.token, envModelBaseURL+"="+s.modelURL,
		envModelName+"="+doctorModelName, envModelKey+"="+doctorModelKey)
	env = append(env, s.extraEnv...)
	return runAcpguard(t, append(args, more...), env...)
}

// startDoctorModel starts a model server that lists doctorModelName at
// /v1/models and answers 404 anywhere else, as a server does at a path
// without /v1.
func startDoctorModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"test"}]}`, doctorModelName)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// doctorLine returns the first report line of status (ok, warn, FAIL) and
// check name, "" when there is none.
func doctorLine(stdout, status, name string) string {
	for line := range strings.Lines(stdout) {
		if strings.HasPrefix(line, fmt.Sprintf("%-4s  %s: ", status, name)) {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}

func TestDoctorNamesTheFixOfEachBrokenSetup(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	model := startDoctorModel(t)
	closed := closedLoopbackAddr(t)
	missingHook := filepath.Join(t.TempDir(), "hooks", "deny-secrets.sh")
	noExec := filepath.Join(t.TempDir(), "plain.sh")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	openState := t.TempDir()
	if err := os.Chmod(openState, 0o777); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		breaks func(s *doctorSetup)
		check  string // the check that fails
		want   string // the whole line, or with a trailing "..." its start
	}{
		{"provider down", func(s *doctorSetup) { s.endpoint = "http://" + closed }, "provider",
			`FAIL  provider: provider handshake: transport: Post "http://` + closed + `/v1/handshake": dial tcp ` + closed + `: connect: connection refused; no provider listens on "` + closed + `": start one with ` + "`acpguard provider --policy FILE`" + ` (with --listen ` + closed + ` and the same QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN), or fix --external-tool-guard-endpoint`},
		{"wrong token", func(s *doctorSetup) { s.token = doctorWrongKey }, "provider",
			"FAIL  provider: provider handshake: http_status: POST /v1/handshake: status 401; the token differs from the provider's: QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN (or --external-tool-guard-token-file) here must equal QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN where the provider runs"},
		{"model URL without /v1", func(s *doctorSetup) { s.modelURL = model.URL }, "model",
			`FAIL  model: GET ` + model.URL + `/models: status 404 Not Found; the base URL "` + model.URL + `" does not end in /v1, where OpenAI-compatible servers answer: set OPENAI_BASE_URL to "` + model.URL + `/v1"`},
		{"model server down", func(s *doctorSetup) { s.modelURL = "http://" + closed + "/v1" }, "model",
			`FAIL  model: GET http://` + closed + `/v1/models: dial tcp ` + closed + `: connect: connection refused; start the model server, or set OPENAI_BASE_URL to where it answers`},
		{"missing hook command", func(s *doctorSetup) { s.hook = missingHook }, `hook "deny"`,
			`FAIL  hook "deny": "` + missingHook + `" does not exist; install it, or change hooks.PreToolUse[0].hooks[0].command in "...`},
		{"hook command not executable", func(s *doctorSetup) { s.hook = "timeout 5 " + noExec }, `hook "deny"`,
			`FAIL  hook "deny": "` + noExec + `" is not executable (mode 0644); chmod +x ` + noExec},
		{"missing MCP server command", func(s *doctorSetup) { s.mcp = "acpguard-doctor-no-such-server" }, `MCP server "tool"`,
			`FAIL  MCP server "tool": "acpguard-doctor-no-such-server" is not found in PATH; install it, or change mcpServers.tool.command in "...`},
		{"state directory other users may write", func(s *doctorSetup) { s.stateDir = openState }, "state directory",
			`FAIL  state directory: state directory "` + openState + `": mode 0777 lets other users write it; chmod 700 it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDoctorSetup(t, p, model)
			tt.breaks(s)
			code, stdout, stderr := s.run(t)
			line := doctorLine(stdout, "FAIL", tt.check)
			want, prefix := strings.CutSuffix(tt.want, "...")
			if code != exitRuntime || (prefix && !strings.HasPrefix(line, want)) || (!prefix && line != want) {
				t.Fatalf("exit %d, line\n%s\nwant exit 1 and\n%s\nstdout:\n%s\nstderr:\n%s", code, line, tt.want, stdout, stderr)
			}
			if n := strings.Count(stdout, "FAIL  "); n != 1 {
				t.Errorf("%d checks failed, want only %q:\n%s", n, tt.check, stdout)
			}
			if !strings.Contains(stderr, "acpguard: error: doctor: 1 of ") {
				t.Errorf("stderr %q, want the count of failed checks", stderr)
			}
		})
	}
}

// TestDoctorSandboxAndSettings: what the kernel lacks, and the keys of an
// untrusted workspace file, are named with their fix; only a sandbox asked
// for explicitly that the kernel cannot give fails.
func TestDoctorSandboxAndSettings(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	model := startDoctorModel(t)
	tests := []struct {
		name       string
		setup      func(s *doctorSetup)
		code       int
		line, also string // a line starts with line and holds also; WS is the workspace
	}{
		{"workspace hooks dropped in required mode", func(s *doctorSetup) {
			writeFileAll(t, filepath.Join(s.workspace, ".qwen", "settings.json"), `{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"/nonexistent/hook"}]}]}}`)
		}, exitOK, `warn  settings: settings "WS/.qwen/settings.json": drop key "hooks": the workspace file is untrusted in required mode; give --trust-workspace-settings to apply it`, ""},
		{"no Landlock, default sandbox", func(s *doctorSetup) { s.extraEnv = []string{envTestLandlock + "=ENOSYS"} }, exitOK,
			"warn  landlock: none (landlock_create_ruleset version probe: function not implemented): the sandbox turns off at start, and tools, hooks and MCP servers run unconfined; enable Landlock (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter), or pass --sandbox off to accept this", ""},
		{"no Landlock, sandbox asked for", func(s *doctorSetup) {
			s.extraEnv = []string{envTestLandlock + "=EOPNOTSUPP"}
			s.extraArgs = []string{"--sandbox", "workspace"}
		}, exitRuntime, "FAIL  landlock: confine tools with --sandbox workspace: the kernel has no Landlock (landlock_create_ruleset version probe: operation not supported); enable it (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter) or pass --sandbox off", ""},
		{"network none on ABI 3", func(s *doctorSetup) {
			s.extraEnv = []string{envTestLandlock + "=3"}
			s.extraArgs = []string{"--sandbox-network", "none"}
		}, exitRuntime, "FAIL  landlock: confine tools with --sandbox-network none: the kernel's Landlock ABI is 3 and denying TCP bind and connect needs ABI 4 (Linux 6.7); pass --sandbox-network all or run on a newer kernel", ""},
		{"no user namespaces", func(s *doctorSetup) { s.extraEnv = []string{envTestUserNS + "=off"} }, exitOK,
			"warn  user namespaces: the mount stage fails (", "): a session with a protected path in reach is refused; enable unprivileged user namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDoctorSetup(t, p, model)
			tt.setup(s)
			code, stdout, stderr := s.run(t)
			want := strings.ReplaceAll(tt.line, "WS", s.workspace)
			found := false
			for line := range strings.Lines(stdout) {
				found = found || strings.HasPrefix(line, want) && strings.Contains(line, tt.also)
			}
			if code != tt.code || !found {
				t.Fatalf("exit %d, want %d and a line starting\n%s\nstdout:\n%s\nstderr:\n%s", code, tt.code, want, stdout, stderr)
			}
		})
	}
}

func TestDoctorAllGood(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	s := newDoctorSetup(t, p, startDoctorModel(t))
	s.hook = "true && sh " + s.hook // a builtin, and a script given to an interpreter
	code, stdout, stderr := s.run(t)
	if code != exitOK || strings.Contains(stdout, "FAIL  ") || stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for _, want := range []string{
		"ok    provider: " + p.url + " answered the handshake with this token (provider uid ",
		"ok    model: GET " + s.modelURL + `/models: status 200 OK, lists "` + doctorModelName + `"`,
		`ok    hook "deny": "true" is a bash builtin, "`,
		`ok    MCP server "tool": "` + s.mcp + `" is executable`,
		`ok    state directory: "` + s.stateDir + `": this user's, mode 0700`,
		"ok    settings: read ",
		"ok    serve port: --port 0: serve picks a free port at start",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stdout, `with the script "`+strings.TrimPrefix(s.hook, "true && sh ")+`"`) {
		t.Errorf("the hook's script is not named:\n%s", stdout)
	}
}

func TestDoctorJSON(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	model := startDoctorModel(t)
	for _, tt := range []struct {
		name   string
		breaks func(s *doctorSetup)
		code   int
	}{
		{"all good", func(*doctorSetup) {}, exitOK},
		{"provider down", func(s *doctorSetup) { s.endpoint = "http://" + closedLoopbackAddr(t) }, exitRuntime},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newDoctorSetup(t, p, model)
			tt.breaks(s)
			code, stdout, stderr := s.run(t, "--json")
			var report struct {
				Checks []struct {
					Name   string `json:"name"`
					Status string `json:"status"`
					Detail string `json:"detail"`
					Fix    string `json:"fix"`
				} `json:"checks"`
				OK bool `json:"ok"`
			}
			dec := json.NewDecoder(strings.NewReader(stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&report); err != nil || dec.More() {
				t.Fatalf("stdout is not one report object (%v):\n%s", err, stdout)
			}
			if code != tt.code || report.OK != (tt.code == exitOK) || len(report.Checks) == 0 {
				t.Fatalf("exit %d, ok %v, %d checks; want exit %d; stderr %q", code, report.OK, len(report.Checks), tt.code, stderr)
			}
			failed := 0
			for _, c := range report.Checks {
				switch {
				case c.Status != doctorOK && c.Status != doctorWarn && c.Status != doctorFail:
					t.Errorf("check %q: status %q", c.Name, c.Status)
				case c.Name == "" || c.Detail == "":
					t.Errorf("check %+v: no name or no detail", c)
				case c.Status == doctorFail:
					failed++
					if c.Name != "provider" || !strings.HasPrefix(c.Fix, "no provider listens on ") {
						t.Errorf("failed check %+v, want the provider's, with the start-a-provider fix", c)
					}
				}
			}
			if failed != 0 != (tt.code != exitOK) {
				t.Errorf("%d checks failed, exit %d", failed, code)
			}
		})
	}
}

// TestDoctorNeverPrintsASecret: the provider token, the model key and a
// token given by mistake are in no output, even where a peer echoes what
// it was sent into its answer.
func TestDoctorNeverPrintsASecret(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
	}
	echoing := httptest.NewServer(http.HandlerFunc(echo))
	t.Cleanup(echoing.Close)
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	model := startDoctorModel(t)
	for _, tt := range []struct {
		name   string
		breaks func(s *doctorSetup)
	}{
		{"all good", func(*doctorSetup) {}},
		{"wrong token", func(s *doctorSetup) { s.token = doctorWrongKey }},
		{"provider echoes the token", func(s *doctorSetup) { s.endpoint = echoing.URL }},
		{"model echoes the key", func(s *doctorSetup) { s.modelURL = echoing.URL + "/v1" }},
		{"the token in a hook command", func(s *doctorSetup) { s.hook = "/nonexistent/" + providerTestToken }},
	} {
		for _, format := range [][]string{nil, {"--json"}} {
			s := newDoctorSetup(t, p, model)
			tt.breaks(s)
			_, stdout, stderr := s.run(t, format...)
			for _, secret := range []string{providerTestToken, doctorWrongKey, doctorModelKey} {
				if strings.Contains(stdout+stderr, secret) {
					t.Errorf("%s %v: the secret %q is printed:\n%s\n%s", tt.name, format, secret, stdout, stderr)
				}
			}
			if tt.name == "model echoes the key" && !strings.Contains(stdout, "FAIL  model: GET ") && len(format) == 0 {
				t.Errorf("%s: the model's 401 is not a failed check:\n%s", tt.name, stdout)
			}
		}
	}
}

// TestDoctorHookCommands: a hook command is looked at as bash would run
// it, each simple command and what a wrapper runs; one that is not a
// simple command is not checked.
func TestDoctorHookCommands(t *testing.T) {
	ws := t.TempDir()
	writeExec := func(name string, mode os.FileMode) string {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hook := writeExec("hook.sh", 0o755)
	plain := writeExec("plain.sh", 0o644)
	for _, tt := range []struct {
		command, status, detail string
	}{
		{"true", doctorOK, `"true" is a bash builtin`},
		{"./hook.sh --strict", doctorOK, fmt.Sprintf("%q is executable", hook)},
		{"sh", doctorOK, `"/`},
		{"test -x ./hook.sh && ./hook.sh", doctorOK, `"test" is a bash builtin, "` + hook + `" is executable`},
		{"/nonexistent/hook", doctorFail, `"/nonexistent/hook" does not exist`},
		{"./plain.sh", doctorFail, fmt.Sprintf("%q is not executable (mode 0644)", plain)},
		{"nice -n 5 /nonexistent/hook", doctorFail, `"/nonexistent/hook" does not exist`},
		{"sh -c '/nonexistent/hook x'", doctorFail, `"/nonexistent/hook" does not exist`},
		{"sh ./missing.sh", doctorFail, fmt.Sprintf("and its script %q is not a file", filepath.Join(ws, "missing.sh"))},
		{"acpguard-doctor-no-such-hook", doctorFail, `"acpguard-doctor-no-such-hook" is not found in PATH`},
		{"echo $(id)", doctorWarn, "not checked: not a simple command (command substitution)"},
		{"if true; then ./hook.sh; fi", doctorWarn, "not checked: not a simple command"},
	} {
		settings, err := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{"matcher": "*",
			"hooks": []any{map[string]any{"type": "command", "command": tt.command}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		file := writeFileAll(t, filepath.Join(t.TempDir(), "settings.json"), string(settings))
		env := newProcEnv(isolatedSettingsEnv(t))
		sys := &system{env: env, stdout: io.Discard, stderr: io.Discard}
		o, err := parseDoctorArgs([]string{"--settings", file, "--no-user-settings", "--workspace", ws}, sys)
		if err != nil || o.SettingsErr != nil {
			t.Fatalf("%q: %v, %v", tt.command, err, o.SettingsErr)
		}
		r := &doctorReport{}
		doctorHooks(r, o)
		var got bytes.Buffer
		writeDoctorText(&got, r)
		if len(r.Checks) != 1 || r.Checks[0].Status != tt.status || !strings.Contains(r.Checks[0].Detail, tt.detail) {
			t.Errorf("%q:\n%s\nwant %s with %q", tt.command, got.String(), tt.status, tt.detail)
		}
	}
}

// TestDoctorTakesEveryFlagOfACPAndServe: doctor's flags are acp's and
// serve's, each listed in its --help (and so completed), and no other
// but --json.
func TestDoctorTakesEveryFlagOfACPAndServe(t *testing.T) {
	theirs := append(usageFlags(acpUsage), usageFlags(serveUsage)...)
	ours := usageFlags(doctorUsage)
	for _, f := range theirs {
		if !slices.Contains(ours, f) {
			t.Errorf("doctor's --help does not list %s", f)
		}
	}
	for _, f := range ours {
		if f != "--json" && !slices.Contains(theirs, f) {
			t.Errorf("doctor's --help lists %s, a flag of neither acp nor serve", f)
		}
		if f == "--help" {
			continue
		}
		sys, _, _ := testSystem()
		if _, err := parseDoctorArgs([]string{f + "=x"}, sys); err != nil && strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("doctor lists %s, which its flag set does not define: %v", f, err)
		}
	}
}
