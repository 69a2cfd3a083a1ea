package cluster

import (
	"encoding/binary"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// changePublisher is a live observer of a partition's bus
// (bus.Options.Live: it never sees the changes replayed when the
// partition is taken): it publishes every change on core NATS, apollo.changes.<tenant>.<partition>, for the streams of
// every node. Core NATS, not JetStream: a stream client that misses
// changes resynchronises from a snapshot anyway.
//
// Changes go in batches: Apply adds a change to the batch of its subject
// and one goroutine publishes what has gathered, as the decision log does.
// One message per change cost a node more CPU than deciding the event.
type changePublisher struct {
	nc     *nats.Conn
	p      int
	node   string
	closed atomic.Bool

	mu      sync.Mutex
	pending []changeBatch // oldest first
	free    [][]byte      // published batches' buffers, for reuse
	scratch []byte        // the change being encoded
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

type changeBatch struct {
	subject string
	data    []byte // changesMagic, then each change's JSON after its uvarint length
}

// changesMagic starts a batch of changes; a single change is its JSON.
const changesMagic = "\x00AC1"

// maxChangeBatch bounds one message of changes, under NATS's default
// max_payload of 1 MiB.
const maxChangeBatch = 256 << 10

var _ bus.Observer = (*changePublisher)(nil)

func newChangePublisher(nc *nats.Conn, p int, node string) *changePublisher {
	cp := &changePublisher{nc: nc, p: p, node: node,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go cp.loop()
	return cp
}

// Apply adds c to the batch of its subject. Errors (a closed connection,
// a slow server) lose the change for the stream only; the state and the
// metrics have it.
func (cp *changePublisher) Apply(c *apollo.Change) {
	if cp.closed.Load() {
		return
	}
	subj := changeSubject(c.Task.Tenant, cp.p)
	cp.mu.Lock()
	// Encoded into a buffer kept for the next change: its length goes
	// before it, and which batch takes it depends on its size.
	data, err := appendChangeJSON(cp.scratch[:0], c)
	if cap(data) <= maxChangeBatch {
		cp.scratch = data[:0]
	}
	if err != nil {
		cp.mu.Unlock()
		return
	}
	n := len(cp.pending)
	if n == 0 || cp.pending[n-1].subject != subj || len(cp.pending[n-1].data)+len(data) > maxChangeBatch {
		var buf []byte
		if k := len(cp.free); k > 0 {
			buf, cp.free = cp.free[k-1], cp.free[:k-1]
		} else {
			// Buffers are reused: growing a fresh one per batch was most
			// of what publishing a change cost.
			buf = make([]byte, 0, 64<<10)
		}
		cp.pending = append(cp.pending, changeBatch{subject: subj, data: append(buf, changesMagic...)})
		n++
	}
	b := &cp.pending[n-1]
	b.data = binary.AppendUvarint(b.data, uint64(len(data)))
	b.data = append(b.data, data...)
	cp.mu.Unlock()
	select {
	case cp.wake <- struct{}{}:
	default:
	}
}

func (cp *changePublisher) loop() {
	defer close(cp.done)
	for {
		select {
		case <-cp.wake:
			cp.flush()
		case <-cp.stop:
			cp.flush()
			return
		}
	}
}

// flush publishes the gathered batches, in order. The node's name goes
// along: a change applied by a node that then died before its decision
// was durable is applied again by the next owner, and a reader can tell
// the two apart.
func (cp *changePublisher) flush() {
	cp.mu.Lock()
	batches := cp.pending
	cp.pending = nil
	cp.mu.Unlock()
	for _, b := range batches {
		// PublishMsg copies the data into the connection's buffer.
		cp.nc.PublishMsg(&nats.Msg{Subject: b.subject, Data: b.data, Header: nats.Header{hdrNode: []string{cp.node}}})
	}
	cp.mu.Lock()
	for _, b := range batches {
		if len(cp.free) < 4 && cap(b.data) <= 2*maxChangeBatch {
			cp.free = append(cp.free, b.data[:0])
		}
	}
	cp.mu.Unlock()
}

// close publishes what was gathered and stops the goroutine. Call it
// after the bus has stopped: later changes are not published.
func (cp *changePublisher) close() {
	cp.closed.Store(true)
	select {
	case <-cp.stop:
	default:
		close(cp.stop)
	}
	<-cp.done
}

// decodeChanges calls fn for each change of a message a changePublisher
// published: a batch, or one change's JSON. The record's tenant is not in
// its JSON (it never comes from a body); the task's is.
func decodeChanges(data []byte, fn func(*apollo.Change)) error {
	if len(data) < len(changesMagic) || string(data[:len(changesMagic)]) != changesMagic {
		c, err := decodeChange(data)
		if err != nil {
			return err
		}
		fn(c)
		return nil
	}
	return splitBatch(data[len(changesMagic):], func(rec []byte) error {
		c, err := decodeChange(rec)
		if err != nil {
			return err
		}
		fn(c)
		return nil
	})
}

// decodeChange reads one change's JSON.
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
	decodeChanges(m.Data, func(c *apollo.Change) { f.out.Publish(c) })
}

// close ends every subscription.
func (f *fanIn) close() { f.out.Close() }
