package prefault

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestEstimate(t *testing.T) {
	for _, c := range []struct {
		name                 string
		snap, records, limit int64
		want                 int64
	}{
		{"nothing to restore", 0, 0, 0, 0},
		{"too small to matter", 1 << 20, 1000, 0, 0},
		{"a snapshot", 70 << 20, 0, 0, 280 << 20},
		{"a log", 0, 1_000_000, 0, 256_000_000},
		{"both", 70 << 20, 1_000_000, 0, 280<<20 + 256_000_000},
		{"within the limit", 70 << 20, 1_000_000, 100 << 20, 100 << 20},
		{"a limit under the minimum", 70 << 20, 0, 16 << 20, 0},
		{"negative inputs", -1, math.MinInt64, 0, 0},
		{"huge inputs do not overflow", math.MaxInt64, math.MaxInt64, 0, 2 << 50},
		{"huge inputs within a limit", math.MaxInt64, math.MaxInt64, 1 << 30, 1 << 30},
	} {
		if got := Estimate(c.snap, c.records, c.limit); got != c.want {
			t.Errorf("%s: Estimate(%d, %d, %d) = %d, want %d", c.name, c.snap, c.records, c.limit, got, c.want)
		}
	}
}

type node struct {
	next *node
	pad  [48]byte
}

// grow allocates n bytes of small linked objects, as a restore does, and
// returns the minor faults that took.
func grow(t *testing.T, n int) (*node, int64) {
	f0 := minorFaults(t)
	var head *node
	for range n / int(64) {
		head = &node{next: head}
	}
	return head, minorFaults(t) - f0
}

// After Heap, a heap that grows into the block takes far fewer faults
// than the same growth into fresh memory: the pages were made resident
// in one call. The test fails where Heap does nothing.
func TestHeapSavesTheRestoresFaults(t *testing.T) {
	if !Available {
		t.Skip("no MADV_POPULATE_WRITE on this system: Heap does nothing here")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory faults on every first touch: the count says nothing here")
	}
	if err := populate(make([]byte, 1<<20)); err != nil {
		t.Skipf("this kernel cannot populate memory in one call (MADV_POPULATE_WRITE is Linux 5.14): %v", err)
	}
	// The counts need a heap that nothing else grew: in a process where
	// earlier tests left free holes at low addresses, the first growth
	// filled those (fresh pages, faulting) while Heap's block, which no
	// hole could hold, sat higher and took the second growth (16 920
	// faults "after Heap", 781 "into fresh memory", in CI under load). So
	// the measure runs in a child process of its own.
	if os.Getenv("PREFAULT_MEASURE_FAULTS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestHeapSavesTheRestoresFaults$", "-test.v")
		cmd.Env = append(os.Environ(), "PREFAULT_MEASURE_FAULTS=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the child:\n%s", out)
		if err != nil {
			t.Fatalf("the child failed: %v", err)
		}
		if !bytes.Contains(out, []byte("--- PASS: TestHeapSavesTheRestoresFaults")) {
			t.Fatal("the child did not measure (skipped?)")
		}
		return
	}
	const size = 64 << 20
	// Hand every free page back to the kernel first, so that what the
	// start-up left does not count as fresh memory, and keep the collector
	// from recycling what each part allocates.
	debug.FreeOSMemory()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	r := Heap(size + size/4)
	if r.Err != nil || r.Bytes != size+size/4 {
		t.Fatalf("Heap: %+v", r)
	}
	a, prefaulted := grow(t, size)
	b, fresh := grow(t, size)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	t.Logf("%d MiB of small objects: %d faults after Heap, %d into fresh memory (Heap took %v)", size>>20, prefaulted, fresh, r.Took)
	if fresh < size/4096/2 {
		t.Fatalf("growing into fresh memory took %d faults, fewer than the test assumes (%d): it measures nothing here", fresh, size/4096/2)
	}
	if prefaulted*4 > fresh {
		t.Errorf("after Heap, growing %d MiB took %d faults, over a quarter of the %d it takes into fresh memory", size>>20, prefaulted, fresh)
	}
}

func TestHeapIgnoresWhatItCannotDo(t *testing.T) {
	for _, n := range []int64{0, -1, math.MinInt64} {
		if r := Heap(n); r.Bytes != 0 || r.Err != nil {
			t.Errorf("Heap(%d) = %+v, want nothing done", n, r)
		}
	}
}
