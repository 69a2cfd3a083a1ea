package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo/internal/prefault"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/wal"
)

// A snapshot is a sequence of named sections, each length-prefixed, so that
// each part of the state (bus, metrics) reads exactly its own bytes and a
// reader can say which part is damaged.
type section struct {
	name  string
	write func(io.Writer) error
	read  func(io.Reader) error
}

// writeSnapshot copies every section into w (emptied first).
func writeSnapshot(w *snapshotBuffer, secs []section) error {
	w.reset()
	for _, s := range secs {
		w.section(s.name)
		if err := s.write(w); err != nil {
			return fmt.Errorf("snapshot section %s: %w", s.name, err)
		}
		w.end()
	}
	return nil
}

// readSnapshot restores the sections in the order the snapshot holds them,
// each from its own bytes as they are read: the snapshot is not first read
// whole into memory, which at a million tasks meant 130 MB allocated and
// faulted in for a 65 MB file. A section this version does not know is
// skipped; one it knows but the snapshot lacks starts empty.
func readSnapshot(r io.Reader, secs []section) error {
	br := bufio.NewReaderSize(r, 64<<10)
	seen := map[string]bool{}
	for {
		nl, err := binary.ReadUvarint(br)
		if err == io.EOF {
			return nil
		}
		if err != nil || nl > 256 {
			return fmt.Errorf("snapshot: damaged section header")
		}
		name := make([]byte, nl)
		if _, err := io.ReadFull(br, name); err != nil {
			return fmt.Errorf("snapshot: damaged section header")
		}
		bl, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("snapshot: section %s is truncated", name)
		}
		if seen[string(name)] {
			return fmt.Errorf("snapshot: section %s appears twice", name)
		}
		seen[string(name)] = true
		body := io.LimitReader(br, int64(bl))
		i := slices.IndexFunc(secs, func(s section) bool { return s.name == string(name) })
		if i >= 0 {
			if err := secs[i].read(body); err != nil {
				return fmt.Errorf("snapshot section %s: %w", name, err)
			}
		}
		// What the section's reader left (a later version's additions) or
		// all of a section this version does not know is skipped; a short
		// section is damage.
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		if rest := body.(*io.LimitedReader).N; rest > 0 {
			return fmt.Errorf("snapshot: section %s is truncated (%d bytes missing)", name, rest)
		}
	}
}

// recover loads the newest snapshot and replays the log after it.
func (s *server) recover() error {
	start := time.Now()
	lsn, body, err := s.wal.LatestSnapshot()
	if err != nil {
		return fmt.Errorf("reading the snapshot: %w", err)
	}
	// Before the replay: the event rules hear of the replayed changes
	// they had not heard of before the process stopped.
	from, err := s.alerts.restore(context.Background(), s.bus.LiveWatermark)
	if err != nil {
		return err
	}
	s.bus.ReplayLiveAfter(from)
	pf := s.prefault(lsn, body)
	// No collection while the restore fills the block (internal/prefault.Hold).
	defer prefault.Hold(pf.Bytes)()
	if body != nil {
		cr := &countingReader{r: body}
		err := readSnapshot(cr, s.sections())
		body.Close()
		if err != nil {
			return fmt.Errorf("restoring snapshot at LSN %d: %w (move the data directory's newest snapshot away to fall back to the previous one)", lsn, err)
		}
		s.snapBuf.sized(cr.n, s.bus.Stats().Tasks)
		s.bus.RestoredAt(uint64(lsn)) // the log's position, when nothing follows the snapshot
	}
	// Before the replay, so that the replayed runs count for the runs
	// expected since the snapshot.
	s.expect.arm()
	// Different tasks replay in parallel; each task's records in log order.
	n := 0
	if s.seqReplay {
		err = s.wal.Replay(wal.LSN(lsn), func(l wal.LSN, p []byte) error {
			n++
			return s.bus.Replay(uint64(l), p)
		})
	} else {
		rp := s.bus.NewReplayer(0)
		err = s.wal.Replay(wal.LSN(lsn), func(l wal.LSN, p []byte) error {
			n++
			return rp.Add(uint64(l), p)
		})
		// A record that did not decode comes before anything the log
		// failed at afterwards: its error wins.
		err = cmp.Or(rp.Finish(), err)
	}
	switch {
	case errors.Is(err, wal.ErrGap):
		// No snapshot read (each damaged one was logged and skipped), and
		// the log no longer starts at its first record: no version of the
		// binary can replay it.
		return fmt.Errorf("replaying the log: %w (the snapshots that cover the log's first records are damaged or missing: "+
			"restore the data directory from a backup: docs/operations.md#backup-and-restore)", err)
	case err != nil:
		return fmt.Errorf("replaying the log: %w (this binary cannot apply that record: start the apollo version that wrote the log, or restore the data directory from a backup: docs/operations.md#backup-and-restore)", err)
	}
	el := time.Since(start)
	s.snaps.snapshotAt(uint64(lsn)) // the tail replayed counts towards the next snapshot
	s.recovery = selfmetrics.Recovery{Duration: el, Events: int64(n)}
	s.log.Info("recovered", "snapshot_lsn", lsn, "replayed", n, "took", el.Round(time.Millisecond),
		"events_per_second", int(float64(n)/max(el.Seconds(), 1e-9)),
		"prefaulted_mib", pf.Bytes>>20, "prefault_took", pf.Took.Round(time.Millisecond))
	return nil
}

// prefault makes the heap the restore is about to fill resident in one
// request to the kernel (internal/prefault): the snapshot's size and the
// records to replay say how much, within a quarter of the memory the
// process may have (the machine's, or its container's) and half its Go
// memory limit.
func (s *server) prefault(lsn wal.LSN, snapshot io.Reader) prefault.Result {
	var snapBytes int64
	if b, ok := snapshot.(interface{ Size() int64 }); ok {
		snapBytes = b.Size()
	}
	limit := prefault.MemoryCeiling() / 4 // 0: unknown
	if ml := debug.SetMemoryLimit(-1); ml < math.MaxInt64 && (limit == 0 || ml/2 < limit) {
		limit = ml / 2
	}
	n := prefault.Estimate(snapBytes, int64(s.wal.DurableLSN()-lsn), limit)
	if n == 0 {
		return prefault.Result{}
	}
	r := prefault.Heap(n)
	if r.Err != nil {
		s.log.Debug("the restore's memory was not faulted in ahead", "err", r.Err)
	}
	return r
}

// sections are the parts of a snapshot, in order.
func (s *server) sections() []section {
	return []section{
		{name: "bus", write: s.bus.WriteState, read: s.bus.ReadState},
		{name: "metrics", write: s.agg.WriteSnapshot, read: s.agg.ReadSnapshot},
		{name: "expect", write: s.expect.writeState, read: s.expect.readState},
		{name: "expectset", write: s.expect.writeTiming, read: s.expect.readTiming},
		{name: "learn", write: s.expect.learn.WriteState, read: s.expect.learn.ReadState},
		{name: "expectfound", write: s.expect.writeFound, read: s.expect.readFound},
	}
}

// checkpointLoop writes a snapshot every SnapshotEvery, and whenever
// SnapshotEvents records were logged since the last one, until stop.
func (s *server) checkpointLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := s.clock.NewTicker(s.cfg.SnapshotEvery.D())
	defer t.Stop()
	for {
		select {
		case <-t.C():
		case <-s.snaps.due:
		case <-stop:
			return
		}
		err := s.checkpoint()
		switch {
		case errors.Is(err, wal.ErrMoved):
			// The log writes into files that are no longer in the data
			// directory: whatever is accepted now is lost at the exit,
			// and every later write by name lands in what replaced it.
			select {
			case s.fatal <- err:
			default:
			}
			return
		case err != nil:
			s.log.Error("snapshot failed; the log keeps growing until one succeeds", "err", err)
		}
	}
}

// snapCadence says when enough records were logged since the last
// snapshot that the next is due (config snapshot_events): the log's
// Append checks one atomic per record, and signals due once.
type snapCadence struct {
	every int64 // 0: by time only
	next  atomic.Uint64
	due   chan struct{} // capacity 1
}

func newSnapCadence(every int64) *snapCadence {
	c := &snapCadence{every: every, due: make(chan struct{}, 1)}
	c.snapshotAt(0)
	return c
}

// snapshotAt records a snapshot (or the recovered state) at lsn.
func (c *snapCadence) snapshotAt(lsn uint64) {
	if c.every <= 0 {
		c.next.Store(math.MaxUint64)
		return
	}
	c.next.Store(lsn + uint64(c.every))
}

// logged is called with the LSN of every record appended.
func (c *snapCadence) logged(lsn uint64) {
	if lsn >= c.next.Load() {
		c.next.Store(math.MaxUint64) // once, until the snapshot is taken
		select {
		case c.due <- struct{}{}:
		default:
		}
	}
}

// snapBytesPerTask is what the first checkpoint of a process that did not
// start from a snapshot reserves per task: a lower bound (a task with a
// record of history takes 65–75 bytes, bench/results/scale.md), so that
// the first reservation is not memory kept for nothing; what it lacks is
// allocated under the pause.
const snapBytesPerTask = 64

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// checkpoint copies the state during a short pause, then writes it. The
// memory for the copy is made ready before the pause: as much as the last
// snapshot took per task (written, or the one the process started from),
// times the tasks now, with a sixteenth to spare.
func (s *server) checkpoint() error {
	buf := &s.snapBuf
	buf.mu.Lock()
	defer buf.mu.Unlock()
	buf.reset()
	tasks := s.bus.Stats().Tasks
	perTask := cmp.Or(buf.perTask, snapBytesPerTask)
	// Every part of the copy (a section, a core's share of the bus, the
	// bus after it) ends in a chunk of its own, partly used.
	sections := s.sections()
	parts := len(sections) + runtime.GOMAXPROCS(0) + 1
	buf.reserve(int(tasks*perTask+tasks*perTask/16) + parts*snapChunk)
	var at uint64
	start := time.Now()
	err := s.bus.Checkpoint(func(lsn uint64) error {
		at = lsn
		return writeSnapshot(buf, sections)
	})
	pause := time.Since(start)
	if err != nil {
		return err
	}
	if at == 0 {
		return nil // nothing was ever logged: the empty state needs no snapshot
	}
	// Counted from the copy, not from the write: records logged while it
	// is written are in the tail the next start replays.
	s.snaps.snapshotAt(at)
	if err := s.wal.Wait(context.Background(), wal.LSN(at)); err != nil {
		return err
	}
	// The tasks the bus archived before the copy are in neither the copy
	// nor the log after it: on disk before the snapshot is.
	if err := s.arch.Sync(); err != nil {
		return fmt.Errorf("the archive of finished runs: %w", err)
	}
	err = s.wal.WriteSnapshot(wal.LSN(at), func(w io.Writer) error {
		// The next start replays the log after the snapshot only: the
		// event rules' mark, at the copy since then, is on disk before
		// the snapshot is kept. Here, once the log has found its
		// directory still its own: nothing is written into one that
		// replaced it.
		if err := s.alerts.saveMark(context.Background()); err != nil {
			return fmt.Errorf("saving the alert state before the snapshot: %w", err)
		}
		_, err := buf.WriteTo(w)
		return err
	})
	if err != nil {
		return err
	}
	c := selfmetrics.Checkpoint{Pause: pause, Write: time.Since(start) - pause, Bytes: int64(buf.Len()), Tasks: tasks, At: start}
	buf.sized(c.Bytes, tasks)
	if last := s.lastCkpt.Load(); last != nil {
		c.Taken = last.Taken
	}
	c.Taken++
	s.lastCkpt.Store(&c)
	s.log.Info("checkpoint", "lsn", at, "bytes", c.Bytes, "pause", pause.Round(time.Microsecond), "write", c.Write.Round(time.Millisecond))
	return nil
}

// walLog adapts *wal.Log to bus.Log (LSNs are plain numbers to the bus),
// telling snaps (when set) of every record appended.
type walLog struct {
	l     *wal.Log
	snaps *snapCadence
}

func (w walLog) Append(p []byte) (uint64, error) {
	lsn, err := w.l.Append(p)
	if err == nil && w.snaps != nil {
		w.snaps.logged(uint64(lsn))
	}
	return uint64(lsn), err
}

func (w walLog) Wait(ctx context.Context, lsn uint64) error { return w.l.Wait(ctx, wal.LSN(lsn)) }
