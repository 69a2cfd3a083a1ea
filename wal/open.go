package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Open creates opts.Dir if needed, locks it, validates every segment,
// repairs a torn tail of the last one and starts the flusher. Appends
// continue after the last valid record.
func Open(opts Options) (*Log, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	unlock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	l := &Log{
		opts:    opts,
		log:     opts.Logger.With("component", "wal"),
		clock:   opts.Clock,
		unlock:  unlock,
		kick:    make(chan struct{}, 1),
		syncReq: make(chan chan error),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	l.space.L = &l.mu
	if fi, err := os.Stat(opts.Dir); err == nil {
		l.dirInfo = fi
	}
	if fi, err := os.Stat(filepath.Join(opts.Dir, "LOCK")); err == nil {
		l.lockInfo = fi
	}
	ch := make(chan struct{})
	l.notify.Store(&ch)
	l.w = &segmentWriter{
		dir: opts.Dir, limit: opts.SegmentSize, clock: opts.Clock, stats: &l.stats, hooks: opts.hooks,
		onRoll: func(s numbered) {
			l.segMu.Lock()
			l.segments = append(l.segments, s)
			l.segMu.Unlock()
		},
	}
	if err := l.recover(); err != nil {
		l.w.close()
		return nil, errors.Join(err, unlock())
	}
	go l.run()
	return l, nil
}

// recover validates the segments, repairs the tail, opens the last segment
// for appending and sets the LSN counters.
func (l *Log) recover() error {
	dir := l.opts.Dir
	if err := removeTemps(dir); err != nil {
		return err
	}
	segs, err := listFiles(dir, segSuffix)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		if err := l.checkSnapshotsBehind(0); err != nil {
			return err
		}
		f, err := createSegment(dir, 1)
		if err != nil {
			return err
		}
		l.segments = []numbered{{1, f.Name()}}
		l.w.attach(f, 1, segHeaderSize, segHeaderSize)
		l.setNext(1)
		return nil
	}
	rd := newRecordReader(nil)
	next := segs[0].lsn
	var size, alloc int64
	for i, s := range segs {
		if s.lsn != next {
			return &CorruptError{Path: s.path, Reason: fmt.Sprintf(
				"the previous segment ends at LSN %d but this one starts at %d: a segment is missing", next-1, s.lsn),
				Hint: hintCorrupt}
		}
		var n uint64
		n, size, alloc, err = l.scanSegment(rd, s, i == len(segs)-1)
		if err != nil {
			return err
		}
		next += LSN(n)
	}
	if err := l.checkSnapshotsBehind(next - 1); err != nil {
		return err
	}
	last := segs[len(segs)-1]
	f, err := os.OpenFile(last.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	l.segments = segs
	l.w.attach(f, last.lsn, size, alloc)
	l.setNext(next)
	return nil
}

func (l *Log) setNext(next LSN) {
	l.next, l.bufFirst = next, next
	l.last.Store(uint64(next - 1))
	l.durable.Store(uint64(next - 1))
}

// scanSegment verifies one segment and returns its record count, the end
// of its records and the file's size, after any repair. In the last
// segment, the records may be followed by the runway (nothing but fill to
// the end of the file: the records' clean end), and a bad record with
// nothing valid after it, up to where the fill begins, is a torn write and
// is cut off, unless it was written whole and damaged later (tailDamage);
// so is one followed by fill to a block's end and then records (tornCopy);
// anywhere else it is corruption.
func (l *Log) scanSegment(rd *recordReader, s numbered, last bool) (count uint64, end, size int64, err error) {
	mode := os.O_RDONLY
	if last {
		mode = os.O_RDWR // for cutting a torn tail
	}
	f, err := os.OpenFile(s.path, mode, 0)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("wal: open: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("wal: open: %w", err)
	}
	h := make([]byte, segHeaderSize)
	n, _ := io.ReadFull(f, h)
	if reason := checkSegHeader(h[:n], s.lsn); reason != "" {
		return 0, 0, 0, &CorruptError{Path: s.path, Reason: reason, Hint: hintCorrupt}
	}
	rd.reset(f, segHeaderSize)
	for {
		_, err := rd.next()
		if err == nil {
			count++
			continue
		}
		if errors.Is(err, io.EOF) {
			return count, st.Size(), st.Size(), nil
		}
		var bad *badRecord
		if !errors.As(err, &bad) {
			return 0, 0, 0, fmt.Errorf("wal: read %s: %w", s.path, err)
		}
		if !last {
			return 0, 0, 0, &CorruptError{Path: s.path, Offset: bad.off, Reason: bad.reason + " in a segment that is not the last", Hint: hintCorrupt}
		}
		written, err := writtenEnd(f, bad.off, st.Size())
		if err != nil {
			return 0, 0, 0, fmt.Errorf("wal: read %s: %w", s.path, err)
		}
		if written == bad.off {
			return count, bad.off, st.Size(), nil // the runway
		}
		valid, found, err := findValidRecord(f, bad.off+1, written)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("wal: read %s: %w", s.path, err)
		}
		if found {
			torn, err := tornCopy(f, bad.off, valid)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("wal: read %s: %w", s.path, err)
			}
			if !torn {
				return 0, 0, 0, &CorruptError{Path: s.path, Offset: bad.off,
					Reason: fmt.Sprintf("%s, and a valid record follows at offset %d", bad.reason, valid), Hint: hintCorrupt}
			}
			bad = &badRecord{off: bad.off, reason: fmt.Sprintf(
				"%s, then the runway's fill up to a block's end and records from offset %d: "+
					"blocks taken at different moments (a copy made while the log was written, or pages a crash wrote out of order)",
				bad.reason, valid)}
		} else {
			damage, err := tailDamage(f, bad.off, written)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("wal: read %s: %w", s.path, err)
			}
			if damage != "" {
				return 0, 0, 0, &CorruptError{Path: s.path, Offset: bad.off,
					Reason: fmt.Sprintf("the last record, LSN %d, %s", s.lsn+LSN(count), damage),
					Hint:   hintCorruptLast(s.path, bad.off)}
			}
		}
		if err := l.cutTail(f, s.path, bad, written); err != nil {
			return 0, 0, 0, err
		}
		return count, bad.off, bad.off, nil
	}
}

// writtenEnd returns the offset after the last byte in [from, size) that
// is not the runway's fill, or from if there is none.
func writtenEnd(r io.ReaderAt, from, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > from; {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := r.ReadAt(b, start); err != nil {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != fillByte {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return from, nil
}

// fillBlock is the smallest unit in which a file's bytes reach a disk or
// a copy: a sector. Pages (4 KiB) and the chunks cp and backup tools read
// (4 KiB to 128 KiB) are multiples of it.
const fillBlock = 512

// minFillRun is how many bytes of fill must end a block for tornCopy. A
// record can hold a few 0xFF bytes (a uvarint of a large number); eight in
// a row before a block's end is not something damage leaves. A copy torn
// within 8 bytes of a page's end is refused, as before, with its offset.
const minFillRun = 8

// tornCopy reports whether the bytes between a bad record at off and the
// valid record at valid hold a run of the runway's fill that ends where a
// block ends: the file's blocks come from different moments. A copy of the
// running log (cp, dd, a backup tool) read the block before the record
// was written into it and the later blocks after; or a machine that
// crashed had written later pages to disk before this one, which no fsync
// had covered yet. Either way the records from off on are not in the
// file's consistent prefix: a torn tail, not damage.
func tornCopy(r io.ReaderAt, off, valid int64) (bool, error) {
	b := make([]byte, valid-off)
	if _, err := r.ReadAt(b, off); err != nil {
		return false, err
	}
	for end := (off/fillBlock + 1) * fillBlock; end <= valid; end += fillBlock {
		if end-off < minFillRun {
			continue
		}
		if allFill(b[end-off-minFillRun : end-off]) {
			return true, nil
		}
	}
	return false, nil
}

func allFill(p []byte) bool {
	for _, c := range p {
		if c != fillByte {
			return false
		}
	}
	return true
}

// cutTail truncates a torn tail, whose written bytes end at written, and
// makes the truncation durable. The runway after it goes too; the writer
// fills again as it writes.
func (l *Log) cutTail(f *os.File, path string, bad *badRecord, written int64) error {
	if err := f.Truncate(bad.off); err != nil {
		return fmt.Errorf("wal: repair %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: repair %s: %w", path, err)
	}
	l.repaired = written - bad.off
	l.log.Warn("wal: cut a torn tail (records that were never acknowledged as durable)",
		"segment", path, "offset", bad.off, "bytes_cut", l.repaired, "reason", bad.reason)
	return nil
}

// tailDamage tells a torn write from damage to a record that was written
// whole, for the bad record at off that nothing valid follows. A write cut
// by a crash leaves the file ending inside the record, or followed by
// zeros or stale bytes the write never reached. A complete record that
// ends exactly where the file ends, yet fails its checksum, or one whose
// length field is the only thing wrong (the bytes up to the end match its
// checksum), was written in full and damaged afterwards: it may have been
// acknowledged, so it is reported, never cut. It returns what is wrong, or
// "" for a torn write.
func tailDamage(r io.ReaderAt, off, size int64) (string, error) {
	var h [recHeaderSize]byte
	if size-off < recHeaderSize {
		return "", nil
	}
	if _, err := r.ReadAt(h[:], off); err != nil {
		return "", err
	}
	n, sum := binary.LittleEndian.Uint32(h[:]), binary.LittleEndian.Uint32(h[4:])
	if checkLength(n) == "" && off+recHeaderSize+int64(n) == size {
		return fmt.Sprintf("is whole (%d bytes, up to the end of the file) but its checksum does not match", recHeaderSize+n), nil
	}
	rest := size - off - recHeaderSize
	if rest <= 0 || rest > MaxRecordSize {
		return "", nil
	}
	p := make([]byte, rest)
	if _, err := r.ReadAt(p, off+recHeaderSize); err != nil {
		return "", err
	}
	if crc32.Checksum(p, castagnoli) == sum {
		return fmt.Sprintf("has a damaged length field (%d) but the %d bytes after its header match its checksum", n, rest), nil
	}
	return "", nil
}

// hintCorruptLast is what an operator can do about a damaged last record.
func hintCorruptLast(path string, off int64) string {
	return fmt.Sprintf("the disk changed it after it was written, and it may have been acknowledged: "+
		"restore the data directory from a backup, or, to start without this one record, "+
		"stop Apollo-11, copy the file aside and cut it there: truncate -s %d %s", off, path)
}

// findValidRecord looks for any offset in [from, size) where a whole record
// with a matching checksum starts. Only the damaged-tail path calls it.
func findValidRecord(r io.ReaderAt, from, size int64) (int64, bool, error) {
	const window = 1 << 20
	buf := make([]byte, window+recHeaderSize+MaxRecordSize) // any record starting in the window fits
	for base := from; base+recHeaderSize < size; base += window {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-base)], base)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, err
		}
		b := buf[:n]
		for i := 0; i < window && i+recHeaderSize < len(b); i++ {
			ln := binary.LittleEndian.Uint32(b[i:])
			end := i + recHeaderSize + int(ln)
			if checkLength(ln) != "" || end > len(b) {
				continue
			}
			if crc32.Checksum(b[i+recHeaderSize:end], castagnoli) == binary.LittleEndian.Uint32(b[i+4:]) {
				return base + int64(i), true, nil
			}
		}
	}
	return 0, false, nil
}

// checkSnapshotsBehind refuses a directory whose newest snapshot reflects
// records the log no longer has: appending would reuse their LSNs, and the
// next recovery would skip the new records as already in the snapshot.
func (l *Log) checkSnapshotsBehind(last LSN) error {
	snaps, err := listFiles(l.opts.Dir, snapSuffix)
	if err != nil || len(snaps) == 0 {
		return err
	}
	if newest := snaps[len(snaps)-1]; newest.lsn > last {
		return &CorruptError{Path: newest.path, Reason: fmt.Sprintf(
			"the snapshot is at LSN %d but the log ends at LSN %d", newest.lsn, last),
			Hint: fmt.Sprintf("the log lost records the snapshot reflects: restore the data directory from a backup, or move snapshots newer than LSN %d out of the directory", last)}
	}
	return nil
}

// removeTemps deletes segment and snapshot files a crash left half-made.
func removeTemps(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, segSuffix+tmpSuffix) || strings.HasSuffix(name, snapSuffix+tmpSuffix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("wal: open: remove leftover %s: %w", name, err)
			}
		}
	}
	return nil
}

// checkDir returns an error wrapping ErrMoved when Dir or Dir/LOCK is no
// longer the file Open found there.
func (l *Log) checkDir() error {
	for _, f := range [...]struct {
		path string
		was  os.FileInfo
	}{{l.opts.Dir, l.dirInfo}, {filepath.Join(l.opts.Dir, "LOCK"), l.lockInfo}} {
		if f.was == nil {
			continue
		}
		if now, err := os.Stat(f.path); err == nil && os.SameFile(f.was, now) {
			continue
		}
		return fmt.Errorf("%w: %s is no longer the directory this log opened (moved, replaced or removed while it was open: "+
			"a restore over a running server?); nothing more is written there: stop this process, and start it on what is there now",
			ErrMoved, l.opts.Dir)
	}
	return nil
}
