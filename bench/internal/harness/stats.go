package harness

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Quantile returns the q-quantile (0..1) of sorted durations.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Latencies summarises a sample: p50, p99, p999 and max.
type Latencies struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

// Summarise sorts d in place and returns its summary.
func Summarise(d []time.Duration) Latencies {
	slices.Sort(d)
	l := Latencies{N: len(d)}
	if len(d) == 0 {
		return l
	}
	l.P50, l.P99, l.P999, l.Max = Quantile(d, .5), Quantile(d, .99), Quantile(d, .999), d[len(d)-1]
	return l
}

func (l Latencies) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v p999=%v max=%v", l.N, Round(l.P50), Round(l.P99), Round(l.P999), Round(l.Max))
}

// Round keeps a latency's meaningful digits: ms above a second, 10 µs
// above a millisecond, µs below.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// Median and spread (min..max) of repeated figures.
func Median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[0], s[len(s)-1]
}

// ForEach calls fn(i) for every i in [0, n) on workers goroutines and
// returns when all calls have returned. fn must be safe to call
// concurrently.
func ForEach(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}
