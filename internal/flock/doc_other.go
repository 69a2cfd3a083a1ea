//go:build !unix

// Package flock takes advisory locks that go with the process. Outside
// Unix it has none: its users keep apart the Clients of one process only.
package flock
