package alert

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rules"
)

var benchNow = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

const (
	benchNames = 100_000
	benchRules = 10_000
)

func benchJob(i int) string { return fmt.Sprintf("job_%03d_%05d", i%997, i) }

// benchStore is an Aggregator holding 100 000 jobs, each with one run a
// minute over the last 10 minutes; one job in 20 fails, and their
// costs vary, so rules see a realistic mix.
var benchStore = sync.OnceValue(func() *metrics.Aggregator {
	clock := apollo.NewFakeClock(benchNow)
	a, err := metrics.New(metrics.Options{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	now := benchNow.UnixMilli()
	for m := 10; m > 0; m-- {
		for i := range benchNames {
			ts := now - int64(m)*60_000 + int64(i%6)*10_000
			name := benchJob(i)
			st := apollo.StatusSuccess
			if i%20 == 0 {
				st = apollo.StatusFailed
			}
			run := apollo.Task{TaskID: fmt.Sprint(name, "#", m), Name: name, Status: apollo.StatusRunning, StartedAt: ts}
			done := run
			done.Status, done.FinishedAt, done.CostMs = st, ts+int64(1000+i%5000), int64(1000+i%5000)
			pend := run
			pend.Status = apollo.StatusPending
			a.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: run.TaskID, Status: apollo.StatusRunning, Ts: ts}}, Prev: apollo.BeforeOf(&pend), Task: run})
			a.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: run.TaskID, Status: st, Ts: done.FinishedAt}}, Prev: apollo.BeforeOf(&run), Task: done})
		}
	}
	return a
})

// benchRuleText is 10 000 rate rules over the jobs: prefixes from every
// job down to one job, windows of 1m, 5m and 1h, one in ten with
// pct_change on 5m, one in twenty-five BY: name over some 100 jobs.
func benchRuleText(oneWindow bool) string {
	var b strings.Builder
	windows := []string{"1m", "5m", "1h"}
	if oneWindow {
		windows = []string{"5m"}
	}
	conds := []string{
		"failed_rate > 10%", "count == 0", "avg_cost > 4s and count >= 5",
		"max_cost > 5s or timeout > 0", "throughput < 0.5", "success_rate < 90%",
	}
	for i := range benchRules {
		w, cond := windows[i%len(windows)], conds[i%len(conds)]
		prefix := benchJob(i * 7)[:4+i%9]
		by := ""
		switch {
		case i%10 == 0 && !oneWindow:
			w, cond = "5m", "pct_change(avg_cost) > 50%"
		case i%25 == 1:
			prefix, by = benchJob(i)[:8], " BY: name" // job_NNN_: about 100 jobs
		}
		fmt.Fprintf(&b, "RULE r%d task_prefix: %q WINDOW: %s THRESHOLD: %s%s NOTIFY: ops\n", i, prefix, w, cond, by)
	}
	return b.String()
}

// frozen answers every query with a table read once, so that a cycle over
// it measures the engine's own work: Range, Sum, Eval and the state.
type frozen map[windowKey]*metrics.Table

func (f frozen) Table(_ context.Context, q metrics.Query) (*metrics.Table, error) {
	return f[windowKey{q.Window, q.Offset}], nil
}

type discard struct{}

func (discard) Send(apollo.Notification) {}

func benchEngine(b *testing.B, oneWindow bool) *Engine {
	b.Helper()
	rs, err := rules.Parse("bench.rules", []byte(benchRuleText(oneWindow)))
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Rules: rs, Store: benchStore(), Sender: discard{}, Clock: apollo.NewFakeClock(benchNow),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkEvaluate: one evaluation cycle of 10 000 rules over 100 000
// job names, next to what the cycle cannot avoid (reading its four
// tables, one at a time and in one pass as the cycle does), to the same cycle searching every prefix again, to a cycle
// whose rules all use one window (one table), and to the engine's own
// part (rules-only: the tables read once, beforehand).
func BenchmarkEvaluate(b *testing.B) {
	ctx := context.Background()
	e := benchEngine(b, false)
	set := e.sets.get("")
	b.Logf("%d rate rules, %d tables per cycle", len(set.rate), len(set.windows))
	b.Run("tables-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, w := range set.windows {
				if _, err := benchStore().Table(ctx, metrics.Query{Window: w.window, Offset: w.offset, Now: benchNow}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
	})
	b.Run("tables-one-pass", func(b *testing.B) {
		qs := make([]metrics.Query, len(set.windows))
		for i, w := range set.windows {
			qs[i] = metrics.Query{Window: w.window, Offset: w.offset, Now: benchNow}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchStore().Tables(ctx, qs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
	})
	tables := frozen{}
	for _, w := range set.windows {
		tb, err := benchStore().Table(ctx, metrics.Query{Window: w.window, Offset: w.offset, Now: benchNow})
		if err != nil {
			b.Fatal(err)
		}
		tables[w] = tb
	}
	for _, bc := range []struct {
		name                       string
		noCache, oneWindow, frozen bool
	}{
		{"cycle", false, false, false}, {"cycle-no-range-cache", true, false, false}, {"cycle-one-window", false, true, false},
		{"rules-only", false, false, true}, {"rules-only-no-range-cache", true, false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := benchEngine(b, bc.oneWindow)
			e.noRangeCache = bc.noCache
			if bc.frozen {
				e.opts.Store = tables
			}
			if err := e.Evaluate(ctx, benchNow); err != nil { // alerts open, caches warm: the steady state
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Evaluate(ctx, benchNow); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
			st := e.Stats()
			b.ReportMetric(float64(st.Alerts[apollo.AlertFiring]), "firing")
		})
	}
}
