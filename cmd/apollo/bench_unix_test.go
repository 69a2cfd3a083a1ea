//go:build unix

package main

import (
	"syscall"
	"testing"
)

// minorFaults is the process's count of minor page faults so far.
func minorFaults(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Minflt
}
