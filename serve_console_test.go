package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// consoleTestToken is the host token of the console tests: 64 hex digits,
// as serve generates them.
const consoleTestToken = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"

// The page and its assets are embedded, at most 60 KB together, served
// before authentication with the console's headers; the console API needs
// the token; --no-web turns all of it off, and /capabilities says which.
func TestConsoleRoutes(t *testing.T) {
	n := 0
	for _, a := range consoleAssets {
		if a.file == "" {
			continue
		}
		b, err := consoleFiles.ReadFile(a.file)
		if err != nil {
			t.Fatal(err)
		}
		n += len(b)
	}
	if n > maxConsoleAssetBytes {
		t.Errorf("the console's assets are %d bytes, over %d", n, maxConsoleAssetBytes)
	}
	t.Logf("console assets: %d bytes", n)

	ws := t.TempDir()
	on := startServe(t, []string{"--workspace", ws}, envServerToken+"="+consoleTestToken)
	off := startServe(t, []string{"--workspace", ws, "--no-web"}, envServerToken+"="+consoleTestToken)
	const noAuth, auth = false, true
	for _, tt := range []struct {
		name        string
		sp          *serveProcess
		path        string
		auth        bool
		status      int
		contentType string
		body        string
	}{
		{"page without token", on, "/", noAuth, 200, "text/html; charset=utf-8", `<script src="/console/app.js" defer></script>`},
		{"script without token", on, "/console/app.js", noAuth, 200, "text/javascript; charset=utf-8", "textContent"},
		{"script bounds each text block", on, "/console/app.js", noAuth, 200, "text/javascript; charset=utf-8", `const MAX_TEXT = 64 << 10;`},
		{"script survives a bad #token= link", on, "/console/app.js", noAuth, 200, "text/javascript; charset=utf-8", `if (badLink) signedOut("the sign-in link's token is not valid: paste the token");`},
		{"stylesheet without token", on, "/console/app.css", noAuth, 200, "text/css; charset=utf-8", "prefers-color-scheme: dark"},
		{"no icon, without token", on, "/favicon.ico", noAuth, 204, "", ""},
		{"sessions need the token", on, consoleAPISessions, noAuth, 401, "", `"Unauthorized"`},
		{"decisions need the token", on, consoleAPIDecisions, noAuth, 401, "", `"Unauthorized"`},
		{"health needs the token", on, consoleAPIHealth, noAuth, 401, "", `"Unauthorized"`},
		{"sessions", on, consoleAPISessions, auth, 200, jsonContentType, `{"sessions":[]}`},
		{"health", on, consoleAPIHealth, auth, 200, jsonContentType, `"calls":{"allowed":0,"denied":0,"failed":0}`},
		{"decisions without a decision log file", on, consoleAPIDecisions, auth, 200, jsonContentType, consoleNoDecisionLog},
		{"another path under the console needs the token", on, "/console/other.js", noAuth, 401, "", `"Unauthorized"`},
		{"another path under the console", on, "/console/other.js", auth, 404, "", `"code":"not_found"`},
		{"capabilities on", on, "/capabilities", auth, 200, jsonContentType, `"console":true`},
		{"no-web page", off, "/", noAuth, 401, "", `"Unauthorized"`},
		{"no-web page with the token", off, "/", auth, 404, "", `"code":"not_found"`},
		{"no-web script", off, "/console/app.js", auth, 404, "", `"code":"not_found"`},
		{"no-web sessions", off, consoleAPISessions, auth, 404, "", `"code":"not_found"`},
		{"capabilities off", off, "/capabilities", auth, 200, jsonContentType, `"console":false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.sp.token = ""
			if tt.auth {
				tt.sp.token = consoleTestToken
			}
			r := tt.sp.do(t, "GET", tt.path, "")
			if r.status != tt.status || !strings.Contains(string(r.body), tt.body) {
				t.Fatalf("GET %s = %d %.300s; want %d with %q", tt.path, r.status, r.body, tt.status, tt.body)
			}
			if tt.contentType != "" && r.header.Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type %q, want %q", r.header.Get("Content-Type"), tt.contentType)
			}
			if tt.status >= 300 || tt.path == "/capabilities" {
				return
			}
			for k, v := range map[string]string{"Content-Security-Policy": consoleCSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
				if got := r.header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
	for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(consoleCSP, want) || strings.Contains(consoleCSP, "unsafe-inline") {
			t.Errorf("CSP %q: want %q and no unsafe-inline", consoleCSP, want)
		}
	}
	// No inline script or style, and nothing fetched from elsewhere.
	for _, a := range consoleAssets[:3] {
		b, _ := consoleFiles.ReadFile(a.file)
		for _, bad := range []string{"<script>", "style=", "<style", "http://", "https://", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s holds %q", a.file, bad)
			}
		}
	}
}

// The decisions route reads serve's decision log with the reader of
// "acpguard log": newest first, filtered by outcome, tool and session,
// never a line's arguments, a line that is no record skipped and counted.
func TestConsoleDecisions(t *testing.T) {
	ws := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	var lines []byte
	for _, r := range []decisionRecord{
		{Time: "2026-12-06T10:00:00Z", SessionID: "s1", ToolCallID: "c1", ToolName: toolWriteFile, Outcome: outcomeAllowed, Arguments: json.RawMessage(`{"secret":"argument-value"}`)},
		{Time: "2026-12-06T10:00:01Z", SessionID: "s1", ToolCallID: "c2", ToolName: toolShell, Outcome: outcomeDenied, Reason: "no sudo"},
		{Time: "2026-12-06T10:00:02Z", SessionID: "s2", ToolCallID: "c3", ToolName: toolShell, Outcome: failTimeout},
	} {
		lines = appendDecisionRecord(lines, r)
		if r.ToolCallID == "c1" {
			lines = append(lines, "not a record\n"...)
		}
	}
	if err := os.WriteFile(logPath, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	sp := startServe(t, []string{"--workspace", ws, "--decision-log", logPath}, envServerToken+"="+consoleTestToken)
	sp.token = consoleTestToken
	for _, tt := range []struct {
		query string
		calls string // the tool call ids answered, in order
	}{
		{"", "c3 c2 c1"},
		{"?limit=2", "c3 c2"},
		{"?outcome=denied", "c2"},
		{"?outcome=failed", "c3"},
		{"?outcome=" + failTimeout, "c3"},
		{"?tool=" + toolWriteFile, "c1"},
		{"?session=s1", "c2 c1"},
	} {
		r := sp.do(t, "GET", consoleAPIDecisions+tt.query, "")
		var res consoleDecisions
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil {
			t.Fatalf("%s: %d %s", tt.query, r.status, r.body)
		}
		var calls []string
		for _, d := range res.Decisions {
			calls = append(calls, d.ToolCallID)
		}
		if got := strings.Join(calls, " "); got != tt.calls || res.Skipped != 1 || res.DecisionLog != logPath {
			t.Errorf("%s: calls %q, skipped %d, log %q; want %q, 1, %q", tt.query, got, res.Skipped, res.DecisionLog, tt.calls, logPath)
		}
		if strings.Contains(string(r.body), "argument-value") {
			t.Errorf("%s: the answer carries a call's arguments: %s", tt.query, r.body)
		}
		if tt.query == "?outcome=denied" && (len(res.Decisions) != 1 || res.Decisions[0].Reason != "no sudo") {
			t.Errorf("denied: %s, want the reason %q", r.body, "no sudo")
		}
	}
	for _, q := range []string{"?outcome=maybe", "?limit=0", "?limit=x"} {
		wantError(t, sp.do(t, "GET", consoleAPIDecisions+q, ""), http.StatusBadRequest, codeBadRequest)
	}
}

// --open starts $BROWSER at the console with the host token in the URL
// fragment; the token is in no log line. With --no-web it is refused.
func TestServeOpenConsole(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "opened")
	browser := filepath.Join(dir, "browser")
	// The browser writes its arguments, then its environment.
	if err := os.WriteFile(browser, []byte("#!/bin/sh\n{ printf '%s\\n' \"$@\"; env; } > "+got+".tmp && mv "+got+".tmp "+got+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	const modelKey = "sk-console-test-model-key"
	sp := startServe(t, []string{"--workspace", ws, "--open"}, envServerToken+"="+consoleTestToken, envBrowser+"="+browser, envModelKey+"="+modelKey)
	var opened []byte
	for deadline := time.Now().Add(testTimeout(10 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(got); err == nil {
			opened = b
			break
		}
	}
	args, environ, _ := strings.Cut(string(opened), "\n")
	if want := sp.url + "/#token=" + consoleTestToken; args != want {
		t.Errorf("the browser was started with %q, want %q", args, want)
	}
	// The token reaches it only in its argument, the key not at all.
	if strings.Contains(environ, consoleTestToken) || strings.Contains(environ, modelKey) {
		t.Errorf("the browser's environment holds serve's token or model key:\n%s", environ)
	}
	sp.stop()
	if strings.Contains(sp.stderr.String(), consoleTestToken) {
		t.Errorf("serve logged the token:\n%s", sp.stderr.String())
	}
	code, _, stderr := runAcpguard(t, []string{"serve", "--workspace", ws, "--no-web", "--open"})
	if code != exitUsage || !strings.Contains(stderr, "--open and --no-web: both given") {
		t.Errorf("--no-web --open: exit %d, stderr %q", code, stderr)
	}
}

// envBrowserShot names where TestConsoleInBrowser saves its screenshot;
// unset, in the test's temporary directory, named in the test log.
const envBrowserShot = "ACPGUARD_CONSOLE_SCREENSHOT"

// chromiumPath is Debian's chromium, which the browser test drives.
const chromiumPath = "/usr/bin/chromium"

// TestConsoleInBrowser has a person's steps done in Debian's headless
// Chromium, driven by playwright-core (testdata/browser/drive.mjs): serve
// in required mode with the reference provider on examples/policy.json and
// the scripted model; sign in, create a session, a write in default mode
// asks and Allow runs it, Reject leaves no file, a guard denial shows the
// provider's reason, another host's vote removes the request, and hostile
// tool and model output is shown as text with no script run. .ci/run
// installs both; elsewhere the test is skipped without them, and fails
// without them when CI is set.
func TestConsoleInBrowser(t *testing.T) {
	node, err := exec.LookPath("node")
	_, driverErr := os.Stat("testdata/browser/node_modules/playwright-core")
	_, browserErr := os.Stat(chromiumPath)
	if err != nil || driverErr != nil || browserErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run this test: node %v, driver %v, chromium %v (apt-get install chromium; npm ci --prefix testdata/browser)", err, driverErr, browserErr)
		}
		t.Skip("node, the driver or chromium is missing: apt-get install chromium; npm ci --prefix testdata/browser")
	}
	dir := t.TempDir()
	audit, decisions := filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "decisions.jsonl")
	prov := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json", AuditPath: audit})
	ws := t.TempDir()
	sp := startServe(t, []string{"--workspace", ws, "--decision-log", decisions,
		"--external-tool-guard-mode", "required", "--external-tool-guard-endpoint", prov.url},
		envGuardToken+"="+providerTestToken, envServerToken+"="+consoleTestToken)
	// Off mode without a host token: the page asks for none.
	tokenless := startServe(t, []string{"--workspace", t.TempDir()})
	shot := os.Getenv(envBrowserShot)
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "console.png")
	}
	wait := testTimeout(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drive.mjs", chromiumPath, sp.url, consoleTestToken, ws, t.TempDir(), shot, tokenless.url)
	cmd.Dir = "testdata/browser"
	cmd.Env = append(os.Environ(), "ACPGUARD_BROWSER_TIMEOUT_MS="+strconv.FormatInt(wait.Milliseconds(), 10))
	out, err := cmd.CombinedOutput()
	t.Logf("screenshot: %s\n%s", shot, out)
	if err != nil || !strings.Contains(string(out), "ok: the console drove serve in Chromium") {
		t.Fatalf("drive.mjs: %v\n%s\nserve's stderr:\n%s", err, out, sp.stderr.String())
	}
	// What a person would check on disk: the allowed write is there, the
	// rejected one is not.
	if b, err := os.ReadFile(filepath.Join(ws, "allowed.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("allowed.txt = %q, %v; want %q", b, err, "hello\n")
	}
	for _, name := range []string{"rejected.txt", "elsewhere.txt", "cancelled.txt"} {
		if _, err := os.Stat(filepath.Join(ws, name)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it never written", name, err)
		}
	}
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	if sp.stop(); strings.Contains(sp.stderr.String(), consoleTestToken) {
		t.Errorf("serve logged the host token:\n%s", sp.stderr.String())
	}
}
