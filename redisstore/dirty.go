package redisstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// jobRef names one job of one tenant.
type jobRef struct{ tenant, name string }

// dirtyJob is a job to flush and the earliest bucket to copy.
type dirtyJob struct {
	jobRef
	from int64 // Unix ms
}

const dirtyShards = 16

// dirtySet holds the jobs changed since the last flush, each with its
// earliest changed bucket. Apply marks on many goroutines at once, so the
// set is split into shards by job name. It is bounded: past max entries it
// forgets them all and raises overflow, which makes the next flush copy
// every job, so memory stays flat however long Redis is away.
type dirtySet struct {
	seed     maphash.Seed
	max      int64
	n        atomic.Int64
	overflow atomic.Bool
	shards   [dirtyShards]dirtyShard
}

type dirtyShard struct {
	mu sync.Mutex
	m  map[jobRef]int64
	_  [40]byte // keep shards on their own cache lines
}

func newDirtySet(max int) *dirtySet {
	d := &dirtySet{seed: maphash.MakeSeed(), max: int64(max)}
	for i := range d.shards {
		d.shards[i].m = make(map[jobRef]int64)
	}
	return d
}

func (d *dirtySet) mark(tenant, name string, from int64) {
	sh := &d.shards[maphash.String(d.seed, name)%dirtyShards]
	r := jobRef{tenant, name}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[r]; ok {
		if from < old {
			sh.m[r] = from
		}
		return
	}
	if d.overflow.Load() {
		return // the next flush copies everything anyway
	}
	if d.n.Add(1) > d.max {
		d.n.Add(-1)
		d.overflow.Store(true)
		return
	}
	sh.m[r] = from
}

// take empties the set. It returns the jobs, or full when the set
// overflowed and every job must be copied instead.
func (d *dirtySet) take() (jobs []dirtyJob, full bool) {
	// The flag first: a mark that overflows while the shards are emptied
	// then leaves it set for the next flush.
	full = d.overflow.Swap(false)
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		m, n := sh.m, len(sh.m) // the length under the lock: m stays live when empty
		if n > 0 {
			sh.m = make(map[jobRef]int64, n)
		}
		sh.mu.Unlock()
		if n == 0 {
			continue
		}
		d.n.Add(-int64(n))
		if !full {
			for r, from := range m {
				jobs = append(jobs, dirtyJob{r, from})
			}
		}
	}
	return jobs, full
}

// putBack marks jobs a failed flush did not write.
func (d *dirtySet) putBack(jobs []dirtyJob) {
	for _, j := range jobs {
		d.mark(j.tenant, j.name, j.from)
	}
}

func (d *dirtySet) len() int64 { return d.n.Load() }
