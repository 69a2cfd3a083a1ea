//go:build unix

// Package flock takes advisory locks that go with the process: one killed
// with kill -9 frees what it held. The agent's spool directories and
// apollo exec's spool slots are kept to one process each with them.
package flock

import (
	"errors"
	"os"
	"syscall"
)

// TryLock takes an exclusive lock on f without waiting, held until
// Release. It returns false, and no error, when another open file holds
// it.
func TryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// Release unlocks f, then closes it. Closing alone is not enough: the lock
// belongs to the open file, and a process forked meanwhile (by any
// goroutine: a run starting) holds a copy of every descriptor until its
// exec, so the lock outlived the close for that while, and the next
// process refused to start as if the directory were in use.
func Release(f *os.File) error {
	uerr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return errors.Join(uerr, f.Close())
}
