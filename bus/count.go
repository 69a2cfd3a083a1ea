package bus

import "sync/atomic"

// spreadCount is a count that tasks of different shards change without
// sharing a cache line: the number of tasks in memory, in all and per
// tenant, goes up for every new task, and a replay's workers, which take
// whole shards each, made its one word move between the cores at each
// (the atomic add in addTask was two thirds of its samples in a replay of
// a million new tasks; issue 20.4). Reading it sums the stripes.
type spreadCount [countStripes]struct {
	n atomic.Int64
	_ [56]byte // one stripe to a cache line
}

// countStripes is deadlineStripes, for the same reason: a replay worker
// takes shards w, w+workers, ...
const countStripes = deadlineStripes

// Add adds d to the stripe of shard.
func (c *spreadCount) Add(shard uint8, d int64) { c[shard%countStripes].n.Add(d) }

// Load returns the count.
func (c *spreadCount) Load() int64 {
	var n int64
	for i := range c {
		n += c[i].n.Load()
	}
	return n
}
