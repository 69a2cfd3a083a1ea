package bus

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/apollo-11/apollo"
)

// Live observers hear only of the changes decided after Start: a restart
// replays the log to the observers that rebuild state, not to those that
// act on a change (they heard of it when it happened). Before, the alert
// engine was an observer like the metrics, and notified a replayed old
// failure again.
func TestLiveObserversDoNotSeeTheReplay(t *testing.T) {
	t.Parallel()
	live := &recorder{}
	f := newFixture(t, func(o *Options) { o.Live = []Observer{live} })
	f.publish(t, ev("a1", 1, apollo.StatusRunning), ev("a1", 2, apollo.StatusFailed))
	f.drain()
	if n := len(live.all()); n != 2 {
		t.Fatalf("a live observer saw %d live changes, want 2", n)
	}

	all, live2 := &recorder{}, &recorder{}
	b := f.replayed(t, func(o *Options) { o.Observers, o.Live = []Observer{all}, []Observer{live2} })
	if n, m := len(all.all()), len(live2.all()); n != 2 || m != 0 {
		t.Fatalf("replay reached %d observer and %d live changes, want 2 and 0", n, m)
	}
	out := make([]Outcome, 1)
	if err := b.Publish(t.Context(), []apollo.Event{ev("b1", 1, apollo.StatusFailed)}, out); err != nil || out[0].Result != Accepted {
		t.Fatal(out, err)
	}
	b.Checkpoint(func(uint64) error { return nil })
	got := live2.all()
	if len(got) != 1 || got[0].Task.TaskID != "b1" || len(all.all()) != 3 {
		t.Fatalf("after the restart the live observer saw %d changes (want b1 alone), the observer %d (want 3)", len(got), len(all.all()))
	}
}

// copier keeps a copy of every change: the replay reuses one Change.
type copier struct {
	mu      sync.Mutex
	changes []apollo.Change
}

func (r *copier) Apply(c *apollo.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, *c)
	r.mu.Unlock()
}

// seen lists the changes as task:status@LSN.
func (r *copier) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, c := range r.changes {
		s = append(s, fmt.Sprintf("%s:%s@%d", c.Task.TaskID, c.Task.Status, c.LSN))
	}
	return s
}

// holder is a live observer that holds the changes of one task until
// released, as a busy worker does.
type holder struct {
	task    string
	held    chan struct{} // closed when the first change of task arrives
	release chan struct{}
	once    sync.Once
	others  chan string // the other changes' task IDs
}

func (h *holder) Apply(c *apollo.Change) {
	if c.Task.TaskID != h.task {
		h.others <- c.Task.TaskID
		return
	}
	h.once.Do(func() { close(h.held) })
	<-h.release
}

// TestLiveWatermarkWaitsForTheSlowestChange: the mark a live observer
// saves never passes a change it has not been handed, however far the
// other tasks' changes went (they are delivered out of LSN order).
func TestLiveWatermarkWaitsForTheSlowestChange(t *testing.T) {
	t.Parallel()
	h := &holder{task: "a1", held: make(chan struct{}), release: make(chan struct{}), others: make(chan string, 8)}
	f := newFixture(t, func(o *Options) { o.Live = []Observer{h} })
	f.publish(t, ev("a1", 1, apollo.StatusFailed)) // LSN 1, held
	<-h.held
	f.publish(t, ev("b1", 1, apollo.StatusFailed)) // LSN 2, delivered
	if got := <-h.others; got != "b1" {
		t.Fatalf("delivered %s, want b1", got)
	}
	for range 3 {
		if w := f.bus.LiveWatermark(); w != 0 {
			t.Fatalf("mark %d while the change of LSN 1 is held, want 0", w)
		}
	}
	close(h.release)
	if err := f.bus.WaitDrained(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := f.bus.LiveWatermark(); w != 2 {
		t.Fatalf("mark %d once everything is delivered, want 2", w)
	}
	f.publish(t, ev("c1", 1, apollo.StatusFailed)) // LSN 3
	if got := <-h.others; got != "c1" {
		t.Fatalf("delivered %s, want c1", got)
	}
	if err := f.bus.WaitDrained(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := f.bus.LiveWatermark(); w != 3 {
		t.Fatalf("mark %d after the next change, want 3", w)
	}
	f.drain() // a checkpoint sets the mark at its copy
	if w := f.bus.LiveWatermark(); w != 3 {
		t.Fatalf("mark %d after a checkpoint, want 3", w)
	}
}

// TestReplayHandsLiveObserversTheChangesAboveTheMark: after a restart the
// live observers hear of the changes they had not heard of (above the
// mark they saved), each once, with the LSN of the record that made it;
// a waiting event made legal by a later one carries the later one's LSN,
// as in live operation.
func TestReplayHandsLiveObserversTheChangesAboveTheMark(t *testing.T) {
	t.Parallel()
	before := &copier{}
	f := newFixture(t, func(o *Options) { o.Live = []Observer{before} })
	f.publish(t, ev("a1", 1, apollo.StatusRunning), ev("a1", 2, apollo.StatusFailed), // LSN 1, 2
		ev("b1", 1, apollo.StatusFailed),  // LSN 3
		ev("c1", 1, apollo.StatusPending), // LSN 4
		ev("c1", 3, apollo.StatusSuccess), // LSN 5, waits for sequence 2
		ev("c1", 2, apollo.StatusRunning)) // LSN 6, and then c1's success
	f.drain()
	want := []string{"a1:running@1", "a1:failed@2", "b1:failed@3", "c1:pending@4", "c1:running@6", "c1:success@6"}
	if got := before.seen(); !sameSet(got, want) {
		t.Fatalf("live changes %v, want %v", got, want)
	}
	for _, seq := range []bool{true, false} {
		all, live := &copier{}, &copier{}
		b, err := New(Options{Clock: f.clock, Logger: slog.New(slog.DiscardHandler), Observers: []Observer{all}, Live: []Observer{live}})
		if err != nil {
			t.Fatal(err)
		}
		b.ReplayLiveAfter(3)
		if seq {
			for i, p := range f.log.records() {
				if err := b.Replay(uint64(i+1), p); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			rp := b.NewReplayer(2)
			for i, p := range f.log.records() {
				if err := rp.Add(uint64(i+1), p); err != nil {
					t.Fatal(err)
				}
			}
			if err := rp.Finish(); err != nil {
				t.Fatal(err)
			}
		}
		if got := all.seen(); !sameSet(got, want) {
			t.Errorf("seq=%v: replayed changes %v, want %v", seq, got, want)
		}
		if got, want := live.seen(), want[3:]; !sameSet(got, want) {
			t.Errorf("seq=%v: live observer heard %v in the replay, want %v", seq, got, want)
		}
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// TestSettleWaitsForWhatWasAcceptedBeforeIt: Settle returns only once
// the changes accepted before it reached the observers, so that an answer
// built from an observer's state (the learner's proposals) includes them.
// Before, a GET right after a POST could be answered before the
// observers had seen the POST's events (TestProposalsAreBounded in
// cmd/apollo saw four of seven jobs).
func TestSettleWaitsForWhatWasAcceptedBeforeIt(t *testing.T) {
	t.Parallel()
	h := &holder{task: "a1", held: make(chan struct{}), release: make(chan struct{}), others: make(chan string, 8)}
	seen := &copier{}
	f := newFixture(t, func(o *Options) { o.Live, o.Observers = []Observer{h}, []Observer{seen} })
	f.publish(t, ev("b1", 1, apollo.StatusFailed))
	if got := <-h.others; got != "b1" {
		t.Fatalf("delivered %s, want b1", got)
	}
	if err := f.bus.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.publish(t, ev("a1", 1, apollo.StatusFailed)) // held by the live observer
	<-h.held
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for range 3 {
		if err := f.bus.Settle(gone); err == nil {
			t.Fatal("Settle returned while a change accepted before it was held")
		}
	}
	done := make(chan error, 1)
	go func() { done <- f.bus.Settle(t.Context()) }()
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(seen.seen()); got != "[b1:failed@1 a1:failed@2]" {
		t.Fatalf("after Settle the observer saw %s, want b1 and a1", got)
	}
}

// Without a log (no live mark) Settle waits for the delivery queue.
func TestSettleWithoutALog(t *testing.T) {
	t.Parallel()
	h := &holder{task: "a1", held: make(chan struct{}), release: make(chan struct{}), others: make(chan string, 8)}
	f := newFixture(t, func(o *Options) { o.Log, o.Observers = nil, []Observer{h} })
	b := f.bus
	out := make([]Outcome, 1)
	if err := b.Publish(t.Context(), []apollo.Event{ev("a1", 1, apollo.StatusFailed)}, out); err != nil || out[0].Result != Accepted {
		t.Fatal(out, err)
	}
	<-h.held
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Settle(gone); err == nil {
		t.Fatal("Settle returned while a change was held")
	}
	close(h.release)
	if err := b.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
}
