package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
)

var jobNames = []string{"batch_a", "batch_b", "etl/x", "report", "nightly"}

// workload is n random runs of the tenant's jobs over the last 3 hours,
// corrections included.
func workload(seed uint64, tenant string, n int, now time.Time) []apollo.Change {
	return metricstest.Workload(seed, tenant, jobNames, n, now, 3*time.Hour, true)
}

// finishedRun is one run of job that started and succeeded at ts.
func finishedRun(tenant, job string, ts int64) []apollo.Change {
	t0 := apollo.Task{TaskID: job + "-run", Name: job, Tenant: tenant}
	t1 := t0
	t1.Status, t1.Sequence, t1.StartedAt, t1.UpdatedAt = apollo.StatusRunning, 1, ts-5000, ts-5000
	t2 := t1
	t2.Status, t2.Sequence, t2.FinishedAt, t2.CostMs, t2.UpdatedAt = apollo.StatusSuccess, 2, ts, 5000, ts
	rec := func(t apollo.Task) apollo.Record {
		return apollo.Record{Event: apollo.Event{TaskID: t.TaskID, Name: job, Tenant: tenant, Sequence: t.Sequence, Status: t.Status, Ts: t.UpdatedAt}}
	}
	return []apollo.Change{{Record: rec(t1), Prev: apollo.BeforeOf(&t0), Task: t1}, {Record: rec(t2), Prev: apollo.BeforeOf(&t1), Task: t2}}
}

// checkSame fails unless st answers as want (an Aggregator, or a store
// known to be right) for the tenant: Tables over windows reaching into
// the rollups, and a Series per job.
func checkSame(t testing.TB, want, st metrics.Store, tenant string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, w := range []struct{ window, offset time.Duration }{
		{time.Minute, 0}, {5 * time.Minute, 0}, {5 * time.Minute, 5 * time.Minute}, {time.Hour, 0}, {4 * time.Hour, 0}, {24 * time.Hour, 0},
	} {
		q := metrics.Query{Tenant: tenant, Window: w.window, Offset: w.offset, Now: now}
		a, err := want.Table(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := st.Table(ctx, q)
		if err != nil {
			t.Fatalf("Table(%v, offset %v): %v", w.window, w.offset, err)
		}
		if diff := tableDiff(a, b); diff != "" {
			t.Fatalf("Table(%v, offset %v) differs: %s", w.window, w.offset, diff)
		}
	}
	for _, name := range jobNames {
		a, err := want.Series(ctx, tenant, name, 4*time.Hour, 5*time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		b, err := st.Series(ctx, tenant, name, 4*time.Hour, 5*time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a, b) {
			t.Fatalf("Series(%q) differs:\nwant %+v\n got %+v", name, a, b)
		}
	}
}

// tableDiff compares two tables row by row; a job missing from one side
// must have an all-zero row on the other.
func tableDiff(a, b *metrics.Table) string {
	rows := func(tb *metrics.Table) map[string]apollo.Summary {
		m := map[string]apollo.Summary{}
		for i, n := range tb.Names {
			if tb.Rows[i] != (apollo.Summary{Window: tb.Window}) {
				m[n] = tb.Rows[i]
			}
		}
		return m
	}
	ra, rb := rows(a), rows(b)
	for n, x := range ra {
		if y := rb[n]; x != y {
			return fmt.Sprintf("job %q:\nwant %+v\n got %+v", n, x, y)
		}
	}
	for n, y := range rb {
		if _, ok := ra[n]; !ok {
			return fmt.Sprintf("job %q: want nothing, got %+v", n, y)
		}
	}
	if len(ra) == 0 {
		return "no job has data: the test proves nothing"
	}
	return ""
}

// dump returns every hash under prefix, field by field, and the members of
// every sorted set: what a flush writes, without expiries.
func dump(t testing.TB, c redis.UniversalClient, prefix string) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]map[string]string{}
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		switch typ := c.Type(ctx, key).Val(); typ {
		case "hash":
			out[key] = c.HGetAll(ctx, key).Val()
		case "zset":
			m := map[string]string{}
			for _, z := range c.ZRangeWithScores(ctx, key, 0, -1).Val() {
				m[fmt.Sprint(z.Member)] = fmt.Sprint(z.Score)
			}
			out[key] = m
		default:
			t.Fatalf("key %q is a %s", key, typ)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// LockedLog is a log that a test reads while the code under test writes
// it from its own goroutines (a subscription, a renewal loop); the tests
// outside the package use it too.
type LockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
