package bus

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

func TestTimeoutWrittenByTheBus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sub := f.bus.Subscribe(100)
	e := ev("x1", 1, apollo.StatusRunning)
	e.Ts = t0.UnixMilli()
	e.TimeoutMs = 5000
	f.publish(t, e)
	f.clock.Advance(4 * time.Second)
	if got := f.get(t, "x1"); got.Status != apollo.StatusRunning {
		t.Fatalf("timed out early: %v", got.Status)
	}
	f.clock.Advance(2 * time.Second)
	c := waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.Kind == apollo.KindTimeout })
	if c.Task.Status != apollo.StatusTimeout || c.Record.Ts != t0.UnixMilli()+5000 || c.Task.CostMs != 5000 {
		t.Fatalf("timeout change %+v", c)
	}
	// It is in the log like any other record.
	recs := f.log.records()
	var r apollo.Record
	if _, err := decodeRecord(recs[len(recs)-1], &r); err != nil || r.Kind != apollo.KindTimeout {
		t.Fatalf("last log record %+v, %v", r, err)
	}
	// The executor's late success is now illegal.
	if o := f.publish(t, ev("x1", 2, apollo.StatusSuccess))[0]; o.Result != Rejected {
		t.Errorf("success after timeout: %v", o.Result)
	}
}

func TestDefaultTimeoutPerPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) {
		o.Lateness = []Lateness{{Prefix: "job_", Timeout: time.Minute}, {Prefix: "job_x", Timeout: 10 * time.Second}}
	})
	sub := f.bus.Subscribe(100)
	e := ev("x2", 1, apollo.StatusRunning) // name job_x: the longer prefix wins
	e.Ts = t0.UnixMilli()
	f.publish(t, e)
	f.clock.Advance(11 * time.Second)
	waitChange(t, sub, func(c *apollo.Change) bool { return c.Task.Status == apollo.StatusTimeout })
}

func TestMissedStartAndLateStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) {
		o.Lateness = []Lateness{{StartAfter: 30 * time.Second, MissedAfter: 2 * time.Minute}}
	})
	sub := f.bus.Subscribe(100)
	// m1 is due now and never starts: a missed start after 2 minutes.
	m := ev("m1", 1, apollo.StatusPending)
	m.Ts, m.ScheduledAt = t0.UnixMilli(), t0.UnixMilli()
	// l1 starts 45 s after it was due: late.
	l := ev("l1", 1, apollo.StatusRunning)
	l.ScheduledAt, l.Ts = t0.UnixMilli(), t0.UnixMilli()+45_000
	// o1 starts 10 s after it was due: on time.
	o := ev("o1", 1, apollo.StatusRunning)
	o.ScheduledAt, o.Ts = t0.UnixMilli(), t0.UnixMilli()+10_000
	f.publish(t, m, l, o)
	c := waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.TaskID == "l1" })
	if !c.BecameLate || !c.Task.Late {
		t.Errorf("late start not marked: %+v", c)
	}
	c = waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.TaskID == "o1" })
	if c.BecameLate {
		t.Errorf("on-time start marked late")
	}
	f.clock.Advance(2*time.Minute + time.Second)
	c = waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.Kind == apollo.KindMissedStart })
	if c.Record.TaskID != "m1" || !c.BecameLate || c.Task.Status != apollo.StatusPending {
		t.Errorf("missed start change %+v", c)
	}
	// Starting later does not count it late twice.
	r := ev("m1", 2, apollo.StatusRunning)
	r.Ts = f.clock.Now().UnixMilli()
	f.publish(t, r)
	c = waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.TaskID == "m1" && c.Record.Sequence == 2 })
	if c.BecameLate {
		t.Error("a missed start counted late again when it started")
	}
}

func TestEvictionKeepsDuplicatesRecognised(t *testing.T) {
	t.Parallel()
	arch := &memArchive{m: map[string]*apollo.Task{}}
	f := newFixture(t, func(o *Options) { o.Retention = time.Hour; o.Archive = arch })
	f.publish(t, ev("e1", 1, apollo.StatusRunning), ev("e1", 2, apollo.StatusSuccess), ev("e2", 1, apollo.StatusRunning))
	f.drain()
	f.clock.Advance(59 * time.Minute)
	f.bus.Sweep()
	if st := f.bus.Stats(); st.Tasks != 2 {
		t.Fatalf("evicted before the retention: %+v", st)
	}
	f.clock.Advance(2 * time.Minute)
	f.bus.Sweep()
	st := f.bus.Stats()
	if st.Tasks != 1 || st.Evicted != 1 || st.Tombstones != 1 {
		t.Fatalf("after the retention: %+v", st)
	}
	if o := f.publish(t, ev("e1", 2, apollo.StatusSuccess))[0]; o.Result != Duplicate {
		t.Errorf("late duplicate of an evicted task: %v", o.Result)
	}
	if o := f.publish(t, ev("e1", 1, apollo.StatusRunning))[0]; o.Result != Duplicate {
		t.Errorf("late first event of an evicted task: %v", o.Result)
	}
	if o := f.publish(t, ev("e1", 3, apollo.StatusRunning))[0]; o.Result != Rejected {
		t.Errorf("new event for an evicted final task: %v", o.Result)
	}
	got := f.get(t, "e1") // from the archive
	if got.Status != apollo.StatusSuccess || len(got.History) != 2 {
		t.Errorf("archived task %+v", got)
	}
}

type memArchive struct{ m map[string]*apollo.Task }

func (a *memArchive) Put(t *apollo.Task) error { a.m[t.Tenant+"/"+t.TaskID] = t; return nil }
func (a *memArchive) Get(tenant, id string) (*apollo.Task, error) {
	return a.m[tenant+"/"+id], nil
}

// A checkpoint plus the records after it rebuild the same state, including
// waiting out-of-order events and tombstones.
func TestCheckpointAndReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.Retention = time.Minute })
	f.publish(t, ev("r1", 1, apollo.StatusRunning), ev("r1", 2, apollo.StatusSuccess))
	f.drain()
	f.clock.Advance(2 * time.Minute)
	f.bus.Sweep()                                                                      // r1 becomes a tombstone
	f.publish(t, ev("r2", 1, apollo.StatusPending), ev("r2", 3, apollo.StatusSuccess)) // 3 waits
	var snap bytes.Buffer
	var at uint64
	if err := f.bus.Checkpoint(func(lsn uint64) error { at = lsn; return f.bus.WriteState(&snap) }); err != nil {
		t.Fatal(err)
	}
	f.publish(t, ev("r3", 1, apollo.StatusRunning), ev("r2", 2, apollo.StatusRunning))
	c, _ := f.bus.Correct(t.Context(), "", "r3", apollo.StatusFailed, "me", "stuck")
	if c == nil {
		t.Fatal("correction failed")
	}

	b2, err := New(Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.ReadState(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	for i, p := range f.log.records() {
		if lsn := uint64(i + 1); lsn > at {
			if err := b2.Replay(lsn, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	b2.Start(t.Context())
	defer b2.Stop(context.Background())
	for _, id := range []string{"r2", "r3"} {
		want, got := f.get(t, id), mustGet(t, b2, id)
		if want.Status != got.Status || want.Sequence != got.Sequence || len(want.History) != len(got.History) {
			t.Errorf("%s: replayed %v/%d/%d, live %v/%d/%d", id, got.Status, got.Sequence, len(got.History), want.Status, want.Sequence, len(want.History))
		}
	}
	out := make([]Outcome, 1)
	b2.Publish(t.Context(), []apollo.Event{ev("r1", 2, apollo.StatusSuccess)}, out)
	if out[0].Result != Duplicate {
		t.Errorf("tombstone lost in the checkpoint: %v", out[0].Result)
	}
	if b2.Stats().LastLSN != uint64(len(f.log.records())) {
		t.Errorf("LastLSN %d", b2.Stats().LastLSN)
	}
}

func mustGet(t *testing.T, b *Bus, id string) *apollo.Task {
	t.Helper()
	got, err := b.Get("", id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func FuzzReadState(f *testing.F) {
	fx := newFixture(f, nil)
	fx.publish(f, ev("f1", 1, apollo.StatusPending), ev("f1", 3, apollo.StatusSuccess), ev("f2", 1, apollo.StatusRunning))
	var snap bytes.Buffer
	fx.bus.Checkpoint(func(uint64) error { return fx.bus.WriteState(&snap) })
	f.Add(snap.Bytes())
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, _ := New(Options{})
		_ = b.ReadState(bytes.NewReader(data)) // must not panic
	})
}

func FuzzDecodeRecord(f *testing.F) {
	r := apollo.Record{Event: apollo.Event{TaskID: "a", Name: "n", Sequence: 3, Status: apollo.StatusFailed, Ts: 9, Extra: []byte(`{"x":1}`)}, Kind: apollo.KindCorrection, Actor: "me", Reason: "why"}
	f.Add(appendRecord(nil, &r))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got apollo.Record
		if _, err := decodeRecord(data, &got); err != nil {
			return
		}
		again := appendRecord(nil, &got)
		var back apollo.Record
		if _, err := decodeRecord(again, &back); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}

// Every running run has a deadline (issue 15.9): without a timeoutMs of
// its own it gets its job's (lateness), else the default (24 h), shown as
// its timeoutMs; past it the bus writes a timeout record. A longer prefix
// that sets only other thresholds does not hide a shorter one's timeout.
func TestEveryRunGetsADeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) {
		o.Lateness = []Lateness{{Prefix: "job_", Timeout: 2 * time.Hour}, {Prefix: "job_l", StartAfter: time.Minute}}
		o.Retention = 48 * time.Hour // keep the finished runs in memory to look at
	})
	sub := f.bus.Subscribe(100)
	tests := []struct {
		id, name  string
		timeoutMs int64 // reported
		want      time.Duration
	}{
		{"d1", "nightly", 0, 24 * time.Hour},                                 // no entry matches: the default
		{"l1", "job_l", 0, 2 * time.Hour},                                    // job_l sets no timeout: job_'s applies
		{"o1", "job_o", (90 * time.Minute).Milliseconds(), 90 * time.Minute}, // its own
	}
	for _, tt := range tests {
		e := ev(tt.id, 1, apollo.StatusRunning)
		e.Name, e.Ts, e.TimeoutMs = tt.name, t0.UnixMilli(), tt.timeoutMs
		f.publish(t, e)
		if got := f.get(t, tt.id); got.TimeoutMs != tt.want.Milliseconds() {
			t.Errorf("%s: timeoutMs %d, want %v", tt.id, got.TimeoutMs, tt.want)
		}
	}
	f.clock.Advance(2*time.Hour + time.Second)
	timedOut := map[string]bool{}
	for len(timedOut) < 2 {
		c := waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.Kind == apollo.KindTimeout })
		timedOut[c.Record.TaskID] = true
	}
	if !timedOut["l1"] || !timedOut["o1"] {
		t.Fatalf("timed out after 2 h: %v", timedOut)
	}
	if got := f.get(t, "d1"); got.Status != apollo.StatusRunning {
		t.Fatalf("d1 timed out early: %+v", got)
	}
	f.clock.Advance(22 * time.Hour)
	waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.Kind == apollo.KindTimeout && c.Record.TaskID == "d1" })
	for _, tt := range tests {
		if got := f.get(t, tt.id); got.Status != apollo.StatusTimeout || got.FinishedAt != t0.UnixMilli()+tt.want.Milliseconds() {
			t.Errorf("%s: %v finished at %d, want timeout at start + %v", tt.id, got.Status, got.FinishedAt, tt.want)
		}
	}
}

// A run whose running event is older than its deadline when it arrives (a
// reporter's clock days behind, an event sent late from a spool) is not
// timed out at once, which would make its end, arriving next, illegal: its
// deadline counts from when the server learnt of the start.
func TestDeadlineCountsFromArrival(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sub := f.bus.Subscribe(100)
	e := ev("s2", 1, apollo.StatusRunning)
	e.Ts = t0.Add(-72 * time.Hour).UnixMilli()
	f.publish(t, e)
	f.clock.Advance(24*time.Hour + time.Second)
	c := waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.Kind == apollo.KindTimeout })
	if c.Record.TaskID != "s2" || c.Record.Ts != t0.Add(24*time.Hour).UnixMilli() {
		t.Errorf("timeout %+v, want s2 24 h after the server received its start", c.Record)
	}
}

// jumpyClock moves the fake time by jump just before the bus resets a
// timer for a deadline, as a loaded machine may preempt the deadline loop
// between reading the clock and arming its timer while a test moves the
// clock. idle gets a token when the loop arms its idle hour.
type jumpyClock struct {
	*apollo.FakeClock
	jump time.Duration
	idle chan struct{}
}

func (c *jumpyClock) NewTimer(d time.Duration) apollo.Timer {
	return jumpyTimer{c.FakeClock.NewTimer(d), c}
}

type jumpyTimer struct {
	apollo.Timer
	c *jumpyClock
}

func (t jumpyTimer) Reset(d time.Duration) bool {
	if d < time.Hour { // a deadline's wait
		t.c.Advance(t.c.jump)
		return t.Timer.Reset(d)
	}
	was := t.Timer.Reset(d)
	select {
	case t.c.idle <- struct{}{}:
	default:
	}
	return was
}

// TestDeadlineLoopSurvivesClockJump: the clock passes a run's timeout
// while the deadline loop is between computing its wait and arming its
// timer; the timeout still fires, instead of one wait too late.
func TestDeadlineLoopSurvivesClockJump(t *testing.T) {
	t.Parallel()
	clock := &jumpyClock{FakeClock: apollo.NewFakeClock(t0), jump: 6 * time.Second, idle: make(chan struct{}, 1)}
	f := newFixture(t, func(o *Options) { o.Clock = clock })
	sub := f.bus.Subscribe(100)
	select { // the loop waits with nothing due, so the run's deadline wakes it
	case <-clock.idle:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the deadline loop never armed its timer")
	}
	e := ev("j1", 1, apollo.StatusRunning)
	e.Ts, e.TimeoutMs = t0.UnixMilli(), 5000
	f.publish(t, e)
	c := waitChange(t, sub, func(c *apollo.Change) bool { return c.Record.Kind == apollo.KindTimeout })
	if c.Record.Ts != t0.UnixMilli()+5000 {
		t.Errorf("timeout at %d, want %d", c.Record.Ts, t0.UnixMilli()+5000)
	}
}

// A mass of deadlines falling due at once (a restart after downtime, a
// scheduler that died with its runs) fires within the queue limit: the
// bus's own records wait for room as refused reporters do, so the changes
// held in memory stay bounded by QueueLimit, not by the number of tasks.
// Two tenants; the only worker is held at a gate while the storm fires.
func TestDeadlineStormWaitsForRoom(t *testing.T) {
	t.Parallel()
	const n, limit = 1000, 100
	var gated atomic.Bool
	gate := make(chan struct{})
	waiting := make(chan struct{}, 1)
	missed := make(chan struct{})
	var seen atomic.Int64
	f := newFixture(t, func(o *Options) {
		o.Workers, o.QueueLimit, o.HoldLimit = 1, limit, 10
		o.Lateness = []Lateness{{MissedAfter: time.Minute}}
		o.testGate = func() {
			if gated.Load() {
				<-gate
			}
		}
		o.testRoomWait = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		o.Observers = []Observer{observerFunc(func(c *apollo.Change) {
			if c.Record.Kind == apollo.KindMissedStart && seen.Add(1) == n {
				close(missed)
			}
		})}
	})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) }) // before the bus stops: its worker may be at the gate
	for i := range n {
		e := ev(fmt.Sprintf("s%d", i), 1, apollo.StatusPending)
		e.Tenant = []string{"acme", "globex"}[i%2]
		e.Ts, e.ScheduledAt = t0.UnixMilli(), t0.UnixMilli()
		if o := f.publish(t, e)[0]; o.Result != Accepted {
			t.Fatalf("event %d: %v %v", i, o.Result, o.Err)
		}
		if i%50 == 49 {
			f.drain() // stay under the limit while filling
		}
	}
	f.drain()
	gated.Store(true)
	f.clock.Advance(2 * time.Minute)
	select {
	case <-waiting:
	case <-missed:
		t.Fatalf("all %d missed starts were queued with the only worker held: nothing waited for room", n)
	case <-testwait.Context(t).Done():
		t.Fatal("the deadline loop never waited for room")
	}
	st := f.bus.Stats()
	if st.Queued > limit || st.MissedStart >= n {
		t.Fatalf("while the worker is held: %d changes queued (limit %d), %d of %d missed starts fired", st.Queued, limit, st.MissedStart, n)
	}
	open.Do(func() { close(gate) })
	select {
	case <-missed:
	case <-testwait.Context(t).Done():
		t.Fatalf("after the worker went on: %d of %d missed starts delivered (%+v)", seen.Load(), n, f.bus.Stats())
	}
	for tenant, id := range map[string]string{"acme": "s0", "globex": "s1"} {
		if got, err := f.bus.Get(tenant, id); err != nil || !got.Late {
			t.Errorf("tenant %s, task %s: %+v, %v; want a late pending task", tenant, id, got, err)
		}
	}
}

type observerFunc func(*apollo.Change)

func (f observerFunc) Apply(c *apollo.Change) { f(c) }

// The wheel is striped by shard (issue 20.4), but a deadline loop that
// wakes late still fires what is due oldest first across the stripes,
// and a new earliest deadline in any stripe wakes it.
func TestDeadlinesAcrossStripesComeOldestFirst(t *testing.T) {
	d := newDeadlines()
	// Seconds 9, 8, ..., 1, each in another stripe (and two tenants).
	for i := range 9 {
		sec := int64(9 - i)
		tenant := []string{"acme", "globex"}[i%2]
		d.push(uint8(i), deadline{at: sec*1000 - 500, k: key{tenant: tenant, id: fmt.Sprint("t", sec)}, kind: dTimeout, seq: sec})
		select {
		case <-d.wake:
		default:
			t.Fatalf("push of second %d, the earliest so far, woke nothing", sec)
		}
	}
	d.push(3, deadline{at: 20_000, k: key{tenant: "acme", id: "late"}, kind: dTimeout, seq: 20})
	select {
	case <-d.wake:
		t.Fatal("a deadline after every other woke the loop")
	default:
	}
	if n := d.len(); n != 10 {
		t.Fatalf("len %d, want 10", n)
	}
	due, next := d.due(9_000)
	got := flatten(due)
	if len(got) != 9 || next != 20_000 {
		t.Fatalf("due at 9 s: %d deadlines, next %d; want 9, 20000", len(got), next)
	}
	for i, x := range got {
		if x.seq != int64(i+1) {
			t.Fatalf("due in the order %v, want seconds 1 to 9", got)
		}
	}
	if n := d.len(); n != 1 {
		t.Fatalf("len %d after the due ones, want 1", n)
	}
}
