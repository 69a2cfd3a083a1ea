//go:build race

package cluster

// raceEnabled: the race detector slows everything several times; timing
// bounds allow for it.
const raceEnabled = true
