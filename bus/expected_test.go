package bus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A missed expected run is a pending run of the job, marked as a missed
// start: it is in the job's history and counts in its missed metric, and
// the same slot recorded again (a restart judging it again) stays one run.
// Two tenants keep theirs apart.
func TestRecordMissed(t *testing.T) {
	t.Parallel()
	f, agg := newMetricsFixture(t)
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

// When the log refuses the record, TimeOut, Mark and RecordMissed's
// missed start report nothing done, count nothing, and leave the runs as
// they were, in every tenant, and LogFailed says the log failed (their
// callers keep what the records were for). Before, they reported true and
// counted the timeout although nothing was logged or applied.
func TestOwnRecordsTheLogRefusedAreNotReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tenants := []string{"", "acme"}
	for _, tenant := range tenants {
		e := ev("r1", 1, apollo.StatusRunning)
		e.Tenant = tenant
		f.publish(t, e)
	}
	if f.bus.LogFailed() {
		t.Fatal("LogFailed before the log failed")
	}
	f.log.mu.Lock()
	f.log.failAppend = errors.New("no space left on device")
	f.log.mu.Unlock()
	for _, tenant := range tenants {
		if f.bus.TimeOut(tenant, "r1") {
			t.Errorf("tenant %q: TimeOut reported a timeout the log refused", tenant)
		}
		if f.bus.Mark(tenant, "r1", apollo.KindTooShort, "ran 1s") {
			t.Errorf("tenant %q: Mark reported a mark the log refused", tenant)
		}
		got, err := f.bus.Get(tenant, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != apollo.StatusRunning || len(got.History) != 1 {
			t.Errorf("tenant %q: the run changed without a log record: %+v", tenant, got)
		}
	}
	if _, err := f.bus.RecordMissed(t.Context(), []Missed{{Tenant: "acme", Job: "nightly", Slot: t0.Add(-time.Hour)}}); err == nil {
		t.Error("RecordMissed reported no error with the log refusing")
	}
	if !f.bus.LogFailed() {
		t.Error("LogFailed does not say so after the log refused a timeout for its failure")
	}
	if st := f.bus.Stats(); st.Timeouts != 0 || st.MissedStart != 0 {
		t.Errorf("counted what the log refused: %d timeouts, %d missed starts", st.Timeouts, st.MissedStart)
	}
}

// A record the log refuses for its size is refused alone: the event or
// the correction is answered with the log's reason, nothing changes, and
// the log goes on taking the next ones, in every tenant. Before, the bus
// took the refusal for a failed log and refused everything until a restart
// (a 2 MiB correction reason stopped the server so, before reasons were
// bounded).
func TestARecordTheLogRefusesIsRefusedAlone(t *testing.T) {
	t.Parallel()
	failed := make(chan error, 1)
	f := newFixture(t, func(o *Options) { o.OnLogFailed = func(err error) { failed <- err } })
	f.log.limit = 200
	for _, tenant := range []string{"", "acme"} {
		e := ev("r1", 1, apollo.StatusRunning)
		e.Tenant = tenant
		big := ev("r2", 1, apollo.StatusRunning)
		big.Tenant, big.Extra = tenant, []byte(`{"log":"`+strings.Repeat("x", 300)+`"}`)
		out := f.publish(t, big, e)
		if out[0].Result != Rejected || apollo.ErrorCode(out[0].Err) != apollo.ETOOLARGE || out[1].Result != Accepted {
			t.Fatalf("tenant %q: outcomes %+v, %+v; want the large event rejected for its size, the next accepted", tenant, out[0], out[1])
		}
		if _, err := f.bus.Get(tenant, "r2"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
			t.Fatalf("tenant %q: the refused event left a task: %v", tenant, err)
		}
		if _, err := f.bus.Correct(t.Context(), tenant, "r1", apollo.StatusFailed, "ops", strings.Repeat("y", 300)); apollo.ErrorCode(err) != apollo.ETOOLARGE {
			t.Fatalf("tenant %q: a correction over the log's limit: %v, want its refusal", tenant, err)
		}
		if _, err := f.bus.Correct(t.Context(), tenant, "r1", apollo.StatusFailed, "ops", "stuck"); err != nil {
			t.Fatalf("tenant %q: the correction after it: %v", tenant, err)
		}
		if got, err := f.bus.Get(tenant, "r1"); err != nil || got.Status != apollo.StatusFailed || len(got.History) != 2 {
			t.Fatalf("tenant %q: after the refused correction and the next: %+v, %v; want failed with 2 records", tenant, got, err)
		}
	}
	select {
	case err := <-failed:
		t.Fatalf("the log was taken for failed: %v", err)
	default:
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

// Mark writes a too_short or too_often record with its reason into the
// run's history and changes nothing else: not the status, not the
// metrics. The record survives a restart (replay of the log), and the
// tenants keep their runs apart.
func TestMarkRecordsAFindingOnTheRun(t *testing.T) {
	t.Parallel()
	f, agg := newMetricsFixture(t)
	at := t0.Add(-time.Minute).UnixMilli()
	for _, tenant := range []string{"", "acme"} {
		out := make([]Outcome, 3)
		if err := f.bus.Publish(t.Context(), []apollo.Event{
			{TaskID: "quick", Tenant: tenant, Name: "job_m", Sequence: 1, Status: apollo.StatusRunning, Ts: at},
			{TaskID: "quick", Tenant: tenant, Name: "job_m", Sequence: 2, Status: apollo.StatusSuccess, Ts: at + 2000},
			{TaskID: "again", Tenant: tenant, Name: "job_m", Sequence: 1, Status: apollo.StatusRunning, Ts: at + 3000},
		}, out); err != nil {
			t.Fatal(err)
		}
	}
	f.drain()
	before := jobRow(t, agg, "job_m")
	if !f.bus.Mark("", "quick", apollo.KindTooShort, "ran 2s; min_runtime is 30s") ||
		!f.bus.Mark("", "again", apollo.KindTooOften, "2 runs within 1h; max_runs is 1") {
		t.Fatal("a run was not marked")
	}
	if f.bus.Mark("", "nope", apollo.KindTooShort, "x") || f.bus.Mark("other", "quick", apollo.KindTooShort, "x") {
		t.Fatal("marked a run that is not there")
	}
	f.drain()
	if after := jobRow(t, agg, "job_m"); after != before {
		t.Fatalf("the marks changed the metrics: %+v, was %+v", after, before)
	}
	check := func(b *Bus, when string) {
		t.Helper()
		for id, want := range map[string]struct {
			status apollo.Status
			kind   apollo.Kind
			reason string
		}{"quick": {apollo.StatusSuccess, apollo.KindTooShort, "ran 2s; min_runtime is 30s"}, "again": {apollo.StatusRunning, apollo.KindTooOften, "2 runs within 1h; max_runs is 1"}} {
			got := mustGet(t, b, id)
			last := got.History[len(got.History)-1]
			if got.Status != want.status || last.Kind != want.kind || last.Reason != want.reason || last.Status != want.status {
				t.Errorf("%s: %s is %s with last record %+v, want %s marked %s %q", when, id, got.Status, last, want.status, want.kind, want.reason)
			}
			other, err := b.Get("acme", id)
			if err != nil || other.History[len(other.History)-1].Kind != apollo.KindReport {
				t.Errorf("%s: tenant acme's %s was marked: %+v %v", when, id, other, err)
			}
		}
	}
	check(f.bus, "live")

	check(f.replayed(t, nil), "after replay")
}

// A missed run recorded but not yet marked when the process died (the
// pending run is in the log, its missed-start record is not) is marked
// when the slot is judged again after the restart, with the finding's
// words, and not fresh (the run was recorded before); each tenant's own.
// Before, RecordMissed took the duplicate for "recorded and marked" and
// the run never got its mark: no ON: missed, no missed in the metrics.
func TestRecordMissedMarksARunRecordedButNotMarked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	slot := t0.Add(-10 * time.Minute)
	for _, tenant := range []string{"", "acme"} {
		at := slot.UnixMilli()
		evs := []apollo.Event{{TaskID: MissedRunID("nightly", slot), Tenant: tenant, Name: "nightly", Sequence: 1, Status: apollo.StatusPending, Ts: at, ScheduledAt: at}}
		out := make([]Outcome, 1)
		if err := f.bus.publish(t.Context(), evs, out, true); err != nil || out[0].Result != Accepted {
			t.Fatal(out, err) // the first of RecordMissed's two records
		}
		fresh, err := f.bus.RecordMissed(t.Context(), []Missed{{Tenant: tenant, Job: "nightly", Slot: slot, Detail: "no run started by 02:05 (" + tenant + ")"}})
		if err != nil || fresh[0] {
			t.Fatalf("tenant %q: %v %v, want recorded before", tenant, fresh, err)
		}
		task, err := f.bus.Get(tenant, MissedRunID("nightly", slot))
		if err != nil || task == nil || !task.Late || len(task.History) != 2 {
			t.Fatalf("tenant %q: %+v %v, want the run late with its mark", tenant, task, err)
		}
		if r := task.History[1]; r.Kind != apollo.KindMissedStart || r.Reason != "no run started by 02:05 ("+tenant+")" {
			t.Fatalf("tenant %q: the mark %+v", tenant, r)
		}
		if _, err := f.bus.RecordMissed(t.Context(), []Missed{{Tenant: tenant, Job: "nightly", Slot: slot}}); err != nil {
			t.Fatal(err)
		}
		if task, _ := f.bus.Get(tenant, MissedRunID("nightly", slot)); len(task.History) != 2 {
			t.Fatalf("tenant %q: marked again: %+v", tenant, task.History)
		}
	}
}
