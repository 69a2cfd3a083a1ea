package cluster

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// changePublisher is an observer of a partition's bus: it publishes every
// change applied live (not the ones replayed when the partition was taken)
// on core NATS, apollo.changes.<tenant>.<partition>, for the streams of
// every node. Core NATS, not JetStream: a stream client that misses
// changes resynchronises from a snapshot anyway.
type changePublisher struct {
	nc   *nats.Conn
	p    int
	node string
	live atomic.Bool
}

var _ bus.Observer = (*changePublisher)(nil)

// Apply publishes c. Errors (a closed connection, a slow server) lose the
// change for the stream only; the state and the metrics have it.
func (cp *changePublisher) Apply(c *apollo.Change) {
	if !cp.live.Load() {
		return
	}
	data, err := json.Marshal(c)
	if err != nil {
		return
	}
	// The node's name goes along: a change applied by a node that then
	// died before its decision was durable is applied again by the next
	// owner, and a reader can tell the two apart.
	cp.nc.PublishMsg(&nats.Msg{Subject: changeSubject(c.Task.Tenant, cp.p), Data: data, Header: nats.Header{hdrNode: []string{cp.node}}})
}

// decodeChange reads a change published by a changePublisher. The
// record's tenant is not in its JSON (it never comes from a body); the
// task's is.
func decodeChange(data []byte) (*apollo.Change, error) {
	c := new(apollo.Change)
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	c.Record.Tenant = c.Task.Tenant
	return c, nil
}

// Subscription receives the changes applied on every node, like a
// bus.Subscription does for one bus: C is closed when it ends, and Err is
// bus.ErrSlowSubscriber if it was cut off for not keeping up.
type Subscription struct {
	f      *fanIn
	c      chan *apollo.Change
	mu     sync.Mutex
	closed bool
	err    error
}

// C delivers the changes; it is closed when the subscription ends.
func (s *Subscription) C() <-chan *apollo.Change { return s.c }

// Err says why the subscription ended: nil if closed by its owner.
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
	s.f.remove(s)
}

// fanIn holds the node's one NATS subscription to apollo.changes.> while
// anyone listens, and hands each change to every Subscription.
type fanIn struct {
	nc  *nats.Conn
	mu  sync.Mutex
	sub *nats.Subscription
	all atomic.Pointer[[]*Subscription]
	cut atomic.Int64
}

func newFanIn(nc *nats.Conn) *fanIn {
	f := &fanIn{nc: nc}
	f.all.Store(&[]*Subscription{})
	return f
}

func (f *fanIn) subscribe(buffer int) (*Subscription, error) {
	s := &Subscription{f: f, c: make(chan *apollo.Change, max(buffer, 1))}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sub == nil {
		sub, err := f.nc.Subscribe(changesPrefix+">", f.deliver)
		if err != nil {
			return nil, err
		}
		// Changes arrive faster than one goroutine decodes them only under
		// a load the stream cannot show anyway; past this NATS drops and
		// counts (slow consumer), and the clients resynchronise.
		sub.SetPendingLimits(1<<16, 64<<20)
		f.sub = sub
	}
	old := *f.all.Load()
	next := append(append(make([]*Subscription, 0, len(old)+1), old...), s)
	f.all.Store(&next)
	return s, nil
}

func (f *fanIn) remove(s *Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.all.Load()
	next := make([]*Subscription, 0, len(old))
	for _, o := range old {
		if o != s {
			next = append(next, o)
		}
	}
	f.all.Store(&next)
	if len(next) == 0 && f.sub != nil {
		f.sub.Unsubscribe()
		f.sub = nil
	}
	if s.err != nil {
		f.cut.Add(1)
	}
}

// deliver runs on the NATS subscription's goroutine: one at a time, in
// the order the server sent them, so each task's changes stay in order.
func (f *fanIn) deliver(m *nats.Msg) {
	c, err := decodeChange(m.Data)
	if err != nil {
		return
	}
	for _, s := range *f.all.Load() {
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
			s.end(bus.ErrSlowSubscriber)
		}
	}
}

// close ends every subscription.
func (f *fanIn) close() {
	for _, s := range *f.all.Load() {
		s.Close()
	}
}
