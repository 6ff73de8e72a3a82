// demo.go owns "acpguard demo": the whole guarded path on one machine, with
// no model key and no extra service. It starts the reference provider and
// serve in required mode on free loopback ports, drives them over the host
// API as any host would, and prints what happened and what is on disk. It
// reads its own serve's answers loosely: it only shows them, deciding nothing.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The demo's limits: every step is bounded, so a broken stack fails the
// demo instead of hanging it.
const (
	demoStepTimeout = 30 * time.Second
	demoMaxEvent    = 1 << 20
)

// demoPolicy is the built-in sample policy; %s is the workspace, quoted for a
// regular expression.
const demoPolicy = `{
  "rules": [
    {"tool": "read_file", "decision": "allow"},
    {"tool": "list_directory", "decision": "allow"},
    {"tool": "write_file", "match": {"/file_path": "^%s/[^/]+$"}, "decision": "allow"},
    {"tool": "run_shell_command", "match": {"/command": "\\b(curl|wget|rm|sudo)\\b"}, "decision": "deny",
     "reason": "Network downloads and destructive shell commands are not allowed by policy"}
  ],
  "default": "deny",
  "defaultReason": "No policy rule allows this tool call"
}
`

// demoSettings runs tools without permission prompts, so that the provider's
// decision is the only gate the demo shows.
const demoSettings = `{"tools": {"approvalMode": "yolo"}}`

type demoStep struct {
	title  string
	prompt string
	file   string // the file the call would create
}

var demoSteps = []demoStep{
	{"The model writes hello.txt; the policy allows writes in the workspace.",
		`call write_file {"file_path":"hello.txt","content":"hello from a guarded agent\n"}`, "hello.txt"},
	{"The model runs a download; the policy denies it.",
		`call run_shell_command {"command":"curl -s -o installer.sh http://127.0.0.1:9/installer.sh"}`, "installer.sh"},
	{"The provider is stopped; the model writes again.",
		`call write_file {"file_path":"after-stop.txt","content":"should never exist\n"}`, "after-stop.txt"},
}

// demoOptions are the validated flags of "acpguard demo".
type demoOptions struct {
	Keep bool // leave the stack running until interrupted
}

func runDemo(ctx context.Context, sys *system, args []string) error {
	opts, err := parseDemoArgs(args, sys)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "acpguard-demo-")
	if err != nil {
		return fmt.Errorf("demo: create workspace: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Resolve symlinks (a /tmp link): the policy matches the path the tools see.
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		return fmt.Errorf("demo: resolve workspace: %w", err)
	}
	work, hostToken, hostTokenFile, err := writeDemoFiles(tmp)
	if err != nil {
		return err
	}
	token := randomHex(24)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	provAddr, stopProvider, err := startDemoProvider(ctx, sys, "127.0.0.1:0", tmp, token)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			stopProvider()
		}
	}()
	providerURL := "http://" + provAddr

	// serve, in this process, in required mode.
	serveOpts, err := demoServeOptions(tmp, work, providerURL, token, hostToken, hostTokenFile)
	if err != nil {
		return err
	}
	serveURL, serveDone, hup, err := startDemoServe(ctx, sys, serveOpts)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		<-serveDone
	}()

	out := sys.stdout
	printDemoHeader(out, providerURL, serveURL, hostTokenFile, work)

	h, sid, events, err := openDemoSession(ctx, serveURL, hostToken, work)
	if err != nil {
		return err
	}
	err = runDemoSteps(ctx, out, h, sid, events, serveOpts.DecisionLog, work, func() error {
		stopped = true
		return stopProvider()
	})
	if err != nil {
		return err
	}
	if !opts.Keep {
		return nil
	}
	// --keep: the provider comes back where serve expects it, and the
	// stack stays up until Ctrl-C.
	if _, stopProvider, err = startDemoProvider(ctx, sys, provAddr, tmp, token); err != nil {
		return err
	}
	stopped = false
	// The restarted provider listens on a new socket of this user: serve
	// accepts it only after a new handshake, which SIGHUP asks for.
	if err := hup.rehandshakeSelf(ctx, demoStepTimeout); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	printDemoKeep(out, providerURL, serveURL, sid, hostTokenFile, serveOpts.DecisionLog)
	<-ctx.Done()
	return nil
}

// writeDemoFiles creates the demo's workspace under tmp and writes beside
// it the sample policy, which allows writes inside that workspace only,
// the demo's settings and serve's host token. It returns the workspace's
// path, the host token and its file's path.
func writeDemoFiles(tmp string) (work, hostToken, hostTokenFile string, err error) {
	work = filepath.Join(tmp, "workspace")
	files := map[string]string{
		"policy.json":   fmt.Sprintf(demoPolicy, strings.ReplaceAll(regexp.QuoteMeta(work), `\`, `\\`)),
		"settings.json": demoSettings,
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return "", "", "", fmt.Errorf("demo: create workspace: %w", err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o600); err != nil {
			return "", "", "", fmt.Errorf("demo: write %q: %w", name, err)
		}
	}
	// serve's host token, in a file only this user can read, as serve
	// itself writes one in required mode.
	hostToken = randomHex(hostTokenBytes)
	hostTokenFile = filepath.Join(tmp, hostTokenFileName)
	if err := createSecretFile(flagHostTokenFile, hostTokenFile, hostToken); err != nil {
		return "", "", "", fmt.Errorf("demo: %w", err)
	}
	return work, hostToken, hostTokenFile, nil
}

// startDemoProvider starts the provider in this process, quiet, on listen,
// with the policy under tmp and token, stoppable on its own for step 3 and
// started again on the same address for --keep. It returns the address it
// listens on and the function that stops it and reports how it ended.
func startDemoProvider(ctx context.Context, sys *system, listen, tmp, token string) (addr string, stop func() error, err error) {
	quiet := &system{env: sys.env, stdin: eofReader{}, stdout: io.Discard, stderr: io.Discard}
	la, err := parseListen(listen)
	if err != nil {
		return "", nil, err
	}
	provCtx, cancel := context.WithCancel(ctx)
	provAddr := make(chan string, 1)
	provDone := make(chan error, 1)
	go func() {
		provDone <- serveProvider(provCtx, quiet, providerOptions{
			Listen: la, PolicyFile: filepath.Join(tmp, "policy.json"), Token: token,
		}, func(addr string) { provAddr <- addr })
	}()
	stop = func() error {
		cancel()
		return <-provDone
	}
	select {
	case addr := <-provAddr:
		return addr, stop, nil
	case err := <-provDone:
		cancel()
		return "", nil, fmt.Errorf("demo: start provider: %w", err)
	}
}

// demoServeOptions are the options of the demo's serve, in required mode,
// on a free loopback port, with workspace work and the files under tmp: the
// provider at providerURL with token, the host token in hostTokenFile, and
// the decision log the steps read.
func demoServeOptions(tmp, work, providerURL, token, hostToken, hostTokenFile string) (serveOptions, error) {
	endpoint, err := url.Parse(providerURL)
	if err != nil {
		return serveOptions{}, fmt.Errorf("demo: provider url %q: %w", providerURL, err)
	}

	// The tools of the demo's sessions cannot read it, as under serve.
	sandbox := requiredModeSandbox()
	sandbox.Hide = []string{hostTokenFile}

	decisionLog := filepath.Join(tmp, "decisions.jsonl")
	settingsFile := filepath.Join(tmp, "settings.json")
	st, err := loadSettings(settingsFile)
	if err != nil {
		return serveOptions{}, fmt.Errorf("demo: %w", err)
	}
	return serveOptions{
		Hostname:          bindAddr{host: loopbackV4, loopback: true},
		Port:              0,
		Workspaces:        []string{work},
		Guard:             guardConfig{Mode: guardModeRequired, Endpoint: endpoint, Timeout: 3 * time.Second, Token: token},
		Token:             hostToken,
		TokenFile:         hostTokenFile,
		DecisionLog:       decisionLog,
		MaxPendingPrompts: defaultMaxPendingPrompts,
		SettingsFile:      settingsFile,
		Settings:          st,
		Sandbox:           sandbox,
	}, nil
}

// startDemoServe starts serve in this process with opts until ctx ends.
// serve's log is quiet but for what --keep waits for. It returns serve's
// URL, the channel serve's end is reported on, and the watch of its log
// that --keep's new handshake waits on.
func startDemoServe(ctx context.Context, sys *system, opts serveOptions) (string, <-chan error, hupWatch, error) {
	serveAddr := make(chan string, 1)
	serveDone := make(chan error, 1)
	hup := hupWatch{results: make(chan string, 1)}
	serveSys := &system{env: sys.env, stdin: eofReader{}, stdout: io.Discard, stderr: hup}
	go func() {
		serveDone <- serveDaemon(ctx, serveSys, opts, func(u string) { serveAddr <- u })
	}()
	select {
	case serveURL := <-serveAddr:
		return serveURL, serveDone, hup, nil
	case err := <-serveDone:
		return "", nil, hupWatch{}, fmt.Errorf("demo: start serve: %w", err)
	}
}

// printDemoHeader prints where the demo's provider, serve, host token and
// workspace are.
func printDemoHeader(out io.Writer, providerURL, serveURL, hostTokenFile, work string) {
	fmt.Fprintf(out, "acpguard demo: the guarded path, end to end, on loopback only\n\n")
	fmt.Fprintf(out, "  provider   %s  (built-in sample policy)\n", providerURL)
	fmt.Fprintf(out, "  serve      %s  (--external-tool-guard-mode=required)\n", serveURL)
	fmt.Fprintf(out, "  host token %s\n", hostTokenFile)
	fmt.Fprintf(out, "  workspace  %s\n\n", work)
}

// openDemoSession opens a session on workspace work through serve's host
// API at serveURL, as any host would with hostToken, and subscribes to its
// events.
func openDemoSession(ctx context.Context, serveURL, hostToken, work string) (*demoHost, string, <-chan demoEvent, error) {
	h := &demoHost{base: serveURL, token: hostToken, client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	sid, err := h.newSession(ctx, work)
	if err != nil {
		return nil, "", nil, err
	}
	events, err := h.subscribe(ctx, sid)
	if err != nil {
		return nil, "", nil, err
	}
	return h, sid, events, nil
}

// runDemoSteps runs demoSteps in order on session sid, printing for each
// the provider's decision, read from decisionLog, the turn's result and
// whether its file is in work. stopProvider is called before the third
// step, whose call the provider cannot decide.
func runDemoSteps(ctx context.Context, out io.Writer, h *demoHost, sid string, events <-chan demoEvent, decisionLog, work string, stopProvider func() error) error {
	logOffset := int64(0)
	for i, step := range demoSteps {
		if i == 2 {
			if err := stopProvider(); err != nil {
				return fmt.Errorf("demo: stop provider: %w", err)
			}
		}
		fmt.Fprintf(out, "%d. %s\n", i+1, step.title)
		fmt.Fprintf(out, "   prompt     %s\n", step.prompt)
		turn, err := h.prompt(ctx, sid, step.prompt, events)
		if err != nil {
			return err
		}
		var d demoDecision
		d, logOffset, err = readDemoDecision(decisionLog, logOffset)
		if err != nil {
			return err
		}
		switch d.Outcome {
		case "allowed", "denied":
			fmt.Fprintf(out, "   decision   %s by the provider in %d µs\n", d.Outcome, d.LatencyUs)
		default:
			fmt.Fprintf(out, "   decision   none: the provider call failed (%s) after %d µs, so the call is denied\n", d.Outcome, d.LatencyUs)
		}
		fmt.Fprintf(out, "   result     %s: %s\n", turn.status, turn.text)
		if fi, err := os.Stat(filepath.Join(work, step.file)); err == nil {
			fmt.Fprintf(out, "   on disk    %s exists (%d bytes)\n\n", step.file, fi.Size())
		} else {
			fmt.Fprintf(out, "   on disk    %s does not exist\n\n", step.file)
		}
	}
	fmt.Fprintf(out, "Every call was decided once by the provider, or denied when no decision could be had.\n")
	return nil
}

// printDemoKeep tells, for --keep, that serve accepted the restarted
// provider, and how to drive the running stack by hand.
func printDemoKeep(out io.Writer, providerURL, serveURL, sid, hostTokenFile, decisionLog string) {
	fmt.Fprintf(out, "\nserve accepted the restarted provider after SIGHUP (a new handshake): it checks that\n")
	fmt.Fprintf(out, "every connection reaches the listening socket its last handshake met.\n")
	fmt.Fprintf(out, "\nThe provider is back on %s and the stack is running. Drive it by hand\n", providerURL)
	fmt.Fprintf(out, "(the scripted model reads `call <tool> <json>` lines):\n\n")
	fmt.Fprintf(out, "  H=\"Authorization: Bearer $(cat %s)\"\n", shellQuote(hostTokenFile))
	fmt.Fprintf(out, "  curl -N -H \"$H\" %s/session/%s/events &\n", serveURL, sid)
	fmt.Fprintf(out, "  curl -s -H \"$H\" -X POST %s/session/%s/prompt -H 'Content-Type: application/json' \\\n", serveURL, sid)
	fmt.Fprintf(out, "    -d '{\"prompt\":[{\"type\":\"text\",\"text\":\"call write_file {\\\"file_path\\\":\\\"a.txt\\\",\\\"content\\\":\\\"x\\\"}\"}]}'\n")
	fmt.Fprintf(out, "  tail -f %s\n\nPress Ctrl-C to stop and clean up.\n", decisionLog)
}

// eofReader is the stdin of the in-process servers: they read none.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// demoHost is the demo's side of the host API.
type demoHost struct {
	base   string
	token  string // serve's host token
	client *http.Client
}

// do sends req with the host token.
func (h *demoHost) do(req *http.Request) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+h.token)
	return h.client.Do(req)
}

func (h *demoHost) post(ctx context.Context, path string, body any, want int, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, demoStepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.do(req)
	if err != nil {
		return fmt.Errorf("demo: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, demoMaxEvent))
	if resp.StatusCode != want {
		return fmt.Errorf("demo: POST %s: status %d: %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("demo: POST %s: %w", path, err)
		}
	}
	return nil
}

func (h *demoHost) newSession(ctx context.Context, cwd string) (string, error) {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := h.post(ctx, "/session", map[string]string{"cwd": cwd}, http.StatusOK, &res); err != nil {
		return "", err
	}
	return res.SessionID, nil
}

// demoEvent is one host event as serve streams it.
type demoEvent struct {
	Type     string          `json:"type"`
	PromptID string          `json:"promptId"`
	Data     json.RawMessage `json:"data"`
}

// subscribe streams the session's events until ctx ends.
func (h *demoHost) subscribe(ctx context.Context, sid string) (<-chan demoEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/session/"+sid+"/events", nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.do(req)
	if err != nil {
		return nil, fmt.Errorf("demo: subscribe: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("demo: subscribe: status %d", resp.StatusCode)
	}
	ch := make(chan demoEvent, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), demoMaxEvent)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev demoEvent
			if json.Unmarshal([]byte(data), &ev) != nil {
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// demoTurn is how one scripted prompt's tool call ended.
type demoTurn struct {
	status string // the final tool_call_update status
	text   string // its content text
}

func (h *demoHost) prompt(ctx context.Context, sid, text string, events <-chan demoEvent) (demoTurn, error) {
	var res struct {
		PromptID string `json:"promptId"`
	}
	body := map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}}
	if err := h.post(ctx, "/session/"+sid+"/prompt", body, http.StatusAccepted, &res); err != nil {
		return demoTurn{}, err
	}
	var turn demoTurn
	timeout := time.After(demoStepTimeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return turn, errors.New("demo: the event stream ended")
			}
			switch ev.Type {
			case "session_update":
				var u struct {
					Update struct {
						SessionUpdate string `json:"sessionUpdate"`
						Status        string `json:"status"`
						Content       []struct {
							Content struct {
								Text string `json:"text"`
							} `json:"content"`
						} `json:"content"`
					} `json:"update"`
				}
				if json.Unmarshal(ev.Data, &u) == nil && u.Update.SessionUpdate == "tool_call_update" &&
					(u.Update.Status == "completed" || u.Update.Status == "failed") {
					turn.status = u.Update.Status
					for _, c := range u.Update.Content {
						turn.text += c.Content.Text
					}
				}
			case "turn_complete":
				if ev.PromptID == res.PromptID {
					return turn, nil
				}
			case "turn_error", "session_died":
				return turn, fmt.Errorf("demo: %s: %s", ev.Type, ev.Data)
			}
		case <-timeout:
			return turn, fmt.Errorf("demo: no turn_complete for prompt %q within %s", res.PromptID, demoStepTimeout)
		case <-ctx.Done():
			return turn, ctx.Err()
		}
	}
}

// demoDecision is the part of a decision log line the demo prints.
type demoDecision struct {
	Outcome   string `json:"outcome"`
	LatencyUs int64  `json:"latencyUs"`
}

// readDemoDecision reads the first decision after offset in the decision log.
func readDemoDecision(path string, offset int64) (demoDecision, int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return demoDecision{}, offset, fmt.Errorf("demo: read decision log: %w", err)
	}
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	line, _, found := bytes.Cut(b[offset:], []byte("\n"))
	if !found {
		return demoDecision{}, offset, fmt.Errorf("demo: no decision was logged")
	}
	var d demoDecision
	if err := json.Unmarshal(line, &d); err != nil {
		return d, offset, fmt.Errorf("demo: decision log line %q: %w", line, err)
	}
	return d, offset + int64(len(line)) + 1, nil
}
