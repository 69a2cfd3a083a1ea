//go:build race

package testwait

// raceFactor: the race detector makes code 2–20 times slower.
const raceFactor = 3
