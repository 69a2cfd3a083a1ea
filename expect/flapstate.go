package expect

import (
	"cmp"
	"time"
)

// A job's flapping state goes into the server's snapshot: a restart
// replays only the log after the newest snapshot, so without it the runs
// before the snapshot would count for nothing, and a job whose switches
// straddle a snapshot would never be found flapping.

// FlapState is what the evaluator knows of one job watched for flapping,
// under the settings it was counted with.
type FlapState struct {
	Tenant, Job string
	Flapping    Flapping
	// Recent are the latest outcomes, in the order their runs ended.
	Recent []Outcome
	// Switches are when the latest switches happened (Unix ns), as many
	// as were counted, at most Flapping.Changes.
	Switches   []int64
	On         bool
	LastSwitch time.Time
}

// Outcome is how a run ended, when (Unix ns), and its Run.Seq (0: none,
// as in a snapshot of a version that kept none).
type Outcome struct {
	At      int64
	Seq     uint64 `json:",omitempty"`
	Success bool
}

// FlapStates returns the state of every job watched for flapping that has
// seen a run end, in no set order.
func (e *Evaluator) FlapStates() []FlapState {
	var out []FlapState
	for _, ts := range e.states() {
		ts.mu.Lock()
		for _, j := range ts.jobs {
			if j.spec == nil || j.spec.Flapping.Changes == 0 || len(j.flap.recent) == 0 {
				continue
			}
			f := &j.flap
			st := FlapState{Tenant: j.tenant, Job: j.name, Flapping: j.spec.Flapping, On: f.on, LastSwitch: f.lastSwitch}
			for _, o := range f.recent {
				st.Recent = append(st.Recent, Outcome{At: o.at, Seq: o.seq, Success: o.o > 0})
			}
			st.Switches = f.switches.kept()
			out = append(out, st)
		}
		ts.mu.Unlock()
	}
	return out
}

// RestoreFlaps puts back the states FlapStates returned, after Set has
// given the evaluator its expectations. A state whose job is no longer
// watched for flapping, or is watched with other settings, is dropped: a
// change of the settings starts the count anew (Set), as it would have
// had it come while the server ran.
func (e *Evaluator) RestoreFlaps(states []FlapState) {
	for _, st := range states {
		ts, j := e.find(st.Tenant, st.Job)
		if ts == nil {
			continue
		}
		ts.restoreFlap(j, st)
		ts.mu.Unlock()
	}
}

// restoreFlap puts back st on j (nil: not watched); ts.mu is held.
func (ts *tenantState) restoreFlap(j *jobState, st FlapState) {
	if j == nil || j.spec == nil || j.spec.Flapping != st.Flapping || st.Flapping.Changes == 0 {
		return
	}
	f := &j.flap
	f.recent = f.recent[:0]
	for _, o := range st.Recent {
		f.remember(outcomeAt{at: o.At, seq: o.Seq, o: outcome(o.Success)}, flapKeep(st.Flapping.Changes))
	}
	f.switches.reset()
	for _, at := range st.Switches {
		f.switches.push(time.Unix(0, at))
	}
	f.lastSwitch = st.LastSwitch
	ts.due.remove(f.stable)
	f.on = st.On
	if f.on {
		if f.stable == nil {
			f.stable = &deadline{kind: dStable, job: j, index: -1}
		}
		window := cmp.Or(st.Flapping.Window, DefaultFlapWindow)
		ts.due.set(f.stable, f.lastSwitch.Add(cmp.Or(st.Flapping.Hold, window)))
	}
}

func outcome(success bool) int8 {
	if success {
		return 1
	}
	return -1
}
