package wal

import (
	"bytes"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunway: the active segment is filled ahead of its records, so the
// fsyncs that make records durable do not grow the file; a clean Close
// and a roll trim the fill; a crash leaves it, and the next Open takes it
// for the records' clean end (nothing cut, nothing reported) and appends
// where the records end, across two more crashes.
func TestRunway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	appendRange(t, l, 0, 1)
	seg := segFiles(t, dir)[0].path
	size := fileSize(t, seg)
	if size < runway {
		t.Fatalf("after the first record the segment is %d bytes, want a runway of at least %d", size, runway)
	}
	for i := 1; i < 200; i++ {
		appendRange(t, l, i, i+1) // each waits for its own fsync
	}
	if got := fileSize(t, seg); got != size {
		t.Fatalf("the segment grew from %d to %d bytes while records landed in its runway", size, got)
	}
	crashed := copyDir(t, dir) // what a kill -9 leaves: the records, then the runway
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, seg), recordsEnd(t, seg); got != want {
		t.Fatalf("after Close the segment is %d bytes, want %d: the end of its records", got, want)
	}

	for crash, n := 0, 200; crash < 3; crash, n = crash+1, n+1 {
		var logged bytes.Buffer
		l := openT(t, Options{Dir: crashed, Logger: slogTo(&logged)})
		checkRecords(t, replayAll(t, l, 0), 0, n)
		if got := l.Stats().Repaired; got != 0 || strings.Contains(logged.String(), "torn") {
			t.Fatalf("restart %d took the runway for a torn tail: repaired %d bytes, log %q", crash, got, logged.String())
		}
		appendRange(t, l, n, n+1) // where the records end, not after the runway
		crashed = copyDir(t, crashed)
	}
}

// TestRollTrimsTheRunway: every segment but the last ends with its last
// record, even after a crash, so only the last can hold a runway.
func TestRollTrimsTheRunway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentSize: 64 << 10})
	for i := 0; i < 2000; i += 10 {
		appendRange(t, l, i, i+10)
	}
	crashed := copyDir(t, dir)
	segs := segFiles(t, crashed)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		if got, want := fileSize(t, s.path), recordsEnd(t, s.path); got != want {
			t.Fatalf("%s is %d bytes, want %d: a segment that is not the last keeps no runway", filepath.Base(s.path), got, want)
		}
	}
	last := segs[len(segs)-1].path
	if fileSize(t, last) == recordsEnd(t, last) {
		t.Fatalf("the last segment has no runway: %d bytes", fileSize(t, last))
	}
	l2 := openT(t, Options{Dir: crashed, SegmentSize: 64 << 10})
	checkRecords(t, replayAll(t, l2, 0), 0, 2000)
}

// TestRunwayGivesWayToAFullDisk: when the disk has no room for a runway,
// the records are written without one, the fill written before the disk
// ran out is taken back, and the segment does not try again at every
// flush.
func TestRunwayGivesWayToAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := &syncWatch{}
	full := error(syscall.ENOSPC)
	w.failFill.Store(&full)
	l := openT(t, Options{Dir: dir, hooks: w.hooks()})
	for i := 0; i < 50; i++ {
		appendRange(t, l, i, i+1)
	}
	seg := segFiles(t, dir)[0].path
	if got, want := fileSize(t, seg), recordsEnd(t, seg); got != want {
		t.Fatalf("the segment is %d bytes, want %d: the records and no fill", got, want)
	}
	if got := w.fills.Load(); got != 1 {
		t.Fatalf("the runway was tried %d times, want once for the segment", got)
	}
	crashed := copyDir(t, dir)
	checkRecords(t, replayAll(t, openT(t, Options{Dir: crashed}), 0), 0, 50)
}

// withRunway appends n bytes of fill to a segment file, as a crash leaves
// the active one.
func withRunway(t *testing.T, path string, n int) {
	t.Helper()
	appendBytes(t, path, bytes.Repeat([]byte{fillByte}, n))
}
