package metrics

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// BenchmarkTableWorkers compares Table on one goroutine with Table on
// every core, in the same run, for 100 000 jobs with a run a minute over
// the last 10 minutes.
func BenchmarkTableWorkers(b *testing.B) {
	a, err := New(Options{Clock: apollo.NewFakeClock(t0)})
	if err != nil {
		b.Fatal(err)
	}
	now := t0.UnixMilli()
	const names = 100_000
	for m := int64(10); m > 0; m-- {
		for i := range names {
			name := "job_" + strconv.Itoa(i)
			ts := now - m*60_000 + int64(i%6)*10_000
			a.Apply(change("", name, apollo.StatusNone, apollo.StatusRunning, ts))
			a.Apply(change("", name, apollo.StatusRunning, apollo.StatusSuccess, ts+2000))
		}
	}
	for _, w := range []int{1, 0} {
		b.Run("workers="+map[int]string{1: "1", 0: "GOMAXPROCS"}[w], func(b *testing.B) {
			a.tableWorkers = w
			for range b.N {
				if _, err := a.Table(context.Background(), Query{Window: 5 * time.Minute, Now: t0}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
