package notify

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// Outbox keeps what a dispatcher owes its channels where the next process
// finds it. The lanes' queues live in memory: without an outbox, a process
// that dies (kill -9, a crash, or a restart while a channel was down) takes
// the notifications it had not delivered with it, after the alert engine
// has saved its alerts as told, and nobody hears of them.
type Outbox interface {
	// Owe records that channel owes n, taken at at; it returns the
	// entry's ID for Settle. Send calls it before queueing n.
	Owe(channel string, at time.Time, n apollo.Notification) (uint64, error)
	// Settle records that the entries are no longer owed: sent, failed
	// for good, given up or dropped.
	Settle(ids ...uint64) error
	// Owed lists what was owed when the last process stopped, oldest
	// first. Start reads it once and queues it again.
	Owed() []OwedNotification
}

// OwedNotification is an entry of an Outbox.
type OwedNotification struct {
	ID           uint64              `json:"id"`
	Channel      string              `json:"channel"`
	At           time.Time           `json:"at"`
	Notification apollo.Notification `json:"n"`
}

// outboxLine is one record of the outbox's journal: an entry owed, or
// entries settled.
type outboxLine struct {
	Owe    *OwedNotification `json:"owe,omitempty"`
	Settle []uint64          `json:"settle,omitempty"`
}

// FileOutbox is an Outbox in one append-only file: a line for each
// notification owed, written and synced before Send queues it, and a line
// for each delivery that settled some. Opening it reads what is still owed
// and rewrites the file with that alone; so does an append once the file
// holds many more lines than entries owed. A settle line is not synced: a
// power cut may cost one, and the message goes out twice rather than never.
type FileOutbox struct {
	path string

	mu    sync.Mutex
	f     *os.File
	owed  map[uint64]OwedNotification
	first []OwedNotification // what was owed at open
	next  uint64
	lines int   // in the file
	size  int64 // of the file, up to its last whole line
	// torn says a failed append left part of a line at the end of the
	// file that could not be cut off: the next write rewrites the file.
	torn bool
}

var _ Outbox = (*FileOutbox)(nil)

// compactAfter is the least number of lines that makes an append rewrite
// the file; past it, the file is rewritten once it holds four times as
// many lines as entries owed.
const compactAfter = 1024

// OpenFileOutbox opens (or creates) the outbox at path. A torn last line,
// what a crash leaves mid-append, is dropped; any other line that does not
// read is an error that names the file.
func OpenFileOutbox(path string) (*FileOutbox, error) {
	o := &FileOutbox{path: path, owed: map[uint64]OwedNotification{}, next: 1}
	if err := o.read(); err != nil {
		return nil, err
	}
	o.first = o.sorted()
	if err := o.rewrite(); err != nil {
		return nil, err
	}
	return o, nil
}

// OwedIn reads what the outbox at path owes, without opening it for
// writing: for a process that does not send what it holds (apollo bus on
// an all-in-one server's data directory), to say so.
func OwedIn(path string) ([]OwedNotification, error) {
	o := &FileOutbox{path: path, owed: map[uint64]OwedNotification{}, next: 1}
	if err := o.read(); err != nil {
		return nil, err
	}
	return o.sorted(), nil
}

// sorted returns the entries owed in the order they were owed.
func (o *FileOutbox) sorted() []OwedNotification {
	var es []OwedNotification
	for _, e := range o.owed {
		es = append(es, e)
	}
	sortByID(es)
	return es
}

// maxOutboxLine bounds a line of the file. The longest the outbox writes
// is an owed notification whose alert names the most jobs it counts by
// name (1000, of at most 256 bytes, each escaped up to six times): about
// 2 MiB. A longer line was not written by the server; append refuses to
// write one, so the next open never refuses what this one wrote.
const maxOutboxLine = 16 << 20

// outboxRemedy is what to do about a file that does not read.
const outboxRemedy = "move the file away to start without the notifications it owes"

// read loads the file's journal into owed and next, a line at a time:
// memory holds what is owed, not the file, and a file that is not the
// outbox (a link to /dev/zero, a huge log copied over it) is refused with
// its name instead of read into memory.
func (o *FileOutbox) read() error {
	f, err := sourcefile.OpenOwn(o.path, "outbox")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("notify: outbox: %w", err) // the file is fine: its owner is not (chown)
	}
	if err != nil {
		return fmt.Errorf("notify: outbox: %w (%s)", err, outboxRemedy)
	}
	defer f.Close()
	err = sourcefile.ScanLines(f, maxOutboxLine, func(raw sourcefile.Line) error {
		if !raw.Ended && !raw.Long {
			// Torn by a crash mid-append, if it does not read: that entry
			// was never queued. (A crash cuts a line the server wrote: one
			// past the limit is not one.)
			var l outboxLine
			if json.Unmarshal(raw.Text, &l) != nil {
				return nil
			}
		}
		if raw.Long {
			return fmt.Errorf("line %d: longer than %d MiB, more than the server writes in one line: the file was replaced or damaged", raw.N, maxOutboxLine>>20)
		}
		if len(bytes.TrimSpace(raw.Text)) == 0 {
			return nil
		}
		var l outboxLine
		if err := json.Unmarshal(raw.Text, &l); err != nil {
			return fmt.Errorf("line %d: %w", raw.N, err)
		}
		if l.Owe != nil {
			o.owed[l.Owe.ID] = *l.Owe
			o.next = max(o.next, l.Owe.ID+1)
		}
		for _, id := range l.Settle {
			delete(o.owed, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("notify: outbox %s: %w (%s)", o.path, err, outboxRemedy)
	}
	return nil
}

func sortByID(es []OwedNotification) {
	slices.SortFunc(es, func(a, b OwedNotification) int { return cmp.Compare(a.ID, b.ID) })
}

// Owed implements Outbox.
func (o *FileOutbox) Owed() []OwedNotification { return o.first }

// Owe implements Outbox: the entry is on disk when it returns.
func (o *FileOutbox) Owe(channel string, at time.Time, n apollo.Notification) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return 0, errors.New("notify: outbox is closed")
	}
	e := OwedNotification{ID: o.next, Channel: channel, At: at, Notification: n}
	if err := o.append(outboxLine{Owe: &e}, true); err != nil {
		return 0, err
	}
	o.next++
	o.owed[e.ID] = e
	return e.ID, nil
}

// Settle implements Outbox.
func (o *FileOutbox) Settle(ids ...uint64) error {
	if len(ids) == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return errors.New("notify: outbox is closed")
	}
	for _, id := range ids {
		delete(o.owed, id)
	}
	if o.lines >= compactAfter && o.lines >= 4*len(o.owed) {
		err := o.rewrite()
		if err == nil {
			return nil
		}
		// The old file is still there: it gets the settle line.
		return errors.Join(err, o.append(outboxLine{Settle: ids}, false))
	}
	return o.append(outboxLine{Settle: ids}, false)
}

// Close closes the file; what is owed stays in it for the next open.
func (o *FileOutbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return nil
	}
	err := o.f.Close()
	o.f = nil
	return err
}

func (o *FileOutbox) append(l outboxLine, sync bool) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("notify: outbox: encode: %w", err)
	}
	if len(b) > maxOutboxLine {
		return fmt.Errorf("notify: outbox: a line of %d bytes, over the %d MiB the next start reads", len(b), maxOutboxLine>>20)
	}
	if o.torn {
		if err := o.rewrite(); err != nil {
			return err
		}
	}
	n, err := o.f.Write(append(b, '\n'))
	if err != nil {
		// A full disk writes what fits and fails. Left there, the part
		// would run into the next line, and the next open would refuse
		// the file for a bad line in its middle.
		if n > 0 && o.f.Truncate(o.size) != nil {
			o.torn = true
		}
		return fmt.Errorf("notify: outbox %s: %w", o.path, err)
	}
	o.size += int64(n)
	o.lines++
	if sync {
		if err := o.f.Sync(); err != nil {
			return fmt.Errorf("notify: outbox %s: %w", o.path, err)
		}
	}
	return nil
}

// rewrite replaces the file with the entries owed, so that a crash leaves
// the old file or the new one, and reopens it for appending.
func (o *FileOutbox) rewrite() error {
	var buf bytes.Buffer
	es := make([]OwedNotification, 0, len(o.owed))
	for _, e := range o.owed {
		es = append(es, e)
	}
	sortByID(es)
	for i := range es {
		b, err := json.Marshal(outboxLine{Owe: &es[i]})
		if err != nil {
			return fmt.Errorf("notify: outbox: encode: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := atomicfile.Write(o.path, buf.Bytes(), 0o600); err != nil && o.stillOld() {
		// Nothing changed (a full disk, most likely): the old file stays
		// open for appending, and the outbox keeps working once there is
		// room again.
		return fmt.Errorf("notify: outbox %s: %w", o.path, err)
	}
	f, err := os.OpenFile(o.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("notify: outbox %s: %w", o.path, err)
	}
	if o.f != nil {
		o.f.Close()
	}
	o.f, o.lines, o.size, o.torn = f, len(es), int64(buf.Len()), false
	return nil
}

// stillOld reports whether the open file is still the one at the path: a
// rewrite that failed before its rename left it there. (One that failed
// after, syncing the directory, put the new file in place.)
func (o *FileOutbox) stillOld() bool {
	if o.f == nil {
		return true
	}
	open, err := o.f.Stat()
	if err != nil {
		return true
	}
	now, err := os.Stat(o.path)
	return err != nil || os.SameFile(open, now)
}
