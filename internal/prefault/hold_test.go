package prefault

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// collector reads the collector's settings and the collections so far.
func collector() (percent int64, limit int64, cycles uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64()), s[2].Value.Uint64()
}

// heldBlock makes n bytes resident and frees them, as Heap does where it
// can, so that the test does not depend on MADV_POPULATE_WRITE.
func heldBlock(n int) {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
}

// While the heap grows into the block, nothing is collected; once it grows
// out of it, the collector runs and its settings come back by themselves.
func TestHoldCollectsOnceTheBlockIsFull(t *testing.T) {
	// What it grew goes back to the system after it: the fault counts of
	// TestHeapSavesTheRestoresFaults, later in this process, need a heap
	// without hundreds of free megabytes already faulted in.
	defer debug.FreeOSMemory()
	defer debug.SetGCPercent(debug.SetGCPercent(200))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	const block = 64 << 20
	heldBlock(block)
	release := Hold(block)
	defer release()
	percent, limit, before := collector()
	if percent != -1 { // off: the runtime's int32 -1, read as a uint64
		t.Fatalf("held: gc percent %d, want off", percent)
	}
	if limit == math.MaxInt64 {
		t.Fatalf("held: no memory limit to bound the heap")
	}
	kept, _ := grow(t, block/2) // within the block
	if _, _, c := collector(); c != before {
		t.Fatalf("%d collections while the heap grew into the block", c-before)
	}
	more, _ := grow(t, 2*block) // out of it
	if _, _, c := collector(); c == before {
		t.Fatalf("no collection after the heap grew past the block and its limit")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, l, _ := collector()
		if p == 200 && l == math.MaxInt64 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the first collection: gc percent %d, limit %d; want 200 and none", p, l)
		}
		runtime.Gosched()
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(more)
}

// release puts the settings back before any collection, and a limit the
// process had is never raised.
func TestHoldReleaseAndAnEarlierLimit(t *testing.T) {
	defer debug.FreeOSMemory()
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	heldBlock(32 << 20)
	debug.SetMemoryLimit(1 << 20) // far below what the process holds
	release := Hold(32 << 20)
	if _, l, _ := collector(); l != 1<<20 {
		t.Errorf("held under a limit of 1 MiB: limit %d", l)
	}
	release()
	release() // twice is harmless
	if p, l, _ := collector(); p != 150 || l != 1<<20 {
		t.Errorf("after release: gc percent %d, limit %d; want 150 and 1 MiB", p, l)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	Hold(0)() // nothing to hold: nothing changes
	if p, l, _ := collector(); p != 150 || l != math.MaxInt64 {
		t.Errorf("Hold(0): gc percent %d, limit %d", p, l)
	}
}
