package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// runOf is one run of job that started at ts-5s and, unless end is
// running, ended at ts with end.
func runOf(tenant, job, id string, ts int64, end apollo.Status) []apollo.Change {
	t0 := apollo.Task{TaskID: id, Name: job, Tenant: tenant}
	t1 := t0
	t1.Status, t1.Sequence, t1.StartedAt, t1.UpdatedAt = apollo.StatusRunning, 1, ts-5000, ts-5000
	rec := func(t apollo.Task) apollo.Record {
		return apollo.Record{Event: apollo.Event{TaskID: id, Name: job, Tenant: tenant, Sequence: t.Sequence, Status: t.Status, Ts: t.UpdatedAt}}
	}
	cs := []apollo.Change{{Record: rec(t1), Prev: apollo.BeforeOf(&t0), Task: t1}}
	if end == apollo.StatusRunning {
		return cs
	}
	t2 := t1
	t2.Status, t2.Sequence, t2.FinishedAt, t2.CostMs, t2.UpdatedAt = end, 2, ts, 5000, ts
	return append(cs, apollo.Change{Record: rec(t2), Prev: apollo.BeforeOf(&t1), Task: t2})
}

// The bus of a new log (a new data directory) writes as a writer of its
// own and retires the old log's writer: the old counts stay and are
// summed with the new ones, while the old tasks' levels (a task the old
// log had running, which no bus will finish) leave each job the new
// writer writes. acme's job, written by the new writer, keeps its old
// failure, adds its success and no longer counts the old running task;
// globex's, not written, keeps both until its key expires. Without
// Retire, acme's old running task was still counted.
func TestRetiredWriterKeepsItsCountsNotItsLevels(t *testing.T) {
	t.Parallel()
	old := newFixture(t, nil)
	now := old.clock.Now()
	ts := now.Add(-time.Minute).UnixMilli()
	for _, tenant := range []string{"acme", "globex"} {
		for _, cs := range [][]apollo.Change{
			runOf(tenant, "batch_a", "failed-1", ts, apollo.StatusFailed),
			runOf(tenant, "batch_a", "hung-1", ts, apollo.StatusRunning),
		} {
			for i := range cs {
				old.fl.Apply(&cs[i])
			}
		}
	}
	old.flush(t)

	opts := old.opts
	opts.Writer, opts.Retire = "log-new", []string{""}
	next := newFixtureOn(t, old.clock, opts)
	cs := runOf("acme", "batch_a", "ok-1", now.UnixMilli(), apollo.StatusSuccess)
	for i := range cs {
		next.fl.Apply(&cs[i])
	}
	next.flush(t)

	want := map[string]apollo.Summary{
		"acme":   {Count: 2, Success: 1, Failed: 1, Started: 3, Running: 0},
		"globex": {Count: 1, Failed: 1, Started: 2, Running: 1},
	}
	for tenant, w := range want {
		tb, err := next.st.Table(context.Background(), metrics.Query{Tenant: tenant, Window: 10 * time.Minute, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if len(tb.Rows) != 1 {
			t.Fatalf("%s: %d jobs, want batch_a alone", tenant, len(tb.Rows))
		}
		got := tb.Rows[0]
		if got.Count != w.Count || got.Success != w.Success || got.Failed != w.Failed || got.Started != w.Started || got.Running != w.Running {
			t.Errorf("%s's batch_a after the new writer: count %d success %d failed %d started %d running %d, want %d %d %d %d %d",
				tenant, got.Count, got.Success, got.Failed, got.Started, got.Running, w.Count, w.Success, w.Failed, w.Started, w.Running)
		}
	}

	// The writer itself, or an ID no writer could have, is not retired.
	for _, retire := range [][]string{{"log-new"}, {"a b"}} {
		o := opts
		o.Retire = retire
		if _, err := NewFlusher(next.agg, o); err == nil {
			t.Errorf("NewFlusher with Writer %q and Retire %q: no error", o.Writer, retire)
		}
	}
}
