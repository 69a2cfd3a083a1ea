package main

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
)

// slowLogBus is a fakeExpectBus whose RecordMissed waits, as a log whose
// fsync a loaded machine makes slow, until the test lets it go or its
// context ends; it tells the test of each call and of its context.
type slowLogBus struct {
	fakeExpectBus
	called  chan context.Context
	release chan struct{}
}

func (b *slowLogBus) RecordMissed(ctx context.Context, ms []bus.Missed) ([]bool, error) {
	b.called <- ctx
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.fakeExpectBus.RecordMissed(ctx, ms)
}

// The loop waits for the missed runs of two tenants to be durable for as
// long as the log takes, bounded by its own life, not by a fixed time:
// before, it gave the log 10 s, and on a loaded machine a slower fsync
// left the missed runs without their missed-start marks, with a warning
// that they could not be recorded. The wait ends when the loop stops.
func TestMissedRunsWaitForTheLogAsLongAsItTakes(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := apollo.NewFakeClock(t0)
	x := newTestExpectations(t, "", clock, &syncBuffer{})
	for _, tenant := range []string{"acme", "globex"} {
		if err := x.put(context.Background(), tenant, []byte("expectations:\n  - job: j\n    every: 1m\n    grace: 1s\n")); err != nil {
			t.Fatal(err)
		}
	}
	b := &slowLogBus{called: make(chan context.Context, 1), release: make(chan struct{})}
	if err := x.start(b, nil, nil); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			close(b.release)
			x.stopLoop()
		}
	})
	if !clock.BlockUntil(2, testwait.Timeout(t)) { // the loop's tickers
		t.Fatal("the loop did not start")
	}
	clock.Advance(2 * time.Minute)
	var ctx context.Context
	select {
	case ctx = <-b.called:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the missed runs were not recorded")
	}
	if d, ok := ctx.Deadline(); ok {
		t.Fatalf("the wait for the log ends at %v, %v from now, however long the log takes", d, time.Until(d).Round(time.Second))
	}
	close(b.release)
	eventuallyTrue(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.missed) == 2
	})
	// The next wait, held, ends when the loop stops.
	b.release = make(chan struct{})
	clock.Advance(2 * time.Minute)
	select {
	case ctx = <-b.called:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the next missed runs were not recorded")
	}
	x.stopLoop()
	stopped = true
	if ctx.Err() == nil {
		t.Fatal("the loop stopped and its wait for the log did not end")
	}
}
