package expect

import (
	"container/heap"
	"slices"
	"time"
)

// deadlineKind says what happens when a deadline passes.
type deadlineKind uint8

const (
	dSlot   deadlineKind = iota // an expected run's grace ends: did it start?
	dRun                        // a running run reaches max_runtime
	dStable                     // a flapping job has gone hold without a switch
)

// deadline is one entry of the evaluator's min-heap. Each job has at most
// one slot and one stable deadline, which move in place, and one run
// deadline per run it watches; so a tick costs O(due · log n), not O(jobs).
type deadline struct {
	at    int64 // Unix nanoseconds: compared far more often than read
	kind  deadlineKind
	job   *jobState
	task  string    // dRun: the run
	start time.Time // dRun: when it started, by its reporter
	from  time.Time // dRun: when max_runtime counts from (Run.Received)
	index int       // in the heap; -1 when not in it
}

func (d *deadline) time() time.Time { return time.Unix(0, d.at) }

type deadlineHeap []*deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *deadlineHeap) Push(x any) {
	d := x.(*deadline)
	d.index = len(*h)
	*h = append(*h, d)
}

func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	d.index = -1
	return d
}

// set moves d to at, into the heap if it is not there.
func (h *deadlineHeap) set(d *deadline, at time.Time) {
	d.at = at.UnixNano()
	if d.index < 0 {
		heap.Push(h, d)
		return
	}
	heap.Fix(h, d.index)
}

// remove takes d out of the heap, if it is there.
func (h *deadlineHeap) remove(d *deadline) {
	if d != nil && d.index >= 0 {
		heap.Remove(h, d.index)
	}
}

// timeRing keeps the latest cap(t) instants by time, whatever order they
// come in: the starts that max_runs counts, the switches that flapping
// counts. The runs of a job reach the evaluator in no set order (the bus
// delivers different runs' changes side by side), so neither may assume
// that the last one told is the latest.
type timeRing struct {
	t    []int64
	next int
	full bool
}

func newTimeRing(n int) timeRing { return timeRing{t: make([]int64, n)} }

func (r *timeRing) push(at time.Time) {
	if len(r.t) == 0 {
		return
	}
	v := at.UnixNano()
	if r.full { // the oldest goes, unless at is older still
		if i := r.oldest(); v > r.t[i] {
			r.t[i] = v
		}
		return
	}
	r.t[r.next] = v
	r.next++
	if r.next == len(r.t) {
		r.next, r.full = 0, true
	}
}

// kept returns a copy of the instants the ring holds (Unix ns), in no set
// order: what a snapshot keeps of it.
func (r *timeRing) kept() []int64 {
	n := r.next
	if r.full {
		n = len(r.t)
	}
	return slices.Clone(r.t[:n])
}

// oldest is the index of the earliest instant of a full ring.
func (r *timeRing) oldest() int {
	i := 0
	for k, v := range r.t {
		if v < r.t[i] {
			i = k
		}
	}
	return i
}

// within reports whether the ring is full and its instants and at all lie
// less than span apart: with at the newest, cap(t) instants in
// (at-span, at].
func (r *timeRing) within(at time.Time, span time.Duration) bool {
	if !r.full {
		return false
	}
	lo, hi := at.UnixNano(), at.UnixNano()
	for _, v := range r.t {
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi-lo < span.Nanoseconds()
}

func (r *timeRing) reset() {
	clear(r.t)
	r.next, r.full = 0, false
}
