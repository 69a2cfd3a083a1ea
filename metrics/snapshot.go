package metrics

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
)

// The snapshot format, version 1. Integers are varints (zigzag when they
// may be negative), strings a uvarint length and the bytes:
//
//	magic "APMS" 0x01
//	compacted0 compacted1                  (varint ms)
//	tenants: count, then each: name, jobs: count, then each:
//	    name, level0, level1
//	level: base (nField varints), entries: count, then each:
//	    key in level steps: the first as a varint, then the gap from the
//	    one before (uvarint, at least 1),
//	    the entry's own values (nField varints; the cumulative sums are
//	    rebuilt on reading), min, max (uvarints)
//	CRC-32 (IEEE) of everything before it, 4 bytes little endian
//
// Tenants and jobs are written in name order; the reader insists on it, so
// a name cannot appear twice.
var snapMagic = [5]byte{'A', 'P', 'M', 'S', 1}

// maxSnapString bounds a tenant or job name in a snapshot. Names are at
// most apollo.MaxNameBytes; the margin lets the limit change.
const maxSnapString = 4096

var levelStep = [2]int64{bucketMs, minuteMs}

// WriteSnapshot writes every tenant's jobs to w. It locks one job at a time,
// so Apply carries on meanwhile; a job is written as it was at one instant.
func (a *Aggregator) WriteSnapshot(w io.Writer) error {
	h := crc32.NewIEEE()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	buf := append([]byte(nil), snapMagic[:]...)
	buf = binary.AppendVarint(buf, a.compacted0.Load())
	buf = binary.AppendVarint(buf, a.compacted1.Load())
	names, ts := a.tenantList()
	buf = binary.AppendUvarint(buf, uint64(len(ts)))
	for i, t := range ts {
		idx := t.index()
		buf = appendString(buf, names[i])
		buf = binary.AppendUvarint(buf, uint64(len(idx.series)))
		for _, s := range idx.series {
			buf = appendString(buf, s.name)
			s.mu.Lock()
			buf = s.l0.appendTo(buf, bucketMs)
			buf = s.l1.appendTo(buf, minuteMs)
			s.mu.Unlock()
			if len(buf) > 32<<10 {
				if _, err := bw.Write(buf); err != nil {
					return fmt.Errorf("metrics: write snapshot: %w", err)
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := bw.Write(buf); err != nil {
		return fmt.Errorf("metrics: write snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("metrics: write snapshot: %w", err)
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, h.Sum32())); err != nil {
		return fmt.Errorf("metrics: write snapshot: %w", err)
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func (l *level) appendTo(b []byte, step int64) []byte {
	for _, x := range l.base {
		b = binary.AppendVarint(b, x)
	}
	b = binary.AppendUvarint(b, uint64(len(l.keys)))
	prevKey, prev := int64(0), &l.base
	for i, key := range l.keys {
		if i == 0 {
			b = binary.AppendVarint(b, key/step)
		} else {
			b = binary.AppendUvarint(b, uint64((key-prevKey)/step))
		}
		for f := range l.cums[i] {
			b = binary.AppendVarint(b, l.cums[i][f]-prev[f])
		}
		b = binary.AppendUvarint(b, uint64(l.costs[i].min))
		b = binary.AppendUvarint(b, uint64(l.costs[i].max))
		prevKey, prev = key, &l.cums[i]
	}
	return b
}

// ReadSnapshot replaces the aggregator's data with a snapshot that
// WriteSnapshot wrote. Nothing changes unless the whole snapshot is valid.
// It reads exactly the snapshot's bytes when r is an io.ByteReader (a
// bufio.Reader, a bytes.Reader), so a snapshot can sit inside a larger
// file. Call it before the first Apply: changes applied while it runs are
// lost.
func (a *Aggregator) ReadSnapshot(r io.Reader) error {
	br, ok := r.(io.ByteReader)
	if !ok {
		br = bufio.NewReader(r)
	}
	d := &snapDecoder{r: br}
	tenants, c0, c1, err := d.decode()
	if err != nil {
		return fmt.Errorf("metrics: read snapshot at byte %d: %w", d.off, err)
	}
	a.tmu.Lock()
	a.tenants.Store(tenants)
	a.compacted0.Store(c0)
	a.compacted1.Store(c1)
	a.tmu.Unlock()
	return nil
}

// snapDecoder reads varints and strings, keeping the offset and the CRC of
// what it has read.
type snapDecoder struct {
	r   io.ByteReader
	off int64
	crc uint32
	buf [512]byte // read but not yet in crc
	n   int
}

func (d *snapDecoder) ReadByte() (byte, error) {
	c, err := d.r.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	d.off++
	d.buf[d.n] = c
	if d.n++; d.n == len(d.buf) {
		d.sum()
	}
	return c, nil
}

func (d *snapDecoder) sum() {
	d.crc = crc32.Update(d.crc, crc32.IEEETable, d.buf[:d.n])
	d.n = 0
}

func (d *snapDecoder) uvarint(what string) (uint64, error) {
	x, err := binary.ReadUvarint(d)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return x, nil
}

func (d *snapDecoder) varint(what string) (int64, error) {
	x, err := binary.ReadVarint(d)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return x, nil
}

// count reads a count; the slices it sizes grow as items arrive, so a
// forged count cannot make a huge allocation.
func (d *snapDecoder) count(what string) (int, error) {
	n, err := d.uvarint(what)
	if err == nil && n > 1<<40 {
		err = fmt.Errorf("%s: %d is not a plausible count", what, n)
	}
	return int(n), err
}

func (d *snapDecoder) str(what string) (string, error) {
	n, err := d.uvarint(what + " length")
	if err != nil {
		return "", err
	}
	if n > maxSnapString {
		return "", fmt.Errorf("%s: length %d over the limit of %d", what, n, maxSnapString)
	}
	b := make([]byte, n)
	for i := range b {
		if b[i], err = d.ReadByte(); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
	}
	return string(b), nil
}

func (d *snapDecoder) decode() (*sync.Map, int64, int64, error) {
	for i, want := range snapMagic {
		c, err := d.ReadByte()
		if err != nil || c != want {
			if i < len(snapMagic)-1 || err != nil {
				return nil, 0, 0, errors.New("not a metrics snapshot (bad magic)")
			}
			return nil, 0, 0, fmt.Errorf("snapshot version %d, this build reads version %d", c, want)
		}
	}
	c0, err := d.varint("compacted0")
	if err != nil {
		return nil, 0, 0, err
	}
	c1, err := d.varint("compacted1")
	if err != nil {
		return nil, 0, 0, err
	}
	nt, err := d.count("tenant count")
	if err != nil {
		return nil, 0, 0, err
	}
	tenants := new(sync.Map)
	prev := ""
	for i := range nt {
		name, err := d.str(fmt.Sprintf("tenant %d name", i))
		if err != nil {
			return nil, 0, 0, err
		}
		if i > 0 && name <= prev {
			return nil, 0, 0, fmt.Errorf("tenant %q after %q: tenants out of order", name, prev)
		}
		t, err := d.tenant(name)
		if err != nil {
			return nil, 0, 0, err
		}
		tenants.Store(name, t)
		prev = name
	}
	d.sum()
	want := d.crc
	var got [4]byte
	for i := range got {
		if got[i], err = d.ReadByte(); err != nil {
			return nil, 0, 0, fmt.Errorf("checksum: %w", err)
		}
	}
	if g := binary.LittleEndian.Uint32(got[:]); g != want {
		return nil, 0, 0, fmt.Errorf("checksum %08x, content sums to %08x: the snapshot is damaged", g, want)
	}
	return tenants, c0, c1, nil
}

func (d *snapDecoder) tenant(tn string) (*tenant, error) {
	n, err := d.count(fmt.Sprintf("tenant %q job count", tn))
	if err != nil {
		return nil, err
	}
	t := newTenant()
	var ss []*series
	for i := range n {
		name, err := d.str(fmt.Sprintf("tenant %q job %d name", tn, i))
		if err != nil {
			return nil, err
		}
		if i > 0 && name <= ss[i-1].name {
			return nil, fmt.Errorf("tenant %q: job %q after %q: jobs out of order", tn, name, ss[i-1].name)
		}
		s := &series{name: name}
		for lv := range 2 {
			if err := d.level(s.level(lv), levelStep[lv]); err != nil {
				return nil, fmt.Errorf("tenant %q job %q level %d: %w", tn, name, lv, err)
			}
		}
		t.byName.Store(name, s)
		ss = append(ss, s)
	}
	t.idx = newIndex(slices.Clip(ss))
	return t, nil
}

func (d *snapDecoder) level(l *level, step int64) error {
	for f := range l.base {
		var err error
		if l.base[f], err = d.varint("base"); err != nil {
			return err
		}
	}
	n, err := d.count("entry count")
	if err != nil {
		return err
	}
	key, prev := int64(0), &l.base
	for i := range n {
		if key, err = d.entry(l, key, prev, step, i == 0); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		prev = &l.cums[i]
	}
	return nil
}

// entry reads one entry after the one at key with sums prev and appends
// it to l; it returns the new key.
func (d *snapDecoder) entry(l *level, key int64, prev *vec, step int64, first bool) (int64, error) {
	const maxKey = 1 << 62
	if first {
		k, err := d.varint("key")
		if err != nil {
			return 0, err
		}
		if k > maxKey/step || k < -maxKey/step {
			return 0, fmt.Errorf("key %d out of range", k)
		}
		key = k * step
	} else {
		gap, err := d.uvarint("key gap")
		if err != nil {
			return 0, err
		}
		if gap == 0 || gap > uint64((maxKey-key)/step) {
			return 0, fmt.Errorf("key gap %d breaks the order or the range of keys", gap)
		}
		key += int64(gap) * step
	}
	cum := *prev
	for f := range cum {
		x, err := d.varint("value")
		if err != nil {
			return 0, err
		}
		cum[f] += x
	}
	mn, err := d.uvarint("min")
	if err != nil {
		return 0, err
	}
	mx, err := d.uvarint("max")
	if err != nil {
		return 0, err
	}
	if mn > mx || mx > 1<<62 {
		return 0, fmt.Errorf("cost min %d and max %d out of order or range", mn, mx)
	}
	l.keys = append(l.keys, key)
	l.cums = append(l.cums, cum)
	l.costs = append(l.costs, costPair{int64(mn), int64(mx)})
	return key, nil
}
