package bus

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

// A tenant's tasks in listing order, so that a page of GET /api/v1/tasks
// costs the page, not the tasks in memory (issue 20.1; it used to scan
// every shard). The order is by when a task was first reported, then by
// task ID, both descending (newest first): a key that never changes, so a task is touched
// here only when it enters and leaves memory, never on its other events,
// and a listing paged while tasks change sees each task once.

// listKey is a task's place in the listing: tasks with a higher createdAt
// come first, then higher task IDs. (Descending IDs too, because tasks that
// arrive in one batch share a createdAt and often have IDs that grow: they
// then go at the end of the list, as most new tasks do.)
type listKey struct {
	at int64
	id string
}

// before reports whether a task at k comes before one at o in the listing.
func (k listKey) before(o listKey) bool { return o.cmp(k) < 0 }

// cmp orders keys as the chunks keep them, the reverse of the listing:
// negative when a task at k is listed after one at o.
func (k listKey) cmp(o listKey) int {
	if k.at != o.at { // the IDs are compared only in a tie
		return cmp.Compare(k.at, o.at)
	}
	return strings.Compare(k.id, o.id)
}

// chunkMax is the most tasks a chunk holds. Inserting or removing moves at
// most this many pointers; a page reads consecutive chunks.
const chunkMax = 128

// taskList holds tasks in reverse listing order (the oldest first, so that
// new tasks, the common case, go at the end) in chunks of at most
// chunkMax. A full chunk splits in halves (or, at the end, a new one
// starts), and a removal merges a chunk into a neighbour when both fit in
// three quarters of one: chunks stay a quarter full at the least (33 bytes
// a task) and nearly full when tasks come and go in the order they came
// (9 bytes; TestTaskListProperty, BenchmarkMemoryPerTask). The owner locks
// it; the keys it reads (createdAt, id) never change once a task is in it.
type taskList struct {
	chunks [][]*task // each with capacity chunkMax
	n      int
}

func (t *task) listKey() listKey { return listKey{at: t.createdAt, id: t.id} }

// search returns the position of the first task that does not come after
// k in the listing: every task before that position comes after k. It
// gallops back from the end, where new tasks go and listings start: a key
// among the newest reads a chunk or two, not a binary search's dozen
// chunks scattered over memory (inserts of concurrent batches, and of a
// replay's workers, land just before the end).
func (l *taskList) search(k listKey) (ci, i int) {
	notAfter := func(j int) bool { // chunk j's last task does not come after k
		c := l.chunks[j]
		return !k.before(c[len(c)-1].listKey())
	}
	hi, lo := len(l.chunks), len(l.chunks)-1 // notAfter(hi) holds, past the end
	for step := 1; lo >= 0 && notAfter(lo); step *= 2 {
		hi, lo = lo, lo-step
	}
	lo = max(lo+1, 0) // the first chunk for which notAfter holds is in [lo, hi]
	ci = lo + sort.Search(hi-lo, func(j int) bool { return notAfter(lo + j) })
	if ci == len(l.chunks) {
		return ci, 0
	}
	c := l.chunks[ci]
	i = sort.Search(len(c), func(j int) bool { return !k.before(c[j].listKey()) })
	return ci, i
}

// insert adds t, which is not in the list.
func (l *taskList) insert(t *task) {
	l.n++
	last := len(l.chunks) - 1
	ci, i := last+1, 0 // after everything: a task newer than all, the common case, needs no search
	if last >= 0 {
		if c := l.chunks[last]; !t.listKey().before(c[len(c)-1].listKey()) {
			ci, i = l.search(t.listKey())
		}
	}
	if ci > last { // after everything: the end of the last chunk
		if last < 0 || len(l.chunks[last]) == chunkMax {
			l.chunks = append(l.chunks, append(make([]*task, 0, chunkMax), t))
			return
		}
		ci, i = last, len(l.chunks[last])
	}
	c := l.chunks[ci]
	if len(c) == chunkMax {
		if ci == last && i == len(c) {
			l.chunks = append(l.chunks, append(make([]*task, 0, chunkMax), t))
			return
		}
		half := chunkMax / 2
		right := append(make([]*task, 0, chunkMax), c[half:]...)
		clear(c[half:])
		c = c[:half]
		l.chunks[ci] = c
		l.chunks = slices.Insert(l.chunks, ci+1, right)
		if i > half {
			ci, i, c = ci+1, i-half, right
		}
	}
	l.chunks[ci] = slices.Insert(c, i, t)
}

// remove takes t out of the list; it reports false if t was not in it.
func (l *taskList) remove(t *task) bool {
	ci, i := l.search(t.listKey())
	if ci == len(l.chunks) || i == len(l.chunks[ci]) || l.chunks[ci][i] != t {
		return false
	}
	l.n--
	c := slices.Delete(l.chunks[ci], i, i+1)
	l.chunks[ci] = c
	switch {
	case len(c) == 0:
		l.chunks = slices.Delete(l.chunks, ci, ci+1)
	case ci+1 < len(l.chunks) && len(c)+len(l.chunks[ci+1]) <= chunkMax*3/4:
		l.chunks[ci] = append(c, l.chunks[ci+1]...)
		l.chunks = slices.Delete(l.chunks, ci+1, ci+2)
	case ci > 0 && len(l.chunks[ci-1])+len(c) <= chunkMax*3/4:
		l.chunks[ci-1] = append(l.chunks[ci-1], c...)
		l.chunks = slices.Delete(l.chunks, ci, ci+1)
	}
	return true
}

// after appends to dst, in listing order, up to max tasks that come after
// k (from the first task when k is nil) and returns dst.
func (l *taskList) after(k *listKey, max int, dst []*task) []*task {
	ci, i := len(l.chunks), 0
	if k != nil {
		ci, i = l.search(*k)
	}
	for len(dst) < max {
		if i == 0 {
			if ci == 0 {
				break
			}
			ci--
			i = len(l.chunks[ci])
		}
		i--
		dst = append(dst, l.chunks[ci][i])
	}
	return dst
}

// load adds tasks in bulk (a snapshot being read): no sort at all when the
// list is empty and ts are in its order already (inOrder, as WriteState
// writes them), else one sort instead of a search and a move per task.
func (l *taskList) load(ts []*task, inOrder bool) {
	if !inOrder || l.n > 0 {
		ts = l.sortedWith(ts)
	}
	l.chunks, l.n = nil, len(ts)
	for len(ts) > 0 {
		c := make([]*task, min(len(ts), chunkMax), chunkMax)
		copy(c, ts)
		l.chunks = append(l.chunks, c)
		ts = ts[len(c):]
	}
}

// sortedWith returns the list's tasks and ts in the list's order. The sort
// compares copies of the keys side by side in one array: comparing through
// the task pointers took a cache miss or two per comparison, and was half
// of a restore from a snapshot (BenchmarkSnapshotRestore, cmd/apollo).
func (l *taskList) sortedWith(ts []*task) []*task {
	type sortKey struct {
		k listKey
		t *task
	}
	keys := make([]sortKey, 0, l.n+len(ts))
	for _, c := range l.chunks {
		for _, t := range c {
			keys = append(keys, sortKey{t.listKey(), t})
		}
	}
	for _, t := range ts {
		keys = append(keys, sortKey{t.listKey(), t})
	}
	slices.SortFunc(keys, func(a, b sortKey) int { return a.k.cmp(b.k) })
	out := make([]*task, len(keys))
	for i := range keys {
		out[i] = keys[i].t
	}
	return out
}
