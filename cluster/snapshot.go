package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A partition's snapshot is its bus state and its aggregator's, at a log
// sequence, in the object store APOLLO_SNAPSHOTS under "p<partition>-<seq>".
// It becomes the partition's snapshot only when the owner writes a marker
// naming it into the partition's log, through the fence: a former owner can
// store an object, but never make it the one a rebuild reads. After the
// marker, the log before the snapshot is purged and the previous object
// deleted, so a rebuild reads one object and the log's tail.

// SnapshotBucket is the object store of partition snapshots.
const SnapshotBucket = "APOLLO_SNAPSHOTS"

const snapshotMagic = "APCLS1\n"

// snapshot writes the partition's state, marks it in the log and trims
// the log. It does nothing when no record was decided since the last one.
func (pt *partition) snapshot(ctx context.Context) error {
	buf := &pt.snapBuf
	buf.Reset()
	var covers, lsn uint64
	err := pt.bus.Checkpoint(func(uint64) error {
		var err error
		if covers, lsn, err = pt.dlog.position(); err != nil {
			return err
		}
		if covers <= pt.snapCovers {
			return nil
		}
		return pt.writeState(buf)
	})
	if err != nil || covers <= pt.snapCovers {
		return err
	}
	// The next owner replays only the log after the snapshot: the feed's
	// mark, at the copy since Checkpoint, is saved before it is kept.
	if err := pt.saveFeed(ctx, "before a snapshot; the snapshot waits for the next round"); err != nil {
		return err
	}
	name := fmt.Sprintf("p%04d-%d", pt.id, covers)
	if _, err := pt.n.snaps.PutBytes(ctx, name, buf.Bytes()); err != nil {
		return fmt.Errorf("cluster: storing snapshot %s: %w", name, err)
	}
	err = pt.dlog.mark(nats.Header{hdrSnapshot: {name}, hdrCovers: {strconv.FormatUint(covers, 10)}, hdrLSN: {strconv.FormatUint(lsn, 10)}})
	if err != nil {
		pt.n.snaps.Delete(ctx, name) // never referenced: nobody reads it
		return err
	}
	old := pt.snapName
	pt.snapMu.Lock()
	pt.snapName, pt.snapCovers = name, covers
	pt.snapMu.Unlock()
	// The marker is in the log: what it covers is no longer needed.
	if err := pt.n.logs.Purge(ctx, jetstream.WithPurgeSubject(logSubject(pt.id)), jetstream.WithPurgeSequence(covers+1)); err != nil {
		pt.log.Warn("trimming the log after a snapshot failed; the next snapshot tries again", "err", err)
	}
	if old != "" && old != name {
		pt.n.snaps.Delete(ctx, old)
	}
	pt.counters.snapshots.Add(1)
	return nil
}

// writeState writes the bus section (length-prefixed) then the metrics.
// The bus section goes straight into w, after room for its length, which
// is then written in and the section moved up to it: no second buffer of
// the section's size, whose growth and copy the checkpoint's pause would
// pay.
func (pt *partition) writeState(w *bytes.Buffer) error {
	w.WriteString(snapshotMagic)
	at := w.Len()
	w.Write(make([]byte, binary.MaxVarintLen64))
	if err := pt.bus.WriteState(w); err != nil {
		return err
	}
	hdr := binary.AppendUvarint(nil, uint64(w.Len()-at-binary.MaxVarintLen64))
	b := w.Bytes()
	copy(b[at+len(hdr):], b[at+binary.MaxVarintLen64:])
	copy(b[at:], hdr)
	w.Truncate(w.Len() - (binary.MaxVarintLen64 - len(hdr)))
	return pt.agg.WriteSnapshot(w)
}

// readState restores what writeState wrote, before replay and Start.
func (pt *partition) readState(data []byte) error {
	rest, ok := bytes.CutPrefix(data, []byte(snapshotMagic))
	if !ok {
		return errors.New("not a partition snapshot of this version")
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)-k) {
		return errors.New("the bus section is cut short")
	}
	if err := pt.bus.ReadState(bytes.NewReader(rest[k : k+int(n)])); err != nil {
		return err
	}
	return pt.agg.ReadSnapshot(bytes.NewReader(rest[k+int(n):]))
}

// snapshotRef is the last snapshot marker of a partition's log.
type snapshotRef struct {
	name          string
	covers, input uint64
	lsn           uint64 // of the last record it covers; 0 from a release before hdrLSN
	// unclean: the log has messages and does not end at a handover's
	// bookmark; the owner before died or lost its lease (recover).
	unclean bool
}

// findSnapshot reads the headers of partition p's log up to its end and
// returns its last snapshot marker (name "" when there is none).
func (n *Node) findSnapshot(ctx context.Context, p int) (snapshotRef, error) {
	var ref snapshotRef
	last, err := n.logs.GetLastMsgForSubject(ctx, logSubject(p))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ref, nil
	}
	if err != nil {
		return ref, err
	}
	ref.unclean = last.Header.Get(hdrHandover) == ""
	cons, err := n.logs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{logSubject(p)}, HeadersOnly: true,
	})
	if err != nil {
		return ref, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return ref, err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextMaxWait(n.opts.QueryTimeout))
		if err != nil {
			return ref, err
		}
		md, err := m.Metadata()
		if err != nil {
			return ref, err
		}
		h := m.Headers()
		if name := h.Get(hdrSnapshot); name != "" && ownersWrite(h) { // replayLog counts the others
			covers, err1 := strconv.ParseUint(h.Get(hdrCovers), 10, 64)
			input, err2 := strconv.ParseUint(h.Get(hdrInput), 10, 64)
			if err1 != nil || err2 != nil {
				return ref, fmt.Errorf("snapshot marker at %d: bad headers", md.Sequence.Stream)
			}
			// Without hdrLSN (a release before it), the LSNs start at 0
			// after the snapshot, as that release numbered them.
			lsn, _ := strconv.ParseUint(h.Get(hdrLSN), 10, 64)
			ref = snapshotRef{name: name, covers: covers, input: input, lsn: lsn, unclean: ref.unclean}
		}
		if md.Sequence.Stream >= last.Sequence {
			return ref, nil
		}
	}
}

// restore loads the partition's last snapshot, if it has one, and returns
// the log sequence replay goes on after.
func (pt *partition) restore(ctx context.Context) (uint64, error) {
	ref, err := pt.n.findSnapshot(ctx, pt.id)
	pt.unclean = ref.unclean
	if err != nil || ref.name == "" {
		return 0, err
	}
	data, err := pt.n.snaps.GetBytes(ctx, ref.name)
	if err != nil {
		return 0, fmt.Errorf("reading snapshot %s: %w", ref.name, err)
	}
	if err := pt.readState(data); err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", ref.name, err)
	}
	pt.snapMu.Lock()
	pt.snapName, pt.snapCovers = ref.name, ref.covers
	pt.snapMu.Unlock()
	pt.input = max(pt.input, ref.input)
	pt.base = ref.lsn
	return ref.covers, nil
}

// snapshotLoop snapshots the partition every SnapshotEvery until ctx ends.
func (pt *partition) snapshotLoop(ctx context.Context) {
	defer pt.wg.Done()
	t := pt.n.opts.Clock.NewTicker(pt.n.opts.SnapshotEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			if pt.Failed() != nil {
				continue
			}
			if err := pt.snapshot(ctx); err != nil && ctx.Err() == nil {
				pt.n.warn("snapshot failed; the log keeps growing until one succeeds", "partition", pt.id, "err", err)
			}
		case <-ctx.Done():
			return
		}
	}
}
