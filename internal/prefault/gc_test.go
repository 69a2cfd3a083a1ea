package prefault

import "runtime/debug"

// debugGC sets the collector's percent and returns what restores it.
func debugGC(percent int) func() {
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}
