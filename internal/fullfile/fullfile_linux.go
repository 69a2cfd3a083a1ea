// Package fullfile lets a test meet a full disk without one: under a file
// size limit (RLIMIT_FSIZE) a write puts down the bytes that fit and
// fails (EFBIG), as a write to a full disk does (ENOSPC).
package fullfile

import (
	"syscall"
	"testing"
)

// Limit runs f with every file of the process limited to size bytes, and
// returns once the limit is lifted again. The limit holds for the whole
// process: a test that uses it must not run in parallel with others. It
// skips the test where the limit cannot be set.
func Limit(t testing.TB, size uint64, f func()) {
	t.Helper()
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	full := was
	full.Cur = size
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}
