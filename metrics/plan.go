package metrics

import (
	"cmp"
	"time"

	"github.com/apollo-11/apollo"
)

const (
	bucketMs  = int64(BucketWidth / time.Millisecond)
	minuteMs  = int64(RollupWidth / time.Millisecond)
	maxSkewMs = int64(MaxSkew / time.Millisecond)
)

// floorTo rounds t down to a multiple of step, also for negative t.
func floorTo(t, step int64) int64 {
	r := t % step
	if r < 0 {
		r += step
	}
	return t - r
}

// horizon is the oldest minute that a retention of ret keeps at now: the
// current bucket and the ret/10s-1 before it are kept, and the cut is moved
// down to a whole minute so that the two levels meet on a minute boundary.
func horizon(now, ret int64) int64 {
	return floorTo(floorTo(now, bucketMs)+bucketMs-ret, minuteMs)
}

// Part is one contribution of a Change: what to add to one job's counters
// in one 10-second bucket. Stores apply every Part of a Plan; the embedded
// Aggregator does, and so must any other Store implementation, so that all
// count the same things in the same buckets.
type Part struct {
	Tenant, Name string
	Bucket       int64 // start of the 10-second bucket, Unix ms
	// Delta is added to the bucket: counters, cost sums and the gauge moves
	// (+1/-1 on Backlog and Running). Its CostMin, CostMax and Window are
	// unused.
	Delta apollo.Summary
	// Cost is a finished run's cost to fold into the bucket's CostMin and
	// CostMax; 0 for none.
	Cost int64
}

// Plan is everything one Change contributes to the metrics.
type Plan struct {
	// TooOld and TooNew report that a timestamp of the change was older
	// than the rollup retention or more than MaxSkew ahead of when its
	// record was received: its
	// counters were left out and its gauge moves clamped into the range.
	TooOld, TooNew bool

	p plan
}

// Parts returns the contributions, in the order they must be applied.
func (pl *Plan) Parts() []Part {
	out := make([]Part, pl.p.n)
	for i, pt := range pl.p.parts[:pl.p.n] {
		ref := pl.p.refs[pt.ref]
		out[i] = Part{Tenant: ref.tenant, Name: ref.name, Bucket: pt.key, Cost: pt.cost}
		pt.d.toSummary(&out[i].Delta)
	}
	return out
}

// PlanChange says what c contributes at now, for a store whose rollups are
// kept rollupRetention. Whether a timestamp is too new is judged against
// c.Record.ReceivedAt, so that applying c again later (a replay) plans the
// same; now judges only what the retention has already let go. It is where the counting rules of this package live
// (see the package documentation).
func PlanChange(c *apollo.Change, now time.Time, rollupRetention time.Duration) Plan {
	p := planChange(c, now.UnixMilli(), rollupRetention.Milliseconds())
	return Plan{TooOld: p.tooOld, TooNew: p.tooNew, p: p}
}

// seriesRef names one job of one tenant.
type seriesRef struct{ tenant, name string }

// part is one contribution to one of the plan's series.
type part struct {
	ref  int // index into plan.refs
	key  int64
	d    vec
	cost int64
}

// plan is the allocation-free form of Plan used by Apply. A change touches
// at most two series (the job before and after, which differ only if the
// bus renamed it) and makes at most five contributions.
type plan struct {
	refs  [2]seriesRef
	nref  int
	parts [5]part
	n     int
	// finishes are the finished runs counted in (+1) or out (-1), for
	// the jobs' health records (runs.go): a correction takes one out and
	// puts one in.
	finishes [2]finishMove
	nfin     int

	lo, hi         int64 // accepted timestamps: [lo, hi]
	tooOld, tooNew bool
}

func jobRef(t *apollo.Task) seriesRef {
	name := t.Name
	if name == "" {
		name = t.TaskID
	}
	return seriesRef{tenant: t.Tenant, name: name}
}

func (p *plan) ref(r seriesRef) int {
	for i := range p.nref {
		if p.refs[i] == r {
			return i
		}
	}
	p.refs[p.nref] = r
	p.nref++
	return p.nref - 1
}

// inRange reports whether at is inside the accepted range.
func (p *plan) inRange(at int64) bool { return p.lo <= at && at <= p.hi }

// accept reports whether at is inside the accepted range, and records why
// not.
func (p *plan) accept(at int64) bool {
	switch {
	case at < p.lo:
		p.tooOld = true
		return false
	case at > p.hi:
		p.tooNew = true
		return false
	}
	return true
}

// counters adds d at the bucket of at, or drops it when at is out of
// range; it reports whether it added.
func (p *plan) counters(ref int, at int64, d *vec, cost int64) bool {
	if d.isZero() || !p.accept(at) {
		return false
	}
	p.put(ref, floorTo(at, bucketMs), d, cost)
	return true
}

// writes reports whether the plan adds to the job of ref.
func (p *plan) writes(ref int) bool {
	for i := range p.parts[:p.n] {
		if p.parts[i].ref == ref {
			return true
		}
	}
	return false
}

// finishMove is one finished run counted in or out of a job.
type finishMove struct {
	ref    int
	status apollo.Status
	at     int64 // when it finished, Unix ms
	cost   int64 // as counted: runCost
	sign   int64
}

// countFinish counts t's finish at at with sign, and records the move when it
// was counted. A finish is too new when it is more than MaxSkew ahead of
// when its own record was received (t.FinishReceivedAt), not this change's:
// a correction long after a run was reported ahead would otherwise take
// out a finish that was never counted in, and counts would go negative.
func (p *plan) countFinish(ref int, t *apollo.Task, at, sign int64) {
	var d vec
	finish(&d, t, sign)
	cost := runCost(t)
	if t.FinishReceivedAt != 0 && at > max(t.FinishReceivedAt+maxSkewMs, p.lo) {
		p.tooNew = true
		return
	}
	if !p.counters(ref, at, &d, max(sign, 0)*cost) {
		return
	}
	p.finishes[p.nfin] = finishMove{ref: ref, status: t.Status, at: at, cost: cost, sign: sign}
	p.nfin++
}

// gauges adds d at the bucket of at clamped into the accepted range: a gauge
// move is never dropped, or a task that left pending with a skewed clock
// would stay in the backlog for ever.
func (p *plan) gauges(ref int, at int64, d *vec) {
	if d.isZero() {
		return
	}
	if !p.accept(at) {
		at = min(max(at, p.lo), p.hi)
	}
	p.put(ref, floorTo(at, bucketMs), d, 0)
}

// put merges d into a part for the same series and bucket when it can (at
// most one cost per part), so that the usual change costs one write.
func (p *plan) put(ref int, key int64, d *vec, cost int64) {
	for i := range p.n {
		q := &p.parts[i]
		if q.ref == ref && q.key == key && (cost == 0 || q.cost == 0) {
			q.d.add(d)
			q.cost = max(q.cost, cost)
			return
		}
	}
	p.parts[p.n] = part{ref: ref, key: key, d: *d, cost: cost}
	p.n++
}

func gaugeMove(d *vec, s apollo.Status, sign int64) {
	switch s {
	case apollo.StatusPending:
		d[fBacklog] += sign
	case apollo.StatusRunning:
		d[fRunning] += sign
	}
}

var finalField = [...]int{
	apollo.StatusSuccess: fSuccess,
	apollo.StatusFailed:  fFailed,
	apollo.StatusTimeout: fTimeout,
}

// MaxCostMs is the most a run's cost counts for: the longest a run can
// last between two timestamps that ingest accepts. Ingest refuses a larger
// costMs, but a log written before it did may hold one, and a restart must
// still snapshot and restore it (the snapshot keeps costs below 2^62).
const MaxCostMs = apollo.MaxTs - apollo.MinTs

// runCost is the cost t is counted with: its CostMs within [0, MaxCostMs].
func runCost(t *apollo.Task) int64 { return min(max(t.CostMs, 0), MaxCostMs) }

// finish sets d to one finished run of t, counted with sign.
func finish(d *vec, t *apollo.Task, sign int64) {
	d[fCount] = sign
	d[finalField[t.Status]] = sign
	if c := runCost(t); c > 0 {
		d[fCostSum] = sign * c
		d[fCostN] = sign
	}
}

// leftAt is when a task in prev's state left it, by a record at ts: never
// before it entered. A run reported running by a clock ahead of the one
// that reports its end would otherwise leave running in an earlier bucket
// than it entered, and the gauge would read -1 until the clock caught up.
func leftAt(prev *apollo.Task, ts int64) int64 {
	if prev.Status == apollo.StatusRunning {
		return max(ts, prev.StartedAt)
	}
	return ts
}

// finishedAt is the time a final task is counted at: FinishedAt, which the
// bus sets, or else the given fallback.
func finishedAt(t *apollo.Task, fallback int64) int64 {
	if t.FinishedAt != 0 {
		return t.FinishedAt
	}
	return fallback
}

// newestAccepted is the latest timestamp c may carry and be counted:
// MaxSkew after the server received its record. Receipt, not now: a replay
// after a restart, or a node taking a partition over, applies the record
// later, and must drop or count it as the first application did, or
// recovery would not rebuild the metrics that were shown (invariant 1). A
// record without a receipt time (written by hand, in tests) is judged at
// now.
func newestAccepted(c *apollo.Change, now int64) int64 {
	return cmp.Or(c.Record.ReceivedAt, now) + maxSkewMs
}

func planChange(c *apollo.Change, now, rollupRetention int64) plan {
	// A record received before the retention began is too old whatever its
	// time; hi stays at or above lo, so a clamped gauge move never lands
	// below what compaction keeps.
	lo := horizon(now, rollupRetention)
	p := plan{lo: lo, hi: max(newestAccepted(c, now), lo)}
	prevTask := c.PrevTask()
	cur, prev := &c.Task, &prevTask
	curRef := jobRef(cur)
	if curRef.name == "" {
		curRef = seriesRef{tenant: c.Record.Tenant, name: c.Record.JobName()}
	}
	ci, pi := p.ref(curRef), -1
	if prev.Status != apollo.StatusNone {
		pi = ci
		if prevRef := jobRef(prev); prevRef.name != "" {
			pi = p.ref(prevRef)
		}
	}
	ts := c.Record.Ts

	var ev vec
	if cur.Status == apollo.StatusRunning && prev.Status != apollo.StatusRunning {
		ev[fStarted] = 1
	}
	missed := c.Record.Kind == apollo.KindMissedStart
	if c.BecameLate || missed {
		ev[fLate] = 1
	}
	if missed {
		ev[fMissed] = 1
	}
	// A run is due once: a start or a missed mark of a run that had
	// started or been marked missed (Late) before is counted again.
	if (ev[fStarted] == 1 || missed) && (prev.StartedAt != 0 || prev.Late) {
		ev[fDueAgain] = 1
	}
	p.counters(ci, ts, &ev, 0)

	if prev.Status != cur.Status || pi != ci { // pi < 0 has prev.Status none
		var in, out vec
		gaugeMove(&in, cur.Status, 1)
		p.gauges(ci, ts, &in)
		if pi >= 0 {
			gaugeMove(&out, prev.Status, -1)
			p.gauges(pi, leftAt(prev, ts), &out)
		}
	}

	// A final state changes only by correction; whatever the record's kind,
	// take the old finish out and put the new one in, so the counts always
	// equal a recount of the tasks' final states.
	moved := pi >= 0 && prev.Status.Final() && (prev.Status != cur.Status ||
		prev.FinishedAt != cur.FinishedAt || prev.CostMs != cur.CostMs || pi != ci)
	if moved {
		p.countFinish(pi, prev, finishedAt(prev, prev.UpdatedAt), -1)
	}
	if cur.Status.Final() && (moved || !prev.Status.Final()) {
		p.countFinish(ci, cur, finishedAt(cur, ts), 1)
	}
	return p
}
