package wal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// run is the flusher goroutine: the only writer of segment files. Each pass
// takes the whole group-commit buffer, writes it with one write call (two
// at a segment roll), fsyncs it when the policy asks, and then publishes the
// new durable LSN with one broadcast. Records that arrive during an fsync
// wait in the buffer and share the next one.
func (l *Log) run() {
	defer close(l.done)
	var tick <-chan time.Time
	if l.opts.Sync == SyncInterval {
		t := l.clock.NewTicker(l.opts.SyncInterval)
		defer t.Stop()
		tick = t.C()
	}
	spare := make([]byte, 0, 64<<10)
	for {
		select {
		case <-l.kick:
			spare = l.flush(spare, l.opts.Sync == SyncBatch)
		case <-tick:
			if l.failed.Load() == nil {
				if err := l.w.sync(); err != nil {
					l.fail(err)
				}
			}
		case reply := <-l.syncReq:
			spare = l.flush(spare, true)
			reply <- l.failure()
		case <-l.stop:
			l.flush(spare, true)
			return
		}
	}
}

// failure returns the error that failed the log, or nil.
func (l *Log) failure() error {
	if f := l.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// flush swaps spare in as the append buffer, writes what it took and, if
// sync, fsyncs; then it publishes. It returns the taken buffer, emptied, as
// the next spare.
func (l *Log) flush(spare []byte, sync bool) []byte {
	if l.failed.Load() != nil {
		return spare
	}
	l.mu.Lock()
	b, first, last := l.buf, l.bufFirst, l.next-1
	l.buf, l.bufFirst = spare[:0], l.next
	if len(b) >= maxPending {
		l.space.Broadcast()
	}
	l.mu.Unlock()
	if len(b) > 0 {
		if err := l.w.write(b, first); err != nil {
			l.fail(err)
			return b[:0]
		}
	}
	if sync {
		if err := l.w.sync(); err != nil {
			l.fail(err)
			return b[:0]
		}
	}
	l.publish(last)
	return b[:0]
}

// segmentWriter owns the active segment file. Only the flusher uses it
// (and Close, after the flusher has exited).
type segmentWriter struct {
	dir       string
	limit     int64
	clock     apollo.Clock
	stats     *syncStats
	hooks     *hooks
	onRoll    func(numbered) // records a new segment in the Log's list
	f         segmentFile
	path      string
	size      int64
	dirty     bool // written since the last fsync
	closedErr error
	closed    bool
}

func (w *segmentWriter) attach(f *os.File, first LSN, size int64) {
	w.f, w.path, w.size = f, f.Name(), size
	if w.hooks != nil && w.hooks.wrap != nil {
		w.f = w.hooks.wrap(f, first)
	}
}

// write appends whole records to the active segment, rolling to a new one
// when the segment is past its size limit. first is the LSN of b's first
// record.
func (w *segmentWriter) write(b []byte, first LSN) error {
	for {
		if w.size >= w.limit && w.size > segHeaderSize {
			if err := w.roll(first); err != nil {
				return err
			}
		}
		n, recs := len(b), 0
		if room := w.limit - w.size; int64(n) > room {
			n, recs = cut(b, room)
		}
		if _, err := w.f.Write(b[:n]); err != nil {
			return fmt.Errorf("wal: write %s: %w", w.path, err)
		}
		w.size += int64(n)
		w.dirty = true
		if b = b[n:]; len(b) == 0 {
			return nil
		}
		first += LSN(recs)
	}
}

// cut returns the length and count of the leading whole records of b that
// fit in room bytes; at least one record, so a segment holds at least one.
func cut(b []byte, room int64) (n, recs int) {
	for n < len(b) {
		size := recHeaderSize + int(binary.LittleEndian.Uint32(b[n:]))
		if int64(n+size) > room && n > 0 {
			break
		}
		n += size
		recs++
	}
	return n, recs
}

// roll fsyncs and closes the active segment and starts a new one at first.
// It fsyncs under every policy, so that only the last segment can ever have
// a torn tail.
func (w *segmentWriter) roll(first LSN) error {
	if err := w.sync(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", w.path, err)
	}
	f, err := createSegment(w.dir, first)
	if err != nil {
		return err
	}
	w.attach(f, first, segHeaderSize)
	w.onRoll(numbered{first, f.Name()})
	return nil
}

func (w *segmentWriter) sync() error {
	if !w.dirty {
		return nil
	}
	start := w.clock.Now()
	if err := w.f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages,
		// so retrying could report success for lost data: the log fails.
		return fmt.Errorf("wal: fsync %s: %w", w.path, err)
	}
	w.stats.observe(w.clock.Now().Sub(start))
	w.dirty = false
	if w.hooks != nil && w.hooks.afterSync != nil {
		w.hooks.afterSync()
	}
	return nil
}

func (w *segmentWriter) close() error {
	if !w.closed && w.f != nil {
		w.closed = true
		if err := w.f.Close(); err != nil {
			w.closedErr = fmt.Errorf("wal: close %s: %w", w.path, err)
		}
	}
	return w.closedErr
}

// createSegment makes a new segment starting at first: its header is
// written and fsynced under a temporary name, then renamed into place and
// the directory fsynced, so a segment file never lacks its header.
func createSegment(dir string, first LSN) (*os.File, error) {
	path := filepath.Join(dir, segmentName(first))
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("wal: create segment %s: it already exists", path)
	}
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: create segment: %w", err)
	}
	_, err = f.Write(encodeSegHeader(first))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("wal: create segment %s: %w", path, err)
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: open segment: %w", err)
	}
	return f, nil
}
