package bus

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/apollo-11/apollo"
)

// ErrSlowSubscriber is the reason a subscription is cut off: it did not keep
// up, and must resynchronise from a snapshot of the state.
var ErrSlowSubscriber = errors.New("bus: subscriber too slow, cut off; resynchronise")

// Fanout hands each change to every Subscription without waiting for any:
// a subscriber whose buffer is full is cut off (ErrSlowSubscriber) rather
// than slowing the others. A Bus has one for the changes it applies; a
// scale-out node (package cluster) has one for the changes of every node.
//
// Publish reads the subscriptions without a lock (the list is replaced,
// never modified), so one publisher delivering in order keeps each task's
// changes in order for every subscriber.
type Fanout struct {
	mu   sync.Mutex                      // serializes writers of subs
	subs atomic.Pointer[[]*Subscription] // copy on write
	cut  atomic.Int64
	idle func()
}

// NewFanout returns a Fanout with no subscriptions. idle, when not nil, is
// called after a subscription ends and leaves none, outside the Fanout's
// lock: an owner that holds a source open only while someone listens
// closes it there, checking Len under its own lock, since a Subscribe may
// come meanwhile.
func NewFanout(idle func()) *Fanout {
	f := &Fanout{idle: idle}
	f.subs.Store(&[]*Subscription{})
	return f
}

// Subscription receives changes until it is closed or cut off.
type Subscription struct {
	f      *Fanout
	mu     sync.Mutex
	c      chan *apollo.Change
	closed bool
	err    error
}

// Subscribe returns a subscription with room for buffer changes. A
// subscriber that lets its buffer fill is cut off: Publish never waits.
func (f *Fanout) Subscribe(buffer int) *Subscription {
	s := &Subscription{f: f, c: make(chan *apollo.Change, max(buffer, 1))}
	f.mu.Lock()
	old := *f.subs.Load()
	next := append(append(make([]*Subscription, 0, len(old)+1), old...), s)
	f.subs.Store(&next)
	f.mu.Unlock()
	return s
}

// Publish hands c to every open subscription, cutting off those whose
// buffer is full.
func (f *Fanout) Publish(c *apollo.Change) {
	for _, s := range *f.subs.Load() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			continue
		}
		select {
		case s.c <- c:
			s.mu.Unlock()
		default:
			s.mu.Unlock()
			s.end(ErrSlowSubscriber)
		}
	}
}

// Len is the number of open subscriptions.
func (f *Fanout) Len() int { return len(*f.subs.Load()) }

// Cut is the number of subscriptions cut off, ever: for being slow, or by
// CutAll with a reason.
func (f *Fanout) Cut() int64 { return f.cut.Load() }

// Close ends every subscription, as their owners' Close would.
func (f *Fanout) Close() { f.CutAll(nil) }

// CutAll ends every subscription with err as the reason their Err gives
// (nil: as if closed by their owners): a source that lost changes says so
// to every subscriber, which must resynchronise.
func (f *Fanout) CutAll(err error) {
	for _, s := range *f.subs.Load() {
		s.end(err)
	}
}

// remove takes an ended subscription out of the list.
func (f *Fanout) remove(s *Subscription, err error) {
	f.mu.Lock()
	old := *f.subs.Load()
	next := make([]*Subscription, 0, len(old))
	for _, o := range old {
		if o != s {
			next = append(next, o)
		}
	}
	f.subs.Store(&next)
	f.mu.Unlock()
	if err != nil {
		f.cut.Add(1)
	}
	if len(next) == 0 && f.idle != nil {
		f.idle()
	}
}

// C is closed when the subscription ends; Err then says why.
func (s *Subscription) C() <-chan *apollo.Change { return s.c }

// Err says why the subscription was cut off (ErrSlowSubscriber, or the
// reason given to CutAll); nil if it was closed by its owner or is still
// open.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is idempotent.
func (s *Subscription) Close() { s.end(nil) }

func (s *Subscription) end(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.err = true, err
	close(s.c)
	s.mu.Unlock()
	s.f.remove(s, err)
}
