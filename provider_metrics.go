// provider_metrics.go owns the reference provider's GET /metrics: its
// counters and latency histogram, written by hand in the Prometheus text
// exposition format 0.0.4.
package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// GET /metrics in Prometheus text, written with the standard library. The
// route needs the bearer token like
// the others: decision counts and the shadow flag are the operator's business.
const (
	providerMetricsPath       = "/metrics"
	prometheusTextContentType = "text/plain; version=0.0.4; charset=utf-8"
)

// providerFailureKinds are the refusals the provider counts, by status; the
// reason label names the status for dashboards.
var providerFailureKinds = [...]struct {
	status int
	reason string
}{
	{http.StatusBadRequest, "bad_request"},
	{http.StatusUnauthorized, "unauthorized"},
	{http.StatusNotFound, "not_found"},
	{http.StatusMethodNotAllowed, "method_not_allowed"},
	{http.StatusRequestEntityTooLarge, "too_large"},
	{http.StatusUnsupportedMediaType, "unsupported_media_type"},
}

// providerLatencyBounds are the upper bounds of the decision latency
// buckets. A decision over loopback takes tens of microseconds; the top
// buckets reach the client's longest timeout range.
var providerLatencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond,
}

// providerMetrics are the counters of one provider. Pairs are indexed by
// providerPairIndex: [0] deny or failed, [1] allow or ok.
type providerMetrics struct {
	shadow        bool
	answers       [2]atomic.Int64 // decisions sent
	policy        [2]atomic.Int64 // what the policy decided (differs in shadow mode and on audit failures)
	handshakes    atomic.Int64
	failures      [len(providerFailureKinds)]atomic.Int64
	auditFailures atomic.Int64
	reloads       [2]atomic.Int64
	latency       providerLatencyHistogram
}

func newProviderMetrics(shadow bool) *providerMetrics {
	return &providerMetrics{shadow: shadow}
}

// refused counts a refused request by its status.
func (m *providerMetrics) refused(status int) {
	for i, k := range providerFailureKinds {
		if k.status == status {
			m.failures[i].Add(1)
			return
		}
	}
}

// providerLatencyHistogram counts observations per bucket (not cumulative: the
// writer sums them, so _count always equals the +Inf bucket).
type providerLatencyHistogram struct {
	buckets [len(providerLatencyBounds) + 1]atomic.Int64 // the last is +Inf
	sumNano atomic.Int64
}

func (h *providerLatencyHistogram) observe(d time.Duration) {
	i := 0
	for i < len(providerLatencyBounds) && d > providerLatencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNano.Add(int64(d))
}

func (p *providerServer) serveMetrics(w http.ResponseWriter) {
	writeProviderReply(w, http.StatusOK, prometheusTextContentType, p.metrics.render(len(p.current.Load().rules)))
}

// render writes every metric, each with its HELP and TYPE lines, and every
// label value from the start, so a series never appears out of nowhere.
func (m *providerMetrics) render(rules int) []byte {
	var b bytes.Buffer
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	pair := func(name, label string, v *[2]atomic.Int64, no, yes string) {
		fmt.Fprintf(&b, "%s{%s=%q} %d\n", name, label, yes, v[1].Load())
		fmt.Fprintf(&b, "%s{%s=%q} %d\n", name, label, no, v[0].Load())
	}

	family("acpguard_provider_decisions_total", "counter", "Prepare requests answered, by the decision sent.")
	pair("acpguard_provider_decisions_total", "outcome", &m.answers, "deny", "allow")
	family("acpguard_provider_policy_decisions_total", "counter", "Decisions of the policy, which differ from those sent in shadow mode and when the audit log fails.")
	pair("acpguard_provider_policy_decisions_total", "decision", &m.policy, "deny", "allow")
	family("acpguard_provider_handshakes_total", "counter", "Handshakes answered.")
	fmt.Fprintf(&b, "acpguard_provider_handshakes_total %d\n", m.handshakes.Load())
	family("acpguard_provider_request_failures_total", "counter", "Requests refused, by status and reason.")
	for i, k := range providerFailureKinds {
		fmt.Fprintf(&b, "acpguard_provider_request_failures_total{status=\"%d\",reason=%q} %d\n", k.status, k.reason, m.failures[i].Load())
	}
	family("acpguard_provider_audit_failures_total", "counter", "Decisions turned into denials because the audit log could not be written.")
	fmt.Fprintf(&b, "acpguard_provider_audit_failures_total %d\n", m.auditFailures.Load())
	family("acpguard_provider_policy_reloads_total", "counter", "Policy reloads on SIGHUP, by result.")
	pair("acpguard_provider_policy_reloads_total", "result", &m.reloads, "failed", "ok")
	family("acpguard_provider_policy_rules", "gauge", "Rules of the policy in force.")
	fmt.Fprintf(&b, "acpguard_provider_policy_rules %d\n", rules)
	family("acpguard_provider_shadow", "gauge", "1 when the provider runs in shadow mode and answers allow whatever the policy says.")
	fmt.Fprintf(&b, "acpguard_provider_shadow %d\n", providerPairIndex(m.shadow))

	const hist = "acpguard_provider_decision_duration_seconds"
	family(hist, "histogram", "Time from receiving a prepare request to sending its decision.")
	var cumulative int64
	for i := range m.latency.buckets {
		cumulative += m.latency.buckets[i].Load()
		le := "+Inf"
		if i < len(providerLatencyBounds) {
			le = strconv.FormatFloat(providerLatencyBounds[i].Seconds(), 'f', -1, 64)
		}
		fmt.Fprintf(&b, "%s_bucket{le=%q} %d\n", hist, le, cumulative)
	}
	sum := strconv.FormatFloat(time.Duration(m.latency.sumNano.Load()).Seconds(), 'f', -1, 64)
	fmt.Fprintf(&b, "%s_sum %s\n%s_count %d\n", hist, sum, hist, cumulative)
	return b.Bytes()
}
