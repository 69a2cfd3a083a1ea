//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apollo-11/apollo/internal/flock"
)

// spoolSlots is how many `apollo exec` processes may spool at once under
// one spool directory. The agent allows one client per directory, and cron
// starts many wrapped jobs at the same minute: each takes a slot, a
// subdirectory held with an exclusive lock for its lifetime. Past the
// last slot a run reports without a spool.
const spoolSlots = 16

// spoolLease is a slot this process holds, and the unheld slots that an
// earlier process left events in (orphans), which this one sends too.
type spoolLease struct {
	dir     string
	orphans []string
	mu      sync.Mutex // releaseSlot runs from the drainers' goroutines
	locks   []*os.File
	// inherited: dir held an earlier process's events, which this run's
	// client sends with its own (every free slot had some).
	inherited bool
}

// leaseSpool takes a free slot under root for this run, one that holds no
// files when there is one, and every other free slot that holds files.
// The run's own client then carries only the run's events, so that what
// the server answers it (a duplicate) is about this run and not about an
// older one's leftovers; those go through clients of their own.
func leaseSpool(root string) (*spoolLease, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	l := &spoolLease{}
	for i := range spoolSlots {
		dir := filepath.Join(root, fmt.Sprintf("slot-%02d", i))
		files := hasFiles(dir)
		if l.dir != "" && !l.inherited && !files {
			continue // nothing left there to send
		}
		f, ok, err := tryLock(dir + ".lock")
		if err != nil {
			l.release()
			return nil, err
		}
		if !ok {
			continue // another apollo exec holds it
		}
		l.locks = append(l.locks, f)
		switch {
		case l.dir == "":
			l.dir, l.inherited = dir, files
		case l.inherited && !files:
			// An empty slot at last: the run's own, and the slot taken
			// first is drained like the others.
			l.orphans = append(l.orphans, l.dir)
			l.dir, l.inherited = dir, false
		default: // it holds files: an orphan
			l.orphans = append(l.orphans, dir)
		}
	}
	if l.dir == "" {
		return nil, fmt.Errorf("spool: all %d slots under %s are in use", spoolSlots, root)
	}
	return l, nil
}

// tryLock takes an exclusive lock on path without waiting. The lock goes
// with the process: a killed apollo exec frees its slot.
func tryLock(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("spool: %w", err)
	}
	if locked, err := flock.TryLock(f); !locked {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("spool: locking %s: %w", path, err)
		}
		return nil, false, nil
	}
	return f, true, nil
}

// release gives the slots back; call it after the agent clients closed.
func (l *spoolLease) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.locks {
		flock.Release(f)
	}
	l.locks = nil
}

// releaseSlot gives back the slot dir (an orphan whose client closed)
// before the others.
func (l *spoolLease) releaseSlot(dir string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.locks = slices.DeleteFunc(l.locks, func(f *os.File) bool {
		if f.Name() != dir+".lock" {
			return false
		}
		flock.Release(f)
		return true
	})
}

// readSpool lists the parts of the spool under root that hold events,
// own (the part of the token in use) first, then by name. Counting the
// events reads every file whole: apollo spool list does, apollo exec's
// start (strandedSpools) does not, and leaves Events at 0.
func readSpool(root, own string, countEvents bool) ([]spoolPart, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var out []spoolPart
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || (name != "no-token" && !strings.HasPrefix(name, "token-")) {
			continue
		}
		p := spoolPart{Name: name, Dir: filepath.Join(root, name), Yours: name == own}
		locks, _ := filepath.Glob(filepath.Join(p.Dir, "slot-*.lock"))
		for _, lock := range locks {
			slot := strings.TrimSuffix(lock, ".lock")
			files := spoolFiles(slot)
			if len(files) == 0 {
				continue
			}
			held := false
			if f, free, err := tryLock(lock); err == nil && free {
				flock.Release(f)
			} else if err == nil {
				p.Sending++
				held = true
			}
			for _, file := range files {
				n, size, at, err := countSpoolFile(file, countEvents)
				if err != nil {
					continue // sent and deleted meanwhile
				}
				p.Files++
				if held {
					p.heldFiles++
				}
				p.Events += n
				p.Bytes += size
				if p.Oldest.IsZero() || at.Before(p.Oldest) {
					p.Oldest = at
				}
				if at.After(p.Newest) {
					p.Newest = at
				}
			}
		}
		if p.Files > 0 {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b spoolPart) int {
		if a.Yours != b.Yours {
			if a.Yours {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// countSpoolFile returns a spool file's size, when it was last written
// and, with lines, how many events (lines) it holds.
func countSpoolFile(path string, lines bool) (events int, size int64, at time.Time, err error) {
	// Listed as a regular file, it may have been replaced since: never
	// follow a symlink (to /dev/zero, say) nor wait on a FIFO.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	if !info.Mode().IsRegular() {
		return 0, 0, time.Time{}, fmt.Errorf("spool: %s is not a regular file", path)
	}
	if !lines {
		return 0, info.Size(), info.ModTime(), nil
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		events += bytes.Count(buf[:n], []byte{'\n'})
		if err == io.EOF {
			return events, info.Size(), info.ModTime(), nil
		}
		if err != nil {
			return 0, 0, time.Time{}, err
		}
	}
}

// eachFreeSlot calls send for each slot of a part that holds files and
// that no running apollo exec holds, with the slot's lock held, as
// apollo exec holds the slots it sends. It counts the busy slots and the
// files left after sending in sum, and stops at the first error.
func eachFreeSlot(dir string, send func(slot string) error, sum *spoolSent) error {
	locks, err := filepath.Glob(filepath.Join(dir, "slot-*.lock"))
	if err != nil {
		return err
	}
	for _, lock := range locks {
		slot := strings.TrimSuffix(lock, ".lock")
		if !hasFiles(slot) {
			continue
		}
		f, free, err := tryLock(lock)
		if err != nil {
			return err
		}
		if !free {
			sum.busy++
			continue
		}
		err = send(slot)
		sum.left += len(spoolFiles(slot))
		flock.Release(f)
		if err != nil {
			return err
		}
	}
	return nil
}
