package bus

import (
	"sync"
	"time"
)

// tombstones remember, for tasks that left memory, the last sequence seen,
// so that a late duplicate is still recognised (and a late new event is
// still refused: the task was final). They are kept in generations; the
// oldest generation is dropped as a whole, so memory is bounded by the
// tasks finished within the dedup retention.
type tombstones struct {
	mu    sync.Mutex
	gens  [numGenerations]map[uint64]int64
	span  time.Duration // each generation covers retention/numGenerations
	start time.Time     // when the newest generation began
}

const numGenerations = 8

func newTombstones(retention time.Duration) *tombstones {
	t := &tombstones{span: max(retention/numGenerations, time.Second)}
	for i := range t.gens {
		t.gens[i] = make(map[uint64]int64)
	}
	return t
}

func (t *tombstones) put(h uint64, seq int64) {
	t.mu.Lock()
	t.gens[0][h] = seq
	t.mu.Unlock()
}

func (t *tombstones) get(h uint64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.gens {
		if s, ok := g[h]; ok {
			return s, true
		}
	}
	return 0, false
}

// rotate starts a new generation when the newest is older than its span.
func (t *tombstones) rotate(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start.IsZero() {
		t.start = now
		return
	}
	if now.Sub(t.start) < t.span {
		return
	}
	copy(t.gens[1:], t.gens[:numGenerations-1])
	t.gens[0] = make(map[uint64]int64)
	t.start = now
}

func (t *tombstones) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, g := range t.gens {
		n += len(g)
	}
	return n
}
