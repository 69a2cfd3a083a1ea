package wal

import (
	"bytes"
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
	size      int64 // where the next record goes: the end of the records
	alloc     int64 // the file's size: the records, then the runway's fill
	noRunway  bool  // the disk had no room for one: none until the next segment
	dirty     bool  // written since the last fsync
	closedErr error
	closed    bool
}

// attach makes f the active segment: its records end at size and the file
// at alloc (alloc > size when a runway of fill follows the records).
func (w *segmentWriter) attach(f *os.File, first LSN, size, alloc int64) {
	w.f, w.path, w.size, w.alloc, w.noRunway = f, f.Name(), size, alloc, false
	if w.hooks != nil && w.hooks.wrap != nil {
		w.f = w.hooks.wrap(f, first, size)
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
		w.extend(w.size + int64(n))
		if _, err := w.f.WriteAt(b[:n], w.size); err != nil {
			return fmt.Errorf("wal: write %s: %w", w.path, err)
		}
		w.size += int64(n)
		w.alloc = max(w.alloc, w.size)
		w.dirty = true
		if b = b[n:]; len(b) == 0 {
			return nil
		}
		first += LSN(recs)
	}
}

// runway is how far ahead of its records the active segment is filled.
// An fsync that extends a file also allocates its blocks and writes its
// inode; one that overwrites blocks the file already has writes only the
// data. On this project's machines that made an fsync of a small append
// take 0.58-0.7x the wall time and 0.55-0.7x the CPU (docs/benchmarks.md,
// "The log's runway"). So the writer fills the file a runway at a time,
// and the records overwrite the fill: one fsync per runway extends the
// file, the others do not.
const runway = 1 << 20

// fillByte is the runway's content. Open tells the records' end by it (the
// last byte that is not fill), so a record whose payload ends with it
// cannot be told from a torn one after a crash. No record of the bus does:
// its payloads end with a varint's last byte (under 0x80) or with JSON.
const fillByte = 0xFF

var fill = bytes.Repeat([]byte{fillByte}, 64<<10)

// extend fills the file up to at least end, a runway ahead where the
// segment has room for it. The fill becomes durable with the next fsync,
// which the records written into it wait for anyway. The runway is only
// a saving: when the disk has no room for it, extend takes back what it
// wrote and the segment goes on without one (each fsync then grows the
// file) until the next; the records' own write says whether they fit.
func (w *segmentWriter) extend(end int64) {
	if end <= w.alloc || w.noRunway {
		return
	}
	to := max(end, min(w.alloc+runway, w.limit))
	for off := w.alloc; off < to; {
		n := min(int64(len(fill)), to-off)
		if _, err := w.f.WriteAt(fill[:n], off); err != nil {
			w.f.Truncate(w.alloc) // best effort: fill left behind reads as a runway at Open
			w.noRunway = true
			return
		}
		off += n
	}
	w.alloc, w.dirty = to, true
}

// trim cuts the runway off, so that a segment that is not being written
// ends with its last record. The next sync makes it durable.
func (w *segmentWriter) trim() error {
	if w.alloc == w.size {
		return nil
	}
	if err := w.f.Truncate(w.size); err != nil {
		return fmt.Errorf("wal: trim %s: %w", w.path, err)
	}
	w.alloc, w.dirty = w.size, true
	return nil
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

// roll trims, fsyncs and closes the active segment and starts a new one
// at first. It fsyncs under every policy, so that only the last segment
// can ever have a torn tail or a runway.
func (w *segmentWriter) roll(first LSN) error {
	if err := w.finish(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", w.path, err)
	}
	f, err := createSegment(w.dir, first)
	if err != nil {
		return err
	}
	w.attach(f, first, segHeaderSize, segHeaderSize)
	w.onRoll(numbered{first, f.Name()})
	return nil
}

// finish trims the runway and fsyncs: the segment then ends with its
// last record, as a clean Close and a roll leave it.
func (w *segmentWriter) finish() error {
	if err := w.trim(); err != nil {
		return err
	}
	return w.sync()
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
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
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
	f, err = os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: open segment: %w", err)
	}
	return f, nil
}
