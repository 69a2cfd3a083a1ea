package main

import (
	"encoding/binary"
	"io"
	"os"
	"sync"
)

// snapChunk is the size of a snapshotBuffer's chunks: large enough that a
// snapshot of a million tasks is a few hundred, small enough that the
// last, partly used chunk of each section wastes little.
const snapChunk = 256 << 10

// snapshotBuffer holds a checkpoint's sections in memory, from the pause
// that copies the state until the copy is on disk. It keeps its chunks for
// the next checkpoint. A checkpoint pauses decisions while it copies, and
// a copy into fresh memory costs far more than the encoding: a buffer that
// doubles as it grows clears and moves every byte several times, and every
// new page is a fault into the kernel (BenchmarkCheckpointPause; on the
// virtual machines of docs/benchmarks.md a fault costs 13–14 µs). Reused
// chunks cost none of that; what they cost is memory, about the size of
// the last snapshot (65 bytes per task in memory), kept between
// checkpoints. It is a bus.Forker, so that the bus copies its tasks on
// every core.
type snapshotBuffer struct {
	mu    sync.Mutex // one checkpoint at a time
	parts []snapPart
	start int // the current section's first part

	spareMu  sync.Mutex // forked writers take chunks concurrently
	spare    [][]byte   // chunks of earlier checkpoints, emptied
	made     int        // chunks allocated, ever
	reserved int        // made, as of the end of the last reserve

	// perTask is the bytes per task in memory of the last snapshot
	// written, or read at the start (0: none yet), by which the next
	// checkpoint sizes its reservation.
	perTask int64
}

// snapPart is a run of content: a section's first part carries its
// header (name and length); Fork adds parts without one.
type snapPart struct {
	hdr    []byte
	chunks [][]byte
	n      int
}

// reset makes every chunk spare, for the next checkpoint.
func (b *snapshotBuffer) reset() {
	for i := range b.parts {
		for _, c := range b.parts[i].chunks {
			b.spare = append(b.spare, c[:0])
		}
	}
	clear(b.parts)
	b.parts, b.start = b.parts[:0], 0
}

// reserve makes the spare chunks hold at least n bytes, with every page of
// them touched, so that the copy under a checkpoint's pause neither
// allocates nor faults: the first checkpoint of a process, and one whose
// state grew, pay for their memory before decisions stop. Spare chunks
// beyond n and a quarter are let go, so that a state that shrank does not
// keep the memory of its largest snapshot. Call it after reset.
func (b *snapshotBuffer) reserve(n int) {
	need := (n + snapChunk - 1) / snapChunk
	if keep := need + need/4 + 1; len(b.spare) > keep {
		clear(b.spare[keep:])
		b.spare = b.spare[:keep]
	}
	pg := os.Getpagesize()
	for len(b.spare) < need {
		c := make([]byte, snapChunk)
		for i := 0; i < len(c); i += pg {
			c[i] = 1 // a fresh span is not cleared, so not yet faulted in
		}
		b.spare = append(b.spare, c[:0])
		b.made++
	}
	b.reserved = b.made
}

// sized records a snapshot of n bytes holding tasks tasks, for the next
// reservation; a snapshot of no task says nothing per task.
func (b *snapshotBuffer) sized(n, tasks int64) {
	if tasks > 0 {
		b.perTask = n/tasks + 1
	}
}

// section starts a new section; Write appends to it.
func (b *snapshotBuffer) section(name string) {
	hdr := binary.AppendUvarint(nil, uint64(len(name)))
	b.start = len(b.parts)
	b.parts = append(b.parts, snapPart{hdr: append(hdr, name...)})
}

// end finishes the current section: its header now says its length.
func (b *snapshotBuffer) end() {
	n := 0
	for _, p := range b.parts[b.start:] {
		n += p.n
	}
	s := &b.parts[b.start]
	s.hdr = binary.AppendUvarint(s.hdr, uint64(n))
}

// Write appends p to the current section.
func (b *snapshotBuffer) Write(p []byte) (int, error) {
	return b.write(len(b.parts)-1, p), nil
}

// Fork returns n writers for consecutive parts of the current section,
// which may be written concurrently; what is written to b afterwards
// follows them. The writers are valid until the next Fork or section.
func (b *snapshotBuffer) Fork(n int) []io.Writer {
	ws := make([]io.Writer, n)
	for i := range ws {
		ws[i] = forkWriter{b, len(b.parts)}
		b.parts = append(b.parts, snapPart{})
	}
	b.parts = append(b.parts, snapPart{})
	return ws
}

type forkWriter struct {
	b *snapshotBuffer
	i int
}

func (f forkWriter) Write(p []byte) (int, error) { return f.b.write(f.i, p), nil }

// write appends p to part i, filling its last chunk before it takes
// another (a spare one if any).
func (b *snapshotBuffer) write(i int, p []byte) int {
	s := &b.parts[i]
	n := len(p)
	s.n += n
	for len(p) > 0 {
		if k := len(s.chunks); k > 0 {
			last := s.chunks[k-1]
			m := copy(last[len(last):cap(last)], p)
			s.chunks[k-1] = last[:len(last)+m]
			if p = p[m:]; len(p) == 0 {
				break
			}
		}
		s.chunks = append(s.chunks, b.chunk())
	}
	return n
}

// chunk returns an empty chunk: a spare one, or a new one.
func (b *snapshotBuffer) chunk() []byte {
	b.spareMu.Lock()
	defer b.spareMu.Unlock()
	if k := len(b.spare); k > 0 {
		c := b.spare[k-1]
		b.spare = b.spare[:k-1]
		return c
	}
	b.made++
	return make([]byte, 0, snapChunk)
}

// Len is the snapshot's size in bytes.
func (b *snapshotBuffer) Len() int {
	n := 0
	for _, s := range b.parts {
		n += len(s.hdr) + s.n
	}
	return n
}

// WriteTo writes the snapshot: each part's header, if any, then its
// content.
func (b *snapshotBuffer) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, s := range b.parts {
		m, err := w.Write(s.hdr)
		n += int64(m)
		if err != nil {
			return n, err
		}
		for _, c := range s.chunks {
			m, err := w.Write(c)
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}
