package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

func newTestAggregator(t *testing.T, opts Options) (*Aggregator, *apollo.FakeClock) {
	t.Helper()
	clock := apollo.NewFakeClock(t0)
	opts.Clock = clock
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, clock
}

func change(tenant, name string, from, to apollo.Status, ts int64) *apollo.Change {
	c := &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: name + "-1", Name: name, Tenant: tenant, Status: to, Ts: ts}},
		Prev:   apollo.Before{Name: name, Status: from},
		Task:   apollo.Task{TaskID: name + "-1", Name: name, Tenant: tenant, Status: to},
	}
	if to.Final() {
		c.Task.FinishedAt, c.Task.CostMs = ts, 1500
	}
	return c
}

// The search must agree with a linear scan for every key around every
// entry, whichever of its two paths it takes.
func TestLevelSearch(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	for n := range 3 * tailScan {
		var l level
		key := int64(0)
		for range n {
			key += bucketMs * (1 + rng.Int64N(3))
			l.keys = append(l.keys, key)
		}
		for k := int64(-bucketMs); k <= key+2*bucketMs; k += bucketMs / 2 {
			want := 0
			for want < n && l.keys[want] < k {
				want++
			}
			if got := l.search(k); got != want {
				t.Fatalf("%d entries, key %d: search %d, want %d", n, k, got, want)
			}
		}
	}
}

// Out-of-order writes keep the cumulative sums right, and fold keeps the
// sums of what it drops.
func TestLevelAddAndFold(t *testing.T) {
	t.Parallel()
	var l level
	one := vec{fCount: 1, fBacklog: 1}
	for _, k := range []int64{50, 10, 30, 10, 70, 30} {
		l.add(k*1000, &one, 0)
	}
	sum := func(lo, hi int64) int64 {
		s, _ := l.before(lo * 1000)
		e, _ := l.before(hi * 1000)
		return e[fCount] - s[fCount]
	}
	if got := sum(0, 100); got != 6 {
		t.Errorf("everything: %d, want 6", got)
	}
	if got := sum(20, 60); got != 3 {
		t.Errorf("[20s, 60s): %d, want 3", got)
	}
	if n := l.fold(40_000); n != 2 {
		t.Errorf("fold dropped %d entries, want 2", n)
	}
	if l.base[fBacklog] != 4 {
		t.Errorf("base backlog after fold %d, want 4", l.base[fBacklog])
	}
	if got := sum(0, 100); got != 2 {
		t.Errorf("after fold, everything left: %d, want 2", got)
	}
	if e, _ := l.before(100_000); e[fBacklog] != 6 {
		t.Errorf("gauge after fold %d, want 6", e[fBacklog])
	}
}

// A cost taken out of a bucket leaves no min or max behind once the
// bucket has no cost left.
func TestLevelCostReset(t *testing.T) {
	t.Parallel()
	var l level
	add := vec{fCostN: 1, fCostSum: 70}
	sub := vec{fCostN: -1, fCostSum: -70}
	l.add(10_000, &add, 70)
	if c := l.costs[0]; c != (costPair{70, 70}) {
		t.Fatalf("after add: %+v", c)
	}
	l.add(10_000, &sub, 0)
	if c := l.costs[0]; c != (costPair{}) {
		t.Fatalf("after removal: %+v, want zeros", c)
	}
}

func TestStatsCountDropped(t *testing.T) {
	t.Parallel()
	a, _ := newTestAggregator(t, Options{})
	now := t0.UnixMilli()
	a.Apply(change("", "old", apollo.StatusRunning, apollo.StatusSuccess, now-25*3600_000))
	// A day behind but the oldest accepted minute: counted.
	a.Apply(change("", "edge", apollo.StatusRunning, apollo.StatusSuccess, horizon(now, a.rr)))
	a.Apply(change("", "edge", apollo.StatusRunning, apollo.StatusSuccess, horizon(now, a.rr)-1))
	a.Apply(change("", "new", apollo.StatusNone, apollo.StatusRunning, now+maxSkewMs+1))
	a.Apply(change("", "new", apollo.StatusNone, apollo.StatusRunning, now+maxSkewMs))
	st := a.Stats()
	if st.TooOld != 2 || st.TooNew != 1 {
		t.Errorf("TooOld %d TooNew %d, want 2 and 1", st.TooOld, st.TooNew)
	}
	if st.Names != 3 || st.Buckets == 0 || st.Bytes == 0 {
		t.Errorf("stats %+v: want 3 names with buckets", st)
	}
}

// The loop compacts on the clock: after the retention, buckets and rollups
// are gone, a job with nothing left is forgotten, a job with a pending task
// is kept, and the dropped events are logged once.
func TestCompactionLoop(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	a, clock := newTestAggregator(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a.compacted = make(chan time.Time)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	now := t0.UnixMilli()
	a.Apply(change("", "done", apollo.StatusNone, apollo.StatusRunning, now-2000))
	a.Apply(change("", "done", apollo.StatusRunning, apollo.StatusSuccess, now-1000))
	a.Apply(change("", "waiting", apollo.StatusNone, apollo.StatusPending, now-1000))
	ancient := change("", "ancient", apollo.StatusPending, apollo.StatusPending, now-48*3600_000)
	ancient.Record.Kind = apollo.KindMissedStart
	a.Apply(ancient)
	if st := a.Stats(); st.Names != 2 || st.Buckets != 2 || st.Rollups != 2 || st.TooOld != 1 {
		t.Fatalf("before: %+v", st)
	}
	if !clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the compaction ticker was never armed")
	}
	clock.Advance(90 * time.Minute)
	waitCompaction(t, a, clock.Now())
	if st := a.Stats(); st.Names != 2 || st.Buckets != 0 || st.Rollups != 2 {
		t.Errorf("after 90m: %+v; want buckets gone, rollups kept", st)
	}
	clock.Advance(24 * time.Hour)
	waitCompaction(t, a, clock.Now())
	if st := a.Stats(); st.Names != 1 || st.Buckets != 0 || st.Rollups != 0 {
		t.Errorf("after 25h30m: %+v; want only the job with a pending task", st)
	}
	if tb, _ := a.Table(context.Background(), Query{Window: time.Minute}); len(tb.Names) != 1 || tb.Rows[0].Backlog != 1 {
		t.Errorf("table after compaction: %v %+v", tb.Names, tb.Rows)
	}
	if !strings.Contains(logs.String(), "tooOld=1") {
		t.Errorf("no warning about the dropped event in the log:\n%s", logs.String())
	}
}

// waitCompaction waits for a compaction that ran at or after at: a tick
// armed before the clock last moved may still deliver a compaction at the
// earlier time, which says nothing about the latest move.
func waitCompaction(t *testing.T, a *Aggregator, at time.Time) {
	t.Helper()
	deadline := time.After(testwait.Timeout(t))
	for {
		select {
		case ran := <-a.compacted:
			if !ran.Before(at) {
				return
			}
		case <-deadline:
			t.Fatalf("no compaction at %v or later", at)
		}
	}
}

// A job removed by compaction is recreated by its next change, with
// nothing lost.
func TestWriteAfterRemoval(t *testing.T) {
	t.Parallel()
	a, clock := newTestAggregator(t, Options{})
	a.Apply(change("t", "job", apollo.StatusNone, apollo.StatusRunning, t0.UnixMilli()))
	a.Apply(change("t", "job", apollo.StatusRunning, apollo.StatusSuccess, t0.UnixMilli()))
	clock.Advance(25 * time.Hour)
	a.compact(clock.Now())
	if st := a.Stats(); st.Names != 0 {
		t.Fatalf("job not removed: %+v", st)
	}
	a.Apply(change("t", "job", apollo.StatusNone, apollo.StatusRunning, clock.Now().UnixMilli()))
	if got := a.Rolling("t", "job"); got.Started != 1 || got.Running != 1 {
		t.Errorf("after recreation: %+v", got)
	}
}

// Compaction gives memory back once a job's activity falls.
func TestFoldShrinks(t *testing.T) {
	t.Parallel()
	var l level
	one := vec{fCount: 1}
	for k := range int64(1000) {
		l.add(k*bucketMs, &one, 0)
	}
	l.fold(990 * bucketMs)
	if len(l.keys) != 10 || len(l.cums) != 10 || len(l.costs) != 10 || cap(l.keys) > 40 || cap(l.cums) > 40 || cap(l.costs) > 40 {
		t.Errorf("after fold: len %d/%d/%d cap %d/%d/%d", len(l.keys), len(l.cums), len(l.costs), cap(l.keys), cap(l.cums), cap(l.costs))
	}
}

// A snapshot keeps the compaction horizons: a restored aggregator asked
// about a moment before the last compaction reads the rollups, as the
// original does, instead of the folded-away buckets.
func TestSnapshotAfterCompaction(t *testing.T) {
	t.Parallel()
	a, clock := newTestAggregator(t, Options{})
	start := clock.Now()
	for i := range int64(200) {
		ts := start.UnixMilli() + i*17_000
		a.Apply(change("", "job", apollo.StatusNone, apollo.StatusRunning, ts))
		a.Apply(change("", "job", apollo.StatusRunning, apollo.StatusSuccess, ts+5000))
		clock.Set(time.UnixMilli(ts + 5000))
	}
	clock.Advance(2 * time.Hour)
	a.compact(clock.Now())
	var buf bytes.Buffer
	if err := a.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b, _ := New(Options{Clock: clock})
	if err := b.ReadSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if b.compacted0.Load() != a.compacted0.Load() || b.compacted1.Load() != a.compacted1.Load() {
		t.Fatalf("horizons %d/%d, want %d/%d", b.compacted0.Load(), b.compacted1.Load(), a.compacted0.Load(), a.compacted1.Load())
	}
	past := start.Add(50 * time.Minute) // a query from before the compaction
	// Windows of a minute or more: shorter ones in the rollups are a whole
	// minute or nothing, depending on where their bounds fall.
	for _, w := range []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute} {
		q := Query{Window: w, Now: past}
		ta, _ := a.Table(context.Background(), q)
		tb, _ := b.Table(context.Background(), q)
		if len(ta.Rows) != 1 || len(tb.Rows) != 1 || ta.Rows[0] != tb.Rows[0] || ta.Rows[0].Count == 0 {
			t.Errorf("%v window at %v: %+v and %+v; want the same, non-zero", w, past, ta.Rows, tb.Rows)
		}
	}
}

// A clock near 1970 makes keys below zero; the snapshot keeps them.
func TestSnapshotNegativeKeys(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.UnixMilli(30_000))
	a, _ := New(Options{Clock: clock})
	a.Apply(change("", "job", apollo.StatusNone, apollo.StatusPending, -5*3600_000)) // clamped, not dropped
	a.Apply(change("", "job", apollo.StatusPending, apollo.StatusRunning, 20_000))
	if a.lookup("", "job").l1.keys[0] >= 0 {
		t.Fatal("the test needs a key below zero")
	}
	var buf bytes.Buffer
	if err := a.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b, _ := New(Options{Clock: clock})
	if err := b.ReadSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Rolling("", "job"), a.Rolling("", "job"); got != want || got.Running != 1 {
		t.Errorf("restored Rolling %+v, want %+v", got, want)
	}
}
