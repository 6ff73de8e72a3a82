// serve_cost_test.go owns the cost measurements of the release binary run as
// separate processes: CPU time and context switches per guarded call (serve,
// its ACP children and the provider) for each workload of costWorkloads,
// and resident memory per session in its own workspace. Both
// are off by default; run them with
//
//	ACPGUARD_LOAD=1 go test -run 'TestCost' -v -count=1 .
//
// and compare another build in the same run with ACPGUARD_BENCH_BIN=/path
// (envBenchBin). ACPGUARD_BENCH_MAX_CHILDREN=N passes --max-children N to
// serve; without it no flag an older build may lack is passed.
// ACPGUARD_COST_CALLS=N measures N calls instead of costCalls: the run's
// fixed costs then weigh less in the per-call figures.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envBenchMaxChildren, when set, is passed to serve as --max-children.
const envBenchMaxChildren = "ACPGUARD_BENCH_MAX_CHILDREN"

// envCostCalls, when set to a number, replaces costCalls.
const envCostCalls = "ACPGUARD_COST_CALLS"

// envCostWorkspaces, when set to a number, replaces costWorkspaces: a
// session per workspace is the shape of many workspaces on one daemon.
const envCostWorkspaces = "ACPGUARD_COST_WORKSPACES"

// costWorkspacesToRun is costWorkspaces, or envCostWorkspaces when it
// names a positive number.
func costWorkspacesToRun(t *testing.T) int {
	v, set := os.LookupEnv(envCostWorkspaces)
	if !set {
		return costWorkspaces
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of workspaces, at least 1", envCostWorkspaces, v)
	}
	return n
}

// costCallsToRun is costCalls, or envCostCalls when it names a number
// that gives every session at least one prompt.
func costCallsToRun(t *testing.T, sessions, perPrompt int) int {
	v, set := os.LookupEnv(envCostCalls)
	if !set {
		return costCalls
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < sessions*perPrompt {
		t.Fatalf("%s=%q: want a number of calls, at least %d (sessions x calls per prompt)", envCostCalls, v, sessions*perPrompt)
	}
	return n
}

// The CPU run's shape: costCalls guarded calls of a workload, measured
// after one warm-up call per session, spread over the sessions of a case;
// the sessions share at most costWorkspaces workspaces, as in TestLoadServe.
// One call in costDenyEvery is denied by the provider.
const (
	costCalls      = 960
	costWorkspaces = 4
	costDenyEvery  = 5
	// costDeniedSuffix ends the file name of a call the provider denies.
	costDeniedSuffix = "-d.txt"
	// costDenyReason is the provider's reason for every denied call.
	costDenyReason = "cost: denied by policy"
)

// The workloads of the CPU run: what a guarded call does once allowed.
const (
	// costWriteNew writes a new file per call, as a coding agent does;
	// the kernel's creation of the file is a large part of the child's CPU
	// and varies with the file system and what it deleted lately.
	costWriteNew = "write-new"
	// costRead reads one small existing file per call, so that the
	// guard's own cost is most of what is measured.
	costRead = "read"
)

// costWorkloads are the workloads measured, each with every case.
var costWorkloads = []string{costWriteNew, costRead}

// The files of the costRead workload, in every workspace: allowed calls
// read costReadFile, denied ones costReadDeniedFile (which exists, so a
// denied call that ran would complete).
const (
	costReadFile       = "cost-read.txt"
	costReadDeniedFile = "cost-read" + costDeniedSuffix
)

// costCPUCases are the session counts and calls per prompt measured.
var costCPUCases = []struct{ sessions, perPrompt int }{{1, 1}, {1, 10}, {8, 10}, {32, 10}}

// costRSSCounts are the session counts of the memory run, each session in
// a workspace of its own.
var costRSSCounts = []int{1, 32, 128}

var (
	// costSettle is how long sessions stay idle before their memory is
	// read, and how long after the last DELETE: a measurement pause, not a
	// bound on anything.
	costSettle = 1 * time.Second
	// costChildrenExit bounds the wait for serve's children to exit after
	// every session is deleted; some builds keep them.
	costChildrenExit = testTimeout(5 * time.Second)
	costRunTimeout   = testTimeout(5 * time.Minute)
)

func init() {
	// The minimal provider of the cost runs, as its own process.
	testRoles["cost-provider"] = runCostProvider
}

// costFile names the file call c of session s writes or reads in
// workload; denied calls' names end in costDeniedSuffix.
func costFile(workload string, s, c int) string {
	denied := c%costDenyEvery == costDenyEvery-1
	switch {
	case workload == costRead && denied:
		return costReadDeniedFile
	case workload == costRead:
		return costReadFile
	case denied:
		return fmt.Sprintf("s%03d-c%04d%s", s, c, costDeniedSuffix)
	}
	return fmt.Sprintf("s%03d-c%04d.txt", s, c)
}

// costCall is the scripted prompt line of workload's call on name.
func costCall(workload, name string) string {
	if workload == costRead {
		return `call read_file {"file_path":"` + name + `"}`
	}
	return writeCall(name)
}

// costVerdict allows write_file and read_file of a name without
// costDeniedSuffix.
func costVerdict(tool string, args json.RawMessage) (int, bool, string) {
	var in struct {
		FilePath string `json:"file_path"`
	}
	json.Unmarshal(args, &in)
	if (tool != toolWriteFile && tool != toolReadFile) || strings.HasSuffix(in.FilePath, costDeniedSuffix) {
		return http.StatusOK, false, costDenyReason
	}
	return http.StatusOK, true, ""
}

// costProviderCallsPath answers the minimal provider's decided calls.
const costProviderCallsPath = "/bench/calls"

// costDecided is one prepare the minimal provider answered: the call's
// session/prompt/toolCallId key and the base name of its file_path.
type costDecided struct {
	Key  string `json:"key"`
	Name string `json:"name"`
}

// runCostProvider is the "cost-provider" role: testProvider with
// costVerdict on a loopback port, announced on stdout, until stdin ends.
// GET costProviderCallsPath answers a costDecided for every prepare, in
// order.
func runCostProvider(string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p := &testProvider{token: os.Getenv(envGuardToken), verdict: costVerdict}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != costProviderCallsPath {
			p.serveHTTP(w, r)
			return
		}
		p.mu.Lock()
		var out []costDecided
		for _, c := range p.calls {
			var in struct {
				FilePath string `json:"file_path"`
			}
			json.Unmarshal(c["arguments"], &in)
			var session, prompt, call string
			json.Unmarshal(c["sessionId"], &session)
			json.Unmarshal(c["promptId"], &prompt)
			json.Unmarshal(c["toolCallId"], &call)
			out = append(out, costDecided{Key: session + "/" + prompt + "/" + call, Name: filepath.Base(in.FilePath)})
		}
		p.mu.Unlock()
		json.NewEncoder(w).Encode(out)
	}))
	fmt.Printf("cost-provider listening on http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// costProvider is a provider process of a cost run.
type costProvider struct {
	kind      string // "minimal" or "reference"
	url       string
	pid       int
	tokenFile string
	// decided returns how many prepares the provider answered allow and
	// deny for each call it names.
	decided func(t *testing.T) (allowed, denied map[string]int)
}

// startCostProvider starts the minimal provider (this test binary's
// "cost-provider" role) or the reference one (bin's "acpguard provider" on
// examples/policy.json with one rule denying costDeniedSuffix in front)
// until the test ends.
func startCostProvider(t *testing.T, kind, bin string) *costProvider {
	t.Helper()
	token := "cost-guard-token-for-tests"
	p := &costProvider{kind: kind, tokenFile: filepath.Join(t.TempDir(), "guard-token")}
	mustWrite(t, p.tokenFile, token)
	if err := os.Chmod(p.tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	var announce io.ReadCloser
	var prefix string
	switch kind {
	case "minimal":
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(exe)
		cmd.Env = append(os.Environ(), roleEnv("cost-provider"), envGuardToken+"="+token)
		announce, err = cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		// The role lives until its stdin ends.
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		prefix = "cost-provider listening on "
		p.decided = func(t *testing.T) (map[string]int, map[string]int) {
			resp, err := http.Get(p.url + costProviderCallsPath)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var calls []costDecided
			if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
				t.Fatal(err)
			}
			allowed, denied := map[string]int{}, map[string]int{}
			for _, c := range calls {
				if strings.HasSuffix(c.Name, costDeniedSuffix) {
					denied[c.Key]++
				} else {
					allowed[c.Key]++
				}
			}
			return allowed, denied
		}
	case "reference":
		var rules []json.RawMessage
		raw, err := os.ReadFile("examples/policy.json")
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(doc["rules"], &rules); err != nil {
			t.Fatal(err)
		}
		var deny []json.RawMessage
		for _, tool := range []string{toolWriteFile, toolReadFile} {
			deny = append(deny, json.RawMessage(mustJSON(t, map[string]any{"tool": tool,
				"match":    map[string]string{"/file_path": regexp.QuoteMeta(costDeniedSuffix) + "$"},
				"decision": "deny", "reason": costDenyReason})))
		}
		doc["rules"], _ = json.Marshal(append(deny, rules...))
		policy := filepath.Join(t.TempDir(), "policy.json")
		mustWrite(t, policy, mustJSON(t, doc))
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		cmd = exec.Command(bin, "provider", "--policy", policy, "--listen", "127.0.0.1:0", "--audit", audit)
		cmd.Env = append(os.Environ(), envGuardToken+"="+token)
		announce, err = cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		prefix = "acpguard provider: listening on "
		p.decided = func(t *testing.T) (map[string]int, map[string]int) {
			allowed, denied := map[string]int{}, map[string]int{}
			for _, r := range readProviderAudit(t, audit) {
				key := r.SessionID + "/" + r.PromptID + "/" + r.ToolCallID
				switch r.Decision {
				case providerDecisionName(true):
					allowed[key]++
				case providerDecisionName(false):
					denied[key]++
				default:
					t.Errorf("audit decision %q", r.Decision)
				}
			}
			return allowed, denied
		}
	default:
		t.Fatalf("provider kind %q", kind)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.pid = cmd.Process.Pid
	announced := make(chan string, 1)
	var out syncBuffer
	go func() {
		sc := bufio.NewScanner(announce)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if u, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				announced <- u
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	select {
	case p.url = <-announced:
	case <-time.After(testTimeout(20 * time.Second)):
		t.Fatalf("%s provider did not announce its URL: %q", kind, out.String())
	}
	return p
}

// startCostServe starts bin's serve in required mode against p, with a
// decision log, the yolo approval mode (the guard is the only gate) and a
// workspace flag per entry of wss.
func startCostServe(t *testing.T, bin string, p *costProvider, wss []string, maxSessions int) (releaseServe, string, func()) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	args := []string{"--settings", yoloSettings(t), "--no-user-settings", "--decision-log", logPath,
		"--external-tool-guard-mode", guardModeRequired, "--external-tool-guard-endpoint", p.url,
		"--external-tool-guard-token-file", p.tokenFile, "--" + flagAllowTokenlessLoopback,
		"--max-sessions", strconv.Itoa(max(maxSessions, defaultMaxSessions))}
	if n := os.Getenv(envBenchMaxChildren); n != "" {
		args = append(args, "--max-children", n)
	}
	for _, ws := range wss {
		args = append(args, "--workspace", ws)
	}
	d, stop := startReleaseServe(t, bin, args...)
	return d, logPath, stop
}

// costSession is one session of a cost run and everything its stream showed.
type costSession struct {
	n, ws   int
	id      string
	stream  *bufio.Reader
	evs     []sseEvent
	pids    []string
	files   []string
	perCall []time.Duration
}

// turn runs one prompt of workload's calls on files and reads its events.
func (s *costSession) turn(base, workload string, files []string) error {
	var lines []string
	for _, f := range files {
		lines = append(lines, costCall(workload, f))
	}
	start := time.Now()
	pid, err := postPrompt(base, s.id, strings.Join(lines, "\n"))
	if err != nil {
		return err
	}
	evs, err := collectSSE(s.stream, untilTurnEnd(pid))
	if err != nil {
		return fmt.Errorf("session %d stream: %v after %d events", s.n, err, len(evs))
	}
	s.perCall = append(s.perCall, time.Since(start)/time.Duration(len(files)))
	s.evs, s.pids, s.files = append(s.evs, evs...), append(s.pids, pid), append(s.files, files...)
	return nil
}

// TestCostCPUPerCall measures the CPU time serve and its children, serve
// alone, and the provider separately, spend per guarded call, their context
// switches per call, the throughput and the per-call latency, for each
// provider, case of costCPUCases and workload of costWorkloads.
func TestCostCPUPerCall(t *testing.T) {
	skipUnlessLoad(t)
	bin := releaseBinary(t)
	for _, kind := range []string{"minimal", "reference"} {
		for _, c := range costCPUCases {
			for _, w := range costWorkloads {
				t.Run(fmt.Sprintf("provider=%s/sessions=%d/calls-per-prompt=%d/workload=%s", kind, c.sessions, c.perPrompt, w), func(t *testing.T) {
					runCostCPU(t, bin, kind, w, c.sessions, c.perPrompt)
				})
			}
		}
	}
}

func runCostCPU(t *testing.T, bin, kind, workload string, nSessions, perPrompt int) {
	nCalls := costCallsToRun(t, nSessions, perPrompt)
	prov := startCostProvider(t, kind, bin)
	var wss []string
	for range min(nSessions, costWorkspacesToRun(t)) {
		ws := t.TempDir()
		if workload == costRead {
			mustWrite(t, filepath.Join(ws, costReadFile), "cost\n")
			mustWrite(t, filepath.Join(ws, costReadDeniedFile), "cost\n")
		}
		wss = append(wss, ws)
	}
	d, logPath, stop := startCostServe(t, bin, prov, wss, nSessions)
	defer stop()
	td := &testDaemon{url: d.url}
	ctx, cancel := context.WithTimeout(context.Background(), costRunTimeout)
	defer cancel()
	var sessions []*costSession
	for i := range nSessions {
		s := &costSession{n: i, ws: i % len(wss)}
		s.id = td.newSession(t, `{"cwd":`+strconv.Quote(wss[s.ws])+`}`)
		req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+s.id+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		s.stream = bufio.NewReader(resp.Body)
		sessions = append(sessions, s)
	}
	// One allowed call per session, all sessions at once as in the
	// measured run, starts the children and opens the connections the run
	// uses: a host connection per session (serve checks each new one's
	// peer once, DESIGN.md §2) and serve's to the provider. The run then
	// measures calls, not the opening of connections.
	var warm sync.WaitGroup
	warmErrs := make([]error, len(sessions))
	for k, s := range sessions {
		warm.Go(func() {
			file := costReadFile
			if workload == costWriteNew {
				file = fmt.Sprintf("s%03d-warm.txt", s.n)
			}
			warmErrs[k] = s.turn(td.url, workload, []string{file})
		})
	}
	warm.Wait()
	if err := errors.Join(warmErrs...); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		s.perCall = nil
	}

	perSession := nCalls / nSessions
	serve0, prov0 := treeCPU(t, d.pid), treeCPU(t, prov.pid)
	own0, err := procOwnCPU(d.pid)
	if err != nil {
		t.Fatal(err)
	}
	sw0, ownSw0 := treeCtxSwitches(t, d.pid)
	provSw0, _ := treeCtxSwitches(t, prov.pid)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	for k, s := range sessions {
		wg.Go(func() {
			for c := 0; c < perSession; c += perPrompt {
				var files []string
				for i := c; i < min(c+perPrompt, perSession); i++ {
					files = append(files, costFile(workload, s.n, i))
				}
				if err := s.turn(td.url, workload, files); err != nil {
					errs[k] = err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Read before serve stops: its children's time counts while they run.
	serveCPU, provCPU := treeCPU(t, d.pid)-serve0, treeCPU(t, prov.pid)-prov0
	ownCPU, err := procOwnCPU(d.pid)
	if err != nil {
		t.Fatal(err)
	}
	ownCPU -= own0
	sw, ownSw := treeCtxSwitches(t, d.pid)
	sw, ownSw = sw-sw0, ownSw-ownSw0
	provSw, _ := treeCtxSwitches(t, prov.pid)
	provSw -= provSw0
	_, children := treeRSS(t, d.pid)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	// Every call was one provider request; no denied call ran: its update
	// failed with the provider's reason, and (write-new) wrote no file.
	calls := perSession * nSessions
	wantDeny := nSessions * (perSession / costDenyEvery)
	wantAllow := calls - wantDeny + nSessions // and the warm-up calls
	allowed, denied := prov.decided(t)
	for key, n := range allowed {
		if n != 1 {
			t.Errorf("provider allowed %s %d times, want once", key, n)
		}
	}
	for key, n := range denied {
		if n != 1 {
			t.Errorf("provider denied %s %d times, want once", key, n)
		}
	}
	if len(allowed) != wantAllow || len(denied) != wantDeny {
		t.Errorf("provider decided %d calls allowed and %d denied, want %d and %d", len(allowed), len(denied), wantAllow, wantDeny)
	}
	var completed, failed int
	for _, s := range sessions {
		c, f, err := checkSessionStream(s.evs, s.pids)
		if err != nil {
			t.Errorf("session %d: %v", s.n, err)
		}
		completed, failed = completed+c, failed+f
		checkCostCalls(t, s)
		if workload != costWriteNew {
			continue
		}
		for _, name := range s.files {
			_, err := os.Stat(filepath.Join(wss[s.ws], name))
			switch deniedName := strings.HasSuffix(name, costDeniedSuffix); {
			case err == nil && deniedName:
				t.Errorf("%s: denied but written", name)
			case err != nil && !deniedName:
				t.Errorf("%s: allowed but not written: %v", name, err)
			}
		}
	}
	if completed != wantAllow || failed != wantDeny {
		t.Errorf("event streams show %d completed and %d failed calls, want %d and %d", completed, failed, wantAllow, wantDeny)
	}
	stop()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for _, rec := range decisions(t, string(data)) {
		outcomes[rec.Outcome]++
	}
	if outcomes[outcomeAllowed] != wantAllow || outcomes[outcomeDenied] != wantDeny || len(outcomes) != 2 {
		t.Errorf("decision log outcomes = %v, want %d allowed and %d denied", outcomes, wantAllow, wantDeny)
	}

	var perCall []time.Duration
	for _, s := range sessions {
		perCall = append(perCall, s.perCall...)
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	perCallOf := func(n int64) float64 { return float64(n) / float64(calls) }
	t.Logf("cost-cpu: provider=%s workload=%s sessions=%d workspaces=%d children=%d calls-per-prompt=%d calls=%d cpu-us/call=%.0f serve-cpu-us/call=%.0f provider-cpu-us/call=%.0f ctxsw/call=%.1f serve-ctxsw/call=%.1f provider-ctxsw/call=%.1f calls/s=%.0f p50-us/call=%.0f p99-us/call=%.0f",
		kind, workload, nSessions, len(wss), children, perPrompt, calls,
		us(serveCPU)/float64(calls), us(ownCPU)/float64(calls), us(provCPU)/float64(calls),
		perCallOf(sw), perCallOf(ownSw), perCallOf(provSw), float64(calls)/elapsed.Seconds(),
		us(percentile(perCall, 0.5)), us(percentile(perCall, 0.99)))
}

// checkCostCalls checks every guarded call of s's stream against the
// provider's verdict on its file's name: a denied name's call failed with
// costDenyReason, an allowed one completed, and the calls are those of
// s.files, each as often as it was asked for.
func checkCostCalls(t *testing.T, s *costSession) {
	t.Helper()
	type call struct {
		name, status string
		out          json.RawMessage
	}
	calls := map[string]*call{}
	for _, ev := range s.evs {
		if ev.typ != eventSessionUpdate {
			continue
		}
		key, u, ok := toolCallUpdate(parseEnvelope(t, ev))
		if !ok {
			continue
		}
		c := calls[key]
		if c == nil {
			c = &call{}
			calls[key] = c
		}
		var in struct {
			FilePath string `json:"file_path"`
		}
		if json.Unmarshal(u.RawInput, &in) == nil && in.FilePath != "" {
			c.name = filepath.Base(in.FilePath)
		}
		if u.Status != "" {
			c.status, c.out = u.Status, u.RawOutput
		}
	}
	asked, seen := map[string]int{}, map[string]int{}
	for _, f := range s.files {
		asked[f]++
	}
	for key, c := range calls {
		seen[c.name]++
		switch denied := strings.HasSuffix(c.name, costDeniedSuffix); {
		case c.name == "":
			t.Errorf("session %d call %s: no file_path in its updates", s.n, key)
		case denied && (c.status != "failed" || !strings.Contains(string(c.out), costDenyReason)):
			t.Errorf("session %d call %s on %q: denied but ended %q %s, want failed with %q", s.n, key, c.name, c.status, c.out, costDenyReason)
		case !denied && c.status != "completed":
			t.Errorf("session %d call %s on %q: allowed but ended %q %s, want completed", s.n, key, c.name, c.status, c.out)
		}
	}
	if !maps.Equal(asked, seen) {
		t.Errorf("session %d: calls by file = %v, want %v", s.n, seen, asked)
	}
}

// TestCostRSSPerSession measures the resident memory of serve and all its
// children with each count of costRSSCounts of idle sessions, each in a
// workspace of its own, the time of each POST /session, and the memory
// left once every session is deleted.
func TestCostRSSPerSession(t *testing.T) {
	skipUnlessLoad(t)
	bin := releaseBinary(t)
	prov := startCostProvider(t, "minimal", bin)
	for _, n := range costRSSCounts {
		t.Run(fmt.Sprintf("sessions=%d", n), func(t *testing.T) {
			var wss []string
			for range n {
				wss = append(wss, t.TempDir())
			}
			d, _, stop := startCostServe(t, bin, prov, wss, n)
			defer stop()
			td := &testDaemon{url: d.url}
			alone, _ := treeRSS(t, d.pid)
			var ids []string
			var creates []time.Duration
			all := time.Now()
			for _, ws := range wss {
				start := time.Now()
				ids = append(ids, td.newSession(t, `{"cwd":`+strconv.Quote(ws)+`}`))
				creates = append(creates, time.Since(start))
			}
			createAll := time.Since(all)
			time.Sleep(costSettle)
			idle, children := treeRSS(t, d.pid)
			for _, id := range ids {
				if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
					t.Fatalf("DELETE /session/%s = %d %s", id, r.status, r.body)
				}
			}
			deadline := time.Now().Add(costChildrenExit)
			for len(descendants(t, d.pid)) > 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(costSettle)
			after, left := treeRSS(t, d.pid)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
			t.Logf("cost-rss: sessions=%d workspaces=%d children=%d daemon-alone-kB=%d total-MB=%.1f kB/session=%d added-kB/session=%d create-p50-ms=%.2f create-p99-ms=%.2f create-total-s=%.2f after-delete-MB=%.1f children-after-delete=%d",
				n, len(wss), children, alone, float64(idle)/1024, idle/n, (idle-alone)/n,
				ms(percentile(creates, 0.5)), ms(percentile(creates, 0.99)), createAll.Seconds(), float64(after)/1024, left)
		})
	}
}

// The shape of TestGuardOverheadProcesses: per round, guardProcTurns turns
// of overheadCalls read_file calls on each side, the sides alternating.
const guardProcTurns = 40

// TestGuardOverheadProcesses measures the guard's added p50 per call as
// operators run it, each party a process of its own: the release binary's
// serve and its child, the minimal provider, and this test as the host.
// Two serves share one workspace, one with the guard off and one in
// required mode, a session each; their turns alternate, and the added time
// is the difference of the two p50s per call. Each round also runs the
// floor benchmark (BenchmarkGuardHopFloor, itself separate processes), so
// that the ratio is of figures from the same minutes. Off by default:
//
//	ACPGUARD_LOAD=1 go test -run TestGuardOverheadProcesses -v -count=1 .
func TestGuardOverheadProcesses(t *testing.T) {
	skipUnlessLoad(t)
	bin := releaseBinary(t)
	prov := startCostProvider(t, "minimal", bin)
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, costReadFile), "hello\n")
	on, _, stopOn := startCostServe(t, bin, prov, []string{ws}, 1)
	defer stopOn()
	off, stopOff := startReleaseServe(t, bin, "--settings", yoloSettings(t), "--no-user-settings",
		"--external-tool-guard-mode", guardModeOff, "--workspace", ws)
	defer stopOff()

	ctx, cancel := context.WithTimeout(context.Background(), costRunTimeout)
	defer cancel()
	open := func(url string) *costSession {
		td := &testDaemon{url: url}
		s := &costSession{id: td.newSession(t, `{"cwd":`+strconv.Quote(ws)+`}`)}
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/session/"+s.id+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		s.stream = bufio.NewReader(resp.Body)
		return s
	}
	sides := []struct {
		url string
		s   *costSession
	}{{off.url, open(off.url)}, {on.url, open(on.url)}}
	files := slices.Repeat([]string{costReadFile}, overheadCalls)
	turn := func(i int) {
		if err := sides[i].s.turn(sides[i].url, costRead, files); err != nil {
			t.Fatal(err)
		}
	}
	// One turn each starts the children and warms the connections.
	turn(0)
	turn(1)
	var ratios, floors, added []float64
	for round := range guardRatioRounds {
		sides[0].s.perCall, sides[1].s.perCall = nil, nil
		f := runBenchmark(t, guardRatioBenchFloor, guardRatioFloorHops)["p50-us/call"]
		for k := range guardProcTurns {
			turn((k + round) % 2)
			turn((k + round + 1) % 2)
		}
		p50 := func(d []time.Duration) float64 {
			d = slices.Clone(d)
			slices.Sort(d)
			return float64(d[len(d)/2].Nanoseconds()) / 1e3
		}
		offP50, onP50 := p50(sides[0].s.perCall), p50(sides[1].s.perCall)
		a := onP50 - offP50
		ratios, floors, added = append(ratios, a/f), append(floors, f), append(added, a)
		t.Logf("guard-processes-round: round=%d floor-p50-us=%.0f off-p50-us/call=%.0f guarded-p50-us/call=%.0f added-p50-us/call=%.0f ratio=%.2f",
			round, f, offP50, onP50, a, a/f)
	}
	// Every guarded call was one provider decision, and every call ran.
	allowed, denied := prov.decided(t)
	if want := (1 + guardRatioRounds*guardProcTurns) * overheadCalls; len(allowed) != want || len(denied) != 0 {
		t.Errorf("provider allowed %d calls and denied %d, want %d and 0", len(allowed), len(denied), want)
	}
	for _, side := range sides {
		if _, failed, err := checkSessionStream(side.s.evs, side.s.pids); err != nil || failed != 0 {
			t.Errorf("stream of %s: %d failed calls, %v", side.url, failed, err)
		}
	}
	t.Logf("guard-processes: rounds=%d floor-p50-us=%.0f added-p50-us/call=%.0f ratio=%.2f bound=%.1f (medians of the rounds)",
		guardRatioRounds, median(floors), median(added), median(ratios), guardFloorRatioBound)
}
