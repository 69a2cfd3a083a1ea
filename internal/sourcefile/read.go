package sourcefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxSize is the most an operator's file may hold: 16 MiB. A file of
// 10 000 jobs, rules or expectations is about 1 MiB; one past 16 MiB is
// almost surely the wrong file, and parsing it would take several times
// its size in memory.
const MaxSize = 16 << 20

// TooLargeError says a file holds more than its limit.
type TooLargeError struct {
	What  string // "jobs file"
	Limit int64
	// Own: a file the server writes itself (ReadOwn), which only a
	// replacement or damage makes larger than it ever writes.
	Own bool
}

func (e *TooLargeError) Error() string {
	if e.Own {
		return fmt.Sprintf("larger than %s, more than the server ever writes in its %s: it was replaced or damaged", size(e.Limit), e.What)
	}
	return fmt.Sprintf("larger than %s, the most %s may be (check that it is the file you meant; one this large is refused rather than read into memory)",
		size(e.Limit), article(e.What))
}

// NotFileError says a path names something other than a regular file.
type NotFileError struct {
	What string // "jobs file"
	Kind string // "a directory", "a FIFO", "a device", ...
	Own  bool   // a file the server writes itself (ReadOwn, Open)
}

func (e *NotFileError) Error() string {
	if e.Own {
		return fmt.Sprintf("is %s, not the regular file the server writes as its %s: it was replaced", e.Kind, e.What)
	}
	return fmt.Sprintf("is %s, not a file (give the path of the %s itself)", e.Kind, e.What)
}

// Read returns the content of the regular file at path, of at most limit
// bytes. Anything else fails with an *fs.PathError that names the path
// and wraps a *TooLargeError or a *NotFileError (or the system's error),
// before reading more than limit+1 bytes. Only a regular file is opened: a
// FIFO no one writes to would block the open, a device may never end. what
// names the file in messages ("jobs file").
func Read(path, what string, limit int64) ([]byte, error) {
	return read(path, what, limit, false)
}

func read(path, what string, limit int64, own bool) ([]byte, error) {
	f, fi, err := open(path, what, own)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{What: what, Limit: limit, Own: own}}
	}
	src, err := readAll(f, fi.Size(), what, limit)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			tl.Own = own
		}
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return src, nil
}

// open opens the regular file at path, and only a regular file.
func open(path, what string, own bool) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := regular(path, what, fi, own); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	// Checked again on what was opened: the path may have been replaced
	// in between (a FIFO put there then blocks the open, a race only
	// someone who may write there can run).
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := regular(path, what, fi, own); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadAll reads r to its end, at most limit bytes (standard input given
// as a file): past that it fails with a *TooLargeError.
func ReadAll(r io.Reader, what string, limit int64) ([]byte, error) {
	return readAll(r, 512, what, limit)
}

// readAll reads r to its end, one byte past limit at most: the file may
// have grown since its size was read (a log), or have none (a file of
// /proc).
func readAll(r io.Reader, hint int64, what string, limit int64) ([]byte, error) {
	src := make([]byte, 0, min(hint, limit)+1)
	for {
		if len(src) == cap(src) {
			src = append(src, 0)[:len(src)]
		}
		n, err := r.Read(src[len(src):min(int64(cap(src)), limit+1)])
		src = src[:len(src)+n]
		if int64(len(src)) > limit {
			return nil, &TooLargeError{What: what, Limit: limit}
		}
		if errors.Is(err, io.EOF) {
			return src, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// regular refuses anything but a regular file, naming what it is.
func regular(path, what string, fi fs.FileInfo, own bool) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	kind := "something other than a regular file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO (a named pipe)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return &fs.PathError{Op: "read", Path: path, Err: &NotFileError{What: what, Kind: kind, Own: own}}
}

// article puts "a" or "an" before what.
func article(what string) string {
	if what != "" && strings.ContainsRune("aeiou", rune(what[0])) {
		return "an " + what
	}
	return "a " + what
}

// size writes n in MiB when it is a whole number of them.
func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
