package bus

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// Checkpoint holds every decision, waits until every queued change has
// reached the observers, and calls fn with the LSN of the last record the
// state reflects. Within fn, WriteState (and the observers' own snapshot
// writers) see a state that equals the log up to that LSN. Decisions resume
// when fn returns, so fn should copy the state into memory and leave the
// slow writing to disk for afterwards.
func (b *Bus) Checkpoint(fn func(lsn uint64) error) error {
	b.pause.Lock()
	defer b.pause.Unlock()
	b.waitDrained()
	// Every change is delivered: the live observers' mark is the copy's
	// LSN, for them to save before the snapshot is kept.
	b.live.next(b.lsn.Load())
	return fn(b.lsn.Load())
}

// The state format's markers: version 2 adds each task's createdAt after
// its waiting events. A version 1 snapshot still reads (stateV1).
const (
	stateMagic   = "APBUS2\n"
	stateMagicV1 = "APBUS1\n"
)

// A Forker is a writer that can also hand out writers whose contents
// follow one another, each after the previous one's and all before what is
// written to the Forker next. WriteState writes a Forker from several
// goroutines: under a checkpoint's pause the state is copied by every core
// at once.
type Forker interface {
	io.Writer
	Fork(n int) []io.Writer
}

// WriteState writes every task in memory, their waiting out-of-order events
// and the tombstones. Call it inside Checkpoint, or before Start. Each
// tenant's tasks go out in the order of its listing, so that ReadState
// builds the lists without sorting. When w is a Forker, the tasks are
// encoded in parallel, GOMAXPROCS parts.
func (b *Bus) WriteState(w io.Writer) error {
	head := append(make([]byte, 0, 16), stateMagic...)
	head = binary.AppendUvarint(head, uint64(b.ntasks.Load()))
	if _, err := w.Write(head); err != nil {
		return err
	}
	chunks := b.listChunks()
	if f, ok := w.(Forker); ok && runtime.GOMAXPROCS(0) > 1 && len(chunks) > 1 {
		parts := f.Fork(min(runtime.GOMAXPROCS(0), len(chunks)))
		errs := make([]error, len(parts))
		var wg sync.WaitGroup
		for i, pw := range parts {
			lo, hi := i*len(chunks)/len(parts), (i+1)*len(chunks)/len(parts)
			wg.Go(func() { errs[i] = writeChunks(pw, chunks[lo:hi]) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	} else if err := writeChunks(w, chunks); err != nil {
		return err
	}
	return b.writeTombs(w)
}

// listChunks returns the chunks of every tenant's list, each tenant's in
// order. Every task in memory is in its tenant's list (addTask). Inside
// Checkpoint no task or list changes, since everything that changes them
// holds the pause for reading (deciding, deadlines, the sweep); before
// Start nothing runs. So the tasks are read after the lists' locks are let
// go, and without their shards' locks.
func (b *Bus) listChunks() [][]*task {
	var out [][]*task
	b.tenants.Range(func(_, v any) bool {
		ts := v.(*tenantState)
		ts.mu.Lock()
		out = append(out, ts.list.chunks...)
		ts.mu.Unlock()
		return true
	})
	return out
}

// writeChunks writes the tasks of chunks to w in pieces of about 32 KiB:
// no bufio.Writer between them, which would copy every byte once more.
func writeChunks(w io.Writer, chunks [][]*task) error {
	buf := make([]byte, 0, 40<<10)
	for _, c := range chunks {
		for _, t := range c {
			buf = appendTask(buf, t.key(), t)
			if len(buf) > 1<<15 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err := w.Write(buf)
	return err
}

// writeTombs writes the end of the tasks and the tombstones.
func (b *Bus) writeTombs(w io.Writer) error {
	buf := make([]byte, 0, 40<<10)
	buf = binary.AppendUvarint(buf, 0) // end of tasks: an empty tenant+id marker follows below
	b.tombs.mu.Lock()
	defer b.tombs.mu.Unlock()
	buf = binary.AppendVarint(buf, b.tombs.start.UnixMilli())
	for _, g := range b.tombs.gens {
		buf = binary.AppendUvarint(buf, uint64(len(g)))
		for h, seq := range g {
			buf = binary.LittleEndian.AppendUint64(buf, h)
			buf = binary.AppendUvarint(buf, uint64(seq))
			if len(buf) > 1<<15 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err := w.Write(buf)
	return err
}

func appendString[S string | []byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTask(b []byte, k key, t *task) []byte {
	b = binary.AppendUvarint(b, 1) // a task follows
	b = appendString(b, k.tenant)
	b = appendString(b, k.id)
	b = appendString(b, t.name)
	late := byte(0)
	if t.late {
		late = 1
	}
	b = append(b, byte(t.status), late)
	for _, v := range [...]int64{t.seq, t.scheduledAt, t.startedAt, t.finishedAt, t.updatedAt, t.timeoutMs, t.costMs, int64(t.nhist)} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = appendString(b, t.history)
	b = binary.AppendUvarint(b, uint64(len(t.waiting())))
	for _, p := range t.waiting() {
		b = binary.AppendUvarint(b, uint64(p.until))
		b = appendString(b, appendRecord(nil, &p.rec))
	}
	return binary.AppendUvarint(b, uint64(t.createdAt))
}

// stateReader decodes the state format with one error for the whole read.
type stateReader struct {
	r   *bufio.Reader
	err error
}

func (sr *stateReader) uvarint() uint64 {
	if sr.err != nil {
		return 0
	}
	// From the reader's buffer when the whole number is there, as it
	// nearly always is; ReadUvarint, a call per byte, otherwise, and for
	// its errors. Peek is short only at the end of the input.
	if b, _ := sr.r.Peek(binary.MaxVarintLen64); len(b) > 0 {
		if v, n := binary.Uvarint(b); n > 0 {
			sr.r.Discard(n)
			return v
		}
	}
	v, err := binary.ReadUvarint(sr.r)
	sr.err = err
	return v
}

// fieldLen reads the length of a field of at most max bytes.
func (sr *stateReader) fieldLen(max int) (int, bool) {
	n := sr.uvarint()
	if sr.err != nil {
		return 0, false
	}
	if n > uint64(max) {
		sr.err = fmt.Errorf("a field of %d bytes, over the limit of %d", n, max)
		return 0, false
	}
	return int(n), true
}

// view reads a field of at most max bytes (max must not exceed the
// reader's buffer) and returns it without copying: it is valid until the
// next read. Names and IDs are read through it, so that a name kept by the
// interner costs no allocation, and an ID one.
func (sr *stateReader) view(max int) []byte {
	n, ok := sr.fieldLen(max)
	if !ok {
		return nil
	}
	b, err := sr.r.Peek(n)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		sr.err = err
		return nil
	}
	sr.r.Discard(n)
	return b
}

// bytes reads a field of at most max bytes into a slice of its own.
func (sr *stateReader) bytes(max int) []byte {
	n, ok := sr.fieldLen(max)
	if !ok {
		return nil
	}
	b := make([]byte, n)
	_, sr.err = io.ReadFull(sr.r, b)
	return b
}

func (sr *stateReader) byte() byte {
	if sr.err != nil {
		return 0
	}
	c, err := sr.r.ReadByte()
	sr.err = err
	return c
}

// RestoredAt says that the state ReadState read covers the log up to lsn
// (the snapshot's LSN): the highest LSN appended starts there. Without it,
// a start whose log adds nothing to the snapshot counted from 0 until the
// next record: Stats.LastLSN said 0, the live mark an observer saves
// (LiveWatermark) was 0, and the three processes' change feed took its
// saved mark for another log's and began a new epoch. Call it after
// ReadState, before Replay and Start.
func (b *Bus) RestoredAt(lsn uint64) {
	if lsn > b.lsn.Load() {
		b.lsn.Store(lsn)
	}
}

// ReadState replaces the bus's state with one WriteState wrote. Call it
// before Replay and Start.
func (b *Bus) ReadState(r io.Reader) error {
	sr := &stateReader{r: bufio.NewReaderSize(r, 1<<16)}
	magic := make([]byte, len(stateMagic))
	if _, err := io.ReadFull(sr.r, magic); err != nil || string(magic) != stateMagic && string(magic) != stateMagicV1 {
		return errors.New("bus: snapshot does not start with the bus state marker; it was not written by this version")
	}
	v1 := string(magic) == stateMagicV1
	b.presize(sr.uvarint())
	listed, err := b.readTasks(sr, v1)
	if err != nil {
		return err
	}
	// The lists in bulk rather than a search per task.
	for ts, l := range listed {
		tasks := slices.DeleteFunc(l.tasks, func(t *task) bool { return !t.listed })
		ts.mu.Lock()
		ts.list.load(tasks, l.inOrder)
		ts.mu.Unlock()
	}
	start := int64(0)
	if sr.err == nil {
		v, err := binary.ReadVarint(sr.r)
		start, sr.err = v, err
	}
	b.tombs.mu.Lock()
	defer b.tombs.mu.Unlock()
	b.tombs.start = time.UnixMilli(start)
	for i := range b.tombs.gens {
		n := sr.uvarint()
		g := make(map[uint64]int64, min(n, 1<<20))
		var h [8]byte
		for j := uint64(0); j < n && sr.err == nil; j++ {
			_, sr.err = io.ReadFull(sr.r, h[:])
			g[binary.LittleEndian.Uint64(h[:])] = int64(sr.uvarint())
		}
		b.tombs.gens[i] = g
	}
	if sr.err != nil {
		return fmt.Errorf("bus: reading the snapshot: %w", sr.err)
	}
	return nil
}

// presize makes the maps of empty shards big enough for n tasks in all (the
// count a snapshot starts with, at most MaxTasks), so that they do not
// grow, copying what they hold, while the tasks are read.
func (b *Bus) presize(n uint64) {
	per := int(min(n, uint64(b.opts.MaxTasks))/numShards) * 9 / 8
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		if len(s.tasks) == 0 && per > 0 {
			s.tasks = make(map[uint64]*task, per)
		}
		s.mu.Unlock()
	}
}

// loading is a tenant's tasks read from a snapshot, for its list.
type loading struct {
	tasks   []*task
	last    listKey
	inOrder bool // tasks are in the order of the list's chunks, as WriteState writes them
}

// readTasks reads the tasks of a state into their shards, and returns
// them by tenant, for ReadState to put into the tenants' lists in bulk.
// Two goroutines share the work: this one decodes, another places what it
// decoded, in batches, into the shards, tenants and deadlines. The two
// halves take about as long as each other, and together they are most of
// a start from a snapshot.
func (b *Bus) readTasks(sr *stateReader, v1 bool) (map[*tenantState]*loading, error) {
	listed := map[*tenantState]*loading{}
	batches := make(chan []*task, 8)
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		for batch := range batches {
			for _, t := range batch {
				b.placeTask(t, listed)
			}
		}
	}()
	const batchLen = 256
	batch := make([]*task, 0, batchLen)
	var err error
	for sr.err == nil && err == nil {
		if sr.uvarint() != 1 {
			break
		}
		var t *task
		if t, err = b.decodeTask(sr, v1); err == nil {
			if batch = append(batch, t); len(batch) == batchLen {
				batches <- batch
				batch = make([]*task, 0, batchLen)
			}
		}
	}
	batches <- batch
	close(batches)
	<-placed
	return listed, err
}

// decodeTask reads one task.
func (b *Bus) decodeTask(sr *stateReader, v1 bool) (*task, error) {
	k := key{tenant: b.names.bytes(sr.view(apollo.MaxTaskIDBytes)), id: string(sr.view(apollo.MaxTaskIDBytes))}
	t := &task{id: k.id, tenant: k.tenant, name: b.names.bytes(sr.view(apollo.MaxNameBytes))}
	t.status = apollo.Status(sr.byte())
	t.late = sr.byte() == 1
	for _, p := range [...]*int64{&t.seq, &t.scheduledAt, &t.startedAt, &t.finishedAt, &t.updatedAt, &t.timeoutMs, &t.costMs} {
		*p = int64(sr.uvarint())
	}
	t.nhist = uint16(sr.uvarint())
	t.history = sr.bytes(1 << 22)
	if len(t.history) == 0 {
		t.history = nil
	}
	np := sr.uvarint()
	if np > maxParkedPerTask {
		return nil, fmt.Errorf("bus: reading the snapshot: task %q has %d waiting events", k.id, np)
	}
	for i := uint64(0); i < np && sr.err == nil; i++ {
		until := int64(sr.uvarint())
		raw := sr.bytes(1 << 20)
		var r apollo.Record
		if sr.err == nil {
			if _, err := decodeRecord(raw, &r); err != nil {
				return nil, fmt.Errorf("bus: reading the snapshot: task %q: %w", k.id, err)
			}
		}
		if t.side == nil {
			t.side = new(side) // not in a shard yet
		}
		t.side.parked = append(t.side.parked, parkedEvent{rec: r, until: until})
	}
	if v1 {
		t.createdAt = t.firstSeen()
	} else {
		t.createdAt = int64(sr.uvarint())
	}
	if sr.err != nil {
		return nil, fmt.Errorf("bus: reading the snapshot: %w", sr.err)
	}
	if t.status > apollo.StatusManualBlocked {
		return nil, fmt.Errorf("bus: reading the snapshot: task %q has status %d", k.id, t.status)
	}
	return t, nil
}

// placeTask puts a task read from a snapshot into its shard, in place of a
// task of the same key, and adds it to listed.
func (b *Bus) placeTask(t *task, listed map[*tenantState]*loading) {
	k := t.key()
	s, h := b.locate(k)
	t.shard = uint8(h % numShards)
	for _, p := range t.waiting() {
		b.timers.push(t.shard, deadline{at: p.until, k: k, kind: dParked})
	}
	s.mu.Lock()
	if old := s.get(h, k); old != nil {
		b.dropTask(s, h, old)
	}
	s.put(h, t)
	b.ntasks.Add(t.shard, 1)
	ts := b.tenant(k.tenant)
	ts.tasks.Add(t.shard, 1)
	t.listed = true
	l := listed[ts]
	if l == nil {
		l = &loading{inOrder: true}
		listed[ts] = l
	} else if l.inOrder && l.last.cmp(t.listKey()) >= 0 {
		l.inOrder = false // an older snapshot, written shard by shard
	}
	l.tasks, l.last = append(l.tasks, t), t.listKey()
	b.pings.track(t)
	b.parked.Add(int64(len(t.waiting())))
	b.armDeadlines(k, t, b.lateness(k.tenant, t.name))
	s.mu.Unlock()
}

// firstSeen is when a task read from a version 1 snapshot, which did not
// keep createdAt, was first reported: its oldest record kept (the history
// keeps the newest HistoryLimit, and waiting events may be older), else
// its last change.
func (t *task) firstSeen() int64 {
	first := t.updatedAt
	if len(t.history) > 0 {
		var r apollo.Record
		if _, err := decodeRecord(t.history, &r); err == nil && r.ReceivedAt > 0 {
			first = r.ReceivedAt
		}
	}
	for _, p := range t.waiting() {
		if at := p.rec.ReceivedAt; at > 0 && (first == 0 || at < first) {
			first = at
		}
	}
	return first
}
