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

// fanIn holds the node's one NATS subscription to apollo.changes.> while
// anyone listens, and hands each change to every subscription through a
// bus.Fanout, which cuts off the slow ones as a bus does.
type fanIn struct {
	nc  *nats.Conn
	mu  sync.Mutex // guards sub
	sub *nats.Subscription
	out *bus.Fanout
}

func newFanIn(nc *nats.Conn) *fanIn {
	f := &fanIn{nc: nc}
	f.out = bus.NewFanout(f.idle)
	return f
}

func (f *fanIn) subscribe(buffer int) (*bus.Subscription, error) {
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
	return f.out.Subscribe(buffer), nil
}

// idle gives the NATS subscription up when the last listener has gone.
func (f *fanIn) idle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.out.Len() == 0 && f.sub != nil {
		f.sub.Unsubscribe()
		f.sub = nil
	}
}

// deliver runs on the NATS subscription's goroutine: one at a time, in
// the order the server sent them, so each task's changes stay in order.
func (f *fanIn) deliver(m *nats.Msg) {
	c, err := decodeChange(m.Data)
	if err != nil {
		return
	}
	f.out.Publish(c)
}

// close ends every subscription.
func (f *fanIn) close() { f.out.Close() }
