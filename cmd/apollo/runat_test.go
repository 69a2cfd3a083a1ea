package main

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// runAt hands out run times that are never ahead of the clock when it
// returns, and each run starts after the end of every run handed out
// before it, also when runs are asked for faster than one a millisecond
// and from several goroutines (two tenants' runs, as the tests report
// them). Before, it went on a millisecond past the previous run's end
// whatever the clock said: a burst of runs was handed times in the
// future, which the server takes as no later than it received them, so
// that two runs reported in the same millisecond ended in the same
// millisecond after all, and a job's flapping could be missed.
func TestRunAtNeverAheadOfTheClock(t *testing.T) {
	t.Parallel()
	d := &deployment{t: t}
	type run struct{ start, end, now int64 }
	var (
		mu   sync.Mutex
		runs []run
		wg   sync.WaitGroup
	)
	for range tenants {
		wg.Go(func() {
			for range 50 {
				start, end := d.runAt()
				now := time.Now().UnixMilli()
				mu.Lock()
				runs = append(runs, run{start, end, now})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(runs, func(a, b run) int { return int(a.end - b.end) })
	for i, r := range runs {
		if r.end > r.now || r.start >= r.end {
			t.Fatalf("run %d: started %d, ended %d, handed out at %d: ahead of the clock", i, r.start, r.end, r.now)
		}
		if i > 0 && r.start <= runs[i-1].end {
			t.Fatalf("run %d starts at %d, not after the end of the one before, at %d", i, r.start, runs[i-1].end)
		}
	}
}
