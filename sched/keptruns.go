package sched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	apollo "github.com/apollo-11/apollo"
)

// A stopped scheduler's state file may keep runs in progress: runs a
// killed scheduler lost and no start has settled yet, and the runs kept
// for a scheduler with another Owner (keepOthersLocked), which only a
// start with that Owner settles. When that token is gone, nothing ever
// will: KeptRuns lists them and DropKeptRuns takes them out
// (apollo sched lost), so that no one edits the file by hand.

// KeptRun is a run in progress that a stopped scheduler's state file keeps.
type KeptRun struct {
	Task    string
	Job     string
	Attempt int
	// Started: its process had started; the run is reported failed and
	// lost when it is settled, skipped otherwise.
	Started bool
	// Owner is Options.Owner of the scheduler that reported it; "" any.
	Owner string
}

// KeptRuns lists, by task ID, the runs in progress that the state file in
// dir keeps. It holds the directory's lock meanwhile: while a scheduler
// runs on dir it is refused (apollo.ECONFLICT), as the runs in its file
// are its own and in progress, not lost.
func KeptRuns(dir string) ([]KeptRun, error) {
	var out []KeptRun
	err := withStoppedState(dir, func(f *stateFile, st *savedState) (bool, error) {
		for id, sr := range st.Runs {
			out = append(out, keptRun(id, sr))
		}
		return false, nil
	})
	slices.SortFunc(out, func(a, b KeptRun) int { return strings.Compare(a.Task, b.Task) })
	return out, err
}

// DropKeptRuns takes the runs of tasks out of the state file in dir, so
// that no start settles them, and returns them. Every task must be there:
// otherwise nothing changes, and the error names those that are not. It
// is refused while a scheduler runs on dir, as KeptRuns is.
func DropKeptRuns(dir string, tasks []string) ([]KeptRun, error) {
	var dropped []KeptRun
	err := withStoppedState(dir, func(f *stateFile, st *savedState) (bool, error) {
		var missing []string
		for _, id := range tasks {
			if _, ok := st.Runs[id]; !ok && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return false, &apollo.Error{Code: apollo.ENOTFOUND,
				Message: fmt.Sprintf("sched: %s keeps no run of %s; nothing was dropped", f.path(), strings.Join(quoteAll(missing), ", ")),
				Hint:    "name task IDs as apollo sched lost lists them"}
		}
		for _, id := range tasks {
			if sr, ok := st.Runs[id]; ok {
				dropped = append(dropped, keptRun(id, sr))
				delete(st.Runs, id)
			}
		}
		return len(dropped) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	return dropped, nil
}

func keptRun(id string, sr savedRun) KeptRun {
	return KeptRun{Task: id, Job: sr.Job, Attempt: sr.Attempt, Started: sr.Started, Owner: sr.Owner}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// withStoppedState runs fn on the state file in dir, holding the
// directory's lock, and saves what fn changed when it says so. A dir that
// does not exist is an error, not made: a mistyped --state would
// otherwise list nothing, as if all were well.
func withStoppedState(dir string, fn func(f *stateFile, st *savedState) (changed bool, err error)) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: fmt.Sprintf("sched: no state directory %s", dir),
			Hint: "name the directory the scheduler was started with (apollo sched --state; DATA/sched for apollo server --jobs)"}
	case err != nil:
		return fmt.Errorf("sched: state directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("sched: state directory %s is not a directory", dir)
	}
	lock, busy, err := lockStateDir(dir)
	switch {
	case busy:
		return &apollo.Error{Code: apollo.ECONFLICT,
			Message: fmt.Sprintf("sched: state directory %s is in use by a running scheduler: the runs in its file are in progress, not lost", dir),
			Hint:    "stop that scheduler first; a run it cannot settle is logged at its start, with its task ID"}
	case err != nil:
		return fmt.Errorf("sched: lock state directory %s: %w", dir, err)
	}
	defer unlockStateDir(lock)
	f := &stateFile{dir: dir}
	st, err := f.load()
	if err != nil {
		return &StateError{Err: err}
	}
	changed, err := fn(f, &st)
	if err != nil || !changed {
		return err
	}
	if err := checkStateOwner(f); err != nil {
		return err
	}
	return f.save(st)
}
