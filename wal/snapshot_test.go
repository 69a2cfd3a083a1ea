package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apollo "github.com/apollo-11/apollo"
)

// stateAt is a deterministic snapshot body for lsn, large enough to span
// several buffer flushes.
func stateAt(lsn LSN, size int) []byte {
	b := make([]byte, 0, size)
	for len(b) < size {
		b = fmt.Appendf(b, "state@%d:%d;", lsn, len(b))
	}
	return b[:size]
}

func writeSnap(t *testing.T, l *Log, lsn LSN, body []byte) {
	t.Helper()
	err := l.WriteSnapshot(lsn, func(w io.Writer) error {
		for p := body; len(p) > 0; { // in odd-sized pieces, like an encoder would
			n := min(len(p), 1000+len(p)%777)
			if _, err := w.Write(p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WriteSnapshot(%d): %v", lsn, err)
	}
}

func readLatest(t *testing.T, l *Log) (LSN, []byte) {
	t.Helper()
	lsn, body, err := l.LatestSnapshot()
	if err != nil {
		t.Fatalf("LatestSnapshot: %v", err)
	}
	if body == nil {
		if lsn != 0 {
			t.Fatalf("LatestSnapshot returned LSN %d with a nil body", lsn)
		}
		return 0, nil
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return lsn, data
}

func TestSnapshotRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentSize: 4096}
	l := openT(t, opts)
	if lsn, body := readLatest(t, l); lsn != 0 || body != nil {
		t.Fatalf("empty log: LatestSnapshot = %d, %q; want 0, nil", lsn, body)
	}
	appendRange(t, l, 0, 100)
	writeSnap(t, l, 50, stateAt(50, 300_000))
	appendRange(t, l, 100, 200)
	writeSnap(t, l, 150, stateAt(150, 300_000))
	appendRange(t, l, 200, 230)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openT(t, opts)
	lsn, body := readLatest(t, l)
	if lsn != 150 || !bytes.Equal(body, stateAt(150, 300_000)) {
		t.Fatalf("LatestSnapshot = %d (%d bytes), want 150 with its body", lsn, len(body))
	}
	checkRecords(t, replayAll(t, l, lsn), 150, 230)
	checkRecords(t, replayAll(t, l, 50), 50, 230) // the older snapshot stays usable
	// Every segment whose records are all ≤ 50 is gone: the oldest left
	// holds record 51.
	segs := segFiles(t, dir)
	if segs[0].lsn > 51 || len(segs) < 2 || segs[1].lsn <= 51 {
		t.Fatalf("segments start at %v, want the first to be the one holding LSN 51", segs)
	}
	err := l.Replay(10, func(LSN, []byte) error { return nil })
	if !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), "record 11 is no longer in the log") {
		t.Fatalf("Replay(10) = %v, want ErrGap naming record 11", err)
	}

	// A third snapshot leaves two, and moves the segment cut to LSN 150.
	writeSnap(t, l, 230, stateAt(230, 10))
	snaps, err := listFiles(dir, snapSuffix)
	if err != nil || len(snaps) != 2 || snaps[0].lsn != 150 || snaps[1].lsn != 230 {
		t.Fatalf("snapshots = %v (%v), want 150 and 230", snaps, err)
	}
	if segs = segFiles(t, dir); segs[0].lsn > 151 || segs[1].lsn <= 151 {
		t.Fatalf("segments start at %v, want the first to hold LSN 151", segs)
	}
	if got := l.Stats().Segments; got != len(segs) {
		t.Fatalf("Stats.Segments = %d, %d files on disk", got, len(segs))
	}
}

func TestCorruptSnapshotFallsBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"flipped body bit", func(t *testing.T, p string) { flipBit(t, p, snapHeaderSize+100, 2) }},
		{"flipped header bit", func(t *testing.T, p string) { flipBit(t, p, 9, 0) }},
		{"truncated body", func(t *testing.T, p string) {
			if err := os.Truncate(p, snapHeaderSize+10); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated header", func(t *testing.T, p string) {
			if err := os.Truncate(p, 7); err != nil {
				t.Fatal(err)
			}
		}},
		{"extra bytes", func(t *testing.T, p string) { appendBytes(t, p, []byte("x")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var logged bytes.Buffer
			l := openT(t, Options{Dir: dir, Logger: slogTo(&logged)})
			appendRange(t, l, 0, 20)
			writeSnap(t, l, 10, stateAt(10, 5000))
			writeSnap(t, l, 20, stateAt(20, 5000))
			newest := filepath.Join(dir, snapshotName(20))
			tt.damage(t, newest)
			lsn, body := readLatest(t, l)
			if lsn != 10 || !bytes.Equal(body, stateAt(10, 5000)) {
				t.Fatalf("LatestSnapshot = %d, want the older snapshot 10", lsn)
			}
			if !strings.Contains(logged.String(), "skipping a corrupt snapshot") || !strings.Contains(logged.String(), newest) {
				t.Fatalf("log = %q, want a warning naming %s", logged.String(), newest)
			}
		})
	}
}

func TestWriteSnapshotErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	appendRange(t, l, 0, 5)
	if err := l.WriteSnapshot(0, nil); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Fatalf("WriteSnapshot(0) = %v, want %s", err, apollo.EINVALID)
	}
	if err := l.WriteSnapshot(6, nil); apollo.ErrorCode(err) != apollo.EINVALID || !strings.Contains(err.Error(), "only 5 records") {
		t.Fatalf("WriteSnapshot(6) = %v, want an error saying only 5 records exist", err)
	}
	boom := errors.New("encoder broke")
	err := l.WriteSnapshot(5, func(w io.Writer) error {
		w.Write([]byte("half a state"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteSnapshot with a failing writer = %v, want its error", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), snapSuffix) || strings.HasSuffix(e.Name(), tmpSuffix) {
			t.Fatalf("a failed snapshot left %s behind", e.Name())
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteSnapshot(5, func(io.Writer) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("WriteSnapshot after Close = %v, want ErrClosed", err)
	}
}

// A snapshot must never be ahead of what is on disk, whatever the policy.
func TestWriteSnapshotSyncsTheLogFirst(t *testing.T) {
	t.Parallel()
	watch := &syncWatch{}
	l := openT(t, Options{Dir: t.TempDir(), Sync: SyncOff, hooks: watch.hooks()})
	for i := range 30 {
		if _, err := l.Append(payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	writeSnap(t, l, 30, []byte("s"))
	if got := LSN(watch.synced.Load()); got < 30 {
		t.Fatalf("after WriteSnapshot(30) the disk holds LSN %d", got)
	}
}

func TestOpenRemovesLeftoverTempFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	appendRange(t, l, 0, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	leftovers := []string{snapshotName(3) + tmpSuffix, segmentName(4) + tmpSuffix}
	for _, name := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, Options{Dir: dir})
	checkRecords(t, replayAll(t, l, 0), 0, 3)
	for _, name := range leftovers {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s survived Open: %v", name, err)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("Open removed a file it does not own: %v", err)
	}
}

// The first snapshot removes no segment: while it is the only one, a
// damaged copy of it (skipped by LatestSnapshot) leaves the whole log to
// replay from the start. It used to remove every segment it covered, and
// recovery then had neither the snapshot nor the records before it: the
// start failed with ErrGap and the state before the snapshot was lost.
func TestOnlySnapshotDamagedReplaysTheWholeLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentSize: 4096}
	l := openT(t, opts)
	appendRange(t, l, 0, 100)
	writeSnap(t, l, 90, stateAt(90, 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segFiles(t, dir); len(segs) < 3 || segs[0].lsn != 1 {
		t.Fatalf("segments after the first snapshot start at %v, want several, the first holding LSN 1", segs)
	}
	flipBit(t, filepath.Join(dir, snapshotName(90)), snapHeaderSize+100, 3)
	l = openT(t, opts)
	if lsn, body := readLatest(t, l); lsn != 0 || body != nil {
		t.Fatalf("LatestSnapshot = %d, %d bytes; want none: the only snapshot is damaged", lsn, len(body))
	}
	checkRecords(t, replayAll(t, l, 0), 0, 100)

	// From the second snapshot on, the segments the older one covers go.
	appendRange(t, l, 100, 200)
	writeSnap(t, l, 150, stateAt(150, 5000))
	writeSnap(t, l, 190, stateAt(190, 5000))
	if segs := segFiles(t, dir); segs[0].lsn > 151 || segs[0].lsn == 1 {
		t.Fatalf("segments start at %v, want the first to hold LSN 151, and records before gone", segs)
	}
}

// A log whose directory was moved away and replaced by another (a restore
// over a running server) writes no snapshot into the new one.
func TestWriteSnapshotRefusesAReplacedDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "wal")
	l := openT(t, Options{Dir: dir})
	appendRange(t, l, 0, 10)
	if err := os.Rename(dir, filepath.Join(root, "wal.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := l.WriteSnapshot(10, func(w io.Writer) error { _, err := w.Write([]byte("state")); return err })
	if !errors.Is(err, ErrMoved) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("WriteSnapshot after the directory was replaced: %v, want ErrMoved naming %s", err, dir)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the new directory holds %v, want nothing", ents)
	}
}

// A damaged snapshot that recovery skipped no longer counts as one of the
// two kept: the next snapshot keeps the good one recovery used, and the
// segments after it, so a damage of the new one can still fall back. The
// damaged one was kept as the older of the two, the good one removed, and
// the segments it needed with it: a damage of the new snapshot then left
// nothing to recover from (ErrGap).
func TestSkippedSnapshotIsSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logged bytes.Buffer
	opts := Options{Dir: dir, SegmentSize: 4096, Logger: slogTo(&logged)}
	l := openT(t, opts)
	appendRange(t, l, 0, 100)
	writeSnap(t, l, 50, stateAt(50, 5000))
	writeSnap(t, l, 90, stateAt(90, 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, snapshotName(90))
	flipBit(t, damaged, snapHeaderSize+100, 1)
	l = openT(t, opts)
	if lsn, _ := readLatest(t, l); lsn != 50 {
		t.Fatalf("LatestSnapshot = %d, want 50", lsn)
	}
	if _, err := os.Stat(damaged + ".corrupt"); err != nil || !strings.Contains(logged.String(), damaged+".corrupt") {
		t.Fatalf("the damaged snapshot is not set aside as %s.corrupt (%v), log: %s", damaged, err, logged.String())
	}
	appendRange(t, l, 100, 150)
	writeSnap(t, l, 140, stateAt(140, 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	flipBit(t, filepath.Join(dir, snapshotName(140)), snapHeaderSize+100, 1)
	l = openT(t, opts)
	lsn, body := readLatest(t, l)
	if lsn != 50 || !bytes.Equal(body, stateAt(50, 5000)) {
		t.Fatalf("LatestSnapshot = %d, want the good snapshot 50", lsn)
	}
	checkRecords(t, replayAll(t, l, 50), 50, 150)
}
