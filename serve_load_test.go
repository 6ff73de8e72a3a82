// serve_load_test.go holds the load run and the footprint measurement of
// "acpguard serve". Both are off by default; run them with
//
//	ACPGUARD_LOAD=1 go test -run 'TestLoadServe|TestLoadEventRingMemory|TestFootprint' -v -count=1 .
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// envLoad turns on the load run and the footprint measurement.
const envLoad = "ACPGUARD_LOAD"

func skipUnlessLoad(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv(envLoad) != "1" {
		t.Skip("set " + envLoad + "=1 (and no -short) to run")
	}
}

// The load run's shape: 32 concurrent sessions x 50 guarded tool calls each
// through serve, with a counting provider that denies a known fraction.
const (
	loadWorkspaces     = 4
	loadSessionsPerWS  = 8
	loadPromptsPerSess = 5
	loadCallsPerPrompt = 10
	loadDenyEvery      = 5 // calls whose index is divisible by this are denied
)

var (
	loadStreamTimeout   = testTimeout(5 * time.Minute)
	loadGoroutineSettle = testTimeout(5 * time.Second)
)

// loadFile names the marker file one call writes.
func loadFile(session, call int) string { return fmt.Sprintf("s%02d-c%02d.txt", session, call) }

// loadDenied reports whether the provider denies the call writing name.
func loadDenied(name string) bool {
	var s, c int
	fmt.Sscanf(name, "s%02d-c%02d.txt", &s, &c)
	return c%loadDenyEvery == 0
}

// loadHost is the host of the load and cost runs: it keeps a connection per
// session alive, as a pooling host does (http.DefaultClient keeps two), so
// a run measures prompts, not serve's check of each new connection's peer.
var loadHost = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// postPrompt is td.prompt for goroutines other than the test's.
func postPrompt(base, id, text string) (string, error) {
	body, _ := json.Marshal(map[string]any{"prompt": []map[string]string{{"type": "text", "text": text}}})
	resp, err := loadHost.Post(base+"/session/"+id+"/prompt", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var res promptAccepted
	if resp.StatusCode != http.StatusAccepted || decodeStrict(b, &res) != nil {
		return "", fmt.Errorf("POST prompt = %d %s", resp.StatusCode, b)
	}
	return res.PromptID, nil
}

// checkSessionStream checks one session's whole event stream: ids 1..n with
// no gap, turns in the order they were submitted, every call's start before
// its end, and each call's terminal status matching the provider's verdict.
// It returns the number of completed and failed calls.
func checkSessionStream(evs []sseEvent, pids []string) (completed, failed int, err error) {
	turn := 0
	started := map[string]bool{}
	for i, ev := range evs {
		var e envelope
		if err := decodeStrict(ev.data, &e); err != nil {
			return 0, 0, fmt.Errorf("event %s: %v", ev.id, err)
		}
		if e.ID != int64(i+1) || strconv.FormatInt(e.ID, 10) != ev.id {
			return 0, 0, fmt.Errorf("event %d has id %s (envelope %d): a gap or reordering", i+1, ev.id, e.ID)
		}
		if turn >= len(pids) || e.PromptID != pids[turn] {
			return 0, 0, fmt.Errorf("event %d belongs to prompt %q, want %q (turn %d)", e.ID, e.PromptID, pids[min(turn, len(pids)-1)], turn)
		}
		switch ev.typ {
		case eventTurnComplete:
			turn++
			continue
		case eventTurnError:
			return 0, 0, fmt.Errorf("turn %d failed: %s", turn, e.Data)
		case eventSessionUpdate:
		default:
			return 0, 0, fmt.Errorf("unexpected event %s", ev.typ)
		}
		key, u, ok := toolCallUpdate(e)
		if !ok {
			continue
		}
		switch u.Status {
		case "pending":
			started[key] = true
		case "completed", "failed":
			if !started[key] {
				return 0, 0, fmt.Errorf("call %s ended before it started", key)
			}
			if u.Status == "completed" {
				completed++
			} else {
				failed++
			}
		}
	}
	if turn != len(pids) {
		return 0, 0, fmt.Errorf("stream holds %d of %d turns", turn, len(pids))
	}
	return completed, failed, nil
}

// acpProcesses returns every process on the machine running this test
// binary as "acp", whoever its parent is now.
func acpProcesses(t *testing.T) []int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || processGone(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[0] == exe && args[1] == "acp" {
			out = append(out, pid)
		}
	}
	return out
}

// heapStats returns, after a GC, the bytes of live objects and of heap
// spans in use (which also counts partly used spans).
type heapStats struct{ alloc, inuse uint64 }

func heapNow() heapStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return heapStats{m.HeapAlloc, m.HeapInuse}
}

func (h heapStats) String() string {
	return fmt.Sprintf("%.1f MiB live (%.1f MiB in use)", mib(h.alloc), mib(h.inuse))
}

func TestLoadServe(t *testing.T) {
	skipUnlessLoad(t)
	var mu sync.Mutex
	allows := map[string]int{}
	denies := map[string]int{}
	prov := newTestProvider(t)
	prov.verdict = func(tool string, args json.RawMessage) (int, bool, string) {
		var in struct {
			FilePath string `json:"file_path"`
		}
		json.Unmarshal(args, &in)
		// The provider sees final arguments: the path made absolute.
		name := filepath.Base(in.FilePath)
		mu.Lock()
		defer mu.Unlock()
		if tool != "write_file" || loadDenied(name) {
			denies[name]++
			return 200, false, "load: denied by policy"
		}
		allows[name]++
		return 200, true, ""
	}
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var wss []string
	for range loadWorkspaces {
		wss = append(wss, t.TempDir())
	}
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")

	goroutines0 := daemonGoroutines()
	heap0 := heapNow()
	td := startTestDaemon(t, serveOptions{Workspaces: wss, SettingsFile: settings, Guard: prov.guard(t), DecisionLog: logPath, MaxPendingPrompts: loadPromptsPerSess}, quickRaceExit)

	type session struct {
		n      int
		id, ws string
		stream *bufio.Reader
	}
	var sessions []*session
	for w, ws := range wss {
		for i := range loadSessionsPerWS {
			s := &session{n: w*loadSessionsPerWS + i, ws: ws}
			s.id = td.newSession(t, `{"cwd":`+strconv.Quote(ws)+`}`)
			sessions = append(sessions, s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadStreamTimeout)
	defer cancel()
	for _, s := range sessions {
		req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+s.id+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		s.stream = bufio.NewReader(resp.Body)
	}
	heapIdle := heapNow()

	// CPU time: the test process (daemon, provider and hosts together) and
	// the ACP children, read while they run.
	childrenCPU := func() (d time.Duration) {
		for _, pid := range acpChildren(t) {
			d += treeCPU(t, pid)
		}
		return d
	}
	self0, children0 := treeCPU(t, os.Getpid())-childrenCPU(), childrenCPU()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	counts := make([][2]int, len(sessions))
	for k, s := range sessions {
		wg.Go(func() {
			var pids []string
			for p := range loadPromptsPerSess {
				var lines []string
				for c := range loadCallsPerPrompt {
					lines = append(lines, writeCall(loadFile(s.n, p*loadCallsPerPrompt+c)))
				}
				pid, err := postPrompt(td.url, s.id, strings.Join(lines, "\n"))
				if err != nil {
					errs[k] = err
					return
				}
				pids = append(pids, pid)
			}
			evs, err := collectSSE(s.stream, untilTurnEnd(pids[len(pids)-1]))
			if err != nil {
				errs[k] = fmt.Errorf("session %d stream: %v after %d events", s.n, err, len(evs))
				return
			}
			completed, failed, err := checkSessionStream(evs, pids)
			if err != nil {
				errs[k] = fmt.Errorf("session %d: %v", s.n, err)
			}
			counts[k] = [2]int{completed, failed}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	kidsCPU := childrenCPU() - children0
	selfCPU := treeCPU(t, os.Getpid()) - kidsCPU - children0 - self0
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	const total = loadWorkspaces * loadSessionsPerWS * loadPromptsPerSess * loadCallsPerPrompt
	t.Logf("load: %d sessions x %d guarded calls = %d calls in %v: %.0f calls/s",
		len(sessions), loadPromptsPerSess*loadCallsPerPrompt, total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
	t.Logf("load-cost: sessions=%d calls=%d calls/s=%.0f children-cpu-us/call=%.0f test-process-cpu-us/call=%.0f (daemon, provider and hosts in one process)",
		len(sessions), total, float64(total)/elapsed.Seconds(), float64(kidsCPU.Microseconds())/total, float64(selfCPU.Microseconds())/total)

	// Every executed call had exactly one allow; no denied call executed.
	mu.Lock()
	nAllow, nDeny := len(allows), len(denies)
	for name, n := range allows {
		if n != 1 {
			t.Errorf("%s: %d allows, want 1 (no retry)", name, n)
		}
	}
	mu.Unlock()
	if nAllow+nDeny != total || nDeny != total/loadDenyEvery {
		t.Errorf("provider decided %d allows + %d denies, want %d calls with %d denied", nAllow, nDeny, total, total/loadDenyEvery)
	}
	var files []string
	for _, s := range sessions {
		for c := range loadPromptsPerSess * loadCallsPerPrompt {
			name := loadFile(s.n, c)
			_, err := os.Stat(filepath.Join(s.ws, name))
			switch {
			case err == nil:
				files = append(files, name)
				if loadDenied(name) {
					t.Errorf("%s: denied but written", name)
				}
			case !errors.Is(err, os.ErrNotExist):
				t.Error(err)
			case !loadDenied(name):
				t.Errorf("%s: allowed but not written", name)
			}
		}
	}
	if len(files) != nAllow {
		t.Errorf("%d marker files for %d allows", len(files), nAllow)
	}
	var streamCompleted, streamFailed int
	for _, c := range counts {
		streamCompleted += c[0]
		streamFailed += c[1]
	}
	if streamCompleted != nAllow || streamFailed != nDeny {
		t.Errorf("event streams show %d completed + %d failed calls; provider %d allows + %d denies", streamCompleted, streamFailed, nAllow, nDeny)
	}
	heapLoaded := heapNow()
	children := acpChildren(t)
	// One per workspace, up to the pool's default bound on children.
	if want := min(loadWorkspaces, defaultMaxChildren); len(children) != want {
		t.Errorf("ACP children during the run = %v, want %d (one per workspace, at most --max-children's default %d)", children, want, defaultMaxChildren)
	}

	// Shutdown leaves no goroutine, no process and no memory behind.
	cancel()
	if err := td.stop(); err != nil {
		t.Fatalf("serveDaemon: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
	loadHost.CloseIdleConnections()
	data, _ := os.ReadFile(logPath)
	outcomes := map[string]int{}
	for _, rec := range decisions(t, string(data)) {
		outcomes[rec.Outcome]++
	}
	if outcomes[outcomeAllowed] != nAllow || outcomes[outcomeDenied] != nDeny || len(outcomes) != 2 {
		t.Errorf("decision log outcomes = %v, want %d allowed and %d denied", outcomes, nAllow, nDeny)
	}
	for _, pid := range children {
		if !pidGoneWithin(pid, 10*time.Second) {
			t.Errorf("ACP child %d outlived the daemon", pid)
		}
	}
	if left := acpProcesses(t); len(left) != 0 {
		t.Errorf("acp processes left after shutdown: %v", left)
	}
	goroutines := settledGoroutines(goroutines0)
	heapAfter := heapNow()
	t.Logf("heap: %v before; %v with %d idle sessions; %v after the run; %v after shutdown",
		heap0, heapIdle, len(sessions), heapLoaded, heapAfter)
	// Idle is within a few MiB: the package's JSON and regexp caches.
	if heapAfter.alloc > heap0.alloc+4<<20 {
		t.Errorf("heap after shutdown: %v; before the daemon: %v", heapAfter, heap0)
	}
	if goroutines <= goroutines0 {
		return
	}
	buf := make([]byte, 1<<20)
	stacks := buf[:runtime.Stack(buf, true)]
	t.Errorf("goroutines: %d before the daemon, %d after shutdown:\n%s", goroutines0, goroutines, stacks)
}

// processWideGoroutines name, by a function on their stack, the goroutines
// that live as long as the process once a first daemon started them: the
// signal package's receive loop (the first signal.Notify starts it), the
// orphan reaper (reaper.go) and the lifeline thread (lifeline.go). They are
// no daemon's leak.
var processWideGoroutines = []string{"os/signal.loop()", "acpguard.enableReaper.", "acpguard.onLifeline."}

// daemonGoroutines counts the goroutines that are not process-wide.
func daemonGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && !slices.ContainsFunc(processWideGoroutines, func(f string) bool { return strings.Contains(g, f) }) {
			count++
		}
	}
	return count
}

// settledGoroutines waits a little for goroutines to end and returns how
// many are left, not counting the process-wide ones.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(loadGoroutineSettle)
	for {
		n := daemonGoroutines()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestFootprint measures the release binary (or envBenchBin's): its size, the time from start
// to a 200 from /health, and the resident memory of the daemon and its
// child with one and with 32 idle sessions.
func TestFootprint(t *testing.T) {
	skipUnlessLoad(t)
	bin := releaseBinary(t)
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release binary (CGO_ENABLED=0 go build -trimpath -ldflags='-s -w'): %d bytes (%.2f MiB)", fi.Size(), mib(uint64(fi.Size())))

	var startups []time.Duration
	for range 5 {
		d, stop := startReleaseServe(t, bin)
		startups = append(startups, d.startup)
		stop()
	}
	slices.Sort(startups)
	t.Logf("start to first /health 200: median %v, min %v, max %v (5 runs)", startups[2], startups[0], startups[4])

	d, stop := startReleaseServe(t, bin)
	defer stop()
	t.Logf("RSS of the idle daemon alone: %d kB", vmRSS(t, d.pid))
	td := &testDaemon{url: d.url}
	td.newSession(t, "")
	kids := childPIDs(t, d.pid)
	if len(kids) != 1 {
		t.Fatalf("children of serve = %v", kids)
	}
	one := vmRSS(t, d.pid) + vmRSS(t, kids[0])
	t.Logf("RSS daemon + one idle child with 1 session: %d kB (%.1f MiB)", one, float64(one)/1024)
	for range 31 {
		td.newSession(t, "")
	}
	many := vmRSS(t, d.pid)
	for _, k := range childPIDs(t, d.pid) {
		many += vmRSS(t, k)
	}
	t.Logf("RSS daemon + child with 32 idle sessions: %d kB (%.1f MiB)", many, float64(many)/1024)
}

type releaseServe struct {
	url     string
	pid     int
	startup time.Duration
}

// startReleaseServe starts the built binary's serve with args (one new
// workspace when there are none) and polls /health.
func startReleaseServe(t *testing.T, bin string, args ...string) (releaseServe, func()) {
	t.Helper()
	if len(args) == 0 {
		args = []string{"--workspace", t.TempDir()}
	}
	cmd := exec.Command(bin, append([]string{"serve", "--port", "0"}, args...)...)
	cmd.Env = os.Environ()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := serveListenURL(line)
	if !ok {
		stop()
		t.Fatalf("serve printed %q: %v; stderr:\n%s", line, err, stderr.String())
	}
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Since(start) > testTimeout(10*time.Second) {
			stop()
			t.Fatalf("no /health 200 within 10 s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	return releaseServe{url: url, pid: cmd.Process.Pid, startup: time.Since(start)}, stop
}

// vmRSS reads a process's resident set in kB.
func vmRSS(t testing.TB, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// TestLoadEventRingMemory measures what a session's event ring keeps: tool
// output stays in memory, up to the ring's bounds, until the session is
// deleted.
func TestLoadEventRingMemory(t *testing.T) {
	skipUnlessLoad(t)
	ws := t.TempDir()
	td := startTestDaemon(t, guardedYolo(t, ws, guardConfig{Mode: guardModeOff}), quickRaceExit)
	id := td.newSession(t, "")
	before := heapNow()
	const calls, size = 40, 1000000
	var lines []string
	for range calls {
		lines = append(lines, `call run_shell_command {"command":"head -c `+strconv.Itoa(size)+` /dev/zero | tr '\\0' a"}`)
	}
	td.runTurn(t, id, strings.Join(lines, "\n"))
	held := heapNow()
	if r := td.do(t, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	http.DefaultClient.CloseIdleConnections()
	deleted := heapNow()
	t.Logf("one session, %d calls of %d bytes of output: heap %v before; %v after the turn; %v after DELETE",
		calls, size, before, held, deleted)
	if deleted.alloc > before.alloc+(calls*size)/4 {
		t.Errorf("DELETE did not free the session's events: %v before, %v after", before, deleted)
	}
}

// TestLoadStalledStreams is the scenario of a host, or a tool on a
// tokenless loopback bind, that opens one session stream per prompt and
// stops reading it: each such stream must be dropped and let go of its
// events, so serve's heap stays near one session's ring however many
// prompts run.
func TestLoadStalledStreams(t *testing.T) {
	skipUnlessLoad(t)
	const prompts, perPrompt, size = 15, 40, 1000000
	// Room for every stream: the streams' memory is measured, not the
	// subscriber limit.
	td := startTestDaemon(t, serveOptions{Limits: serveLimits{MaxSubscribers: 2 * prompts}}, fakeChildEnv(""))
	id := td.newSession(t, "")
	before := heapNow()
	last := ""
	for i := range prompts {
		if _, status := openStalledStream(t, td.url, "/session/"+id+"/events"); status != http.StatusOK {
			t.Fatalf("prompt %d: stalled stream status %d", i, status)
		}
		ctx, cancel := context.WithTimeout(context.Background(), loadStreamTimeout)
		req, _ := http.NewRequestWithContext(ctx, "GET", td.url+"/session/"+id+"/events", nil)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		pid := td.prompt(t, id, fmt.Sprintf("flood %d %d", perPrompt, size))
		evs, err := collectSSE(bufio.NewReader(resp.Body), untilTurnEnd(pid))
		cancel()
		resp.Body.Close()
		if err != nil || len(evs) != perPrompt+1 {
			t.Fatalf("prompt %d: the reading host got %d events: %v", i, len(evs), err)
		}
		last = evs[len(evs)-1].id
	}
	held := heapNow()
	t.Logf("one session, %d prompts of %d updates of %d bytes, one stalled stream each: heap %v before, %v after",
		prompts, perPrompt, size, before, held)
	// One full ring, and the queues and writes of the newest stalled
	// streams, which may not have been dropped yet.
	if bound := before.alloc + eventRingBytes + 4*subscriberQueueBytes; held.alloc > bound {
		t.Errorf("stalled streams keep their events: heap %v, want at most %.1f MiB", held, mib(bound))
	}
}
