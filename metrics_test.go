// metrics_test.go checks metrics.go's writer: label values escaped as the
// text format requires, and the histogram's bucket bounds and sums.
package main

import (
	"strings"
	"testing"
	"time"
)

func TestPromWriterSample(t *testing.T) {
	for _, tt := range []struct {
		labels []string
		want   string
	}{
		{nil, "m 7\n"},
		{[]string{"a", "x"}, "m{a=\"x\"} 7\n"},
		{[]string{"a", "x", "b", "y"}, "m{a=\"x\",b=\"y\"} 7\n"},
		{[]string{"a", `q"uote`}, `m{a="q\"uote"} 7` + "\n"},
		{[]string{"a", `back\slash`}, `m{a="back\\slash"} 7` + "\n"},
		{[]string{"a", "new\nline"}, `m{a="new\nline"} 7` + "\n"},
		{[]string{"a", "é\t"}, "m{a=\"é\t\"} 7\n"},
	} {
		var b promWriter
		b.sample("m", 7, tt.labels...)
		if b.String() != tt.want {
			t.Errorf("labels %q: %q, want %q", tt.labels, b.String(), tt.want)
		}
		if _, err := promParseStrict("# HELP m M.\n# TYPE m counter\n" + b.String()); err != nil {
			t.Errorf("labels %q: %v", tt.labels, err)
		}
	}
}

func TestPromWriterHistogram(t *testing.T) {
	var h latencyHistogram
	for _, d := range []time.Duration{latencyBounds[0], latencyBounds[0] + 1, 2500 * time.Millisecond, time.Hour} {
		h.observe(d)
	}
	var b promWriter
	b.histogram("h_seconds", "H.", &h)
	text := b.String()
	samples, err := promParseStrict(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if n := strings.Count(text, "h_seconds_bucket{"); n != len(latencyBounds)+1 {
		t.Errorf("%d buckets, want %d", n, len(latencyBounds)+1)
	}
	for le, want := range map[string]float64{"0.0001": 1, "0.00025": 2, "0.0025": 2, "1": 2, "2.5": 3, "+Inf": 4} {
		if got := samples[`h_seconds_bucket{le="`+le+`"}`]; got != want {
			t.Errorf("bucket le=%s: %v, want %v", le, got, want)
		}
	}
	if samples["h_seconds_count"] != 4 || !strings.Contains(text, "h_seconds_sum 3602.500200001\n") {
		t.Errorf("count or sum wrong:\n%s", text)
	}
}
