//go:build race

package prefault

// raceEnabled: the race detector shadows every page of the heap, and its
// shadow pages fault on first touch whatever Heap did.
const raceEnabled = true
