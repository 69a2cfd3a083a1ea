//go:build !unix

package prefault

import "testing"

// minorFaults: elsewhere than Unix the process's faults are not counted
// here, and the tests that compare them skip.
func minorFaults(t *testing.T) int64 {
	t.Skip("counts page faults with getrusage, a Unix call")
	return 0
}
