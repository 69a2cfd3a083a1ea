package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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

// A link is written through: the file it points to gets the content, the
// link stays (a ConfigMap's key is a link, and its updates swap what the
// link leads to), and the temporary file is made beside the target.
func TestWriteThroughALink(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(data, "rules.txt")
	if err := os.WriteFile(target, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "rules.txt")
	if err := os.Symlink(filepath.Join("..data", "rules.txt"), link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("after the write the link is %v (%v), want still a link", fi.Mode(), err)
	}
	b, err := os.ReadFile(target)
	tfi, _ := os.Stat(target)
	if err != nil || string(b) != "new" || tfi.Mode().Perm() != 0o640 {
		t.Errorf("the target holds %q (%v), mode %v; want new, mode 0640", b, err, tfi.Mode().Perm())
	}
	if es, _ := os.ReadDir(data); len(es) != 1 {
		t.Errorf("%d files beside the target, want only it", len(es))
	}
}

func TestNotWritable(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"read-only mount": {&os.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, true},
		"no permission":   {&os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.EACCES}, true},
		"not permitted":   {fmt.Errorf("write: %w", syscall.EPERM), true},
		"disk full":       {&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, false},
		"nil":             {nil, false},
	} {
		if got := NotWritable(tc.err); got != tc.want {
			t.Errorf("%s: NotWritable(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

// RemoveLeftovers removes the temporary files Write makes, as a process
// killed mid-write leaves them, and nothing else.
func TestRemoveLeftovers(t *testing.T) {
	dir := t.TempDir()
	f, err := os.CreateTemp(dir, ".state.json"+tempSuffix+"*") // as Write makes it
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	kept := []string{"state.json", ".state.json.tmp", "state.json.tmp1", ".tmp1", ".state.json.tmp1a", ".state.json.tmp-1"}
	for _, name := range kept {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".sub.json.tmp2"), 0o700); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, ".sub.json.tmp2")
	removed, err := RemoveLeftovers(dir)
	if err != nil || len(removed) != 1 || removed[0] != f.Name() {
		t.Errorf("RemoveLeftovers: %v, %v; want only %s", removed, err, f.Name())
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
	if removed, err := RemoveLeftovers(filepath.Join(dir, "missing")); err != nil || removed != nil {
		t.Errorf("a missing directory: %v, %v; want nothing", removed, err)
	}
}
