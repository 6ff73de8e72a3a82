// serve_bench_test.go measures serve: one guarded prompt turn through the
// host API and a real ACP child, and event publishing to subscribers.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
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
				l.publish(eventSessionUpdate, "p1", update)
			}
			l.close()
		})
	}
}
