package metrics_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
)

// sumEntries adds the entries starting in [start, end): counters, cost
// range and the gauge moves.
func sumEntries(es []metrics.Entry, start, end int64) apollo.Summary {
	var s apollo.Summary
	for _, e := range es {
		if e.Start >= start && e.Start < end {
			s.Add(e.Summary)
		}
	}
	return s
}

// movesFrom adds the gauge moves of the entries starting at or after x.
func movesFrom(es []metrics.Entry, x int64) (backlog, running int64) {
	for _, e := range es {
		if e.Start >= x {
			backlog += e.Backlog
			running += e.Running
		}
	}
	return backlog, running
}

// An exported job, summed over a window, is the Table's row for it: the
// counters and cost range are the entries' own, and the gauges at the
// window's end are the levels less the moves at or after it. Windows
// inside the bucket retention are summed from the buckets, the others
// (whole minutes) from the rollups.
func TestExportJobAgreesWithTable(t *testing.T) {
	t.Parallel()
	a, clock := newStarted(t)
	now := clock.Now()
	names := []string{"a", "b", "c/d", "e"}
	for _, c := range metricstest.Workload(3, "tn", names, 3000, now, 3*time.Hour, true) {
		a.Apply(&c)
	}
	ctx := context.Background()
	var ex metrics.Export
	for _, w := range []struct {
		window, offset time.Duration
		rollups        bool
	}{
		{10 * time.Second, 0, false},
		{5 * time.Minute, 0, false},
		{time.Hour - 10*time.Second, 0, false},
		{30 * time.Minute, 20 * time.Minute, false},
		{time.Hour, 2 * time.Hour, true},
		{2 * time.Hour, 70 * time.Minute, true},
	} {
		tb, err := a.Table(ctx, metrics.Query{Tenant: "tn", Window: w.window, Offset: w.offset, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		sp, err := metrics.ResolveSpan(w.window, w.offset, now, metrics.DefaultBucketRetention, metrics.DefaultRollupRetention)
		if err != nil {
			t.Fatal(err)
		}
		start, end := sp.Start, sp.End
		if w.rollups {
			start, end = start/60_000*60_000, end/60_000*60_000
		}
		for i, name := range tb.Names {
			h := metrics.Horizon(now, metrics.DefaultRollupRetention)
			if !a.ExportJob("tn", name, h, h, &ex) {
				t.Fatalf("ExportJob(%q): job not found", name)
			}
			es := ex.Buckets
			if w.rollups {
				es = ex.Rollups
			}
			got := sumEntries(es, start, end)
			b, r := movesFrom(es, end)
			got.Backlog, got.Running = ex.Backlog-b, ex.Running-r
			got.Window = w.window
			if want := tb.Rows[i]; got != want {
				t.Errorf("%v window at offset %v, job %q:\nexport %+v\n table %+v", w.window, w.offset, name, got, want)
			}
		}
	}
	// The two levels start where they are asked to.
	b0, r0 := now.UnixMilli()-300_000, metrics.Horizon(now, time.Hour)
	if !a.ExportJob("tn", "a", b0, r0, &ex) || len(ex.Buckets) == 0 || len(ex.Rollups) == 0 ||
		ex.Buckets[0].Start < b0 || ex.Rollups[0].Start < r0 || ex.Rollups[0].Start >= b0 {
		t.Errorf("ExportJob from %d and %d: buckets from %+v, rollups from %+v", b0, r0, ex.Buckets[:min(1, len(ex.Buckets))], ex.Rollups[:min(1, len(ex.Rollups))])
	}
	if a.ExportJob("tn", "nobody", 0, 0, &ex) || len(ex.Buckets) != 0 || ex.Backlog != 0 {
		t.Errorf("ExportJob of an unknown job: %+v", ex)
	}
}

// Touched names every job a change's plan writes to, with a bucket at or
// before each of its parts, also for timestamps out of the accepted range
// whose gauge moves are clamped.
func TestTouchedCoversThePlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := now.UnixMilli()
	cs := metricstest.Workload(9, "tn", []string{"x", "y"}, 2000, now, 30*time.Hour, true)
	for _, ts := range []int64{ms + 5*60_000, ms + 61_000, ms - 25*3600_000, ms} {
		c := change("tn", "skewed", apollo.StatusPending, apollo.StatusRunning, ts)
		cs = append(cs, *c, *change("tn", "skewed", apollo.StatusRunning, apollo.StatusFailed, ts))
	}
	renamed := *change("tn", "new", apollo.StatusSuccess, apollo.StatusFailed, ms-1000)
	renamed.Prev.Name, renamed.Prev.FinishedAt, renamed.Prev.UpdatedAt = "old", ms-500_000, ms-500_000
	cs = append(cs, renamed)
	for i := range cs {
		c := &cs[i]
		from := map[string]int64{}
		metrics.Touched(c, now, func(tenant, name string, f int64) { from[tenant+"/"+name] = f })
		// Apply's clock may only be later than the one Touched saw.
		for _, later := range []time.Duration{0, time.Second, 10 * time.Minute} {
			pl := metrics.PlanChange(c, now.Add(later), metrics.DefaultRollupRetention)
			for _, p := range pl.Parts() {
				f, ok := from[p.Tenant+"/"+p.Name]
				if !ok || f > p.Bucket {
					t.Fatalf("change %d (%s), clock +%v: part %+v; Touched reported %v", i, describe(c), later, p, from)
				}
			}
		}
	}
}

func describe(c *apollo.Change) string {
	return fmt.Sprintf("%s %v->%v ts %d", c.Task.Name, c.Prev.Status, c.Task.Status, c.Record.Ts)
}

func change(tenant, name string, from, to apollo.Status, ts int64) *apollo.Change {
	c := &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: name + "-1", Name: name, Tenant: tenant, Status: to, Ts: ts}},
		Prev:   apollo.Before{Name: name, Status: from, UpdatedAt: ts - 1000},
		Task:   apollo.Task{TaskID: name + "-1", Name: name, Tenant: tenant, Status: to, UpdatedAt: ts},
	}
	if from.Final() {
		c.Prev.FinishedAt, c.Prev.CostMs = ts-1000, 700
	}
	if to.Final() {
		c.Task.FinishedAt, c.Task.CostMs = ts, 1500
	}
	return c
}

// Tables reads several windows in one pass and answers each exactly as
// Table does, whichever level (buckets, rollups or both) a window needs.
func TestTablesIsTableEach(t *testing.T) {
	t.Parallel()
	a, clock := newStarted(t)
	now := clock.Now()
	for _, c := range metricstest.Workload(5, "tn", []string{"a", "b", "c/d", "e", "f"}, 3000, now, 3*time.Hour, true) {
		a.Apply(&c)
	}
	ctx := context.Background()
	var qs []metrics.Query
	for _, w := range [][2]time.Duration{
		{time.Minute, 0}, {5 * time.Minute, 0}, {5 * time.Minute, 5 * time.Minute}, {time.Hour, 0},
		{30 * time.Minute, 50 * time.Minute}, {2 * time.Hour, 70 * time.Minute}, {24 * time.Hour, 0},
	} {
		qs = append(qs, metrics.Query{Tenant: "tn", Window: w[0], Offset: w[1], Now: now})
	}
	got, err := a.Tables(ctx, qs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(qs) {
		t.Fatalf("%d tables for %d queries", len(got), len(qs))
	}
	for i, q := range qs {
		want, err := a.Table(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[i].Names, want.Names) || !slices.Equal(got[i].Rows, want.Rows) || got[i].Window != want.Window {
			t.Errorf("window %v offset %v: Tables\n%+v\nTable\n%+v", q.Window, q.Offset, got[i].Rows, want.Rows)
		}
		if len(want.Names) != 5 {
			t.Errorf("window %v offset %v: %d jobs, want 5", q.Window, q.Offset, len(want.Names))
		}
	}
	mixed := []metrics.Query{qs[0], {Tenant: "other", Window: time.Minute, Now: now}}
	if _, err := a.Tables(ctx, mixed); err == nil {
		t.Error("Tables over two tenants: no error")
	}
	bad := []metrics.Query{qs[0], {Tenant: "tn", Window: 7 * time.Second, Now: now}}
	if _, err := a.Tables(ctx, bad); err == nil {
		t.Error("Tables with a 7s window: no error")
	}
}
