package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// Log is where decided records become durable: package wal in production.
// Append must be cheap (it runs under a shard lock) and hand out increasing
// LSNs in call order; Wait returns once an LSN is durable.
type Log interface {
	Append(payload []byte) (uint64, error)
	Wait(ctx context.Context, lsn uint64) error
}

// Observer receives every applied change, one task's changes in order and
// one at a time; different tasks' changes may arrive concurrently. The
// change is shared: observers must not modify it, and must not keep it
// after Apply returns (copy what they need): replay writes every change
// of a worker into one reused Change (issue 20.4). Metrics aggregation is
// an observer (Options.Observers); the alert engine's event rules are a
// live one (Options.Live).
type Observer interface {
	Apply(c *apollo.Change)
}

// Archive keeps finished tasks after they leave memory, for queries.
type Archive interface {
	Put(t *apollo.Task) error
	Get(tenant, taskID string) (*apollo.Task, error) // nil, nil when unknown
}

// Refusal describes an event the bus could not take (Options.OnRefused).
type Refusal struct {
	Tenant, TaskID string
	Reason         string
}

// Options configure a Bus. The zero value of every field is a usable default.
type Options struct {
	Log Log // nil: nothing is durable (tests, benchmarks)
	// Observers see every change, the replay of the log at start
	// included: what rebuilds state from changes (metrics, expectations).
	Observers []Observer
	// Live observers see only the changes decided after Start: what acts
	// on a change (the event rules, the change feed to the alert
	// processes) heard of the replayed ones when they happened, and must
	// not be told again.
	Live    []Observer
	Archive Archive
	Clock   apollo.Clock
	Logger  *slog.Logger

	Workers      int // goroutines delivering changes; default 2×GOMAXPROCS
	TaskQueueLen int // changes queued per task before spilling to the holding area; default 64
	HoldLimit    int // holding area: changes over their task's limit, all tasks together; default 10 000
	QueueLimit   int // changes queued in all, holding area included; default 262 144
	MaxTasks     int // tasks in memory, all tenants together; default 2 000 000
	// TenantMaxTasks is each tenant's share of MaxTasks: one tenant cannot
	// take the room of the others. 0: MaxTasks. TenantTasks overrides it
	// for the tenants it names.
	TenantMaxTasks int
	TenantTasks    map[string]int
	HistoryLimit   int // records kept per task; default 64

	Retention      time.Duration // finished tasks stay in memory this long; default 1h
	IdleRetention  time.Duration // unfinished tasks with no event this long leave memory; default 7 days
	DedupRetention time.Duration // tombstones recognise late duplicates this long; default 24h
	ReorderWindow  time.Duration // out-of-order events wait this long for the missing ones; default 30s

	// Lateness gives thresholds per job-name prefix. For each threshold
	// the longest matching prefix that sets it wins; the entry with an
	// empty prefix matches every job.
	Lateness []Lateness
	// DefaultTimeout is the deadline of a running run that sent no
	// timeoutMs and whose job has no Lateness timeout: every run ends,
	// visibly (a timeout record), if its end never comes. Default 24h.
	DefaultTimeout time.Duration

	// OnRefused is called (outside any lock, at most once per refused
	// event) when the holding area or the queues are full: the alert engine
	// turns it into a high-severity self-alert: a refusal is never silent.
	OnRefused func(Refusal)

	// OnLogFailed is called once when the log fails. From then on the bus
	// answers every event retry_later: what it holds in memory may not be
	// on disk, so the process must restart and recover from the log. It
	// may run under a shard lock: it must not block or call the bus.
	OnLogFailed func(error)

	// testGate, when set, is called by a worker before it delivers a batch:
	// tests block it to fill queues deterministically.
	testGate func()
	// testRoomWait, when set, is called when the deadline loop starts to
	// wait for room in the queues (waitRoom).
	testRoomWait func()
}

// Lateness holds the lateness and timeout thresholds for jobs whose name
// starts with Prefix, in every tenant; or, when Job is set, for the job
// named Job in Tenant alone, ahead of every prefix (the scheduler's own
// late_after: its job, not every job whose name begins with it, nor
// another tenant's job of the same name).
type Lateness struct {
	Prefix string `json:"prefix" yaml:"prefix"`
	Job    string `json:"job,omitempty" yaml:"-"`
	Tenant string `json:"tenant,omitempty" yaml:"-"`
	// StartAfter: a run whose running event comes later than this after
	// its scheduledAt is late. Default 1m.
	StartAfter time.Duration `json:"startAfter" yaml:"start_after"`
	// MissedAfter: a pending run not started this long after its
	// scheduledAt (or its pending event) is a missed start. Default 5m.
	MissedAfter time.Duration `json:"missedAfter" yaml:"missed_after"`
	// Timeout applies to running runs that sent no timeoutMs; 0: a
	// shorter prefix's, or Options.DefaultTimeout.
	Timeout time.Duration `json:"timeout" yaml:"timeout"`
}

func (o *Options) setDefaults() {
	o.Clock = cmp.Or[apollo.Clock](o.Clock, apollo.SystemClock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Workers = cmp.Or(o.Workers, 2*runtime.GOMAXPROCS(0))
	o.TaskQueueLen = cmp.Or(o.TaskQueueLen, 64)
	o.HoldLimit = cmp.Or(o.HoldLimit, 10_000)
	o.QueueLimit = cmp.Or(o.QueueLimit, 1<<18)
	o.MaxTasks = cmp.Or(o.MaxTasks, 2_000_000)
	o.TenantMaxTasks = cmp.Or(o.TenantMaxTasks, o.MaxTasks)
	o.HistoryLimit = cmp.Or(o.HistoryLimit, 64)
	o.Retention = cmp.Or(o.Retention, time.Hour)
	o.IdleRetention = cmp.Or(o.IdleRetention, 7*24*time.Hour)
	o.DedupRetention = cmp.Or(o.DedupRetention, 24*time.Hour)
	o.ReorderWindow = cmp.Or(o.ReorderWindow, 30*time.Second)
	o.DefaultTimeout = cmp.Or(o.DefaultTimeout, 24*time.Hour)
}

func (o *Options) validate() error {
	switch {
	case o.Workers < 0, o.TaskQueueLen < 0, o.HoldLimit < 0, o.QueueLimit < 0, o.MaxTasks < 0, o.HistoryLimit < 0, o.TenantMaxTasks < 0:
		return errors.New("bus: negative limit in options")
	case o.QueueLimit < o.HoldLimit:
		return fmt.Errorf("bus: queue limit %d is below the holding area %d; raise the queue limit", o.QueueLimit, o.HoldLimit)
	case o.Retention < 0, o.IdleRetention < 0, o.DedupRetention < 0, o.ReorderWindow < 0, o.DefaultTimeout < 0:
		return errors.New("bus: negative retention in options")
	}
	for tenant, n := range o.TenantTasks {
		if n < 0 {
			return fmt.Errorf("bus: tenant %q: negative task limit", tenant)
		}
	}
	for _, l := range o.Lateness {
		if l.StartAfter < 0 || l.MissedAfter < 0 || l.Timeout < 0 {
			return fmt.Errorf("bus: lateness for prefix %q: negative duration", l.Prefix)
		}
	}
	return nil
}

// ErrClosed is returned once the bus is stopping.
var ErrClosed = errors.New("bus: closed")

const numShards = 256

// shard holds the tasks whose keys hash to it. The map is keyed by a
// 64-bit hash of the key (cheap to hash and compare, small entries); a task
// whose hash is already taken by another key (rare, or crafted: the hash
// is not seeded) goes to more, keyed by the key itself. No task carries a
// chain pointer: 8 bytes in every task for the rare collision (issue 20.7).
type shard struct {
	mu    sync.Mutex
	tasks map[uint64]*task
	more  map[key]*task // tasks whose hash another key took first
	spare []*side       // sides its tasks gave back, for the next that needs one
	// lsn is the LSN of the record being decided under mu: every change
	// made before mu is released carries it (apollo.Change.LSN).
	lsn uint64
}

// maxSpare bounds a shard's spare sides, and maxSpareQueue the queue
// array a spare side keeps: a task held far past TaskQueueLen gives its
// long array back to the collector.
const (
	maxSpare      = 8
	maxSpareQueue = 64
)

// sideOf returns t's side, taking a spare one (or a new one) if t has
// none. s.mu is held.
func (s *shard) sideOf(t *task) *side {
	if t.side == nil {
		if n := len(s.spare); n > 0 {
			t.side = s.spare[n-1]
			s.spare[n-1] = nil
			s.spare = s.spare[:n-1]
		} else {
			t.side = new(side)
		}
	}
	return t.side
}

// giveBack takes t's side from it once nothing is queued or waiting in
// it, and keeps it for reuse. While t is queued a worker may be
// delivering what it took from the queue, and gives the side back itself
// when it is done (deliver). s.mu is held.
func (s *shard) giveBack(t *task) {
	sd := t.side
	if sd == nil || t.queued || len(sd.q) > 0 || len(sd.parked) > 0 {
		return
	}
	t.side = nil
	if len(s.spare) < maxSpare && cap(sd.q) <= maxSpareQueue {
		sd.parked = nil // rare: not worth keeping
		s.spare = append(s.spare, sd)
	}
}

// get returns the task with key k (hash h), or nil.
func (s *shard) get(h uint64, k key) *task {
	if t := s.tasks[h]; t != nil && t.id == k.id && t.tenant == k.tenant {
		return t
	}
	if len(s.more) > 0 {
		return s.more[k]
	}
	return nil
}

// put adds t, which is not in s yet, under hash h.
func (s *shard) put(h uint64, t *task) {
	if s.tasks[h] == nil {
		s.tasks[h] = t
		return
	}
	if s.more == nil {
		s.more = map[key]*task{}
	}
	s.more[t.key()] = t
}

// del removes t, stored under hash h.
func (s *shard) del(h uint64, t *task) {
	if s.tasks[h] == t {
		delete(s.tasks, h)
		return
	}
	if s.more[t.key()] == t {
		delete(s.more, t.key())
		if len(s.more) == 0 {
			s.more = nil
		}
	}
}

// each calls fn for every task of the shard; fn must not add or remove.
func (s *shard) each(fn func(h uint64, t *task)) {
	for h, t := range s.tasks {
		fn(h, t)
	}
	for k, t := range s.more {
		fn(hashParts(k.tenant, k.id), t)
	}
}

// readyTask is a task with changes to deliver.
type readyTask struct {
	s *shard
	t *task
}

// Bus keeps task state. Create it with New, restore it (ReadState, Replay),
// then Start it; Stop it once.
type Bus struct {
	opts   Options
	log    *slog.Logger
	shards [numShards]shard

	// pause is held for reading by everything that decides records and
	// for writing by Checkpoint, which needs a quiet state.
	pause     sync.RWMutex
	late      *lateTable // Options.Lateness for lookups; replaced under pause
	closed    atomic.Bool
	logFailed atomic.Pointer[error] // set once: the log failed; refuse everything

	ready         *readyList
	replaying     bool         // set by Replay, cleared by Start: replay delivers inline
	replayScratch *scratch     // Replay's (one goroutine): the change it reuses
	queued        atomic.Int64 // changes waiting in task queues
	held          atomic.Int64 // of those, changes over their task's queue limit
	queues        atomic.Int64 // tasks with a queue
	// roomWanted is set by the deadline loop while it waits for the queues
	// to go below the low-water mark; the worker that takes them there
	// clears it and sends on room.
	roomWanted atomic.Bool
	room       chan struct{}
	ntasks     spreadCount
	tenants    sync.Map  // tenant -> *tenantState (tenant.go)
	names      *interner // the one copy of each job name and tenant the tasks hold
	pings      openPings
	parked     atomic.Int64
	lsn        atomic.Uint64 // highest LSN appended

	drainMu sync.Mutex
	drained *sync.Cond // signalled when queued drops to zero

	fan *Fanout // subscribers

	live liveMark // how far the live observers have heard (live.go)

	timers *deadlines
	tombs  *tombstones
	stats  counters
	warn   *loglimit.Limiter // one key: every warning of the bus shares it

	life lifecycle.Group // the workers, the deadline loop and the sweeper
}

// New returns a Bus that is ready for ReadState, Replay and Start.
func New(opts Options) (*Bus, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	b := &Bus{
		opts:  opts,
		log:   opts.Logger.With("component", "bus"),
		ready: newReadyList(opts.Workers),
		room:  make(chan struct{}, 1),
		life:  lifecycle.Group{Name: "bus"},
	}
	for i := range b.shards {
		b.shards[i].tasks = make(map[uint64]*task)
	}
	b.drained = sync.NewCond(&b.drainMu)
	b.timers = newDeadlines()
	b.tombs = newTombstones(opts.DedupRetention)
	b.late = newLateTable(opts.Lateness)
	b.names = newInterner()
	b.warn = loglimit.New(time.Second)
	b.fan = NewFanout(nil)
	b.live.from = math.MaxUint64
	b.live.on = opts.Log != nil && len(opts.Live) > 0
	return b, nil
}

// Start launches the workers, the deadline loop and the sweeper, and
// returns at once; they run until Stop (docs/architecture.md, "Lifecycle").
func (b *Bus) Start(ctx context.Context) error {
	return b.life.Start(ctx, func(context.Context) error {
		b.replaying = false
		b.live.start(b.lsn.Load())
		for range b.opts.Workers {
			b.life.Go(b.worker)
		}
		b.life.Go(b.deadlineLoop)
		b.life.Go(b.sweepLoop)
		return nil
	})
}

// Stop refuses new events, delivers every queued change, stops the
// goroutines and waits for them, or for ctx. It is idempotent.
func (b *Bus) Stop(ctx context.Context) error {
	return b.life.Stop(ctx, func(halt func()) error {
		b.pause.Lock() // waits for in-flight Publish calls; later ones see closed
		b.closed.Store(true)
		b.pause.Unlock()
		if b.life.Started() {
			b.waitDrained()
		}
		halt()
		return nil
	})
}

// locate returns the shard of a key and the key's hash within it.
func (b *Bus) locate(k key) (*shard, uint64) {
	h := hashKey(k)
	return &b.shards[h%numShards], h
}

// hashKey is FNV-1a over tenant, a zero byte and the task ID: stable across
// restarts, because tombstones are stored by it.
func hashKey(k key) uint64 { return hashParts(k.tenant, k.id) }

// hashParts is hashKey of a tenant and task ID given as strings or as the
// bytes of an encoded record (Replayer routes records by it).
func hashParts[S string | []byte](tenant, id S) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(tenant); i++ {
		h = (h ^ uint64(tenant[i])) * 1099511628211
	}
	h *= 1099511628211 // the zero byte between tenant and ID
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	return h
}

// nowMs is the server's time in Unix milliseconds.
func (b *Bus) nowMs() int64 { return b.opts.Clock.Now().UnixMilli() }

// lateTable is Options.Lateness made for the lookup every applied event
// makes: the prefixes, scanned (a handful), and the jobs' own entries by
// tenant and name, which a scheduler's jobs file has one of per job (a
// scan of 1 000 cost 5-9 µs an event, twice: BenchmarkLateness).
type lateTable struct {
	prefixes []Lateness
	jobs     map[key]Lateness // key.id is the job name
}

func newLateTable(ls []Lateness) *lateTable {
	t := &lateTable{}
	for _, l := range ls {
		if l.Job == "" {
			t.prefixes = append(t.prefixes, l)
			continue
		}
		if t.jobs == nil {
			t.jobs = map[key]Lateness{}
		}
		k := key{tenant: l.Tenant, id: l.Job}
		e := t.jobs[k] // of two entries for one job, the first sets each threshold
		e.StartAfter = cmp.Or(e.StartAfter, l.StartAfter)
		e.MissedAfter = cmp.Or(e.MissedAfter, l.MissedAfter)
		e.Timeout = cmp.Or(e.Timeout, l.Timeout)
		t.jobs[k] = e
	}
	return t
}

// lateness returns the thresholds for a job of a tenant: for each, the
// job's own entry that sets it, else the longest matching prefix that
// does, else the default.
func (b *Bus) lateness(tenant, name string) Lateness {
	best := Lateness{StartAfter: time.Minute, MissedAfter: 5 * time.Minute, Timeout: b.opts.DefaultTimeout}
	t := b.late
	var lens [3]int // length of the prefix each threshold came from, +1
	set := func(i int, v time.Duration, dst *time.Duration, n int) {
		if v > 0 && n > lens[i] {
			*dst, lens[i] = v, n
		}
	}
	for _, l := range t.prefixes {
		if len(name) < len(l.Prefix) || name[:len(l.Prefix)] != l.Prefix {
			continue
		}
		n := len(l.Prefix) + 1
		set(0, l.StartAfter, &best.StartAfter, n)
		set(1, l.MissedAfter, &best.MissedAfter, n)
		set(2, l.Timeout, &best.Timeout, n)
	}
	if l, ok := t.jobs[key{tenant: tenant, id: name}]; ok {
		set(0, l.StartAfter, &best.StartAfter, math.MaxInt)
		set(1, l.MissedAfter, &best.MissedAfter, math.MaxInt)
		set(2, l.Timeout, &best.Timeout, math.MaxInt)
	}
	return best
}

// SetLateness replaces the lateness thresholds (a reload, or the
// scheduler's per-job late_after). It applies to events decided afterwards.
func (b *Bus) SetLateness(l []Lateness) {
	b.pause.Lock()
	b.opts.Lateness = append([]Lateness(nil), l...)
	b.late = newLateTable(b.opts.Lateness)
	b.pause.Unlock()
}
