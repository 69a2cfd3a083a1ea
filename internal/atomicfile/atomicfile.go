// Package atomicfile replaces small files (saved state, rules, the
// notification outbox) so that a crash leaves the old content or the new.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apollo-11/apollo"
)

// Write replaces path with data so that a reader or a crash sees
// the old content or the new, never a part: it writes a temporary file in
// the same directory, syncs it, renames it over path and syncs the
// directory. An existing file keeps its permissions; a new one gets perm.
//
// A symbolic link is followed: the file it points to is replaced, in that
// file's directory, and the link stays. Replacing the link itself would
// cut the file off from whoever owns it: a Kubernetes ConfigMap mounts
// each key as a link through ..data, and an update swaps ..data, which a
// regular file in the link's place no longer sees.
func Write(path string, data []byte, perm fs.FileMode) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempSuffix+"*")
	if err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// tempSuffix, then the digits os.CreateTemp puts for its *, ends the name
// of Write's temporary file, which begins with a dot and the name of the
// file it replaces.
const tempSuffix = ".tmp"

// RemoveLeftovers removes from dir the temporary files of Write that a
// process killed (kill -9, a power cut) between creating one and renaming
// it left behind, and returns their paths. Each is as large as the file
// it was to replace, and without this a new one stayed after every such
// kill. Only the one process that writes the files in dir may call it
// (the holder of the data directory's lock): another process's Write in
// progress would lose its temporary file and fail. Subdirectories, and
// files not named as Write names them, are left alone.
func RemoveLeftovers(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// isTemp reports whether name is one Write gives its temporary files:
// ".", the name of the file, tempSuffix, one or more digits.
func isTemp(name string) bool {
	i := strings.LastIndex(name, tempSuffix)
	if !strings.HasPrefix(name, ".") || i <= 1 {
		return false
	}
	digits := name[i+len(tempSuffix):]
	if digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// NotWritable reports whether err says the file or its directory may not
// be written by this process (permissions, or a read-only mount): a
// condition for the one who owns the file, not a failure of the server.
func NotWritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// Refusal is the answer to a write through the API of what ("rules",
// "expectations") held in the file at path, when Write failed because
// the file may not be written (NotWritable): 409 conflict, naming the
// file, since what it holds belongs to whoever provides it (a ConfigMap,
// a read-only mount). It returns nil for any other error.
func Refusal(what, path string, err error) error {
	if !NotWritable(err) {
		return nil
	}
	if cause := errors.Unwrap(err); cause != nil {
		err = cause // the errno, not the temporary file's name
	}
	return &apollo.Error{Code: apollo.ECONFLICT, Field: what,
		Message: fmt.Sprintf("the %s come from the file %s, which the server may not write (%v); nothing was changed", what, path, err),
		Hint:    "change the " + what + " where the file comes from (a ConfigMap, a read-only mount); it is reloaded within seconds of a change"}
}
