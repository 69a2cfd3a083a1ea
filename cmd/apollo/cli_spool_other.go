//go:build !unix

package main

import (
	"errors"
	"time"
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

type strandedSpool struct {
	dir    string
	files  int
	newest time.Time
}

func strandedSpools(string, string) []strandedSpool { return nil }

func readSpool(string, string) ([]spoolPart, error) {
	return nil, errors.New("spool: needs a Unix system (file locks)")
}

func eachFreeSlot(string, func(string) error, *spoolSent) error {
	return errors.New("spool: needs a Unix system (file locks)")
}
