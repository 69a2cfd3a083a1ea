package metrics

import (
	"hash/maphash"
	"slices"
	"strings"
	"unsafe"

	"github.com/apollo-11/apollo"
)

// Besides its buckets, every job keeps what its health is judged by (the
// job health board, GET /api/v1/jobs/health, the Prometheus job
// exposition): its newest runs, a histogram of its run durations, and
// when a run last ended with each final status. The bus indexes tasks by
// task ID only, so this is what answers "how did this job's last runs go"
// without scanning every task: it costs O(RecentRuns) per job, whatever
// the number of tasks.

// jobRuns is the health record of one job; its series' lock guards it.
type jobRuns struct {
	ring []apollo.RecentRun // the newest runs, by (ReportedAt, TaskID) ascending
	// ids[i] is a hash of ring[i].TaskID: find compares these first, so
	// a new run costs a scan of integers, not of strings.
	ids []uint32
	// ring and ids are windows of these arrays (len == cap). The oldest
	// runs leave a full ring at its front, by moving the window on; the
	// window moves back to the start only when it reaches the end. A
	// full ring thus takes a new run by moving about two entries, not all
	// MaxRecentRuns of them (issue 20.4; BenchmarkApplyNewRuns, runs
	// newest first: 447 → 426 ns a run).
	ringArr []apollo.RecentRun
	idsArr  []uint32
	// seen, once the ring holds more than filterFrom runs, has a bit set
	// for the hash of every ID the ring holds (and of some it held: a
	// removal leaves its bit, until stale removals make it rebuilt). A
	// new task's first change looks for an entry of the same ID, which
	// it almost never has: the filter answers "none" without a scan of
	// the ring's IDs (issue 20.4: the scan was 5% of a replay).
	seen  *idFilter
	stale int // removals since seen was built
	// hist counts finished runs with a cost by DurationBuckets (the last
	// slot: longer), counted and taken out exactly as Summary.CostN is.
	hist [len(apollo.DurationBuckets) + 1]int64
	// lastEnd is when a run last finished with each final status, Unix
	// ms: the latest finish counted, kept when a correction moves it.
	lastEnd [3]int64
	facts   runFacts
	fresh   bool // facts matches ring
}

// runFacts are the facts derived from the ring, kept until it changes.
type runFacts struct {
	apollo.JobFacts
	last int // index in ring of the newest finished run; -1 for none
}

var endSlot = [...]int{apollo.StatusSuccess: 0, apollo.StatusFailed: 1, apollo.StatusTimeout: 2}

func durationSlot(cost int64) int {
	for i, b := range apollo.DurationBuckets {
		if cost <= b {
			return i
		}
	}
	return len(apollo.DurationBuckets)
}

// finish counts a finished run in or out of the histogram and the last
// ends, as the metrics count it (see plan.finishes).
func (r *jobRuns) finish(f *finishMove) {
	if f.cost > 0 {
		r.hist[durationSlot(f.cost)] += f.sign
	}
	if f.sign > 0 {
		e := &r.lastEnd[endSlot[f.status]]
		*e = max(*e, f.at)
	}
}

// runOf is the ring's entry for t, first reported at reported.
func runOf(t *apollo.Task, reported int64) apollo.RecentRun {
	run := apollo.RecentRun{TaskID: t.TaskID, Status: t.Status, Late: t.Late, ReportedAt: reported, StartedAt: t.StartedAt}
	if t.Status.Final() {
		run.FinishedAt, run.CostMs = t.FinishedAt, max(t.CostMs, 0)
	}
	return run
}

func runOrder(a, b *apollo.RecentRun) int {
	if a.ReportedAt != b.ReportedAt {
		if a.ReportedAt < b.ReportedAt {
			return -1
		}
		return 1
	}
	return strings.Compare(a.TaskID, b.TaskID)
}

// idSeed makes the hashes of IDs in memory; they are never written.
var idSeed = maphash.MakeSeed()

func idHash(id string) uint32 { return uint32(maphash.String(idSeed, id)) }

// find returns the index of the task's entry, or -1. Changes come mostly
// for the newest runs, so it looks from the end.
func (r *jobRuns) find(id string) int {
	h := idHash(id)
	if r.seen != nil && !r.seen.has(h) {
		return -1
	}
	for i := len(r.ids) - 1; i >= 0; i-- {
		if r.ids[i] == h && r.ring[i].TaskID == id {
			return i
		}
	}
	return -1
}

// insert puts run at index i, and remove takes out entries [i, j).
func (r *jobRuns) insert(i int, run apollo.RecentRun) {
	if n := len(r.ring); n == cap(r.ring) { // the window is at its array's end
		if free := len(r.ringArr) - n; free < n/2 || n == 0 {
			// Little room at the front: a larger array, with room for
			// half as many runs again.
			r.ringArr = make([]apollo.RecentRun, n+n/2+4)
			r.idsArr = make([]uint32, len(r.ringArr))
		}
		copy(r.ringArr, r.ring)
		copy(r.idsArr, r.ids)
		clear(r.ringArr[n:]) // let the old task IDs go
		r.ring, r.ids = r.ringArr[:n], r.idsArr[:n]
	}
	h := idHash(run.TaskID)
	r.ring = slices.Insert(r.ring, i, run)
	r.ids = slices.Insert(r.ids, i, h)
	switch {
	case r.seen != nil:
		r.seen.add(h)
	case len(r.ring) > filterFrom:
		r.seen = new(idFilter)
		r.rebuild()
	}
}

func (r *jobRuns) remove(i, j int) {
	if r.seen != nil {
		if r.stale += j - i; r.stale > max(len(r.ring), filterFrom) {
			defer r.rebuild() // once the window is moved
		}
	}
	if i == 0 {
		clear(r.ring[:j]) // let the task IDs go
		r.ring, r.ids = r.ring[j:], r.ids[j:]
		return
	}
	r.ring = slices.Delete(r.ring, i, j)
	r.ids = slices.Delete(r.ids, i, j)
}

// filterFrom is the ring length above which find asks a filter first:
// below it, a scan of the IDs' hashes costs less than the filter's bytes.
const filterFrom = 32

// idFilter is a set of ID hashes that may answer yes for an ID not in it
// (a bit shared with another, or left by a removal), never no for one in
// it. With MaxRecentRuns IDs and as many stale, 2 048 bits answer a false
// yes about one time in five, and then find scans as before.
type idFilter [32]uint64

func (f *idFilter) add(h uint32)      { f[h>>6&31] |= 1 << (h & 63) }
func (f *idFilter) has(h uint32) bool { return f[h>>6&31]&(1<<(h&63)) != 0 }

// rebuild makes seen hold exactly the ring's IDs.
func (r *jobRuns) rebuild() {
	clear(r.seen[:])
	for _, h := range r.ids {
		r.seen.add(h)
	}
	r.stale = 0
}

// put records the task's state after c in the ring of at most limit
// runs: the newest by ReportedAt. A task enters at its first change, or
// never: one that is not there later was older than every run kept (it
// left, or never entered), and stays out, so the ring is the same
// whatever order the changes of different tasks come in and a replay
// rebuilds it.
func (r *jobRuns) put(c *apollo.Change, limit int) {
	t := &c.Task
	i := r.find(t.TaskID)
	if c.Prev.Status != apollo.StatusNone {
		if i >= 0 {
			run := runOf(t, r.ring[i].ReportedAt)
			run.TaskID = r.ring[i].TaskID // the ring's own copy
			r.ring[i] = run
			r.fresh = false
		}
		return
	}
	if i >= 0 { // a new task that reuses the ID of one long gone
		r.remove(i, i+1)
	}
	run := runOf(t, c.Record.Ts)
	if len(r.ring) >= limit && runOrder(&run, &r.ring[0]) < 0 {
		return // older than every run kept
	}
	// The ring outlives the task in the bus: keep a copy of the ID, not
	// the buffer it was decoded from.
	run.TaskID = strings.Clone(run.TaskID)
	r.insert(r.position(&run), run)
	if len(r.ring) > limit {
		r.remove(0, len(r.ring)-limit)
	}
	r.fresh = false
}

// position is where run goes in the ring: after every entry before it.
// A new run is most often the newest, so the last entry is asked first:
// runs reported in the same millisecond (a batch) are told apart by task
// ID, and a binary search compared eight IDs where one does.
func (r *jobRuns) position(run *apollo.RecentRun) int {
	// Gallop back from the end: runs decided in parallel (a replay's
	// workers, concurrent batches) land a few places before it.
	lo, hi := len(r.ring), len(r.ring) // runOrder(ring[hi], run) >= 0, past the end
	for step := 1; lo > 0; step *= 2 {
		lo = max(hi-step, 0)
		if runOrder(&r.ring[lo], run) < 0 {
			lo++
			break
		}
		hi = lo
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if runOrder(&r.ring[m], run) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// drop removes a task that moved to another job.
func (r *jobRuns) drop(id string) {
	if i := r.find(id); i >= 0 {
		r.remove(i, i+1)
		r.fresh = false
	}
}

// derive returns the facts of the ring, computed once per change of it.
func (r *jobRuns) derive() *runFacts {
	if r.fresh {
		return &r.facts
	}
	f := runFacts{last: -1}
	var costs, gaps [apollo.MaxRecentRuns]int64
	nc, ng := 0, 0
	for i := range r.ring {
		run := &r.ring[i]
		switch {
		case run.Status.Final():
			if f.last < 0 || run.FinishedAt >= r.ring[f.last].FinishedAt {
				f.last = i
			}
			if run.CostMs > 0 {
				costs[nc], nc = run.CostMs, nc+1
			}
		case run.Status == apollo.StatusRunning:
			if f.RunningSince == 0 || run.StartedAt < f.RunningSince {
				f.RunningSince = run.StartedAt
			}
		}
		if i > 0 {
			gaps[ng], ng = run.ReportedAt-r.ring[i-1].ReportedAt, ng+1
		}
	}
	if f.last >= 0 {
		f.LastStatus = r.ring[f.last].Status
	}
	if n := len(r.ring); n > 0 {
		newest := &r.ring[n-1]
		f.LastRunAt = newest.ReportedAt
		f.LateNow = newest.Late && !newest.Status.Final()
	}
	if nc >= apollo.UsualRuns {
		f.UsualCostMs = median(costs[:nc])
	}
	if ng+1 >= apollo.UsualRuns {
		f.UsualEveryMs = median(gaps[:ng])
	}
	r.facts, r.fresh = f, true
	return &r.facts
}

// median is the middle value (the upper one of two); it sorts xs.
func median(xs []int64) int64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// bytes estimates the memory the record holds.
func (r *jobRuns) bytes() int64 {
	n := int64(cap(r.ringArr))*runBytes + int64(cap(r.idsArr))*4
	if r.seen != nil {
		n += int64(unsafe.Sizeof(*r.seen))
	}
	for i := range r.ring {
		n += int64(len(r.ring[i].TaskID))
	}
	return n + jobRunsBytes
}

// Sizes for Stats.Bytes.
const (
	runBytes     = int64(unsafe.Sizeof(apollo.RecentRun{}))
	jobRunsBytes = int64(unsafe.Sizeof(jobRuns{}))
)
