package main

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// Runs of one job that end in the same millisecond count for flapping in
// the order the server accepted their ends (their place in the log, the
// change's LSN), whatever order the bus tells them in: it applies the runs
// of different tasks in parallel, live and in a replay. In each tenant a
// success, then a failure and a success that end in the same millisecond,
// logged in that order, are two switches, flapping: told in log order
// (acme) and with the last two the other way round (globex). Before, the
// evaluator counted them as told: globex's success, success, failure was
// one switch, and its flapping was missed.
func TestEndsOfOneMillisecondCountInTheLogsOrder(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	x := newTestExpectations(t, "", apollo.NewFakeClock(t0.Add(time.Hour)), &syncBuffer{})
	for _, tenant := range tenants {
		if err := x.put(context.Background(), tenant, []byte("expectations:\n  - {job: flappy, flapping: {changes: 2, window: 1h}}\n")); err != nil {
			t.Fatal(err)
		}
	}
	end := func(tenant, id string, st apollo.Status, at time.Time, lsn uint64) *apollo.Change {
		c := change(tenant, "flappy", id, apollo.StatusRunning, st, at.Add(-time.Second), at)
		c.LSN = lsn
		return c
	}
	tie := t0.Add(time.Minute)
	for tenant, order := range map[string][]int{"acme": {0, 1, 2}, "globex": {0, 2, 1}} {
		ends := []*apollo.Change{
			end(tenant, "ok-1", apollo.StatusSuccess, t0, 10),
			end(tenant, "failed", apollo.StatusFailed, tie, 11),
			end(tenant, "ok-2", apollo.StatusSuccess, tie, 12),
		}
		for _, i := range order {
			x.Apply(ends[i])
		}
		if !x.ev.Flapping(tenant, "flappy") {
			t.Errorf("tenant %s, ends told in the order %v: not flapping", tenant, order)
		}
	}
}
