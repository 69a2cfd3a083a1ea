package apollo

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time source of every service. Production code uses
// SystemClock; tests use a FakeClock and move time by hand, so that no test
// sleeps to wait.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is the part of *time.Timer that services use.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is the part of *time.Ticker that services use.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// SystemClock is the real clock.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                   { return time.Now() }
func (systemClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (systemClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// FakeClock is a Clock that moves only when Advance or Set is called. Timers
// and tickers fire, in deadline order, as time passes them. BlockUntil lets a
// test wait until the code under test has armed its timers, instead of
// sleeping.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced whenever waiters change
}

type fakeWaiter struct {
	clock    *FakeClock
	deadline time.Time
	period   time.Duration // >0 for tickers
	c        chan time.Time
	active   bool
}

// NewFakeClock returns a FakeClock set to now.
func NewFakeClock(now time.Time) *FakeClock {
	return &FakeClock{now: now, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
func (f *FakeClock) NewTimer(d time.Duration) Timer { return f.add(d, 0) }

// NewTicker returns a ticker that fires every d of fake time.
func (f *FakeClock) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("apollo: non-positive interval for NewTicker")
	}
	return fakeTicker{f.add(d, d)}
}

func (f *FakeClock) add(d, period time.Duration) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{clock: f, deadline: f.now.Add(d), period: period, c: make(chan time.Time, 1), active: true}
	f.waiters = append(f.waiters, w)
	f.signal()
	return w
}

// signal wakes BlockUntil callers; f.mu must be held.
func (f *FakeClock) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock forward by d, firing every timer and ticker whose
// deadline is passed, earliest first.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves the clock to t (never backwards), firing what is due.
func (f *FakeClock) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].deadline.Before(f.waiters[j].deadline) })
		if len(f.waiters) == 0 || f.waiters[0].deadline.After(t) {
			break
		}
		w := f.waiters[0]
		if w.deadline.After(f.now) {
			f.now = w.deadline
		}
		select {
		case w.c <- f.now:
		default: // like time.Ticker, drop a tick nobody read
		}
		if w.period > 0 {
			w.deadline = w.deadline.Add(w.period)
		} else {
			w.active = false
			f.waiters = f.waiters[1:]
		}
	}
	if t.After(f.now) {
		f.now = t
	}
	f.signal()
}

// Waiters returns the number of armed timers and tickers.
func (f *FakeClock) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil waits until at least n timers or tickers are armed, or the
// timeout passes (real time; it is a safety net, not a way to wait). It
// reports whether n were reached.
func (f *FakeClock) BlockUntil(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		got, ch := len(f.waiters), f.changed
		f.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

func (w *fakeWaiter) C() <-chan time.Time { return w.c }

func (w *fakeWaiter) Stop() bool {
	f := w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := w.active
	w.remove()
	return was
}

// remove takes w off the clock; f.mu must be held.
func (w *fakeWaiter) remove() {
	f := w.clock
	for i, o := range f.waiters {
		if o == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	w.active = false
	f.signal()
}

func (w *fakeWaiter) Reset(d time.Duration) bool {
	f := w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := w.active
	w.remove()
	w.deadline = f.now.Add(d)
	if w.period > 0 {
		w.period = d
	}
	w.active = true
	f.waiters = append(f.waiters, w)
	f.signal()
	return was
}

// fakeTicker adapts fakeWaiter to Ticker, whose Stop and Reset return nothing.
type fakeTicker struct{ w *fakeWaiter }

func (t fakeTicker) C() <-chan time.Time   { return t.w.c }
func (t fakeTicker) Stop()                 { t.w.Stop() }
func (t fakeTicker) Reset(d time.Duration) { t.w.Reset(d) }

var (
	_ Clock = systemClock{}
	_ Clock = (*FakeClock)(nil)
	_ Timer = (*fakeWaiter)(nil)
)
