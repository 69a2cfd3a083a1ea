package wal

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// Log is a write-ahead log of opaque records with group commit and
// snapshots. Append, Wait, DurableLSN, LastLSN, Replay and Stats are safe for
// concurrent use. See the package documentation for the guarantees.
type Log struct {
	opts  Options
	log   *slog.Logger
	clock apollo.Clock

	// mu guards the group-commit buffer and the LSN counter.
	mu       sync.Mutex
	space    sync.Cond // broadcast when the flusher takes the buffer, and on close or failure
	buf      []byte    // records appended and not yet taken by the flusher
	bufFirst LSN       // the LSN of buf's first record
	next     LSN       // the LSN the next Append gets
	closed   bool
	appends  uint64
	bytes    uint64

	last    atomic.Uint64 // highest LSN handed out
	durable atomic.Uint64 // highest LSN Wait returns for
	failed  atomic.Pointer[failure]
	notify  atomic.Pointer[chan struct{}] // closed and replaced when durable advances or the log fails

	kick    chan struct{}   // an Append left work for the flusher
	syncReq chan chan error // Sync asks the flusher to write and fsync everything
	stop    chan struct{}
	done    chan struct{} // closed when the flusher has exited

	closeOnce sync.Once
	closeErr  error

	segMu    sync.Mutex
	segments []numbered // every segment on disk, oldest first; the last is active

	snapMu sync.Mutex // serialises WriteSnapshot

	w        *segmentWriter // the flusher's alone (Close uses it after the flusher has exited)
	repaired int64
	unlock   func() error
	stats    syncStats

	// What Open found at Dir and Dir/LOCK (nil where it found none), for
	// checkDir.
	dirInfo, lockInfo os.FileInfo
}

// failure boxes the error that failed the log, for atomic.Pointer.
type failure struct{ err error }

// Stats are counters since Open.
type Stats struct {
	Appends         uint64        // records appended
	Bytes           uint64        // record bytes appended, headers included
	Syncs           uint64        // fsyncs of segment files
	SyncLatencyLast time.Duration // duration of the latest fsync
	SyncLatencyMax  time.Duration
	SyncLatencySum  time.Duration // divide by Syncs for the mean
	Segments        int           // segment files on disk
	Repaired        int64         // bytes cut from a torn tail at Open
	LastLSN         LSN
	DurableLSN      LSN
}

type syncStats struct {
	count, last, max, sum atomic.Int64
}

func (s *syncStats) observe(d time.Duration) {
	s.count.Add(1)
	s.last.Store(int64(d))
	s.sum.Add(int64(d))
	if int64(d) > s.max.Load() { // only the flusher writes, so no CAS loop is needed
		s.max.Store(int64(d))
	}
}

// Append copies payload into the group-commit buffer and returns its LSN. It
// never waits for the disk; it blocks only while more than 8 MiB are waiting
// for the flusher. Use Wait to learn when the record is durable.
func (l *Log) Append(payload []byte) (LSN, error) {
	if err := checkPayload(len(payload)); err != nil {
		return 0, err
	}
	sum := crc32.Checksum(payload, castagnoli) // outside the lock: it is the costly part
	l.mu.Lock()
	for len(l.buf) >= maxPending && !l.closed && l.failed.Load() == nil {
		if h := l.opts.hooks; h != nil && h.blocked != nil {
			h.blocked()
		}
		l.space.Wait()
	}
	if f := l.failed.Load(); f != nil {
		l.mu.Unlock()
		return 0, f.err
	}
	if l.closed {
		l.mu.Unlock()
		return 0, fmt.Errorf("wal: append: %w", ErrClosed)
	}
	l.buf = appendRecord(l.buf, payload, sum)
	lsn := l.next
	l.next++
	l.appends++
	l.bytes += uint64(recHeaderSize + len(payload))
	l.last.Store(uint64(lsn))
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default: // the flusher already has a pending kick
	}
	return lsn, nil
}

func checkPayload(n int) error {
	switch {
	case n == 0:
		return fmt.Errorf("wal: append: %w", &apollo.Error{Code: apollo.EINVALID, Field: "payload",
			Message: "empty record", Hint: "the log stores non-empty payloads only"})
	case n > MaxRecordSize:
		return fmt.Errorf("%w: %w", ErrTooLarge, &apollo.Error{Code: apollo.ETOOLARGE, Field: "payload",
			Message: fmt.Sprintf("record is %d bytes, over the %d-byte limit", n, MaxRecordSize),
			Hint:    "shrink the event (its extra field) or split it"})
	}
	return nil
}

// Wait returns when lsn is durable under the sync policy, when ctx is done,
// or when the log has failed.
func (l *Log) Wait(ctx context.Context, lsn LSN) error {
	for {
		ch := *l.notify.Load() // load before checking, so a publish in between closes ch
		if LSN(l.durable.Load()) >= lsn {
			return nil
		}
		if f := l.failed.Load(); f != nil {
			return f.err
		}
		if last := LSN(l.last.Load()); lsn > last {
			return fmt.Errorf("wal: wait for LSN %d: only %d records were appended", lsn, last)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wal: wait for LSN %d: %w", lsn, ctx.Err())
		}
	}
}

// DurableLSN is the highest LSN that Wait would return for now.
func (l *Log) DurableLSN() LSN { return LSN(l.durable.Load()) }

// LastLSN is the highest LSN handed out (0 for an empty log).
func (l *Log) LastLSN() LSN { return LSN(l.last.Load()) }

// publish makes lsn durable and wakes every waiter with one close.
func (l *Log) publish(lsn LSN) {
	if lsn > LSN(l.durable.Load()) {
		l.durable.Store(uint64(lsn))
		l.wake()
	}
}

func (l *Log) wake() {
	ch := make(chan struct{})
	close(*l.notify.Swap(&ch))
}

// fail puts the log in the failed state: every later Append and Wait
// returns err. Only the first failure is kept.
func (l *Log) fail(err error) {
	if !l.failed.CompareAndSwap(nil, &failure{err}) {
		return
	}
	l.log.Error("wal failed; appends are refused until restart", "dir", l.opts.Dir, "err", err)
	l.mu.Lock()
	l.space.Broadcast()
	l.mu.Unlock()
	l.wake()
}

// Sync writes and fsyncs every record appended so far, whatever the policy.
func (l *Log) Sync() error {
	reply := make(chan error, 1)
	select {
	case l.syncReq <- reply:
		return <-reply
	case <-l.done:
		return fmt.Errorf("wal: sync: %w", ErrClosed)
	}
}

// Stats returns the counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	s := Stats{Appends: l.appends, Bytes: l.bytes}
	l.mu.Unlock()
	l.segMu.Lock()
	s.Segments = len(l.segments)
	l.segMu.Unlock()
	s.Syncs = uint64(l.stats.count.Load())
	s.SyncLatencyLast = time.Duration(l.stats.last.Load())
	s.SyncLatencyMax = time.Duration(l.stats.max.Load())
	s.SyncLatencySum = time.Duration(l.stats.sum.Load())
	s.Repaired = l.repaired
	s.LastLSN, s.DurableLSN = l.LastLSN(), l.DurableLSN()
	return s
}

// Close refuses new appends, writes and fsyncs what is buffered (whatever
// the policy), waits for the flusher, and trims the active segment's
// runway and closes it. It is idempotent; later calls return the first
// call's result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.space.Broadcast()
		l.mu.Unlock()
		close(l.stop)
		<-l.done
		var errs []error
		if f := l.failed.Load(); f != nil {
			errs = append(errs, f.err)
		} else if err := l.w.finish(); err != nil {
			errs = append(errs, err)
		}
		if err := l.w.close(); err != nil {
			errs = append(errs, err)
		}
		if err := l.unlock(); err != nil {
			errs = append(errs, fmt.Errorf("wal: unlock %s: %w", l.opts.Dir, err))
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// segmentFile is what the flusher needs from a segment file.
type segmentFile interface {
	WriteAt(p []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
}

var _ segmentFile = (*os.File)(nil)
