package audit

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
	// Count is set on the entries the server writes for itself rather than
	// for a caller: failures of unknown callers, aggregated per source and
	// interval (Count of them, the first at At, the last at Last), and gaps
	// in the file. Such entries belong to no tenant.
	Count int       `json:"count,omitempty"`
	Last  time.Time `json:"last,omitzero"`
}

// Field limits. A caller controls most of an entry (a 60 KB path was once
// stored whole, thousands of times): longer values are cut, and say so.
const (
	maxShort  = 128  // tenant, actor, action, remote
	maxTarget = 512  // a method and a path, or an ID (IDs are at most 256 bytes)
	maxDetail = 1024 // a reason, a silence's description
)

func (e *Entry) capFields() {
	e.Tenant = capString(e.Tenant, maxShort)
	e.Actor = capString(e.Actor, maxShort)
	e.Action = capString(e.Action, maxShort)
	e.Remote = capString(e.Remote, maxShort)
	e.Target = capString(e.Target, maxTarget)
	e.Detail = capString(e.Detail, maxDetail)
}

// capString cuts s to at most max bytes, on a rune boundary, and says how
// much was cut.
func capString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	suffix := fmt.Sprintf("…(%d bytes cut)", len(s)-max)
	cut := max - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + suffix
}

// Options configure a Log. Every field has a default.
type Options struct {
	// Dir holds audit.jsonl and its rotated predecessors; "" keeps the
	// log in memory only.
	Dir string
	// Entries is how many entries are kept in memory per tenant, and
	// apart from them for the server's own entries; default 1000.
	Entries int
	// FileBytes is the size past which audit.jsonl is rotated to
	// audit.jsonl.1; default 8 MiB.
	FileBytes int64
	// Files is how many rotated files are kept; default 3. The files of
	// the log never take more than FileBytes × (Files + 1).
	Files int
	// FailureInterval is the period over which failures of unknown
	// callers are counted into one entry per action and source; default
	// 1 minute.
	FailureInterval time.Duration
	// FailureSources is how many such entries an interval may have; the
	// failures of any further sources are counted in one entry per
	// action. Default 100.
	FailureSources int
	Clock          apollo.Clock // default the system clock
	Logger         *slog.Logger // default slog.Default()

	afterTick func() // test seam: called after each tick of the flush loop
	// space tells the free and total bytes of dir's filesystem; default
	// diskSpace (test seam).
	space func(dir string) (avail, size uint64, err error)
}

func (o Options) withDefaults() Options {
	o.Entries = max(cmp.Or(o.Entries, 1000), 1)
	o.FileBytes = cmp.Or(o.FileBytes, 8<<20)
	o.Files = cmp.Or(o.Files, 3)
	o.FailureInterval = cmp.Or(o.FailureInterval, time.Minute)
	o.FailureSources = cmp.Or(o.FailureSources, 100)
	if o.Clock == nil {
		o.Clock = apollo.SystemClock
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.space == nil {
		o.space = diskSpace
	}
	return o
}

// Log is an audit log. Each tenant's entries are kept in a ring of their
// own, and the server's own entries (failures of unknown callers, gaps) in
// another, so that no tenant's entries, and no flood of anonymous ones,
// can push out another tenant's. The zero value is not usable; use Open or
// NewMemory.
type Log struct {
	opts    Options
	log     *slog.Logger
	mu      sync.Mutex
	tenants map[string]*ring
	server  *ring // entries with a Count: see Entry
	fails   failures
	files   map[string]*file // each tenant's entries, by tenant; nil: memory only
	sfile   *file            // the server's own entries (failures); nil: memory only
	stop    chan struct{}
	done    chan struct{}
	closed  bool
}

// NewMemory returns a log that keeps the last n entries per tenant in
// memory only.
func NewMemory(n int, clock apollo.Clock) *Log {
	l, _ := Open(Options{Entries: n, Clock: clock})
	return l
}

// Open returns a log; with opts.Dir it also appends each tenant's entries
// to its file in Dir (tenantFileName), and first reads back the entries
// of the two newest files of each tenant and of the server, so that GET
// /api/v1/audit shows after a restart what it showed before. Close stops
// it.
func Open(opts Options) (*Log, error) {
	opts = opts.withDefaults()
	l := &Log{opts: opts, log: opts.Logger.With("component", "audit"), tenants: map[string]*ring{},
		server: newRing(opts.Entries), fails: newFailures(opts)}
	if opts.Dir != "" {
		// Both sets of files are read before any entry is kept, so that
		// each ring gets its entries in time order (the server's ring
		// holds the failures of its file and the gaps of both).
		var read []*Entry
		collect := func(e *Entry) { read = append(read, e) }
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		names, err := tenantFiles(opts.Dir)
		if err != nil {
			return nil, err
		}
		l.files = map[string]*file{}
		for tenant, name := range names {
			f, err := openFile(opts, name, l.log, collect)
			if err != nil {
				l.closeFiles()
				return nil, err
			}
			l.files[tenant] = f
		}
		sf, err := openFile(opts, serverFileName, l.log, collect)
		if err != nil {
			l.closeFiles()
			return nil, err
		}
		slices.SortStableFunc(read, func(a, b *Entry) int { return a.At.Compare(b.At) })
		for _, e := range read {
			l.keep(e)
		}
		l.sfile = sf
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.flushLoop()
	}
	return l, nil
}

// keep puts e in the ring it belongs to. Called with mu held.
func (l *Log) keep(e *Entry) {
	if e.Count > 0 {
		l.server.add(e)
		return
	}
	r := l.tenants[e.Tenant]
	if r == nil {
		r = newRing(l.opts.Entries)
		l.tenants[e.Tenant] = r
	}
	r.add(e)
}

// Record adds e, stamping the time if it has none and cutting fields over
// their limits. A file that cannot be written does not lose the entry
// from memory; the log says so (once, not per entry) and the file gets a
// gap entry when writing works again.
func (l *Log) Record(e Entry) {
	if e.At.IsZero() {
		e.At = l.opts.Clock.Now()
	}
	e.capFields()
	e.Count, e.Last = 0, time.Time{}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endInterval(e.At)
	l.keep(&e)
	l.write(&e)
}

// Add keeps e, an entry another process recorded (a node of the
// scale-out mode shares its log through NATS), as that process kept it:
// its time stays, its fields are cut to their limits, and it goes to its
// tenant's ring, never the server's (a shared entry is a caller's, not a
// count of failures). It is written to no file.
func (l *Log) Add(e Entry) {
	e.capFields()
	e.Count, e.Last = 0, time.Time{}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keep(&e)
}

// Capped returns e with its fields cut to their limits, as a log keeps it.
func Capped(e Entry) Entry {
	e.capFields()
	return e
}

// RecordFailure counts a request refused before the server knew who made
// it (no or an unknown token, another site's page). Failures are
// aggregated: one entry per action and source address per
// FailureInterval, kept in memory at once and updated as failures arrive,
// written to the file when the interval ends; past FailureSources entries,
// one entry per action counts the rest. A flood of failures therefore
// costs a map lookup each, not memory or disk.
func (l *Log) RecordFailure(e Entry) {
	now := l.opts.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endInterval(now)
	if agg, fresh := l.fails.count(e, now); fresh {
		l.server.add(agg)
	}
}

// endInterval writes the failure entries of an interval that has ended.
// Called with mu held.
func (l *Log) endInterval(now time.Time) {
	for _, e := range l.fails.ended(now) {
		l.write(e)
	}
}

// write appends e to its file: its tenant's or, for an entry with a
// Count, the server's. Called with mu held.
func (l *Log) write(e *Entry) {
	if l.files == nil {
		return
	}
	f := l.sfile
	if e.Count == 0 {
		f = l.tenantFile(e.Tenant)
	}
	if f == nil {
		return
	}
	if gap := f.write(e, l.opts.Clock.Now()); gap != nil {
		l.server.add(gap)
	}
}

// tenantFile is the file of a tenant's entries, opened at its first
// entry; nil when it cannot be (said in the log: the entry stays in
// memory). Called with mu held.
func (l *Log) tenantFile(tenant string) *file {
	if f := l.files[tenant]; f != nil {
		return f
	}
	f, err := openFile(l.opts, tenantFileName(tenant), l.log, func(*Entry) {})
	if err != nil {
		l.log.Error("audit: a tenant's audit file cannot be opened; its entries are kept in memory only", "tenant", tenant, "err", err)
		return nil
	}
	l.files[tenant] = f
	return f
}

// closeFiles closes every file. Called with mu held, or before l is shared.
func (l *Log) closeFiles() error {
	var errs []error
	for _, f := range l.files {
		errs = append(errs, f.close())
	}
	if l.sfile != nil {
		errs = append(errs, l.sfile.close())
	}
	l.files, l.sfile = nil, nil
	return errors.Join(errs...)
}

// flushLoop ends failure intervals on time even when nothing else is
// recorded, so that a burst of failures reaches the file at most one
// interval after its interval ended, not at the next action.
func (l *Log) flushLoop() {
	defer close(l.done)
	t := l.opts.Clock.NewTicker(l.opts.FailureInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C():
			l.mu.Lock()
			l.endInterval(now)
			l.mu.Unlock()
			if l.opts.afterTick != nil {
				l.opts.afterTick()
			}
		case <-l.stop:
			return
		}
	}
}

// List returns up to limit entries of a tenant, newest first. The default
// tenant's list also holds the server's own entries (failures of unknown
// callers, gaps in the file): they belong to no tenant, and the default
// tenant is the one of the people who run the server.
func (l *Log) List(tenant string, limit int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endInterval(l.opts.Clock.Now())
	var server *ring
	if tenant == "" {
		server = l.server
	}
	return merge(l.tenants[tenant], server, limit)
}

// Close writes the failures counted so far, stops the log and closes the
// file. It is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for _, e := range l.fails.flush() {
		l.write(e)
	}
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeFiles()
}
