//go:build unix

package main

import "syscall"

// fileLimit is how many files the process may open (its soft
// RLIMIT_NOFILE, which Go raises to the hard one at start); 0: unknown.
func fileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
