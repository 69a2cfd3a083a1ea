package expect

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// What the evaluator knows of a job that the runs after a snapshot do not
// give again goes into the server's snapshot too (as the flapping state
// does, flapstate.go): a restart replays only the log after the newest
// snapshot, so without it a job down at the snapshot would no longer hold
// its downstream jobs' alerts, and starts that straddle a snapshot would
// never be found too often, and a run that was running at the snapshot
// would never be found too long.

// JobState is what the evaluator knows of one job's runs, besides its
// flapping (FlapState): its latest start and skip, whether it is down
// and since when, and the starts max_runs counts, under the settings they
// were counted with.
type JobState struct {
	Tenant, Job string
	LastStart   time.Time `json:",omitzero"`
	LastSkip    time.Time `json:",omitzero"`
	// Problem is why the job is down; none: it is not.
	Problem Problem   `json:",omitzero"`
	Since   time.Time `json:",omitzero"`
	// Starts are the latest starts (Unix ns), at most MaxRuns, counted
	// under MaxRuns and RunsWindow.
	MaxRuns    int           `json:",omitempty"`
	RunsWindow time.Duration `json:",omitempty"`
	Starts     []int64       `json:",omitempty"`
	// Runs are the running runs watched for max_runtime, found too long
	// or not yet (the caller had not timed them out).
	Runs []WatchedRun `json:",omitempty"`
}

// WatchedRun is a running run watched for max_runtime: its task ID, when
// it started (by its reporter) and when max_runtime counts from (Run's
// Received).
type WatchedRun struct {
	TaskID      string
	Start, From time.Time
}

// JobStates returns the state of every job the evaluator watches (with an
// expectation, or as another job's upstream) that has seen a run start, be
// skipped or end down, in no set order (each job's runs by task ID).
func (e *Evaluator) JobStates() []JobState {
	var out []JobState
	for _, ts := range e.states() {
		ts.mu.Lock()
		for _, j := range ts.jobs {
			if j.lastStart.IsZero() && j.lastSkip.IsZero() && j.problem == ProblemNone {
				continue
			}
			st := JobState{Tenant: j.tenant, Job: j.name, LastStart: j.lastStart, LastSkip: j.lastSkip, Problem: j.problem}
			if j.problem != ProblemNone {
				st.Since = j.since
			}
			if sp := j.spec; sp != nil && sp.MaxRuns > 0 {
				st.MaxRuns, st.RunsWindow, st.Starts = sp.MaxRuns, sp.RunsWindow, j.starts.kept()
			}
			for _, d := range j.runs {
				st.Runs = append(st.Runs, WatchedRun{TaskID: d.task, Start: d.start, From: d.from})
			}
			slices.SortFunc(st.Runs, func(a, b WatchedRun) int { return strings.Compare(a.TaskID, b.TaskID) })
			out = append(out, st)
		}
		ts.mu.Unlock()
	}
	return out
}

// RestoreJobs puts back the states JobStates returned, after Set has given
// the evaluator its expectations and before the runs after the snapshot
// are told. A state whose job is no longer watched is dropped. As Set
// does for a change while the server runs, a job whose max_runs or
// runs_window changed counts its starts anew, and keeps the rest: its
// latest start, and whether it is down. The runs watched for max_runtime
// are watched again, under the job's max_runtime now (none: not at all),
// counted from when they were first: one past it is found at the next
// Tick. Their ends after the snapshot, told next (Finished), end that.
func (e *Evaluator) RestoreJobs(states []JobState) {
	for _, st := range states {
		ts, j := e.find(st.Tenant, st.Job)
		if ts == nil {
			continue
		}
		ts.restoreJob(j, st)
		ts.mu.Unlock()
	}
}

// restoreJob puts back st on j (nil: not watched); ts.mu is held.
func (ts *tenantState) restoreJob(j *jobState, st JobState) {
	if j == nil {
		return
	}
	j.lastStart, j.lastSkip = later(j.lastStart, st.LastStart), later(j.lastSkip, st.LastSkip)
	if j.problem == ProblemNone {
		j.problem, j.since = st.Problem, st.Since
	}
	sp := j.spec
	if sp == nil {
		return
	}
	if sp.MaxRuns > 0 && sp.MaxRuns == st.MaxRuns && sp.RunsWindow == st.RunsWindow && len(j.starts.t) == sp.MaxRuns {
		j.starts.reset()
		for _, at := range st.Starts {
			j.starts.push(time.Unix(0, at))
		}
	}
	for _, r := range st.Runs {
		if sp.MaxRuntime <= 0 || j.runs[r.TaskID] != nil {
			continue
		}
		d := &deadline{kind: dRun, job: j, task: r.TaskID, start: r.Start, from: r.From, index: -1}
		j.runs[r.TaskID] = d
		ts.due.set(d, d.from.Add(sp.MaxRuntime))
	}
	// What arm made of the latest start or skip, had it had them.
	if j.wait == nil || j.wait.index < 0 {
		return
	}
	switch {
	case sp.Every > 0:
		if next := later(j.lastStart, j.lastSkip).Add(sp.Every); next.After(j.slot) {
			j.slot = next
			ts.due.set(j.wait, j.slot.Add(sp.Grace))
		}
	case sp.sched != nil && !j.hit:
		j.hit = j.countsLatest()
	}
}

// MarshalText implements encoding.TextMarshaler: the problem's name.
func (p Problem) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: a problem's name.
func (p *Problem) UnmarshalText(b []byte) error {
	for i, name := range problemNames {
		if name == string(b) {
			*p = Problem(i)
			return nil
		}
	}
	return fmt.Errorf("unknown problem %q", b)
}
