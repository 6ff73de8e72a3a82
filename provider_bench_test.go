// provider_bench_test.go measures the reference provider's decisions per
// second over keep-alive connections and the client's cost per prepare.
package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkProviderDecisions(b *testing.B) {
	p := startRefProvider(b, providerOptions{PolicyFile: "examples/policy.json"})
	call := providerTestCall
	call.ToolName = "run_shell_command"
	call.Arguments = []byte(`{"command":"git status","description":"show the work tree"}`)
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			// One client, like the daemon: its pool keeps one connection per concurrent caller.
			c := testProviderClient(b, p.url, 10*time.Second)
			defer c.http.CloseIdleConnections()
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range clients {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if res := c.prepare(context.Background(), call); !res.Allowed {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n != 0 {
				b.Fatalf("%d decisions were not allows", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkClientPrepare is one prepare against a server that does as little
// as possible, so the figure is the client's own cost.
func BenchmarkClientPrepare(b *testing.B) {
	prefix := []byte(`"requestId":"`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf [512]byte
		n, _ := r.Body.Read(buf[:])
		body := buf[:n]
		i := bytes.Index(body, prefix) + len(prefix)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"protocolVersion":1,"requestId":"` + string(body[i:i+32]) + `","allowed":true}`))
	}))
	defer srv.Close()
	c := testProviderClient(b, srv.URL, 10*time.Second)
	defer c.http.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		if res := c.prepare(context.Background(), providerTestCall); !res.Allowed {
			b.Fatalf("result %+v", res)
		}
	}
}

// BenchmarkProviderMetricsRender is the cost of one /metrics body.
func BenchmarkProviderMetricsRender(b *testing.B) {
	m := newProviderMetrics(false)
	for i := range 1000 {
		m.latency.observe(time.Duration(i) * time.Microsecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.render(11)
	}
}

// BenchmarkProviderPolicyDecide is one decision of the shipped policy in
// process, without HTTP: the cost of the policy itself.
func BenchmarkProviderPolicyDecide(b *testing.B) {
	pol, err := loadProviderPolicy("examples/policy.json")
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"command": "git status", "description": "show the work tree"}
	b.ReportAllocs()
	for b.Loop() {
		if d := pol.decide("run_shell_command", args); !d.Allowed {
			b.Fatalf("decision %+v", d)
		}
	}
}
