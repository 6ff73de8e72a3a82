// serve_metrics_test.go checks serve's GET /metrics with the strict
// Prometheus text parser (counters move as calls are made) and its log:
// the format and level flags, and no token or raw argument in it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"unicode"
)

func TestServeMetrics(t *testing.T) {
	prov := newTestProvider(t)
	prov.verdict = func(tool string, args json.RawMessage) (int, bool, string) {
		switch tool {
		case "run_shell_command":
			return 200, false, "no shell here"
		case "broken":
			return 500, false, ""
		}
		return 200, true, ""
	}
	const hostToken = "host-token-for-metrics"
	auth := []string{"Authorization", "Bearer " + hostToken}
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), Token: hostToken}, fakeChildEnv("ack"))

	// Like every route, /metrics needs the host token.
	wantError(t, td.do(t, "GET", metricsPath, ""), http.StatusUnauthorized, codeUnauthorized)
	before := td.scrape(t, auth...)
	for series, v := range before {
		// The sandbox gauges say what the kernel offers, and max_children
		// the limit, not what happened.
		want := 0.0
		if series == `acpguard_serve_auth_failures_total{reason="no_header"}` {
			want = 1 // the request above
		}
		if v != want && !strings.HasPrefix(series, "acpguard_serve_sandbox_") && series != "acpguard_serve_max_children" {
			t.Errorf("fresh daemon: %s = %v, want %v", series, v, want)
		}
	}
	for _, series := range []string{
		`acpguard_serve_decisions_total{outcome="allowed"}`,
		`acpguard_serve_decision_failures_total{category="timeout"}`,
		`acpguard_serve_decision_failures_total{category="stale_prompt"}`,
		`acpguard_serve_provider_request_duration_seconds_count`,
		`acpguard_serve_prompts_total{result="end_turn"}`,
		`acpguard_serve_limit_hits_total{code="session_limit_exceeded"}`,
		`acpguard_serve_children_died_total`,
	} {
		if _, ok := before[series]; !ok {
			t.Errorf("fresh daemon does not expose %s", series)
		}
	}

	r := td.do(t, "POST", "/session", "", auth...)
	var created newSessionResponse
	if r.status != http.StatusOK || decodeStrict(r.body, &created) != nil {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	id := created.SessionID
	turn := func(script string, until ...func(sseEvent) bool) []sseEvent {
		t.Helper()
		req, _ := http.NewRequest("GET", td.url+"/session/"+id+"/events", nil)
		req.Header.Set(auth[0], auth[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": script}}})
		r := td.do(t, "POST", "/session/"+id+"/prompt", string(body), auth...)
		var acc promptAccepted
		if r.status != http.StatusAccepted || decodeStrict(r.body, &acc) != nil {
			t.Fatalf("prompt = %d %s", r.status, r.body)
		}
		stop := untilTurnEnd(acc.PromptID)
		if len(until) > 0 {
			stop = until[0]
		}
		return readSSE(t, bufio.NewReader(resp.Body), stop)
	}
	turn(strings.Join([]string{
		`prepare write_file {"file_path":"a.txt","content":"SECRET-ARGUMENT"}`,
		`prepare run_shell_command {"command":"ls"}`,
		`prepare broken {}`,
		`forge - stale-prompt write_file {}`,
	}, "\n"))
	turn("fail")

	m := td.scrape(t, auth...)
	for series, want := range map[string]float64{
		`acpguard_serve_decisions_total{outcome="allowed"}`:                      1,
		`acpguard_serve_decisions_total{outcome="denied"}`:                       1,
		`acpguard_serve_decisions_total{outcome="failed"}`:                       2,
		`acpguard_serve_decision_failures_total{category="http_status"}`:         1,
		`acpguard_serve_decision_failures_total{category="stale_prompt"}`:        1,
		`acpguard_serve_decision_failures_total{category="identity_mismatch"}`:   0,
		`acpguard_serve_provider_request_duration_seconds_count`:                 3,
		`acpguard_serve_provider_request_duration_seconds_bucket{le="+Inf"}`:     3,
		`acpguard_serve_sessions`:                                                1,
		`acpguard_serve_sessions_created_total`:                                  1,
		`acpguard_serve_prompts_total{result="end_turn"}`:                        1,
		`acpguard_serve_prompts_total{result="error"}`:                           1,
		`acpguard_serve_children`:                                                1,
		`acpguard_serve_children_started_total`:                                  1,
		`acpguard_serve_children_died_total`:                                     0,
		`acpguard_serve_limit_hits_total{code="prompt_queue_full"}`:              0,
		`acpguard_serve_decision_failures_total{category="decision_log_failed"}`: 0,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if m[`acpguard_serve_provider_request_duration_seconds_sum`] <= 0 {
		t.Error("provider latency sum did not move")
	}

	// A child that dies is counted, and its session is no longer live.
	turn("die", func(ev sseEvent) bool { return ev.typ == eventSessionDied })
	m = td.scrape(t, auth...)
	if m["acpguard_serve_children_died_total"] != 1 || m["acpguard_serve_children"] != 0 || m["acpguard_serve_sessions"] != 0 {
		t.Errorf("after a child died: died %v, live children %v, live sessions %v; want 1, 0, 0",
			m["acpguard_serve_children_died_total"], m["acpguard_serve_children"], m["acpguard_serve_sessions"])
	}
	if !strings.Contains(td.stderr.String(), `level=WARN msg="ACP child exited"`) {
		t.Errorf("no log line for the child's death:\n%s", td.stderr.String())
	}

	log := td.stderr.String()
	for _, secret := range []string{hostToken, prov.token, "SECRET-ARGUMENT"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log contains %q:\n%s", secret, log)
		}
	}
}

func TestServeToolExecutionMetrics(t *testing.T) {
	o := newServeObserver(slog.New(slog.DiscardHandler))
	update := func(kind, status, tool string) {
		o.toolUpdate(json.RawMessage(fmt.Sprintf(`{"sessionUpdate":%q,"toolCallId":"c1","status":%q,"_meta":{"toolName":%q}}`, kind, status, tool)))
	}
	update("tool_call_update", "completed", "write_file")
	update("tool_call_update", "completed", "write_file")
	update("tool_call_update", "failed", "run_shell_command")
	update("tool_call_update", "in_progress", "write_file") // not an end
	update("tool_call", "completed", "read_file")           // not an update
	update("tool_call_update", "completed", "mcp__srv__x")
	update("tool_call_update", "failed", "bad\"name\n")
	update("tool_call_update", "failed", "")
	o.toolUpdate(json.RawMessage(`{"sessionUpdate":"tool_call_update","status":"completed","_meta":"x"}`)) // malformed: not counted
	for i := range maxToolSeries {
		update("tool_call_update", "completed", fmt.Sprintf("mcp__many__t%d", i))
	}
	samples, err := promParseStrict(string(o.render(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for k := range samples {
		if strings.HasPrefix(k, "acpguard_serve_tool_executions_total{") {
			series++
		}
	}
	for k, want := range map[string]float64{
		`acpguard_serve_tool_executions_total{status="completed",tool="write_file"}`:     2,
		`acpguard_serve_tool_executions_total{status="failed",tool="run_shell_command"}`: 1,
		`acpguard_serve_tool_executions_total{status="completed",tool="mcp__srv__x"}`:    1,
		`acpguard_serve_tool_executions_total{status="failed",tool="other"}`:             2,
		`acpguard_serve_tool_executions_total{status="completed",tool="mcp__many__t0"}`:  1,
		`acpguard_serve_tool_executions_total{status="completed",tool="read_file"}`:      0,
		`acpguard_serve_tool_executions_total{status="completed",tool="other"}`:          4, // past maxToolSeries
	} {
		if samples[k] != want {
			t.Errorf("%s = %v, want %v", k, samples[k], want)
		}
	}
	if series > maxToolSeries+1 {
		t.Errorf("%d tool series, want at most %d", series, maxToolSeries+1)
	}
}

func TestServeLogFlags(t *testing.T) {
	td := startTestDaemon(t, serveOptions{LogJSON: true, Limits: serveLimits{MaxSessions: 1}}, fakeChildEnv(""))
	td.newSession(t, "")
	wantError(t, td.do(t, "POST", "/session", `{"sessionScope":"thread"}`), http.StatusServiceUnavailable, codeSessionLimit)
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(td.stderr.String()), "\n") {
		var rec struct {
			Level, Msg, Code string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level == "" {
			t.Fatalf("log line %q is not a JSON log record: %v", line, err)
		}
		msgs = append(msgs, rec.Level+" "+rec.Msg+" "+rec.Code)
	}
	want := []string{"INFO listening ", "INFO ACP child started ", "INFO session created ", "WARN limit reached session_limit_exceeded"}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Errorf("log = %q, want %q", msgs, want)
	}

	quiet := startTestDaemon(t, serveOptions{LogLevel: slog.LevelWarn, Limits: serveLimits{MaxSessions: 1}}, fakeChildEnv(""))
	quiet.newSession(t, "")
	quiet.do(t, "POST", "/session", `{"sessionScope":"thread"}`)
	lines := strings.Split(strings.TrimSpace(quiet.stderr.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=WARN msg="limit reached" code=session_limit_exceeded`) {
		t.Errorf("--log-level warn logged %q, want only the limit warning", lines)
	}
}

// FuzzServeToolUpdate: whatever a child puts in a session update, counting
// it never panics and the metrics still parse.
func FuzzServeToolUpdate(f *testing.F) {
	for _, seed := range []string{
		`{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed","_meta":{"toolName":"write_file"}}`,
		`{"sessionUpdate":"tool_call_update","status":"failed","_meta":{"toolName":"a\"b\\c\nd"}}`,
		`{"sessionUpdate":"tool_call_update","status":"failed","_meta":{"toolName":"\u0000"}}`,
		`{"sessionUpdate":"tool_call_update","status":"completed","_meta":null}`,
		`{"sessionUpdate":"tool_call_update"}`, `"tool_call_update"`, `[]`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, update []byte) {
		o := newServeObserver(slog.New(slog.DiscardHandler))
		o.toolUpdate(update)
		out := o.render(0, 0)
		if _, err := promParseStrict(string(out)); err != nil {
			t.Fatalf("update %q: metrics do not parse: %v\n%s", update, err, out)
		}
	})
}

func BenchmarkServeToolUpdate(b *testing.B) {
	o := newServeObserver(slog.New(slog.DiscardHandler))
	for _, u := range []struct{ name, update string }{
		{"message", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}`},
		{"tool_end", `{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}],"rawOutput":{"output":"ok"},"_meta":{"toolName":"write_file"}}`},
	} {
		b.Run(u.name, func(b *testing.B) {
			raw := json.RawMessage(u.update)
			b.ReportAllocs()
			for range b.N {
				o.toolUpdate(raw)
			}
		})
	}
}

// BenchmarkServeUpdateBookkeeping is serve's own work on the three
// session/update notifications of one guarded write_file, as onNotify does
// it: count the tool's end, publish the update to a log one stream follows.
func BenchmarkServeUpdateBookkeeping(b *testing.B) {
	o := newServeObserver(slog.New(slog.DiscardHandler))
	l := newStreamLog()
	sub := l.subscribe(0, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, ended, _ := takeAll(l, sub); ended {
				return
			}
			<-sub.wake
		}
	}()
	diff := &fileDiff{Path: "/w/out.txt", New: "1"}
	head := &toolHead{id: "call_1", title: "WriteFile out.txt", kind: "edit", toolName: "write_file",
		rawInput: []byte(`{"content":"1","file_path":"/w/out.txt"}`), locations: []toolLocation{{Path: "/w/out.txt"}}}
	updates := [][]byte{
		toolPendingUpdate(head, diff),
		toolRunningUpdate(head),
		toolFinishUpdate("call_1", "write_file", "completed", "Wrote 1 byte to /w/out.txt.", diff, []byte(`{"output":"Wrote 1 byte to /w/out.txt."}`)),
	}
	b.ReportAllocs()
	for range b.N {
		for _, u := range updates {
			o.toolUpdate(u)
			l.publishUpdate("p1", sessionUpdateEvent{SessionID: "s1", Update: u})
		}
	}
	b.StopTimer()
	l.close()
	<-done
}

func BenchmarkServeMetricsRender(b *testing.B) {
	o := newServeObserver(slog.New(slog.DiscardHandler))
	for i := range 20 {
		o.toolUpdate(json.RawMessage(fmt.Sprintf(`{"sessionUpdate":"tool_call_update","status":"completed","_meta":{"toolName":"tool%d"}}`, i)))
	}
	b.ReportAllocs()
	for range b.N {
		o.render(32, 2)
	}
}

// TestServeUsageListsMetricFamilies keeps serve's usage text in step with
// the families /metrics exposes.
func TestServeUsageListsMetricFamilies(t *testing.T) {
	_, list, _ := strings.Cut(serveUsage, "all prefixed")
	list, _, _ = strings.Cut(list, "\n\n")
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(list, func(r rune) bool { return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) }) {
		words[w] = true
	}
	o := newServeObserver(slog.New(slog.DiscardHandler))
	families := 0
	for _, line := range strings.Split(string(o.render(0, 0)), "\n") {
		rest, ok := strings.CutPrefix(line, "# TYPE acpguard_serve_")
		if !ok {
			continue
		}
		families++
		name, _, _ := strings.Cut(rest, " ")
		if !words[name] {
			t.Errorf("serve usage does not list the metric family %s", name)
		}
	}
	if families != 17 {
		t.Errorf("%d families, want 17", families)
	}
}
