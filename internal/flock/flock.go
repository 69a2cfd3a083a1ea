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

// TryLock takes an exclusive lock on f without waiting, held until f is
// closed. It returns false, and no error, when another open file holds it.
func TryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
