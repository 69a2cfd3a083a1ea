package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/apollo-11/apollo"
)

// The snapshot format, version 3. A frame:
//
//	magic "APMS" 0x01
//	chunks: a uvarint length (1 to 1 MiB) and that many bytes; then 0
//	CRC-32 (IEEE) of the chunks' bytes, 4 bytes little endian
//
// The chunks' bytes, joined, are the content. Integers are varints (zigzag
// when they may be negative), strings a uvarint length and the bytes:
//
//	compacted0 compacted1                  (varint ms)
//	tenants: count, then each: name, jobs: count, then each:
//	    name, level0, level1, health
//	level: base (nField varints), entries: count, then each:
//	    key in level steps: the first as a varint, then the gap from the
//	    one before (uvarint, at least 1),
//	    the entry's own values (nField varints; the cumulative sums are
//	    rebuilt on reading), min, max (uvarints)
//	health: 0 for none, or 1 then the recent runs: count, then each:
//	    task ID, status, late (0 or 1), reportedAt, startedAt,
//	    finishedAt, cost;
//	    then the duration histogram (len(DurationBuckets)+1 varints) and
//	    the last ends by final status (3 varints)
//
// Version 1 had no health; it is still read, as jobs without runs.
// Versions 1 and 2 had one value fewer (no fDueAgain, the last field); they
// are still read, with DueAgain zero in every entry.
// The frame lets a reader take exactly the snapshot's bytes from any
// io.Reader and then parse from memory, without a call per byte.
// Tenants and jobs are written in name order; the reader insists on it, so
// a name cannot appear twice.
var snapMagic = [5]byte{'A', 'P', 'M', 'S', 3}

// oldestSnapshot is the oldest version ReadSnapshot reads.
const oldestSnapshot = 1

const (
	writeChunk = 64 << 10
	maxChunk   = 1 << 20
	// maxSnapString bounds a tenant or job name. Names are at most
	// apollo.MaxNameBytes; the margin lets that limit change.
	maxSnapString = 4096
)

var levelStep = [2]int64{bucketMs, minuteMs}

// WriteSnapshot writes every tenant's jobs to w. It locks one job at a time,
// so Apply carries on meanwhile; each job is written as it was at one
// instant, not all jobs at the same one.
func (a *Aggregator) WriteSnapshot(w io.Writer) error {
	cw := &chunkWriter{w: w, buf: make([]byte, 0, writeChunk+4096)}
	cw.write(snapMagic[:])
	b := binary.AppendVarint(cw.buf, a.compacted0.Load())
	b = binary.AppendVarint(b, a.compacted1.Load())
	names, ts := a.tenantList()
	b = binary.AppendUvarint(b, uint64(len(ts)))
	for i, t := range ts {
		idx := t.index()
		b = appendString(b, names[i])
		b = binary.AppendUvarint(b, uint64(len(idx.series)))
		for _, s := range idx.series {
			b = appendString(b, s.name)
			s.mu.Lock()
			b = s.l0.appendTo(b, bucketMs)
			b = s.l1.appendTo(b, minuteMs)
			b = s.runs.appendTo(b)
			s.mu.Unlock()
			if len(b) >= writeChunk {
				cw.buf = b
				cw.flush()
				b = cw.buf
			}
		}
	}
	cw.buf = b
	cw.flush()
	cw.write(binary.AppendUvarint(cw.hdr[:0], 0))
	cw.write(binary.LittleEndian.AppendUint32(cw.hdr[:0], cw.crc))
	if cw.err != nil {
		return fmt.Errorf("metrics: write snapshot: %w", cw.err)
	}
	return nil
}

// chunkWriter frames content into chunks and sums it; the first error
// sticks.
type chunkWriter struct {
	w   io.Writer
	buf []byte // content not yet written
	crc uint32
	err error
	hdr [binary.MaxVarintLen64]byte
}

func (c *chunkWriter) write(p []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(p)
	}
}

func (c *chunkWriter) flush() {
	for b := c.buf; len(b) > 0; b = b[min(len(b), maxChunk):] {
		chunk := b[:min(len(b), maxChunk)]
		c.write(binary.AppendUvarint(c.hdr[:0], uint64(len(chunk))))
		c.write(chunk)
		c.crc = crc32.Update(c.crc, crc32.IEEETable, chunk)
	}
	c.buf = c.buf[:0]
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

func (r *jobRuns) appendTo(b []byte) []byte {
	if r == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(r.ring)))
	for i := range r.ring {
		run := &r.ring[i]
		b = appendString(b, run.TaskID)
		late := byte(0)
		if run.Late {
			late = 1
		}
		b = append(b, byte(run.Status), late)
		b = binary.AppendVarint(b, run.ReportedAt)
		b = binary.AppendVarint(b, run.StartedAt)
		b = binary.AppendVarint(b, run.FinishedAt)
		b = binary.AppendVarint(b, run.CostMs)
	}
	for _, x := range r.hist {
		b = binary.AppendVarint(b, x)
	}
	for _, x := range r.lastEnd {
		b = binary.AppendVarint(b, x)
	}
	return b
}

// ReadSnapshot replaces the aggregator's data with a snapshot that
// WriteSnapshot wrote. Nothing changes unless the whole snapshot is valid.
// It reads exactly the snapshot's bytes, so a snapshot can sit inside a
// larger file. Call it before the first Apply: changes applied while it
// runs are lost.
func (a *Aggregator) ReadSnapshot(r io.Reader) error {
	fr := &frameReader{r: r}
	content, err := fr.read()
	if err != nil {
		return fmt.Errorf("metrics: read snapshot at byte %d: %w", fr.off, err)
	}
	p := &snapParser{b: content, version: fr.version, fields: nField, recent: a.recent}
	if fr.version < 3 {
		p.fields = fDueAgain
	}
	tenants, c0, c1, err := p.decode()
	if err != nil {
		return fmt.Errorf("metrics: read snapshot content at byte %d: %w", p.off, err)
	}
	a.tmu.Lock()
	a.tenants.Store(tenants)
	a.compacted0.Store(c0)
	a.compacted1.Store(c1)
	a.tmu.Unlock()
	return nil
}

// frameReader takes the frame off r and returns the content; off counts
// the bytes read, for errors.
type frameReader struct {
	r       io.Reader
	off     int64
	one     [1]byte
	version byte
}

func (f *frameReader) ReadByte() (byte, error) {
	if _, err := io.ReadFull(f.r, f.one[:]); err != nil {
		return 0, eof(err)
	}
	f.off++
	return f.one[0], nil
}

func eof(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (f *frameReader) read() ([]byte, error) {
	var magic [len(snapMagic)]byte
	for i := range magic {
		c, err := f.ReadByte()
		if err != nil || (c != snapMagic[i] && i < len(magic)-1) {
			return nil, errors.New("not a metrics snapshot (bad magic)")
		}
		if i == len(magic)-1 {
			if c < oldestSnapshot || c > snapMagic[i] {
				return nil, fmt.Errorf("snapshot version %d, this build reads versions %d to %d", c, oldestSnapshot, snapMagic[i])
			}
			f.version = c
		}
	}
	var content []byte
	for {
		n, err := binary.ReadUvarint(f)
		if err != nil {
			return nil, fmt.Errorf("chunk length: %w", err)
		}
		if n == 0 {
			break
		}
		if n > maxChunk {
			return nil, fmt.Errorf("chunk of %d bytes, over the limit of %d", n, maxChunk)
		}
		// Grows by what the chunk declares, at most 1 MiB ahead of the
		// data actually read.
		content = slices.Grow(content, int(n))
		got, err := io.ReadFull(f.r, content[len(content):len(content)+int(n)])
		f.off += int64(got)
		if err != nil {
			return nil, fmt.Errorf("chunk of %d bytes: %w", n, eof(err))
		}
		content = content[:len(content)+int(n)]
	}
	var sum [4]byte
	for i := range sum {
		var err error
		if sum[i], err = f.ReadByte(); err != nil {
			return nil, fmt.Errorf("checksum: %w", err)
		}
	}
	if g, w := binary.LittleEndian.Uint32(sum[:]), crc32.ChecksumIEEE(content); g != w {
		return nil, fmt.Errorf("checksum %08x, content sums to %08x: the snapshot is damaged", g, w)
	}
	return content, nil
}

// snapParser decodes the content; off is where it is, for errors.
type snapParser struct {
	b       []byte
	off     int
	scratch level // reused while reading a level, so each level is allocated once at its size
	version byte  // of the snapshot
	fields  int   // values per entry in this version: the first fields of vec
	recent  int   // the reading aggregator's RecentRuns
}

func (p *snapParser) uvarint(what string) (uint64, error) {
	x, n := binary.Uvarint(p.b[p.off:])
	if n <= 0 {
		return 0, varintError(what, n)
	}
	p.off += n
	return x, nil
}

func (p *snapParser) varint(what string) (int64, error) {
	x, n := binary.Varint(p.b[p.off:])
	if n <= 0 {
		return 0, varintError(what, n)
	}
	p.off += n
	return x, nil
}

func varintError(what string, n int) error {
	if n == 0 {
		return fmt.Errorf("%s: %w", what, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%s: number over 64 bits", what)
}

// count reads a count of items that take at least size bytes each, and
// refuses one the rest of the content cannot hold.
func (p *snapParser) count(what string, size int) (int, error) {
	n, err := p.uvarint(what)
	if err == nil && n > uint64((len(p.b)-p.off)/size) {
		err = fmt.Errorf("%s: %d is more than the %d bytes left can hold", what, n, len(p.b)-p.off)
	}
	return int(n), err
}

func (p *snapParser) str(what string) (string, error) {
	n, err := p.uvarint(what + " length")
	if err != nil {
		return "", err
	}
	if n > maxSnapString || n > uint64(len(p.b)-p.off) {
		return "", fmt.Errorf("%s: length %d over the limit of %d or the bytes left", what, n, maxSnapString)
	}
	s := string(p.b[p.off : p.off+int(n)])
	p.off += int(n)
	return s, nil
}

func (p *snapParser) decode() (*sync.Map, int64, int64, error) {
	c0, err := p.varint("compacted0")
	if err != nil {
		return nil, 0, 0, err
	}
	c1, err := p.varint("compacted1")
	if err != nil {
		return nil, 0, 0, err
	}
	nt, err := p.count("tenant count", 2)
	if err != nil {
		return nil, 0, 0, err
	}
	tenants := new(sync.Map)
	prev := ""
	for i := range nt {
		name, err := p.str(fmt.Sprintf("tenant %d name", i))
		if err != nil {
			return nil, 0, 0, err
		}
		if i > 0 && name <= prev {
			return nil, 0, 0, fmt.Errorf("tenant %q after %q: tenants out of order", name, prev)
		}
		t, err := p.tenant(name)
		if err != nil {
			return nil, 0, 0, err
		}
		tenants.Store(name, t)
		prev = name
	}
	if p.off != len(p.b) {
		return nil, 0, 0, fmt.Errorf("%d bytes after the last tenant", len(p.b)-p.off)
	}
	return tenants, c0, c1, nil
}

func (p *snapParser) tenant(tn string) (*tenant, error) {
	n, err := p.count("job count", 1+2*(p.fields+1))
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", tn, err)
	}
	t := newTenant()
	ss := make([]*series, 0, n)
	for i := range n {
		name, err := p.str("job name")
		if err != nil {
			return nil, fmt.Errorf("tenant %q job %d: %w", tn, i, err)
		}
		if i > 0 && name <= ss[i-1].name {
			return nil, fmt.Errorf("tenant %q: job %q after %q: jobs out of order", tn, name, ss[i-1].name)
		}
		s := &series{name: name}
		for lv := range 2 {
			if err := p.level(s.level(lv), levelStep[lv]); err != nil {
				return nil, fmt.Errorf("tenant %q job %q level %d: %w", tn, name, lv, err)
			}
		}
		if p.version >= 2 {
			if s.runs, err = p.health(); err != nil {
				return nil, fmt.Errorf("tenant %q job %q health: %w", tn, name, err)
			}
		}
		t.byName.Store(name, s)
		ss = append(ss, s)
	}
	t.idx = newIndex(ss)
	return t, nil
}

func (p *snapParser) level(l *level, step int64) error {
	for f := range p.fields {
		var err error
		if l.base[f], err = p.varint("base"); err != nil {
			return err
		}
	}
	// The least an entry takes: a key, the values and min and max, one
	// byte each.
	n, err := p.count("entry count", 3+p.fields)
	if err != nil || n == 0 {
		return err
	}
	sc := &p.scratch
	sc.keys, sc.cums, sc.costs = sc.keys[:0], sc.cums[:0], sc.costs[:0]
	key, prev := int64(0), l.base
	for i := range n {
		if key, err = p.entry(sc, key, &prev, step, i == 0); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		prev = sc.cums[i]
	}
	l.keys, l.cums, l.costs = slices.Clone(sc.keys), slices.Clone(sc.cums), slices.Clone(sc.costs)
	return nil
}

// entry reads one entry after the one at key with sums prev and appends
// it to l; it returns the new key.
func (p *snapParser) entry(l *level, key int64, prev *vec, step int64, first bool) (int64, error) {
	const maxKey = 1 << 62
	if first {
		k, err := p.varint("key")
		if err != nil {
			return 0, err
		}
		if k > maxKey/step || k < -maxKey/step {
			return 0, fmt.Errorf("key %d out of range", k)
		}
		key = k * step
	} else {
		gap, err := p.uvarint("key gap")
		if err != nil {
			return 0, err
		}
		if gap == 0 || gap > uint64((maxKey-key)/step) {
			return 0, fmt.Errorf("key gap %d breaks the order or the range of keys", gap)
		}
		key += int64(gap) * step
	}
	cum := *prev
	for f := range p.fields {
		x, err := p.varint("value")
		if err != nil {
			return 0, err
		}
		cum[f] += x
	}
	mn, err := p.uvarint("min")
	if err != nil {
		return 0, err
	}
	mx, err := p.uvarint("max")
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

// health reads a job's health record, or nil for none. A ring longer than
// the reader's RecentRuns keeps its newest runs.
func (p *snapParser) health() (*jobRuns, error) {
	has, err := p.uvarint("health mark")
	if err != nil || has == 0 {
		return nil, err
	}
	if has != 1 {
		return nil, fmt.Errorf("health mark %d is not 0 or 1", has)
	}
	const minRunBytes = 7 // an empty ID, status, late, four varints
	n, err := p.count("run count", minRunBytes)
	if err != nil {
		return nil, err
	}
	if n > apollo.MaxRecentRuns {
		return nil, fmt.Errorf("%d runs, over the limit of %d", n, apollo.MaxRecentRuns)
	}
	r := &jobRuns{}
	ids := make(map[string]bool, n)
	for i := range n {
		run, err := p.run()
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i, err)
		}
		if ids[run.TaskID] {
			return nil, fmt.Errorf("run %d: task %q twice", i, run.TaskID)
		}
		ids[run.TaskID] = true
		if k := len(r.ring); k > 0 && runOrder(&r.ring[k-1], &run) >= 0 {
			return nil, fmt.Errorf("run %d: out of order", i)
		}
		r.insert(len(r.ring), run)
		if len(r.ring) > p.recent {
			r.remove(0, 1)
		}
	}
	for i := range r.hist {
		if r.hist[i], err = p.varint("histogram"); err != nil {
			return nil, err
		}
	}
	for i := range r.lastEnd {
		if r.lastEnd[i], err = p.varint("last end"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (p *snapParser) run() (apollo.RecentRun, error) {
	id, err := p.str("task ID")
	if err != nil {
		return apollo.RecentRun{}, err
	}
	if len(p.b)-p.off < 2 {
		return apollo.RecentRun{}, fmt.Errorf("status: %w", io.ErrUnexpectedEOF)
	}
	st, late := apollo.Status(p.b[p.off]), p.b[p.off+1]
	p.off += 2
	if !st.Valid() || late > 1 {
		return apollo.RecentRun{}, fmt.Errorf("status %d or late mark %d out of range", st, late)
	}
	run := apollo.RecentRun{TaskID: id, Status: st, Late: late == 1}
	for _, x := range []*int64{&run.ReportedAt, &run.StartedAt, &run.FinishedAt, &run.CostMs} {
		if *x, err = p.varint("run time"); err != nil {
			return apollo.RecentRun{}, err
		}
	}
	if run.CostMs < 0 {
		return apollo.RecentRun{}, fmt.Errorf("cost %d below zero", run.CostMs)
	}
	return run, nil
}
