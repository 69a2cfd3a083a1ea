//go:build !unix

package agent

import "os"

// lockSpoolDir has no lock to take here: only Clients of one process are
// kept apart (spoolDirs).
func lockSpoolDir(string) (*os.File, bool, error) { return nil, true, nil }

func unlockSpoolDir(f *os.File) { f.Close() }
