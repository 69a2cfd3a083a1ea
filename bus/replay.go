package bus

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apollo-11/apollo"
)

// Replay decides one record read back from the log at start-up, before
// Start: the same decisions as when it was first taken, nothing appended.
// Records must come in log order. A Replayer does the same on several
// goroutines.
func (b *Bus) Replay(lsn uint64, payload []byte) error {
	var r apollo.Record
	if _, err := decodeRecordIn(payload, &r, b.names); err != nil {
		return fmt.Errorf("bus: replaying record %d: %w", lsn, err)
	}
	b.pause.RLock()
	defer b.pause.RUnlock()
	b.replaying = true
	if b.replayScratch == nil {
		b.replayScratch = &scratch{reuse: new(apollo.Change)}
	}
	b.replayScratch.lsn = lsn
	b.replayRecord(&r, b.replayScratch)
	if lsn > b.lsn.Load() {
		b.lsn.Store(lsn)
	}
	b.stats.replayed.Add(1)
	return nil
}

// replayRecord decides one decoded record in replay; b.pause is held for
// reading and b.replaying is set. sc is the calling goroutine's own: its
// change is reused for every record.
func (b *Bus) replayRecord(r *apollo.Record, sc *scratch) {
	if r.Kind == apollo.KindReport {
		b.decide(r, true, sc)
		return
	}
	// Gaps, timeouts, missed starts and corrections: they apply to the
	// task as it is, if it is still in memory.
	k := key{tenant: r.Tenant, id: r.TaskID}
	s, h := b.locate(k)
	s.mu.Lock()
	s.lsn = sc.lsn
	if t := s.get(h, k); t != nil {
		if r.Kind == apollo.KindGap {
			b.applyGap(s, k, t, r)
		} else {
			b.applyLocked(s, k, t, r, sc.change())
			b.unpark(s, k, t)
		}
	}
	s.mu.Unlock()
}

// Replayer replays the log on several goroutines at start-up, before
// Start. Decisions depend only on the records of the same task, so every
// task (tenant and task ID, through its shard) belongs to one worker, which
// decides that task's records in log order; different tasks are decided in
// parallel, and the observers see them concurrently as in live operation
// (one task's changes in order, one at a time).
//
// The reading goroutine decodes each record into its worker's current
// batch (batches are reused, and the tenant and job name come from the
// bus's interned copies: nothing but the task ID and what a record carries
// beyond its names is allocated per record) and hands full batches over;
// the workers decide, each writing its changes into one reused Change.
//
//	rp := b.NewReplayer(0)
//	err := forEachRecord(rp.Add)     // in log order
//	err = cmp.Or(rp.Finish(), err)   // always call Finish
type Replayer struct {
	b       *Bus
	workers []replayWorker
	cur     []*replayBatch // the batch being filled, per worker
	free    chan *replayBatch
	wg      sync.WaitGroup
	failed  atomic.Bool
	done    bool

	// decodeOnWorkers makes Add copy the encoded record and the worker
	// decode it, rather than Add decode it: BenchmarkReplay compares the
	// two (decoding on the reading goroutine was faster, 2 cores).
	decodeOnWorkers bool

	errMu  sync.Mutex
	errLSN uint64
	err    error
}

type replayWorker struct {
	in     chan *replayBatch
	maxLSN uint64 // of the records this worker decided; read after wg.Wait
}

// replayBatch is an arena of records for one worker: payloads back to
// back in buf, record i ending at ends[i].
type replayBatch struct {
	lsns []uint64
	ends []int
	buf  []byte
	recs []apollo.Record // decoded; with decodeOnWorkers, buf and ends hold them encoded instead
}

const (
	replayBatchRecords = 512
	replayBatchBytes   = 64 << 10
	replayBatchesPer   = 4 // batches per worker: being filled, queued, being decided
)

// NewReplayer starts a replay on workers goroutines (GOMAXPROCS when
// workers <= 0). Feed it every record after the snapshot with Add, in log
// order, then call Finish once.
func (b *Bus) NewReplayer(workers int) *Replayer {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, numShards)
	b.replaying = true // before the workers start: they read it
	n := workers * replayBatchesPer
	r := &Replayer{
		b:       b,
		workers: make([]replayWorker, workers),
		cur:     make([]*replayBatch, workers),
		free:    make(chan *replayBatch, n),
	}
	for range n {
		r.free <- &replayBatch{}
	}
	for i := range r.workers {
		r.workers[i].in = make(chan *replayBatch, n) // never full: there are n batches
		r.wg.Add(1)
		go r.work(&r.workers[i])
	}
	return r
}

// Add queues one record read from the log. The payload is copied: the
// caller may reuse it when Add returns. After a record failed to decode,
// Add returns that error (as Finish does) and takes nothing more.
func (r *Replayer) Add(lsn uint64, payload []byte) error {
	if r.failed.Load() {
		return r.firstErr()
	}
	var rec apollo.Record
	var h uint64
	var err error
	if !r.decodeOnWorkers {
		if _, err = decodeRecordIn(payload, &rec, r.b.names); err == nil {
			h = hashParts(rec.Tenant, rec.TaskID)
		}
	} else {
		h, err = recordHash(payload)
	}
	if err != nil {
		r.fail(lsn, err)
		return r.firstErr()
	}
	wi := int(h%numShards) % len(r.workers)
	bt := r.cur[wi]
	if bt == nil {
		bt = <-r.free // waits while the workers are behind
		r.cur[wi] = bt
	}
	if !r.decodeOnWorkers {
		bt.recs = append(bt.recs, rec)
	} else {
		bt.buf = append(bt.buf, payload...)
		bt.ends = append(bt.ends, len(bt.buf))
	}
	bt.lsns = append(bt.lsns, lsn)
	if len(bt.lsns) >= replayBatchRecords || len(bt.buf) >= replayBatchBytes {
		r.workers[wi].in <- bt
		r.cur[wi] = nil
	}
	return nil
}

// Finish decides what is still queued, stops the workers and returns the
// error of the first record (lowest LSN) that failed to decode, if any.
// Afterwards the bus's LSN is the highest replayed.
func (r *Replayer) Finish() error {
	if r.done {
		return r.firstErr()
	}
	r.done = true
	for i, bt := range r.cur {
		if bt != nil {
			r.workers[i].in <- bt
			r.cur[i] = nil
		}
	}
	for i := range r.workers {
		close(r.workers[i].in)
	}
	r.wg.Wait()
	var last uint64
	for i := range r.workers {
		last = max(last, r.workers[i].maxLSN)
	}
	if last > r.b.lsn.Load() {
		r.b.lsn.Store(last)
	}
	return r.firstErr()
}

func (r *Replayer) work(w *replayWorker) {
	defer r.wg.Done()
	b := r.b
	var rec apollo.Record
	sc := &scratch{reuse: new(apollo.Change)}
	for bt := range w.in {
		if !r.failed.Load() {
			n := 0
			b.pause.RLock()
			start := 0
			for i, lsn := range bt.lsns {
				rp := &rec
				if len(bt.recs) > 0 {
					rp = &bt.recs[i]
				} else {
					p := bt.buf[start:bt.ends[i]]
					start = bt.ends[i]
					if _, err := decodeRecordIn(p, &rec, b.names); err != nil {
						r.fail(lsn, err)
						break
					}
				}
				sc.lsn = lsn
				b.replayRecord(rp, sc)
				w.maxLSN = max(w.maxLSN, lsn)
				n++
			}
			b.pause.RUnlock()
			b.stats.replayed.Add(int64(n))
		}
		clear(bt.recs) // let the records' strings go
		bt.lsns, bt.ends, bt.buf, bt.recs = bt.lsns[:0], bt.ends[:0], bt.buf[:0], bt.recs[:0]
		r.free <- bt // never blocks: free has room for every batch
	}
}

func (r *Replayer) fail(lsn uint64, err error) {
	r.errMu.Lock()
	if r.err == nil || lsn < r.errLSN {
		r.errLSN, r.err = lsn, fmt.Errorf("bus: replaying record %d: %w", lsn, err)
	}
	r.errMu.Unlock()
	r.failed.Store(true)
}

func (r *Replayer) firstErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// recordHash returns hashKey of an encoded record's tenant and task ID
// without decoding the rest (see appendRecord for the layout).
func recordHash(b []byte) (uint64, error) {
	if len(b) < 3 {
		return 0, errShortRecord
	}
	if b[0] != recordVersion {
		return 0, fmt.Errorf("bus: record version %d, this binary reads %d", b[0], recordVersion)
	}
	b = b[3:]
	for range 6 { // sequence, ts, scheduledAt, timeoutMs, costMs, receivedAt
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errShortRecord
		}
		b = b[n:]
	}
	tenant, rest, err := decodeBytes(b)
	if err != nil {
		return 0, err
	}
	id, _, err := decodeBytes(rest)
	if err != nil {
		return 0, err
	}
	return hashParts(tenant, id), nil
}
