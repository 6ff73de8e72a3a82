// provider_metrics_test.go checks GET /metrics with a strict parser of the
// Prometheus text format 0.0.4: the output parses, and counters move as
// calls are made.
package main

import (
	"context"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPrometheusParserRejects(t *testing.T) {
	valid := "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"
	if _, err := promParseStrict(valid); err != nil {
		t.Fatalf("valid text rejected: %v", err)
	}
	hist := "# HELP h H.\n# TYPE h histogram\n"
	for name, text := range map[string]string{
		"no newline":       strings.TrimSuffix(valid, "\n"),
		"sample first":     "a_total 1\n" + valid,
		"negative counter": "# HELP a_total A.\n# TYPE a_total counter\na_total -1\n",
		"duplicate":        valid + "a_total 2\n",
		"bad label":        "# HELP a_total A.\n# TYPE a_total counter\na_total{1a=\"x\"} 1\n",
		"unquoted label":   "# HELP a_total A.\n# TYPE a_total counter\na_total{a=x} 1\n",
		"split family":     valid + "# HELP b B.\n# TYPE b gauge\nb 1\na_total{x=\"y\"} 1\n",
		"timestamp":        "# HELP a_total A.\n# TYPE a_total counter\na_total 1 1700000000\n",
		"no +Inf":          hist + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
		"count mismatch":   hist + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
		"decreasing":       hist + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"no sum":           hist + "h_bucket{le=\"+Inf\"} 1\nh_count 1\n",
	} {
		if _, err := promParseStrict(text); err == nil {
			t.Errorf("%s: accepted %q", name, text)
		}
	}
}

// scrapeProviderMetrics fetches /metrics with the token and parses it.
func scrapeProviderMetrics(t *testing.T, hc *http.Client, url string) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+metricsPath, nil)
	req.Header.Set("Authorization", "Bearer "+providerTestToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != prometheusTextContentType {
		t.Fatalf("GET /metrics: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	samples, err := promParseStrict(string(body))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%s", err, body)
	}
	return samples
}

func TestProviderMetrics(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.json")
	policy, err := os.ReadFile("examples/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, policy, 0o600)
	p := startRefProvider(t, providerOptions{PolicyFile: file})
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	before := scrapeProviderMetrics(t, hc, p.url)
	for series, v := range before {
		want := 0.0
		switch series {
		case "acpguard_provider_policy_rules":
			want = 23
		}
		if v != want {
			t.Errorf("fresh provider: %s = %v, want %v", series, v, want)
		}
	}

	c := testProviderClient(t, p.url, 5*time.Second)
	if err := c.handshake(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := []struct{ tool, args string }{
		{"read_file", `{"file_path":"/a"}`},
		{"write_file", `{"file_path":"/tmp/a","content":""}`},
		{"run_shell_command", `{"command":"sudo ls"}`},
	}
	for _, call := range calls {
		pc := providerTestCall
		pc.ToolName, pc.Arguments = call.tool, []byte(call.args)
		c.prepare(context.Background(), pc)
	}
	// Refusals: a wrong token (on a route and on /metrics), a bad body, an
	// unknown route, a wrong method.
	wrong := testProviderClient(t, p.url, 5*time.Second)
	wrong.token = "wrong-token"
	wrong.prepare(context.Background(), providerTestCall)
	req, _ := http.NewRequest(http.MethodGet, p.url+metricsPath, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", resp.StatusCode)
	}
	for _, v := range []wireRequestVector{
		{Method: "POST", Path: wirePathPrepare, Auth: "valid", ContentType: wireContentType, Body: `{}`},
		{Method: "POST", Path: "/v2/prepare", Auth: "valid", ContentType: wireContentType, Body: `{}`},
		{Method: "POST", Path: metricsPath, Auth: "valid", ContentType: wireContentType, Body: `{}`},
	} {
		resp := v.send(t, hc, p.url)
		resp.Body.Close()
		if v.Path == metricsPath && (resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodGet) {
			t.Errorf("POST /metrics: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	// A failed reload leaves the policy and counts.
	os.WriteFile(file, []byte(`{"rules":[{"tool":"x"}]}`), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for deadline := time.Now().Add(testTimeout(20 * time.Second)); !strings.Contains(p.stderr.String(), "reload failed"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload; stderr %q", p.stderr.String())
		}
	}

	after := scrapeProviderMetrics(t, hc, p.url)
	want := map[string]float64{
		`acpguard_provider_decisions_total{outcome="allow"}`:                                     2,
		`acpguard_provider_decisions_total{outcome="deny"}`:                                      1,
		`acpguard_provider_policy_decisions_total{decision="allow"}`:                             2,
		`acpguard_provider_policy_decisions_total{decision="deny"}`:                              1,
		`acpguard_provider_handshakes_total`:                                                     1,
		`acpguard_provider_request_failures_total{reason="unauthorized",status="401"}`:           2,
		`acpguard_provider_request_failures_total{reason="bad_request",status="400"}`:            1,
		`acpguard_provider_request_failures_total{reason="not_found",status="404"}`:              1,
		`acpguard_provider_request_failures_total{reason="method_not_allowed",status="405"}`:     1,
		`acpguard_provider_request_failures_total{reason="too_large",status="413"}`:              0,
		`acpguard_provider_request_failures_total{reason="unsupported_media_type",status="415"}`: 0,
		`acpguard_provider_policy_reloads_total{result="ok"}`:                                    0,
		`acpguard_provider_policy_reloads_total{result="failed"}`:                                1,
		`acpguard_provider_policy_rules`:                                                         23,
		`acpguard_provider_shadow`:                                                               0,
		`acpguard_provider_audit_failures_total`:                                                 0,
		`acpguard_provider_decision_duration_seconds_count`:                                      3,
		`acpguard_provider_decision_duration_seconds_bucket{le="+Inf"}`:                          3,
	}
	for series, v := range want {
		if got, ok := after[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	if len(after) != len(before) {
		t.Errorf("series appeared or vanished: %d before, %d after", len(before), len(after))
	}
	if s := after["acpguard_provider_decision_duration_seconds_sum"]; s <= 0 {
		t.Errorf("latency sum %v, want > 0", s)
	}
}

func TestLatencyHistogramBuckets(t *testing.T) {
	m := newProviderMetrics(true)
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 101 * time.Microsecond, 3 * time.Second} {
		m.latency.observe(d)
	}
	samples, err := promParseStrict(string(m.render(0)))
	if err != nil {
		t.Fatal(err)
	}
	for le, want := range map[string]float64{"0.0001": 2, "0.00025": 3, "2.5": 3, "+Inf": 4} {
		if got := samples[`acpguard_provider_decision_duration_seconds_bucket{le="`+le+`"}`]; got != want {
			t.Errorf("bucket le=%s: %v, want %v", le, got, want)
		}
	}
	if got := samples["acpguard_provider_decision_duration_seconds_sum"]; math.Abs(got-3.000201) > 1e-9 {
		t.Errorf("sum %v", got)
	}
	if samples["acpguard_provider_shadow"] != 1 {
		t.Error("shadow gauge is not 1")
	}
}
