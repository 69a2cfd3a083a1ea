//go:build unix

package sourcefile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("#"), n), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		size       int    // of what is read, when it is
		large      bool   // refused as over the limit
		kind       string // refused as not a file
		missing    bool
	}{
		{name: "empty", path: write("empty", 0)},
		{name: "at the limit", path: write("limit", 100), size: 100},
		{name: "one byte over", path: write("over", 101), large: true},
		{name: "directory", path: dir, kind: "a directory"},
		{name: "FIFO no one writes to", path: fifo, kind: "a FIFO (a named pipe)"},
		{name: "endless device", path: "/dev/zero", kind: "a device"},
		{name: "missing", path: filepath.Join(dir, "nothing"), missing: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Read(tc.path, "jobs file", 100)
			var pe *fs.PathError
			var tl *TooLargeError
			var nf *NotFileError
			switch {
			case tc.missing:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want not exist", err)
				}
			case tc.large:
				if !errors.As(err, &tl) || !errors.As(err, &pe) || pe.Path != tc.path {
					t.Fatalf("err = %v, want a *TooLargeError naming the path", err)
				}
				if want := "larger than 100 bytes, the most a jobs file may be"; !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %q", err, want)
				}
			case tc.kind != "":
				if !errors.As(err, &nf) || nf.Kind != tc.kind || !errors.As(err, &pe) || pe.Path != tc.path {
					t.Fatalf("err = %v, want a *NotFileError (%s) naming the path", err, tc.kind)
				}
			default:
				if err != nil || len(src) != tc.size {
					t.Fatalf("Read = %d bytes, %v; want %d", len(src), err, tc.size)
				}
			}
		})
	}
}

// endless is a reader that never ends, as a pipe from /dev/zero.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) { e.n += len(p); return len(p), nil }

func TestReadAllStopsPastTheLimit(t *testing.T) {
	t.Parallel()
	r := &endless{}
	_, err := ReadAll(r, "expectations file", 1<<20)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "the most an expectations file may be") {
		t.Fatalf("err = %v, want a *TooLargeError", err)
	}
	if r.n > 2<<20 {
		t.Errorf("read %d bytes of an endless input for a limit of 1 MiB", r.n)
	}
	src, err := ReadAll(strings.NewReader("abc"), "rules file", 3)
	if err != nil || string(src) != "abc" {
		t.Errorf("ReadAll at the limit = %q, %v", src, err)
	}
	if _, err := ReadAll(io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")), "rules file", 3); !errors.As(err, &tl) {
		t.Errorf("ReadAll of 4 bytes, limit 3: err = %v", err)
	}
}
