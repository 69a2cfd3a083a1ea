package metrics_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
)

// newStarted returns an Aggregator on a fake clock with compaction running,
// stopped when the test ends.
func newStarted(t testing.TB) (*metrics.Aggregator, *apollo.FakeClock) {
	t.Helper()
	clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 678e6, time.UTC))
	a, err := metrics.New(metrics.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	return a, clock
}

// The suite runs twice: with compaction running as time moves, and
// without it. Answers must not depend on when compaction last ran; a bug
// that makes them depend on it shows in one of the two.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("compacting", func(t *testing.T) {
		a, clock := newStarted(t)
		metricstest.Run(t, metricstest.Harness{Apply: a.Apply, Store: a, Clock: clock})
	})
	t.Run("idle", func(t *testing.T) {
		clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 678e6, time.UTC))
		a, err := metrics.New(metrics.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		metricstest.Run(t, metricstest.Harness{Apply: a.Apply, Store: a, Clock: clock})
	})
}
