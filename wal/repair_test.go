package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildLog writes n records to a fresh log with small segments and closes
// it, returning the directory.
func buildLog(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentSize: 4096})
	for i := 0; i < n; i += 10 {
		appendRange(t, l, i, min(i+10, n))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segFiles(t, dir); len(segs) < 3 {
		t.Fatalf("fixture has %d segments, want at least 3", len(segs))
	}
	return dir
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// lastRecord builds a log of n records and returns its directory, the
// base name of its last segment, and that segment's last record's offset
// and the segment's size.
func lastRecord(t *testing.T, n int) (src, lastSeg string, lastOff, size int64) {
	t.Helper()
	src = buildLog(t, n)
	segs := segFiles(t, src)
	offs := recordOffsets(t, segs[len(segs)-1].path)
	return src, filepath.Base(segs[len(segs)-1].path), offs[len(offs)-1], fileSize(t, segs[len(segs)-1].path)
}

func TestTornTailIsRepaired(t *testing.T) {
	t.Parallel()
	const n = 120
	src, lastSeg, lastOff, size := lastRecord(t, n)

	type tc struct {
		name   string
		damage func(t *testing.T, path string)
		keep   int   // intact records expected after repair
		cut    int64 // bytes Open must cut, the runway not counted
		runway int   // bytes of fill the damage leaves at the end
	}
	var cases []tc
	for at := lastOff; at < size; at++ {
		cases = append(cases, tc{fmt.Sprintf("truncate at %d", at), func(t *testing.T, p string) {
			if err := os.Truncate(p, at); err != nil {
				t.Fatal(err)
			}
		}, n - 1, at - lastOff, 0})
	}
	garbage := make([]byte, 37)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	cases = append(cases,
		tc{"garbage after the last record", func(t *testing.T, p string) { appendBytes(t, p, garbage) }, n, 37, 0},
		tc{"zeros after the last record", func(t *testing.T, p string) { appendBytes(t, p, make([]byte, 4096)) }, n, 4096, 0},
		tc{"half a record then zeros", func(t *testing.T, p string) {
			if err := os.Truncate(p, lastOff+20); err != nil {
				t.Fatal(err)
			}
			appendBytes(t, p, make([]byte, 8192))
		}, n - 1, 20 + 8192, 0},
		// A crash leaves the active segment's runway after its records.
		tc{"the runway after the last record", func(t *testing.T, p string) { withRunway(t, p, runway) }, n, 0, runway},
		tc{"half a record then the runway", func(t *testing.T, p string) {
			if err := os.Truncate(p, lastOff+20); err != nil {
				t.Fatal(err)
			}
			withRunway(t, p, 8192)
		}, n - 1, 20, 8192},
		tc{"half a record, zeros, then the runway", func(t *testing.T, p string) {
			if err := os.Truncate(p, lastOff+20); err != nil {
				t.Fatal(err)
			}
			appendBytes(t, p, make([]byte, 4096))
			withRunway(t, p, 8192)
		}, n - 1, 20 + 4096, 8192},
		tc{"garbage then the runway", func(t *testing.T, p string) {
			appendBytes(t, p, garbage)
			withRunway(t, p, 100)
		}, n, 37, 100},
	)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			damaged := filepath.Join(dir, lastSeg)
			c.damage(t, damaged)
			cutAt := fileSize(t, damaged) - int64(c.runway) - c.cut
			var logged bytes.Buffer
			l := openT(t, Options{Dir: dir, SegmentSize: 4096, Logger: slogTo(&logged)})
			checkRecords(t, replayAll(t, l, 0), 0, c.keep)
			if got := l.Stats().Repaired; got != c.cut {
				t.Fatalf("Stats.Repaired = %d, want %d", got, c.cut)
			}
			wantLog := fmt.Sprintf("segment=%s offset=%d bytes_cut=%d", damaged, cutAt, c.cut)
			if c.cut > 0 && !strings.Contains(logged.String(), wantLog) {
				t.Fatalf("log = %q, want a warning with %q", logged.String(), wantLog)
			}
			appendRange(t, l, c.keep, c.keep+1) // continues at the right LSN
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openT(t, Options{Dir: dir, SegmentSize: 4096})
			checkRecords(t, replayAll(t, l, 0), 0, c.keep+1)
			if got := l.Stats().Repaired; got != 0 {
				t.Fatalf("second Open repaired %d bytes, want 0", got)
			}
		})
	}
}

// TestDamagedLastRecordIsNotTorn: a bit flipped in the last record, which
// was written whole and may have been acknowledged, is corruption: Open
// refuses, names the record's LSN, and gives the command that drops it;
// after that command the log opens without it. So it is when the runway
// follows the record, as after a crash.
func TestDamagedLastRecordIsNotTorn(t *testing.T) {
	t.Parallel()
	for _, tail := range []int{0, runway} {
		t.Run(fmt.Sprintf("runway=%d", tail), func(t *testing.T) {
			t.Parallel()
			testDamagedLastRecord(t, tail)
		})
	}
}

func testDamagedLastRecord(t *testing.T, tail int) {
	const n = 120
	src, lastSeg, lastOff, size := lastRecord(t, n)
	if tail > 0 {
		withRunway(t, filepath.Join(src, lastSeg), tail)
	}
	for _, flip := range []struct {
		name   string
		off    int64
		bit    uint
		reason string
	}{
		{"length low bit", 0, 0, "damaged length field"},
		{"length bit 2", 0, 2, "damaged length field"},
		{"length high bit", 3, 7, "damaged length field"},
		{"checksum", 5, 4, "checksum does not match"},
		{"first payload byte", 8, 1, "checksum does not match"},
		{"last payload byte", size - lastOff - 1, 6, "checksum does not match"},
	} {
		t.Run(flip.name, func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			damaged := filepath.Join(dir, lastSeg)
			flipBit(t, damaged, lastOff+flip.off, flip.bit)
			l, err := Open(Options{Dir: dir, SegmentSize: 4096, Logger: quiet})
			if err == nil {
				l.Close()
				t.Fatal("Open cut a damaged last record as if it were a torn write")
			}
			ce, ok := isCorrupt(err)
			if !ok {
				t.Fatalf("Open = %v, want a *CorruptError wrapping ErrCorrupt", err)
			}
			msg := err.Error()
			recovery := fmt.Sprintf("truncate -s %d %s", lastOff, damaged)
			for _, want := range []string{fmt.Sprintf("LSN %d", n), flip.reason, "may have been acknowledged", recovery} {
				if !strings.Contains(msg, want) {
					t.Fatalf("Open error = %q, want it to say %q", msg, want)
				}
			}
			if ce.Path != damaged || ce.Offset != lastOff {
				t.Fatalf("error names %s offset %d, want %s offset %d", ce.Path, ce.Offset, damaged, lastOff)
			}
			if got := fileSize(t, damaged); got != size+int64(tail) {
				t.Fatalf("the refused Open changed the segment: %d bytes, want %d", got, size+int64(tail))
			}

			if err := os.Truncate(damaged, lastOff); err != nil { // the recovery the hint gives
				t.Fatal(err)
			}
			l = openT(t, Options{Dir: dir, SegmentSize: 4096})
			checkRecords(t, replayAll(t, l, 0), 0, n-1)
			appendRange(t, l, n-1, n) // continues at the freed LSN
		})
	}
}

func TestCorruptionBeforeTheTail(t *testing.T) {
	t.Parallel()
	src := buildLog(t, 160)
	segs := segFiles(t, src)
	first, middle, last := segs[0].path, segs[1].path, segs[len(segs)-1].path
	firstOffs, lastOffs := recordOffsets(t, first), recordOffsets(t, last)
	if len(lastOffs) < 3 {
		t.Fatalf("fixture's last segment has %d records, want at least 3", len(lastOffs))
	}

	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		file   string // base name the error must name
		offset int64
		reason string
	}{
		{"flipped bit in an earlier record of the last segment", func(t *testing.T, dir string) {
			flipBit(t, filepath.Join(dir, filepath.Base(last)), lastOffs[len(lastOffs)-3]+12, 3)
		}, last, lastOffs[len(lastOffs)-3], "a valid record follows"},
		{"flipped bit in a segment that is not the last", func(t *testing.T, dir string) {
			flipBit(t, filepath.Join(dir, filepath.Base(first)), firstOffs[len(firstOffs)-1]+9, 0)
		}, first, firstOffs[len(firstOffs)-1], "not the last"},
		{"truncated segment that is not the last", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, filepath.Base(first)), fileSize(t, first)-5); err != nil {
				t.Fatal(err)
			}
		}, first, firstOffs[len(firstOffs)-1], "cut short"},
		{"missing middle segment", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.Base(middle))); err != nil {
				t.Fatal(err)
			}
		}, segs[2].path, 0, "a segment is missing"},
		{"damaged segment header", func(t *testing.T, dir string) {
			flipBit(t, filepath.Join(dir, filepath.Base(first)), 1, 5)
		}, first, 0, "bad magic"},
		{"header LSN differs from the file name", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, segmentName(161)), encodeSegHeader(998), 0o644); err != nil {
				t.Fatal(err)
			}
		}, segmentName(161), 0, "header says first LSN 998, the file name says 161"},
		{"snapshot ahead of the log", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, snapshotName(500)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, snapshotName(500), 0, "the log ends at LSN 160"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			tt.damage(t, dir)
			l, err := Open(Options{Dir: dir, SegmentSize: 4096})
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded on a damaged log")
			}
			ce, ok := isCorrupt(err)
			if !ok {
				t.Fatalf("Open = %v, want a *CorruptError wrapping ErrCorrupt", err)
			}
			msg := err.Error()
			if filepath.Base(ce.Path) != filepath.Base(tt.file) || ce.Offset != tt.offset ||
				!strings.Contains(msg, filepath.Base(tt.file)) || !strings.Contains(msg, fmt.Sprintf("offset %d", tt.offset)) ||
				!strings.Contains(msg, tt.reason) || !strings.Contains(msg, "backup") {
				t.Fatalf("Open error = %q (path %s, offset %d), want %s at offset %d, %q and a hint",
					msg, ce.Path, ce.Offset, filepath.Base(tt.file), tt.offset, tt.reason)
			}
		})
	}
}
