package sched

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// stateFileName is the scheduler's file in Options.StateDir.
const stateFileName = "sched-state.json"

// stateFile keeps the last handled tick of every scheduled job, so that a
// restarted scheduler knows which schedules it missed, and the pauses
// made with Pause and Resume, so that they outlive the process.
type stateFile struct{ dir string }

type savedState struct {
	Version int                 `json:"version"`
	Jobs    map[string]savedJob `json:"jobs"`
}

type savedJob struct {
	LastTick time.Time `json:"lastTick,omitzero"`
	// Paused is whether the job was paused, and FilePaused the jobs
	// file's paused field then: a file whose field has changed since
	// wins over Pause and Resume, as it does at a reload.
	Paused     bool `json:"paused,omitempty"`
	FilePaused bool `json:"filePaused,omitempty"`
}

func (f *stateFile) path() string { return filepath.Join(f.dir, stateFileName) }

// load returns the saved jobs; a missing file is a first start.
func (f *stateFile) load() (map[string]savedJob, error) {
	b, err := os.ReadFile(f.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sched: read state: %w", err)
	}
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("sched: decode state %s: %w", f.path(), err)
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("sched: state %s has version %d, want 1", f.path(), st.Version)
	}
	return st.Jobs, nil
}

// save writes the jobs atomically: a temporary file in the same directory,
// synced, then renamed over the old one, then the directory synced; a crash
// leaves either the old state or the new one.
func (f *stateFile) save(jobs map[string]savedJob) error {
	b, err := json.MarshalIndent(savedState{Version: 1, Jobs: jobs}, "", "  ")
	if err != nil {
		return fmt.Errorf("sched: encode state: %w", err)
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("sched: state dir: %w", err)
	}
	tmp, err := os.CreateTemp(f.dir, stateFileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("sched: write state: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("sched: write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sched: sync state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("sched: write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path()); err != nil {
		return fmt.Errorf("sched: replace state: %w", err)
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("sched: sync state dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sched: sync state dir: %w", err)
	}
	return nil
}

// loadState reads the state file; a broken one is logged and ignored, since
// refusing to start every job over it would be worse than one missed
// catch-up (or a pause to make again). s.mu is held.
func (s *Scheduler) loadState() map[string]savedJob {
	if s.state == nil {
		return nil
	}
	jobs, err := s.state.load()
	if err != nil {
		s.nStateErrors.Add(1)
		s.log.Error("sched: state file unusable; missed schedules are not caught up and pauses are lost", "err", err)
	}
	return jobs
}

// stateLocked is what the state file keeps of every job now. s.mu is held.
func (s *Scheduler) stateLocked() map[string]savedJob {
	m := make(map[string]savedJob, len(s.jobs))
	for name, js := range s.jobs {
		sj := savedJob{Paused: js.paused, FilePaused: js.j.paused}
		if js.j.sched != nil {
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
// never replaces a newer one.
func (s *Scheduler) persist() error {
	if s.state == nil {
		return nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	jobs := s.stateLocked()
	s.mu.Unlock()
	if err := s.state.save(jobs); err != nil {
		s.nStateErrors.Add(1)
		return err
	}
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
