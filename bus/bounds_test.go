package bus

import (
	"math"
	"testing"

	"github.com/apollo-11/apollo"
)

// A log written before ingest bounded timeoutMs and scheduledAt may hold
// int64 max. Replaying it must not arm a deadline that wrapped into the
// past: the run timed out at once with a negative finishedAt, and a pending
// run was marked late at once (issue 16.1).
func TestHugeDeadlinesFromAnOldLogNeverFire(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	b, err := New(Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	recs := []apollo.Record{
		{Event: apollo.Event{TaskID: "slow", Sequence: 1, Status: apollo.StatusRunning, Ts: t0.UnixMilli(), TimeoutMs: math.MaxInt64}},
		{Event: apollo.Event{TaskID: "later", Sequence: 1, Status: apollo.StatusPending, Ts: t0.UnixMilli(), ScheduledAt: math.MaxInt64}},
		{Event: apollo.Event{TaskID: "slow", Tenant: "b", Sequence: 1, Status: apollo.StatusRunning, Ts: t0.UnixMilli(), TimeoutMs: math.MaxInt64 - 500}},
	}
	for i := range recs {
		recs[i].ReceivedAt = t0.UnixMilli()
		if err := b.Replay(uint64(i+1), appendRecord(nil, &recs[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, now := range []int64{t0.UnixMilli(), math.MaxInt64 / 2} {
		if due, _ := b.timers.due(now); len(due) != 0 {
			t.Fatalf("at %d, %d deadlines are due: %+v", now, len(due), due)
		}
	}
	if n := b.timers.len(); n != len(recs) {
		t.Errorf("%d deadlines armed, want %d", n, len(recs))
	}
}
