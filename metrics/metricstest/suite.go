package metricstest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// Harness connects the suite to a store under test. The store must use the
// default retentions (metrics.DefaultBucketRetention and
// DefaultRollupRetention) and take its time from Clock.
type Harness struct {
	// Apply hands one change to the store's writer. The suite calls it from
	// several goroutines at once, one task per goroutine.
	Apply func(c *apollo.Change)
	// Sync makes every applied change visible to Store (redis: flush);
	// nil when writes are visible at once.
	Sync  func() error
	Store metrics.Store
	// Clock is the store's clock. The suite only moves it forward, so the
	// cases run one after another, each in tenants of its own.
	Clock *apollo.FakeClock
}

var runs atomic.Int64

// Run runs the conformance cases against h. It moves h.Clock forward by
// about three days.
func Run(t *testing.T, h Harness) {
	t.Helper()
	s := &suite{h: h, run: fmt.Sprintf("mt%d-%x", runs.Add(1), rand.Uint32())}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Alignment", s.alignment},
		{"Gauges", s.gauges},
		{"Corrections", s.corrections},
		{"Rollups", s.rollups},
		{"Retention", s.retention},
		{"TooOldTooNew", s.tooOldTooNew},
		{"TooNewAtReceipt", s.tooNewAtReceipt},
		{"SkewedClocks", s.skewedClocks},
		{"HugeCosts", s.hugeCosts},
		{"Series", s.series},
		{"Validation", s.validation},
		{"Concurrent", s.concurrent},
		{"Property", s.property},
	} {
		t.Run(c.name, c.fn)
	}
}

type suite struct {
	h   Harness
	run string
	n   atomic.Int64
}

// tenant returns a tenant no other case or run uses.
func (s *suite) tenant(name string) string {
	return fmt.Sprintf("%s-%s-%d", s.run, name, s.n.Add(1))
}

// alignClock moves the clock to the next whole minute plus off.
func (s *suite) alignClock(off time.Duration) time.Time {
	now := s.h.Clock.Now()
	next := now.Truncate(time.Minute).Add(time.Minute + off)
	s.h.Clock.Set(next)
	return next
}

func (s *suite) apply(t *testing.T, cs ...apollo.Change) {
	t.Helper()
	received(cs, s.h.Clock.Now().UnixMilli())
	for i := range cs {
		s.h.Apply(&cs[i])
	}
	s.sync(t)
}

// received stamps the changes that have no receipt time with now, as the
// bus stamps a record when it takes it.
func received(cs []apollo.Change, now int64) {
	for i := range cs {
		if cs[i].Record.ReceivedAt == 0 {
			cs[i].Record.ReceivedAt = now
		}
	}
}

func (s *suite) sync(t *testing.T) {
	t.Helper()
	if s.h.Sync != nil {
		if err := s.h.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
}

func (s *suite) table(t *testing.T, tenant string, w, off time.Duration, now time.Time) *metrics.Table {
	t.Helper()
	tb, err := s.h.Store.Table(context.Background(), metrics.Query{Tenant: tenant, Window: w, Offset: off, Now: now})
	if err != nil {
		t.Fatalf("Table(%v, offset %v): %v", w, off, err)
	}
	return tb
}

// row returns name's row, or a zero Summary when the store has no row:
// it may forget a job with nothing left to report.
func row(tb *metrics.Table, name string) apollo.Summary {
	if i, ok := slices.BinarySearch(tb.Names, name); ok {
		return tb.Rows[i]
	}
	return apollo.Summary{Window: tb.Window}
}

func (s *suite) points(t *testing.T, tenant, name string, w, step time.Duration, now time.Time) []apollo.Point {
	t.Helper()
	pts, err := s.h.Store.Series(context.Background(), tenant, name, w, step, now)
	if err != nil {
		t.Fatalf("Series(%q, %v, %v): %v", name, w, step, err)
	}
	if want := int(w / step); len(pts) != want {
		t.Fatalf("Series(%q, %v, %v): %d points, want %d", name, w, step, len(pts), want)
	}
	return pts
}

// pointAt returns the point whose step starts at ms.
func pointAt(t *testing.T, pts []apollo.Point, ms int64) apollo.Summary {
	t.Helper()
	for _, p := range pts {
		if p.T == ms {
			return p.Summary
		}
	}
	t.Fatalf("no point starts at %d", ms)
	return apollo.Summary{}
}

// checker compares a store with the model, stopping after a few
// mismatches so one bug does not print thousands of lines.
type checker struct {
	t      *testing.T
	m      *model
	s      *suite
	errors int
}

func (c *checker) fail(format string, args ...any) {
	c.t.Helper()
	c.errors++
	c.t.Errorf(format, args...)
	if c.errors >= 10 {
		c.t.FailNow()
	}
}

// table checks every job's row of one window, and Range and Sum over a few
// prefixes.
func (c *checker) table(tenant string, now time.Time, w, off time.Duration, prefixes []string) {
	c.t.Helper()
	tb := c.s.table(c.t, tenant, w, off, now)
	if len(tb.Rows) != len(tb.Names) || !slices.IsSorted(tb.Names) || len(slices.Compact(slices.Clone(tb.Names))) != len(tb.Names) {
		c.fail("Table(%v, %v): %d names, %d rows; names must be sorted and unique", w, off, len(tb.Names), len(tb.Rows))
		return
	}
	v := c.m.window(now, w, off)
	for name := range c.m.names(tenant) {
		got := row(tb, name)
		if got.Window != w {
			c.fail("Table(%v): row %q has Window %v", w, name, got.Window)
		}
		if why := c.m.want(tenant, name, v).mismatch(got); why != "" {
			c.fail("now %v Table(window %v, offset %v) %q: %s\n got %+v\nwant %+v",
				now.UTC().Format(time.RFC3339Nano), w, off, name, why, got, c.m.want(tenant, name, v).Summary)
		}
	}
	for _, p := range prefixes {
		lo, hi := tb.Range(p)
		var sum apollo.Summary
		for i, n := range tb.Names {
			if in := strings.HasPrefix(n, p); in != (i >= lo && i < hi) {
				c.fail("Range(%q) = [%d, %d), but %q at %d", p, lo, hi, n, i)
			}
			if strings.HasPrefix(n, p) {
				sum.Add(tb.Rows[i])
			}
		}
		sum.Window = w
		if got := tb.Sum(lo, hi); got != sum {
			c.fail("Sum(Range(%q)) = %+v, rows add up to %+v", p, got, sum)
		}
	}
}

// series checks every point of a Series against the model.
func (c *checker) series(tenant, name string, now time.Time, w, step time.Duration) {
	c.t.Helper()
	pts := c.s.points(c.t, tenant, name, w, step, now)
	v := c.m.window(now, w, 0)
	for i, p := range pts {
		if want := v.start + int64(i)*step.Milliseconds(); p.T != want {
			c.fail("Series(%v, %v) point %d: T %d, want %d", w, step, i, p.T, want)
			continue
		}
		if p.Window != step {
			c.fail("Series(%v, %v) point %d: Window %v", w, step, i, p.Window)
		}
		pv := c.m.view(now, p.T, p.T+step.Milliseconds())
		if why := c.m.want(tenant, name, pv).mismatch(p.Summary); why != "" {
			c.fail("now %v Series(%q, %v, %v) point %d (T %d): %s\n got %+v\nwant %+v",
				now.UTC().Format(time.RFC3339Nano), name, w, step, i, p.T, why, p.Summary, c.m.want(tenant, name, pv).Summary)
		}
	}
}

// applyAll applies changes in order, recording them in the model at the
// clock's time.
func (s *suite) applyAll(t *testing.T, m *model, cs []apollo.Change) {
	t.Helper()
	now := s.h.Clock.Now().UnixMilli()
	received(cs, now)
	for i := range cs {
		m.apply(&cs[i], now)
		s.h.Apply(&cs[i])
	}
	s.sync(t)
}

// applyConcurrently applies each task's changes in order on its own
// goroutine (at most workers at a time).
func (s *suite) applyConcurrently(t *testing.T, m *model, tasks [][]apollo.Change, workers int) {
	t.Helper()
	now := s.h.Clock.Now().UnixMilli()
	for _, cs := range tasks {
		received(cs, now)
		for i := range cs {
			m.apply(&cs[i], now)
		}
	}
	var wg sync.WaitGroup
	next := make(chan []apollo.Change)
	for range workers {
		wg.Go(func() {
			for cs := range next {
				for i := range cs {
					s.h.Apply(&cs[i])
				}
			}
		})
	}
	for _, cs := range tasks {
		next <- cs
	}
	close(next)
	wg.Wait()
	s.sync(t)
}

func (s *suite) validation(t *testing.T) {
	now := s.h.Clock.Now()
	ctx := context.Background()
	bad := []struct {
		field          string
		window, offset time.Duration
		step           time.Duration
	}{
		{"window", 0, 0, 0},
		{"window", 5 * time.Second, 0, 0},
		{"window", 15 * time.Second, 0, 0},
		{"window", -10 * time.Second, 0, 0},
		{"window", 24*time.Hour + 10*time.Second, 0, 0},
		{"offset", time.Minute, -10 * time.Second, 0},
		{"offset", time.Minute, 5 * time.Second, 0},
		{"offset", time.Minute, 24*time.Hour + 10*time.Second, 0},
		{"step", time.Minute, 0, 7 * time.Second},
		{"step", time.Minute, 0, 40 * time.Second},
		{"step", time.Minute, 0, -10 * time.Second},
	}
	for _, b := range bad {
		var err error
		if b.step != 0 {
			_, err = s.h.Store.Series(ctx, "x", "y", b.window, b.step, now)
		} else {
			_, err = s.h.Store.Table(ctx, metrics.Query{Tenant: "x", Window: b.window, Offset: b.offset, Now: now})
		}
		var ae *apollo.Error
		if !errors.As(err, &ae) || ae.Code != apollo.EINVALID || ae.Field != b.field {
			t.Errorf("window %v offset %v step %v: error %v, want an *apollo.Error invalid on %q", b.window, b.offset, b.step, err, b.field)
		}
	}
	for _, w := range []time.Duration{10 * time.Second, time.Minute, 24 * time.Hour} {
		tb, err := s.h.Store.Table(ctx, metrics.Query{Tenant: s.tenant("nobody"), Window: w, Offset: w, Now: now})
		if err != nil || len(tb.Names) != 0 || len(tb.Rows) != 0 {
			t.Errorf("Table of an unknown tenant over %v: %v, %v; want an empty table", w, tb, err)
		}
	}
	pts, err := s.h.Store.Series(ctx, s.tenant("nobody"), "y", 24*time.Hour, 10*time.Second, now)
	if err != nil || len(pts) != metrics.MaxPoints {
		t.Fatalf("Series of an unknown job over 24h by 10s: %d points, %v; want %d zero points", len(pts), err, metrics.MaxPoints)
	}
	for _, p := range pts {
		if p.Count != 0 || p.Backlog != 0 || p.Window != 10*time.Second {
			t.Fatalf("Series of an unknown job: point %+v", p)
		}
	}
}
