// serve_bench_test.go measures serve: one guarded and one scripted prompt
// turn through the host API and a real ACP child, the prompt's echo, and
// event publishing to subscribers.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkServeGuardedTurn is one prompt with one allowed tool call, from
// POST prompt to turn_complete on the event stream, in required mode.
func BenchmarkServeGuardedTurn(b *testing.B) {
	prov := newTestProvider(b)
	ws := b.TempDir()
	settings := filepath.Join(b.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		b.Fatal(err)
	}
	td := startTestDaemon(b, serveOptions{Workspaces: []string{ws}, SettingsFile: settings, Guard: prov.guard(b), DecisionLog: filepath.Join(b.TempDir(), "d.jsonl")})
	id := td.newSession(b, "")
	stream := td.openEvents(b, id, "")
	target := filepath.Join(ws, "out.txt")
	b.ResetTimer()
	for i := range b.N {
		pid := td.prompt(b, id, fmt.Sprintf(`call write_file {"file_path":"out.txt","content":"%d"}`, i))
		readSSE(b, stream, untilTurnEnd(pid))
	}
	b.StopTimer()
	if data, err := os.ReadFile(target); err != nil || string(data) != fmt.Sprint(b.N-1) {
		b.Fatalf("last allowed write: %q %v", data, err)
	}
	if _, calls := prov.counts(); calls != b.N {
		b.Fatalf("provider saw %d prepares for %d turns", calls, b.N)
	}
}

func BenchmarkEventLogPublish(b *testing.B) {
	for _, subs := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			l := newStreamLog()
			for range subs {
				sub := l.subscribe(0, nil)
				go func() {
					for {
						if _, ended, _ := takeAll(l, sub); ended {
							return
						}
						<-sub.wake
					}
				}()
			}
			update := sessionUpdateEvent{SessionID: "s1", Update: []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}`)}
			b.ReportAllocs()
			for range b.N {
				l.publishUpdate("p1", update)
			}
			l.close()
		})
	}
}

// discardStream is a response writer that takes a write deadline and a
// flush and keeps nothing, so that only the stream writer's own cost shows.
type discardStream struct{ h http.Header }

func (d *discardStream) Header() http.Header              { return d.h }
func (d *discardStream) Write(b []byte) (int, error)      { return len(b), nil }
func (d *discardStream) WriteHeader(int)                  {}
func (d *discardStream) FlushError() error                { return nil }
func (d *discardStream) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkStreamWriterEvents writes a tool call's three updates as one
// batch, as a stream takes them from its log.
func BenchmarkStreamWriterEvents(b *testing.B) {
	w := &discardStream{h: http.Header{}}
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: time.Minute}
	data := []byte(`{"id":7,"v":1,"type":"session_update","promptId":"p1","data":{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"},"_meta":{"serverTimestamp":1}}`)
	batch := []*streamEvent{{id: 1000, typ: eventSessionUpdate, data: data}, {id: 1001, typ: eventSessionUpdate, data: data}, {id: 1002, typ: eventSessionUpdate, data: data}}
	b.ReportAllocs()
	for range b.N {
		if err := sw.events(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeScriptedTurn is one prompt of the built-in scripted model
// with one write_file call, guard off, from POST prompt to turn_complete on
// the event stream, over one kept-alive host connection: the turn's own
// events (the prompt's echo, the tool call's updates) and no model call.
func BenchmarkServeScriptedTurn(b *testing.B) {
	ws := b.TempDir()
	settings := filepath.Join(b.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"tools":{"approvalMode":"yolo"}}`), 0o600); err != nil {
		b.Fatal(err)
	}
	td := startTestDaemon(b, serveOptions{Workspaces: []string{ws}, SettingsFile: settings, Guard: guardConfig{Mode: guardModeOff}})
	id := td.newSession(b, "")
	stream := td.openEvents(b, id, "")
	turn := func(i int) time.Duration {
		start := time.Now()
		pid := td.prompt(b, id, fmt.Sprintf(`call write_file {"file_path":"out.txt","content":"%d"}`, i))
		readSSE(b, stream, untilTurnEnd(pid))
		return time.Since(start)
	}
	turn(-1) // the child's first prompt: its available commands
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		took = append(took, turn(i))
	}
	b.StopTimer()
	if data, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(data) != fmt.Sprint(b.N-1) {
		b.Fatalf("last write: %q %v", data, err)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-us/turn")
}

// BenchmarkServeEchoPrompt is the prompt's echo as user_message_chunk that
// opens each turn's events.
func BenchmarkServeEchoPrompt(b *testing.B) {
	_, _, s := fuzzDaemon(io.Discard)
	job := &promptJob{id: "p1", blocks: []json.RawMessage{json.RawMessage(`{"type":"text","text":"call write_file {\"file_path\":\"out.txt\",\"content\":\"1\"}"}`)}}
	b.ReportAllocs()
	for range b.N {
		s.echoPrompt(job)
	}
}
