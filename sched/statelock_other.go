//go:build !unix

package sched

import "os"

// lockStateDir has no lock to take here: run one scheduler per state
// directory.
func lockStateDir(string) (*os.File, bool, error) { return nil, false, nil }

func unlockStateDir(f *os.File) {
	if f != nil {
		f.Close()
	}
}
