//go:build unix

package flock

import (
	"os"
	"path/filepath"
	"testing"
)

// One open file holds the lock; another is refused without an error until
// the first is closed.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if ok, err := TryLock(a); !ok || err != nil {
		t.Fatalf("first TryLock = %v, %v; want it taken", ok, err)
	}
	if ok, err := TryLock(b); ok || err != nil {
		t.Fatalf("second TryLock while the first holds = %v, %v; want false, no error", ok, err)
	}
	a.Close()
	if ok, err := TryLock(b); !ok || err != nil {
		t.Fatalf("TryLock after the holder closed = %v, %v; want it taken", ok, err)
	}
}
