package harness

import (
	"sync/atomic"
	"testing"
)

// ForEach visits every index exactly once, whatever the workers.
func TestForEachVisitsEachIndexOnce(t *testing.T) {
	for _, workers := range []int{1, 3, 8} {
		seen := make([]atomic.Int32, 1000)
		ForEach(len(seen), workers, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("%d workers: index %d visited %d times", workers, i, n)
			}
		}
	}
}
