package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/expect"
)

// The expectations across a restart: from when they are judged again,
// and what the snapshot keeps of them for that.

// arm gives the evaluator every tenant's expectations, expecting runs
// from the time they were last judged before a restart (from the
// snapshot), else from now. The server calls it before the log is
// replayed, so that the replayed runs count for the expected ones.
//
// Only the expectations in force at the snapshot are judged from then:
// one set or changed after it (through the API, the file, or a
// scheduler's job resumed) did not exist over that time, and judging it
// there recorded and told the runs it would have expected before it was
// set as missed. Those are expected from when their tenant's
// expectations were written (the modification time of the file that
// keeps them), or from now when that is not known.
func (x *expectations) arm() {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.clock.Now()
	since := now
	if !x.restored.IsZero() && x.restored.Before(since) {
		since = x.restored
	}
	x.armed = true
	for tenant, set := range x.sets {
		for _, step := range x.armSteps(tenant, set, since, now) {
			x.ev.Set(tenant, step.set, step.since)
		}
	}
	x.ev.RestoreFlaps(x.snapFlaps)
	x.ev.RestoreJobs(x.snapJobs)
	x.snapFlaps, x.snapJobs = nil, nil
	x.checked.Store(since.UnixNano())
}

// armStep is one Set of arm: set from since.
type armStep struct {
	set   *expect.Set
	since time.Time
}

// armSteps are the Sets that put tenant's set in force from the right
// times: those in force at the snapshot from since, then, with them,
// those written since (the tenant's own) from when they were written,
// then the whole set from now. The evaluator keeps the state of a job
// whose expectation a later Set does not change, so each job is armed
// once, by the first step that holds it.
func (x *expectations) armSteps(tenant string, set *expect.Set, since, now time.Time) []armStep {
	if x.snapTiming == nil || !since.Before(now) {
		return []armStep{{set, since}} // no snapshot, or one of a version that kept no sets
	}
	kept := x.snapTiming[tenant]
	own, _ := expect.Parse("expectations", x.srcs[tenant])
	var before, written []expect.Expectation
	for _, e := range set.Expectations() {
		if fp, ok := kept[e.Job]; ok && fp == timing(e) {
			before = append(before, e)
			written = append(written, e)
		} else if own != nil {
			if _, ok := own.Lookup(e.Job); ok {
				written = append(written, e)
			}
		}
	}
	var steps []armStep
	add := func(exps []expect.Expectation, at time.Time) {
		s, err := expect.NewSet(exps)
		if err != nil {
			return // a part of a valid set is valid; should it not be, the next step arms it
		}
		steps = append(steps, armStep{s, at})
	}
	add(before, since)
	if at := x.writtenAt(tenant); len(written) > len(before) && at.After(since) && at.Before(now) {
		add(written, at)
	}
	return append(steps, armStep{set, now})
}

// timing is what of an expectation says when its runs are expected: a
// change of any of it expects the job's runs anew (expect.Evaluator.Set).
func timing(e expect.Expectation) string {
	return fmt.Sprintf("%q %q %d %d", e.Schedule, e.Timezone, e.Every, e.Grace)
}

// writtenAt is when tenant's own expectations were last written: the
// modification time of its file, or of its file in the store of those
// set through the API; zero if not known.
func (x *expectations) writtenAt(tenant string) time.Time {
	name := ""
	if tenant == "" && x.path != "" {
		name = x.path
	} else if f, ok := x.saved.(interface{ TenantPath(string) string }); ok {
		name = f.TenantPath(tenant)
	}
	if name == "" {
		return time.Time{}
	}
	fi, err := os.Stat(name)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// writeState and readState are the expectations' section of a snapshot:
// up to when they were judged.
func (x *expectations) writeState(w io.Writer) error {
	return binary.Write(w, binary.LittleEndian, x.checked.Load())
}

func (x *expectations) readState(r io.Reader) error {
	var ns int64
	if err := binary.Read(r, binary.LittleEndian, &ns); err != nil {
		return fmt.Errorf("expectations: %w", err)
	}
	if ns > 0 {
		x.restored = time.Unix(0, ns)
	}
	return nil
}

// writeTiming and readTiming are the snapshot's section of the
// expectations in force when it was taken (each tenant's jobs and when
// their runs are expected, as timing says), so that a restart judges from
// the snapshot only those (arm). A snapshot without it (an older
// version) judges every expectation from then, as that version did.
func (x *expectations) writeTiming(w io.Writer) error {
	x.mu.Lock()
	m := make(map[string]map[string]string, len(x.sets))
	for tenant, set := range x.sets {
		jobs := make(map[string]string, set.Len())
		for _, e := range set.Expectations() {
			jobs[e.Job] = timing(e)
		}
		m[tenant] = jobs
	}
	x.mu.Unlock()
	return json.NewEncoder(w).Encode(m)
}

func (x *expectations) readTiming(r io.Reader) error {
	m := map[string]map[string]string{}
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return fmt.Errorf("expectations in force: %w", err)
	}
	x.snapTiming = m
	return nil
}

// runMark names a finding on a run: its tenant, its ID, the finding's
// kind (as the mark's record names it).
type runMark struct{ tenant, taskID, kind string }

// jobRef names a tenant's job.
type jobRef struct{ tenant, job string }

// replayedFlap is what the replay saw of a job's flapping: the latest
// flapping found, and when its latest flapping mark was written (Unix ms).
type replayedFlap struct {
	found    *expect.Event
	markedMs int64
}

// replayedFlap returns the job's entry in flaps, made if need be; x.mu is
// held.
func (x *expectations) replayedFlap(tenant, job string) *replayedFlap {
	if x.flaps == nil {
		x.flaps = map[jobRef]*replayedFlap{}
	}
	f := x.flaps[jobRef{tenant, job}]
	if f == nil {
		f = &replayedFlap{}
		x.flaps[jobRef{tenant, job}] = f
	}
	return f
}

// marked is the mark of a finding on its run (c), applied: live, the
// finding is no longer pending; replayed, what it marks was acted on.
func (x *expectations) marked(c *apollo.Change) {
	t, k := &c.Task, c.Record.Kind
	mark := runMark{t.Tenant, t.TaskID, k.String()}
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.live.Load():
		delete(x.pending, mark)
	case k == apollo.KindFlapping:
		f := x.replayedFlap(t.Tenant, t.Name)
		f.markedMs = max(f.markedMs, c.Record.Ts)
	default:
		delete(x.unmarked, mark)
	}
}

// pendLocked keeps ev among the pending findings if it is marked on its
// run; x.mu is held.
func (x *expectations) pendLocked(ev expect.Event) {
	if !marksRun(ev) {
		return
	}
	if x.pending == nil {
		x.pending = map[runMark]expect.Event{}
	}
	x.pending[runMark{ev.Tenant, ev.TaskID, ev.Kind.String()}] = ev
}

// unpend forgets ev among the pending findings.
func (x *expectations) unpend(ev expect.Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.pending, runMark{ev.Tenant, ev.TaskID, ev.Kind.String()})
}

// foundState is the snapshot's section of what the evaluator found and
// counted that the log after the snapshot does not give again: the
// findings not yet marked on their runs, each job's flapping state, and
// the rest of what it knows of each job (its latest start, whether it is
// down, the starts max_runs counts, the runs it watches for max_runtime).
// A snapshot without it (an older version) restores none of them, and one
// without jobs (of the version before) restores no job's state.
type foundState struct {
	Pending []expect.Event     `json:"pending,omitempty"`
	Flaps   []expect.FlapState `json:"flaps,omitempty"`
	Jobs    []expect.JobState  `json:"jobs,omitempty"`
}

// writeFound writes the section. Inside the checkpoint's pause every
// change up to the copy has been applied, so the pending findings and
// the jobs' states are those of the runs and marks in the copy.
func (x *expectations) writeFound(w io.Writer) error {
	st := foundState{Flaps: x.ev.FlapStates(), Jobs: x.ev.JobStates()}
	x.mu.Lock()
	for _, ev := range x.pending {
		st.Pending = append(st.Pending, ev)
	}
	x.mu.Unlock()
	return json.NewEncoder(w).Encode(st)
}

// readFound reads the section: the pending findings are acted on after
// the replay (start) unless the log after the snapshot holds their marks,
// as the replay's own findings are; the flapping state and the jobs'
// states go back into the evaluator once it has its expectations (arm).
func (x *expectations) readFound(r io.Reader) error {
	var st struct {
		Pending []json.RawMessage  `json:"pending"`
		Flaps   []expect.FlapState `json:"flaps"`
		Jobs    []json.RawMessage  `json:"jobs"`
	}
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("expectations found: %w", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.snapFlaps = st.Flaps
	x.snapJobs = nil
	for _, raw := range st.Jobs {
		var js expect.JobState
		if err := json.Unmarshal(raw, &js); err != nil {
			// A state of a later version this one cannot read (a problem it
			// does not know): the rest still restores.
			x.log.Warn("a job's state kept in the snapshot is not restored", "job", string(raw), "err", err)
			continue
		}
		x.snapJobs = append(x.snapJobs, js)
	}
	for _, raw := range st.Pending {
		var ev expect.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			// A kind of a later version: the rest still restores.
			x.log.Warn("a finding not yet marked, kept in the snapshot, is not acted on", "finding", string(raw), "err", err)
			continue
		}
		x.unactedLocked(ev)
	}
	return nil
}

// unactedLocked keeps ev, found before the process started (by the
// replay, or pending in the snapshot), for start to act on unless the
// replay meets its mark; x.mu is held.
func (x *expectations) unactedLocked(ev expect.Event) {
	switch ev.Kind {
	case expect.KindFlapping:
		if f := x.replayedFlap(ev.Tenant, ev.Job); f.found == nil || ev.Slot.After(f.found.Slot) {
			f.found = &ev
		}
	case expect.KindTooShort, expect.KindTooOften:
		if x.unmarked == nil {
			x.unmarked = map[runMark]expect.Event{}
		}
		x.unmarked[runMark{ev.Tenant, ev.TaskID, ev.Kind.String()}] = ev
	}
}
