package bus

import (
	"github.com/apollo-11/apollo"
)

// key names a task: tasks of different tenants never share state.
type key struct {
	tenant string
	id     string
}

// task is the hot state of one run. It is kept small (see
// BenchmarkMemoryPerTask; TestTaskRecordSize pins 160 bytes, a size class
// of the allocator): history is a compact encoding, not []Record, and
// what a task holds only for a while is in its side.
type task struct {
	id, tenant  string
	name        string
	status      apollo.Status
	late        bool
	queued      bool   // on the ready list, or being drained by a worker
	listed      bool   // in memory: in its shard and its tenant's list (both locks held to change it)
	pingOpen    bool   // in the open ping runs (ping.go)
	shard       uint8  // index of its shard, for readers that hold only a pointer
	nhist       uint16 // records in history; beside the flags, where it needs no padding of its own
	seq         int64
	createdAt   int64 // server time of its first record, Unix ms; never changes
	scheduledAt int64
	startedAt   int64
	finishedAt  int64
	updatedAt   int64 // server time of the last change, Unix ms
	timeoutMs   int64
	costMs      int64
	history     []byte // encoded records, oldest first (see codec.go)
	side        *side  // nil while the task has nothing queued or waiting
}

// side is what a task holds only for a while: its changes queued for the
// observers, and its events waiting for earlier sequences. Most tasks in
// memory have neither, so a task points to one (8 bytes) rather than
// holding the two slices (48), which put it in the allocator's next size
// class. Its shard keeps the sides its tasks give back (shard.sideOf,
// shard.giveBack), so the queue's array is reused rather than grown again
// for each burst of a task's events. Both are under the shard lock.
type side struct {
	q      []*apollo.Change
	parked []parkedEvent // sorted by sequence
}

// queue is t's changes queued for the observers, oldest first.
func (t *task) queue() []*apollo.Change {
	if t.side == nil {
		return nil
	}
	return t.side.q
}

// waiting is t's events waiting for earlier sequences, in sequence order.
func (t *task) waiting() []parkedEvent {
	if t.side == nil {
		return nil
	}
	return t.side.parked
}

type parkedEvent struct {
	rec   apollo.Record
	until int64 // server time (ms) at which its wait ends: it applies as a gap
}

func (t *task) key() key { return key{tenant: t.tenant, id: t.id} }

// before is what a change keeps of t as it was.
func (t *task) before() apollo.Before {
	return apollo.Before{Name: t.name, Status: t.status, Late: t.late, StartedAt: t.startedAt,
		FinishedAt: t.finishedAt, UpdatedAt: t.updatedAt, CostMs: t.costMs}
}

// view returns the API form of t, without history.
func (t *task) view(k key) apollo.Task {
	return apollo.Task{
		TaskID:      k.id,
		Name:        t.name,
		Tenant:      k.tenant,
		Status:      t.status,
		Sequence:    t.seq,
		ScheduledAt: t.scheduledAt,
		StartedAt:   t.startedAt,
		FinishedAt:  t.finishedAt,
		CreatedAt:   t.createdAt,
		UpdatedAt:   t.updatedAt,
		TimeoutMs:   t.timeoutMs,
		CostMs:      t.costMs,
		Late:        t.late,
	}
}

// apply changes t by one decided record and writes the change into c (nil:
// nobody reads it, so none is built). The caller holds the shard lock, has
// already decided that r applies and has named t's job. A
// run that starts running without a timeout of its own gets timeout, its
// job's default, so that the deadline every run has is shown with it.
func (t *task) apply(c *apollo.Change, k key, r *apollo.Record, becameLate bool, timeout int64) {
	var finishRcv int64 // when the finish t has was received, if it has one
	if c != nil {
		*c = apollo.Change{Record: *r, Prev: t.before(), BecameLate: becameLate}
		if t.status.Final() {
			finishRcv = t.finishReceivedAt()
			c.Prev.FinishReceivedAt = finishRcv
		}
	}
	if r.Kind.Reported() || r.Kind == apollo.KindCorrection {
		if r.Sequence > t.seq {
			t.seq = r.Sequence
		}
	}
	if r.ScheduledAt > 0 {
		t.scheduledAt = r.ScheduledAt
	}
	if r.TimeoutMs > 0 {
		t.timeoutMs = r.TimeoutMs
	}
	if becameLate {
		t.late = true
	}
	switch {
	case r.Kind.Mark(): // the status stays
	case r.Kind == apollo.KindCorrection:
		t.correct(r)
	default:
		to := r.Status
		if to == apollo.StatusRunning && t.status != apollo.StatusRunning {
			t.startedAt = r.Ts
		}
		if to.Final() {
			t.finishedAt = r.Ts
			t.costMs = r.CostMs
			if t.costMs == 0 && t.startedAt > 0 && r.Ts >= t.startedAt {
				t.costMs = r.Ts - t.startedAt
			}
		}
		t.status = to
	}
	if t.status == apollo.StatusRunning && t.timeoutMs == 0 {
		t.timeoutMs = timeout
	}
	t.updatedAt = r.ReceivedAt
	if c != nil {
		c.Task = t.view(k)
		c.Record.Name = t.name
		if t.status.Final() {
			// A correction between final states keeps the finish, and with
			// it when the finish was received.
			if t.finishedAt != c.Prev.FinishedAt || !c.Prev.Status.Final() {
				finishRcv = r.ReceivedAt
			}
			c.Task.FinishReceivedAt = finishRcv
		}
	}
}

// finishReceivedAt is when the record that set t's finish was received: the
// newest in its history, other than a mark, that ended the run at
// finishedAt. It is derived, not kept, to keep the task at 192 bytes
// (TestTaskRecordSize); replay rebuilds the same history and so finds the
// same. 0 when the history no longer holds it (HistoryLimit records since).
func (t *task) finishReceivedAt() int64 {
	var at int64
	b := t.history
	for len(b) > 0 {
		var r apollo.Record
		rest, err := decodeRecord(b, &r)
		if err != nil {
			break
		}
		if !r.Kind.Mark() && r.Status.Final() && r.Ts == t.finishedAt {
			at = r.ReceivedAt
		}
		b = rest
	}
	return at
}

// correct applies an operator's correction: it changes the status and
// nothing the run reported. A finished run keeps when it started and
// finished and its cost, so its metrics move from one status count to
// the other in the windows it was counted in, and nothing else changes
// (issue 15.2). A run the correction ends finishes at the correction,
// with the cost it had (none, unless reported). A correction that reopens
// a finished run takes it out of the counts: it has no finish any more.
func (t *task) correct(r *apollo.Record) {
	switch {
	case r.Status.Final() && !t.status.Final():
		t.finishedAt = r.Ts
	case !r.Status.Final() && t.status.Final():
		t.finishedAt, t.costMs = 0, 0
	}
	t.status = r.Status
}
