package alerttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rules"
)

// LockerHarness gives the suite lockers that share one backing store.
type LockerHarness struct {
	// New returns a Locker over the shared store; two calls stand for
	// two alert processes.
	New func(t *testing.T) alert.Locker
	// Elapse makes d pass for the locks' expiry: a fake clock's Advance
	// for the memory locker. nil skips the expiry case, with a note.
	Elapse func(t *testing.T, d time.Duration)
	// Clock drives the engines of the two-engine case; nil: a fresh
	// fake clock.
	Clock *apollo.FakeClock
}

// uniq makes keys that no other test or earlier run uses, so the suite
// can share a Redis database.
func uniq(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "alerttest:" + strings.ReplaceAll(t.Name(), "/", ".") + ":" + hex.EncodeToString(b[:])
}

// RunLocker checks that a Locker lets exactly one caller through per key
// and ttl, across lockers sharing a store, and that two engines sharing
// it send a notification once.
func RunLocker(t *testing.T, h LockerHarness) {
	ctx := context.Background()
	t.Run("OneWinner", func(t *testing.T) {
		a, b, key := h.New(t), h.New(t), uniq(t)
		mustAcquire(t, a, key, time.Minute, true)
		mustAcquire(t, b, key, time.Minute, false)
		mustAcquire(t, a, key, time.Minute, false) // not re-entrant: the same engine twice is a duplicate too
		mustAcquire(t, b, key+":other", time.Minute, true)
	})
	t.Run("Expires", func(t *testing.T) {
		if h.Elapse == nil {
			t.Skip("the harness has no Elapse: expiry is not checked")
		}
		a, b, key := h.New(t), h.New(t), uniq(t)
		mustAcquire(t, a, key, 2*time.Second, true)
		h.Elapse(t, 1500*time.Millisecond)
		mustAcquire(t, b, key, 2*time.Second, false)
		h.Elapse(t, 600*time.Millisecond)
		mustAcquire(t, b, key, 2*time.Second, true)
		mustAcquire(t, a, key, 2*time.Second, false)
	})
	t.Run("Concurrent", func(t *testing.T) {
		lockers := []alert.Locker{h.New(t), h.New(t)}
		key := uniq(t)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				ok, err := lockers[i%2].Acquire(ctx, key, time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("%d of 16 concurrent callers took the lock, want 1", n)
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if ok, err := h.New(t).Acquire(cctx, uniq(t), time.Minute); err == nil || ok {
			t.Fatalf("a cancelled context gave %v, %v; want an error", ok, err)
		}
	})
	t.Run("TwoEnginesOneMessage", func(t *testing.T) { twoEngines(t, h) })
}

func mustAcquire(t *testing.T, l alert.Locker, key string, ttl time.Duration, want bool) {
	t.Helper()
	ok, err := l.Acquire(context.Background(), key, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	if ok != want {
		t.Fatalf("Acquire(%q) = %v, want %v", key, ok, want)
	}
}

// Sink is a Sender that keeps what it is given, for tests.
type Sink struct {
	mu    sync.Mutex
	notes []apollo.Notification
	C     chan apollo.Notification // every notification, also; buffered
}

// NewSink returns a Sink whose channel holds n notifications.
func NewSink(n int) *Sink { return &Sink{C: make(chan apollo.Notification, n)} }

// Send implements alert.Sender; it never blocks (past the buffer, the
// channel copy is dropped but Notes keeps it).
func (s *Sink) Send(n apollo.Notification) {
	s.mu.Lock()
	s.notes = append(s.notes, n)
	s.mu.Unlock()
	select {
	case s.C <- n:
	default:
	}
}

// Notes returns what was sent so far.
func (s *Sink) Notes() []apollo.Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apollo.Notification(nil), s.notes...)
}

// Wait returns the next notification, failing the test after timeout
// (real time: a safety net, not a way to wait).
func (s *Sink) Wait(t *testing.T, timeout time.Duration) apollo.Notification {
	t.Helper()
	select {
	case n := <-s.C:
		return n
	case <-time.After(timeout):
		t.Fatalf("no notification within %v", timeout)
		return apollo.Notification{}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// twoEngines runs two engines over one metrics store and the harness's
// lockers: a rate rule that fires, and 300 failures seen by both, must
// give one firing message and two storm messages in all, not twice that.
func twoEngines(t *testing.T, h LockerHarness) {
	clock := h.Clock
	if clock == nil {
		clock = apollo.NewFakeClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	}
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tag := strings.ReplaceAll(uniq(t), ":", "_") // a rule name and a prefix no other run uses
	src := fmt.Sprintf(`RULE rate_%[1]s task_prefix: "%[1]s" WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: ops
RULE storm_%[1]s task_prefix: "%[1]s" ON: failed GROUP_WINDOW: 1m NOTIFY: ops`, tag)
	rs, err := rules.Parse("two.rules", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var engines []*alert.Engine
	var sinks []*Sink
	for range 2 {
		sink := NewSink(1000)
		e, err := alert.New(alert.Options{Rules: rs, Store: agg, Sender: sink, Locker: h.New(t), Clock: clock, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		engines, sinks = append(engines, e), append(sinks, sink)
	}
	stopped := false
	stopAll := func() {
		if !stopped {
			for _, e := range engines {
				e.Stop(context.Background())
			}
			stopped = true
		}
	}
	t.Cleanup(stopAll)

	now := clock.Now().UnixMilli()
	for i := range 300 {
		c := failure(fmt.Sprintf("%s%d", tag, i%7), fmt.Sprintf("run-%d", i), now+int64(i))
		agg.Apply(&c)
		for _, e := range engines {
			e.Apply(&c)
		}
	}
	for _, e := range engines {
		if err := e.Evaluate(context.Background(), clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// Both engines' group timers and evaluation tickers are armed: let
	// the group window pass.
	if !clock.BlockUntil(4, 10*time.Second) {
		t.Fatalf("the engines did not arm their timers: %d waiters", clock.Waiters())
	}
	clock.Advance(time.Minute)
	// Wait for the follow-up from whichever engine wins its lock; the
	// other one, stopped now or later, must not send it again.
	waitForKind(t, sinks, apollo.NotifyStorm)
	stopAll() // delivers what is queued and waits
	kinds := map[apollo.NotificationKind]int{}
	for _, s := range sinks {
		for _, n := range s.Notes() {
			kinds[n.Kind]++
		}
	}
	want := map[apollo.NotificationKind]int{apollo.NotifyFiring: 2, apollo.NotifyStorm: 1}
	// Firing: one for the rate rule, one for the event rule's first match.
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("two engines sent %v, want %v", kinds, want)
	}
}

// waitForKind waits until one of sinks is sent a notification of kind.
func waitForKind(t *testing.T, sinks []*Sink, kind apollo.NotificationKind) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-sinks[0].C:
			if n.Kind == kind {
				return
			}
		case n := <-sinks[1].C:
			if n.Kind == kind {
				return
			}
		case <-timeout:
			t.Fatalf("no %s notification within 10s", kind)
		}
	}
}

// failure is the change of a run of job that failed at ts.
func failure(job, id string, ts int64) apollo.Change {
	prev := apollo.Task{TaskID: id, Name: job, Status: apollo.StatusRunning, StartedAt: ts - 1000}
	next := prev
	next.Status, next.FinishedAt, next.CostMs, next.UpdatedAt = apollo.StatusFailed, ts, 1000, ts
	return apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: job, Status: apollo.StatusFailed, Ts: ts, Sequence: 2}},
		Prev: apollo.BeforeOf(&prev), Task: next}
}
