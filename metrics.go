// metrics.go owns the one writer of the Prometheus text exposition format
// 0.0.4, written by hand, behind serve's and the provider's GET /metrics,
// and the latency histogram both keep.
package main

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// metricsPath is the scrape route of both servers; it needs the bearer token
// like every other route: the counts are the operator's business.
const (
	metricsPath               = "/metrics"
	prometheusTextContentType = "text/plain; version=0.0.4; charset=utf-8"
)

// latencyBounds are the upper bounds of the latency buckets. A decision over
// loopback takes tens of microseconds; the top buckets reach the client's
// longest timeout range.
var latencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond,
}

// latencyHistogram counts observations per bucket (not cumulative: the
// writer sums them, so _count always equals the +Inf bucket).
type latencyHistogram struct {
	buckets [len(latencyBounds) + 1]atomic.Int64 // the last is +Inf
	sumNano atomic.Int64
}

func (h *latencyHistogram) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNano.Add(int64(d))
}

// promWriter writes one exposition. Each family is its HELP and TYPE lines
// and then all its samples; a renderer writes every fixed label value from
// the start, so a series never appears out of nowhere.
type promWriter struct{ bytes.Buffer }

// promLabelEscaper escapes a label value as the text format requires.
var promLabelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// family starts a family; help is the program's own text.
func (p *promWriter) family(name, typ, help string) {
	p.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// sample writes one sample; labels are name, value pairs.
func (p *promWriter) sample(name string, v int64, labels ...string) {
	p.WriteString(name)
	sep := byte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		p.WriteByte(sep)
		sep = ','
		p.WriteString(labels[i] + `="` + promLabelEscaper.Replace(labels[i+1]) + `"`)
	}
	if sep == ',' {
		p.WriteByte('}')
	}
	p.WriteByte(' ')
	p.Write(strconv.AppendInt(p.AvailableBuffer(), v, 10))
	p.WriteByte('\n')
}

// single writes a family of one sample without labels.
func (p *promWriter) single(name, typ, help string, v int64) {
	p.family(name, typ, help)
	p.sample(name, v)
}

// counters writes a counter family of one sample per label value.
func (p *promWriter) counters(name, help, label string, values []string, counts []atomic.Int64) {
	p.family(name, "counter", help)
	for i, v := range values {
		p.sample(name, counts[i].Load(), label, v)
	}
}

// histogram writes h as a family whose buckets are latencyBounds in seconds.
func (p *promWriter) histogram(name, help string, h *latencyHistogram) {
	p.family(name, "histogram", help)
	var cumulative int64
	for i := range h.buckets {
		cumulative += h.buckets[i].Load()
		le := "+Inf"
		if i < len(latencyBounds) {
			le = strconv.FormatFloat(latencyBounds[i].Seconds(), 'f', -1, 64)
		}
		p.sample(name+"_bucket", cumulative, "le", le)
	}
	p.WriteString(name + "_sum " + strconv.FormatFloat(time.Duration(h.sumNano.Load()).Seconds(), 'f', -1, 64) + "\n")
	p.sample(name+"_count", cumulative)
}

// writeMetrics answers a scrape with one whole exposition, never cached.
func writeMetrics(w http.ResponseWriter, exposition []byte) {
	writeReply(w, http.StatusOK, prometheusTextContentType, exposition)
}
