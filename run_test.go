// run_test.go tests "acpguard run" as a script would use it, on the real
// binary: the scripted model with no key, Qwen Code's output shapes against
// a loopback OpenAI-compatible service (an allowed write, a guard denial, a
// declined call), the budgets' exit statuses and stderr line, the prompt
// from standard input, the session flags and the usage errors.
package main

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// offMode silences the off-mode warning, so stderr holds only what a test
// looks for.
const offMode = "--external-tool-guard-mode=off"

func TestRunScriptedModel(t *testing.T) {
	const write = `call write_file {"file_path":"a.txt","content":"x"}`
	const declined = `acpguard requires permission to use "write_file", but that permission was declined.`
	tests := []struct {
		name       string
		args       []string
		stdout     string
		written    bool
		stderrHas  string
		stderrNone string
	}{
		{"yolo writes", []string{"run", "-y", write}, "write_file: completed\n", true,
			"acpguard run: warning: no external tool guard", declined},
		{"flags after the prompt", []string{"run", write, "--yolo", offMode}, "write_file: completed\n", true, "", "warning"},
		{"without a terminal a write is declined", []string{"run", offMode, write}, "write_file: denied\n", false,
			"acpguard run: write_file not run: " + declined + "\n", "warning"},
		{"plan mode refuses the write", []string{"run", offMode, "--approval-mode", "plan", "--", write}, "write_file: denied\n", false,
			`tool "write_file" is not allowed in plan mode`, declined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := runAcpguardIn(t, dir, "", tt.args)
			if code != exitOK || stdout != tt.stdout {
				t.Errorf("exit %d, stdout %q; want 0, %q (stderr %q)", code, stdout, tt.stdout, stderr)
			}
			if got := fileExists(filepath.Join(dir, "a.txt")); got != tt.written {
				t.Errorf("a.txt written: %v, want %v", got, tt.written)
			}
			if !strings.Contains(stderr, tt.stderrHas) || strings.Contains(stderr, tt.stderrNone) {
				t.Errorf("stderr %q: want %q in it, and not %q", stderr, tt.stderrHas, tt.stderrNone)
			}
		})
	}
}

// The prompt is standard input's text, then the words; without either,
// nothing starts.
func TestRunPromptText(t *testing.T) {
	tests := []struct {
		name, stdin string
		args        []string
		code        int
		stdout      string
		stderr      string
	}{
		{"words", "", []string{"hello", "there"}, exitOK, "hello there\n", ""},
		{"--prompt", "", []string{"-p", "hello"}, exitOK, "hello\n", ""},
		{"stdin, then the words", "from stdin\n", []string{"and", "words"}, exitOK, "from stdin\n\nand words\n", ""},
		{"stdin alone", "only stdin\n", nil, exitOK, "only stdin\n", ""},
		{"none", "", nil, exitUsage, "", `acpguard: error: no prompt given: pass it as words, with --prompt, or on standard input; run "acpguard run --help"`},
		{"blank stdin", " \n", nil, exitUsage, "", "acpguard: error: no prompt given"},
		{"words and --prompt", "", []string{"-p", "a", "b"}, exitUsage, "", `acpguard: error: --prompt "a" and the prompt words "b": both given; give the prompt one way`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAcpguardIn(t, t.TempDir(), tt.stdin, append([]string{"run", offMode}, tt.args...))
			if code != tt.code || stdout != tt.stdout || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// runModelServer is an OpenAI-compatible service that answers its first
// request with one call and every later one with the text "done", each
// with its usage, keeping every request.
type runModelServer struct {
	tool, args string
	mu         sync.Mutex
	requests   []string
}

func (m *runModelServer) start(t *testing.T) []string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.requests = append(m.requests, string(b))
		n := len(m.requests)
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 && m.tool != "" {
			args, _ := json.Marshal(m.args)
			io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,`+
				`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"`+m.tool+`","arguments":`+string(args)+`}}]}}],`+
				`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
			return
		}
		io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],`+
			`"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}`)
	}))
	t.Cleanup(srv.Close)
	return []string{envModelBaseURL + "=" + srv.URL + "/v1", envModelName + "=test-model", envModelKey + "=k"}
}

func (m *runModelServer) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// runMessages reads run's stdout in format: the messages, and for
// stream-json the stream events' types.
func runMessages(t *testing.T, format, stdout string) (msgs []map[string]any, events []string) {
	t.Helper()
	if format == runFormatJSON {
		if err := json.Unmarshal([]byte(stdout), &msgs); err != nil || !strings.HasSuffix(stdout, "]\n") || strings.Count(stdout, "\n") != 1 {
			t.Fatalf("stdout is not one JSON array on one line: %v\n%s", err, stdout)
		}
		return msgs, nil
	}
	for line := range strings.Lines(stdout) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		if m["type"] == runMsgStreamEvent {
			events = append(events, m["event"].(map[string]any)["type"].(string))
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs, events
}

// jsonAt reads a member of nested JSON objects and arrays ("message.content.0.type").
func jsonAt(v any, p string) any {
	for _, k := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// TestRunOutputShapes: -o json and -o stream-json give Qwen Code's recorded
// shapes for an allowed write, a guard denial and a declined call, all
// exit 0: system init, the assistant turn with its tool_use, the user
// message with its tool_result, the final turn, and the result with the
// permission denials, usage and (json only) stats.
func TestRunOutputShapes(t *testing.T) {
	p := startRefProvider(t, providerOptions{PolicyFile: "examples/policy.json"})
	required := []string{"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=" + p.url}
	const declined = `acpguard requires permission to use "write_file", but that permission was declined.`
	cases := []struct {
		name, tool, args string
		flags            []string
		mode             string
		isError          bool
		content          string // the tool_result's text; "" for any
		file             string // written by the call, or kept from being written
	}{
		{"allowed write", toolWriteFile, `{"file_path":"out.txt","content":"hi"}`, []string{offMode, "-y"}, modeYolo, false, "", "out.txt"},
		{"guard denial", toolShell, `{"command":"sudo touch denied.txt"}`, append([]string{"--yolo"}, required...), modeYolo, true,
			"Destructive and network shell commands are not allowed by policy", "denied.txt"},
		{"declined", toolWriteFile, `{"file_path":"out.txt","content":"hi"}`, []string{offMode}, modeDefault, true, declined, "out.txt"},
	}
	for _, tc := range cases {
		for _, format := range []string{runFormatJSON, runFormatStreamJSON} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				model := &runModelServer{tool: tc.tool, args: tc.args}
				env := append(model.start(t), envGuardToken+"="+providerTestToken)
				dir := t.TempDir()
				args := append(append([]string{"run", "-o", format}, tc.flags...), "do it")
				code, stdout, stderr := runAcpguardIn(t, dir, "", args, env...)
				if code != exitOK {
					t.Fatalf("exit %d, want 0; stderr %q", code, stderr)
				}
				if got := fileExists(filepath.Join(dir, tc.file)); got == tc.isError {
					t.Errorf("%s written: %v, want %v", tc.file, got, !tc.isError)
				}
				msgs, events := runMessages(t, format, stdout)
				var types []string
				for _, m := range msgs {
					types = append(types, m["type"].(string))
				}
				if want := []string{"system", "assistant", "user", "assistant", "result"}; !slices.Equal(types, want) {
					t.Fatalf("message types %q, want %q\n%s", types, want, stdout)
				}
				sys, call, result, final, res := msgs[0], msgs[1], msgs[2], msgs[3], msgs[4]
				sid, _ := sys["session_id"].(string)
				uuids := map[any]bool{}
				for _, m := range msgs {
					if m["session_id"] != sid || sid == "" {
						t.Errorf("%s message: session_id %v, want %q", m["type"], m["session_id"], sid)
					}
					uuids[m["uuid"]] = true
				}
				if len(uuids) != len(msgs) {
					t.Errorf("uuids not one per message: %v", uuids)
				}
				realDir, _ := filepath.EvalSymlinks(dir)
				cwd, _ := sys["cwd"].(string)
				if realCwd, _ := filepath.EvalSymlinks(cwd); sys["subtype"] != "init" || realCwd != realDir || sys["model"] != "test-model" ||
					sys["permission_mode"] != tc.mode || !slices.Contains(anyStrings(sys["tools"]), tc.tool) ||
					!slices.Contains(anyStrings(sys["slash_commands"]), "help") || jsonAt(sys, "mcp_servers") == nil {
					t.Errorf("system init %v", sys)
				}
				use := jsonAt(call, "message.content.0")
				input, _ := jsonAt(use, "input").(map[string]any)
				if jsonAt(use, "type") != "tool_use" || jsonAt(use, "id") != "call_1" || jsonAt(use, "name") != tc.tool || input == nil ||
					jsonAt(call, "message.stop_reason") != "tool_use" || jsonAt(call, "message.role") != "assistant" ||
					jsonAt(call, "message.model") != "test-model" || jsonAt(call, "message.usage.input_tokens") != 10.0 ||
					jsonAt(call, "message.usage.output_tokens") != 5.0 || jsonAt(call, "message.usage.total_tokens") != 15.0 ||
					call["parent_tool_use_id"] != nil || jsonAt(call, "message.content.1") != nil {
					t.Errorf("assistant tool_use message %v", call)
				}
				tr := jsonAt(result, "message.content.0")
				text, _ := jsonAt(tr, "content").(string)
				if jsonAt(result, "message.role") != "user" || jsonAt(tr, "type") != "tool_result" || jsonAt(tr, "tool_use_id") != "call_1" ||
					jsonAt(tr, "is_error") != tc.isError || text == "" || tc.content != "" && text != tc.content {
					t.Errorf("user tool_result message %v, want is_error %v, content %q", result, tc.isError, tc.content)
				}
				if jsonAt(final, "message.content.0.type") != "text" || jsonAt(final, "message.content.0.text") != "done" ||
					jsonAt(final, "message.stop_reason") != nil || jsonAt(final, "message.usage.input_tokens") != 20.0 {
					t.Errorf("final assistant message %v", final)
				}
				denials, _ := res["permission_denials"].([]any)
				if res["subtype"] != "success" || res["is_error"] != false || res["result"] != "done" || res["num_turns"] != 2.0 ||
					jsonAt(res, "usage.input_tokens") != 30.0 || jsonAt(res, "usage.output_tokens") != 7.0 || jsonAt(res, "usage.total_tokens") != 37.0 ||
					denials == nil || res["duration_ms"] == nil || res["duration_api_ms"] == nil {
					t.Errorf("result %v", res)
				}
				if tc.isError {
					d := jsonAt(res, "permission_denials.0")
					if len(denials) != 1 || jsonAt(d, "tool_name") != tc.tool || jsonAt(d, "tool_use_id") != "call_1" || mustJSON(t, jsonAt(d, "tool_input")) != mustJSON(t, input) {
						t.Errorf("permission_denials %v, want the call with its input %v", denials, input)
					}
				} else if len(denials) != 0 {
					t.Errorf("permission_denials %v, want none", denials)
				}
				stats, hasStats := res["stats"]
				if format == runFormatStreamJSON {
					if hasStats {
						t.Errorf("stream-json result has stats: %v", stats)
					}
					if want := []string{"message_start", "content_block_start", "content_block_stop", "message_stop"}; len(events) < 4 || !slices.Equal(events[:4], want) {
						t.Errorf("stream events %q, want them to start %q", events, want)
					}
				} else if jsonAt(stats, "models.test-model.api.totalRequests") != 2.0 || jsonAt(stats, "tools.totalCalls") != 1.0 ||
					jsonAt(stats, "tools.byName."+tc.tool+".count") != 1.0 || jsonAt(stats, "files") == nil {
					t.Errorf("stats %v", stats)
				}
			})
		}
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// --include-partial-messages streams the text as it arrives.
func TestRunPartialMessages(t *testing.T) {
	code, stdout, stderr := runAcpguardIn(t, t.TempDir(), "", []string{"run", offMode, "-o", "stream-json", "--include-partial-messages", "hello"})
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `"event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}`) {
		t.Errorf("no text delta in\n%s", stdout)
	}
}

// An aborted run prints nothing on stdout, one JSON line on stderr, and
// exits 55 (tool calls, wall time) or 53 (turns), as qwen does.
func TestRunBudgets(t *testing.T) {
	const write = `call write_file {"file_path":"a.txt","content":"x"}`
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
		ran    bool // the call ran before the abort
	}{
		{"no tool call allowed", []string{"--max-tool-calls", "0"}, exitBudget,
			`{"error":{"type":"FatalBudgetExceededError","message":"Run aborted: tool-call budget of 0 exceeded (--max-tool-calls); observed 1.","code":55}}` + "\n", false},
		{"one turn, a second needed", []string{"--max-session-turns", "1"}, exitTurnLimit,
			`{"error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.","code":53}}` + "\n", true},
	}
	for _, tt := range tests {
		for _, format := range []string{runFormatText, runFormatJSON} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				dir := t.TempDir()
				code, stdout, stderr := runAcpguardIn(t, dir, "", append([]string{"run", offMode, "-y", "-o", format, write}, tt.args...))
				if code != tt.code || stdout != "" || stderr != tt.stderr {
					t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, stdout, stderr, tt.code, tt.stderr)
				}
				if got := fileExists(filepath.Join(dir, "a.txt")); got != tt.ran {
					t.Errorf("the call ran: %v, want %v", got, tt.ran)
				}
			})
		}
	}
	// Within its budgets a run ends normally.
	code, stdout, stderr := runAcpguardIn(t, t.TempDir(), "", []string{"run", offMode, "-y", "--max-tool-calls", "1", "--max-session-turns", "2", write})
	if code != exitOK || stdout != "write_file: completed\n" {
		t.Errorf("within budgets: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// --max-wall-time ends the running call and the run: exit 55.
func TestRunWallTime(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runAcpguardIn(t, dir, "", []string{"run", offMode, "-y", "--max-wall-time", "1",
		`call run_shell_command {"command":"echo $$ > pid; exec sleep 60"}`})
	const prefix = `{"error":{"type":"FatalBudgetExceededError","message":"Run aborted: wall-time budget of 1s exceeded (--max-wall-time); observed `
	if code != exitBudget || stdout != "" || !strings.HasPrefix(stderr, prefix) || !strings.HasSuffix(stderr, `s.","code":55}}`+"\n") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 55, nothing, one line %s...", code, stdout, stderr, prefix)
	}
	pid := readPIDFile(t, filepath.Join(dir, "pid"))
	waitFor(t, "the cancelled command to end", func() bool { return processGone(pid) })
}

// A provider that does not answer in required mode is a runtime error,
// exit 1, before anything is printed.
func TestRunProviderDown(t *testing.T) {
	code, stdout, stderr := runAcpguardIn(t, t.TempDir(), "", []string{"run", "-o", "json",
		"--external-tool-guard-mode=required", "--external-tool-guard-endpoint=http://127.0.0.1:1", "--external-tool-guard-startup-wait-ms=100", "hello"},
		envGuardToken+"="+providerTestToken)
	if code != exitRuntime || stdout != "" || !strings.Contains(stderr, `acpguard: error: provider handshake: transport:`) || !strings.Contains(stderr, `no provider listens on "127.0.0.1:1"`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, the handshake's failure", code, stdout, stderr)
	}
}

// --session-id saves the session under its id, --resume goes on with it,
// and --continue with the last one of the directory: the model sees the
// earlier prompts.
func TestRunSessions(t *testing.T) {
	model := &runModelServer{}
	env := model.start(t)
	dir := t.TempDir()
	steps := []struct {
		args   []string
		before string // a prompt the model must see before this one
	}{
		{[]string{"--session-id", "run-test-1", "first prompt"}, ""},
		{[]string{"--resume", "run-test-1", "second prompt"}, "first prompt"},
		{[]string{"-c", "third prompt"}, "second prompt"},
	}
	for i, s := range steps {
		code, stdout, stderr := runAcpguardIn(t, dir, "", append([]string{"run", offMode, "-o", "json"}, s.args...), env...)
		if code != exitOK {
			t.Fatalf("step %d: exit %d, stderr %q", i, code, stderr)
		}
		msgs, _ := runMessages(t, runFormatJSON, stdout)
		if msgs[0]["session_id"] != "run-test-1" {
			t.Errorf("step %d: session %v, want run-test-1", i, msgs[0]["session_id"])
		}
		reqs := model.seen()
		if last := reqs[len(reqs)-1]; !strings.Contains(last, s.before) || !strings.Contains(last, strings.Fields(s.args[len(s.args)-1])[0]) {
			t.Errorf("step %d: model request %s\nwant %q before the prompt", i, last, s.before)
		}
	}
	code, _, stderr := runAcpguardIn(t, dir, "", []string{"run", offMode, "--session-id", "run-test-1", "hi"}, env...)
	if code != exitUsage || !strings.Contains(stderr, `acpguard: error: --session-id "run-test-1": a saved session has this id; go on with it with --resume run-test-1`) {
		t.Errorf("a saved session's id: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runAcpguardIn(t, dir, "", []string{"run", offMode, "--resume", "no-such-session", "hi"}, env...)
	if code != exitRuntime || !strings.Contains(stderr, `acpguard: error: open the session: session/load: unknown session "no-such-session"`) {
		t.Errorf("unknown session: exit %d, stderr %q", code, stderr)
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"-o", "xml", "hi"}, nil, `--output-format "xml": want text, json, stream-json`},
		{[]string{"--include-partial-messages", "hi"}, nil, `--include-partial-messages: only with --output-format stream-json`},
		{[]string{"--approval-mode", "auto", "hi"}, nil, `--approval-mode "auto": want plan, default, auto-edit, yolo`},
		{[]string{"-y", "--approval-mode", "plan", "hi"}, nil, `--yolo and --approval-mode "plan": both given; give one`},
		{[]string{"-m", "qwen3", "hi"}, []string{envModelBaseURL + "="}, `--model "qwen3": names a model of the OpenAI-compatible service; set OPENAI_BASE_URL`},
		{[]string{"--max-tool-calls", "-1", "hi"}, nil, `--max-tool-calls "-1": want an integer from 0 through`},
		{[]string{"--max-session-turns", "0", "hi"}, nil, `--max-session-turns "0": want an integer from 1 through 1000`},
		{[]string{"--max-wall-time", "0", "hi"}, nil, `--max-wall-time "0": want seconds (90) or a duration (30s, 5m, 1h)`},
		{[]string{"--max-wall-time", "5 minutes", "hi"}, nil, `--max-wall-time "5 minutes"`},
		{[]string{"--session-id", "a", "-c", "hi"}, nil, `--session-id, --resume and --continue: give at most one`},
		{[]string{"--resume", "../x", "hi"}, nil, `--resume "../x": not a session id`},
		{[]string{"--max-tool-call", "1", "hi"}, nil, `unknown flag "--max-tool-call" (did you mean "--max-tool-calls"?); run "acpguard run --help"`},
		{[]string{"-o", "json", "--output-format", "text", "hi"}, nil, `flag "--`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runAcpguardIn(t, t.TempDir(), "", append([]string{"run", offMode}, tt.args...), tt.env...)
			if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "acpguard: error: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

// TestRunHelpListsEveryFlag: every flag run defines appears in its usage,
// by its name or its short name, and every flag the usage lists exists.
func TestRunHelpListsEveryFlag(t *testing.T) {
	code, stdout, _ := runAcpguardIn(t, t.TempDir(), "", []string{"run", "--help"})
	if code != exitOK || stdout != runUsage {
		t.Fatalf("run --help: exit %d, stdout %.80q", code, stdout)
	}
	listed := map[string]bool{}
	for _, field := range strings.Fields(strings.ReplaceAll(runUsage, ",", " ")) {
		field = strings.TrimRight(field, `").;`)
		if name, ok := strings.CutPrefix(field, "--"); ok && name != "" {
			listed[name] = true
		} else if name, ok := strings.CutPrefix(field, "-"); ok && len(name) == 1 {
			listed[name] = true
		}
	}
	fs := newFlagSet("run")
	addRunFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		// A managed child's flag, which run never is.
		if !listed[f.Name] && f.Name != "allow-slash-command" {
			t.Errorf("run's usage does not list --%s", f.Name)
		}
	})
	for name := range listed {
		if name != "help" && name != "h" && fs.Lookup(name) == nil {
			t.Errorf("run's usage lists --%s, which run does not define", name)
		}
	}
}
