package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// Redis that restarts without persistence (or is flushed, or fails over
// to a replica that had nothing) comes back empty while the bus runs. The
// flusher notices at its next flush, whether a job changed meanwhile or
// not, and copies every job of every tenant again: the alert processes'
// rate rules read the same windows as before, not an empty table until
// the bus restarts.
func TestRedisEmptiedIsRefilled(t *testing.T) {
	t.Parallel()
	for _, busy := range []bool{true, false} {
		t.Run(map[bool]string{true: "a job changed meanwhile", false: "idle"}[busy], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			now := f.clock.Now()
			for _, tenant := range []string{"acme", "globex"} {
				cs := workload(7, tenant, 1500, now)
				for i := range cs {
					f.fl.Apply(&cs[i])
				}
			}
			f.flush(t)
			checkSame(t, f.agg, f.st, "acme", now)
			checkSame(t, f.agg, f.st, "globex", now)
			before := f.fl.Stats()

			if err := redistest.Delete(context.Background(), f.opts.Client, f.opts.Prefix); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(time.Second)
			now = f.clock.Now()
			if busy {
				cs := finishedRun("acme", "batch_a", now.UnixMilli())
				for i := range cs {
					f.fl.Apply(&cs[i])
				}
			}
			f.flush(t)
			checkSame(t, f.agg, f.st, "acme", now)
			checkSame(t, f.agg, f.st, "globex", now)
			if st := f.fl.Stats(); st.Refills != before.Refills+1 {
				t.Fatalf("refills %d, want %d: %+v", st.Refills, before.Refills+1, st)
			}
			// Steady again: a flush with nothing changed neither copies
			// everything nor counts a refill.
			f.clock.Advance(time.Second)
			f.flush(t)
			if st := f.fl.Stats(); st.Refills != before.Refills+1 || st.FullCopies != before.FullCopies+1 {
				t.Fatalf("after the refill: %+v (before %+v)", st, before)
			}
		})
	}
}

// Between the loss and the refill, a reader that requires writers (the
// alert processes') refuses to answer rather than answer empty windows,
// so the alert engine keeps its alerts instead of resolving them and
// firing them again a second later. A reader that does not (the API of a
// scale-out node) answers as before.
func TestReaderRefusesWhileRedisIsEmpty(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	strict, err := NewStore(Options{Client: f.opts.Client, Prefix: f.opts.Prefix, Clock: f.clock, RequireWriters: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := metrics.Query{Tenant: "acme", Window: 5 * time.Minute}
	if _, err := strict.Table(ctx, q); apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Fatalf("before any flush: %v, want unavailable", err)
	}
	if _, err := f.st.Table(ctx, q); err != nil {
		t.Fatalf("a lenient reader before any flush: %v", err)
	}
	now := f.clock.Now()
	for _, tenant := range []string{"acme", "globex"} {
		cs := workload(9, tenant, 500, now)
		for i := range cs {
			f.fl.Apply(&cs[i])
		}
	}
	f.flush(t)
	checkSame(t, f.agg, strict, "acme", now)
	checkSame(t, f.agg, strict, "globex", now)

	if err := redistest.Delete(ctx, f.opts.Client, f.opts.Prefix); err != nil {
		t.Fatal(err)
	}
	_, err = strict.Table(ctx, q)
	if apollo.ErrorCode(err) != apollo.EUNAVAILABLE || !strings.Contains(err.Error(), "no bus") {
		t.Fatalf("after the loss: %v, want unavailable saying no bus wrote", err)
	}
	if _, err := strict.Series(ctx, "globex", "batch_a", time.Hour, time.Minute, now); apollo.ErrorCode(err) != apollo.EUNAVAILABLE {
		t.Fatalf("a series after the loss: %v, want unavailable", err)
	}
	f.clock.Advance(time.Second)
	f.flush(t)
	checkSame(t, f.agg, strict, "acme", f.clock.Now())
	checkSame(t, f.agg, strict, "globex", f.clock.Now())
}
