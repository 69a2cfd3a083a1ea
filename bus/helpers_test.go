package bus

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
)

// memLog is an in-memory Log: every append is durable at once, unless
// failWait is set; with failAppend set, appends fail (a full disk); with
// limit set, a record longer is refused as the write-ahead log refuses one
// over its limit.
type memLog struct {
	mu         sync.Mutex
	recs       [][]byte
	failWait   error
	failAppend error
	limit      int
}

func (l *memLog) Append(p []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failAppend != nil {
		return 0, l.failAppend
	}
	if l.limit > 0 && len(p) > l.limit {
		return 0, &apollo.Error{Code: apollo.ETOOLARGE, Field: "payload", Message: fmt.Sprintf("record is %d bytes", len(p))}
	}
	l.recs = append(l.recs, append([]byte(nil), p...))
	return uint64(len(l.recs)), nil
}

func (l *memLog) Wait(context.Context, uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failWait
}

func (l *memLog) records() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.recs...)
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

type fixture struct {
	bus   *Bus
	clock *apollo.FakeClock
	log   *memLog
}

func newFixture(t testing.TB, edit func(*Options)) *fixture {
	t.Helper()
	f := &fixture{clock: apollo.NewFakeClock(t0), log: &memLog{}}
	opts := Options{Log: f.log, Clock: f.clock, Workers: 2, Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(context.Background()) })
	f.bus = b
	return f
}

// newMetricsFixture is a fixture whose bus feeds a metrics aggregator.
func newMetricsFixture(t *testing.T) (*fixture, *metrics.Aggregator) {
	t.Helper()
	var agg *metrics.Aggregator
	f := newFixture(t, func(o *Options) {
		agg = newAggregator(t, o.Clock)
		o.Observers = []Observer{agg}
	})
	return f, agg
}

// replayed is a new bus, started, that replayed f's whole log, as a
// restart does; edit (may be nil) sets its options, observers say.
func (f *fixture) replayed(t *testing.T, edit func(*Options)) *Bus {
	t.Helper()
	opts := Options{Clock: f.clock, Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range f.log.records() {
		if err := b.Replay(uint64(i+1), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(context.Background()) })
	return b
}

func ev(id string, seq int64, st apollo.Status) apollo.Event {
	return apollo.Event{TaskID: id, Name: "job_" + id[:1], Sequence: seq, Status: st, Ts: t0.UnixMilli() + seq*1000}
}

func (f *fixture) publish(t testing.TB, evs ...apollo.Event) []Outcome {
	t.Helper()
	out := make([]Outcome, len(evs))
	if err := f.bus.Publish(context.Background(), evs, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) get(t testing.TB, id string) *apollo.Task {
	t.Helper()
	got, err := f.bus.Get("", id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return got
}

// drain waits until every queued change has been delivered.
func (f *fixture) drain() { f.bus.Checkpoint(func(uint64) error { return nil }) }

// recorder is an Observer that keeps every change.
type recorder struct {
	mu      sync.Mutex
	changes []*apollo.Change
}

func (r *recorder) Apply(c *apollo.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

func (r *recorder) all() []*apollo.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*apollo.Change(nil), r.changes...)
}

// waitChange reads from a subscription until pred holds.
func waitChange(t *testing.T, sub *Subscription, pred func(*apollo.Change) bool) *apollo.Change {
	t.Helper()
	timeout := time.NewTimer(testwait.Timeout(t))
	defer timeout.Stop()
	for {
		select {
		case c, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			if pred(c) {
				return c
			}
		case <-timeout.C:
			t.Fatal("no matching change")
		}
	}
}
