//go:build unix

package agent

import (
	"fmt"
	"os"

	"github.com/apollo-11/apollo/internal/flock"
)

// lockSpoolDir takes the lock that keeps one process at a time in a spool
// directory: a flock of the directory itself, so that no file of ours
// sits among the spool files. It is held until f is closed, and goes with
// the process: one killed with kill -9 frees the directory for the next.
// locked is false when another process holds it.
func lockSpoolDir(dir string) (f *os.File, locked bool, err error) {
	f, err = os.Open(dir)
	if err != nil {
		return nil, false, fmt.Errorf("agent: spool: %w", err)
	}
	if locked, err = flock.TryLock(f); !locked {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("agent: spool: locking %s: %w", dir, err)
		}
		return nil, false, nil
	}
	return f, true, nil
}

// unlockSpoolDir frees the spool directory for the next process
// (flock.Release says why it unlocks before it closes).
func unlockSpoolDir(f *os.File) { flock.Release(f) }
