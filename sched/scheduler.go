package sched

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// Options configure a Scheduler. Reporter is required.
type Options struct {
	// Clock is the only time source of the scheduler; default SystemClock.
	Clock apollo.Clock
	// Reporter receives every run's events.
	Reporter Reporter
	// Logger; default slog.Default().
	Logger *slog.Logger
	// StateDir holds the scheduler's state file (the last tick of every
	// job), which catch-up after a restart needs. Empty: no state is kept
	// and missed schedules are never caught up.
	StateDir string
	// Tenant is set on every event, for a scheduler that feeds a bus in the
	// same process (the HTTP API sets the tenant from the token instead).
	Tenant string
	// Owner names who the runs are reported as (apollo sched: a hash of
	// its token, never the token). The state file records it with each
	// run in progress, and a start with another Owner leaves the runs a
	// killed scheduler lost under the old one in the file, for a start
	// with it, instead of reporting them under the new one, which may be
	// another tenant's (lost.go). Empty: the runs of any Owner are
	// settled, as those of a state file that recorded none are.
	Owner string
}

func (o *Options) setDefaults() {
	o.Clock = cmp.Or(o.Clock, apollo.SystemClock)
	o.Logger = cmp.Or(o.Logger, slog.Default())
}

func (o *Options) validate() error {
	if o.Reporter == nil {
		return errors.New("sched: Options.Reporter is nil: pass the agent client, or sched.ReporterFunc to handle events yourself")
	}
	return nil
}

// Scheduler runs the jobs of a jobs file. Start it once, Stop it once;
// every other method is safe to call from any goroutine at any time.
type Scheduler struct {
	clock  apollo.Clock
	log    *slog.Logger
	rep    *reporter
	runner runner
	state  *stateFile // nil without a StateDir
	owner  string     // Options.Owner
	// stateLock holds the state directory from Start to the end of Stop
	// (statelock_unix.go); nil when it could not be taken or there is none.
	stateLock *os.File

	mu     sync.Mutex
	set    *jobSet
	jobs   map[string]*jobState
	gone   map[string]*jobState // jobs removed by a reload while they had runs in progress
	flows  map[string]*flow
	active map[*run]struct{} // every run in progress, of any job
	live   map[*run]liveRun  // the task each run is on, for the state file (lost.go)
	// others are the lost runs of another Owner, kept in the state file
	// for a start with theirs (lost.go); by task ID.
	others   map[string]savedRun
	started  bool
	stopping bool

	wake     chan struct{}   // tells the loop that schedules changed
	stopC    chan struct{}   // closed when Stop begins
	life     lifecycle.Group // the loop
	loopDone chan struct{}   // closed when the loop has ended (tests wait on it)
	runs     sync.WaitGroup  // the runs, which Stop lets finish
	flushes  sync.WaitGroup  // untrack's wait for delivery (lost.go)
	// delivering are the ended runs whose events the reporter has yet to
	// deliver, and awaiting whether awaitDelivery runs (lost.go); under mu.
	delivering []*run
	awaiting   bool
	stopCtx    context.Context // ends when Stop begins: untrack's waits end with it
	stopNow    context.CancelFunc
	killedBy   error // the end of the Stop context that had runs killed

	stateLog *loglimit.Limiter
	saveMu   sync.Mutex // serializes writes of the state file
	saveGen  uint64     // persist calls so far; under mu
	savedGen uint64     // the last of them the file holds; under saveMu

	nRuns, nSkipped, nMissed, nStateErrors atomic.Int64
}

// jobState is what the scheduler knows about one job between runs.
type jobState struct {
	name     string
	j        *job
	next     time.Time // next tick; zero for a downstream job
	lastTick time.Time // the most recent tick handled (run, skipped or paused)
	paused   bool
	active   map[*run]struct{}

	lastTask   string
	lastStatus apollo.Status
	lastAt     time.Time
}

// New returns a scheduler for the jobs of f. It checks f again, so a File
// changed after Parse is held to the same rules.
func New(f *File, opts Options) (*Scheduler, error) {
	opts.setDefaults()
	return newScheduler(f, opts, execRunner{clock: opts.Clock})
}

func newScheduler(f *File, opts Options, r runner) (*Scheduler, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, errors.New("sched: New: nil *File")
	}
	set, issues := f.compile()
	if len(issues) > 0 {
		return nil, fileError(issues)
	}
	s := &Scheduler{
		clock:    opts.Clock,
		log:      opts.Logger,
		rep:      &reporter{to: opts.Reporter, tenant: opts.Tenant, clock: opts.Clock, log: opts.Logger, limit: loglimit.New(logEvery)},
		stateLog: loglimit.New(logEvery),
		runner:   r,
		owner:    opts.Owner,
		flows:    map[string]*flow{},
		active:   map[*run]struct{}{},
		live:     map[*run]liveRun{},
		wake:     make(chan struct{}, 1),
		stopC:    make(chan struct{}),
		life:     lifecycle.Group{Name: "sched"},
		loopDone: make(chan struct{}),
	}
	if opts.StateDir != "" {
		s.state = &stateFile{dir: opts.StateDir}
	}
	s.stopCtx, s.stopNow = context.WithCancel(context.Background())
	s.install(set, time.Time{})
	// The pauses made at run time hold from New, so that what the
	// scheduler says of its jobs before Start (Expectations, which a
	// server puts in force before it replays its log) is what Start will
	// do. Start reads the file again.
	saved, err := s.loadState()
	if err != nil {
		return nil, err
	}
	s.restorePauses(saved.Jobs)
	return s, nil
}

// install makes set the current jobs, keeping the state of jobs that stay.
// A job removed while it has runs in progress keeps its state until they
// end, so that if it comes back meanwhile its concurrency policy still
// sees them. now is zero before Start: next ticks are computed at Start
// then. s.mu is held, or s is not shared yet.
func (s *Scheduler) install(set *jobSet, now time.Time) {
	gone := map[string]*jobState{}
	for name, js := range s.gone {
		if _, back := set.byName[name]; !back && len(js.active) > 0 {
			gone[name] = js
		}
	}
	for name, js := range s.jobs {
		if _, stays := set.byName[name]; !stays && len(js.active) > 0 {
			gone[name] = js
		}
	}
	jobs := make(map[string]*jobState, len(set.jobs))
	for _, j := range set.jobs {
		js, fresh := s.jobs[j.name], false
		if js == nil {
			// New to the file, or back in it while its runs of before go
			// on: then it keeps their state, scheduled and paused as new.
			js, fresh = s.gone[j.name], true
			if js == nil || len(js.active) == 0 {
				js = &jobState{name: j.name, active: map[*run]struct{}{}}
			}
		}
		switch {
		case fresh:
			js.paused, js.lastTick, js.next = j.paused, now, time.Time{}
			if !now.IsZero() && j.sched != nil {
				js.next = j.sched.Next(now)
			}
		case !now.IsZero() && fmt.Sprint(js.j.sched, js.j.loc) != fmt.Sprint(j.sched, j.loc):
			js.next = time.Time{}
			if j.sched != nil {
				js.next = j.sched.Next(now)
			}
		}
		if !fresh && js.j.paused != j.paused {
			js.paused = j.paused // the file changed paused: it wins over Pause/Resume
		}
		js.j = j
		jobs[j.name] = js
	}
	s.set, s.jobs, s.gone = set, jobs, gone
}

// Start loads the state file, catches up missed schedules, and starts the
// scheduling loop. It returns at once; ctx is used only while starting.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.life.Start(ctx, func(context.Context) error {
		if err := s.lockState(); err != nil {
			return err
		}
		s.mu.Lock()
		saved, err := s.loadState()
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.started = true
		s.restorePauses(saved.Jobs)
		settling := s.settleLostLocked(saved.Runs) // before catch-up starts new runs
		s.catchUp(saved.Jobs, s.clock.Now())
		s.mu.Unlock()
		s.saveState()
		if settling { // settleLostLocked kept them only for a flusher
			s.awaitDeliveries(s.rep.to.(flusher))
		}
		s.life.Go(func(context.Context) error { s.loop(); return nil })
		return nil
	})
}

// restorePauses puts back the pauses made with Pause and Resume before the
// restart, for the jobs whose paused field in the file has not changed
// since. s.mu is held.
func (s *Scheduler) restorePauses(saved map[string]savedJob) {
	for name, sj := range saved {
		if js := s.jobs[name]; js != nil && sj.FilePaused == js.j.paused {
			js.paused = sj.Paused
		}
	}
}

// Stop starts no new runs, lets running ones finish (each within its own
// timeout) until ctx is done, then kills the rest (SIGTERM, SIGKILL after
// their kill_grace) and reports them timeout with {"shutdown":true}. It
// returns when every run is reported: with ctx's error if ctx ended
// first. A later call waits for the first and returns ctx's error of the
// call that had runs killed, if any (docs/architecture.md, "Lifecycle").
func (s *Scheduler) Stop(ctx context.Context) error {
	err := s.life.Stop(ctx, s.stopRuns)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// ctx ended before the runs did: kill them, and wait for them to
		// be reported all the same.
		s.mu.Lock()
		if s.killedBy == nil && len(s.active) > 0 {
			s.killedBy = ctx.Err()
		}
		for r := range s.active {
			r.cancel(errShutdown)
		}
		s.mu.Unlock()
		if werr := s.life.Stop(context.Background(), nil); werr != nil {
			return werr
		}
	}
	return err
}

// stopRuns is the stop of the scheduler's lifecycle: no new runs, the
// loop ends, the runs end (Stop kills them when its context ends).
func (s *Scheduler) stopRuns(halt func()) error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	close(s.stopC)
	s.stopNow()
	halt()
	s.runs.Wait()
	s.forgetEnded()
	if s.stateLock != nil {
		unlockStateDir(s.stateLock) // the state is saved: the next scheduler may start
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killedBy
}

// Reload replaces the jobs with those of f. A file with problems is
// rejected with a *FileError and the current jobs keep running. Runs in
// progress finish with the settings they started with; a job whose
// schedule or timezone changed gets its next tick from the new schedule.
// Once started, the state file is written before Reload returns.
func (s *Scheduler) Reload(f *File) error {
	if f == nil {
		return errors.New("sched: Reload: nil *File")
	}
	set, issues := f.compile()
	if len(issues) > 0 {
		return fileError(issues)
	}
	s.mu.Lock()
	now := time.Time{}
	if s.started {
		now = s.clock.Now()
	}
	s.install(set, now)
	s.mu.Unlock()
	if !now.IsZero() {
		// What the reload changed (a job removed forgets its pause and its
		// last tick; one put back is new) is what a restart after a kill
		// must find, not the state saved before it. Before Start the file
		// is not written: its last ticks are what catch-up needs.
		s.saveState()
	}
	s.poke()
	s.log.Info("sched: jobs reloaded", "jobs", len(set.jobs))
	return nil
}

// poke wakes the loop to look at the schedules again.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func notFound(name string) error {
	return &apollo.Error{Code: apollo.ENOTFOUND, Field: "name", Message: fmt.Sprintf("no job named %q", name), Hint: "list the jobs with GET /api/v1/jobs"}
}

// Trigger starts a run of the job now, whatever its schedule and even when
// it is paused; its downstream jobs follow as after a scheduled run. It
// returns the new run's task ID.
func (s *Scheduler) Trigger(name string) (string, error) {
	id, r, err := s.trigger(name)
	if r != nil {
		// Answer once the run is in the state file: a scheduler killed
		// after this answer settles the run at its next start, where one
		// killed before the save would leave a task ID nobody ever sees.
		<-r.tracked
	}
	return id, err
}

func (s *Scheduler) trigger(name string) (string, *run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobs[name]
	switch {
	case js == nil:
		return "", nil, notFound(name)
	case !s.started || s.stopping:
		return "", nil, &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the scheduler is not running", Hint: "try again once it has started"}
	case js.j.policy == ConcurrencyForbid && len(js.active) > 0:
		return "", nil, &apollo.Error{Code: apollo.ECONFLICT, Field: "name", Message: fmt.Sprintf("job %q is running and its concurrency is forbid", name),
			Hint: "wait for the run to finish, or set concurrency: allow or replace"}
	}
	now := s.clock.Now()
	ms := now.UnixMilli()
	for s.flows[manualKey(ms)] != nil {
		ms++ // two triggers in one millisecond still get their own task IDs
	}
	fl := s.newFlowLocked(manualKey(ms), now, []string{name})
	id, r := s.startLocked(fl, name, now, true)
	return id, r, nil
}

// Pause stops the job's scheduled runs until Resume; a run in progress goes
// on. It lasts across reloads and restarts (in the state file, written
// before Pause returns) unless the file's paused field changes.
func (s *Scheduler) Pause(name string) error { return s.setPaused(name, true) }

// Resume undoes Pause. Schedules that passed while paused are not caught up.
func (s *Scheduler) Resume(name string) error { return s.setPaused(name, false) }

// setPaused changes the job and saves the state; a change that cannot be
// saved is undone, so what the caller is told is what a restart finds.
func (s *Scheduler) setPaused(name string, p bool) error {
	s.mu.Lock()
	js := s.jobs[name]
	if js == nil {
		s.mu.Unlock()
		return notFound(name)
	}
	was := js.paused
	js.paused = p
	s.mu.Unlock()
	if err := s.persist(); err != nil {
		s.mu.Lock()
		if js.paused == p {
			js.paused = was
		}
		s.mu.Unlock()
		s.log.Error("sched: a pause could not be saved, so it was undone", "job", name, "paused", p, "err", err)
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Field: "name", Message: fmt.Sprintf("the change to job %q could not be saved, so it was not made", name),
			Hint: "nothing changed; the scheduler's log says why (its state directory); try again"}
	}
	return nil
}

// JobStatus is one line of Jobs (apollo.ScheduledJob).
type JobStatus = apollo.ScheduledJob

// Jobs lists the jobs in file order with their next tick (in the job's
// timezone), the last event of their latest task, and how many runs are in
// progress.
func (s *Scheduler) Jobs() []JobStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JobStatus, 0, len(s.set.jobs))
	for _, j := range s.set.jobs {
		js := s.jobs[j.name]
		st := JobStatus{Name: j.name, After: slices.Clone(j.after), Timezone: j.loc.String(),
			LastTaskID: js.lastTask, LastStatus: js.lastStatus, LastAt: js.lastAt, Paused: js.paused, Running: len(js.active)}
		if j.sched != nil {
			st.Schedule = j.sched.String()
			if !js.next.IsZero() {
				st.Next = js.next.In(j.loc)
			}
		}
		out = append(out, st)
	}
	return out
}

// Stats are the scheduler's counters since New.
type Stats struct {
	Runs         int64 `json:"runs"`         // attempts started
	Skipped      int64 `json:"skipped"`      // runs reported manual_blocked instead of run
	Missed       int64 `json:"missed"`       // catch-up ticks dropped by catchup: skip
	ReportErrors int64 `json:"reportErrors"` // Reporter.Send failures
	StateErrors  int64 `json:"stateErrors"`  // state file read or write failures
}

// Stats returns the counters.
func (s *Scheduler) Stats() Stats {
	return Stats{Runs: s.nRuns.Load(), Skipped: s.nSkipped.Load(), Missed: s.nMissed.Load(),
		ReportErrors: s.rep.failures.Load(), StateErrors: s.nStateErrors.Load()}
}
