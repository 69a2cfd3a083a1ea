// Package bench holds Apollo-11's side-by-side benchmarks: the same load
// against Apollo-11 and against a baseline or a peer, in one run, reported
// as ratios. It is its own module so that heavy tools (peers, drivers) stay
// out of the main go.mod. See README.md.
package bench
