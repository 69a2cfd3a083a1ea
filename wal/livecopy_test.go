package wal

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCopyOfARunningLog: a copy of the active segment made while the log
// is written (cp, dd, a backup tool: docs/operations.md, "Backup and
// restore") reads some blocks before records were written into them and
// later blocks after, so the copy holds the records up to a point, the
// runway's fill to a block's end, then records again. The records before
// that point open, the rest is cut as a torn tail (it was written after
// the copy passed), and the log appends after them. Damage that leaves no
// such fill is still refused.
func TestCopyOfARunningLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	appendRange(t, l, 0, 1000)
	seg := segFiles(t, dir)[0].path
	early := readFile(t, seg) // what the copy read first
	offs, earlyEnd := scanRecords(t, seg)
	appendRange(t, l, 1000, 3000)
	late := readFile(t, seg) // what it read after
	if int64(len(late)) < earlyEnd+(130<<10) || recordsEnd(t, seg) < earlyEnd+(130<<10) {
		t.Fatalf("fixture: the records grew from %d to %d bytes, want 130 KiB more", earlyEnd, recordsEnd(t, seg))
	}
	mid := offs[700] + 5 // inside record 700, which the early read caught half written

	tests := []struct {
		name  string
		copy  func() []byte
		whole int // records the copy holds whole before the tear
	}{
		{"blocks of 512 bytes", func() []byte { return splice(early, late, ceil(earlyEnd, 512)) }, 1000},
		{"pages of 4 KiB", func() []byte { return splice(early, late, ceil(earlyEnd, 4096)) }, 1000},
		{"chunks of 128 KiB", func() []byte { return splice(early, late, ceil(earlyEnd, 128<<10)) }, 1000},
		{"a page read while a record was written into it", func() []byte {
			b := bytes.Clone(late)
			for i := mid; i < ceil(mid, 4096); i++ {
				b[i] = fillByte
			}
			return b
		}, 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := copyDir(t, dir)
			writeFile(t, segFiles(t, cp)[0].path, tt.copy())
			var logged bytes.Buffer
			l2, err := Open(Options{Dir: cp, Logger: slogTo(&logged)})
			if err != nil {
				t.Fatalf("Open of the copy: %v", err)
			}
			defer l2.Close()
			checkRecords(t, replayAll(t, l2, 0), 0, tt.whole)
			if l2.Stats().Repaired == 0 || !strings.Contains(logged.String(), "a copy made while the log was written") {
				t.Fatalf("the tear was not reported: repaired %d bytes, log %q", l2.Stats().Repaired, logged.String())
			}
			lsn, err := l2.Append(payload(tt.whole))
			if err != nil || lsn != LSN(tt.whole+1) {
				t.Fatalf("Append after the cut = %d, %v; want LSN %d", lsn, err, tt.whole+1)
			}
		})
	}

	t.Run("damage without fill is refused", func(t *testing.T) {
		cp := copyDir(t, dir)
		b := bytes.Clone(late)
		for i := mid; i < ceil(mid, 4096); i++ {
			b[i] = 0x5A
		}
		writeFile(t, segFiles(t, cp)[0].path, b)
		l2, err := Open(Options{Dir: cp})
		if err == nil {
			l2.Close()
			t.Fatal("Open succeeded on a log damaged before its tail")
		}
		if ce, ok := isCorrupt(err); !ok || ce.Offset != offs[700] || !strings.Contains(err.Error(), "a valid record follows") {
			t.Fatalf("Open = %v, want corruption at offset %d with a valid record after it", err, offs[700])
		}
	})
}

// splice is a copy that read early up to at and late from there on.
func splice(early, late []byte, at int64) []byte {
	return append(bytes.Clone(early[:at]), late[at:]...)
}

func ceil(off, block int64) int64 { return (off/block + 1) * block }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(fmt.Errorf("writing the copy: %w", err))
	}
}
