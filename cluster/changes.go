package cluster

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// changePublisher is a live observer of a partition's bus
// (bus.Options.Live; quiet while the partition is taken, when the replay
// may hand the live observers changes for the feed): it publishes every change on core NATS, apollo.changes.<tenant>.<partition>, for the streams of
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
	quiet  atomic.Bool // set while the partition replays its log: nothing is published

	mu      sync.Mutex
	pending []changeBatch // oldest first
	free    [][]byte      // published batches' buffers, for reuse
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

type changeBatch struct {
	subject string
	data    []byte // changesBinMagic, then the changes (changebin.go)
}

// changesMagic starts a batch of changes in JSON, each after its uvarint
// length, as nodes before changesBinMagic published them; before that, a
// message was one change's JSON. Readers still read both: in a rolling
// upgrade, older nodes publish them.
const changesMagic = "\x00AC1"

// maxChangeBatch is the size past which a batch of changes takes no more,
// so a message stays far under NATS's default max_payload of 1 MiB (a
// change with a long history can still go over the mark).
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
	if cp.closed.Load() || cp.quiet.Load() {
		return
	}
	subj := changeSubject(c.Task.Tenant, cp.p)
	cp.mu.Lock()
	n := len(cp.pending)
	opened := false
	if n == 0 || cp.pending[n-1].subject != subj || len(cp.pending[n-1].data) >= maxChangeBatch {
		cp.pending = append(cp.pending, changeBatch{subject: subj, data: append(cp.buffer(), changesBinMagic...)})
		n, opened = n+1, true
	}
	// Encoded in place: the form needs no length before each change.
	b := &cp.pending[n-1]
	var err error
	if b.data, err = appendChange(b.data, c); err != nil && opened {
		// A change the wire form cannot carry (the bus never makes one)
		// leaves the batch it opened empty: nothing to publish.
		cp.free = append(cp.free, b.data[:0])
		cp.pending = cp.pending[:n-1]
	}
	cp.mu.Unlock()
	select {
	case cp.wake <- struct{}{}:
	default:
	}
}

// buffer is a published batch's buffer, emptied, or a new one. Call it
// with cp.mu held.
func (cp *changePublisher) buffer() []byte {
	if k := len(cp.free); k > 0 {
		buf := cp.free[k-1]
		cp.free = cp.free[:k-1]
		return buf
	}
	// Buffers are reused: growing a fresh one per batch was most of what
	// publishing a change cost.
	return make([]byte, 0, 64<<10)
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

// resyncMagic is the whole of a message on a partition's change subject
// that asks every node's stream to resynchronise: the partition's new
// owner publishes it when the owner before stopped without handing over,
// so that changes it had made durable and not published are not missed
// (partition.recover). Nodes that do not know it cut their listeners too:
// a message they cannot read is changes lost.
const resyncMagic = "\x00ACR"

// errTakeover is what a resync marker says: changes may have been lost.
var errTakeover = errors.New("a partition changed owner without a handover")

// resync asks every node's stream to resynchronise after partition p
// changed owner without a handover.
func (n *Node) resync(p int) {
	m := &nats.Msg{Subject: changeSubject("", p), Data: []byte(resyncMagic), Header: nats.Header{hdrNode: {n.opts.NodeID}}}
	if err := n.opts.Conn.PublishMsg(m); err != nil {
		n.log.Warn("could not ask the streams to resynchronise after a takeover; changes the owner before applied last may be missing from them until their clients reconnect",
			"partition", p, "err", err)
	}
}

// decodeChanges calls fn for each change of a message a changePublisher
// published: a binary batch, a JSON batch or one change's JSON, whichever
// version of Apollo-11 wrote it. It stops at the first damage, after
// handing fn the changes before it. The record's tenant is not in the
// message (it never comes from a body); the task's is. passed counts the
// changes of a binary batch passed over for a status or kind this build
// does not know (decodeBinChanges); the JSON forms come from older
// builds only, whose names this one knows.
func decodeChanges(data []byte, fn func(*apollo.Change)) (passed int, err error) {
	switch {
	case hasMagic(data, changesBinMagic):
		return decodeBinChanges(data[len(changesBinMagic):], fn)
	case hasMagic(data, changesMagic):
		return 0, splitBatch(data[len(changesMagic):], func(rec []byte) error {
			c, err := decodeChange(rec)
			if err != nil {
				return err
			}
			fn(c)
			return nil
		})
	}
	c, err := decodeChange(data)
	if err != nil {
		return 0, err
	}
	fn(c)
	return 0, nil
}

func hasMagic(data []byte, magic string) bool {
	return len(data) >= len(magic) && string(data[:len(magic)]) == magic
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
	nc    *nats.Conn
	clock apollo.Clock
	warn  func(msg string, args ...any)
	mu    sync.Mutex // guards sub, cutAt, later and closed
	sub   *nats.Subscription
	out   *bus.Fanout
	cutAt time.Time
	owed  atomic.Bool // changes were lost since the last cut
	// passed counts the changes passed over for a status or kind this
	// build does not know (decodeBinChanges), for the warning.
	passed atomic.Int64
	// later is set while a cut waits for cutEvery to pass since the last
	// one: losses do not wait for a message that may never come.
	later  bool
	closed bool           // by close: no cut waits any more
	done   chan struct{}  // closed by close: a waiting cut gives up
	wg     sync.WaitGroup // the waiting cut; close waits for it
}

// ErrChangesLost is why a node's change listeners are cut off: a change
// message was lost or could not be read, so they must resynchronise.
var ErrChangesLost = errors.New("cluster: changes from the partition owners were lost or unreadable; resynchronise")

// cutEvery spaces the cuts that lost changes cause. Each makes every
// stream client take a snapshot, which a node lists from every node: a
// publisher whose every message this node cannot read (a newer format in
// a rolling upgrade) turns the live view into a snapshot a second rather
// than a snapshot a message.
const cutEvery = time.Second

func newFanIn(nc *nats.Conn, clock apollo.Clock, warn func(msg string, args ...any)) *fanIn {
	f := &fanIn{nc: nc, clock: clock, warn: warn, done: make(chan struct{})}
	f.out = bus.NewFanout(f.idle)
	return f
}

func (f *fanIn) subscribe(buffer int) (*bus.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sub == nil {
		dropped := 0 // of this subscription, as deliver last saw it
		sub, err := f.nc.Subscribe(changesPrefix+">", func(m *nats.Msg) { f.deliver(m, &dropped) })
		if err != nil {
			return nil, err
		}
		// Changes arrive faster than one goroutine decodes them only under
		// a load the stream cannot show anyway; past this NATS drops and
		// counts (slow consumer), and the clients resynchronise (deliver).
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
// A message it cannot read, or messages NATS dropped, are changes lost:
// the listeners are cut off, which makes a stream hub resubscribe and
// resynchronise its clients from a snapshot.
func (f *fanIn) deliver(m *nats.Msg, dropped *int) {
	passed, err := 0, errTakeover
	if string(m.Data) != resyncMagic {
		passed, err = decodeChanges(m.Data, f.out.Publish)
	}
	if passed > 0 {
		// Not lost: this node cannot show them whatever it does, and a
		// snapshot would not have them either.
		f.warn("changes of a status or record kind this node does not know were passed over, the rest of their batch delivered: a node of a newer build publishes them; upgrade this one",
			"subject", m.Subject, "node", m.Header.Get(hdrNode), "passed", passed, "total", f.passed.Add(int64(passed)))
	}
	d, _ := m.Sub.Dropped()
	if err != nil || d != *dropped {
		*dropped = d
		f.warn("changes lost; the stream's clients resynchronise", "subject", m.Subject, "node", m.Header.Get(hdrNode), "err", err, "dropped", d)
		f.owed.Store(true)
	}
	if f.owed.Load() {
		f.cut()
	}
}

// reconnected cuts the listeners off once the connection to NATS is back
// after a break: core NATS kept none of the changes published meanwhile.
func (f *fanIn) reconnected() {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return
	}
	f.warn("changes lost; the stream's clients resynchronise", "err", "the connection to NATS was broken: the changes published meanwhile did not reach this node")
	f.owed.Store(true)
	f.cut()
}

// cut ends every subscription, unless the last cut was under cutEvery
// ago: then the changes lost stay owed, and the cut comes when cutEvery
// has passed, or at a message handled after that, whichever is first.
func (f *fanIn) cut() {
	now := f.clock.Now()
	f.mu.Lock()
	if wait := cutEvery - now.Sub(f.cutAt); wait > 0 {
		if !f.later && !f.closed {
			f.later = true
			f.wg.Add(1)
			go f.cutLater(f.clock.NewTimer(wait))
		}
		f.mu.Unlock()
		return
	}
	f.cutAt = now
	f.owed.Store(false)
	f.mu.Unlock()
	f.out.CutAll(ErrChangesLost)
}

// cutLater cuts what is still owed when t fires, unless the fan-in closes
// first.
func (f *fanIn) cutLater(t apollo.Timer) {
	defer f.wg.Done()
	defer t.Stop()
	select {
	case <-t.C():
	case <-f.done:
		return
	}
	f.mu.Lock()
	f.later = false
	f.mu.Unlock()
	if f.owed.Load() {
		f.cut()
	}
}

// close ends every subscription.
func (f *fanIn) close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.out.Close()
}
