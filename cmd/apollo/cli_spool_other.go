//go:build !unix

package main

import (
	"errors"
)

// spoolLease: see cli_spool_unix.go. Without flock two processes could
// share a spool directory, which the agent forbids, so there is no spool.
type spoolLease struct {
	dir       string
	orphans   []string
	inherited bool
}

func leaseSpool(string) (*spoolLease, error) {
	return nil, errors.New("spool: needs a Unix system (file locks)")
}

func (*spoolLease) release() {}

func (*spoolLease) releaseSlot(string) {}

func readSpool(string, string, bool) ([]spoolPart, error) {
	return nil, errors.New("spool: needs a Unix system (file locks)")
}

func eachFreeSlot(string, func(string) error, *spoolSent) error {
	return errors.New("spool: needs a Unix system (file locks)")
}
