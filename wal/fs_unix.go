//go:build unix

package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on Dir/LOCK so that two processes (or
// two Opens in one process) never write the same log. The kernel drops the
// lock when the process dies, so a crash never leaves it stale.
func lockDir(dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wal: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("wal: %s is in use by another open log (stop the other apollo process or use another data dir)", dir)
		}
		return nil, fmt.Errorf("wal: lock %s: %w", path, err)
	}
	// Unlock explicitly before closing: a child forked at that moment (the
	// server runs jobs) holds a copy of the descriptor until its exec, and
	// the lock belongs to the shared open file, so closing ours alone would
	// leave the log locked for that instant.
	return func() error {
		uerr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return errors.Join(uerr, f.Close())
	}, nil
}

// syncDir makes entries created, renamed or removed in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
