package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/sourcefile"
	"github.com/apollo-11/apollo/internal/tenantlock"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/rules"
)

// expectations is the server's side of job expectations
// (docs/expectations.md, docs/expectations-server.md): each tenant's expectations (the file of the
// default tenant, the API's, the scheduler's jobs), the evaluator and the
// learner fed by the bus, and the loop that ticks the evaluator and acts
// on what it finds: a missed run is recorded in the job's history and
// metrics and fires ON: missed, a run past max_runtime is timed out, the
// other findings fire their rules. It holds the alerts of jobs that are
// echoes of an upstream job's trouble (alert.Holder).
type expectations struct {
	log   *slog.Logger
	clock apollo.Clock
	every time.Duration // how often the evaluator is ticked
	path  string        // the default tenant's file; "" without one
	saved alert.RuleStore
	ev    *expect.Evaluator
	learn *expect.Learner

	// Set before start: where findings go.
	bus   expectBus
	occur func(alert.Occurrence) // nil without an alert engine in this process
	// tellHeld, in a process whose alert engines are elsewhere (apollo
	// bus), takes every tenant's held jobs (alert.Holder's answers)
	// whenever they change; nil in the server, whose engine asks HeldBy.
	tellHeld func(redisstore.Held)
	lastHeld redisstore.Held // the loop's: what tellHeld was last given
	// heldMoved says that a job others depend on finished a run since the
	// held jobs were last worked out.
	heldMoved atomic.Bool

	// live is set once recovery is over: what replayed runs make the
	// evaluator find was acted on before the restart, unless the log
	// says it was not (unmarked).
	live atomic.Bool
	// checked is up to when expectations were judged (Unix ns), kept in
	// snapshots: after a restart, the runs expected from then on are
	// judged, those that fell while the server was down included.
	checked  atomic.Int64
	restored time.Time // checked, read from the snapshot
	// unrecorded is set once the failed log refused a missed run
	// (expectations.refused): checked stays where it was, so that the
	// next start judges that run's slot again, and records and tells it.
	unrecorded atomic.Bool
	// snapTiming is, read from the snapshot, each tenant's expectations
	// in force then: job -> timing. nil: the snapshot did not say.
	snapTiming map[string]map[string]string

	// puts makes each put of a tenant's expectations whole, from its
	// checks to its save and its putting in force, so that the set in
	// force is the one saved last (invariant 9), and the evaluator's Sets
	// of a tenant come in the order of its puts (putInForce). Not mu: the
	// bus's workers take mu, and wait for no save nor Set. One lock a
	// tenant: the check of a file of 4 MiB takes seconds, and its Set
	// tens of milliseconds, and one tenant's must not hold up another's.
	puts tenantlock.Locks

	mu      sync.Mutex
	armed   bool                   // the evaluator has the sets (arm)
	sets    map[string]*expect.Set // each tenant's expectations in force
	srcs    map[string][]byte      // each tenant's expectations text, as set
	own     map[string]int         // how many of them srcs gives (not the jobs file)
	fromJob []expect.Expectation   // the default tenant's, from the scheduler's jobs file
	found   []expect.Event         // found by Apply, acted on by the loop
	// unmarked are the runs the replay found too short or too often (or
	// the snapshot kept pending), and whose mark (bus.Mark) the log does
	// not hold: found before a crash, not acted on. start acts on them.
	unmarked map[runMark]expect.Event
	// flaps are, per tenant and job, the latest flapping the replay found
	// and the latest flapping mark it replayed: the runs of different
	// tasks replay in parallel, so the run a flapping was marked on need
	// not be the one the replay finds it at, nor come after it. A
	// flapping found after the job's latest mark (by the switch that
	// started it) was not acted on: start acts on it.
	flaps map[jobRef]*replayedFlap
	// pending are the findings marked on their runs (marksRun) that are
	// not marked yet: from when they are queued until their mark is
	// applied (Apply) or the loop has tried to mark them (act). A
	// snapshot keeps them (writeFound): their runs are in it, and the
	// replay of the log after it never finds them again.
	pending map[runMark]expect.Event
	// snapFlaps is the evaluator's flapping state read from the
	// snapshot; arm puts it back.
	snapFlaps []expect.FlapState
	// snapJobs is the rest of what the evaluator knew of each job, read
	// from the snapshot; arm puts it back.
	snapJobs []expect.JobState
	seen     struct {
		mod  time.Time
		size int64
	}

	wake  chan struct{}
	group lifecycle.Group // the loop
}

// expectBus is what the expectations need of the bus: recording a missed
// run, timing a run out, marking a finding on a run, and whether its log
// failed (what it refused then is for the next start).
type expectBus interface {
	RecordMissed(ctx context.Context, ms []bus.Missed) ([]bool, error)
	TimeOut(tenant, taskID string) bool
	Mark(tenant, taskID string, kind apollo.Kind, reason string) bool
	LogFailed() bool
}

var (
	_ expectBus       = (*bus.Bus)(nil)
	_ bus.Observer    = (*expectations)(nil)
	_ alert.Holder    = (*expectations)(nil)
	_ alert.RuleStore = (*alert.FileRules)(nil)
)

// newExpectations loads the default tenant's file (a bad file stops the
// start) and every tenant's expectations saved through the API.
func newExpectations(path string, saved alert.RuleStore, every time.Duration, clock apollo.Clock, log *slog.Logger) (*expectations, error) {
	x := &expectations{log: log.With("component", "expect"), clock: clock, every: cmp.Or(every, 10*time.Second), path: path, saved: saved,
		ev: expect.NewEvaluator(), learn: expect.NewLearner(0), srcs: map[string][]byte{}, sets: map[string]*expect.Set{}, own: map[string]int{},
		wake: make(chan struct{}, 1), group: lifecycle.Group{Name: "expectations"}}
	all, err := saved.Load(context.Background())
	if err != nil {
		return nil, fmt.Errorf("expectations saved through the API: %w", err)
	}
	for tenant, src := range all {
		if tenant == "" && path != "" {
			continue // the file gives them
		}
		if err := x.set(tenant, "expectations", src); err != nil {
			return nil, fmt.Errorf("expectations saved through the API for tenant %q: %w", tenant, err)
		}
	}
	if path != "" {
		if err := x.loadFile(); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("expectations file: %w (create it, or start without --expectations)", err)
			}
			return nil, fmt.Errorf("expectations file: %w", err)
		}
	}
	return x, nil
}

// set parses src as tenant's expectations and puts them in force: the
// expected runs of a new or changed expectation start from now.
func (x *expectations) set(tenant, name string, src []byte) error {
	set, err := expect.Parse(name, src)
	if err != nil {
		return err
	}
	defer x.puts.Lock(tenant)()
	return x.putInForce(tenant, set, src)
}

// putInForce makes set (parsed from src) tenant's expectations, merged
// with the scheduler's jobs for the default tenant, and hands it to the
// evaluator once armed. The tenant's lock (puts) is held, x.mu is not:
// the evaluator's Set of a large set takes a while, and the bus's
// workers and the other tenants' puts and reads take x.mu.
func (x *expectations) putInForce(tenant string, set *expect.Set, src []byte) error {
	x.mu.Lock()
	set, err := x.keepLocked(tenant, set, src)
	armed := x.armed
	x.mu.Unlock()
	if err != nil || !armed {
		return err
	}
	if testSettingExpectations != nil {
		testSettingExpectations(tenant)
	}
	found := x.ev.Set(tenant, set, x.clock.Now())
	x.mu.Lock()
	x.queueLocked(found)
	x.mu.Unlock()
	return nil
}

// keepLocked keeps set as tenant's expectations and returns what the
// evaluator is to hold: with the scheduler's jobs for the default
// tenant. x.mu is held.
func (x *expectations) keepLocked(tenant string, set *expect.Set, src []byte) (*expect.Set, error) {
	own := set.Len()
	if tenant == "" && len(x.fromJob) > 0 {
		exps := set.Expectations()
		for _, e := range x.fromJob {
			if _, ok := set.Lookup(e.Job); !ok {
				exps = append(exps, e) // the file's own say wins over the jobs file
			}
		}
		merged, err := expect.NewSet(exps)
		if err != nil {
			return nil, fmt.Errorf("with the scheduler's jobs: %w", err)
		}
		set = merged
	}
	x.srcs[tenant] = slices.Clone(src)
	x.sets[tenant] = set
	x.own[tenant] = own
	return set, nil
}

// loadFile reads the default tenant's file and puts it in force if it
// changed. A file with any problem is refused as a whole. It is checked
// without x.mu, which the bus's workers take: a file of 4 MiB takes
// seconds.
func (x *expectations) loadFile() error {
	defer x.puts.Lock("")()
	fi, err := os.Stat(x.path)
	if err != nil {
		return err
	}
	// The version is seen even if it cannot be read, as a bad one is:
	// the poll then says why once, not every time it looks.
	x.mu.Lock()
	x.seen.mod, x.seen.size = fi.ModTime(), fi.Size()
	old, ok := x.srcs[""]
	x.mu.Unlock()
	src, err := sourcefile.Read(x.path, "expectations file", sourcefile.MaxSize)
	if err != nil {
		return err
	}
	if ok && bytes.Equal(old, src) {
		return nil
	}
	set, err := expect.Parse(x.path, src)
	if err != nil {
		return err
	}
	x.mu.Lock()
	err = x.refuseEmptyLocked("", set, src, "in the file")
	x.mu.Unlock()
	if err != nil {
		return err
	}
	if err := x.putInForce("", set, src); err != nil {
		return err
	}
	x.log.Info("expectations loaded", "file", x.path, "expectations", set.Len())
	return nil
}

// refuseEmptyLocked refuses src, which parsed as set, when it has no
// expectations and would remove the tenant's running ones, unless it says
// it means it (rules.SaysEmpty: the line "# apollo: empty", or the JSON
// form), as a rules file must: an editor that truncates the file before
// it writes, or a client that sent nothing, looks just like it, and would
// forget every expected run waiting for its grace and every job that is
// down. x.mu is held.
func (x *expectations) refuseEmptyLocked(tenant string, set *expect.Set, src []byte, where string) error {
	if n := x.own[tenant]; set.Len() == 0 && n > 0 && !rules.SaysEmpty(src) {
		return &apollo.Error{Code: apollo.EINVALID, Field: "expectations",
			Message: fmt.Sprintf("no expectations %s, while %d are in force; nothing was changed", where, n),
			Hint:    "to remove every expectation on purpose, put the line " + rules.EmptyMarker + " " + where}
	}
	return nil
}

// reload reads the file again (SIGHUP, or a change seen by the poll); a
// bad version is logged with every problem and the old one keeps running.
func (x *expectations) reload() {
	if x.path == "" {
		return
	}
	if err := x.loadFile(); err != nil {
		x.log.Error("expectations file refused; the old expectations keep running", "file", x.path, "problems", err.Error())
	}
}

// changed reports whether the file's modification time or size moved.
func (x *expectations) changed() bool {
	fi, err := os.Stat(x.path)
	x.mu.Lock()
	defer x.mu.Unlock()
	return err == nil && (!fi.ModTime().Equal(x.seen.mod) || fi.Size() != x.seen.size)
}

// setJobs makes the scheduler's jobs the default tenant's expectations,
// under the file's or the API's.
func (x *expectations) setJobs(exps []expect.Expectation) error {
	defer x.puts.Lock("")()
	x.mu.Lock()
	src := x.srcs[""]
	old := x.fromJob
	x.fromJob = exps // read by keepLocked, under the same tenant's lock
	x.mu.Unlock()
	set, err := expect.Parse("expectations", src)
	if err == nil {
		err = x.putInForce("", set, src)
	}
	if err != nil {
		x.mu.Lock()
		x.fromJob = old
		x.mu.Unlock()
	}
	return err
}

// put checks src, saves it (the default tenant's in its file when there
// is one) and puts it in force. It returns the file's problems as an
// *expect.FileError.
func (x *expectations) put(ctx context.Context, tenant string, src []byte) error {
	defer x.puts.Lock(tenant)()
	return x.putHeld(ctx, tenant, src)
}

// testCheckingExpectations, set by the tests' TestMain in the process
// they start, is told of every check of a put as it begins, with the
// put's context; what it returns is told how the put ended.
var testCheckingExpectations func(ctx context.Context, tenant string) (ended func(error))

// testSettingExpectations, set by the tests in the process they start,
// is called as a tenant's expectations are put in force, before the
// evaluator's Set.
var testSettingExpectations func(tenant string)

// putHeld is put for a caller that holds the tenant's lock (a read,
// change and write back of a tenant's expectations, that no other put
// may come between). The check gives up when ctx is done (the client
// hung up); once the file is being saved, the put goes through, so that
// what is saved is what is in force.
func (x *expectations) putHeld(ctx context.Context, tenant string, src []byte) (err error) {
	if testCheckingExpectations != nil {
		defer func(ended func(error)) { ended(err) }(testCheckingExpectations(ctx, tenant))
	}
	set, err := expect.ParseContext(ctx, "expectations", src)
	if ctx.Err() != nil {
		// Not an internal error to log: the client went, or the server is
		// stopping.
		return fmt.Errorf("%w: %w", &apollo.Error{Code: apollo.EUNAVAILABLE, Field: "expectations",
			Message: "the request ended before its file was checked; nothing was changed", Hint: "send it again"}, ctx.Err())
	}
	if err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	x.mu.Lock()
	err = x.refuseEmptyLocked(tenant, set, src, "in the body")
	x.mu.Unlock()
	if err != nil {
		return err
	}
	if tenant == "" && x.path != "" {
		if err := atomicfile.Write(x.path, src, 0o644); err != nil {
			if refused := atomicfile.Refusal("expectations", x.path, err); refused != nil {
				return refused
			}
			return notSaved(x.log, "expectations", tenant, fmt.Errorf("writing the expectations file: %w", err))
		}
	} else if err := x.saved.Save(ctx, tenant, src); err != nil {
		return notSaved(x.log, "expectations", tenant, err)
	}
	if err := x.putInForce(tenant, set, src); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if tenant == "" && x.path != "" {
		if fi, err := os.Stat(x.path); err == nil {
			x.seen.mod, x.seen.size = fi.ModTime(), fi.Size()
		}
	}
	return nil
}

// Apply implements bus.Observer: the start and the end of each run go to
// the evaluator and the learner, and a run skipped when it was due (first
// reported manual_blocked) to the evaluator. A run that ends without having been
// seen running (a ping of success) starts and ends at once. What the
// evaluator finds is acted on by the loop, not on the bus's worker.
func (x *expectations) Apply(c *apollo.Change) {
	t := &c.Task
	if k := c.Record.Kind; k == apollo.KindTooShort || k == apollo.KindTooOften || k == apollo.KindFlapping {
		x.marked(c)
	}
	if t.Status == c.Prev.Status || t.Name == "" {
		return
	}
	run := expect.Run{Tenant: t.Tenant, Job: t.Name, TaskID: t.TaskID}
	// A run's times are its reporter's, but never later than when the
	// server received the report: a clock ahead (or a ts up to the year
	// 2200) must not make the evaluator judge expected runs still to come,
	// nor put the job's next expected run in the future.
	at := func(ms int64) time.Time {
		if rcv := c.Record.ReceivedAt; rcv > 0 && ms > rcv {
			ms = rcv
		}
		return time.UnixMilli(ms)
	}
	var found []expect.Event
	started := c.Prev.Status != apollo.StatusRunning && !c.Prev.Status.Final()
	if (t.Status == apollo.StatusRunning || t.Status.Final()) && started {
		run.At = at(cmp.Or(t.StartedAt, t.FinishedAt, c.Record.Ts))
		if rcv := c.Record.ReceivedAt; rcv > 0 {
			run.Received = time.UnixMilli(rcv)
		}
		found = append(found, x.ev.Started(run)...)
		x.learn.Started(run)
		run.Received = time.Time{}
	}
	if t.Status == apollo.StatusManualBlocked && c.Prev.Status == apollo.StatusNone {
		// Not run, on purpose, when it was due: the skip settles its
		// expected run. Only a first report: a run that waited (a retry
		// in its backoff) and was blocked later, when its scheduler
		// stopped, was not the run due then.
		run.At = at(c.Record.Ts)
		found = append(found, x.ev.Skipped(run)...)
	}
	if t.Status.Final() && !c.Prev.Status.Final() {
		run.At, run.Status = at(cmp.Or(t.FinishedAt, c.Record.Ts)), t.Status
		run.Duration = time.Duration(t.CostMs) * time.Millisecond
		// Ends of one millisecond count in the order of the log, live
		// and in a replay, which applies tasks in parallel.
		run.Seq = c.LSN
		found = append(found, x.ev.Finished(run)...)
		x.learn.Finished(run)
	}
	// live is stored after tellHeld is set (start): read it first.
	moved := x.live.Load() && x.tellHeld != nil && t.Status.Final() && !c.Prev.Status.Final()
	if len(found) > 0 || moved {
		x.mu.Lock()
		if moved && x.sets[t.Tenant] != nil && x.sets[t.Tenant].IsUpstream(t.Name) {
			x.heldMoved.Store(true)
			x.nudgeLocked()
		}
		x.queueLocked(found)
		x.mu.Unlock()
	}
}

// nudgeLocked wakes the loop; x.mu is held.
func (x *expectations) nudgeLocked() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// queueLocked hands evs to the loop; x.mu is held.
func (x *expectations) queueLocked(evs []expect.Event) {
	if testFindings != nil {
		testFindings(evs, false)
	}
	if len(evs) == 0 {
		return
	}
	if !x.live.Load() {
		for _, ev := range evs {
			x.unactedLocked(ev)
		}
		return
	}
	for _, ev := range evs {
		x.pendLocked(ev)
	}
	x.found = append(x.found, evs...)
	x.nudgeLocked()
}

// HeldBy implements alert.Holder: the upstream jobs whose trouble job's
// alerts are echoes of, and the job itself while it flaps.
func (x *expectations) HeldBy(tenant, job string) []string {
	causes := x.ev.InhibitedBy(tenant, job)
	var by []string
	for _, c := range causes {
		by = append(by, c.Job)
	}
	if x.ev.Flapping(tenant, job) {
		by = append(by, job)
	}
	return by
}

// learnFor is how long the learner keeps a job that no longer runs.
const learnFor = 30 * 24 * time.Hour

// start runs the loop: it ticks the evaluator every interval on the
// clock, acts on what it finds, and looks at the file every 2 s. The
// tickers are armed before it returns.
func (x *expectations) start(b expectBus, occur func(alert.Occurrence), held func(redisstore.Held)) error {
	x.bus, x.occur, x.tellHeld = b, occur, held
	x.mu.Lock()
	x.live.Store(true)
	for _, ev := range x.unmarked { // the log has the run, not its mark
		x.found = append(x.found, ev)
		x.pendLocked(ev)
	}
	for _, f := range x.flaps {
		if f.found != nil && f.markedMs < f.found.Slot.UnixMilli() {
			x.found = append(x.found, *f.found)
			x.pendLocked(*f.found)
		}
	}
	x.unmarked, x.flaps = nil, nil
	slices.SortFunc(x.found, func(a, b expect.Event) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Kind, b.Kind))
	})
	if len(x.found) > 0 {
		x.nudgeLocked()
	}
	x.mu.Unlock()
	return x.group.Start(context.Background(), func(context.Context) error {
		tick, poll := x.clock.NewTicker(x.every), x.clock.NewTicker(alert.DefaultPollEvery)
		x.group.Go(func(ctx context.Context) error {
			defer tick.Stop()
			defer poll.Stop()
			x.run(ctx, tick, poll)
			return nil
		})
		return nil
	})
}

// stopLoop ends the loop and waits for it; call it before the bus stops.
func (x *expectations) stopLoop() {
	if err := x.group.Stop(context.Background(), nil); err != nil {
		x.log.Warn("stopping the expectations", "err", err)
	}
}

func (x *expectations) run(ctx context.Context, tick, poll apollo.Ticker) {
	forgot := x.clock.Now()
	for {
		select {
		case <-tick.C():
			now := x.clock.Now()
			x.act(ctx, x.ev.Tick(now))
			x.act(ctx, x.take())
			x.tellHeldJobs(true)
			if !x.unrecorded.Load() {
				x.checked.Store(now.UnixNano())
			}
			if now.Sub(forgot) >= 24*time.Hour {
				// Jobs that stopped make room for new ones in the learner.
				x.learn.ForgetBefore(now.Add(-learnFor))
				forgot = now
			}
		case <-x.wake:
			evs := x.take()
			x.act(ctx, evs)
			x.tellHeldJobs(len(evs) > 0)
		case <-poll.C():
			if x.path != "" && x.changed() {
				x.reload()
			}
		case <-ctx.Done():
			return
		}
	}
}

// tellHeldJobs gives tellHeld every tenant's held jobs when they changed:
// checked when asked to (a tick, a finding) or when a job others depend
// on has finished a run since.
func (x *expectations) tellHeldJobs(check bool) {
	if x.tellHeld == nil || !x.heldMoved.Swap(false) && !check {
		return
	}
	x.mu.Lock()
	sets := maps.Clone(x.sets)
	x.mu.Unlock()
	held := redisstore.Held{}
	for tenant, set := range sets {
		for _, job := range set.Watched() {
			if by := x.HeldBy(tenant, job); len(by) > 0 {
				if held[tenant] == nil {
					held[tenant] = map[string][]string{}
				}
				held[tenant][job] = by
			}
		}
	}
	if x.lastHeld != nil && held.Equal(x.lastHeld) {
		return
	}
	x.lastHeld = held
	x.tellHeld(held)
}
