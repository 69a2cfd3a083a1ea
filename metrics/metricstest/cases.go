package metricstest

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

const (
	pending = apollo.StatusPending
	running = apollo.StatusRunning
	success = apollo.StatusSuccess
	failed  = apollo.StatusFailed
	timeout = apollo.StatusTimeout
	blocked = apollo.StatusManualBlocked
)

func sec(n int64) int64 { return n * 1000 }

// alignment: an event at 09.999 s and one at 10.000 s land in different
// buckets whatever order they arrive in.
func (s *suite) alignment(t *testing.T) {
	now := s.alignClock(30 * time.Second)
	b := now.UnixMilli() - sec(60) // a bucket boundary
	m := newModel()
	for order := range 2 {
		tn := s.tenant("align")
		early, late := newSim(tn, "job", "early"), newSim(tn, "job", "late")
		ce := []apollo.Change{
			early.apply(step{status: running, ts: b - sec(10)}),
			early.apply(step{status: success, ts: b - 1, cost: 100}),
		}
		cl := []apollo.Change{
			late.apply(step{status: running, ts: b}),
			late.apply(step{status: failed, ts: b + sec(10) - 1, cost: 200}),
		}
		if order == 0 {
			s.applyAll(t, m, append(ce, cl...))
		} else {
			s.applyAll(t, m, append(cl, ce...))
		}
		pts := s.points(t, tn, "job", 2*time.Minute, 10*time.Second, now)
		before, at := pointAt(t, pts, b-sec(10)), pointAt(t, pts, b)
		if before.Success != 1 || before.Failed != 0 || before.CostSum != 100 || before.Started != 1 {
			t.Errorf("order %d: bucket before the boundary: %+v, want the 09.999 s success only", order, before)
		}
		if at.Failed != 1 || at.Success != 0 || at.CostSum != 200 || at.Started != 1 {
			t.Errorf("order %d: bucket at the boundary: %+v, want the 10.000 s run only", order, at)
		}
		// The same bucket as a 10 s window moved back by an offset.
		off := time.Duration(now.UnixMilli()-b) * time.Millisecond
		if got := row(s.table(t, tn, 10*time.Second, off, now), "job"); got.Count != 1 || got.Failed != 1 {
			t.Errorf("order %d: 10s window at offset %v: %+v, want one failure", order, off, got)
		}
		c := &checker{t: t, m: m, s: s}
		c.series(tn, "job", now, 2*time.Minute, 10*time.Second)
		c.table(tn, now, time.Minute, 0, nil)
	}
}

// gauges: backlog and running at the end of every bucket, for the current
// and the previous window, also when a report arrives late.
func (s *suite) gauges(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("gauges")
	m := newModel()
	t1, t2, t3 := newSim(tn, "job", "t1"), newSim(tn, "job", "t2"), newSim(tn, "job", "t3")
	s.applyAll(t, m, []apollo.Change{
		t1.apply(step{status: pending, ts: n - sec(100)}),
		t2.apply(step{status: pending, ts: n - sec(90)}),
		t1.apply(step{status: running, ts: n - sec(60)}),
		t1.apply(step{status: success, ts: n - sec(30)}),
		t2.apply(step{status: blocked, ts: n - sec(20)}),
		t3.apply(step{status: running, ts: n - sec(95)}), // reported last
	})
	pts := s.points(t, tn, "job", 2*time.Minute, 10*time.Second, now)
	for _, w := range []struct {
		at               int64
		backlog, running int64
	}{
		{n - sec(110), 0, 0},
		{n - sec(100), 1, 1},
		{n - sec(90), 2, 1},
		{n - sec(60), 1, 2},
		{n - sec(40), 1, 2},
		{n - sec(30), 1, 1},
		{n - sec(20), 0, 1},
		{n, 0, 1},
	} {
		if p := pointAt(t, pts, w.at); p.Backlog != w.backlog || p.Running != w.running {
			t.Errorf("bucket %+ds: backlog %d running %d, want %d and %d", (w.at-n)/1000, p.Backlog, p.Running, w.backlog, w.running)
		}
	}
	prev := row(s.table(t, tn, 30*time.Second, 30*time.Second, now), "job")
	cur := row(s.table(t, tn, 30*time.Second, 0, now), "job")
	if prev.Backlog != 1 || prev.Running != 1 || cur.Backlog != 0 || cur.Running != 1 {
		t.Errorf("previous window gauges %d/%d, current %d/%d; want 1/1 and 0/1", prev.Backlog, prev.Running, cur.Backlog, cur.Running)
	}
	c := &checker{t: t, m: m, s: s}
	c.series(tn, "job", now, 2*time.Minute, 10*time.Second)
	c.series(tn, "job", now, 10*time.Minute, time.Minute)
}

// corrections: a manual correction moves a finish between states and
// buckets; the counts always equal a recount of the final states.
func (s *suite) corrections(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("corr")
	m := newModel()
	x, y, z, u := newSim(tn, "job", "x"), newSim(tn, "job", "y"), newSim(tn, "job", "z"), newSim(tn, "job", "u")
	v, w := newSim(tn, "job", "v"), newSim(tn, "job", "w")
	s.applyAll(t, m, []apollo.Change{
		x.apply(step{status: running, ts: n - sec(300)}),
		x.apply(step{status: failed, ts: n - sec(250)}),
		y.apply(step{status: running, ts: n - sec(280)}),
		y.apply(step{status: success, ts: n - sec(240)}),
		z.apply(step{status: running, ts: n - sec(200)}),
		z.apply(step{status: timeout, ts: n - sec(150), kind: apollo.KindTimeout}),
		u.apply(step{status: running, ts: n - sec(100)}),
		u.apply(step{status: success, ts: n - sec(90)}),
		v.apply(step{status: running, ts: n - sec(210)}),
		v.apply(step{status: failed, ts: n - sec(200), cost: 7000}),
		w.apply(step{status: running, ts: n - sec(70)}),
	})
	if got := row(s.table(t, tn, 10*time.Minute, 0, now), "job"); got.Count != 5 || got.Success != 2 || got.Failed != 2 || got.Timeout != 1 {
		t.Fatalf("before corrections: %+v", got)
	}
	s.applyAll(t, m, []apollo.Change{
		// The verdict only: same bucket, other state.
		x.apply(step{kind: apollo.KindCorrection, status: success, ts: n - sec(5)}),
		// Re-run by hand: the finish moves to when it was re-run.
		y.apply(step{kind: apollo.KindCorrection, status: failed, ts: n - sec(5), finishedAt: n - sec(30), cost: 5000}),
		// Reopened, then reported again.
		z.apply(step{kind: apollo.KindCorrection, status: running, ts: n - sec(5)}),
		z.apply(step{status: success, ts: n - sec(1)}),
		// Same state again: nothing moves.
		u.apply(step{kind: apollo.KindCorrection, status: success, ts: n - sec(5)}),
		// Same state and cost, another time: the finish moves.
		v.apply(step{kind: apollo.KindCorrection, status: failed, ts: n - sec(5), finishedAt: n - sec(40), cost: 7000}),
		// A running task set to running: not a new start.
		w.apply(step{kind: apollo.KindCorrection, status: running, ts: n - sec(5)}),
	})
	tb := s.table(t, tn, 10*time.Minute, 0, now)
	got := row(tb, "job")
	// Recount: x success, y failed, z success, u success, v failed; w runs.
	if got.Count != 5 || got.Success != 3 || got.Failed != 2 || got.Timeout != 0 || got.Started != 7 || got.Running != 1 {
		t.Errorf("after corrections: %+v, want 5 finished: 3 success, 2 failed; 7 starts, 1 running", got)
	}
	pts := s.points(t, tn, "job", 10*time.Minute, 10*time.Second, now)
	for _, w := range []struct {
		at                      int64
		count, success, failed  int64
		costN, costMin, costMax int64
		what                    string
	}{
		{n - sec(250), 1, 1, 0, 1, 50_000, 50_000, "x: failed became success in place"},
		{n - sec(240), 0, 0, 0, 0, 0, 0, "y: moved away"},
		{n - sec(30), 1, 0, 1, 1, 5000, 5000, "y: re-run"},
		{n - sec(150), 0, 0, 0, 0, 0, 0, "z: timeout taken out"},
		{n - sec(10), 1, 1, 0, 1, 4000, 4000, "z: finished again"},
		{n - sec(90), 1, 1, 0, 1, 10_000, 10_000, "u: unchanged"},
		{n - sec(200), 0, 0, 0, 0, 0, 0, "v: moved away"},
		{n - sec(40), 1, 0, 1, 1, 7000, 7000, "v: moved here"},
	} {
		p := pointAt(t, pts, w.at)
		if p.Count != w.count || p.Success != w.success || p.Failed != w.failed || p.CostN != w.costN || p.CostMin != w.costMin || p.CostMax != w.costMax {
			t.Errorf("%s: bucket %+ds: %+v", w.what, (w.at-n)/1000, p)
		}
	}
	c := &checker{t: t, m: m, s: s}
	c.series(tn, "job", now, 10*time.Minute, 10*time.Second)
	c.table(tn, now, 5*time.Minute, 0, []string{"", "j"})
}

// rollups: windows longer than the bucket retention read 1-minute rollups
// for their older part, a bound there rounded down to its minute.
func (s *suite) rollups(t *testing.T) {
	now := s.alignClock(30 * time.Second)
	n := now.UnixMilli()
	tn := s.tenant("rollup")
	m := newModel()
	var cs []apollo.Change
	for i, ago := range []int64{sec(3*3600 - 25), sec(2*3600 + 5), sec(30 * 60), sec(20 * 3600)} {
		j := newSim(tn, "job", "r"+strconv.Itoa(i))
		cs = append(cs, j.apply(step{status: running, ts: n - ago - sec(int64(10*(i+1)))}),
			j.apply(step{status: success, ts: n - ago}))
	}
	s.applyAll(t, m, cs)
	for _, w := range []struct {
		window time.Duration
		count  int64
		why    string
	}{
		{time.Hour, 1, "30m ago"},
		{2 * time.Hour, 2, "30m ago, and 2h5s ago: the window's start is rounded down to its minute"},
		{4 * time.Hour, 3, "and 3h ago"},
		{24 * time.Hour, 4, "and 20h ago"},
	} {
		if got := row(s.table(t, tn, w.window, 0, now), "job"); got.Count != w.count {
			t.Errorf("%v window: count %d, want %d (%s)", w.window, got.Count, w.count, w.why)
		}
	}
	pts := s.points(t, tn, "job", 4*time.Hour, time.Minute, now)
	var sum int64
	for _, p := range pts {
		sum += p.Count
	}
	if sum != 3 {
		t.Errorf("4h of 1m points add up to %d finishes, want 3", sum)
	}
	c := &checker{t: t, m: m, s: s}
	for range 2 {
		for _, w := range []time.Duration{10 * time.Second, time.Minute, time.Hour, time.Hour + 10*time.Second, 2 * time.Hour, 4 * time.Hour, 24 * time.Hour} {
			for _, off := range []time.Duration{0, 10 * time.Second, 30 * time.Minute, time.Hour, 2 * time.Hour} {
				c.table(tn, now, w, off, nil)
			}
		}
		c.series(tn, "job", now, 4*time.Hour, time.Minute)
		c.series(tn, "job", now, 24*time.Hour, 10*time.Minute)
		c.series(tn, "job", now, 2*time.Hour, 10*time.Second)
		s.h.Clock.Advance(35 * time.Minute) // the 30m-old finish leaves the buckets
		now = s.h.Clock.Now()
	}
}

// retention: data older than the rollup retention is gone from every
// window, while the gauges of tasks still pending or running stay.
func (s *suite) retention(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("retain")
	m := newModel()
	p, r, f := newSim(tn, "job", "p"), newSim(tn, "job", "r"), newSim(tn, "job", "f")
	s.applyAll(t, m, []apollo.Change{
		p.apply(step{status: pending, ts: n - sec(10)}),
		r.apply(step{status: running, ts: n - sec(20)}),
		f.apply(step{status: running, ts: n - sec(60)}),
		f.apply(step{status: success, ts: n - sec(10)}),
	})
	if got := row(s.table(t, tn, time.Minute, 0, now), "job"); got.Count != 1 || got.Backlog != 1 || got.Running != 1 {
		t.Fatalf("before: %+v", got)
	}
	s.h.Clock.Advance(25 * time.Hour)
	now = s.h.Clock.Now()
	got := row(s.table(t, tn, 24*time.Hour, 0, now), "job")
	if got.Count != 0 || got.Started != 0 || got.Backlog != 1 || got.Running != 1 {
		t.Errorf("25h later, 24h window: %+v; want no counts, backlog 1, running 1", got)
	}
	for _, pt := range s.points(t, tn, "job", 24*time.Hour, time.Hour, now) {
		if pt.Count != 0 || pt.Backlog != 1 || pt.Running != 1 {
			t.Fatalf("25h later, point at %d: %+v; want no counts, backlog 1, running 1", pt.T, pt.Summary)
		}
	}
	n = now.UnixMilli()
	s.applyAll(t, m, []apollo.Change{
		p.apply(step{status: running, ts: n - sec(5)}),
		p.apply(step{status: failed, ts: n - sec(1)}),
	})
	if got := row(s.table(t, tn, time.Minute, 0, now), "job"); got.Count != 1 || got.Failed != 1 || got.Backlog != 0 || got.Running != 1 {
		t.Errorf("new data after the old expired: %+v", got)
	}
	c := &checker{t: t, m: m, s: s}
	c.table(tn, now, 24*time.Hour, 0, nil)
	c.series(tn, "job", now, 24*time.Hour, 30*time.Minute)

	// At the edge: a finish in the minute that has just left the rollup
	// retention is outside every window, even one reaching further back.
	now = s.alignClock(0)
	n = now.UnixMilli()
	e := newSim(tn, "edge", "e")
	s.applyAll(t, m, []apollo.Change{
		e.apply(step{status: running, ts: n + sec(1)}),
		e.apply(step{status: success, ts: n + sec(2)}),
	})
	s.h.Clock.Set(now.Add(24 * time.Hour))
	if got := row(s.table(t, tn, 24*time.Hour, 0, s.h.Clock.Now()), "edge"); got.Count != 1 {
		t.Errorf("24h window in the last minute the finish is kept: %+v", got)
	}
	s.h.Clock.Set(now.Add(24*time.Hour + time.Minute))
	now = s.h.Clock.Now()
	for _, off := range []time.Duration{0, time.Minute, time.Hour} {
		if got := row(s.table(t, tn, 24*time.Hour, off, now), "edge"); got.Count != 0 || got.Started != 0 {
			t.Errorf("24h window at offset %v, a minute after the finish expired: %+v", off, got)
		}
		c.table(tn, now, 24*time.Hour, off, nil)
	}
}

// tooOldTooNew: timestamps older than the rollup retention or more than a
// minute ahead are not counted; their gauge moves are clamped, not lost.
func (s *suite) tooOldTooNew(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("skew")
	m := newModel()
	old, stuck, future, near := newSim(tn, "job", "old"), newSim(tn, "job", "stuck"), newSim(tn, "job", "future"), newSim(tn, "job", "near")
	s.applyAll(t, m, []apollo.Change{
		old.apply(step{status: running, ts: n - sec(25*3600)}),
		old.apply(step{status: success, ts: n - sec(25*3600-10)}),
		stuck.apply(step{status: pending, ts: n - sec(10)}),
		stuck.apply(step{status: running, ts: n - sec(25*3600)}), // a reporter a day behind
		future.apply(step{status: running, ts: n + sec(120)}),
		future.apply(step{status: success, ts: n + sec(121)}),
		near.apply(step{status: running, ts: n + sec(50)}),
		near.apply(step{status: success, ts: n + sec(55)}),
	})
	got := row(s.table(t, tn, 24*time.Hour, 0, now), "job")
	if got.Count != 0 || got.Started != 0 || got.Backlog != 0 || got.Running != 1 {
		t.Errorf("now, 24h window: %+v; want nothing counted, backlog 0, running 1", got)
	}
	s.h.Clock.Advance(3 * time.Minute)
	now = s.h.Clock.Now()
	got = row(s.table(t, tn, 24*time.Hour, 0, now), "job")
	if got.Count != 1 || got.Started != 1 || got.Backlog != 0 || got.Running != 1 {
		t.Errorf("3m later, 24h window: %+v; want only the run 50s ahead counted, running 1", got)
	}
	c := &checker{t: t, m: m, s: s}
	c.table(tn, now, 24*time.Hour, 0, nil)
	c.series(tn, "job", now, 10*time.Minute, 10*time.Second)
}

// tooNewAtReceipt: whether a time is too new is judged against when its
// record was received, not when it is applied, so a replay after a restart
// (the store's clock later) counts what the first application counted and
// drops what it dropped.
func (s *suite) tooNewAtReceipt(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("receipt")
	m := newModel()
	rcv := n - sec(30) // received half a minute ago, applied now
	over, under := newSim(tn, "job", "over"), newSim(tn, "job", "under")
	s.applyAll(t, m, []apollo.Change{
		over.apply(step{status: success, ts: rcv + sec(60) + 1, received: rcv}),
		under.apply(step{status: success, ts: rcv + sec(60), received: rcv}),
	})
	s.h.Clock.Advance(3 * time.Minute)
	now = s.h.Clock.Now()
	if got := row(s.table(t, tn, time.Hour, 0, now), "job"); got.Count != 1 {
		t.Errorf("1h window: %+v; want the run a minute after its receipt counted, not the one a millisecond later", got)
	}
	c := &checker{t: t, m: m, s: s}
	c.table(tn, now, time.Hour, 0, nil)
}

// series: points are aligned, cover the window without overlap and agree
// with Table.
func (s *suite) series(t *testing.T) {
	now := s.alignClock(10 * time.Second)
	n := now.UnixMilli()
	tn := s.tenant("series")
	m := newModel()
	rng := rand.New(rand.NewPCG(1, 2))
	var cs []apollo.Change
	for i := range 40 {
		j := newSim(tn, []string{"a", "b"}[i%2], "s"+strconv.Itoa(i))
		cs = append(cs, lifecycle(rng, j, n-rng.Int64N(sec(600)), n+sec(50), false)...)
	}
	s.applyAll(t, m, cs)
	for _, w := range []struct{ window, step time.Duration }{
		{5 * time.Minute, time.Minute}, {time.Minute, 10 * time.Second}, {10 * time.Minute, 5 * time.Minute}, {30 * time.Second, 30 * time.Second},
	} {
		pts := s.points(t, tn, "a", w.window, w.step, now)
		var sum apollo.Summary
		for _, p := range pts {
			sum.Add(p.Summary)
		}
		tb := row(s.table(t, tn, w.window, 0, now), "a")
		last := pts[len(pts)-1]
		if sum.Count != tb.Count || sum.Started != tb.Started || sum.CostSum != tb.CostSum || sum.Late != tb.Late ||
			last.Backlog != tb.Backlog || last.Running != tb.Running {
			t.Errorf("Series(%v, %v) adds up to %+v (last point %+v), Table says %+v", w.window, w.step, sum, last.Summary, tb)
		}
		if want := n + sec(10) - w.window.Milliseconds(); pts[0].T != want {
			t.Errorf("Series(%v, %v) starts at %d, want %d", w.window, w.step, pts[0].T, want)
		}
		c := &checker{t: t, m: m, s: s}
		c.series(tn, "a", now, w.window, w.step)
		c.series(tn, "b", now, w.window, w.step)
	}
}

// concurrent: tasks applied from many goroutines add up exactly.
func (s *suite) concurrent(t *testing.T) {
	now := s.alignClock(0)
	n := now.UnixMilli()
	tn := s.tenant("conc")
	m := newModel()
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"batch_a", "batch_b", "etl", "etl_x", "report"}
	tasks := make([][]apollo.Change, 400)
	for i := range tasks {
		j := newSim(tn, names[rng.IntN(len(names))], "c"+strconv.Itoa(i))
		tasks[i] = lifecycle(rng, j, n-rng.Int64N(sec(7200)), n+sec(50), false)
	}
	s.applyConcurrently(t, m, tasks, 8)
	c := &checker{t: t, m: m, s: s}
	for _, w := range []time.Duration{time.Minute, 5 * time.Minute, time.Hour, 2 * time.Hour} {
		c.table(tn, now, w, 0, []string{"", "batch_", "etl", "etl_", "x"})
	}
}

// property: random lifecycles with random timestamps, applied in random
// order, read through random windows, offsets and steps at several
// moments, always equal a brute-force recount.
func (s *suite) property(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("METRICSTEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (set METRICSTEST_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := s.alignClock(time.Duration(rng.Int64N(60_000)) * time.Millisecond)
	tn := s.tenant("prop")
	m := newModel()
	names := []string{"batch_a", "batch_ab", "batch_b", "etl/x", "etl/y", "report"}
	prefixes := []string{"", "batch_", "batch_a", "etl/", "r", "zzz"}
	c := &checker{t: t, m: m, s: s}
	id := 0
	for round := range 6 {
		n := now.UnixMilli()
		var tasks [][]apollo.Change
		for range 150 {
			id++
			j := newSim(tn, names[rng.IntN(len(names))], "p"+strconv.Itoa(id))
			tasks = append(tasks, lifecycle(rng, j, n-randomAge(rng), n+sec(50), true))
		}
		s.applyAll(t, m, interleave(rng, tasks))
		for range 25 {
			w, off := randomWindow(rng)
			c.table(tn, now, w, off, prefixes)
		}
		for range 3 {
			w, st := randomSteps(rng)
			c.series(tn, names[rng.IntN(len(names))], now, w, st)
		}
		if t.Failed() {
			t.Fatalf("round %d failed; repeat with METRICSTEST_SEED=%d", round, seed)
		}
		s.h.Clock.Advance(time.Duration(rng.Int64N(sec(5400))) * time.Millisecond)
		now = s.h.Clock.Now()
	}
}

// randomAge is how long ago a run starts: mostly within the bucket
// retention, often in the rollups, sometimes right on a boundary.
func randomAge(rng *rand.Rand) int64 {
	switch rng.IntN(10) {
	case 0, 1, 2, 3:
		return rng.Int64N(sec(3000))
	case 4, 5, 6, 7:
		return rng.Int64N(sec(23*3600 + 1800))
	case 8:
		return rng.Int64N(sec(120))
	default:
		return rng.Int64N(sec(3*3600)) / sec(60) * sec(60)
	}
}

func randomWindow(rng *rand.Rand) (w, off time.Duration) {
	common := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour}
	if rng.IntN(2) == 0 {
		w = common[rng.IntN(len(common))]
	} else {
		w = time.Duration(1+rng.IntN(8640)) * 10 * time.Second
	}
	switch rng.IntN(3) {
	case 0:
	case 1:
		off = w
	default:
		off = time.Duration(rng.IntN(8641)) * 10 * time.Second
	}
	return w, off
}

func randomSteps(rng *rand.Rand) (w, step time.Duration) {
	steps := []int{1, 6, 30, 60, 360}
	k := steps[rng.IntN(len(steps))]
	points := 1 + rng.IntN(min(60, 8640/k))
	step = time.Duration(k) * 10 * time.Second
	return time.Duration(points) * step, step
}

// interleave merges the tasks' changes in a random order that keeps each
// task's own order.
func interleave(rng *rand.Rand, tasks [][]apollo.Change) []apollo.Change {
	var out []apollo.Change
	live := append([][]apollo.Change(nil), tasks...)
	for len(live) > 0 {
		i := rng.IntN(len(live))
		out = append(out, live[i][0])
		if live[i] = live[i][1:]; len(live[i]) == 0 {
			live = append(live[:i], live[i+1:]...)
		}
	}
	return out
}
