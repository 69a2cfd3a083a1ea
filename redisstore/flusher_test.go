package redisstore

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// copyAll makes the next flush copy every job, as the first one after
// Start does.
func copyAll(t testing.TB, f *Flusher) {
	t.Helper()
	f.dirty.overflow.Store(true)
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A flush writes absolute values: flushing again, copying everything
// again, a new flusher after a restart, and a fresh aggregator restored
// from a snapshot with the rest of the log replayed into it all leave
// Redis exactly as it was; nothing is counted twice.
func TestFlushIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	now := f.clock.Now()
	cs := workload(1, "acme", 3000, now)
	half := len(cs) / 2
	for i := range cs[:half] {
		f.fl.Apply(&cs[i])
	}
	var snap bytes.Buffer
	if err := f.agg.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	for i := range cs[half:] {
		f.fl.Apply(&cs[half+i])
	}
	f.flush(t)
	c := f.opts.Client
	want := dump(t, c, f.opts.Prefix)
	checkSame(t, f.agg, f.st, "acme", now)
	same := func(what string) {
		t.Helper()
		if got := dump(t, c, f.opts.Prefix); !maps.EqualFunc(got, want, maps.Equal) {
			t.Fatalf("%s changed what Redis holds", what)
		}
		checkSame(t, f.agg, f.st, "acme", now)
	}

	f.flush(t)
	same("a second flush")
	copyAll(t, f.fl)
	same("copying every job again")

	restarted, err := NewFlusher(f.agg, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	copyAll(t, restarted)
	same("a restarted flusher's first flush")

	agg2, err := metrics.New(metrics.Options{Clock: f.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := agg2.ReadSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	replayed, err := NewFlusher(agg2, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cs[half:] {
		replayed.Apply(&cs[half+i])
	}
	copyAll(t, replayed)
	same("replaying the log after the snapshot")
}

// Two writers (two bus nodes, each with its share of the tasks) flush
// their parts of the same jobs; the reader sums them into what one
// aggregator that saw every change would answer.
func TestTwoWritersAreSummed(t *testing.T) {
	t.Parallel()
	f1 := newFixture(t, func(o *Options) { o.Writer = "bus-1" })
	o2 := f1.opts
	o2.Writer = "bus-2"
	f2 := newFixtureOn(t, f1.clock, o2)
	all, err := metrics.New(metrics.Options{Clock: f1.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	now := f1.clock.Now()
	// Without corrections: a correction that takes a cost out of one
	// writer's bucket may leave the whole's min and max wider than the
	// parts' (metricstest allows either), and this test compares exactly.
	cs := metricstest.Workload(2, "", jobNames, 3000, now, 3*time.Hour, false)
	for i := range cs {
		c := &cs[i]
		all.Apply(c)
		if c.Task.TaskID[len(c.Task.TaskID)-1]%2 == 0 { // tasks are split, jobs are shared
			f1.fl.Apply(c)
		} else {
			f2.fl.Apply(c)
		}
	}
	f1.flush(t)
	f2.flush(t)
	checkSame(t, all, f1.st, "", now)
	// Each writer alone is only its part.
	one, err := metrics.New(metrics.Options{Clock: f1.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if d := tableDiff(mustTable(t, all, now), mustTable(t, one, now)); d == "" {
		t.Fatal("an empty aggregator answers like the whole: the comparison is blind")
	}
	fields, err := f1.opts.Client.HKeys(context.Background(), f1.fl.keys.window("", "batch_a")).Result()
	if err != nil {
		t.Fatal(err)
	}
	var w1, w2 bool
	for _, fl := range fields {
		w1 = w1 || strings.HasSuffix(fl, "@bus-1")
		w2 = w2 || strings.HasSuffix(fl, "@bus-2")
	}
	if !w1 || !w2 {
		t.Fatalf("the job's key holds fields %v; want both writers'", fields)
	}
}

func mustTable(t testing.TB, st metrics.Store, now time.Time) *metrics.Table {
	t.Helper()
	tb, err := st.Table(context.Background(), metrics.Query{Window: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// Every key the flusher and the locker write expires, also after
// maintenance has trimmed the jobs' keys; and one writer's fields carry
// no writer suffix.
func TestEveryKeyHasATTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	now := f.clock.Now()
	for _, tenant := range []string{"", "acme", "we:ird{t}"} {
		for _, c := range workload(3, tenant, 500, now) {
			f.fl.Apply(&c)
		}
	}
	f.flush(t)
	if ok, err := NewLocker(f.opts.Client, f.opts.Prefix+":").Acquire(ctx, "apollo:alert:dedup:x", time.Minute); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	check := func(when string) {
		t.Helper()
		keys, err := redistest.Keys(ctx, f.opts.Client, f.opts.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) < 3*len(jobNames) {
			t.Fatalf("%s: only %d keys: %v", when, len(keys), keys)
		}
		for _, k := range keys {
			if ttl := f.opts.Client.PTTL(ctx, k).Val(); ttl <= 0 {
				t.Errorf("%s: key %q has no expiry (PTTL %v)", when, k, ttl)
			}
		}
	}
	check("after the first flush")
	fields := f.opts.Client.HKeys(ctx, f.fl.keys.window("acme", "batch_a")).Val()
	for _, fl := range fields {
		if strings.Contains(fl, "@") {
			t.Fatalf("the only writer wrote field %q", fl)
		}
	}
	f.clock.Advance(DefaultMaintainEvery + time.Minute)
	f.flush(t)
	check("after maintenance")
}

// Maintenance deletes fields that left the retention (buckets after an
// hour, rollups after a day) and keeps the answers; a job with nothing
// left is forgotten and its key left to expire, while one with a task
// still running is kept.
func TestMaintenanceTrims(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	now := f.clock.Now()
	for _, c := range append(workload(4, "", 2000, now), finishedRun("", "done", now.UnixMilli()-60_000)...) {
		f.fl.Apply(&c)
	}
	f.flush(t)
	key := f.fl.keys.window("", "batch_a")
	// count returns how many blocks of kind end at or before before.
	count := func(kind byte, before int64) (n int) {
		for _, fl := range f.opts.Client.HKeys(ctx, key).Val() {
			if k, start, _, ok := parseField(fl); ok && k == kind && start+span(kind) <= before {
				n++
			}
		}
		return n
	}
	cut := func(ret time.Duration) int64 {
		return metrics.Horizon(f.clock.Now(), ret) - trimMargin.Milliseconds()
	}
	if count(kindBucket, cut(time.Hour)+2*3600_000) == 0 {
		t.Fatal("no bucket fields were written")
	}
	f.clock.Advance(2 * time.Hour)
	f.flush(t)
	if n := count(kindBucket, cut(time.Hour)); n != 0 {
		t.Errorf("%d bucket fields older than the bucket retention are left", n)
	}
	if count(kindRollup, cut(time.Hour)) == 0 {
		t.Error("the rollups went with the buckets")
	}
	checkSame(t, f.agg, f.st, "", f.clock.Now())

	f.clock.Advance(25 * time.Hour)
	f.flush(t)
	f.clock.Advance(DefaultMaintainEvery)
	f.flush(t)
	if n := count(kindRollup, cut(24*time.Hour)); n != 0 {
		t.Errorf("%d rollup fields older than the rollup retention are left", n)
	}
	checkSame(t, f.agg, f.st, "", f.clock.Now())
	var running, forgotten int
	for _, name := range append(jobNames, "done") {
		var ex metrics.Export
		f.agg.ExportJob("", name, 0, 0, &ex)
		_, kept := f.fl.jobs[jobRef{"", name}]
		switch {
		case ex.Backlog != 0 || ex.Running != 0:
			running++
			if !kept {
				t.Errorf("job %q has tasks pending or running but was forgotten", name)
			}
		case kept:
			t.Errorf("job %q has nothing left but is still kept", name)
		default:
			forgotten++
		}
	}
	if running == 0 || forgotten == 0 {
		t.Fatalf("%d jobs running, %d forgotten: the workload must make both", running, forgotten)
	}
}

// While Redis cannot be reached the flushes fail and the changes wait;
// after it comes back, the first flush makes Redis equal the aggregator.
// The flusher runs on its timer (a fake clock) and the test waits on its
// flush signal. With a small MaxDirty the outage also overflows the
// dirty set, and the first good flush copies every job.
func TestOutageAndRecovery(t *testing.T) {
	t.Parallel()
	for _, maxDirty := range []int{DefaultMaxDirty, 2} {
		t.Run(map[bool]string{true: "kept", false: "overflowed"}[maxDirty > 2], func(t *testing.T) {
			t.Parallel()
			direct, prefix := redistest.Client(t)
			p := redistest.NewProxy(t, direct.Options().Addr)
			viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr(), DB: direct.Options().DB,
				DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
			t.Cleanup(func() { viaProxy.Close() })
			clock := apollo.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			w := newFixtureOn(t, clock, Options{Client: viaProxy, Prefix: prefix, Clock: clock, Logger: quiet, MaxDirty: maxDirty})
			r := newFixtureOn(t, clock, Options{Client: direct, Prefix: prefix, Clock: clock, Logger: quiet})
			w.fl.flushed = make(chan error)
			if err := w.fl.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.fl.Stop(context.Background()) })
			next := func() error {
				t.Helper()
				clock.Advance(time.Second)
				select {
				case err := <-w.fl.flushed:
					return err
				case <-time.After(testwait.Timeout(t)):
					t.Fatal("no flush after its tick")
					return nil
				}
			}
			if err := <-w.fl.flushed; err != nil { // the first, made at Start
				t.Fatal(err)
			}
			cs := workload(5, "t", 3000, clock.Now())
			third := len(cs) / 3
			for i := range cs[:third] {
				w.fl.Apply(&cs[i])
			}
			if err := next(); err != nil {
				t.Fatal(err)
			}
			checkSame(t, w.agg, r.st, "t", clock.Now())

			p.SetBroken(true)
			for i := range cs[third : 2*third] {
				w.fl.Apply(&cs[third+i])
			}
			if err := next(); err == nil {
				t.Fatal("a flush through a broken proxy succeeded")
			}
			for i := range cs[2*third:] {
				w.fl.Apply(&cs[2*third+i])
			}
			if err := next(); err == nil {
				t.Fatal("a flush through a broken proxy succeeded")
			}
			st := w.fl.Stats()
			if st.Failures < 2 || st.LastError == "" || (st.Dirty == 0 && !st.CopyAll) {
				t.Fatalf("during the outage: %+v", st)
			}
			if maxDirty == 2 && (!st.CopyAll || st.Dirty > 2) {
				t.Fatalf("the dirty set grew past its bound: %+v", st)
			}

			p.SetBroken(false)
			if err := next(); err != nil {
				t.Fatalf("the first flush after the outage: %v", err)
			}
			checkSame(t, w.agg, r.st, "t", clock.Now())
			if st := w.fl.Stats(); st.Dirty != 0 || st.CopyAll {
				t.Fatalf("after recovery: %+v", st)
			}
		})
	}
}

// Stop flushes what is left, and may be called twice.
func TestStopFlushes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.fl.flushed = make(chan error, 1)
	if err := f.fl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-f.fl.flushed; err != nil {
		t.Fatal(err)
	}
	now := f.clock.Now()
	for _, c := range workload(6, "", 500, now) {
		f.fl.Apply(&c)
	}
	f.fl.Stop(context.Background())
	f.fl.Stop(context.Background())
	checkSame(t, f.agg, f.st, "", now)
	if err := f.fl.Start(context.Background()); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	f.fl.Stop(context.Background())
}

// A flush cut short because its caller gave up (Stop cancels the loop's
// flush; the last flush follows) is not a failed flush: it counts no
// failure, keeps its jobs for the next flush, and the next one writes
// them. (bench/cmd/redis saw "1 flushes failed: context canceled" at
// every Stop that met a flush in progress.)
func TestCancelledFlushIsNotAFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	now := f.clock.Now()
	cs := workload(1, "acme", 300, now)
	for i := range cs {
		f.fl.Apply(&cs[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.fl.Flush(ctx); err == nil {
		t.Fatal("a flush with a cancelled context answered nil")
	}
	if st := f.fl.Stats(); st.Failures != 0 || st.LastError != "" {
		t.Fatalf("a cancelled flush counted as failed: %d failures, last error %q", st.Failures, st.LastError)
	}
	f.flush(t)
	checkSame(t, f.agg, f.st, "acme", now)
	if st := f.fl.Stats(); st.Failures != 0 {
		t.Fatalf("%d failures after a good flush", st.Failures)
	}
}
