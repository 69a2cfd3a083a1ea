package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
)

// ctxT bounds an operation the test waits for (testwait); nothing sleeps.
func ctxT(t testing.TB) context.Context { return testwait.Context(t) }

// quiet keeps expected warnings (repairs, skipped snapshots) out of test output.
var quiet = slog.New(slog.DiscardHandler)

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func openT(t testing.TB, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// payload returns record i's deterministic content, 60 to 120 bytes long
// like an encoded event.
func payload(i int) []byte {
	n := 60 + (i*37)%61
	p := fmt.Appendf(nil, `{"taskID":"task-%d","sequence":%d,"status":"running"`, i, i)
	for len(p) < n-1 {
		p = append(p, byte('a'+(i+len(p))%26))
	}
	return append(p[:n-1], '}')
}

// appendRange appends payload(i) for i in [from, to) and waits for the last.
func appendRange(t testing.TB, l *Log, from, to int) {
	t.Helper()
	var last LSN
	for i := from; i < to; i++ {
		lsn, err := l.Append(payload(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if want := LSN(i + 1); lsn != want {
			t.Fatalf("Append %d got LSN %d, want %d", i, lsn, want)
		}
		last = lsn
	}
	if err := l.Wait(ctxT(t), last); err != nil {
		t.Fatalf("Wait %d: %v", last, err)
	}
}

type rec struct {
	lsn     LSN
	payload []byte
}

func replayAll(t testing.TB, l *Log, from LSN) []rec {
	t.Helper()
	var out []rec
	err := l.Replay(from, func(lsn LSN, p []byte) error {
		out = append(out, rec{lsn, bytes.Clone(p)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return out
}

// checkRecords asserts recs are exactly payload(i) at LSN i+1 for i in [from, to).
func checkRecords(t testing.TB, recs []rec, from, to int) {
	t.Helper()
	if len(recs) != to-from {
		t.Fatalf("replayed %d records, want %d (indexes %d..%d)", len(recs), to-from, from, to-1)
	}
	for k, r := range recs {
		i := from + k
		if r.lsn != LSN(i+1) || !bytes.Equal(r.payload, payload(i)) {
			t.Fatalf("record %d: got LSN %d %q, want LSN %d %q", k, r.lsn, r.payload, i+1, payload(i))
		}
	}
}

// segFiles lists the segment files of dir, oldest first.
func segFiles(t testing.TB, dir string) []numbered {
	t.Helper()
	segs, err := listFiles(dir, segSuffix)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// recordOffsets returns the file offset of every record in a segment file.
func recordOffsets(t testing.TB, path string) []int64 {
	t.Helper()
	offs, _ := scanRecords(t, path)
	return offs
}

// recordsEnd returns the offset where a segment file's records end.
func recordsEnd(t testing.TB, path string) int64 {
	t.Helper()
	_, end := scanRecords(t, path)
	return end
}

// scanRecords walks a segment file's records by their lengths, up to the
// runway or the end of the file.
func scanRecords(t testing.TB, path string) (offs []int64, end int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := segHeaderSize
	for off+recHeaderSize <= len(data) {
		n := binary.LittleEndian.Uint32(data[off:])
		if checkLength(n) != "" {
			break // the runway
		}
		offs = append(offs, int64(off))
		off += recHeaderSize + int(n)
	}
	return offs, int64(off)
}

func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func flipBit(t testing.TB, path string, off int64, bit uint) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 1 << bit
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncWatch wraps segment files so a test can see, independently of the
// log's own bookkeeping, which LSN the disk holds after each fsync, and can
// make writes or fsyncs fail or stall.
type syncWatch struct {
	synced    atomic.Uint64 // highest LSN covered by a completed fsync
	syncs     atomic.Int64
	failWrite atomic.Pointer[error]
	failFill  atomic.Pointer[error] // fails the writes of the runway's fill, as a full disk does
	fills     atomic.Int64          // writes of the runway's fill tried
	failSync  atomic.Pointer[error]
	gate      chan struct{} // when non-nil, each Write waits for release
	gateOnce  sync.Once
	onSync    chan struct{} // when non-nil, receives after each fsync (buffered)
	blocked   chan struct{} // when non-nil, receives when an Append blocks on backpressure
}

// release lets stalled and later Writes through. Tests that use the gate
// register it with t.Cleanup after opening the log (cleanups run last
// first), so a failing test never leaves Close waiting on a stalled flusher.
func (w *syncWatch) release() { w.gateOnce.Do(func() { close(w.gate) }) }

func (w *syncWatch) hooks() *hooks {
	h := &hooks{wrap: func(f *os.File, first LSN, size int64) segmentFile {
		return &watchedFile{f: f, w: w, next: first, end: size}
	}}
	if w.onSync != nil {
		h.afterSync = func() { w.onSync <- struct{}{} }
	}
	if w.blocked != nil {
		h.blocked = func() {
			select {
			case w.blocked <- struct{}{}:
			default:
			}
		}
	}
	return h
}

type watchedFile struct {
	f       *os.File
	w       *syncWatch
	next    LSN    // LSN of the next whole record to be written
	end     int64  // where the next record's bytes go
	partial []byte // a record split across writes (the log never does this)
	mu      sync.Mutex
}

func (f *watchedFile) WriteAt(p []byte, off int64) (int, error) {
	if f.w.gate != nil {
		<-f.w.gate
	}
	if e := f.w.failWrite.Load(); e != nil {
		return 0, *e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.ContainsFunc(p, func(c byte) bool { return c != fillByte }) {
		// The runway (no record starts with a fill byte: its length is at
		// most MaxRecordSize). A full disk writes some of it, then fails.
		f.w.fills.Add(1)
		if e := f.w.failFill.Load(); e != nil {
			f.f.WriteAt(p[:len(p)/2], off)
			return len(p) / 2, *e
		}
		return f.f.WriteAt(p, off)
	}
	n, err := f.f.WriteAt(p, off)
	if off != f.end {
		panic(fmt.Sprintf("watchedFile: the log wrote records at %d, not at the records' end %d", off, f.end))
	}
	f.end += int64(n)
	b := append(f.partial, p[:n]...)
	for len(b) >= recHeaderSize {
		size := recHeaderSize + int(binary.LittleEndian.Uint32(b))
		if len(b) < size {
			break
		}
		if crc32.Checksum(b[recHeaderSize:size], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
			panic("watchedFile: the log wrote a record with a bad checksum")
		}
		b = b[size:]
		f.next++
	}
	f.partial = bytes.Clone(b)
	return n, err
}

func (f *watchedFile) Sync() error {
	if e := f.w.failSync.Load(); e != nil {
		return *e
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	f.mu.Lock()
	last := uint64(f.next - 1)
	f.mu.Unlock()
	for {
		cur := f.w.synced.Load()
		if cur >= last || f.w.synced.CompareAndSwap(cur, last) {
			break
		}
	}
	f.w.syncs.Add(1)
	return nil
}

func (f *watchedFile) Truncate(size int64) error { return f.f.Truncate(size) }

func (f *watchedFile) Close() error { return f.f.Close() }

// receive waits for one value on ch or fails the test after
// testwait.Timeout.
func receive(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("timed out waiting for %s", what)
	}
}

var _ io.WriterAt = (*watchedFile)(nil)

func isCorrupt(err error) (*CorruptError, bool) {
	var ce *CorruptError
	return ce, errors.As(err, &ce) && errors.Is(err, ErrCorrupt)
}
