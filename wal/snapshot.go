package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	apollo "github.com/apollo-11/apollo"
)

// Snapshot file format (little-endian), named "<20-digit lsn>.snap":
//
//	header = "APSNP" version:u8 reserved:[2] lsn:u64 bodyLen:u64 crc32c(body):u32 crc32c(header[0:28]):u32
//	body   = the bytes the write callback wrote
const (
	snapMagic      = "APSNP"
	snapVersion    = 1
	snapHeaderSize = 32
	snapSuffix     = ".snap"
	snapKeep       = 2
)

func snapshotName(lsn LSN) string { return fmt.Sprintf("%020d%s", lsn, snapSuffix) }

func encodeSnapHeader(lsn LSN, bodyLen int64, bodyCRC uint32) []byte {
	h := make([]byte, snapHeaderSize)
	copy(h, snapMagic)
	h[5] = snapVersion
	binary.LittleEndian.PutUint64(h[8:], uint64(lsn))
	binary.LittleEndian.PutUint64(h[16:], uint64(bodyLen))
	binary.LittleEndian.PutUint32(h[24:], bodyCRC)
	binary.LittleEndian.PutUint32(h[28:], crc32.Checksum(h[:28], castagnoli))
	return h
}

// WriteSnapshot stores the state as of lsn (every record ≤ lsn reflected in
// it, none after). It first makes the log durable through lsn, whatever the
// policy, so a snapshot is never ahead of the log after a crash. The body
// goes to a temporary file that is fsynced and renamed into place, and the
// directory fsynced. Then snapshots beyond the newest two are removed, and
// so is every segment whose records are all covered by the older of the two,
// so recovery can start from either (after the first snapshot, no segment
// is removed: recovery can start from it or from the log's start). A
// directory that is no longer the one Open locked gets nothing (ErrMoved).
func (l *Log) WriteSnapshot(lsn LSN, write func(w io.Writer) error) error {
	if lsn == 0 {
		return invalid("snapshot", "snapshot at LSN 0", "snapshot after at least one record; LSN 0 is the empty state")
	}
	if last := l.LastLSN(); lsn > last {
		return &apollo.Error{Code: apollo.EINVALID, Field: "wal.snapshot",
			Message: fmt.Sprintf("snapshot at LSN %d, but only %d records were appended", lsn, last),
			Hint:    "pass the LSN of the last record the state reflects"}
	}
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if err := l.checkDir(); err != nil {
		return err
	}
	if err := l.Sync(); err != nil {
		return fmt.Errorf("wal: snapshot: %w", err)
	}
	path := filepath.Join(l.opts.Dir, snapshotName(lsn))
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("wal: snapshot: %w", err)
	}
	err = writeSnapshotFile(f, lsn, write)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(l.opts.Dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("wal: snapshot %s: %w", path, err)
	}
	return l.prune()
}

func writeSnapshotFile(f *os.File, lsn LSN, write func(io.Writer) error) error {
	if _, err := f.Write(make([]byte, snapHeaderSize)); err != nil { // the header goes in last
		return err
	}
	cw := &crcWriter{w: f}
	bw := bufio.NewWriterSize(cw, 256<<10)
	if err := write(bw); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if _, err := f.WriteAt(encodeSnapHeader(lsn, cw.n, cw.sum), 0); err != nil {
		return err
	}
	return f.Sync()
}

// prune keeps the newest snapKeep snapshots and removes the segments whose
// records the oldest of them covers. The active segment always stays, and
// so does every segment until there are snapKeep snapshots: a damaged
// snapshot is skipped for the one before it, and before the first there
// is only the log from its start.
func (l *Log) prune() error {
	snaps, err := listFiles(l.opts.Dir, snapSuffix)
	if err != nil || len(snaps) < snapKeep {
		return err
	}
	keepFrom := max(0, len(snaps)-snapKeep)
	for _, s := range snaps[:keepFrom] {
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("wal: remove old snapshot: %w", err)
		}
	}
	covered := snaps[keepFrom].lsn
	l.segMu.Lock()
	k := 0
	for k < len(l.segments)-1 && l.segments[k+1].lsn-1 <= covered {
		k++
	}
	drop := slices.Clone(l.segments[:k])
	l.segments = slices.Delete(l.segments, 0, k)
	l.segMu.Unlock()
	// Oldest first, with a directory fsync after each, so a crash midway
	// never leaves an older segment without the one after it (a gap).
	for _, s := range drop {
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("wal: remove segment: %w", err)
		}
		if err := syncDir(l.opts.Dir); err != nil {
			return fmt.Errorf("wal: remove segment: %w", err)
		}
	}
	return nil
}

// LatestSnapshot opens the newest valid snapshot and returns its LSN and
// body, which yields exactly the bytes the write callback wrote. A corrupt
// snapshot is logged, renamed to NAME.snap.corrupt and skipped for the
// next older one. With no valid
// snapshot it returns 0 and a nil body. The caller closes the body. The
// body also has a method Size() int64: its length in bytes, for a caller
// that sizes what it restores before reading.
func (l *Log) LatestSnapshot() (LSN, io.ReadCloser, error) {
	snaps, err := listFiles(l.opts.Dir, snapSuffix)
	if err != nil {
		return 0, nil, err
	}
	for _, s := range slices.Backward(snaps) {
		body, err := openSnapshot(s)
		if err == nil {
			return s.lsn, body, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return 0, nil, err
		}
		l.log.Warn("wal: skipping a corrupt snapshot; trying an older one", "path", s.path, "err", err,
			"set_aside_as", l.setAside(s.path))
	}
	return 0, nil, nil
}

// setAside renames a corrupt snapshot to path.corrupt, kept for a look
// but no longer one of the snapshots the log keeps: counted as one, it
// would make the next snapshot remove the good one recovery used, and the
// segments after that one. It returns the new name, or what went wrong.
func (l *Log) setAside(path string) string {
	to := path + ".corrupt"
	if err := os.Rename(path, to); err != nil {
		return fmt.Sprintf("(not set aside: %v)", err)
	}
	if err := syncDir(l.opts.Dir); err != nil {
		return fmt.Sprintf("%s (the directory not synced: %v)", to, err)
	}
	return to
}

// openSnapshot verifies a snapshot file end to end and returns its body.
func openSnapshot(s numbered) (io.ReadCloser, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("wal: open snapshot: %w", err)
	}
	body, err := verifySnapshot(f, s)
	if err != nil {
		f.Close()
		return nil, err
	}
	return body, nil
}

func verifySnapshot(f *os.File, s numbered) (io.ReadCloser, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: open snapshot: %w", err)
	}
	corrupt := func(off int64, reason string) error {
		return &CorruptError{Path: s.path, Offset: off, Reason: reason, Hint: "the snapshot is unusable; an older snapshot or a backup is needed"}
	}
	h := make([]byte, snapHeaderSize)
	if n, _ := io.ReadFull(f, h); n < snapHeaderSize {
		return nil, corrupt(int64(n), "header cut short")
	}
	bodyLen := int64(binary.LittleEndian.Uint64(h[16:]))
	switch {
	case string(h[:5]) != snapMagic:
		return nil, corrupt(0, "not a snapshot (bad magic)")
	case h[5] != snapVersion:
		return nil, corrupt(5, fmt.Sprintf("unsupported snapshot version %d", h[5]))
	case binary.LittleEndian.Uint32(h[28:]) != crc32.Checksum(h[:28], castagnoli):
		return nil, corrupt(28, "header checksum mismatch")
	case LSN(binary.LittleEndian.Uint64(h[8:])) != s.lsn:
		return nil, corrupt(8, fmt.Sprintf("header says LSN %d, the file name says %d", binary.LittleEndian.Uint64(h[8:]), s.lsn))
	case bodyLen != st.Size()-snapHeaderSize:
		return nil, corrupt(16, fmt.Sprintf("header says a %d-byte body, the file holds %d bytes", bodyLen, st.Size()-snapHeaderSize))
	}
	cw := &crcWriter{w: io.Discard}
	if _, err := io.Copy(cw, f); err != nil {
		return nil, fmt.Errorf("wal: read snapshot %s: %w", s.path, err)
	}
	if cw.sum != binary.LittleEndian.Uint32(h[24:]) || cw.n != bodyLen {
		return nil, corrupt(snapHeaderSize, "body checksum mismatch")
	}
	if _, err := f.Seek(snapHeaderSize, io.SeekStart); err != nil {
		return nil, fmt.Errorf("wal: read snapshot %s: %w", s.path, err)
	}
	return &snapshotBody{LimitedReader: io.LimitedReader{R: f, N: bodyLen}, f: f, size: bodyLen}, nil
}

// snapshotBody is the verified body of a snapshot file.
type snapshotBody struct {
	io.LimitedReader
	f    *os.File
	size int64
}

func (b *snapshotBody) Close() error { return b.f.Close() }

// Size is the body's length in bytes.
func (b *snapshotBody) Size() int64 { return b.size }

// crcWriter passes writes through and keeps their CRC32C and length.
type crcWriter struct {
	w   io.Writer
	sum uint32
	n   int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.sum = crc32.Update(c.sum, castagnoli, p[:n])
	c.n += int64(n)
	return n, err
}
