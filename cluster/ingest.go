package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// maxEventBatch bounds the payload of one batch message in the events
// stream, well under NATS's default max_payload of 1 MiB (an event's JSON
// is at most a few KiB; one over the bound goes in a batch of its own).
const maxEventBatch = 256 << 10

// Publish stores the events in the events stream and answers each:
// accepted once JetStream acknowledged the message holding it, duplicate
// when JetStream already had that message, rejected when it is invalid,
// retry_later when JetStream refused or did not answer in time. Whether an
// event is a late duplicate or an illegal transition is decided by the
// partition's owner afterwards and shows in its stats, not here.
//
// The events go to the events stream in batches (batch.go), one message
// per subject (tenant and partition) at a time: a group commit. A request
// queues its events for each subject (in its order) behind the events of
// the requests that came before; while the subject's last message is not
// acknowledged they wait, and when it is, or at once if nothing was in
// flight, everything queued for the subject goes as one message (up to
// maxEventBatch). Each request then waits for the acknowledgements of the
// messages holding its events. Storing, acknowledging and delivering a
// message costs JetStream about as much as the single server's whole path
// costs per event, and with requests of tens of events spread over the
// partitions a message per request and subject held a handful of events:
// concurrent requests share messages instead (docs/benchmarks.md). Order
// holds: a subject's queue is sent in order, one message at a time, on
// one connection, so a request's events for a subject are stored in its
// order and after those of any request queued before it.
//
// Nothing here runs on a goroutine of its own: JetStream's answers arrive
// through the handlers of the node's events publisher (published), which
// only record them; the next message of a subject is sent by a request
// waiting for it, or by the next request to come.
func (n *Node) Publish(ctx context.Context, evs []apollo.Event, out []bus.Outcome) error {
	if len(out) < len(evs) {
		panic("cluster: Publish needs one Outcome per event")
	}
	select {
	case <-n.stop:
		for i := range evs {
			out[i] = bus.Outcome{Result: bus.RetryLater, Err: &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the node is shutting down", Hint: "resend this event to another node"}}
		}
		return nil
	default:
	}
	if e := n.cutOff(); e != nil {
		for i := range evs {
			out[i] = bus.Outcome{Result: bus.RetryLater, Err: e}
		}
		return nil
	}
	parts := n.partsOf(evs, out)
	defer n.releaseQueues(parts)
	for _, pt := range parts {
		q := pt.q
		q.mu.Lock()
		q.queue = append(q.queue, pt)
		n.sendLocked(q)
		queued := pt.fl == nil
		q.mu.Unlock()
		if queued && n.opts.testQueuedHook != nil {
			n.opts.testQueuedHook()
		}
	}
	timer := n.opts.Clock.NewTimer(n.opts.PublishTimeout)
	defer timer.Stop()
	for i, pt := range parts {
		if !n.await(ctx, timer.C(), pt) {
			n.abandon(parts[i:], out)
			return nil
		}
		pt.answer(out, pt.fl.outcome())
	}
	return nil
}

// subjectQueue is the group commit of one subject: the message in flight
// and the requests' parts waiting for the next one. Node.queues holds it
// while some request uses it.
type subjectQueue struct {
	subject string
	users   int // parts of requests holding it; under Node.queuesMu

	mu     sync.Mutex
	flying *flight // the last message sent; when done, the next may go
	queue  []*part // parts waiting for a message, in arrival order
}

// part is the events of one request bound for one subject.
type part struct {
	q    *subjectQueue
	idx  []int   // indexes into the request's events, in order
	data []byte  // the events, as in a batch after its magic (batch.go)
	ids  []byte  // the events' message IDs, each followed by idEnd
	fl   *flight // the message holding it, once sent; under q.mu

	// What partsOf groups the events by: the tenant (tok is its
	// TenantToken), and the partition.
	tenant, tok string
	p           int
}

// flight is one message sent to the events stream.
type flight struct {
	done chan struct{} // closed once ack or err is set
	ack  *jetstream.PubAck
	err  error
}

func (f *flight) finish(ack *jetstream.PubAck, err error) {
	f.ack, f.err = ack, err
	close(f.done)
}

func (f *flight) isDone() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// outcome is the answer for the events of a message that is done.
func (f *flight) outcome() bus.Outcome {
	switch {
	case f.err != nil:
		return retryLater(f.err)
	case f.ack.Duplicate:
		return bus.Outcome{Result: bus.Duplicate}
	}
	return bus.Outcome{Result: bus.Accepted}
}

// partsOf validates the events, answering the invalid ones in out, and
// groups the rest by subject, in the request's order within each group; a
// group over maxEventBatch is cut into several parts.
//
// It takes two passes. The first finds each event's part and how many
// bytes the part's data and message IDs take; the second writes them into
// three arrays that the parts share, each cut to its part's size, so that
// nothing grows. Growing each part's slices from nothing, with a subject
// string made for every event, was 9.6% of the bytes a node allocated
// (bench/intro-benchmarks.md).
func (n *Node) partsOf(evs []apollo.Event, out []bus.Outcome) []*part {
	type dest struct {
		tenant string
		p      int
	}
	type sizes struct{ events, data, ids int }
	var (
		ps    []part
		sz    []sizes
		open  = map[dest]int{} // the part of a subject still taking events
		toks  = map[string]string{}
		of    = make([]int32, len(evs))
		valid int
	)
	for i := range evs {
		ev := &evs[i]
		if err := ev.Validate(); err != nil {
			out[i] = bus.Invalid(err)
			of[i] = -1
			continue
		}
		d := dest{ev.Tenant, Partition(ev.TaskID, n.opts.Partitions)}
		k, ok := open[d]
		if !ok || sz[k].data > maxEventBatch {
			k = len(ps)
			open[d] = k
			tok, ok := toks[d.tenant]
			if !ok {
				tok = TenantToken(d.tenant)
				toks[d.tenant] = tok
			}
			ps = append(ps, part{tenant: d.tenant, tok: tok, p: d.p})
			sz = append(sz, sizes{})
		}
		of[i] = int32(k)
		s := &sz[k]
		s.events++
		s.data += batchEventSize(ev)
		s.ids += msgIDSize(ps[k].tok, ev.TaskID, ev.Sequence) + 1
		valid++
	}
	if len(ps) == 0 {
		return nil
	}
	var dataLen, idsLen int
	for _, s := range sz {
		dataLen += s.data
		idsLen += s.ids
	}
	idx, data, ids := make([]int, valid), make([]byte, dataLen), make([]byte, idsLen)
	parts := make([]*part, len(ps))
	var subj [96]byte
	for k := range ps {
		pt, s := &ps[k], sz[k]
		pt.idx, idx = idx[:0:s.events], idx[s.events:]
		pt.data, data = data[:0:s.data], data[s.data:]
		pt.ids, ids = ids[:0:s.ids], ids[s.ids:]
		pt.q = n.queueFor(appendEventSubject(subj[:0], pt.tok, pt.p))
		parts[k] = pt
	}
	for i := range evs {
		if of[i] < 0 {
			continue
		}
		ev, pt := &evs[i], &ps[of[i]]
		pt.idx = append(pt.idx, i)
		pt.data = appendBatchEvent(pt.data, ev)
		pt.ids = appendMsgID(pt.ids, pt.tok, ev.TaskID, ev.Sequence)
		pt.ids = append(pt.ids, idEnd)
	}
	return parts
}

// msgIDSize is the length appendMsgID appends.
func msgIDSize(tok, taskID string, seq int64) int {
	return len(tok) + 1 + len(taskID) + 1 + decimalLen(seq)
}

// decimalLen is the length of strconv.FormatInt(v, 10).
func decimalLen(v int64) int {
	n := 1
	u := uint64(v)
	if v < 0 {
		n, u = 2, uint64(-(v+1))+1
	}
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

// appendMsgID appends MsgID's form of an event's ID; tok is the tenant's
// token (TenantToken).
func appendMsgID(b []byte, tok, taskID string, seq int64) []byte {
	b = append(b, tok...)
	b = append(b, '/')
	b = append(b, taskID...)
	b = append(b, ':')
	return strconv.AppendInt(b, seq, 10)
}

// queueFor returns the queue of the subject written in subj, counting the
// caller as its user. The subject's string is made for a new queue only.
func (n *Node) queueFor(subj []byte) *subjectQueue {
	n.queuesMu.Lock()
	defer n.queuesMu.Unlock()
	q := n.queues[string(subj)]
	if q == nil {
		s := string(subj)
		q = &subjectQueue{subject: s}
		n.queues[s] = q
	}
	q.users++
	return q
}

// releaseQueues forgets a subject's queue once no request uses it, so that
// the map does not keep every tenant's subjects. Its last message may
// still be in flight (its requests gave up waiting); the next request then
// sends at once, after it on the same connection, so order holds.
func (n *Node) releaseQueues(parts []*part) {
	n.queuesMu.Lock()
	defer n.queuesMu.Unlock()
	for _, pt := range parts {
		q := pt.q
		if q.users--; q.users == 0 && n.queues[q.subject] == q {
			delete(n.queues, q.subject)
		}
	}
}

// sendLocked sends what is queued, as one message up to maxEventBatch at a
// time, while the subject has no message in flight. q.mu is held: the
// queue's order is the order of the messages on the connection.
func (n *Node) sendLocked(q *subjectQueue) {
	for len(q.queue) > 0 && (q.flying == nil || q.flying.isDone()) {
		k, size := 1, len(q.queue[0].data)
		for k < len(q.queue) && size+len(q.queue[k].data) <= maxEventBatch {
			size += len(q.queue[k].data)
			k++
		}
		fl := &flight{done: make(chan struct{})}
		m := batchMsg(q.subject, q.queue[:k], size)
		for _, pt := range q.queue[:k] {
			pt.fl = fl
		}
		clear(q.queue[:k])
		q.queue = q.queue[k:]
		if len(q.queue) == 0 {
			q.queue = nil
		}
		q.flying = fl
		n.flightsMu.Lock()
		n.flights[m] = fl
		n.flightsMu.Unlock()
		if _, err := n.ejs.PublishMsgAsync(m, jetstream.WithExpectStream(EventsStream)); err != nil {
			n.flightsMu.Lock()
			delete(n.flights, m)
			n.flightsMu.Unlock()
			fl.finish(nil, err)
		}
	}
}

// idEnd follows each event's message ID in a part's ids, which a batch's
// ID digests: a byte no ID holds (a task ID is UTF-8, which never has
// 0xFF; a tenant token and a sequence are ASCII), so that two lists of
// different IDs never digest the same bytes. It was '\n', which a task
// ID may hold: a request of the events a, b and c and one of
// "a:1\n<token>/b" and c had one message ID, and the second was answered
// duplicate and never stored (TestBatchIDsDoNotCollideOnNewlines).
const idEnd = 0xFF

// batchMsg is the message of the queued parts. A message of one event has
// the event's own message ID, as an agent's event has. A larger message's
// ID is a digest of its events' IDs: a request sent alone, and resent
// alone, is a duplicate, as each of its events would have been. Events
// resent in another grouping, which coalescing makes common (a resent
// request shares a message with whatever else was queued, or not), are
// stored again and answered accepted; the owner drops them as the late
// duplicates they are (bus: a sequence not above the task's last).
func batchMsg(subject string, parts []*part, size int) *nats.Msg {
	data := make([]byte, 0, len(batchMagic)+size)
	data = append(data, batchMagic...)
	for _, pt := range parts {
		data = append(data, pt.data...)
	}
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	if len(parts) == 1 && len(parts[0].idx) == 1 {
		ids := parts[0].ids
		m.Header.Set(jetstream.MsgIDHeader, string(ids[:len(ids)-1]))
		return m
	}
	h := sha256.New()
	for _, pt := range parts {
		h.Write(pt.ids)
	}
	m.Header.Set(jetstream.MsgIDHeader, "batch:"+hex.EncodeToString(h.Sum(nil)))
	return m
}

// published hears JetStream's answer to a message of the events stream:
// its acknowledgement, or an error (refused, no stream, the connection
// lost, no answer within PublishTimeout). It runs on the publisher's
// goroutine, sometimes under its lock: it only records the answer; the
// waiting requests send what comes next.
func (n *Node) published(m *nats.Msg, ack *jetstream.PubAck, err error) {
	if n.opts.testAckHook != nil {
		n.opts.testAckHook()
	}
	n.flightsMu.Lock()
	fl := n.flights[m]
	delete(n.flights, m)
	n.flightsMu.Unlock()
	if fl != nil {
		fl.finish(ack, err)
	}
}

// await waits until pt's message is answered, sending the subject's queue
// when its turn comes; false when the request's time ran out first.
func (n *Node) await(ctx context.Context, expired <-chan time.Time, pt *part) bool {
	q := pt.q
	for {
		q.mu.Lock()
		if pt.fl == nil {
			// The message ahead may be answered with none of its
			// senders left to send the queue.
			n.sendLocked(q)
		}
		fl := pt.fl
		wait := q.flying.done // pt is queued: sendLocked left a message in flight
		if fl != nil {
			wait = fl.done
		}
		q.mu.Unlock()
		select {
		case <-wait:
			if fl != nil {
				return true
			}
		case <-expired:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// abandon answers the parts of a request whose time ran out: from the ack
// if it is in, retry_later otherwise. A part not sent yet leaves the queue
// (its events are not stored).
func (n *Node) abandon(parts []*part, out []bus.Outcome) {
	late := retryLater(context.DeadlineExceeded)
	if e := n.cutOff(); e != nil { // the wait ran out because NATS went away
		late.Err = e
	}
	for _, pt := range parts {
		q := pt.q
		q.mu.Lock()
		fl := pt.fl
		if fl == nil {
			q.queue = deletePart(q.queue, pt)
		}
		q.mu.Unlock()
		if fl != nil && fl.isDone() {
			pt.answer(out, fl.outcome())
			continue
		}
		pt.answer(out, late)
	}
}

func deletePart(queue []*part, pt *part) []*part {
	for i, x := range queue {
		if x == pt {
			copy(queue[i:], queue[i+1:])
			queue[len(queue)-1] = nil
			return queue[:len(queue)-1]
		}
	}
	return queue
}

func (pt *part) answer(out []bus.Outcome, o bus.Outcome) {
	for _, i := range pt.idx {
		out[i] = o
	}
}

func retryLater(err error) bus.Outcome {
	msg := "JetStream did not store the event"
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		msg = "JetStream did not answer in time"
	}
	return bus.Outcome{Result: bus.RetryLater, Err: &apollo.Error{Code: apollo.EUNAVAILABLE, Message: msg, Hint: "resend this event later"}}
}
