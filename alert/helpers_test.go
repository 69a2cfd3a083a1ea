package alert_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/alert/alerttest"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rules"
)

var (
	t0    = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
	bg    = context.Background()
)

func parse(t testing.TB, src string) []*rules.Rule {
	t.Helper()
	rs, err := rules.Parse("test.rules", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// table is a scripted metrics store: the test says what every job did
// over the current window and the one before. Lifecycle tests use it to
// flip a condition on one evaluation, which real 10-second buckets make
// awkward.
type table struct {
	mu        sync.Mutex
	cur, prev map[string]apollo.Summary
	fail      error
}

func newTable() *table {
	return &table{cur: map[string]apollo.Summary{}, prev: map[string]apollo.Summary{}}
}

func (s *table) set(name string, sum apollo.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur[name] = sum
}

func (s *table) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cur, name)
}

func (s *table) Table(ctx context.Context, q metrics.Query) (*metrics.Table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	src := s.cur
	if q.Offset > 0 {
		src = s.prev
	}
	names := make([]string, 0, len(src))
	for n := range src {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := make([]apollo.Summary, len(names))
	for i, n := range names {
		rows[i] = src[n]
		rows[i].Window = q.Window
	}
	return &metrics.Table{Names: names, Rows: rows, Window: q.Window}, nil
}

// failing is a window where failed of count runs failed.
func failing(failed, count int64) apollo.Summary {
	return apollo.Summary{Count: count, Failed: failed, Success: count - failed}
}

// fixture is an engine on a fake clock with a scripted or real store.
type fixture struct {
	t     *testing.T
	clock *apollo.FakeClock
	store alert.MetricsReader
	sink  *alerttest.Sink
	eng   *alert.Engine
}

func newFixture(t *testing.T, src string, store alert.MetricsReader, mod func(*alert.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: apollo.NewFakeClock(t0), store: store, sink: alerttest.NewSink(100_000)}
	opts := alert.Options{Rules: parse(t, src), Store: store, Sender: f.sink, Clock: f.clock, Logger: quiet}
	if mod != nil {
		mod(&opts)
	}
	e, err := alert.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.eng = e
	t.Cleanup(func() { e.Stop(context.Background()) })
	return f
}

// eval moves the clock by d and runs one cycle.
func (f *fixture) eval(d time.Duration) {
	f.t.Helper()
	f.clock.Advance(d)
	if err := f.eng.Evaluate(bg, f.clock.Now()); err != nil {
		f.t.Fatal(err)
	}
}

// sent returns the notifications sent since the last call.
func (f *fixture) sent() []apollo.Notification {
	var out []apollo.Notification
	for {
		select {
		case n := <-f.sink.C:
			out = append(out, n)
		default:
			return out
		}
	}
}

func kinds(ns []apollo.Notification) []apollo.NotificationKind {
	out := make([]apollo.NotificationKind, len(ns))
	for i, n := range ns {
		out[i] = n.Kind
	}
	return out
}

func (f *fixture) expectSent(want ...apollo.NotificationKind) []apollo.Notification {
	f.t.Helper()
	got := f.sent()
	if !slices.Equal(kinds(got), want) {
		f.t.Fatalf("at +%v sent %v, want %v", f.clock.Now().Sub(t0), kinds(got), want)
	}
	return got
}

// only returns the one alert of the tenant in state, failing otherwise.
func (f *fixture) only(tenant string, state apollo.AlertState) apollo.Alert {
	f.t.Helper()
	as := f.eng.Alerts(tenant, state)
	if len(as) != 1 {
		f.t.Fatalf("at +%v: %d %q alerts, want 1: %+v", f.clock.Now().Sub(t0), len(as), state, as)
	}
	return as[0]
}

func (f *fixture) none(tenant string, state apollo.AlertState) {
	f.t.Helper()
	if as := f.eng.Alerts(tenant, state); len(as) != 0 {
		f.t.Fatalf("at +%v: %d %q alerts, want none: %+v", f.clock.Now().Sub(t0), len(as), state, as)
	}
}

// newAggregator is a real metrics store on clock.
func newAggregator(t testing.TB, clock apollo.Clock) *metrics.Aggregator {
	t.Helper()
	a, err := metrics.New(metrics.Options{Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// finish records one run of job that ended in st at ts after costMs.
func finish(a *metrics.Aggregator, tenant, job, id string, st apollo.Status, ts, costMs int64) apollo.Change {
	prev := apollo.Task{TaskID: id, Name: job, Tenant: tenant, Status: apollo.StatusRunning, StartedAt: ts - costMs}
	next := prev
	next.Status, next.FinishedAt, next.CostMs, next.UpdatedAt = st, ts, costMs, ts
	c := apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: job, Tenant: tenant, Status: st, Ts: ts, Sequence: 2}},
		Prev: apollo.BeforeOf(&prev), Task: next}
	if a != nil {
		a.Apply(&c)
	}
	return c
}

func alerttestSink() *alerttest.Sink { return alerttest.NewSink(10) }
