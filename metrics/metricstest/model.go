package metricstest

import (
	"cmp"
	"math"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// model is the brute-force statement of what a Store must answer: it keeps
// every contribution as it was applied and sums the ones a window covers.
// It is deliberately naive (a scan per question) so it is easy to check by
// eye against the package documentation.
type model struct {
	br, rr int64 // retentions, ms
	facts  []fact
	fins   []*fin
	byTask map[string]*fin // the finish a task currently counts for
}

// fact is what one change adds at one bucket besides a finish.
type fact struct {
	tenant, name string
	bucket       int64
	started      int64
	late, missed int64
	dueAgain     int64
	backlog      int64
	running      int64
}

// fin is one counted finish; live is false once a correction took it out.
type fin struct {
	tenant, name string
	bucket       int64
	status       apollo.Status
	cost         int64
	live         bool
}

func newModel() *model {
	return &model{
		br:     metrics.DefaultBucketRetention.Milliseconds(),
		rr:     metrics.DefaultRollupRetention.Milliseconds(),
		byTask: make(map[string]*fin),
	}
}

const (
	tenS = int64(10_000)
	minS = int64(60_000)
)

func floor(t, step int64) int64 {
	if t >= 0 {
		return t - t%step
	}
	return -((-t + step - 1) / step * step)
}

// keptFrom is the oldest minute a retention keeps at now.
func keptFrom(now, ret int64) int64 { return floor(floor(now, tenS)+tenS-ret, minS) }

// apply records what c contributes when applied at now (Unix ms): a time
// is too new by when its record was received, too old by now.
func (m *model) apply(c *apollo.Change, now int64) {
	lo := keptFrom(now, m.rr)
	hi := max(cmp.Or(c.Record.ReceivedAt, now)+metrics.MaxSkew.Milliseconds(), lo)
	inRange := func(t int64) bool { return t >= lo && t <= hi }
	prev, cur := c.Prev, c.Task
	ts := c.Record.Ts
	key := cur.Tenant + "\x00" + cur.TaskID

	if inRange(ts) {
		f := fact{tenant: cur.Tenant, name: cur.Name, bucket: floor(ts, tenS)}
		if cur.Status == apollo.StatusRunning && prev.Status != apollo.StatusRunning {
			f.started = 1
		}
		if c.BecameLate || c.Record.Kind == apollo.KindMissedStart {
			f.late = 1
		}
		if c.Record.Kind == apollo.KindMissedStart {
			f.missed = 1
		}
		if (f.started == 1 || f.missed == 1) && (prev.StartedAt != 0 || prev.Late) {
			f.dueAgain = 1 // the run was due before: it counts once
		}
		m.facts = append(m.facts, f)
	}
	if prev.Status != cur.Status {
		// Entering at ts; leaving never before entering (a run that was
		// reported running by a clock ahead of its end's).
		clamped := func(t int64) int64 { return floor(min(max(t, lo), hi), tenS) }
		leave := ts
		if prev.Status == apollo.StatusRunning {
			leave = max(ts, prev.StartedAt)
		}
		m.facts = append(m.facts,
			fact{tenant: cur.Tenant, name: cur.Name, bucket: clamped(ts),
				backlog: b2i(cur.Status == apollo.StatusPending), running: b2i(cur.Status == apollo.StatusRunning)},
			fact{tenant: cur.Tenant, name: cur.Name, bucket: clamped(leave),
				backlog: -b2i(prev.Status == apollo.StatusPending), running: -b2i(prev.Status == apollo.StatusRunning)})
	}
	changed := prev.Status.Final() && (prev.Status != cur.Status ||
		prev.FinishedAt != cur.FinishedAt || prev.CostMs != cur.CostMs)
	if changed {
		if old := m.byTask[key]; old != nil {
			old.live = false
			delete(m.byTask, key)
		}
	}
	if cur.Status.Final() && (changed || !prev.Status.Final()) {
		at := cur.FinishedAt
		if at == 0 {
			at = ts
		}
		if inRange(at) {
			f := &fin{tenant: cur.Tenant, name: cur.Name, bucket: floor(at, tenS), status: cur.Status, cost: min(max(cur.CostMs, 0), metrics.MaxCostMs), live: true}
			m.fins = append(m.fins, f)
			m.byTask[key] = f
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// view is a window's bounds as a store resolves them at now.
type view struct {
	start, end   int64
	split, floor int64
}

func (m *model) view(now time.Time, start, end int64) view {
	ms := now.UnixMilli()
	return view{start: start, end: end, split: keptFrom(ms, m.br), floor: keptFrom(ms, m.rr)}
}

// window returns the view of a Query's window.
func (m *model) window(now time.Time, w, offset time.Duration) view {
	end := floor(now.UnixMilli(), tenS) + tenS - offset.Milliseconds()
	return m.view(now, end-w.Milliseconds(), end)
}

// before reports whether a bucket counts as earlier than bound x: exactly
// while x is within the bucket retention, by minute (x rounded down, and
// never below the rollup retention) beyond it.
func (v view) before(bucket, x int64) bool {
	if x >= v.split {
		return bucket < x
	}
	return floor(bucket, minS) < max(floor(x, minS), v.floor)
}

func (v view) covers(bucket int64) bool {
	return v.before(bucket, v.end) && !v.before(bucket, v.start)
}

// want is what a store must report for one job over one view. Counters and
// gauges are exact. Costs removed by corrections may still widen a
// bucket's min and max, so those are checked against bounds: exact when no
// removed finish is in the window.
type want struct {
	apollo.Summary
	liveMin, liveMax int64 // over the finishes that count
	allMin, allMax   int64 // over every finish ever counted here
	removed          bool  // a removed finish with a cost is in the window
}

func (m *model) want(tenant, name string, v view) want {
	w := want{liveMin: math.MaxInt64, allMin: math.MaxInt64}
	for i := range m.facts {
		f := &m.facts[i]
		if f.tenant != tenant || f.name != name {
			continue
		}
		if v.before(f.bucket, v.end) {
			w.Backlog += f.backlog
			w.Running += f.running
		}
		if v.covers(f.bucket) {
			w.Started += f.started
			w.Late += f.late
			w.Missed += f.missed
			w.DueAgain += f.dueAgain
		}
	}
	for _, f := range m.fins {
		if f.tenant != tenant || f.name != name || !v.covers(f.bucket) {
			continue
		}
		if f.cost > 0 {
			w.allMin, w.allMax = min(w.allMin, f.cost), max(w.allMax, f.cost)
			w.removed = w.removed || !f.live
		}
		if !f.live {
			continue
		}
		w.Count++
		switch f.status {
		case apollo.StatusSuccess:
			w.Success++
		case apollo.StatusFailed:
			w.Failed++
		case apollo.StatusTimeout:
			w.Timeout++
		}
		if f.cost > 0 {
			w.CostSum += f.cost
			w.CostN++
			w.liveMin, w.liveMax = min(w.liveMin, f.cost), max(w.liveMax, f.cost)
		}
	}
	if w.CostN > 0 {
		w.CostMin, w.CostMax = w.liveMin, w.liveMax
	}
	w.Backlog, w.Running = max(w.Backlog, 0), max(w.Running, 0) // a level is never below zero
	return w
}

// names returns the jobs the model has seen for tenant.
func (m *model) names(tenant string) map[string]bool {
	out := make(map[string]bool)
	for i := range m.facts {
		if m.facts[i].tenant == tenant {
			out[m.facts[i].name] = true
		}
	}
	for _, f := range m.fins {
		if f.tenant == tenant {
			out[f.name] = true
		}
	}
	return out
}

// mismatch describes how got differs from w, or returns "".
func (w want) mismatch(got apollo.Summary) string {
	exact := w.Summary
	exact.CostMin, exact.CostMax, exact.Window = got.CostMin, got.CostMax, got.Window
	if got != exact {
		return "counters or gauges differ"
	}
	switch {
	case got.CostN == 0:
		if got.CostMin != 0 || got.CostMax != 0 {
			return "cost min/max set without costs"
		}
	case !w.removed:
		if got.CostMin != w.liveMin || got.CostMax != w.liveMax {
			return "cost min/max differ"
		}
	case got.CostMin < w.allMin || got.CostMin > w.liveMin || got.CostMax > w.allMax || got.CostMax < w.liveMax:
		return "cost min/max outside the bounds of the counted and removed runs"
	}
	return ""
}
