package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

// ErrStarted is returned, wrapped with the component's name, by a second
// Start; ErrStopped by a Start after Stop (or while a Stop is going) of
// a group that does not restart.
var (
	ErrStarted = errors.New("already started")
	ErrStopped = errors.New("stopped; make a new one")
)

// Group owns the goroutines of one component. Its zero value is ready; Name
// prefixes its errors. A component holds one and calls it from its own
// Start and Stop.
type Group struct {
	Name string
	// Restart lets Start start the group again once a Stop has finished,
	// for components whose loops own no state (the metrics compaction,
	// the rules file poll, the Redis flush). Without it a stopped
	// component stays stopped: make a new one.
	Restart bool

	mu       sync.Mutex
	started  bool                            // a Start succeeded
	stopping bool                            // Stop was called
	ctx      atomic.Pointer[context.Context] // set by Start, before start runs
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	live     atomic.Int64
	errMu    sync.Mutex
	errs     []error // returned by the goroutines
	done     chan struct{}
	stopErr  error
}

// Start runs start once. The context start gets is the one its goroutines
// (Go, Tick) run under: it carries ctx's values but not its end, and
// Stop cancels it. ctx bounds the start only, so that a process can let
// its components run on after its own context ended and stop them in the
// order it chose. A second Start returns ErrStarted, one after Stop
// ErrStopped. When start fails, the goroutines it launched are stopped
// and waited for, and a later Start may try again.
func (g *Group) Start(ctx context.Context, start func(run context.Context) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping && g.Restart && isClosed(g.done) {
		g.started, g.stopping, g.done, g.errs, g.stopErr = false, false, nil, nil, nil
	}
	switch {
	case g.stopping:
		return fmt.Errorf("%s: start: %w", g.Name, ErrStopped)
	case g.started:
		return fmt.Errorf("%s: start: %w", g.Name, ErrStarted)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: start: %w", g.Name, err)
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.ctx.Store(&run)
	g.cancel = cancel
	if start != nil {
		if err := start(run); err != nil {
			g.cancel()
			g.wg.Wait()
			g.errs = nil
			return err
		}
	}
	g.started = true
	return nil
}

// Go runs f in a goroutine the group owns, under the context Start made;
// call it from start or while the group runs, not after Stop. An error f
// returns, other than the end of that context, is returned by Stop.
func (g *Group) Go(f func(ctx context.Context) error) {
	p := g.ctx.Load()
	if p == nil {
		panic(g.Name + ": lifecycle.Group.Go before Start")
	}
	ctx := *p
	g.wg.Add(1)
	g.live.Add(1)
	go func() {
		defer g.live.Add(-1) // last: Live is 0 only once every f returned
		defer g.wg.Done()
		if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
			g.errMu.Lock()
			g.errs = append(g.errs, err)
			g.errMu.Unlock()
		}
	}()
}

// Tick calls fn every interval of clock in a goroutine the group owns,
// until Stop. The ticker is armed before Tick returns, so a test may move
// a fake clock at once.
func (g *Group) Tick(clock apollo.Clock, every time.Duration, fn func(ctx context.Context)) {
	tk := clock.NewTicker(every)
	g.Go(func(ctx context.Context) error {
		defer tk.Stop()
		for {
			select {
			case <-tk.C():
				fn(ctx)
			case <-ctx.Done():
				return nil
			}
		}
	})
}

// Context is the context the goroutines run under (nil before Start).
// Its Done channel is the component's stop signal.
func (g *Group) Context() context.Context {
	if p := g.ctx.Load(); p != nil {
		return *p
	}
	return nil
}

// Started reports whether a Start succeeded.
func (g *Group) Started() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started
}

// Stopping reports whether Stop was called.
func (g *Group) Stopping() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopping
}

// Live is the number of the group's goroutines still running.
func (g *Group) Live() int { return int(g.live.Load()) }

// Stop stops the component. The first call runs stop (nil: nothing but
// halt) in a goroutine of its own; stop gets halt, which cancels the
// goroutines' context and waits for them, to call when the component has
// done what must come before (a drain), and does what comes after (a
// last flush). halt runs after stop in any case. Stop then waits until all
// that is done and returns stop's error joined with those of the
// goroutines, or until ctx ends and returns ctx.Err(): stopping goes on,
// and a later Stop waits for it again. With ctx already done it does not
// wait: the call that begins stopping then says why, however fast the
// stop ends (it raced the goroutine it had just started, and said nil
// when that won); a later call with it done says nil once stopped. Stop
// before Start runs stop too (halt has nothing to wait for).
func (g *Group) Stop(ctx context.Context, stop func(halt func()) error) error {
	g.mu.Lock()
	first := !g.stopping
	if first {
		g.stopping = true
		g.done = make(chan struct{})
		go g.runStop(stop)
	}
	done := g.done
	g.mu.Unlock()
	if err := ctx.Err(); err != nil && first {
		return fmt.Errorf("%s: stop: %w", g.Name, err)
	}
	select {
	case <-done:
		return g.stopErr
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: stop: %w", g.Name, err)
	}
	select {
	case <-done:
		return g.stopErr
	case <-ctx.Done():
		return fmt.Errorf("%s: stop: %w", g.Name, ctx.Err())
	}
}

// StopThen is Stop for a component whose last work comes after its
// goroutines ended and only if it started (a last flush, beat or save):
// last runs after them, and its error is returned.
func (g *Group) StopThen(ctx context.Context, last func() error) error {
	return g.Stop(ctx, func(halt func()) error {
		halt()
		if !g.Started() {
			return nil
		}
		return last()
	})
}

func (g *Group) runStop(stop func(halt func()) error) {
	var once sync.Once
	halt := func() {
		once.Do(func() {
			g.mu.Lock()
			cancel := g.cancel
			g.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			g.wg.Wait()
		})
	}
	var err error
	if stop != nil {
		err = stop(halt)
	}
	halt()
	g.errMu.Lock()
	g.stopErr = errors.Join(append([]error{err}, g.errs...)...)
	g.errMu.Unlock()
	close(g.done)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Done is closed once the first Stop has finished (nil before Stop).
func (g *Group) Done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}
