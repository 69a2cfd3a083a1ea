package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write replaces the content whole, keeps an existing file's permissions,
// gives a new one perm, and leaves no temporary file behind.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Write(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if err != nil || string(b) != "second" || fi.Mode().Perm() != 0o640 {
		t.Errorf("after two writes: %q %v, mode %v; want second, mode 0640", b, err, fi.Mode().Perm())
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("%d files in the directory, want only the one written", len(es))
	}
	if err := Write(filepath.Join(dir, "no", "such", "dir"), nil, 0o600); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}
