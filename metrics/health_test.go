package metrics_test

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
)

// runner reports runs of one job as the bus hands them over.
type runner struct {
	a      *metrics.Aggregator
	tenant string
}

// run reports a task from pending (or, with start 0, from its end alone)
// to status, with the cost given.
func (r runner) run(name, id string, status apollo.Status, start, cost int64) {
	prev := apollo.Task{TaskID: id, Name: name, Tenant: r.tenant}
	if start > 0 {
		prev = r.step(prev, apollo.StatusRunning, start, func(t *apollo.Task) { t.StartedAt = start })
	}
	if status == apollo.StatusRunning {
		return
	}
	end := start + cost
	r.step(prev, status, end, func(t *apollo.Task) { t.FinishedAt, t.CostMs = end, cost })
}

func (r runner) step(prev apollo.Task, to apollo.Status, ts int64, set func(*apollo.Task)) apollo.Task {
	next := prev
	next.Status = to
	set(&next)
	c := apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: prev.TaskID, Name: prev.Name, Tenant: r.tenant, Status: to, Ts: ts}},
		Prev: apollo.BeforeOf(&prev), Task: next}
	r.a.Apply(&c)
	return next
}

func health(a *metrics.Aggregator, tenant, prefix string) map[string]apollo.JobHealth {
	out := map[string]apollo.JobHealth{}
	a.JobsHealth(tenant, prefix, func(h *apollo.JobHealth) bool {
		out[h.Name] = *h
		return true
	})
	return out
}

func TestJobsHealth(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	now := clock.Now().UnixMilli()
	const minute = 60_000
	for _, tn := range []string{"a", "b"} {
		r := runner{a, tn}
		// etl: every 10 minutes, about a minute each, the last one failed.
		for i := range int64(5) {
			st := apollo.StatusSuccess
			if i == 4 {
				st = apollo.StatusFailed
			}
			r.run("etl", "etl-"+string(rune('0'+i)), st, now-50*minute+i*10*minute, minute+i*1000)
		}
		// hang: every run timed out.
		r.run("hang", "hang-1", apollo.StatusTimeout, now-20*minute, 5*minute)
		r.run("hang", "hang-2", apollo.StatusTimeout, now-10*minute, 5*minute)
	}
	// In tenant b only: a run of etl still running, started 30 minutes
	// ago, and a job reported by its end alone.
	rb := runner{a, "b"}
	rb.run("etl", "etl-long", apollo.StatusRunning, now-30*minute, 0)
	rb.step(apollo.Task{TaskID: "ping-1", Name: "ping", Tenant: "b"}, apollo.StatusSuccess, now,
		func(t *apollo.Task) { t.FinishedAt, t.CostMs = now, 700 })

	ha := health(a, "a", "")
	if len(ha) != 2 {
		t.Fatalf("tenant a: %d jobs, want etl and hang: %v", len(ha), ha)
	}
	etl := ha["etl"]
	if etl.Last.TaskID != "etl-4" || etl.Last.Status != apollo.StatusFailed || etl.Facts.LastStatus != apollo.StatusFailed {
		t.Errorf("etl's last run: %+v, facts %+v", etl.Last, etl.Facts)
	}
	if etl.Facts.UsualCostMs != minute+2000 || etl.Facts.UsualEveryMs != 10*minute || etl.Facts.LastRunAt != now-10*minute {
		t.Errorf("etl's habits: %+v", etl.Facts)
	}
	if etl.Success != 4 || etl.Failed != 1 || etl.CostN != 5 || etl.Runs != 5 || etl.Running != 0 {
		t.Errorf("etl's totals: %+v", etl)
	}
	if etl.Durations[4] != 1 || etl.Durations[5] != 4 || etl.LastSuccessAt != now-20*minute+minute+3000 || etl.LastFailedAt != now+minute+4000-10*minute {
		t.Errorf("etl's durations and ends: %v, success %d, failed %d", etl.Durations, etl.LastSuccessAt, etl.LastFailedAt)
	}
	if v := etl.Facts.Verdict(now); v != apollo.VerdictFailing {
		t.Errorf("etl: %s", v)
	}
	if v := ha["hang"].Facts; v.LastStatus != apollo.StatusTimeout || v.Verdict(now) != apollo.VerdictTimingOut || ha["hang"].Timeout != 2 {
		t.Errorf("hang: %+v", ha["hang"])
	}

	hb := health(a, "b", "")
	if f := hb["etl"].Facts; f.RunningSince != now-30*minute || hb["etl"].Running != 1 || hb["etl"].Runs != 6 {
		t.Errorf("tenant b's etl: %+v", hb["etl"])
	}
	if p := hb["ping"]; p.Last.TaskID != "ping-1" || p.Last.Status != apollo.StatusSuccess || p.LastSuccessAt == 0 {
		t.Errorf("a run reported by its end: %+v", p)
	}
	if got := health(a, "b", "e"); len(got) != 1 || got["etl"].Name != "etl" {
		t.Errorf("prefix e: %v", got)
	}
	if got := health(a, "nobody", ""); len(got) != 0 {
		t.Errorf("unknown tenant: %v", got)
	}
	runs := a.RecentRuns("b", "etl", nil)
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.TaskID)
	}
	if want := []string{"etl-0", "etl-1", "etl-2", "etl-long", "etl-3", "etl-4"}; !slices.Equal(ids, want) {
		t.Errorf("tenant b's etl runs %v, want in the order of their first report %v", ids, want)
	}
	if got := a.RecentRuns("a", "nosuch", nil); len(got) != 0 {
		t.Errorf("unknown job: %v", got)
	}
}

// A correction moves the run in the histogram and the counters alike,
// and the ring shows the corrected status.
func TestJobsHealthCorrection(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	now := clock.Now().UnixMilli()
	r := runner{a, ""}
	r.run("job", "j1", apollo.StatusSuccess, now-5000, 2000)
	done := apollo.Task{TaskID: "j1", Name: "job", Status: apollo.StatusSuccess, StartedAt: now - 5000, FinishedAt: now - 3000, CostMs: 2000}
	fixed := r.step(done, apollo.StatusFailed, now-1000, func(t *apollo.Task) { t.FinishedAt, t.CostMs = now-1000, 40_000 })
	h := health(a, "", "")["job"]
	if h.Success != 0 || h.Failed != 1 || h.Durations[2] != 0 || h.Durations[4] != 1 || h.CostSum != 40_000 {
		t.Errorf("after the correction: %+v", h)
	}
	if h.Last.Status != apollo.StatusFailed || h.Facts.LastStatus != apollo.StatusFailed || h.Last.CostMs != fixed.CostMs {
		t.Errorf("the ring after the correction: %+v", h.Last)
	}
	if h.LastSuccessAt != now-3000 || h.LastFailedAt != now-1000 {
		t.Errorf("last ends %d %d: the success is kept as seen", h.LastSuccessAt, h.LastFailedAt)
	}
}

// The ring keeps the newest runs by start, whatever order the changes of
// different tasks come in: a replay, which interleaves tasks differently,
// rebuilds the same rings, histograms and totals. A snapshot keeps them.
func TestRecentRunsOrderIndependent(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b"}
	clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	for seed := range uint64(20) {
		live := metricstest.Workload(seed, "t", names, 60, clock.Now(), time.Hour, true)
		replay := reorder(seed, live)
		x, _ := metrics.New(metrics.Options{Clock: clock, RecentRuns: 7})
		y, _ := metrics.New(metrics.Options{Clock: clock, RecentRuns: 7})
		for i := range live {
			x.Apply(&live[i])
			y.Apply(&replay[i])
		}
		same := func(what string, x, y *metrics.Aggregator) {
			t.Helper()
			for _, n := range names {
				rx, ry := x.RecentRuns("t", n, nil), y.RecentRuns("t", n, nil)
				if len(rx) != 7 || !reflect.DeepEqual(rx, ry) {
					t.Fatalf("seed %d %s: job %s's runs differ:\n%+v\n%+v", seed, what, n, rx, ry)
				}
			}
			if hx, hy := health(x, "t", ""), health(y, "t", ""); !reflect.DeepEqual(hx, hy) {
				t.Fatalf("seed %d %s: health differs:\n%+v\n%+v", seed, what, hx, hy)
			}
		}
		same("replayed", x, y)
		var buf bytes.Buffer
		if err := x.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		z, _ := metrics.New(metrics.Options{Clock: clock, RecentRuns: 7})
		if err := z.ReadSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		same("restored", x, z)
	}
}

// reorder interleaves the changes of different tasks anew, keeping each
// task's own order.
func reorder(seed uint64, cs []apollo.Change) []apollo.Change {
	var order []string
	byTask := map[string][]apollo.Change{}
	for _, c := range cs {
		if byTask[c.Task.TaskID] == nil {
			order = append(order, c.Task.TaskID)
		}
		byTask[c.Task.TaskID] = append(byTask[c.Task.TaskID], c)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	out := make([]apollo.Change, 0, len(cs))
	for len(order) > 0 {
		i := rng.IntN(len(order))
		id := order[i]
		out = append(out, byTask[id][0])
		if byTask[id] = byTask[id][1:]; len(byTask[id]) == 0 {
			order = slices.Delete(order, i, i+1)
		}
	}
	return out
}

// A smaller RecentRuns keeps the newest runs of a restored ring; a
// version 1 snapshot reads as jobs without runs.
func TestSnapshotRecentRuns(t *testing.T) {
	t.Parallel()
	a, clock := newIdle(t)
	now := clock.Now().UnixMilli()
	r := runner{a, ""}
	for i := range int64(10) {
		r.run("job", "j"+string(rune('0'+i)), apollo.StatusSuccess, now-100_000+i*1000, 500)
	}
	small, _ := metrics.New(metrics.Options{Clock: clock, RecentRuns: 3})
	if err := small.ReadSnapshot(bytes.NewReader(snapshot(t, a))); err != nil {
		t.Fatal(err)
	}
	got := small.RecentRuns("", "job", nil)
	if len(got) != 3 || got[0].TaskID != "j7" || got[2].TaskID != "j9" {
		t.Errorf("restored into RecentRuns 3: %+v", got)
	}
	old, _ := metrics.New(metrics.Options{Clock: clock})
	if err := old.ReadSnapshot(bytes.NewReader(handSnapshot(1, "a", "b"))); err != nil {
		t.Fatal(err)
	}
	if h := health(old, "", ""); len(h) != 2 || h["a"].Runs != 0 || h["b"].Last.TaskID != "" {
		t.Errorf("a version 1 snapshot: %+v", h)
	}
	if _, err := metrics.New(metrics.Options{RecentRuns: apollo.MaxRecentRuns + 1}); err == nil {
		t.Error("RecentRuns over the limit was accepted")
	}
}
