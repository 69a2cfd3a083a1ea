package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

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
// when JetStream already had that message (the same events resent within
// the duplicate window), rejected when it is invalid, retry_later when
// JetStream refused or did not answer in time. Whether an event is a late
// duplicate or an illegal transition is decided by the partition's owner
// afterwards and shows in its stats, not here.
//
// The events of one tenant and partition go as one message (a batch,
// batch.go, in the request's order), published without waiting; the answer
// waits once for every message's acknowledgement. Storing, acknowledging
// and delivering a message costs JetStream about as much as the whole
// single-server path costs per event, so one message per event made the
// mode several times dearer per event (docs/benchmarks.md).
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
	batches := n.batchEvents(evs, out)
	for i := range batches {
		b := &batches[i]
		if b.fut, b.err = n.js.PublishMsgAsync(b.msg(evs), jetstream.WithExpectStream(EventsStream)); b.err != nil {
			b.answer(out, retryLater(b.err))
		}
	}
	timer := n.opts.Clock.NewTimer(n.opts.PublishTimeout)
	defer timer.Stop()
	for i := range batches {
		b := &batches[i]
		if b.fut == nil {
			continue
		}
		select {
		case ack := <-b.fut.Ok():
			b.acked(out, ack)
		case err := <-b.fut.Err():
			b.answer(out, retryLater(err))
		case <-timer.C():
			expire(batches[i:], out)
			return nil
		case <-ctx.Done():
			expire(batches[i:], out)
			return nil
		}
	}
	return nil
}

// eventBatch is the events of one request bound for one subject, as one
// message.
type eventBatch struct {
	subject string
	idx     []int  // indexes into the request's events, in order
	data    []byte // the batch (batch.go)
	fut     jetstream.PubAckFuture
	err     error
}

// batchEvents validates and encodes the events, answering the invalid
// ones in out, and groups the rest by subject (tenant and partition), in
// the request's order within each group.
func (n *Node) batchEvents(evs []apollo.Event, out []bus.Outcome) []eventBatch {
	var batches []eventBatch
	open := map[string]int{} // subject → its batch still taking events
	for i := range evs {
		ev := &evs[i]
		if err := ev.Validate(); err != nil {
			out[i] = bus.Invalid(err)
			continue
		}
		subj := EventSubject(ev.Tenant, Partition(ev.TaskID, n.opts.Partitions))
		k, ok := open[subj]
		if ok && len(batches[k].data) > maxEventBatch {
			ok = false
		}
		if !ok {
			k = len(batches)
			open[subj] = k
			batches = append(batches, eventBatch{subject: subj})
		}
		b := &batches[k]
		b.idx = append(b.idx, i)
		b.data = appendBatchEvent(b.data, ev)
	}
	return batches
}

// msg is the batch's message. A batch of one event has the event's own
// message ID, as an agent's event has. A larger batch's ID is a digest of
// its events' IDs: a request resent whole is a duplicate, as each of its
// events would have been; events resent in another grouping are stored
// again, and the owner drops them as the late duplicates they are.
func (b *eventBatch) msg(evs []apollo.Event) *nats.Msg {
	m := &nats.Msg{Subject: b.subject, Data: b.data, Header: nats.Header{}}
	if len(b.idx) == 1 {
		ev := &evs[b.idx[0]]
		m.Header.Set(jetstream.MsgIDHeader, MsgID(ev.Tenant, ev.TaskID, ev.Sequence))
		return m
	}
	h := sha256.New()
	for _, i := range b.idx {
		ev := &evs[i]
		h.Write([]byte(MsgID(ev.Tenant, ev.TaskID, ev.Sequence)))
		h.Write([]byte{'\n'})
	}
	m.Header.Set(jetstream.MsgIDHeader, "batch:"+hex.EncodeToString(h.Sum(nil)))
	return m
}

func (b *eventBatch) answer(out []bus.Outcome, o bus.Outcome) {
	for _, i := range b.idx {
		out[i] = o
	}
}

func (b *eventBatch) acked(out []bus.Outcome, ack *jetstream.PubAck) {
	if ack.Duplicate {
		b.answer(out, bus.Outcome{Result: bus.Duplicate})
		return
	}
	b.answer(out, bus.Outcome{Result: bus.Accepted})
}

// expire answers the batches still waiting: accepted if the ack is in,
// retry_later otherwise.
func expire(batches []eventBatch, out []bus.Outcome) {
	for i := range batches {
		b := &batches[i]
		if b.fut == nil {
			continue
		}
		select {
		case ack := <-b.fut.Ok():
			b.acked(out, ack)
		default:
			b.answer(out, retryLater(context.DeadlineExceeded))
		}
	}
}

func retryLater(err error) bus.Outcome {
	msg := "JetStream did not store the event"
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "JetStream did not answer in time"
	}
	return bus.Outcome{Result: bus.RetryLater, Err: &apollo.Error{Code: apollo.EUNAVAILABLE, Message: msg, Hint: "resend this event later"}}
}
