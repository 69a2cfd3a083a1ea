package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A failed start removes the data directory only if it made it and
// nothing worth keeping is in it (issue 21).
func TestRemoveUnusedDataDir(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		files    map[string]string // path under the data directory -> content
		logEmpty bool
		removed  bool
	}{
		{"as a failed start leaves it", map[string]string{"wal/LOCK": "", "wal/00000000000000000001.wal": "header", "audit/audit.jsonl": ""}, true, true},
		{"a record in the log", map[string]string{"wal/00000000000000000001.wal": "header and a record"}, false, false},
		{"a file with data", map[string]string{"wal/LOCK": "", "alerts.json": "{}"}, true, false},
		{"a segment elsewhere", map[string]string{"other/1.wal": "data"}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			top := filepath.Join(t.TempDir(), "new")
			data := filepath.Join(top, "nested", "data")
			created, err := makeDataDir(data)
			if err != nil {
				t.Fatal(err)
			}
			if created != top {
				t.Fatalf("created %q, want the outermost new directory %q", created, top)
			}
			for name, body := range tc.files {
				p := filepath.Join(data, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := removeUnusedDataDir(created, tc.logEmpty); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(top); (err != nil) != tc.removed {
				t.Errorf("removed: %v, want %v", err != nil, tc.removed)
			}
		})
	}
	t.Run("there before", func(t *testing.T) {
		t.Parallel()
		data := t.TempDir()
		created, err := makeDataDir(data)
		if err != nil || created != "" {
			t.Fatalf("makeDataDir of an existing directory: %q, %v; want \"\"", created, err)
		}
		if err := removeUnusedDataDir(created, true); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(data); err != nil {
			t.Errorf("an existing data directory was removed: %v", err)
		}
	})
}

// A start that a file's permissions stopped (a data directory restored
// as root, a server run as apollo) says what to do; other errors pass as
// they are.
func TestPermissionHint(t *testing.T) {
	t.Parallel()
	denied := fmt.Errorf("opening the log: %w", &fs.PathError{Op: "open", Path: "/var/lib/apollo/wal/LOCK", Err: syscall.EACCES})
	got := permissionHint(denied, "/var/lib/apollo").Error()
	for _, want := range []string{"opening the log: open /var/lib/apollo/wal/LOCK: permission denied", "the data directory /var/lib/apollo", "chown -R"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	other := errors.New("opening the log: no space left on device")
	if got := permissionHint(other, "/d"); got != other {
		t.Errorf("another error became %v", got)
	}
}
