// session_memory_test.go measures what a session costs in heap, goroutines
// and RSS, in the acp child and in serve, open and after close, and that the
// sandbox of a session is made when it first starts a process.
package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// memorySessions is how many sessions, each in a workspace of its own, the
// memory benchmarks open at once: the scale a shared child serves.
const memorySessions = 128

// BenchmarkACPSessionMemory is what a session costs the acp runtime: the
// child's RSS per session with memorySessions open, and its RSS once all of
// them closed, measured through the real binary over pipes.
func BenchmarkACPSessionMemory(b *testing.B) {
	for _, profile := range []string{sandboxOff, sandboxWorkspace} {
		b.Run("sandbox="+profile, func(b *testing.B) {
			for range b.N {
				c := startACP(b, nil, []string{"--" + flagSandbox, profile})
				c.mustCall(methodInitialize, initializeParams(""), nil)
				base := int64(vmRSS(b, c.pid)) << 10
				ids := make([]string, memorySessions)
				for i := range ids {
					ids[i] = c.newSession(b.TempDir())
				}
				open := int64(vmRSS(b, c.pid)) << 10
				for _, id := range ids {
					c.mustCall(methodSessionClose, map[string]any{"sessionId": id}, nil)
				}
				closed := int64(settledRSS(b, c.pid, int((base+(open-base)/4)>>10))) << 10
				b.ReportMetric(float64(base)/(1<<20), "MB-base")
				b.ReportMetric(float64(open-base)/memorySessions/1024, "KB-rss/session")
				b.ReportMetric(float64(closed)/(1<<20), "MB-after-close")
			}
		})
	}
}

// TestACPSessionHeap holds the heap a session keeps in the acp runtime, in
// this process (the runtime's own code, no pipes), to a generous bound: a
// session is its state, not a copy of its workspace's settings, tools or
// prompt, and it starts no goroutine of its own while idle.
func TestACPSessionHeap(t *testing.T) {
	heap, goroutines := sessionHeap(t, sandboxConfig{Profile: sandboxOff})
	t.Logf("%d sessions: %.0f B heap and %.2f goroutines per session", memorySessions, heap, goroutines)
	// maxSessionHeap is far above what a session holds (its ids, cwd, maps
	// and MCP set): a copy of the settings or of the system prompt per
	// session would pass it only at much smaller sizes.
	const maxSessionHeap = 16 << 10
	if heap > maxSessionHeap {
		t.Errorf("a session holds %.0f bytes of heap, want at most %d", heap, maxSessionHeap)
	}
	if goroutines >= 1 {
		t.Errorf("an idle session holds %.2f goroutines, want none of its own", goroutines)
	}
}

// sessionHeap opens memorySessions sessions, each in a workspace of its
// own, on an agent built as runACP builds one, and returns the live heap
// and goroutines each adds.
func sessionHeap(t testing.TB, sandbox sandboxConfig) (heapPerSession, goroutinesPerSession float64) {
	st := defaultSettings()
	home := t.TempDir()
	a := &agent{
		env:      newProcEnv(os.Environ()),
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		model:    scriptedModel{},
		sessions: map[string]*session{},
		settings: st,
		sandbox:  sandbox,
	}
	a.settingsCache = newSettingsCache(settingsSources{Home: home, System: filepath.Join(home, "none.json"), SystemDefaults: filepath.Join(home, "none-defaults.json"),
		Lookup: func(string) (string, bool) { return "", false }}, settingsLoadOptions{}, func(l *settingsLoad) (*sessionSettings, error) {
		return deriveSessionSettings(l, nil)
	})
	defer a.shutdown()
	dirs := make([]string, memorySessions)
	params := make([]json.RawMessage, memorySessions)
	for i := range dirs {
		dirs[i] = t.TempDir()
		params[i], _ = json.Marshal(map[string]any{"cwd": dirs[i], "mcpServers": []any{}})
	}
	var before, after runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	for _, p := range params {
		if _, err := a.newSession(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	if tb, ok := t.(*testing.B); ok {
		tb.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/memorySessions, "B-allocated/session")
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / memorySessions, float64(g1-g0) / memorySessions
}

// BenchmarkACPSessionHeap reports TestACPSessionHeap's figures, with the
// sandbox off and on.
func BenchmarkACPSessionHeap(b *testing.B) {
	for _, profile := range []string{sandboxOff, sandboxWorkspace} {
		b.Run("sandbox="+profile, func(b *testing.B) {
			cfg := sandboxConfig{Profile: sandboxOff}
			if profile == sandboxWorkspace {
				cfg = workspaceConfig()
			}
			for range b.N {
				heap, g := sessionHeap(b, cfg)
				b.ReportMetric(heap, "B-heap/session")
				b.ReportMetric(g, "goroutines/session")
			}
		})
	}
}

// BenchmarkServeSessionMemory is what a session costs serve and its child
// with memorySessions sessions on one child: serve's live heap and
// goroutines per session (serve runs in this process), the child's RSS per
// session, and what both keep once every session was deleted.
func BenchmarkServeSessionMemory(b *testing.B) {
	for range b.N {
		ws := b.TempDir()
		opts := guardedYolo(b, ws, guardConfig{Mode: guardModeOff})
		opts.Limits.MaxSessions = memorySessions + 1
		td := startTestDaemon(b, opts, quickRaceExit)
		first := td.newSession(b, "")
		kids := childPIDs(b, os.Getpid())
		if len(kids) != 1 {
			b.Fatalf("children of serve = %v", kids)
		}
		child := kids[0]
		heap0, g0, rss0 := heapNow(), runtime.NumGoroutine(), vmRSS(b, child)
		ids := make([]string, memorySessions)
		for i := range ids {
			ids[i] = td.newSession(b, "")
		}
		heap1, g1, rss1 := heapNow(), runtime.NumGoroutine(), vmRSS(b, child)
		for _, id := range append(ids, first) {
			if r := td.do(b, "DELETE", "/session/"+id, ""); r.status != http.StatusNoContent {
				b.Fatalf("DELETE = %d %s", r.status, r.body)
			}
		}
		rss2 := settledRSS(b, child, rss0+(rss1-rss0)/4)
		heap2 := heapNow()
		b.ReportMetric(float64(heap1.alloc-heap0.alloc)/memorySessions, "B-serve-heap/session")
		b.ReportMetric(float64(g1-g0)/memorySessions, "serve-goroutines/session")
		b.ReportMetric(float64(rss1-rss0)/memorySessions, "KB-child-rss/session")
		b.ReportMetric(mib(heap2.inuse), "MB-serve-heap-inuse-after-delete")
		b.ReportMetric(float64(rss2)/1024, "MB-child-rss-after-delete")
	}
}

// settledRSS waits a while for pid's RSS to fall to below kB, as the
// return of closed sessions' memory makes it, and returns the last RSS read
// (kB), fallen or not: the benchmarks report it.
func settledRSS(t testing.TB, pid, below int) int {
	deadline := time.Now().Add(testTimeout(3 * time.Second))
	for {
		rss := vmRSS(t, pid)
		if rss <= below || time.Now().After(deadline) {
			return rss
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestACPSandboxMadeWhenAToolRuns: session/new makes no temp directory; the
// first tool of the session runs confined with its own, which the session's
// close removes.
func TestACPSandboxMadeWhenAToolRuns(t *testing.T) {
	requireLandlock(t)
	tmp := t.TempDir()
	c := startACP(t, nil, []string{"--" + flagSandbox, sandboxWorkspace}, "TMPDIR="+tmp)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	ws := t.TempDir()
	sid := c.newYoloSession(ws)
	if made, _ := filepath.Glob(filepath.Join(tmp, sandboxTempPattern+"*")); len(made) != 0 {
		t.Fatalf("session/new made %q before any tool ran", made)
	}
	if stop := c.prompt(sid, `call run_shell_command {"command":"printf %s \"$TMPDIR\" > tmpdir.txt && touch \"$TMPDIR/x\" && ! touch `+tmp+`/outside"}`, ""); stop != stopEndTurn {
		t.Fatalf("stopReason = %q", stop)
	}
	got, err := os.ReadFile(filepath.Join(ws, "tmpdir.txt"))
	if err != nil {
		t.Fatalf("the tool did not run: %v", err)
	}
	dir := string(got)
	if filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), sandboxTempPattern) || absent(t, filepath.Join(dir, "x")) {
		t.Fatalf("the tool's TMPDIR is %q, want a writable %s* in %s", dir, sandboxTempPattern, tmp)
	}
	if !absent(t, filepath.Join(tmp, "outside")) {
		t.Error("the tool wrote outside its sandbox")
	}
	c.mustCall(methodSessionClose, map[string]any{"sessionId": sid}, nil)
	if !absent(t, dir) {
		t.Errorf("the temp directory %q outlived its session", dir)
	}
}
