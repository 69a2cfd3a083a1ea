// Package prefault makes the memory a restart is about to fill resident in
// one request to the kernel, instead of one trap per page.
//
// A restart rebuilds its state from the snapshot and the log: hundreds of
// megabytes of small objects, each 4 KiB page of them touched for the first
// time. Each first touch is a minor page fault, a trap into the kernel. On
// bare metal a fault costs about a microsecond; on some virtual machines it
// costs 12 µs or more (docs/benchmarks.md, "Issue 20 on a paravirtualised
// guest"), and a million tasks take a hundred thousand of them.
//
// Heap allocates one block of the expected size, asks Linux to back all of
// it at once (madvise MADV_POPULATE_WRITE, Linux 5.14 and later) and lets
// it go. The Go heap keeps the pages of a freed block for a while and
// carves the restore's objects out of them: the kernel did the work of the
// faults in one call, without the traps. Where the call is not available
// (another system, an older kernel) Heap does nothing.
package prefault

import (
	"errors"
	"runtime"
	"time"
)

// Sizing the block: bytes of live heap per byte of snapshot and per
// record replayed. A snapshot of pending tasks takes about 5.7 times its
// size in the heap, and a log of new tasks about 440 bytes per record;
// runs with histories take less: about 3.4 bytes per snapshot byte and 200
// per record (three records a run). The factors sit between the two, so
// that the block is at most a little more than the restore uses, memory
// the heap grows into later, and far within the collector's own headroom
// (gc_percent lets the heap reach three times the live data).
const (
	perSnapshotByte = 4
	perRecord       = 256
	// minBytes: below this a restore is short whatever its faults.
	minBytes = 32 << 20
)

// Estimate is the block for a restore of a snapshot of snapshotBytes and
// a replay of records, within limit bytes (0: no limit). It returns 0 when
// the block would be too small to matter. Negative or huge inputs give 0
// or the limit, never an overflow.
func Estimate(snapshotBytes, records, limit int64) int64 {
	snapshotBytes, records = max(snapshotBytes, 0), max(records, 0)
	const most = 1 << 50 // a petabyte: past any machine, far from overflow
	n := min(snapshotBytes, most/perSnapshotByte)*perSnapshotByte + min(records, most/perRecord)*perRecord
	if limit > 0 {
		n = min(n, limit)
	}
	if n < minBytes {
		return 0
	}
	return n
}

// Result says what Heap did.
type Result struct {
	Bytes int64         // populated; 0 when the system cannot
	Took  time.Duration // the allocation, the kernel's work and the collection
	Err   error         // why nothing was populated, if the kernel refused
}

// Heap makes about n bytes of heap resident ahead of a restore (see the
// package documentation). Call it before the restore allocates, while the
// heap is small: it runs a collection to free the block, which then costs
// little.
func Heap(n int64) Result {
	if n <= 0 || int64(int(n)) != n {
		return Result{}
	}
	if !Available {
		return Result{Err: errors.ErrUnsupported}
	}
	start := time.Now()
	b := make([]byte, n)
	err := populate(b)
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
	r := Result{Took: time.Since(start)}
	if err != nil {
		r.Err = err
		return r
	}
	r.Bytes = n
	return r
}
