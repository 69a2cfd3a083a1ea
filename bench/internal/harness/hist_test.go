package harness

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestHistMatchesSorted checks the histogram's quantiles against the exact
// ones of the same sample, within the bucket width (1/32).
func TestHistMatchesSorted(t *testing.T) {
	var h Hist
	var xs []time.Duration
	for range 100_000 {
		d := time.Duration(rand.ExpFloat64() * float64(2*time.Millisecond))
		h.Record(d)
		xs = append(xs, d)
	}
	exact := Summarise(xs)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{.5, exact.P50}, {.99, exact.P99}, {.999, exact.P999}} {
		got := h.Quantile(c.q)
		if diff := float64(got-c.want) / float64(c.want); diff > 1.0/32 || diff < -1.0/32 {
			t.Errorf("q%.3f: histogram %v, exact %v", c.q, got, c.want)
		}
	}
	if h.Latencies().Max != exact.Max || h.Count() != int64(len(xs)) {
		t.Errorf("max %v count %d, want %v %d", h.Latencies().Max, h.Count(), exact.Max, len(xs))
	}
	var m Hist
	m.Merge(&h)
	m.RecordN(time.Millisecond, 5)
	if m.Count() != h.Count()+5 {
		t.Errorf("merged count %d", m.Count())
	}
}

// TestHistIndexMonotonic checks that buckets never go backwards and that
// a bucket's middle falls in it.
func TestHistIndexMonotonic(t *testing.T) {
	prev := 0
	for v := int64(0); v < 1<<36; v = v*33/32 + 1 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("index(%d) = %d < %d", v, i, prev)
		}
		prev = i
		if got := histIndex(int64(histValue(i))); got != i {
			t.Fatalf("value of bucket %d (%v) falls in bucket %d", i, histValue(i), got)
		}
	}
}
