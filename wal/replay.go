package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Replay calls fn for every record with an LSN above from, in order, up to
// the DurableLSN at the time of the call. payload is valid only during the
// call: the reader reuses one buffer, so replay allocates nothing per
// record. Records are checked against their checksums again as they are
// read. If the records after from were removed after a snapshot, Replay
// returns an error wrapping ErrGap. A segment removed by WriteSnapshot while
// Replay runs makes it fail; replay from the newest snapshot instead.
func (l *Log) Replay(from LSN, fn func(lsn LSN, payload []byte) error) error {
	limit := l.DurableLSN()
	if from >= limit {
		return nil
	}
	l.segMu.Lock()
	segs := slices.Clone(l.segments)
	l.segMu.Unlock()
	if oldest := segs[0].lsn; from+1 < oldest {
		return fmt.Errorf("%w: record %d is no longer in the log (the oldest retained record is %d); replay from a snapshot at LSN %d or later",
			ErrGap, from+1, oldest, oldest-1)
	}
	// The segment holding from+1 is the last one starting at or before it.
	i, found := slices.BinarySearchFunc(segs, from+1, func(s numbered, lsn LSN) int { return cmpLSN(s.lsn, lsn) })
	if !found {
		i--
	}
	rd := newRecordReader(nil)
	next := segs[i].lsn
	for ; i < len(segs) && next <= limit; i++ {
		if segs[i].lsn != next {
			return &CorruptError{Path: segs[i].path, Reason: fmt.Sprintf("expected the segment to start at LSN %d", next), Hint: hintCorrupt}
		}
		var err error
		if next, err = replaySegment(rd, segs[i], from, limit, fn); err != nil {
			return err
		}
	}
	if next <= limit {
		return fmt.Errorf("wal: replay: the log ends at LSN %d, before the durable LSN %d", next-1, limit)
	}
	return nil
}

// replaySegment replays the records of one segment and returns the LSN
// that follows its last record read.
func replaySegment(rd *recordReader, s numbered, from, limit LSN, fn func(LSN, []byte) error) (LSN, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return 0, fmt.Errorf("wal: replay: %w", err)
	}
	defer f.Close()
	h := make([]byte, segHeaderSize)
	n, _ := io.ReadFull(f, h)
	if reason := checkSegHeader(h[:n], s.lsn); reason != "" {
		return 0, &CorruptError{Path: s.path, Reason: reason, Hint: hintCorrupt}
	}
	rd.reset(f, segHeaderSize)
	lsn := s.lsn
	for ; lsn <= limit; lsn++ {
		var payload []byte
		if lsn <= from {
			err = rd.skip()
		} else {
			payload, err = rd.next()
		}
		if errors.Is(err, io.EOF) {
			return lsn, nil
		}
		if err != nil {
			return 0, replayError(s.path, lsn, err)
		}
		if payload != nil {
			if err := fn(lsn, payload); err != nil {
				return 0, fmt.Errorf("wal: replay LSN %d: %w", lsn, err)
			}
		}
	}
	return lsn, nil
}

// replayError turns a reader error into a *CorruptError or an I/O error.
// It is a function of its own so that the *badRecord errors.As needs is
// allocated only on this path, not once per record.
func replayError(path string, lsn LSN, err error) error {
	var bad *badRecord
	if errors.As(err, &bad) {
		return &CorruptError{Path: path, Offset: bad.off, Reason: fmt.Sprintf("record %d: %s", lsn, bad.reason), Hint: hintCorrupt}
	}
	return fmt.Errorf("wal: replay %s: %w", path, err)
}
