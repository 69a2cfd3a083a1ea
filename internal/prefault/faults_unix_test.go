//go:build unix

package prefault

import (
	"syscall"
	"testing"
)

// minorFaults is the page faults of the process so far that the kernel
// met without reading the disk.
func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}
