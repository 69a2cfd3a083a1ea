package cluster

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// lease is a partition this node holds in the lease bucket.
type lease struct {
	p   int
	rev uint64
	// until is when, by this node's clock, it stops counting on the lease
	// if it cannot renew (leaseUntil).
	until time.Time
	part  *partition // nil while being rebuilt
	sub   *nats.Subscription
	// questions are those about the partition's tasks, heard and not yet
	// answered (serveTask); stopAnswering ends their answering goroutine.
	questions     *questionQueue
	stopAnswering context.CancelFunc
}

// keep renews, gives up and claims leases every RenewEvery until Stop.
// ctx is cancelled by Stop: rebuilds under way give up.
func (n *Node) keep(ctx context.Context) {
	t := n.opts.Clock.NewTicker(n.opts.RenewEvery)
	defer t.Stop()
	// The first round's rebuilds have their own group: Ready waits for
	// them while later rounds add to opening (an Add concurrent with a
	// Wait on one WaitGroup is a race).
	var first, opening sync.WaitGroup
	defer opening.Wait()
	defer first.Wait()
	for round := 0; ; round++ {
		select {
		case <-t.C():
		case <-n.kickc:
		case <-ctx.Done():
			return
		}
		if round > 0 {
			n.round(ctx, &opening)
			n.checkReady()
			continue
		}
		n.round(ctx, &first)
		n.life.Go(func(context.Context) error { // Ready: not before the first claims are rebuilt
			first.Wait()
			n.readyMu.Lock()
			n.firstDone = true
			n.readyMu.Unlock()
			n.checkReady()
			return nil
		})
	}
}

// round is one pass of the keeper: heartbeat, renew, drop what is lost or
// failed, then balance.
func (n *Node) round(ctx context.Context, opening *sync.WaitGroup) {
	// Each step gets a renewal interval: a slow answer delays the next
	// round, and the leases' local deadlines keep that safe.
	step := func(f func(ctx context.Context)) {
		sctx, cancel := context.WithTimeout(ctx, n.opts.RenewEvery)
		defer cancel()
		f(sctx)
	}
	select {
	case <-n.evicted:
		return // gave way to another process of this ID
	default:
	}
	gaveWay := false
	step(func(ctx context.Context) {
		switch err := n.heartbeat(ctx); {
		case errors.Is(err, errAnotherInstance):
			n.giveWay(ctx)
			gaveWay = true
		case err != nil:
			n.warn("heartbeat failed", "err", err)
		}
	})
	if gaveWay {
		return
	}
	step(n.renew)
	if !n.opts.testNoClaim {
		step(func(sctx context.Context) { n.balance(sctx, ctx, opening) })
	}
}

// renew extends every held lease. A lease another node holds now, or
// that is gone, is dropped at once; one that could not be renewed (NATS
// unreachable) is dropped when its local deadline passes. A partition that
// stopped on its own is given up.
func (n *Node) renew(ctx context.Context) {
	n.mu.Lock()
	held := make([]*lease, 0, len(n.leases))
	for _, l := range n.leases {
		held = append(held, l)
	}
	n.mu.Unlock()
	live := held[:0]
	for _, l := range held {
		n.mu.Lock()
		part := l.part // set by open, under n.mu
		n.mu.Unlock()
		if part != nil && part.Failed() != nil {
			n.drop(ctx, l, true)
		} else {
			live = append(live, l)
		}
	}
	// All at once: a round costs one round trip however many leases.
	type result struct {
		rev  uint64
		err  error
		sent time.Time
	}
	res := make([]result, len(live))
	var wg sync.WaitGroup
	for i, l := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].sent = n.opts.Clock.Now()
			res[i].rev, res[i].err = n.renewOne(ctx, l)
		}()
	}
	wg.Wait()
	for i, l := range live {
		r := res[i]
		switch err := r.err; {
		case err == nil:
			n.mu.Lock()
			l.rev, l.until = r.rev, n.leaseUntil(r.sent)
			n.mu.Unlock()
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			n.log.Warn("lease lost: another node holds it or it expired", "partition", l.p, "err", err)
			n.drop(ctx, l, false)
		case n.opts.Clock.Now().After(l.until):
			n.log.Error("lease not renewed in time; giving the partition up", "partition", l.p, "err", err)
			n.drop(ctx, l, false)
		default:
			n.warn("lease renewal failed; retrying", "partition", l.p, "err", err)
		}
	}
}

// renewOne extends one lease and returns its new revision.
// ErrKeyExists means another node holds it: renew drops it at once.
func (n *Node) renewOne(ctx context.Context, l *lease) (uint64, error) {
	n.mu.Lock()
	rev := l.rev
	n.mu.Unlock()
	val := []byte(n.opts.NodeID)
	next, err := n.kv.Update(ctx, leaseKey(l.p), val, rev)
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return next, err
	}
	// A renewal whose answer was lost (a timeout) did change the
	// revision. Only this node writes its own ID: if the key still holds
	// it, the lease is still ours. If it cannot be read, whether it is is
	// unknown: the read's error makes renew retry until the lease's local
	// deadline, where ErrKeyExists would drop a lease still ours.
	e, gerr := n.kv.Get(ctx, leaseKey(l.p))
	switch {
	case gerr != nil:
		return 0, gerr // gone (ErrKeyNotFound, ErrKeyDeleted) is dropped too
	case string(e.Value()) != n.opts.NodeID:
		return 0, err
	}
	return n.kv.Update(ctx, leaseKey(l.p), val, e.Revision())
}

// drop stops a partition where it is and forgets its lease; with
// release, it also deletes the lease (if still ours) so another node can
// take it at once.
func (n *Node) drop(ctx context.Context, l *lease, release bool) {
	n.mu.Lock()
	if n.leases[l.p] != l {
		n.mu.Unlock()
		return
	}
	delete(n.leases, l.p)
	delete(n.owned, l.p)
	pt, sub, stopAnswering := l.part, l.sub, l.stopAnswering
	n.mu.Unlock()
	if sub != nil {
		sub.Unsubscribe()
	}
	if stopAnswering != nil {
		stopAnswering()
	}
	if pt != nil {
		pt.stop(false)
		n.uncount(pt)
	}
	if release {
		if err := n.giveUp(ctx, l); err != nil {
			n.warn("giving up a lease failed; it expires by itself", "partition", l.p, "err", err)
		}
	}
	n.hook("dropped", l.p)
}

// giveUp deletes l's lease from the bucket if it is still this node's, so
// another node can take the partition at once. The delete is made over
// the revision the node holds; after a renewal whose answer was lost
// (renewOne) that revision is stale until the next renewal, and the
// delete is refused. Only this node writes its own ID: if the key still
// holds it, the node deletes it at the revision read. Left there, the
// lease would stand until the bucket's TTL expired it, and the partition
// would be served by no one meanwhile. A key gone, or holding another
// node's ID, is not this node's to give up.
func (n *Node) giveUp(ctx context.Context, l *lease) error {
	n.mu.Lock()
	rev := l.rev // renew writes it under n.mu
	n.mu.Unlock()
	err := n.kv.Delete(ctx, leaseKey(l.p), jetstream.LastRevision(rev))
	if err == nil {
		return nil
	}
	e, gerr := n.kv.Get(ctx, leaseKey(l.p))
	switch {
	case errors.Is(gerr, jetstream.ErrKeyNotFound), errors.Is(gerr, jetstream.ErrKeyDeleted):
		return nil // deleted (the delete's answer lost), or expired
	case gerr != nil:
		return err
	case string(e.Value()) != n.opts.NodeID:
		return nil
	}
	return n.kv.Delete(ctx, leaseKey(l.p), jetstream.LastRevision(e.Revision()))
}

// release hands a serving partition over: decisions durable, bookmark,
// metrics flushed, then the lease deleted. It reports false, doing
// nothing, when l is not a lease of a partition this node serves (gone,
// or still being rebuilt).
func (n *Node) release(ctx context.Context, l *lease) bool {
	n.mu.Lock()
	if n.leases[l.p] != l || l.part == nil {
		n.mu.Unlock()
		return false
	}
	delete(n.owned, l.p)
	pt, sub, stopAnswering := l.part, l.sub, l.stopAnswering
	n.mu.Unlock()
	if sub != nil {
		sub.Unsubscribe()
	}
	if stopAnswering != nil {
		stopAnswering()
	}
	pt.stop(true)
	n.uncount(pt)
	n.mu.Lock()
	delete(n.leases, l.p)
	n.mu.Unlock()
	if err := n.giveUp(ctx, l); err != nil {
		n.warn("giving up a lease failed; it expires by itself", "partition", l.p, "err", err)
	}
	n.log.Info("partition handed over", "partition", l.p)
	n.hook("released", l.p)
	return true
}

// giveWay stops every partition of this node where it is, without giving
// the leases up (they may be the other process's now, under the same ID)
// and stops taking any: another process registered this node's ID while
// this one could not renew (paused, cut off). Its partitions' logs are
// fenced by the other's takeovers, so nothing it decided is lost; the
// process is told through Evicted, and should exit.
func (n *Node) giveWay(ctx context.Context) {
	n.log.Error("another process registered this node ID while this one could not renew it: this one gives its partitions up and serves none",
		"instance", n.instance, "hint", "give each node its own --node-id; stop this process")
	for _, l := range n.heldLeases() {
		n.drop(ctx, l, false)
	}
	n.evictOnce.Do(func() { close(n.evicted) })
}

// heldLeases returns the node's leases now, to act on outside its lock.
func (n *Node) heldLeases() []*lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Collect(maps.Values(n.leases))
}

// Evicted is closed when the node gave way to another process of its ID
// (giveWay): it serves no partition any more, and its process should exit.
func (n *Node) Evicted() <-chan struct{} { return n.evicted }

// releaseAll hands every partition over (Stop), and gives up the leases
// of those not serving yet. Whether a lease's partition serves is read
// under n.mu, by release and drop, never here: open sets it, and only the
// keeper's having stopped made a read here safe.
func (n *Node) releaseAll(ctx context.Context) {
	for _, l := range n.heldLeases() {
		if !n.release(ctx, l) {
			n.drop(ctx, l, true) // nothing, if l is gone
		}
	}
}

// balance gives up partitions over this node's share and claims free ones
// under it. The share is ceil(partitions / live nodes).
func (n *Node) balance(ctx, runCtx context.Context, opening *sync.WaitGroup) {
	nodes, taken := n.bucketView()
	nodes = max(nodes, 1)
	share := (n.opts.Partitions + nodes - 1) / nodes
	n.mu.Lock()
	mine := len(n.leases)
	var serving []*lease
	for _, l := range n.leases {
		if l.part != nil {
			serving = append(serving, l)
		}
	}
	n.mu.Unlock()
	if mine > share {
		slices.SortFunc(serving, func(a, b *lease) int { return b.p - a.p })
		for _, l := range serving[:min(len(serving), mine-share)] {
			n.release(ctx, l)
		}
		return
	}
	start := Partition(n.opts.NodeID, n.opts.Partitions) // spread the first claims
	now := n.opts.Clock.Now()
	for i := 0; i < n.opts.Partitions && mine < share; i++ {
		p := (start + i) % n.opts.Partitions
		n.mu.Lock()
		wait := n.backingOff(p, now)
		n.mu.Unlock()
		if taken[leaseKey(p)] || wait {
			continue
		}
		sent := n.opts.Clock.Now()
		rev, err := n.kv.Create(ctx, leaseKey(p), []byte(n.opts.NodeID))
		if err != nil {
			continue // another node was quicker, or NATS is away: next round
		}
		l := &lease{p: p, rev: rev, until: n.leaseUntil(sent)}
		n.mu.Lock()
		n.leases[p] = l
		n.mu.Unlock()
		mine++
		opening.Add(1)
		go func() {
			defer opening.Done()
			n.open(runCtx, l)
		}()
	}
}

// open rebuilds a claimed partition and starts serving it, unless the
// lease was lost meanwhile.
func (n *Node) open(ctx context.Context, l *lease) {
	pt, err := n.openPartition(ctx, l.p)
	if err != nil {
		n.mu.Lock()
		if n.leases[l.p] == l {
			delete(n.leases, l.p)
		}
		n.mu.Unlock()
		n.giveUp(context.WithoutCancel(ctx), l)
		if ctx.Err() == nil { // not the node stopping
			n.openFailed(l.p, err)
			n.checkReady()
		}
		return
	}
	n.openSucceeded(l.p)
	// Questions are stamped as they come and answered one at a time by a
	// goroutine of the node, which skips those whose askers stopped
	// waiting (listing.go). It answers until the partition leaves the
	// node (drop, release: at Stop too, where the partitions not yet
	// handed over go on answering), and Stop waits for it.
	qs := newQuestionQueue()
	done, stopAnswering := context.WithCancel(context.Background())
	n.answering.Add(1)
	go func() {
		defer n.answering.Done()
		answer(done, qs, func(q question) { n.serveTask(pt, q) })
	}()
	sub, err := n.opts.Conn.QueueSubscribe(rpcSubject(l.p), "owner", func(m *nats.Msg) { n.hear(done, qs, m) })
	if err == nil {
		// The subscription reaches the server with the connection's next
		// flush: until then another node's question finds no responder and
		// is answered "no owner answering", although this node already
		// says it serves the partition. The round trip makes the server
		// know it first (TestTaskReadWhileItsPartitionDoesNotAnswer failed
		// on a loaded machine).
		err = n.opts.Conn.FlushTimeout(n.opts.QueryTimeout)
	}
	if err != nil {
		n.log.Error("answering queries for a partition failed", "partition", l.p, "err", err)
	}
	n.mu.Lock()
	if n.leases[l.p] != l { // lost while rebuilding
		n.mu.Unlock()
		if sub != nil {
			sub.Unsubscribe()
		}
		stopAnswering()
		pt.stop(false)
		return
	}
	l.part, l.sub, l.questions, l.stopAnswering = pt, sub, qs, stopAnswering
	n.owned[l.p] = pt
	n.counted[l.p] = pt
	n.mu.Unlock()
	n.log.Info("partition taken", "partition", l.p, "handed_over", !pt.unclean)
	n.checkReady()
	if pt.unclean {
		// Only now, with the partition answering: the snapshots the
		// streams take list it.
		n.resync(l.p)
	}
	n.hook("taken", l.p)
}

func (n *Node) hook(event string, p int) {
	if n.opts.testHook != nil {
		n.opts.testHook(event, p)
	}
}

// leaseUntil is how long a lease written at sent may be counted on: two
// renewal intervals short of the TTL. The bucket expires the lease a TTL
// after the server stored the write, which is after sent; the keeper
// notices a passed deadline within one interval, and has one more to stop
// the partition (its last metrics flush included) before another node can
// claim it.
func (n *Node) leaseUntil(sent time.Time) time.Time {
	return sent.Add(n.opts.LeaseTTL - 2*n.opts.RenewEvery)
}

// watch keeps the node's view of the lease bucket, from a watcher, until
// Stop: which keys exist, and when this node last saw each written. A key
// that goes away (a lease given up, a node gone, a TTL expiry marker)
// makes the keeper run a round at once, so a free partition is claimed
// without waiting for the next renewal.
func (n *Node) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer w.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the current values are all in
			}
			n.viewMu.Lock()
			if e.Operation() == jetstream.KeyValuePut {
				n.view[e.Key()] = seen{at: n.opts.Clock.Now(), holder: string(e.Value())}
			} else {
				delete(n.view, e.Key())
			}
			n.viewMu.Unlock()
			if e.Operation() != jetstream.KeyValuePut {
				n.kick()
			}
		case <-ctx.Done():
			return
		}
	}
}

// bucketView counts the live nodes and lists the partitions taken. A key
// not written for a lease TTL counts as gone even if no expiry marker came
// (a NATS server before 2.11 sends none).
func (n *Node) bucketView() (nodes int, taken map[string]bool) {
	taken = map[string]bool{}
	n.eachLive(func(k string, s seen) {
		if strings.HasPrefix(k, "node.") {
			nodes++
		} else {
			taken[k] = true
		}
	})
	return nodes, taken
}

// seen is a lease-bucket key as this node's watcher last saw it written.
type seen struct {
	at     time.Time
	holder string // a lease's value: the node ID that holds it
}

// eachLive calls f, under viewMu, for every key of the bucket written
// less than a lease TTL ago.
func (n *Node) eachLive(f func(key string, s seen)) {
	stale := n.opts.Clock.Now().Add(-n.opts.LeaseTTL)
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	for k, s := range n.view {
		if !s.at.Before(stale) {
			f(k, s)
		}
	}
}
