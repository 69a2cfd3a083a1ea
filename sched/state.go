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
// restarted scheduler knows which schedules it missed.
type stateFile struct{ dir string }

type savedState struct {
	Version int                 `json:"version"`
	Jobs    map[string]savedJob `json:"jobs"`
}

type savedJob struct {
	LastTick time.Time `json:"lastTick"`
}

func (f *stateFile) path() string { return filepath.Join(f.dir, stateFileName) }

// load returns the saved ticks; a missing file is a first start.
func (f *stateFile) load() (map[string]time.Time, error) {
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
	ticks := make(map[string]time.Time, len(st.Jobs))
	for name, j := range st.Jobs {
		ticks[name] = j.LastTick
	}
	return ticks, nil
}

// save writes the ticks atomically: a temporary file in the same directory,
// synced, then renamed over the old one, then the directory synced; a crash
// leaves either the old state or the new one.
func (f *stateFile) save(ticks map[string]time.Time) error {
	st := savedState{Version: 1, Jobs: make(map[string]savedJob, len(ticks))}
	for name, t := range ticks {
		st.Jobs[name] = savedJob{LastTick: t.UTC()}
	}
	b, err := json.MarshalIndent(st, "", "  ")
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
// catch-up. s.mu is held.
func (s *Scheduler) loadState() map[string]time.Time {
	if s.state == nil {
		return nil
	}
	ticks, err := s.state.load()
	if err != nil {
		s.nStateErrors.Add(1)
		s.log.Error("sched: state file unusable; missed schedules are not caught up", "err", err)
	}
	return ticks
}

// saveState writes the ticks; failures are logged (rate-limited) and
// counted: the jobs run on.
func (s *Scheduler) saveState(ticks map[string]time.Time) {
	if s.state == nil {
		return
	}
	if err := s.state.save(ticks); err != nil {
		s.nStateErrors.Add(1)
		if ok, suppressed := s.stateLog.allow(s.clock.Now()); ok {
			s.log.Error("sched: saving state failed", "err", err, "suppressed", suppressed)
		}
	}
}
