//go:build unix

package sched

import (
	"os"

	"github.com/apollo-11/apollo/internal/flock"
)

// lockStateDir takes the lock that keeps one scheduler at a time on a
// state directory: a flock of the directory itself, held until f is
// closed, and gone with the process (a scheduler killed with kill -9
// frees it for the next). busy is true when another scheduler holds it.
func lockStateDir(dir string) (f *os.File, busy bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	if f, err = os.Open(dir); err != nil {
		return nil, false, err
	}
	locked, err := flock.TryLock(f)
	if !locked {
		f.Close()
		return nil, err == nil, err
	}
	return f, false, nil
}

// unlockStateDir frees the state directory for the next scheduler
// (flock.Release says why it unlocks before it closes).
func unlockStateDir(f *os.File) { flock.Release(f) }
