//go:build !unix

package main

// fileLimit: see connlimits_unix.go; unknown here.
func fileLimit() int { return 0 }
