// provider_metrics.go owns the reference provider's GET /metrics: its
// counters and latency histogram, written with metrics.go's writer.
package main

import (
	"net/http"
	"strconv"
	"sync/atomic"
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

// providerMetrics are the counters of one provider. Pairs are indexed by
// providerPairIndex: [0] deny or failed, [1] allow or ok.
type providerMetrics struct {
	shadow        bool
	answers       [2]atomic.Int64 // decisions sent
	policy        [2]atomic.Int64 // what the policy decided (differs in shadow mode and on audit failures)
	handshakes    atomic.Int64
	failures      [len(providerFailureKinds)]atomic.Int64
	auditFailures atomic.Int64
	opaFailures   atomic.Int64 // --opa: prepares OPA gave no decision for
	reloads       [2]atomic.Int64
	latency       latencyHistogram
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

// render writes every metric and every label value from the start.
func (m *providerMetrics) render(rules int) []byte {
	var b promWriter
	pair := func(name, typ, help, label string, v *[2]atomic.Int64, no, yes string) {
		b.family(name, typ, help)
		b.sample(name, v[1].Load(), label, yes)
		b.sample(name, v[0].Load(), label, no)
	}
	pair("acpguard_provider_decisions_total", "counter", "Prepare requests answered, by the decision sent.", "outcome", &m.answers, "deny", "allow")
	pair("acpguard_provider_policy_decisions_total", "counter", "Decisions of the policy, which differ from those sent in shadow mode and when the audit log fails.", "decision", &m.policy, "deny", "allow")
	b.single("acpguard_provider_handshakes_total", "counter", "Handshakes answered.", m.handshakes.Load())
	b.family("acpguard_provider_request_failures_total", "counter", "Requests refused, by status and reason.")
	for i, k := range providerFailureKinds {
		b.sample("acpguard_provider_request_failures_total", m.failures[i].Load(), "status", strconv.Itoa(k.status), "reason", k.reason)
	}
	b.single("acpguard_provider_audit_failures_total", "counter", "Decisions turned into denials because the audit log could not be written.", m.auditFailures.Load())
	b.single("acpguard_provider_opa_failures_total", "counter", "Decisions turned into denials because Open Policy Agent gave no decision (--opa).", m.opaFailures.Load())
	pair("acpguard_provider_policy_reloads_total", "counter", "Policy reloads on SIGHUP, by result.", "result", &m.reloads, "failed", "ok")
	b.single("acpguard_provider_policy_rules", "gauge", "Rules of the policy in force.", int64(rules))
	b.single("acpguard_provider_shadow", "gauge", "1 when the provider runs in shadow mode and answers allow whatever the policy says.", int64(providerPairIndex(m.shadow)))
	b.histogram("acpguard_provider_decision_duration_seconds", "Time from receiving a prepare request to sending its decision.", &m.latency)
	return b.Bytes()
}
