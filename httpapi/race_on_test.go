//go:build race

package httpapi

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so tests of buffer reuse cannot measure it.
const raceEnabled = true
