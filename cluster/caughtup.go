package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// caughtUp tells when a partition has decided its events up to a
// position of the events stream: the barrier an answer about the open
// ping runs waits for. A ping started through one node and ended at once
// through another reaches its owner as two messages; the end's node asks
// the owners for the job's open run as soon as the start is stored, and
// the owner may not have read or decided the start by then (JetStream's
// delivery, the batch waiting for the decision log). Answered from the
// bus at once, the end found no open run and became a run of its own,
// and the start stayed running until its timeout told of it
// (TestBusNodePingEndThroughAnotherNode).
type caughtUp struct {
	mu   sync.Mutex
	done uint64        // the events stream's sequence decided up to
	next chan struct{} // closed when done moves

	probe lastProbe // the partition's last stored message, asked of JetStream
}

// decided records that every message up to stream sequence seq is
// decided.
func (c *caughtUp) decided(seq uint64) {
	c.mu.Lock()
	c.done = max(c.done, seq)
	if c.next != nil {
		close(c.next)
		c.next = nil
	}
	c.mu.Unlock()
}

// wait returns true once the messages up to stream sequence target are
// decided, false when timeout passes first.
func (c *caughtUp) wait(target uint64, timeout time.Duration) bool {
	var t *time.Timer
	for {
		c.mu.Lock()
		if c.done >= target {
			c.mu.Unlock()
			return true
		}
		if c.next == nil {
			c.next = make(chan struct{})
		}
		next := c.next
		c.mu.Unlock()
		if t == nil {
			t = time.NewTimer(timeout)
			defer t.Stop()
		}
		select {
		case <-next:
		case <-t.C:
			return false
		}
	}
}

// catchUp waits until the partition has decided every event stored for
// it when called, for at most timeout: it asks JetStream for the
// partition's last stored message (one request, shared by the queries
// that come while one is out: lastprobe.go) and waits for the apply loop
// to pass it. An error of JetStream, or the timeout, leaves the
// answer to what is decided: as before the barrier.
func (pt *partition) catchUp(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seq, err := pt.caught.probe.last(ctx, func(ctx context.Context) (uint64, error) {
		m, err := pt.n.events.GetLastMsgForSubject(ctx, eventsFilter(pt.id))
		if err != nil {
			return 0, err
		}
		return m.Sequence, nil
	})
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return // nothing stored for the partition
	case err != nil:
		pt.n.warn("a query is answered without waiting for the partition's last events", "partition", pt.id, "err", err)
		return
	}
	if !pt.caught.wait(seq, time.Until(deadlineOf(ctx))) {
		pt.n.warn("a query is answered before the partition has decided its last events", "partition", pt.id,
			"sequence", seq)
	}
}

// catchUpAll is catchUp for each of parts, at once: a node answering for
// several partitions waits one round trip to JetStream and the slowest
// partition, not the sum of them (it asked one after the other inside
// the NATS callback before: eight partitions cost eight round trips
// before the node answered, and any other question waited behind).
func catchUpAll(parts []*partition, timeout time.Duration) {
	if len(parts) == 1 {
		parts[0].catchUp(timeout)
		return
	}
	var wg sync.WaitGroup
	for _, pt := range parts {
		wg.Go(func() { pt.catchUp(timeout) })
	}
	wg.Wait()
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
