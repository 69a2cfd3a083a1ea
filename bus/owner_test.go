package bus

import (
	"math"
	"testing"

	"github.com/apollo-11/apollo"
)

// A task belongs to the job of its first event (issue 16.5): an event that
// names another job is refused, before the duplicate check, so that a
// reporter whose task ID was taken hears so; an event without a name
// belongs to the task's job.
func TestTaskBelongsToItsJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	named := func(id, name string, seq int64, st apollo.Status) apollo.Event {
		e := ev(id, seq, st)
		e.Name = name
		e.Ts = t0.UnixMilli() + 1000 // ev derives ts from the sequence
		return e
	}
	f.publish(t, named("payroll-1", "payroll", 1, apollo.StatusRunning))
	tests := []struct {
		name string
		e    apollo.Event
		want Result
	}{
		{"another job's name", named("payroll-1", "backup_x", 2, apollo.StatusSuccess), Rejected},
		{"another job's name on an old sequence", named("payroll-1", "backup_x", 1, apollo.StatusRunning), Rejected},
		{"its own job's name", named("payroll-1", "payroll", 1, apollo.StatusRunning), Duplicate},
		{"no name", named("payroll-1", "", 2, apollo.StatusFailed), Accepted},
	}
	for _, tt := range tests {
		o := f.publish(t, tt.e)[0]
		if o.Result != tt.want {
			t.Fatalf("%s: %v %v, want %v", tt.name, o.Result, o.Err, tt.want)
		}
		if tt.want == Rejected && (o.Err.Code != apollo.ECONFLICT || o.Err.Field != "name" ||
			o.Err.Message != `task "payroll-1" belongs to job "payroll", not "backup_x"`) {
			t.Fatalf("%s: %+v", tt.name, o.Err)
		}
	}
	if got := f.get(t, "payroll-1"); got.Status != apollo.StatusFailed || got.Name != "payroll" {
		t.Errorf("task %+v", got)
	}
	if j, err := f.bus.JobOf("", "payroll-1"); j != "payroll" || err != nil {
		t.Errorf("JobOf = %q, %v", j, err)
	}
	if j, err := f.bus.JobOf("other", "payroll-1"); j != "" || err != nil {
		t.Errorf("JobOf in another tenant = %q, %v", j, err)
	}

	// A task ID claimed first by another job: the real reporter is told,
	// not answered "duplicate".
	f.publish(t, named("payroll-2", "backup_x", apollo.MaxSequence, apollo.StatusManualBlocked))
	for _, st := range []apollo.Status{apollo.StatusRunning, apollo.StatusFailed} {
		if o := f.publish(t, named("payroll-2", "payroll", 1, st))[0]; o.Result != Rejected || o.Err.Field != "name" {
			t.Errorf("the real reporter's %v: %v %+v", st, o.Result, o.Err)
		}
	}
}

// A live task's sequence cannot jump more than MaxSequenceJump at once: one
// event cannot use up a run's later sequences. A task's first event may
// carry any sequence.
func TestSequenceJumpBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.publish(t, ev("j1", 1, apollo.StatusPending))
	// ev derives ts from the sequence; these keep theirs in range.
	at := func(e apollo.Event) apollo.Event { e.Ts = t0.UnixMilli() + 2000; return e }
	for _, seq := range []int64{math.MaxInt64, apollo.MaxSequence, 2 + MaxSequenceJump} {
		o := f.publish(t, at(ev("j1", seq, apollo.StatusRunning)))[0]
		if o.Result != Rejected || o.Err.Code != apollo.EINVALID || o.Err.Field != "sequence" {
			t.Fatalf("sequence %d after 1: %v %+v", seq, o.Result, o.Err)
		}
	}
	if o := f.publish(t, at(ev("j1", 1+MaxSequenceJump, apollo.StatusRunning)))[0]; o.Result != Accepted {
		t.Fatalf("a jump of exactly the limit: %v %v", o.Result, o.Err)
	}
	if o := f.publish(t, at(ev("j2", apollo.MaxSequence, apollo.StatusRunning)))[0]; o.Result != Accepted {
		t.Fatalf("a first event: %v %v", o.Result, o.Err)
	}
	if got := f.get(t, "j1"); got.Status != apollo.StatusRunning || got.Sequence != 1+MaxSequenceJump {
		t.Errorf("task %+v", got)
	}
}
