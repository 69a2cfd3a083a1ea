package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/testwait"
)

var bg = context.Background()

func TestStartOnce(t *testing.T) {
	g := &lifecycle.Group{Name: "thing"}
	if err := g.Start(bg, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(bg, nil); !errors.Is(err, lifecycle.ErrStarted) || err.Error() != "thing: start: already started" {
		t.Errorf("second Start: %v", err)
	}
	if err := g.Stop(bg, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(bg, nil); !errors.Is(err, lifecycle.ErrStopped) {
		t.Errorf("Start after Stop: %v", err)
	}
}

func TestFailedStartStopsWhatItStarted(t *testing.T) {
	g := &lifecycle.Group{Name: "thing"}
	ended := make(chan struct{})
	boom := errors.New("boom")
	err := g.Start(bg, func(ctx context.Context) error {
		g.Go(func(ctx context.Context) error { <-ctx.Done(); close(ended); return nil })
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Start returned before the goroutine it started ended")
	}
	if err := g.Start(bg, nil); err != nil {
		t.Errorf("Start after a failed Start: %v", err)
	}
	g.Stop(bg, nil)
}

// The context of Start bounds the start only: its end does not stop the
// goroutines, Stop does.
func TestStartContextBoundsTheStartOnly(t *testing.T) {
	g := &lifecycle.Group{Name: "thing"}
	ctx, cancel := context.WithCancel(bg)
	if err := g.Start(ctx, func(run context.Context) error {
		g.Go(func(ctx context.Context) error { <-ctx.Done(); return nil })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if g.Context().Err() != nil || g.Live() != 1 {
		t.Fatalf("the end of Start's context stopped the group (live %d)", g.Live())
	}
	if err := g.Stop(bg, nil); err != nil || g.Live() != 0 {
		t.Fatalf("Stop: %v, %d goroutines live", err, g.Live())
	}
	done, cancel := context.WithCancel(bg)
	cancel()
	if err := (&lifecycle.Group{Name: "x"}).Start(done, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a done context: %v", err)
	}
}

// Stop waits for the goroutines, the drain before them and the work after
// them, or for its context; a later Stop waits again.
func TestStopWaits(t *testing.T) {
	g := &lifecycle.Group{Name: "thing"}
	release := make(chan struct{})
	g.Start(bg, func(context.Context) error {
		g.Go(func(ctx context.Context) error { <-ctx.Done(); <-release; return nil })
		return nil
	})
	var order []string
	stop := func(halt func()) error {
		order = append(order, "drain")
		halt()
		order = append(order, "final")
		return nil
	}
	expired, cancel := context.WithCancel(bg)
	cancel()
	if err := g.Stop(expired, stop); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with a done context: %v", err)
	}
	short, cancel := context.WithCancel(bg)
	go func() { cancel() }()
	if err := g.Stop(short, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop whose context ends while a goroutine runs: %v", err)
	}
	if g.Live() != 1 {
		t.Fatalf("%d goroutines live, want the blocked one", g.Live())
	}
	close(release)
	if err := g.Stop(testwait.Context(t), nil); err != nil {
		t.Fatal(err)
	}
	if g.Live() != 0 || len(order) != 2 || order[0] != "drain" || order[1] != "final" {
		t.Errorf("after Stop: %d live, steps %v", g.Live(), order)
	}
}

// Errors are returned: the stop's and the goroutines', not logged away.
func TestStopReturnsErrors(t *testing.T) {
	g := &lifecycle.Group{Name: "thing"}
	loopErr, stopErr := errors.New("loop failed"), errors.New("last flush failed")
	g.Start(bg, func(context.Context) error {
		g.Go(func(context.Context) error { return loopErr })
		g.Go(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }) // not an error
		return nil
	})
	err := g.Stop(bg, func(halt func()) error { halt(); return stopErr })
	if !errors.Is(err, loopErr) || !errors.Is(err, stopErr) || errors.Is(err, context.Canceled) {
		t.Errorf("Stop: %v", err)
	}
	if again := g.Stop(bg, nil); again == nil || again.Error() != err.Error() {
		t.Errorf("second Stop: %v, first %v", again, err)
	}
}

func TestStopBeforeStart(t *testing.T) {
	g := &lifecycle.Group{Name: "thing"}
	ran := false
	if err := g.Stop(bg, func(halt func()) error { halt(); ran = true; return nil }); err != nil || !ran {
		t.Fatalf("Stop before Start: %v, ran %v", err, ran)
	}
	if g.Started() || !g.Stopping() {
		t.Error("state after Stop before Start")
	}
}

// Tick runs on the clock it is given.
func TestTickOnTheClock(t *testing.T) {
	clock := apollo.NewFakeClock(time.Unix(0, 0))
	g := &lifecycle.Group{Name: "thing"}
	ticks := make(chan time.Time)
	g.Start(bg, func(context.Context) error {
		g.Tick(clock, time.Minute, func(ctx context.Context) {
			select {
			case ticks <- clock.Now():
			case <-ctx.Done():
			}
		})
		return nil
	})
	if clock.Waiters() != 1 {
		t.Fatalf("%d tickers armed after Start, want 1", clock.Waiters())
	}
	clock.Advance(time.Minute)
	select {
	case at := <-ticks:
		if !at.Equal(time.Unix(60, 0)) {
			t.Errorf("ticked at %v", at)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no tick after the clock moved a minute")
	}
	g.Stop(bg, nil)
	if clock.Waiters() != 0 {
		t.Error("the ticker is still armed after Stop")
	}
}

// A group that restarts starts again once its Stop has finished; the
// goroutines of the second run are its own.
func TestRestart(t *testing.T) {
	g := &lifecycle.Group{Name: "thing", Restart: true}
	if err := g.Stop(bg, nil); err != nil { // before Start: nothing to stop
		t.Fatal(err)
	}
	for run := range 2 {
		if err := g.Start(bg, func(context.Context) error {
			g.Go(func(ctx context.Context) error { <-ctx.Done(); return nil })
			return nil
		}); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if err := g.Start(bg, nil); !errors.Is(err, lifecycle.ErrStarted) {
			t.Fatalf("run %d, second Start: %v", run, err)
		}
		if err := g.Stop(bg, nil); err != nil || g.Live() != 0 {
			t.Fatalf("run %d: Stop %v, %d live", run, err, g.Live())
		}
	}
}
