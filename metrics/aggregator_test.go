package metrics_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/metrics/metricstest"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  metrics.Options
		field string
	}{
		{"bucket retention not a multiple of 10s", metrics.Options{BucketRetention: time.Hour + time.Second}, "metrics.BucketRetention"},
		{"bucket retention under a minute", metrics.Options{BucketRetention: 50 * time.Second}, "metrics.BucketRetention"},
		{"rollups shorter than buckets", metrics.Options{BucketRetention: 2 * time.Hour, RollupRetention: time.Hour}, "metrics.RollupRetention"},
		{"rollups not whole minutes", metrics.Options{RollupRetention: 24*time.Hour + 30*time.Second}, "metrics.RollupRetention"},
		{"compaction too often", metrics.Options{CompactEvery: time.Millisecond}, "metrics.CompactEvery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := metrics.New(tc.opts)
			var ae *apollo.Error
			if !errors.As(err, &ae) || ae.Code != apollo.EINVALID || ae.Field != tc.field || ae.Hint == "" {
				t.Errorf("New: %v; want an invalid error on %s with a hint", err, tc.field)
			}
		})
	}
	if _, err := metrics.New(metrics.Options{}); err != nil {
		t.Errorf("zero Options: %v", err)
	}
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(0, 0))
	a, err := metrics.New(metrics.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	a.Stop(context.Background()) // before Start: nothing to do
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err == nil {
		t.Error("second Start: no error")
	}
	if !clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no ticker armed")
	}
	cancel() // the loop ends on its own; Stop still waits and returns
	a.Stop(context.Background())
	a.Stop(context.Background())
	if n := clock.Waiters(); n != 0 {
		t.Errorf("%d timers left armed after Stop", n)
	}
}

// Rolling is the last minute, the same as a 1m Table row, as time moves.
func TestRolling(t *testing.T) {
	t.Parallel()
	a, clock := newStarted(t)
	changes := metricstest.Workload(1, "t", []string{"a", "b"}, 300, clock.Now(), 10*time.Minute, false)
	for i := range changes {
		a.Apply(&changes[i])
	}
	busy := 0
	for range 8 {
		tb, err := a.Table(context.Background(), metrics.Query{Tenant: "t", Window: time.Minute, Now: clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range tb.Names {
			if tb.Rows[i].Count > 0 {
				busy++
			}
			if got := a.Rolling("t", name); got != tb.Rows[i] {
				t.Errorf("at %v Rolling(%q) = %+v, Table says %+v", clock.Now(), name, got, tb.Rows[i])
			}
		}
		clock.Advance(17 * time.Second)
	}
	if busy < 4 {
		t.Errorf("only %d of the compared minutes had finished runs; the workload is too thin to test", busy)
	}
	if got := a.Rolling("t", "nobody"); got != (apollo.Summary{Window: time.Minute}) {
		t.Errorf("Rolling of an unknown job: %+v", got)
	}
}

// Applying to an existing job and bucket allocates nothing.
func TestApplyDoesNotAllocate(t *testing.T) {
	a, clock := newStarted(t)
	ts := clock.Now().UnixMilli()
	start := &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: "x", Status: apollo.StatusRunning, Ts: ts}},
		Prev:   apollo.Before{Name: "job", Status: apollo.StatusPending},
		Task:   apollo.Task{TaskID: "x", Name: "job", Status: apollo.StatusRunning, StartedAt: ts},
	}
	done := &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: "x", Status: apollo.StatusSuccess, Ts: ts}},
		Prev:   apollo.BeforeOf(&start.Task),
		Task:   apollo.Task{TaskID: "x", Name: "job", Status: apollo.StatusSuccess, FinishedAt: ts, CostMs: 40},
	}
	a.Apply(start)
	a.Apply(done)
	if n := testing.AllocsPerRun(1000, func() { a.Apply(start); a.Apply(done) }); n != 0 {
		t.Errorf("Apply allocates %.1f times per change pair", n)
	}
}

func TestPlanChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := now.UnixMilli()
	c := &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: "x", Status: apollo.StatusSuccess, Ts: ms - 9_999}},
		Prev:   apollo.Before{Name: "job", Status: apollo.StatusRunning},
		Task:   apollo.Task{TaskID: "x", Name: "job", Tenant: "t", Status: apollo.StatusSuccess, FinishedAt: ms - 9_999, CostMs: 250},
	}
	p := metrics.PlanChange(c, now, 24*time.Hour)
	want := []metrics.Part{{Tenant: "t", Name: "job", Bucket: ms - 10_000, Cost: 250,
		Delta: apollo.Summary{Count: 1, Success: 1, CostSum: 250, CostN: 1, Running: -1}}}
	if got := p.Parts(); !slices.Equal(got, want) || p.TooOld || p.TooNew {
		t.Errorf("Parts = %+v (old %v new %v), want %+v", got, p.TooOld, p.TooNew, want)
	}
	// Renamed while running: the gauge moves from one job to the other.
	r := &apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: "x", Status: apollo.StatusRunning, Ts: ms}},
		Prev:   apollo.Before{Name: "old", Status: apollo.StatusRunning},
		Task:   apollo.Task{TaskID: "x", Name: "new", Status: apollo.StatusRunning},
	}
	p = metrics.PlanChange(r, now, 24*time.Hour)
	want = []metrics.Part{
		{Name: "new", Bucket: ms, Delta: apollo.Summary{Running: 1}},
		{Name: "old", Bucket: ms, Delta: apollo.Summary{Running: -1}},
	}
	if got := p.Parts(); !slices.Equal(got, want) {
		t.Errorf("renamed: Parts = %+v, want %+v", got, want)
	}
	c.Record.Ts = ms + 61_000
	c.Task.FinishedAt = c.Record.Ts
	p = metrics.PlanChange(c, now, 24*time.Hour)
	want = []metrics.Part{{Tenant: "t", Name: "job", Bucket: ms + 60_000, Delta: apollo.Summary{Running: -1}}}
	if got := p.Parts(); !slices.Equal(got, want) || !p.TooNew {
		t.Errorf("too new: Parts = %+v (new %v), want the gauge only, clamped: %+v", got, p.TooNew, want)
	}
}

func TestSummaryRates(t *testing.T) {
	t.Parallel()
	s := apollo.Summary{Count: 8, Success: 5, Failed: 2, Timeout: 1, Started: 6, Missed: 2, Late: 2, CostSum: 900, CostN: 3, Window: 2 * time.Minute}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"failed", s.FailedRate(), 0.25},
		{"timeout", s.TimeoutRate(), 0.125},
		{"success", s.SuccessRate(), 0.625},
		{"late", s.LateRate(), 0.25},
		{"avg cost", s.AvgCost(), 300},
		{"throughput", s.Throughput(), 4},
		{"empty failed", apollo.Summary{}.FailedRate(), 0},
		{"empty late", apollo.Summary{}.LateRate(), 0},
		{"empty avg", apollo.Summary{}.AvgCost(), 0},
		{"no window", apollo.Summary{Count: 3}.Throughput(), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// A Table built by another Store answers Range and Sum like a brute-force
// scan.
func TestTableRangeSum(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	words := []string{"batch", "batch_", "batch_a", "batch_b", "etl", "etl.x", "é", "z"}
	names := map[string]bool{}
	for len(names) < 300 {
		names[words[rng.IntN(len(words))]+string(rune('a'+rng.IntN(26)))+string(rune('a'+rng.IntN(3)))] = true
	}
	tb := &metrics.Table{Window: time.Minute}
	for n := range names {
		tb.Names = append(tb.Names, n)
	}
	slices.Sort(tb.Names)
	for range tb.Names {
		r := apollo.Summary{Count: rng.Int64N(5), Failed: rng.Int64N(3), Backlog: rng.Int64N(4) - 1}
		if rng.IntN(3) > 0 {
			r.CostN = 1 + rng.Int64N(3)
			r.CostMin = 1 + rng.Int64N(1000)
			r.CostMax = r.CostMin + rng.Int64N(1000)
		}
		tb.Rows = append(tb.Rows, r)
	}
	for _, prefix := range append(words, "", "batch_aa", "batch_z", "zz", "{", "a") {
		lo, hi := tb.Range(prefix)
		want := apollo.Summary{Window: time.Minute}
		for i, n := range tb.Names {
			if in := strings.HasPrefix(n, prefix); in != (i >= lo && i < hi) {
				t.Fatalf("Range(%q) = [%d, %d) misplaces %q at %d", prefix, lo, hi, n, i)
			}
			if strings.HasPrefix(n, prefix) {
				want.Add(tb.Rows[i])
			}
		}
		if got := tb.Sum(lo, hi); got != want {
			t.Errorf("Sum(Range(%q)) = %+v, want %+v", prefix, got, want)
		}
	}
	for range 500 {
		lo := rng.IntN(len(tb.Rows) + 1)
		hi := lo + rng.IntN(len(tb.Rows)-lo+1)
		want := apollo.Summary{Window: time.Minute}
		for _, r := range tb.Rows[lo:hi] {
			want.Add(r)
		}
		if got := tb.Sum(lo, hi); got != want {
			t.Fatalf("Sum(%d, %d) = %+v, want %+v", lo, hi, got, want)
		}
	}
}

// A canceled context stops a Table early.
func TestTableCanceled(t *testing.T) {
	t.Parallel()
	a, clock := newStarted(t)
	changes := metricstest.Workload(2, "t", []string{"a"}, 10, clock.Now(), time.Minute, false)
	for i := range changes {
		a.Apply(&changes[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Table(ctx, metrics.Query{Tenant: "t", Window: time.Minute}); !errors.Is(err, context.Canceled) {
		t.Errorf("Table with a canceled context: %v", err)
	}
	if _, err := a.Series(ctx, "t", "a", time.Minute, 10*time.Second, time.Time{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Series with a canceled context: %v", err)
	}
}
