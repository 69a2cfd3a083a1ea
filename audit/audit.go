package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// Entry is one audited action.
type Entry struct {
	At     time.Time `json:"at"`
	Tenant string    `json:"tenant,omitempty"`
	Actor  string    `json:"actor"`            // token name, or "local" in open mode
	Action string    `json:"action"`           // task.correct, alert.ack, silence.add, silence.remove, rules.update, auth.fail
	Target string    `json:"target,omitempty"` // task ID, alert ID, silence ID, rules file
	Detail string    `json:"detail,omitempty"`
	Remote string    `json:"remote,omitempty"` // client address
}

// Log is an audit log. The zero value is not usable; use Open or NewMemory.
type Log struct {
	clock apollo.Clock
	mu    sync.Mutex
	ring  []Entry
	next  int
	full  bool
	f     *os.File
	w     *bufio.Writer
}

// NewMemory returns a log that keeps the last n entries in memory only.
func NewMemory(n int, clock apollo.Clock) *Log {
	if clock == nil {
		clock = apollo.SystemClock
	}
	return &Log{clock: clock, ring: make([]Entry, max(n, 1))}
}

// Open returns a log that also appends to dir/audit.jsonl.
func Open(dir string, n int, clock apollo.Clock) (*Log, error) {
	l := NewMemory(n, clock)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l.f, l.w = f, bufio.NewWriter(f)
	return l, nil
}

// Record adds e, stamping the time if it has none. Failing to write the
// file does not lose the entry from memory; the error is returned.
func (l *Log) Record(e Entry) error {
	if e.At.IsZero() {
		e.At = l.clock.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next] = e
	l.next = (l.next + 1) % len(l.ring)
	l.full = l.full || l.next == 0
	if l.w == nil {
		return nil
	}
	b, _ := json.Marshal(e)
	l.w.Write(b)
	l.w.WriteByte('\n')
	return l.w.Flush()
}

// List returns up to limit entries of a tenant, newest first.
func (l *Log) List(tenant string, limit int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	out := []Entry{}
	for i := 0; i < n && len(out) < limit; i++ {
		e := l.ring[(l.next-1-i+len(l.ring))%len(l.ring)]
		if e.Tenant == tenant {
			out = append(out, e)
		}
	}
	return out
}

// Close flushes and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f, l.w = nil, nil
	return err
}
