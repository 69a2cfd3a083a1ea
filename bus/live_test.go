package bus

import (
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
