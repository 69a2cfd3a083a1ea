package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// makeDataDir creates the data directory and returns the outermost
// directory it had to create ("" when dir was there already): a start
// that fails removes that one again if nothing was kept in it
// (removeUnusedDataDir), so that a mistyped flag leaves no empty
// directories behind.
func makeDataDir(dir string) (created string, err error) {
	for p := filepath.Clean(dir); ; {
		_, err := os.Lstat(p)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = p
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return created, nil
}

// removeUnusedDataDir removes created (from makeDataDir) after a failed
// start, unless it holds something worth keeping: a file with data other
// than the write-ahead log's empty segments (logEmpty: no record was
// appended), or anything that is not a plain file or directory. A
// directory the start did not create is never touched.
func removeUnusedDataDir(created string, logEmpty bool) error {
	if created == "" {
		return nil
	}
	keep := errors.New("keep")
	err := filepath.WalkDir(created, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return keep
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() == 0 || logEmpty && strings.HasSuffix(path, ".wal") && filepath.Base(filepath.Dir(path)) == "wal" {
			return nil
		}
		return keep
	})
	switch {
	case errors.Is(err, keep):
		return nil
	case err != nil:
		return err
	}
	return os.RemoveAll(created)
}
