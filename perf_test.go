// perf_test.go measures what the guard adds to a tool call end to end
// through "acpguard serve": the same scripted turn with the guard off and
// with a local provider that always allows.
//
//	go test -run '^$' -bench BenchmarkServeGuardOverhead -benchmem -benchtime 200x .
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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

// overheadCalls is the number of trivial calls in one measured turn.
const overheadCalls = 20

// BenchmarkServeGuardOverhead alternates one turn of overheadCalls read_file
// calls on a daemon with the guard off and the same turn on a daemon in
// required mode, and reports the added time per call at p50 and p99 of the
// per-turn time divided by the number of calls.
func BenchmarkServeGuardOverhead(b *testing.B) {
	b.Run("provider=counting", func(b *testing.B) {
		prov := newTestProvider(b)
		benchGuardOverhead(b, prov.guard(b), func() int { _, n := prov.counts(); return n })
	})
	b.Run("provider=reference", func(b *testing.B) {
		// The reference provider with the example policy, which allows read_file.
		ref := startRefProvider(b, providerOptions{PolicyFile: "examples/policy.json"})
		u, err := url.Parse(ref.url)
		if err != nil {
			b.Fatal(err)
		}
		g := guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: testTimeout(3 * time.Second), Token: providerTestToken}
		benchGuardOverhead(b, g, nil)
	})
	// As operators run it: the reference provider in its own process, so
	// each decision also wakes a third process.
	b.Run("provider=reference-process", func(b *testing.B) {
		pp := startProviderProcess(b)
		u, err := url.Parse(pp.url)
		if err != nil {
			b.Fatal(err)
		}
		g := guardConfig{Mode: guardModeRequired, Endpoint: u, Timeout: testTimeout(3 * time.Second), Token: providerTestToken}
		benchGuardOverhead(b, g, nil)
	})
}

// benchGuardOverhead runs the measurement against the provider g; prepares,
// when set, counts the provider's prepare requests.
func benchGuardOverhead(b *testing.B, g guardConfig, prepares func() int) {
	settings := filepath.Join(b.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		b.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // the slots serve set, undone
	type side struct {
		td      *testDaemon
		id      string
		perCall []time.Duration
		log     string
	}
	newSide := func(g guardConfig) *side {
		ws := b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "small.txt"), []byte("hello\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		logPath := filepath.Join(b.TempDir(), "d.jsonl")
		// serve as it runs: its slots follow its prompts (slots.go), so
		// with one prompt at a time it is on one scheduler slot, as the
		// floor's requester is. A server in a test's process otherwise
		// keeps the test's slots, which here are the provider's and the
		// host's too.
		td := startTestDaemon(b, serveOptions{Workspaces: []string{ws}, SettingsFile: settings, Guard: g, DecisionLog: logPath, SchedSlots: true}, quickRaceExit)
		return &side{td: td, id: td.newSession(b, ""), log: logPath}
	}
	off := newSide(guardConfig{Mode: guardModeOff})
	on := newSide(g)
	text := strings.Repeat(`call read_file {"file_path":"small.txt"}`+"\n", overheadCalls)
	streams := map[*side]*bufio.Reader{off: off.td.openEvents(b, off.id, ""), on: on.td.openEvents(b, on.id, "")}
	turn := func(s *side) {
		start := time.Now()
		pid := s.td.prompt(b, s.id, text)
		end := readTurnEnd(b, streams[s], pid)
		s.perCall = append(s.perCall, time.Since(start)/overheadCalls)
		if end != eventTurnComplete {
			b.Fatalf("turn ended with %s", end)
		}
	}
	// One turn each to start the children and warm the connections.
	turn(off)
	turn(on)
	off.perCall, on.perCall = nil, nil
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		turn(off)
		turn(on)
	}
	b.StopTimer()
	if prepares != nil && prepares() != (b.N+1)*overheadCalls {
		b.Fatalf("provider saw %d prepares for %d guarded calls", prepares(), (b.N+1)*overheadCalls)
	}
	pct := func(d []time.Duration, p float64) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(off.perCall, 0.5), "p50-off-us/call")
	b.ReportMetric(pct(on.perCall, 0.5), "p50-guarded-us/call")
	b.ReportMetric(pct(on.perCall, 0.5)-pct(off.perCall, 0.5), "p50-added-us/call")
	b.ReportMetric(pct(on.perCall, 0.99)-pct(off.perCall, 0.99), "p99-added-us/call")
	// The decision log's latencyUs is the provider round trip alone; the
	// rest of the added time is the child-to-daemon prepare request.
	data, err := os.ReadFile(on.log)
	if err != nil {
		b.Fatal(err)
	}
	var provider []time.Duration
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec decisionRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			b.Fatalf("decision log line %q: %v", line, err)
		}
		if rec.Outcome != outcomeAllowed {
			b.Fatalf("decision %q, want every call allowed", rec.Outcome)
		}
		provider = append(provider, time.Duration(rec.LatencyUs)*time.Microsecond)
	}
	if len(provider) != (b.N+1)*overheadCalls {
		b.Fatalf("decision log holds %d decisions for %d guarded calls", len(provider), (b.N+1)*overheadCalls)
	}
	b.ReportMetric(pct(provider, 0.5), "p50-provider-us/call")
}

// readTurnEnd reads an event stream up to the end of prompt promptID's turn
// and returns that event's type. It keeps no event and looks only at the
// lines that end a turn: the benchmark's host shares serve's process, which
// runs on one scheduler slot while a prompt runs (slots.go), so the host's
// parsing of every event, as readSSE does, counted as the guard's time.
func readTurnEnd(b testing.TB, r *bufio.Reader, promptID string) string {
	b.Helper()
	var end string // the type the event being read names, if it ends a turn
	data := []byte(`data: `)
	ours := []byte(`"promptId":"` + promptID + `"`)
	lineStart := true
	for {
		line, err := r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			b.Fatalf("read event stream: %v", err)
		}
		if lineStart {
			switch {
			case string(line) == "event: "+eventTurnComplete+"\n":
				end = eventTurnComplete
			case string(line) == "event: "+eventTurnError+"\n":
				end = eventTurnError
			case len(line) == 1: // the blank line that ends an event
				end = ""
			case end != "" && bytes.HasPrefix(line, data) && bytes.Contains(line, ours):
				return end
			}
		}
		lineStart = err == nil // a line longer than the buffer goes on
	}
}

// TestReadTurnEnd holds readTurnEnd to the end of its own prompt's turn:
// another prompt's end, its prompt id in another event, and a line longer
// than the reader's buffer whose rest reads as an end's line do not end it.
func TestReadTurnEnd(t *testing.T) {
	const size = 32 // the reader's buffer: more than the longest line that ends a turn
	event := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	ours := `{"promptId":"p2","stopReason":"end_turn"}`
	// A data line whose first size bytes fill the buffer and whose rest is
	// an end's line, then a data line with the prompt's id.
	wrapped := "data: " + strings.Repeat("x", size-len("data: ")) + "event: " + eventTurnComplete + "\n" + "data: " + ours + "\n\n"
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"complete", event(eventSessionUpdate, `{"text":"x"}`) + event(eventTurnComplete, ours), eventTurnComplete},
		{"error", event(eventTurnError, `{"promptId":"p2","error":"x"}`), eventTurnError},
		{"another prompt's end first", event(eventTurnComplete, `{"promptId":"p1"}`) + event(eventTurnError, ours), eventTurnError},
		{"the prompt id in another event", event(eventSessionUpdate, ours) + event(eventTurnComplete, ours), eventTurnComplete},
		{"the prompt id after another prompt's end", event(eventTurnError, `{"promptId":"p1"}`) + event(eventSessionUpdate, ours) + event(eventTurnComplete, ours), eventTurnComplete},
		{"a line longer than the buffer", wrapped + event(eventTurnError, ours), eventTurnError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.stream), size)
			if got := readTurnEnd(t, r, "p2"); got != tc.want {
				t.Errorf("readTurnEnd = %q, want %q", got, tc.want)
			}
		})
	}
}

// The transports of BenchmarkGuardHopFloor's relay (its role's ARG).
const (
	hopRelayPipe    = "pipe"    // stdin and stdout are pipes, read plainly
	hopRelayChannel = "channel" // serve's two channel ends as fds 3 and 4
	// hopRelayEcho is hopRelayChannel answering each line at once, with
	// no provider: the channel's round trip alone.
	hopRelayEcho = "echo"
)

// runHopRelay is serve's part of a guarded call with nothing else: for each
// line from the requester, in a goroutine of its own, one POST through a
// provider client to an in-process provider that always allows, then one
// line back. With hopRelayChannel it reads serve's end of the private
// channel as serve does (with credentials, the child its parent) through
// the same line framing and the same pinned provider client after a
// handshake (hopRelayEcho: the same, answering at once with no provider
// call); with hopRelayPipe it reads a pipe through a plain HTTP client,
// the floor as first measured.
func runHopRelay(transport string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	go http.Serve(ln, http.HandlerFunc(serveHopProvider))
	endpoint := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	var in io.Reader
	var out io.Writer
	var ask func(line []byte) bool
	switch transport {
	case hopRelayPipe:
		in, out = pollable(os.Stdin), os.Stdout
		client := &http.Client{Transport: &http.Transport{}}
		prepare := endpoint.JoinPath(wirePathPrepare).String()
		ask = func(line []byte) bool {
			resp, err := client.Post(prepare, wireContentType, bytes.NewReader(line))
			if err != nil {
				return false
			}
			io.Copy(io.Discard, resp.Body)
			return resp.Body.Close() == nil
		}
	case hopRelayChannel, hopRelayEcho:
		// serve's part on one scheduler slot, as serve runs it with one
		// prompt at a time (slots.go) and as BenchmarkServeGuardOverhead
		// runs it: on this machine one slot halves a loopback round trip
		// after an idle gap, so the floor is the cheapest of this design.
		runtime.GOMAXPROCS(1)
		c, err := net.FileConn(os.NewFile(3, "acp-channel-in"))
		if err != nil {
			return 1
		}
		sock := (&channelEnds{read: c.(*net.UnixConn), write: os.NewFile(4, "acp-channel-out")}).conn(os.Getppid())
		in, out = sock, sock
		if transport == hopRelayEcho {
			ask = func([]byte) bool { return true }
			break
		}
		client := newProviderClient(guardConfig{Mode: guardModeRequired, Endpoint: endpoint, Timeout: time.Minute, Token: providerTestToken})
		if client.handshake(context.Background()) != nil {
			return 1
		}
		call := prepareRequest{SessionID: "s", PromptID: "p", ToolCallID: "c", ToolName: "read_file", Arguments: json.RawMessage(`{"file_path":"small.txt"}`)}
		ask = func([]byte) bool {
			ctx, cancel := client.callContext(context.Background())
			defer cancel()
			return client.prepare(ctx, call).Allowed
		}
	default:
		return 2
	}
	var mu sync.Mutex
	lines := lineReader{br: bufio.NewReaderSize(in, rpcReadBuffer), max: acpMaxLine}
	for {
		line, _, err := lines.next()
		if err != nil {
			return 0
		}
		line = bytes.Clone(line)
		go func() {
			answer := []byte(`{"allowed":false}` + "\n")
			if ask(line) {
				answer = []byte(`{"allowed":true}` + "\n")
			}
			mu.Lock()
			defer mu.Unlock()
			out.Write(answer)
		}()
	}
}

// serveHopProvider is the relay's provider: it echoes the handshake's nonce
// and the prepare's requestId and allows every call.
func serveHopProvider(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Nonce     string `json:"nonce"`
		RequestID string `json:"requestId"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", wireContentType)
	switch r.URL.Path {
	case wirePathHandshake:
		fmt.Fprintf(w, `{"protocolVersion":1,"nonce":%q,"capabilities":{"prepare":true}}`, req.Nonce)
	default:
		fmt.Fprintf(w, `{"protocolVersion":1,"requestId":%q,"allowed":true}`, req.RequestID)
	}
}

// hopRelay is one running relay and the requester's ends of its transport.
type hopRelay struct {
	to      io.Writer
	answers *bufio.Reader
}

// startHopRelay starts a relay process over transport, stopped at the end of b.
func startHopRelay(b *testing.B, transport string) *hopRelay {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv("hop-relay", transport))
	r := &hopRelay{}
	var closeTo func() error
	switch transport {
	case hopRelayPipe:
		to, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		from, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		r.to, r.answers, closeTo = to, bufio.NewReader(from), to.Close
	case hopRelayChannel, hopRelayEcho:
		// The requester holds the child's ends, read and written as an
		// acp child does; the relay holds serve's.
		ends, err := newChannel()
		if err != nil {
			b.Fatal(err)
		}
		read, err := ends.read.File()
		if err != nil {
			b.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{read, ends.write}
		defer ends.read.Close()
		defer ends.write.Close()
		defer read.Close()
		r.to, r.answers = pollableOut(ends.childStdout), bufio.NewReaderSize(pollable(ends.childStdin), rpcReadBuffer)
		closeTo = ends.childStdout.Close
		b.Cleanup(func() { ends.childStdin.Close() })
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		closeTo()
		cmd.Wait()
	})
	return r
}

// hop is one call through the relay: a line there, a line back.
func (r *hopRelay) hop(b *testing.B, line []byte) time.Duration {
	start := time.Now()
	if _, err := r.to.Write(line); err != nil {
		b.Fatal(err)
	}
	answer, err := r.answers.ReadBytes('\n')
	if err != nil {
		b.Fatal(err)
	}
	if string(answer) != `{"allowed":true}`+"\n" {
		b.Fatalf("relay answered %q", answer)
	}
	return time.Since(start)
}

// BenchmarkGuardHopFloor times what a guarded call costs with no work at
// all: one line over the private channel's socket pair to a second process
// that reads it with credentials through serve's line framing, one prepare
// through the provider client there over loopback HTTP, one line back, with
// the requester on one scheduler slot as the ACP runtime is, and the relay
// as serve is. No change to acpguard's own code can make the guard add
// less than this on the same machine (p50-us/call). Two more relays take
// turns with it: the same channel answering at once, with no provider
// call, the channel's own round trip, which a model call through serve
// adds to the child's (p50-channel-us/call); and a pipe with a plain HTTP
// client and the runtime's slots, the floor as first measured
// (p50-pipe-us/call).
//
//	go test -run '^$' -bench BenchmarkGuardHopFloor -benchtime 20000x .
func BenchmarkGuardHopFloor(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	relays := []*hopRelay{startHopRelay(b, hopRelayChannel), startHopRelay(b, hopRelayEcho), startHopRelay(b, hopRelayPipe)}
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"` + methodGuardPrepare + `","params":{"toolName":"read_file","arguments":{"file_path":"small.txt"}}}` + "\n")
	took := make([][]time.Duration, len(relays))
	for i, r := range relays {
		r.hop(b, line) // the first dial
		took[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := range b.N {
		// Each relay goes first in turn, so that none always follows another.
		for j := range relays {
			k := (i + j) % len(relays)
			took[k] = append(took[k], relays[k].hop(b, line))
		}
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(took[0], 0.5), "p50-us/call")
	b.ReportMetric(pct(took[0], 0.99), "p99-us/call")
	b.ReportMetric(pct(took[1], 0.5), "p50-channel-us/call")
	b.ReportMetric(pct(took[2], 0.5), "p50-pipe-us/call")
}

// guardFloorRatioBound is the bound the cost goal sets on the guard's added
// time: at most this multiple of the floor measured in the same run.
// Reported, not asserted: a shared machine makes any one run noisy.
const guardFloorRatioBound = 1.3

// guardRatioRounds is how many times TestGuardOverheadRatio measures the
// floor and the overhead, alternating which goes first, so that a change
// in the machine's load meets both.
const guardRatioRounds = 4

// The iterations of each measurement of TestGuardOverheadRatio: hops of
// the floor, turns of overheadCalls calls of the overhead.
const (
	guardRatioFloorHops  = "5000x"
	guardRatioTurns      = "100x"
	guardRatioBenchFloor = "^BenchmarkGuardHopFloor$"
	guardRatioBenchGuard = "^BenchmarkServeGuardOverhead$/^provider=counting$"
)

// TestGuardOverheadRatio runs BenchmarkGuardHopFloor and
// BenchmarkServeGuardOverhead with the counting provider in one run,
// guardRatioRounds times alternately, each in a fresh process of this test
// binary as the benchmarks run on their own (neither inherits the other's
// GOMAXPROCS, connections or children), and reports each round's added p50 per call over the floor's p50
// and the medians of the rounds. Off by default:
//
//	ACPGUARD_LOAD=1 go test -run TestGuardOverheadRatio -v -count=1 .
func TestGuardOverheadRatio(t *testing.T) {
	skipUnlessLoad(t)
	floor := func() float64 { return runBenchmark(t, guardRatioBenchFloor, guardRatioFloorHops)["p50-us/call"] }
	overhead := func() map[string]float64 { return runBenchmark(t, guardRatioBenchGuard, guardRatioTurns) }
	var ratios, floors, added []float64
	for round := range guardRatioRounds {
		var f float64
		var r map[string]float64
		if round%2 == 0 {
			f, r = floor(), overhead()
		} else {
			r, f = overhead(), floor()
		}
		a := r["p50-added-us/call"]
		ratios, floors, added = append(ratios, a/f), append(floors, f), append(added, a)
		t.Logf("guard-ratio-round: round=%d floor-p50-us=%.0f off-p50-us/call=%.0f guarded-p50-us/call=%.0f added-p50-us/call=%.0f provider-p50-us/call=%.0f ratio=%.2f",
			round, f, r["p50-off-us/call"], r["p50-guarded-us/call"], a, r["p50-provider-us/call"], a/f)
	}
	t.Logf("guard-ratio: rounds=%d floor-p50-us=%.0f added-p50-us/call=%.0f ratio=%.2f bound=%.1f (medians of the rounds)",
		guardRatioRounds, median(floors), median(added), median(ratios), guardFloorRatioBound)
}

// runBenchmark runs the benchmarks of this test binary that pattern names,
// in a fresh process, and returns the first one's reported metrics by unit.
func runBenchmark(t *testing.T, pattern, benchtime string) map[string]float64 {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$", "-test.bench="+pattern, "-test.benchtime="+benchtime)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", pattern, err, out)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				m[fields[i+1]] = v
			}
		}
		return m
	}
	t.Fatalf("%s printed no result:\n%s", pattern, out)
	return nil
}

// median is the median of v.
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
}
