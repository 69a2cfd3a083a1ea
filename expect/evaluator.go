package expect

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// Evaluator holds every tenant's expectations and what it has seen of
// their jobs, and finds what differs from them: missed runs, runs that are
// too long, too short or too often, and flapping jobs. It answers which
// upstream trouble a job's alerts are echoes of.
//
// It has no goroutine and reads no clock. The caller feeds it the starts
// and ends of runs (Started, Finished), ticks it with the time (Tick, once
// per evaluation cycle) and takes the events each call returns. A tick
// costs O(due · log n): deadlines are kept in one min-heap, and a cron
// schedule shared by many jobs is stepped once per tick.
//
// All methods are safe for concurrent use. Each tenant's state has a
// mutex of its own, and the tenants' map another, held only to find or
// add a tenant: a Set of one tenant's expectations (tens of thousands of
// jobs from a file of 4 MiB) holds up that tenant alone, not the other
// tenants' runs and ticks. Lock order: mu, then a tenant's; a method
// holds one tenant's lock at a time.
type Evaluator struct {
	mu      sync.RWMutex
	tenants map[string]*tenantState // an entry stays once made: a tenant's lock is held through its pointer
}

// tenantState is one tenant's expectations, what the evaluator knows of
// its jobs, and their deadlines.
type tenantState struct {
	// setting counts the Sets waiting for or holding mu: Tick passes the
	// tenant by meanwhile, rather than wait for a Set of thousands of
	// jobs; its deadlines are judged at the next Tick.
	setting atomic.Int32
	mu      sync.Mutex
	set     *Set                 // nil: none
	jobs    map[string]*jobState // jobs with an expectation, and the jobs they name as upstream
	due     deadlineHeap
	memo    map[memoKey]time.Time
}

// lookup returns tenant's state, nil if it never had expectations.
func (e *Evaluator) lookup(tenant string) *tenantState {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.tenants[tenant]
}

// states returns every tenant's state, in no set order.
func (e *Evaluator) states() []*tenantState {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*tenantState, 0, len(e.tenants))
	for _, ts := range e.tenants {
		out = append(out, ts)
	}
	return out
}

// testInSet, set by tests, is called by Set with the tenant's lock held.
var testInSet func(tenant string)

// jobState is what the evaluator knows of one job.
type jobState struct {
	tenant, name string
	spec         *spec // nil: watched only as another job's upstream

	lastStart time.Time
	// lastSkip is the latest run skipped on purpose (Skipped): it counts
	// for expected runs as a start does, and for nothing else.
	lastSkip time.Time
	// slot is the expected start being waited for; wait passes at slot +
	// grace. prev is the slot before, which bounds how early a run may
	// start and still count for slot. hit: a run started in slot's window.
	slot, prev time.Time
	hit        bool
	wait       *deadline

	// runs are the running runs watched for max_runtime, by task ID. A
	// run found too long stays (its deadline out of the heap) until its
	// end is told (Finished) or Unwatch says it ended otherwise: a
	// snapshot taken before the caller timed it out keeps it, and the
	// next start finds it again.
	runs   map[string]*deadline
	starts timeRing // the latest max_runs starts

	flap flapState

	problem Problem
	since   time.Time
}

// memoKey is one step of one cron schedule: jobs with the same schedule,
// zone and slot share the next slot, computed once per call.
type memoKey struct {
	schedule, zone string
	after          int64
}

// NewEvaluator returns an evaluator with no expectations.
func NewEvaluator() *Evaluator {
	return &Evaluator{tenants: map[string]*tenantState{}}
}

// Set makes set the expectations of tenant (nil or empty: none). A job
// whose expectation did not change keeps its state; a new or changed
// schedule expects its first run at the first tick after since (pass now;
// after a restart, the time up to which expectations were last checked,
// so that runs missed meanwhile are found). It returns a stable event for
// each flapping job that is no longer watched for flapping.
func (e *Evaluator) Set(tenant string, set *Set, since time.Time) []Event {
	empty := set == nil || set.Len() == 0
	e.mu.Lock()
	ts := e.tenants[tenant]
	if ts == nil && !empty {
		ts = &tenantState{memo: map[memoKey]time.Time{}}
		e.tenants[tenant] = ts
	}
	e.mu.Unlock()
	if ts == nil {
		return nil
	}
	ts.setting.Add(1)
	defer ts.setting.Add(-1)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if testInSet != nil {
		testInSet(tenant)
	}
	clear(ts.memo)
	old := ts.jobs
	var out []Event
	if empty {
		for _, j := range old {
			out = ts.drop(j, since, "no expectation any more", out)
		}
		ts.set, ts.jobs = nil, nil
		return out
	}
	jobs := make(map[string]*jobState, set.Len())
	watch := func(name string) *jobState {
		if j := jobs[name]; j != nil {
			return j
		}
		j := old[name]
		if j == nil {
			j = &jobState{tenant: tenant, name: name, runs: map[string]*deadline{}}
		}
		jobs[name] = j
		return j
	}
	for _, sp := range set.specs {
		watch(sp.Job)
		for _, up := range sp.Upstream {
			watch(up)
		}
	}
	for name, j := range jobs {
		out = ts.install(j, set.byJob[name], since, out)
	}
	for name, j := range old {
		if jobs[name] == nil {
			out = ts.drop(j, since, "no expectation any more", out)
		}
	}
	ts.set, ts.jobs = set, jobs
	return out
}

// install gives j its new expectation (nil: none), resetting only what it
// changes.
func (ts *tenantState) install(j *jobState, sp *spec, since time.Time, out []Event) []Event {
	var was, now Expectation
	if j.spec != nil {
		was = j.spec.Expectation
	}
	if sp != nil {
		now = sp.Expectation
	}
	j.spec = sp
	if j.wait == nil || was.Schedule != now.Schedule || was.Timezone != now.Timezone || was.Every != now.Every || was.Grace != now.Grace {
		ts.arm(j, since)
	}
	if was.MaxRuntime != now.MaxRuntime {
		for task, d := range j.runs {
			if now.MaxRuntime <= 0 {
				ts.due.remove(d)
				delete(j.runs, task)
				continue
			}
			ts.due.set(d, d.from.Add(now.MaxRuntime))
		}
	}
	if was.MaxRuns != now.MaxRuns || was.RunsWindow != now.RunsWindow || len(j.starts.t) != now.MaxRuns {
		j.starts = newTimeRing(now.MaxRuns)
	}
	if was.Flapping != now.Flapping || len(j.flap.switches.t) != now.Flapping.Changes {
		out = ts.endFlapping(j, since, "flapping settings changed", out)
		j.flap = flapState{recent: j.flap.latest(), switches: newTimeRing(now.Flapping.Changes)}
	}
	return out
}

// arm sets the first expected run of j after since, or clears it.
func (ts *tenantState) arm(j *jobState, since time.Time) {
	j.prev = time.Time{}
	sp := j.spec
	switch {
	case sp != nil && sp.sched != nil:
		j.slot = ts.next(sp, since)
	case sp != nil && sp.Every > 0:
		j.slot = later(later(j.lastStart, j.lastSkip), since).Add(sp.Every)
	default:
		j.slot = time.Time{}
	}
	if j.slot.IsZero() {
		ts.due.remove(j.wait)
		return
	}
	j.hit = j.countsLatest()
	if j.wait == nil {
		j.wait = &deadline{kind: dSlot, job: j, index: -1}
	}
	ts.due.set(j.wait, j.slot.Add(sp.Grace))
}

// counts reports whether a run started at t counts for the expected run
// at j.slot: when it starts no more than grace before it (and less than
// half-way back to the one before), and no more than grace after it.
func (j *jobState) counts(t time.Time) bool {
	grace := j.spec.Grace
	lead := grace
	if !j.prev.IsZero() {
		lead = min(lead, j.slot.Sub(j.prev)/2)
	}
	return !t.IsZero() && !t.Before(j.slot.Add(-lead)) && !t.After(j.slot.Add(grace))
}

// countsLatest reports whether the latest start or skip counts for the
// expected run at j.slot.
func (j *jobState) countsLatest() bool { return j.counts(j.lastStart) || j.counts(j.lastSkip) }

// drop forgets j: its deadlines leave the heap.
func (ts *tenantState) drop(j *jobState, at time.Time, why string, out []Event) []Event {
	out = ts.endFlapping(j, at, why, out)
	ts.due.remove(j.wait)
	for _, d := range j.runs {
		ts.due.remove(d)
	}
	return out
}

func (ts *tenantState) endFlapping(j *jobState, at time.Time, why string, out []Event) []Event {
	if !j.flap.on {
		return out
	}
	j.flap.on = false
	ts.due.remove(j.flap.stable)
	return append(out, Event{Kind: KindStable, Tenant: j.tenant, Job: j.name, Slot: j.flap.lastSwitch, At: at, Count: 1, Detail: why})
}

// next returns the first tick of sp's schedule after t, once per call for
// all jobs with the same schedule.
func (ts *tenantState) next(sp *spec, t time.Time) time.Time {
	k := memoKey{sp.Schedule, sp.Timezone, t.UnixNano()}
	if n, ok := ts.memo[k]; ok {
		return n
	}
	n := sp.sched.Next(t)
	ts.memo[k] = n
	return n
}

// last is sp's latest tick in (since, until], shared by the jobs of one
// schedule as next is: the latest tick up to until is the same for every
// one of them that has not judged it yet.
func (ts *tenantState) last(sp *spec, since, until time.Time) time.Time {
	k := memoKey{"last " + sp.Schedule, sp.Timezone, until.UnixNano()}
	if n, ok := ts.memo[k]; ok && n.After(since) {
		return n
	}
	n := sp.sched.Last(since, until)
	if !n.IsZero() {
		ts.memo[k] = n
	}
	return n
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// find returns tenant's state, locked, and its job name (nil: not
// watched); the caller unlocks ts when it is not nil.
func (e *Evaluator) find(tenant, name string) (*tenantState, *jobState) {
	ts := e.lookup(tenant)
	if ts == nil {
		return nil, nil
	}
	ts.mu.Lock()
	return ts, ts.jobs[name]
}

// Started tells the evaluator that a run started at r.At. It returns the
// missed runs whose grace ended before this start (if no tick judged them
// yet) and a too_often event when the run is one too many. Starts of jobs
// it does not watch cost a map lookup.
func (e *Evaluator) Started(r Run) []Event {
	ts, j := e.find(r.Tenant, r.Job)
	if ts == nil {
		return nil
	}
	defer ts.mu.Unlock()
	if j == nil {
		return nil
	}
	sp := j.spec
	out := ts.settle(j, r.At, nil)
	if r.At.After(j.lastStart) {
		j.lastStart = r.At
	}
	if sp == nil {
		return out
	}
	if sp.MaxRuntime > 0 && j.runs[r.TaskID] == nil {
		d := &deadline{kind: dRun, job: j, task: r.TaskID, start: r.At, from: later(r.At, r.Received), index: -1}
		j.runs[r.TaskID] = d
		ts.due.set(d, d.from.Add(sp.MaxRuntime))
	}
	if sp.MaxRuns > 0 {
		if j.starts.within(r.At, sp.RunsWindow) {
			out = append(out, Event{Kind: KindTooOften, Tenant: r.Tenant, Job: r.Job, TaskID: r.TaskID, Slot: r.At, At: r.At, Count: 1,
				Detail: fmt.Sprintf("%d runs started within %s (max_runs %d)", sp.MaxRuns+1, formatDuration(sp.RunsWindow), sp.MaxRuns)})
		}
		j.starts.push(r.At)
	}
	return out
}

// Skipped tells the evaluator that a run due at r.At was not started on
// purpose: a scheduler skipped it (its previous run still running, the
// job's upstream failed) and said so (manual_blocked). The skip settles
// the expected run it falls in as a start would, so that it is told once,
// as the scheduler's skip, and not a second time as a missed run. It is
// no start otherwise: no runtime is watched, too_often does not count it,
// and a job that is down stays down. It returns the missed runs whose
// grace ended before it.
func (e *Evaluator) Skipped(r Run) []Event {
	ts, j := e.find(r.Tenant, r.Job)
	if ts == nil {
		return nil
	}
	defer ts.mu.Unlock()
	if j == nil {
		return nil
	}
	out := ts.settle(j, r.At, nil)
	if r.At.After(j.lastSkip) {
		j.lastSkip = r.At
	}
	return out
}

// settle counts a start or a skip at at for j's expected runs: those whose
// grace ended before it are judged first, whether or not Tick came by
// since (a late run is not theirs); then it counts for the one it falls
// in, or, with every, the next period counts from it. The caller records
// at as the latest start or skip afterwards: with a grace longer than
// half the time between expected runs, it may count for the next too.
func (ts *tenantState) settle(j *jobState, at time.Time, out []Event) []Event {
	sp := j.spec
	if sp == nil || j.wait == nil || j.wait.index < 0 {
		return out
	}
	out = ts.slotsDue(j.wait, at.Add(-1), out)
	switch {
	case sp.Every > 0 && !at.Before(later(j.lastStart, j.lastSkip)):
		j.slot = at.Add(sp.Every)
		ts.due.set(j.wait, j.slot.Add(sp.Grace))
	case sp.sched != nil && j.counts(at):
		j.hit = true
	}
	return out
}

// Finished tells the evaluator that a run ended at r.At with r.Status
// after r.Duration. It returns a too_short event for a successful run
// under min_runtime, and a flapping event when this run's switch between
// success and failure makes the job flap.
func (e *Evaluator) Finished(r Run) []Event {
	ts, j := e.find(r.Tenant, r.Job)
	if ts == nil {
		return nil
	}
	defer ts.mu.Unlock()
	if j == nil {
		return nil
	}
	if d := j.runs[r.TaskID]; d != nil {
		ts.due.remove(d)
		delete(j.runs, r.TaskID)
	}
	var outcome int8
	switch r.Status {
	case apollo.StatusSuccess:
		outcome, j.problem = 1, ProblemNone
	case apollo.StatusFailed:
		outcome, j.problem, j.since = -1, ProblemFailed, r.At
	case apollo.StatusTimeout:
		outcome, j.problem, j.since = -1, ProblemTimeout, r.At
	default:
		return nil // not an end that says how the job is doing
	}
	sp := j.spec
	if sp == nil {
		return nil
	}
	var out []Event
	if outcome > 0 && sp.MinRuntime > 0 && r.Duration < sp.MinRuntime {
		out = append(out, Event{Kind: KindTooShort, Tenant: r.Tenant, Job: r.Job, TaskID: r.TaskID, Slot: r.At.Add(-r.Duration), At: r.At, Count: 1,
			Detail: fmt.Sprintf("succeeded in %v, under min_runtime %s", r.Duration, formatDuration(sp.MinRuntime))})
	}
	if sp.Flapping.Changes > 0 {
		out = ts.flapStep(j, outcome, r.At, r.Seq, r.TaskID, out)
	}
	return out
}

// Unwatch tells the evaluator that a run it watches for max_runtime is no
// longer running, although its end was not told (Finished): the caller
// went to time it out and found it ended otherwise (manual_blocked) or
// gone. It is no longer watched.
func (e *Evaluator) Unwatch(tenant, job, taskID string) {
	ts, j := e.find(tenant, job)
	if ts == nil {
		return
	}
	defer ts.mu.Unlock()
	if j == nil {
		return
	}
	if d := j.runs[taskID]; d != nil {
		ts.due.remove(d)
		delete(j.runs, taskID)
	}
}

// Tick handles every deadline that has passed by now and returns what it
// found: missed runs, runs past max_runtime (the caller times them out)
// and flapping jobs that became stable. Call it once per evaluation cycle,
// after the runs reported up to now have been fed. A tenant whose
// expectations are being set (Set) is passed by: its deadlines are
// judged at the next Tick, and the other tenants' do not wait for it.
func (e *Evaluator) Tick(now time.Time) []Event {
	var out []Event
	for _, ts := range e.states() {
		if ts.setting.Load() > 0 {
			continue
		}
		out = ts.tick(now, out)
	}
	// In the order of their deadlines, as one heap of every tenant's
	// gave them.
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}

func (ts *tenantState) tick(now time.Time, out []Event) []Event {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clear(ts.memo)
	limit := now.UnixNano()
	for len(ts.due) > 0 && ts.due[0].at <= limit {
		d := ts.due[0]
		j := d.job
		switch d.kind {
		case dSlot:
			out = ts.slotsDue(d, now, out)
		case dRun:
			ts.due.remove(d) // still watched: see jobState.runs
			j.problem, j.since = ProblemTimeout, d.time()
			out = append(out, Event{Kind: KindTooLong, Tenant: j.tenant, Job: j.name, TaskID: d.task, Slot: d.start, At: d.time(), Count: 1,
				Detail: fmt.Sprintf("still running after max_runtime %s (started %s)", formatDuration(j.spec.MaxRuntime), stamp(d.start, j.spec.location()))})
		case dStable:
			ts.due.remove(d)
			j.flap.on = false
			j.flap.switches.reset()
			j.flap.recent = j.flap.latest() // the switches before are forgotten
			out = append(out, Event{Kind: KindStable, Tenant: j.tenant, Job: j.name, Slot: j.flap.lastSwitch, At: d.time(), Count: 1,
				Detail: fmt.Sprintf("no switch between success and failure for %s", formatDuration(d.time().Sub(j.flap.lastSwitch)))})
		}
	}
	return out
}

// maxSlotSteps bounds how many expected runs of one job slotsDue steps
// through one by one: a long downtime of a job expected every second would
// otherwise be stepped run by run (2.6 million for 30 days) under the
// evaluator's lock, which every run's start and end on the bus waits for.
// A job expected every minute is counted exactly over 16 hours, one every
// 5 minutes over 3 days.
const maxSlotSteps = 1000

// slotsDue judges every expected run of d's job whose grace has ended by
// now, and moves d to the next one. Several at once (a tick came late, or
// since lay in the past) make one event with their count.
func (ts *tenantState) slotsDue(d *deadline, now time.Time, out []Event) []Event {
	j := d.job
	sp := j.spec
	if j.slot.Add(sp.Grace).After(now) {
		return out
	}
	count, atLeast := 0, false
	var last time.Time
	if sp.Every > 0 {
		// No run started since slot was set (a start moves it), so every
		// period up to now is missed: count them without stepping.
		n := int(now.Sub(j.slot.Add(sp.Grace))/sp.Every) + 1
		count, last = n, j.slot.Add(time.Duration(n-1)*sp.Every)
		j.slot = j.slot.Add(time.Duration(n) * sp.Every)
	} else {
		for steps := 0; !j.slot.IsZero() && !j.slot.Add(sp.Grace).After(now); steps++ {
			if steps == maxSlotSteps {
				// Down (or set from) longer than maxSlotSteps expected
				// runs ago: no run started since the first of them (a
				// start moves the slot), so every later one is missed
				// too. The last is found from now, at a bounded cost,
				// and the count says at least.
				if to := ts.last(sp, j.slot, now.Add(-sp.Grace)); !to.IsZero() {
					if !j.hit {
						count++ // the slot itself
					}
					count, last, atLeast = count+1, to, true
					j.prev, j.slot, j.hit = to, ts.next(sp, to), false
					break
				}
				// None after this one: it is the last, judged below.
			}
			if !j.hit {
				count, last = count+1, j.slot
			}
			j.prev, j.slot = j.slot, ts.next(sp, j.slot)
			// The latest start may count for the next one too, when
			// grace is longer than half the time between them.
			j.hit = !j.slot.IsZero() && j.countsLatest()
		}
	}
	if j.slot.IsZero() {
		ts.due.remove(d)
	} else {
		ts.due.set(d, j.slot.Add(sp.Grace))
	}
	if count == 0 {
		return out
	}
	at := last.Add(sp.Grace)
	j.problem, j.since = ProblemMissed, at
	loc := sp.location()
	detail := fmt.Sprintf("no run started by %s (expected %s, grace %s)", stamp(at, loc), stamp(last, loc), formatDuration(sp.Grace))
	if sp.Grace == 0 {
		detail = fmt.Sprintf("no run started at %s", stamp(last, loc))
	}
	switch {
	case atLeast:
		detail = fmt.Sprintf("at least %d expected runs did not start (not all counted); the last: %s", count, detail)
	case count > 1:
		detail = fmt.Sprintf("%d expected runs did not start; the last: %s", count, detail)
	}
	return append(out, Event{Kind: KindMissed, Tenant: j.tenant, Job: j.name, Slot: last, At: at, Count: count, Detail: detail})
}

// location is the zone times of the job are shown in: its schedule's, or
// UTC.
func (sp *spec) location() *time.Location {
	if sp.sched != nil {
		return sp.sched.Location()
	}
	return time.UTC
}

// stamp writes an instant for people, in the zone its schedule is read in.
func stamp(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// InhibitedBy returns the root causes that hold the alerts of job: the
// jobs above it in the upstream graph (declared upstream, transitively)
// that are down (their latest run failed or timed out, is running past
// max_runtime, or their latest expected run is missed) and have nothing
// down above them. Empty means the job's alerts are its own. job's own
// state is not asked about.
func (e *Evaluator) InhibitedBy(tenant, job string) []Cause {
	ts := e.lookup(tenant)
	if ts == nil {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.set == nil {
		return nil
	}
	down := func(name string) bool {
		j := ts.jobs[name]
		return j != nil && j.problem != ProblemNone
	}
	roots := rootCauses(job, ts.set.upstream, down)
	if len(roots) == 0 {
		return nil
	}
	causes := make([]Cause, len(roots))
	for i, name := range roots {
		j := ts.jobs[name]
		causes[i] = Cause{Job: name, Problem: j.problem, Since: j.since}
	}
	return causes
}
