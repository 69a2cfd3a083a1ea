package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ownersWrite says whether a message of a decision log was written by an
// owner. Every owner's append expects the subject's last sequence
// (decisionLog.publish: fences, records, bookmarks, snapshot markers),
// JetStream refuses one whose expectation is wrong and stores the header
// with the message. A message without it was put on the subject by
// someone else (a tool, a client of the wrong subject, an attacker
// allowed to publish there): it decides nothing. Read as a record it
// failed the rebuild, at every claim of every node, and the partition
// was served by no one while its events were answered accepted; its
// Apollo-Input could move the position where events are read past
// events never decided, and a snapshot marker point at no snapshot
// (TestMessagesNoOwnerWroteOnALogArePassedOver).
func ownersWrite(h nats.Header) bool {
	return h.Get(jetstream.ExpectedLastSubjSeqHeader) != ""
}

// passForeign counts and warns of a message of partition p's log that no
// owner wrote, passed over.
func (n *Node) passForeign(p int, seq uint64) {
	n.logForeign.Add(1)
	n.warn("a message on the partition's log that no owner wrote was passed over (it has no fence header): find who publishes on apollo.log.> and grant that subject to the nodes only",
		"partition", p, "sequence", seq)
}

// replayLog calls fn for every record of partition p's decision log after
// stream sequence from, up to the log's end when the call began, passing
// over the messages no owner wrote. It returns that end and the highest
// input position the owners' messages carried.
func (n *Node) replayLog(ctx context.Context, p int, from uint64, fn func(rec []byte) error) (end, input uint64, err error) {
	last, err := n.logs.GetLastMsgForSubject(ctx, logSubject(p))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return from, 0, nil
	case err != nil:
		return 0, 0, err
	}
	end = last.Sequence
	if end <= from {
		return from, 0, nil
	}
	cons, err := n.logs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{logSubject(p)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from + 1,
	})
	if err != nil {
		return 0, 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return 0, 0, err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextMaxWait(n.opts.QueryTimeout))
		if err != nil {
			return 0, 0, err
		}
		md, err := m.Metadata()
		if err != nil {
			return 0, 0, err
		}
		switch {
		case !ownersWrite(m.Headers()):
			n.passForeign(p, md.Sequence.Stream)
		default:
			if v, err := strconv.ParseUint(m.Headers().Get(hdrInput), 10, 64); err == nil {
				input = max(input, v)
			}
			if err := splitBatch(m.Data(), fn); err != nil {
				return 0, 0, fmt.Errorf("message %d: %w", md.Sequence.Stream, err)
			}
		}
		if md.Sequence.Stream >= end {
			return end, input, nil
		}
	}
}
