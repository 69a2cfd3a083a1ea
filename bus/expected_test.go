package bus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// A missed expected run is a pending run of the job, marked as a missed
// start: it is in the job's history and counts in its missed metric, and
// the same slot recorded again (a restart judging it again) stays one run.
// Two tenants keep theirs apart.
func TestRecordMissed(t *testing.T) {
	t.Parallel()
	var agg *metrics.Aggregator
	f := newFixture(t, func(o *Options) {
		agg = newAggregator(t, o.Clock)
		o.Observers = []Observer{agg}
	})
	slot := t0.Add(-10 * time.Minute)
	for _, tenant := range []string{"", "acme"} {
		for i := range 2 {
			fresh, err := f.bus.RecordMissed(t.Context(), []Missed{{Tenant: tenant, Job: "nightly_backup", Slot: slot}})
			if err != nil {
				t.Fatal(err)
			}
			if fresh[0] != (i == 0) {
				t.Fatalf("recording %d: fresh %v", i, fresh)
			}
		}
	}
	f.drain()
	for _, tenant := range []string{"", "acme"} {
		task, err := f.bus.Get(tenant, MissedRunID("nightly_backup", slot))
		if err != nil || task == nil {
			t.Fatalf("tenant %q: %v %v", tenant, task, err)
		}
		if task.Status != apollo.StatusPending || !task.Late || task.Name != "nightly_backup" || task.ScheduledAt != slot.UnixMilli() {
			t.Fatalf("tenant %q: the missed run is %+v", tenant, task)
		}
		if n := len(task.History); n != 2 || task.History[1].Kind != apollo.KindMissedStart {
			t.Fatalf("tenant %q: history %+v", tenant, task.History)
		}
	}
	if row := jobRow(t, agg, "nightly_backup"); row.Missed != 1 || row.Late != 1 {
		t.Fatalf("the default tenant's missed %d, want 1 (the same slot twice is one run): %+v", row.Missed, row)
	}
	long := strings.Repeat("j", apollo.MaxNameBytes)
	if id := MissedRunID(long, slot); len(id) > apollo.MaxTaskIDBytes {
		t.Fatalf("%d bytes", len(id))
	}
	if fresh, err := f.bus.RecordMissed(t.Context(), []Missed{{Job: long, Slot: slot}, {Job: "other", Slot: slot}}); err != nil || !fresh[0] || !fresh[1] {
		t.Fatal(fresh, err)
	}
}

// TimeOut ends a running run as timeout (max_runtime), and nothing else.
func TestTimeOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.publish(t, ev("r1", 1, apollo.StatusRunning), ev("d1", 1, apollo.StatusRunning), ev("d1", 2, apollo.StatusSuccess))
	if !f.bus.TimeOut("", "r1") {
		t.Fatal("a running run was not timed out")
	}
	if f.bus.TimeOut("", "d1") || f.bus.TimeOut("", "nope") || f.bus.TimeOut("other", "r1") {
		t.Fatal("timed out a run that was not running")
	}
	if got := f.get(t, "r1"); got.Status != apollo.StatusTimeout || got.History[len(got.History)-1].Kind != apollo.KindTimeout {
		t.Fatalf("%+v", got)
	}
}

// A reporter cannot take a missed run's task ID: the event is refused with
// the field and the reason, in every tenant, and the missed run of that
// slot is still recorded, fresh. Before, the reporter's run took the ID,
// and RecordMissed saw a duplicate and recorded nothing.
func TestMissedRunIDsAreReserved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	slot := t0.Add(-10 * time.Minute)
	id := MissedRunID("nightly_backup", slot)
	for _, tenant := range []string{"", "acme"} {
		evs := []apollo.Event{
			{TaskID: id, Tenant: tenant, Name: "nightly_backup", Sequence: 1, Status: apollo.StatusPending, Ts: slot.UnixMilli()},
			{TaskID: MissedPrefix, Tenant: tenant, Name: "x", Sequence: 1, Status: apollo.StatusSuccess, Ts: slot.UnixMilli()},
		}
		out := make([]Outcome, len(evs))
		if err := f.bus.Publish(t.Context(), evs, out); err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			var e *apollo.Error
			if o.Result != Rejected || !errors.As(o.Err, &e) || e.Code != apollo.EINVALID || e.Field != "taskID" ||
				!strings.Contains(e.Message, "missed runs") || !strings.Contains(e.Hint, MissedPrefix) {
				t.Fatalf("tenant %q, event %d: %+v, want rejected on taskID", tenant, i, o)
			}
		}
		if task, err := f.bus.Get(tenant, id); apollo.ErrorCode(err) != apollo.ENOTFOUND || task != nil {
			t.Fatalf("tenant %q: the refused event left %+v %v", tenant, task, err)
		}
		fresh, err := f.bus.RecordMissed(t.Context(), []Missed{{Tenant: tenant, Job: "nightly_backup", Slot: slot}})
		if err != nil || !fresh[0] {
			t.Fatalf("tenant %q: recording the missed run: %v %v", tenant, fresh, err)
		}
	}
	// A job whose name begins like one cannot ping either: its run ID
	// would begin so too.
	if _, o, err := f.bus.Ping(t.Context(), apollo.Ping{Job: MissedPrefix + "job", Status: apollo.StatusSuccess, Ts: slot.UnixMilli()}); err != nil || o.Result != Rejected {
		t.Fatalf("a ping of a job named missed:job: %+v %v, want rejected", o, err)
	}
}
