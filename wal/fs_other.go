//go:build !unix

package wal

// lockDir is a no-op where flock is unavailable; run one process per data
// directory there.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }

// syncDir is a no-op where directories cannot be opened for fsync.
func syncDir(string) error { return nil }
