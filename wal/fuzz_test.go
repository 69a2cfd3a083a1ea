package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// validPrefix is the reference reader: the records of body up to the first
// one that is cut short, has an impossible length or fails its checksum.
func validPrefix(body []byte) [][]byte {
	var recs [][]byte
	for len(body) >= recHeaderSize {
		n := binary.LittleEndian.Uint32(body)
		if n == 0 || n > MaxRecordSize || uint64(len(body)) < recHeaderSize+uint64(n) {
			break
		}
		p := body[recHeaderSize : recHeaderSize+n]
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(body[4:]) {
			break
		}
		recs = append(recs, p)
		body = body[recHeaderSize+n:]
	}
	return recs
}

// endsInWholeBadRecord reports whether what follows body's valid prefix is
// one record of a possible length that ends exactly where body's written
// bytes end (the runway's fill after them left out): a record written
// whole whose checksum fails, which Open must refuse.
func endsInWholeBadRecord(body []byte) bool {
	for _, p := range validPrefix(body) {
		body = body[recHeaderSize+len(p):]
	}
	for len(body) > 0 && body[len(body)-1] == fillByte {
		body = body[:len(body)-1]
	}
	if len(body) < recHeaderSize {
		return false
	}
	n := binary.LittleEndian.Uint32(body)
	return n != 0 && n <= MaxRecordSize && uint64(len(body)) == recHeaderSize+uint64(n)
}

func encodeRecords(payloads ...string) []byte {
	var b []byte
	for _, p := range payloads {
		b = appendRecord(b, []byte(p), crc32.Checksum([]byte(p), castagnoli))
	}
	return b
}

// FuzzReplay feeds arbitrary bytes as the body of the only segment. Open
// must not panic; it either fails with ErrCorrupt or recovers exactly the
// records a plain sequential reader accepts, and then appends after them.
// A last record written whole but failing its checksum is never cut.
func FuzzReplay(f *testing.F) {
	good := encodeRecords(`{"taskID":"a","sequence":1}`, "b", `{"taskID":"c","sequence":3,"status":"failed"}`)
	f.Add([]byte{})
	f.Add(good)
	f.Add(good[:len(good)-3])                             // torn last record
	f.Add(append(bytes.Clone(good), make([]byte, 64)...)) // zero-filled tail
	f.Add(append(bytes.Clone(good), 0xff, 0xff, 0xff, 0x7f, 1, 2, 3))
	flipped := bytes.Clone(good)
	flipped[12] ^= 4 // damage in the first record, valid ones after it
	f.Add(flipped)
	f.Add(encodeRecords("")) // zero-length record
	lastFlipped := bytes.Clone(good)
	lastFlipped[len(lastFlipped)-2] ^= 1 // damage in the last record, written whole
	f.Add(lastFlipped)
	fill := bytes.Repeat([]byte{fillByte}, 100) // a crash leaves the runway after the records
	f.Add(append(bytes.Clone(good), fill...))
	f.Add(append(bytes.Clone(good[:len(good)-3]), fill...))
	f.Add(append(bytes.Clone(lastFlipped), fill...))
	f.Add(append(append(bytes.Clone(good[:len(good)-3]), 0, 0, 0), fill...))
	// A copy of a running log: fill to a block's end, then records written
	// after the copy read that block (torn, cut like a crash's tail).
	torn := append(bytes.Clone(good), bytes.Repeat([]byte{fillByte}, fillBlock-(segHeaderSize+len(good))%fillBlock)...)
	f.Add(append(torn, good...))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		seg := append(encodeSegHeader(1), body...)
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), seg, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(Options{Dir: dir, Sync: SyncOff, Logger: quiet})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed with %v, want ErrCorrupt or success", err)
			}
			return
		}
		defer l.Close()
		if endsInWholeBadRecord(body) {
			t.Fatal("Open cut a last record that was written whole and fails its checksum")
		}
		want := validPrefix(body)
		var got [][]byte
		if err := l.Replay(0, func(lsn LSN, p []byte) error {
			if lsn != LSN(len(got)+1) {
				t.Fatalf("record %d replayed as LSN %d", len(got)+1, lsn)
			}
			got = append(got, bytes.Clone(p))
			return nil
		}); err != nil {
			t.Fatalf("Replay after a successful Open: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("replayed %d records, the reference reader accepts %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d = %q, want %q", i+1, got[i], want[i])
			}
		}
		lsn, err := l.Append([]byte("after"))
		if err == nil {
			err = l.Wait(t.Context(), lsn)
		}
		if err != nil || lsn != LSN(len(want)+1) {
			t.Fatalf("Append after recovery = %d, %v; want LSN %d", lsn, err, len(want)+1)
		}
		// What Open kept and the record after it survive the next start.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(Options{Dir: dir, Sync: SyncOff, Logger: quiet})
		if err != nil {
			t.Fatalf("reopen after recovery and an append: %v", err)
		}
		defer l.Close()
		n := 0
		if err := l.Replay(0, func(lsn LSN, p []byte) error {
			if n < len(want) && !bytes.Equal(p, want[n]) || n == len(want) && string(p) != "after" {
				t.Fatalf("after reopening, record %d = %q", lsn, p)
			}
			n++
			return nil
		}); err != nil || n != len(want)+1 {
			t.Fatalf("after reopening, replayed %d records (%v), want %d", n, err, len(want)+1)
		}
	})
}

// FuzzLatestSnapshot feeds arbitrary bytes as a snapshot file. It must not
// panic, and a snapshot it accepts must yield exactly the stored body with
// a matching checksum.
func FuzzLatestSnapshot(f *testing.F) {
	body := []byte("task states and metric windows")
	valid := append(encodeSnapHeader(7, int64(len(body)), crc32.Checksum(body, castagnoli)), body...)
	f.Add(valid)
	f.Add(valid[:snapHeaderSize])
	f.Add(valid[:20])
	f.Add(append(bytes.Clone(valid), 'x'))
	empty := encodeSnapHeader(7, 0, 0)
	f.Add(empty)
	dir := f.TempDir()
	l, err := Open(Options{Dir: dir, Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	for i := range 7 {
		if _, err := l.Append(payload(i)); err != nil {
			f.Fatal(err)
		}
	}
	path := filepath.Join(dir, snapshotName(7))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lsn, rc, err := l.LatestSnapshot()
		if err != nil {
			t.Fatalf("LatestSnapshot: %v (a corrupt snapshot is skipped, not an error)", err)
		}
		if rc == nil {
			if lsn != 0 {
				t.Fatalf("no body but LSN %d", lsn)
			}
			return
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if lsn != 7 || len(data) < snapHeaderSize || !bytes.Equal(got, data[snapHeaderSize:]) ||
			crc32.Checksum(got, castagnoli) != binary.LittleEndian.Uint32(data[24:]) {
			t.Fatalf("accepted snapshot LSN %d with body %q from file %q", lsn, got, data)
		}
	})
}
