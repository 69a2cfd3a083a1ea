package alert

import (
	"sync"

	"github.com/apollo-11/apollo"
)

// SubscriberBuffer is how many changes a subscriber may fall behind
// before it is dropped.
const SubscriberBuffer = 256

// subscribers is everyone reading alert changes (Subscribe).
type subscribers struct {
	mu  sync.Mutex
	set map[*subscriber]struct{}
}

// subscriber is one reader of alert changes.
type subscriber struct {
	ch   chan apollo.Alert
	once sync.Once
}

func newSubscribers() *subscribers { return &subscribers{set: map[*subscriber]struct{}{}} }

func (ss *subscribers) add() *subscriber {
	s := &subscriber{ch: make(chan apollo.Alert, SubscriberBuffer)}
	ss.mu.Lock()
	ss.set[s] = struct{}{}
	ss.mu.Unlock()
	return s
}

func (ss *subscribers) remove(s *subscriber) {
	ss.mu.Lock()
	delete(ss.set, s)
	ss.mu.Unlock()
	s.once.Do(func() { close(s.ch) })
}

// publish hands changes to every subscriber without waiting for any. One
// whose buffer is full is dropped (its channel closed); publish returns
// how many were.
func (ss *subscribers) publish(as []apollo.Alert) (dropped int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for s := range ss.set {
		for _, a := range as {
			select {
			case s.ch <- a:
				continue
			default:
			}
			delete(ss.set, s)
			s.once.Do(func() { close(s.ch) })
			dropped++
			break
		}
	}
	return dropped
}

// Subscribe returns every change of an alert from now on (opened,
// firing, resolved, back to inactive, acknowledged) and a function that
// ends the subscription. A reader more than SubscriberBuffer changes
// behind is dropped: its channel is closed, and it should list the
// alerts and subscribe again.
func (e *Engine) Subscribe() (<-chan apollo.Alert, func()) {
	s := e.subs.add()
	return s.ch, func() { e.subs.remove(s) }
}

// publish hands changes to subscribers without waiting for any.
func (e *Engine) publish(as []apollo.Alert) {
	if len(as) == 0 {
		return
	}
	for range e.subs.publish(as) {
		if ok, n := e.warns.Allow("slow", e.clock.Now()); ok {
			e.log.Warn("alert: dropped a subscriber that fell behind", "buffer", SubscriberBuffer, "suppressed", n)
		}
	}
}
