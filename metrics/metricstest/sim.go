package metricstest

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/apollo-11/apollo"
)

// sim plays the bus for one task: it turns steps into the Changes the bus
// would hand to metrics, with Prev and Task filled the way the bus fills
// them (StartedAt, FinishedAt, CostMs, Late).
type sim struct {
	t apollo.Task
}

func newSim(tenant, name, id string) *sim {
	return &sim{t: apollo.Task{TaskID: id, Name: name, Tenant: tenant}}
}

// step is one record for a task.
type step struct {
	status apollo.Status // StatusNone keeps the status (a missed start)
	kind   apollo.Kind
	ts     int64
	// finishedAt is where a correction into a final state puts the finish;
	// 0 means ts. Reports always finish at ts.
	finishedAt int64
	cost       int64 // the event's costMs; 0 derives it from the start
	late       bool  // the record makes the task late
	// received is when the server took the record; 0 leaves it to the
	// suite, which stamps the clock's now when it applies the change, as
	// the bus does.
	received int64
}

func (s *sim) apply(st step) apollo.Change {
	prev := s.t
	next := prev
	if st.status != apollo.StatusNone {
		next.Status = st.status
	}
	if st.kind == apollo.KindReport {
		next.Sequence++
	}
	next.UpdatedAt = st.ts
	if next.Status == apollo.StatusRunning && prev.Status != apollo.StatusRunning {
		next.StartedAt = st.ts
	}
	switch {
	case !next.Status.Final():
		next.FinishedAt, next.CostMs = 0, 0
	case st.kind == apollo.KindCorrection && prev.Status.Final() && st.finishedAt == 0:
		// A correction of the verdict only: same run, same time and cost.
	case !prev.Status.Final() || st.kind == apollo.KindCorrection:
		next.FinishedAt = st.ts
		if st.finishedAt != 0 {
			next.FinishedAt = st.finishedAt
		}
		next.CostMs = st.cost
		if next.CostMs == 0 && next.StartedAt > 0 && next.FinishedAt > next.StartedAt {
			next.CostMs = next.FinishedAt - next.StartedAt
		}
	}
	becameLate := st.late && !prev.Late
	next.Late = prev.Late || st.late
	s.t = next
	return apollo.Change{
		Record: apollo.Record{
			Event: apollo.Event{
				TaskID: prev.TaskID, Name: prev.Name, Tenant: prev.Tenant,
				Sequence: next.Sequence, Status: next.Status, Ts: st.ts,
			},
			Kind:       st.kind,
			ReceivedAt: st.received,
		},
		Prev:       apollo.BeforeOf(&prev),
		Task:       next,
		BecameLate: becameLate,
	}
}

// lifecycle returns the Changes of one random run starting at start, all
// at or before limit, legal by the transition table except for the
// corrections, which an operator may make anyway.
func lifecycle(rng *rand.Rand, s *sim, start, limit int64, corrections bool) []apollo.Change {
	at := start
	next := func() int64 {
		switch rng.IntN(4) {
		case 0: // the same instant
		case 1: // the last millisecond before a bucket boundary
			at = at - at%tenS + tenS - 1
		default:
			at += rng.Int64N(90_000)
		}
		at = min(at, limit)
		return at
	}
	finals := []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout}
	final := func() step {
		st := step{status: finals[rng.IntN(3)], ts: next()}
		if rng.IntN(3) == 0 {
			st.cost = 1 + rng.Int64N(600_000)
		}
		if st.status == apollo.StatusTimeout && rng.IntN(2) == 0 {
			st.kind = apollo.KindTimeout
		}
		return st
	}
	run := func() step { return step{status: apollo.StatusRunning, ts: next(), late: rng.IntN(5) == 0} }

	var steps []step
	switch rng.IntN(8) {
	case 0:
		steps = []step{run(), final()}
	case 1:
		steps = []step{{status: apollo.StatusPending, ts: next()}, run(), final()}
	case 2:
		steps = []step{{status: apollo.StatusPending, ts: next()}, final()}
	case 3:
		steps = []step{{status: apollo.StatusPending, ts: next()},
			{kind: apollo.KindMissedStart, ts: next(), late: true}, run(), final()}
	case 4:
		steps = []step{{status: apollo.StatusManualBlocked, ts: next()},
			{status: apollo.StatusPending, ts: next()}, run(), final()}
	case 5: // still pending or running, or blocked from pending
		steps = []step{{status: apollo.StatusPending, ts: next()}}
		switch rng.IntN(3) {
		case 0:
			steps = append(steps, run())
		case 1:
			steps = append(steps, step{status: apollo.StatusManualBlocked, ts: next()})
		}
	default:
		steps = []step{run(), final()}
		if corrections {
			steps = append(steps, correction(rng, next, finals)...)
		}
	}
	out := make([]apollo.Change, len(steps))
	for i, st := range steps {
		out[i] = s.apply(st)
	}
	return out
}

// correction returns one or two operator corrections of a finished run.
func correction(rng *rand.Rand, next func() int64, finals []apollo.Status) []step {
	c := step{kind: apollo.KindCorrection, status: finals[rng.IntN(3)], ts: next()}
	switch rng.IntN(3) {
	case 0: // the verdict only
	case 1: // a re-run by hand, finished a while before it was recorded
		c.finishedAt = c.ts - rng.Int64N(120_000)
		c.cost = 1 + rng.Int64N(100_000)
	default: // reopened, then reported again
		c.status = apollo.StatusRunning
		return []step{c, {status: finals[rng.IntN(3)], ts: next()}}
	}
	return []step{c}
}

// Workload returns the changes of n random runs of the tenant's jobs, as
// the bus would hand them over: each run starts up to maxAge before now
// and ends at most 50 s after it, each task's changes stay in order and
// the tasks are interleaved. With corrections, some finished runs are
// corrected by an operator. The same seed gives the same changes.
// Snapshot tests and benchmarks use it to fill a store.
func Workload(seed uint64, tenant string, names []string, n int, now time.Time, maxAge time.Duration, corrections bool) []apollo.Change {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	ms := now.UnixMilli()
	tasks := make([][]apollo.Change, n)
	for i := range tasks {
		s := newSim(tenant, names[rng.IntN(len(names))], "w"+strconv.Itoa(i))
		tasks[i] = lifecycle(rng, s, ms-rng.Int64N(max(maxAge.Milliseconds(), 1)), ms+sec(50), corrections)
	}
	cs := interleave(rng, tasks)
	// Reported as they happened, and by a clock ahead of now at most to
	// now.
	for i := range cs {
		cs[i].Record.ReceivedAt = min(cs[i].Record.Ts, ms)
	}
	return cs
}
