package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// On-disk format (little-endian):
//
//	segment  = header record* fill*
//	header   = "APWAL" version:u8 reserved:[2] firstLSN:u64 crc32c(header[0:16]):u32
//	record   = length:u32 crc32c(payload):u32 payload
//	fill     = 0xFF (the runway: only in the last segment, after a crash)
//
// A segment is created under a temporary name and renamed once its header
// is on disk, so a segment file always starts with a whole header. No
// record starts with fill: its length is at most MaxRecordSize.
const (
	segMagic      = "APWAL"
	segVersion    = 1
	segHeaderSize = 20
	recHeaderSize = 8
	segSuffix     = ".wal"
	tmpSuffix     = ".tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(first LSN) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

func encodeSegHeader(first LSN) []byte {
	h := make([]byte, segHeaderSize)
	copy(h, segMagic)
	h[5] = segVersion
	binary.LittleEndian.PutUint64(h[8:], uint64(first))
	binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(h[:16], castagnoli))
	return h
}

// checkSegHeader reports what is wrong with h as the header of a segment
// whose name says it starts at want, or "" when nothing is.
func checkSegHeader(h []byte, want LSN) string {
	switch {
	case len(h) < segHeaderSize:
		return fmt.Sprintf("header cut short at %d bytes", len(h))
	case string(h[:5]) != segMagic:
		return "not a wal segment (bad magic)"
	case h[5] != segVersion:
		return fmt.Sprintf("unsupported segment version %d", h[5])
	case binary.LittleEndian.Uint32(h[16:]) != crc32.Checksum(h[:16], castagnoli):
		return "header checksum mismatch"
	case LSN(binary.LittleEndian.Uint64(h[8:])) != want:
		return fmt.Sprintf("header says first LSN %d, the file name says %d", binary.LittleEndian.Uint64(h[8:]), want)
	}
	return ""
}

// appendRecord encodes one record onto buf.
func appendRecord(buf, payload []byte, sum uint32) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = binary.LittleEndian.AppendUint32(buf, sum)
	return append(buf, payload...)
}

// listFiles returns the numbered files of dir with the suffix (e.g. segments
// "<20 digits>.wal"), sorted by number. Other names are ignored.
func listFiles(dir, suffix string) ([]numbered, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	var out []numbered
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok || len(base) != 20 || e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(base, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, numbered{LSN(n), filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(out, func(a, b numbered) int { return cmpLSN(a.lsn, b.lsn) })
	return out, nil
}

// numbered is a segment (lsn = first LSN) or a snapshot (lsn = state's LSN).
type numbered struct {
	lsn  LSN
	path string
}

func cmpLSN(a, b LSN) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// badRecord says why the record at off is not valid.
type badRecord struct {
	off    int64
	reason string
}

func (b *badRecord) Error() string { return fmt.Sprintf("offset %d: %s", b.off, b.reason) }

// recordReader reads records sequentially from a segment body, verifying
// each. Payloads point into its buffer and are valid until the next call, so
// reading allocates nothing per record.
type recordReader struct {
	r          io.Reader
	buf        []byte
	start, end int   // buf[start:end] is read but not yet consumed
	off        int64 // file offset of buf[start]
	eof        bool
}

// readBufSize holds any record, so a record never needs a bigger buffer.
const readBufSize = 2 << 20

func newRecordReader(buf []byte) *recordReader {
	if cap(buf) < readBufSize {
		buf = make([]byte, readBufSize)
	}
	return &recordReader{buf: buf[:cap(buf)]}
}

// reset points the reader at r, whose first byte is at file offset off.
func (rd *recordReader) reset(r io.Reader, off int64) {
	rd.r, rd.start, rd.end, rd.off, rd.eof = r, 0, 0, off, false
}

// fill makes at least n bytes available unless the file ends first.
func (rd *recordReader) fill(n int) error {
	if rd.end-rd.start >= n || rd.eof {
		return nil
	}
	if rd.start > 0 {
		rd.end = copy(rd.buf, rd.buf[rd.start:rd.end])
		rd.start = 0
	}
	for rd.end < n {
		m, err := rd.r.Read(rd.buf[rd.end:])
		rd.end += m
		if errors.Is(err, io.EOF) {
			rd.eof = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// frame makes the next whole record available at buf[start:start+total]
// and returns total. It returns io.EOF at a clean end, a *badRecord for a
// short or impossible record, and other errors for I/O failures.
func (rd *recordReader) frame() (int, error) {
	if err := rd.fill(recHeaderSize); err != nil {
		return 0, err
	}
	avail := rd.end - rd.start
	if avail == 0 {
		return 0, io.EOF
	}
	if avail < recHeaderSize {
		return 0, &badRecord{rd.off, fmt.Sprintf("record header cut short (%d of %d bytes)", avail, recHeaderSize)}
	}
	n := binary.LittleEndian.Uint32(rd.buf[rd.start:])
	if reason := checkLength(n); reason != "" {
		return 0, &badRecord{rd.off, reason}
	}
	total := recHeaderSize + int(n)
	if err := rd.fill(total); err != nil {
		return 0, err
	}
	if avail = rd.end - rd.start; avail < total {
		return 0, &badRecord{rd.off, fmt.Sprintf("record cut short (%d of %d bytes)", avail, total)}
	}
	return total, nil
}

// next returns the next record's payload after checking its checksum. On
// error nothing is consumed.
func (rd *recordReader) next() ([]byte, error) {
	total, err := rd.frame()
	if err != nil {
		return nil, err
	}
	rec := rd.buf[rd.start : rd.start+total]
	payload := rec[recHeaderSize:]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rec[4:]) {
		return nil, &badRecord{rd.off, "record checksum mismatch"}
	}
	rd.advance(total)
	return payload, nil
}

// skip consumes the next record without checking its checksum; Replay uses
// it to pass the records at or below its starting LSN.
func (rd *recordReader) skip() error {
	total, err := rd.frame()
	if err == nil {
		rd.advance(total)
	}
	return err
}

func (rd *recordReader) advance(n int) {
	rd.start += n
	rd.off += int64(n)
}

// checkLength rejects lengths Append never writes. Zero is among them, which
// is why a zero-filled tail reads as torn rather than as empty records.
func checkLength(n uint32) string {
	switch {
	case n == 0:
		return "zero record length"
	case n > MaxRecordSize:
		return fmt.Sprintf("record length %d over the %d-byte limit", n, MaxRecordSize)
	}
	return ""
}
