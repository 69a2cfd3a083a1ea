//go:build race

package tui

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, and the instrumentation allocates: the tests that
// count what a draw allocates cannot measure it (renderAlloc).
const raceEnabled = true
