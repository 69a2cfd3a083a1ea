package bus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// FileArchive keeps finished tasks that left memory as JSON lines, one file
// per UTC day, so that `GET /api/v1/tasks/{id}` still answers for them.
// Lookups scan the files newest first: they are rare (someone looking at an
// old run), and a scan of a day of a busy system takes milliseconds, which
// costs less than an index kept in memory for every task ever run.
type FileArchive struct {
	dir       string
	retention time.Duration
	clock     apollo.Clock

	mu  sync.Mutex
	day string
	f   *os.File
	// buf holds the lines Put and not yet written to f. A write that
	// fails (a full disk) leaves what it did not write here, to be
	// written after what it did (f appends): the line goes on where it
	// stopped, and nothing Put is lost while the disk is full.
	buf     []byte
	created bool // f is new since the last Sync: the directory needs a sync too
}

// archiveBuffer is how much Put buffers before it writes.
const archiveBuffer = 64 << 10

// OpenFileArchive creates dir if needed and opens today's file, so that
// a directory this process cannot write in (a restore made as another
// user) stops the start: found at the first Put instead, each task it
// archived would be gone from memory and from the next snapshot, and
// nowhere else. Files older than retention are removed as days pass.
func OpenFileArchive(dir string, retention time.Duration, clock apollo.Clock) (*FileArchive, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if clock == nil {
		clock = apollo.SystemClock
	}
	a := &FileArchive{dir: dir, retention: retention, clock: clock}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.openDayLocked(); err != nil {
		return nil, err
	}
	return a, nil
}

var _ Archive = (*FileArchive)(nil)

// Put appends t to today's file. Writes are buffered; Get, Sync and Close
// write what is buffered. A write that fails is tried again by the next;
// the error reaches Sync (the checkpoint waits for the archive) and Get.
func (a *FileArchive) Put(t *apollo.Task) error {
	line, err := json.Marshal(t)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.openDayLocked(); err != nil {
		return err
	}
	a.buf = append(append(a.buf, line...), '\n')
	if len(a.buf) >= archiveBuffer {
		_ = a.writeLocked() // kept for the next write; Sync says why
	}
	return nil
}

// writeLocked writes the buffered lines to f; what a failed write left
// stays buffered.
func (a *FileArchive) writeLocked() error {
	if len(a.buf) == 0 {
		return nil
	}
	n, err := a.f.Write(a.buf)
	a.buf = a.buf[:copy(a.buf, a.buf[n:])]
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

// openDayLocked makes today's file the one written, and prunes the
// files past the retention when the day changes.
func (a *FileArchive) openDayLocked() error {
	now := a.clock.Now().UTC()
	day := now.Format("20060102")
	if day == a.day {
		return nil
	}
	if err := a.closeLocked(); err != nil {
		return err // the old day's file stays, with what it could not take
	}
	f, err := os.OpenFile(filepath.Join(a.dir, "tasks-"+day+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	cut, err := endsMidLine(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("archive: %w", err)
	}
	if cut {
		// Part of a line (a copy taken while the file was written, a
		// power cut): the next line would run on from it, and the run it
		// holds would never read again. The part gets a line of its own,
		// which reads as nothing.
		a.buf = append([]byte{'\n'}, a.buf...)
	}
	a.day, a.f, a.created = day, f, true
	a.pruneLocked(now)
	return nil
}

// endsMidLine reports whether f holds something after its last newline.
func endsMidLine(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// Get finds the newest archived copy of a task.
func (a *FileArchive) Get(tenant, taskID string) (*apollo.Task, error) {
	a.mu.Lock()
	if a.f != nil {
		if err := a.writeLocked(); err != nil {
			a.mu.Unlock()
			return nil, err
		}
	}
	a.mu.Unlock()
	files, err := filepath.Glob(filepath.Join(a.dir, "tasks-*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(files)))
	idJSON, _ := json.Marshal(taskID)
	needle := append([]byte(`"taskID":`), idJSON...)
	for _, name := range files {
		t, err := scanArchive(name, needle, tenant, taskID)
		if t != nil || err != nil {
			return t, err
		}
	}
	return nil, nil
}

func scanArchive(name string, needle []byte, tenant, taskID string) (*apollo.Task, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<24)
	var found *apollo.Task
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, needle) {
			continue
		}
		var t apollo.Task
		if json.Unmarshal(line, &t) == nil && t.TaskID == taskID && t.Tenant == tenant {
			found = &t // keep scanning: the last copy in a file is the newest
		}
	}
	return found, sc.Err()
}

// Sync writes what Put buffered and makes it durable. A task Put is gone
// from the bus's memory, so from its next snapshot too: the checkpoint
// calls Sync before it writes that snapshot, or a kill -9 after it would
// lose every run archived since the last flush (the log that held them
// is replayed from the snapshot on).
func (a *FileArchive) Sync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	if err := a.writeLocked(); err != nil {
		return err
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if a.created {
		d, err := os.Open(a.dir)
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		a.created = false
	}
	return nil
}

// Close flushes and closes the current file.
func (a *FileArchive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closeLocked()
}

func (a *FileArchive) closeLocked() error {
	if a.f == nil {
		return nil
	}
	if err := a.writeLocked(); err != nil {
		return err
	}
	err := a.f.Close()
	a.f, a.day = nil, ""
	return err
}

// pruneLocked removes day files older than the retention.
func (a *FileArchive) pruneLocked(now time.Time) {
	if a.retention <= 0 {
		return
	}
	cutoff := now.Add(-a.retention).Format("20060102")
	files, _ := filepath.Glob(filepath.Join(a.dir, "tasks-*.jsonl"))
	for _, name := range files {
		day := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "tasks-"), ".jsonl")
		if day < cutoff {
			os.Remove(name)
		}
	}
}
