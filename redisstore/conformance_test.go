package redisstore

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

var quiet = slog.New(slog.DiscardHandler)

// fixture is an aggregator, its flusher and a store over one test prefix.
type fixture struct {
	clock *apollo.FakeClock
	agg   *metrics.Aggregator
	fl    *Flusher
	st    *Store
	opts  Options
}

func newFixture(t testing.TB, change func(*Options)) *fixture {
	t.Helper()
	c, prefix := redistest.Client(t)
	clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 678e6, time.UTC))
	opts := Options{Client: c, Prefix: prefix, Clock: clock, Logger: quiet}
	if change != nil {
		change(&opts)
	}
	return newFixtureOn(t, clock, opts)
}

// newFixtureOn makes another writer (or reader) on the same clock and
// Redis.
func newFixtureOn(t testing.TB, clock *apollo.FakeClock, opts Options) *fixture {
	t.Helper()
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: quiet,
		BucketRetention: opts.BucketRetention, RollupRetention: opts.RollupRetention})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := NewFlusher(agg, opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{clock: clock, agg: agg, fl: fl, st: st, opts: opts}
}

func (f *fixture) flush(t testing.TB) {
	t.Helper()
	if err := f.fl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The Redis store passes the suite the Aggregator passes: changes applied
// through the flusher, Sync a flush, every answer read back from Redis.
// Once with the aggregator compacting as the clock moves, once without.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, compacting := range []bool{true, false} {
		name := map[bool]string{true: "compacting", false: "idle"}[compacting]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			if compacting {
				if err := f.agg.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.agg.Stop(context.Background()) })
			}
			metricstest.Run(t, metricstest.Harness{
				Apply: f.fl.Apply,
				Sync:  func() error { return f.fl.Flush(context.Background()) },
				Store: f.st,
				Clock: f.clock,
			})
		})
	}
}
