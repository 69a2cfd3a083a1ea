package sched

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// stateFileName is the scheduler's file in Options.StateDir.
const stateFileName = "sched-state.json"

// stateFile keeps the last handled tick of every scheduled job, so that a
// restarted scheduler knows which schedules it missed; the pauses made
// with Pause and Resume, so that they outlive the process; and the runs in
// progress, so that a scheduler that lost them (kill -9, a crash, a power
// cut) settles them when it starts again.
//
// It is written only when what it keeps changes: sum is the hash of what
// it holds, as read or last written. Before, every tick of a paused job
// wrote it (an fsync and a rename each), as did a start, a reload or a
// pause that changed nothing (TestIdleSchedulerDoesNotWriteItsState).
type stateFile struct {
	dir string

	mu  sync.Mutex
	sum [sha256.Size]byte // of the file's bytes, when known
	has bool              // sum is known
}

// unchanged reports whether b is what the file holds already.
func (f *stateFile) unchanged(b []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.has && f.sum == sha256.Sum256(b)
}

// holds records that the file holds b (has false: it is not known).
func (f *stateFile) holds(b []byte, has bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum, f.has = sha256.Sum256(b), has
}

type savedState struct {
	Version int                 `json:"version"`
	Jobs    map[string]savedJob `json:"jobs"`
	// Runs are the tasks in progress, by task ID, written before each of a
	// task's events but its last, so that the restarted scheduler's
	// settling event takes the last one's sequence: if the real end
	// reached the server, the settling event is a duplicate.
	Runs map[string]savedRun `json:"runs,omitempty"`
}

type savedJob struct {
	LastTick time.Time `json:"lastTick,omitzero"`
	// Paused is whether the job was paused, and FilePaused the jobs
	// file's paused field then: a file whose field has changed since
	// wins over Pause and Resume, as it does at a reload.
	Paused     bool `json:"paused,omitempty"`
	FilePaused bool `json:"filePaused,omitempty"`
}

// savedRun is a task in progress: what it takes to settle it.
type savedRun struct {
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	// Seq is the sequence of the task's last event: one past every event
	// that may have been sent for it.
	Seq int64 `json:"seq"`
	// Started: its process started (and running may have been sent).
	// Group is its process group, and Leader names the group's first
	// process (processIdentity), so that a later scheduler kills the group
	// only while that process is still the one with that ID.
	Started bool   `json:"started,omitempty"`
	Group   int    `json:"group,omitempty"`
	Leader  string `json:"leader,omitempty"`
	// Owner is Options.Owner of the scheduler that reported the run: only
	// a scheduler with the same one settles it ("" : any).
	Owner string `json:"owner,omitempty"`
	// Killed: a scheduler of another Owner killed what was left of the
	// run's processes (keepOthersLocked).
	Killed bool `json:"killed,omitempty"`
}

func (f *stateFile) path() string { return filepath.Join(f.dir, stateFileName) }

// maxStateBytes bounds the state file, at a write and at a read. It
// keeps a line of a few hundred bytes for each job (a name of at most 200
// bytes, a time, the pauses) and for each run in progress: 10 000 jobs
// take about 2 MiB, and 64 MiB is room for 200 000 jobs with a run of
// each going. A save past it fails (counted and logged as any failed
// save; the file keeps the last state that fitted), so the scheduler
// never writes a file it would refuse at its next start; a larger file
// was replaced or damaged, and reading it whole would fill memory before
// the start could say which file is wrong.
const maxStateBytes = 64 << 20

// load returns the saved state; a missing file is a first start.
func (f *stateFile) load() (savedState, error) {
	b, err := sourcefile.ReadOwn(f.path(), "scheduler state file", maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return savedState{}, nil
	}
	if err != nil {
		return savedState{}, fmt.Errorf("sched: read state: %w", err)
	}
	f.holds(b, true)
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil {
		return savedState{}, fmt.Errorf("sched: decode state %s: %w", f.path(), err)
	}
	if st.Version != 1 {
		return savedState{}, fmt.Errorf("sched: state %s has version %d, want 1", f.path(), st.Version)
	}
	return st, nil
}

// save writes the jobs atomically: a temporary file in the same directory,
// synced, then renamed over the old one, then the directory synced; a crash
// leaves either the old state or the new one.
func (f *stateFile) save(st savedState) error {
	st.Version = 1
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("sched: encode state: %w", err)
	}
	if len(b)+1 > maxStateBytes {
		return fmt.Errorf("sched: write state: %d bytes, over the %d MiB the file may hold: it keeps the last state that fitted", len(b)+1, maxStateBytes>>20)
	}
	b = append(b, '\n')
	if f.unchanged(b) {
		return nil
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("sched: state dir: %w", err)
	}
	if err := atomicfile.Write(f.path(), b, 0o600); err != nil {
		f.holds(nil, false) // the old file, the new one or none: write the next one whatever it holds
		return fmt.Errorf("sched: write state: %w", err)
	}
	f.holds(b, true)
	return nil
}

// loadState reads the state file. Each write replaces it whole, so one
// that does not read was changed from outside: a copy cut short, a damaged
// disk, an edit. Going on without it would run the jobs paused at run
// time on their schedules again and leave the runs of a killed scheduler
// unsettled, and the next write would replace it: the pauses would be
// gone for good. It is an error that says what to do. s.mu is held, or s
// is not shared yet.
func (s *Scheduler) loadState() (savedState, error) {
	if s.state == nil {
		return savedState{}, nil
	}
	st, err := s.state.load()
	if err != nil {
		s.nStateErrors.Add(1)
		return savedState{}, &StateError{Err: err}
	}
	return st, nil
}

// StateError says that the state file does not read, and what to do.
type StateError struct{ Err error }

func (e *StateError) Error() string {
	if errors.Is(e.Err, fs.ErrPermission) {
		return e.Err.Error() // the file is fine: its owner is not (chown)
	}
	return e.Err.Error() + ": restore it from a backup, or move it away to start without what it kept " +
		"(the pauses made at run time: those jobs run on their schedules again; the catch-up of missed schedules; " +
		"the settling of the runs a killed scheduler left)"
}

func (e *StateError) Unwrap() error { return e.Err }

// stateLocked is what the state file keeps now. s.mu is held.
func (s *Scheduler) stateLocked() savedState {
	st := savedState{Jobs: s.jobsStateLocked()}
	if len(s.live)+len(s.others) > 0 {
		st.Runs = make(map[string]savedRun, len(s.live)+len(s.others))
		maps.Copy(st.Runs, s.others)
		for _, lr := range s.live {
			st.Runs[lr.task] = lr.savedRun
		}
	}
	return st
}

// jobsStateLocked is what the state file keeps of every job now. s.mu is
// held.
func (s *Scheduler) jobsStateLocked() map[string]savedJob {
	m := make(map[string]savedJob, len(s.jobs))
	for name, js := range s.jobs {
		sj := savedJob{Paused: js.paused, FilePaused: js.j.paused}
		if js.j.sched != nil && !js.paused {
			// A paused job catches nothing up, at a start either (its
			// LastTick zero): its ticks, which pass while it is paused,
			// do not change the file.
			sj.LastTick = js.lastTick.UTC()
		}
		if sj != (savedJob{}) {
			m[name] = sj
		}
	}
	return m
}

// persist writes the state file with what the scheduler holds now. Writes
// are serialized and each takes its copy under saveMu, so an older copy
// never replaces a newer one. A call whose change a write that began after
// it has already saved returns at once: runs that start together (each
// saves twice) wait for one fsync, not one each.
func (s *Scheduler) persist() error {
	if s.state == nil {
		return nil
	}
	s.mu.Lock()
	s.saveGen++
	want := s.saveGen
	s.mu.Unlock()
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.savedGen >= want {
		return nil
	}
	s.mu.Lock()
	st, covers := s.stateLocked(), s.saveGen
	s.mu.Unlock()
	if err := s.state.save(st); err != nil {
		s.nStateErrors.Add(1)
		return err
	}
	s.savedGen = covers
	return nil
}

// saveState persists for the loop: failures are logged (rate-limited) and
// counted, and the jobs run on.
func (s *Scheduler) saveState() {
	if err := s.persist(); err != nil {
		if ok, suppressed := s.stateLog.Allow("", s.clock.Now()); ok {
			s.log.Error("sched: saving state failed", "err", err, "suppressed", suppressed)
		}
	}
}

// lockState keeps other schedulers off the state directory until Stop:
// two would run every job twice, write over each other's state, and
// each settle the other's runs as lost (killing their processes) at its
// next start. A directory that cannot be locked for another reason is
// logged, as a state file that cannot be read is: the jobs run on.
func (s *Scheduler) lockState() error {
	if s.state == nil {
		return nil
	}
	f, busy, err := lockStateDir(s.state.dir)
	switch {
	case busy:
		return &apollo.Error{Code: apollo.ECONFLICT,
			Message: fmt.Sprintf("sched: state directory %s is in use by another scheduler, which runs the jobs of its own jobs file", s.state.dir),
			Hint:    "give each scheduler its own state directory (apollo sched --state, apollo server --data), or stop the other one"}
	case err != nil:
		s.nStateErrors.Add(1)
		s.log.Error("sched: state directory not locked; make sure no other scheduler uses it", "dir", s.state.dir, "err", err)
	}
	s.stateLock = f
	if f != nil {
		s.removeLeftovers()
	}
	return nil
}

// removeLeftovers removes the temporary files that a scheduler killed in
// the middle of a state write left: the file is replaced whole, and each
// such kill left one more for good. Only the holder of the directory's
// lock may: another's write in progress would lose its file.
func (s *Scheduler) removeLeftovers() {
	removed, err := atomicfile.RemoveLeftovers(s.state.dir)
	if err != nil {
		s.log.Warn("sched: could not remove the temporary files a killed scheduler left; remove them by hand", "dir", s.state.dir, "err", err)
	}
	if len(removed) > 0 {
		s.log.Info("sched: removed the temporary files a killed scheduler left", "files", removed)
	}
}
