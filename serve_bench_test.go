// serve_bench_test.go measures serve: one guarded prompt turn through the
// host API and a real ACP child, and event publishing to subscribers.
package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
