package harness

import (
	"math/bits"
	"time"
)

// Hist is a log-linear latency histogram (exact below 64 ns, then 32
// buckets per power of two: within about 3%). It keeps millions of
// samples in a fixed 10 KB, so a load generator that measures every event
// adds no garbage of its own. Not safe for concurrent use: keep one per
// goroutine and Merge them.
type Hist struct {
	counts [64 + 40*32]int64
	n      int64
	max    time.Duration
}

func histIndex(v int64) int {
	if v < 64 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 6
	return min(64+(e-1)*32+int(v>>e)-32, 64+40*32-1)
}

// histValue is the middle of bucket i.
func histValue(i int) time.Duration {
	if i < 64 {
		return time.Duration(i)
	}
	e := (i-64)/32 + 1
	m := int64((i-64)%32 + 32)
	return time.Duration(m<<e + (int64(1)<<e)/2)
}

// Record adds one sample.
func (h *Hist) Record(d time.Duration) { h.RecordN(d, 1) }

// RecordN adds n samples of d.
func (h *Hist) RecordN(d time.Duration, n int64) {
	h.counts[histIndex(int64(d))] += n
	h.n += n
	h.max = max(h.max, d)
}

// Merge adds o's samples to h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count is the number of samples.
func (h *Hist) Count() int64 { return h.n }

// Quantile returns the q-quantile (0..1), the same rank as Quantile on a
// sorted slice.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.999999)
	rank = max(1, min(rank, h.n))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(histValue(i), h.max)
		}
	}
	return h.max
}

// Latencies summarises the histogram like Summarise does a slice.
func (h *Hist) Latencies() Latencies {
	return Latencies{N: int(h.n), P50: h.Quantile(.5), P99: h.Quantile(.99), P999: h.Quantile(.999), Max: h.max}
}
