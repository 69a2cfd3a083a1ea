package alert

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/keypart"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// lockTimeout bounds one dedup-lock call. Delivery does not inherit the
// caller's context: a notification already decided on is not abandoned
// half-way because a request or the loop was cancelled.
const lockTimeout = 2 * time.Second

// lockBackoff is how long delivery stops asking a Locker that failed: a
// dead Redis must not cost every notification lockTimeout.
const lockBackoff = 10 * time.Second

// Engine evaluates rules into alerts and notifications. Apply, SelfAlert
// and every read method may be called from any goroutine.
//
// Its state is kept by types that each own their lock. A goroutine that
// holds two took them in this order, outer first (docs/architecture.md,
// "Lock order"):
//
//  1. life (its lock): Start and Stop; Start loads the saved state (3, 5, 6).
//  2. evalMu: one Evaluate at a time; it guards cycles and caches.
//  3. silences.mu: one writer of silences at a time; the write is saved
//     (4) before it is confirmed.
//  4. saveMu: one save at a time; the snapshot takes 5 and 6 in turn.
//  5. rate.mu or groups.mu, never both: a cycle holds rate.mu over one
//     tenant's rate rules; Apply, the group timer and SelfAlert hold
//     groups.mu over one change to the event groups.
//  6. resolved.mu: an alert that resolves under 5 is remembered.
//
// sets.mu, subs.mu, owed.mu (taken under 5, with the mark it goes with)
// and the locks of warns, the Locker, the Sender and the StateStore are
// taken last and hold nothing else. Rule sets, silences and
// counters are read without a lock: the first two are replaced, never
// modified.
type Engine struct {
	opts  Options
	clock apollo.Clock
	log   *slog.Logger
	warns *loglimit.Limiter // one line per kind a minute

	sets *ruleSets

	evalMu sync.Mutex // one Evaluate at a time; guards the fields below
	cycles uint64
	caches map[string]*rangeCache // per tenant
	// noRangeCache, set by benchmarks, searches every prefix every cycle.
	noRangeCache bool

	rate     *rateAlerts
	groups   *eventGroups
	resolved *resolvedAlerts
	silences *silenceRegistry
	subs     *subscribers

	owed    *owedNotes    // decided, not yet with the Sender
	carried []handover    // owed by the process before (load): delivered first
	queue   chan handover // event notifications waiting for the lock
	wake    chan struct{} // a group opened: re-arm the group timer
	saveReq chan struct{} // runEvents asks runSaves to save
	dirty   atomic.Bool   // changed since the last save
	saveMu  sync.Mutex    // one save at a time

	life lifecycle.Group // the evaluation loop and the event deliverer

	restored bool     // Restore loaded the state: Start does not
	heard    heardLog // what the saved state had heard of the bus (Restore)

	st counters
}

// entry is one alert the engine is tracking, with its marks.
type entry struct {
	StoredAlert
	seen uint64 // the cycle that last evaluated it (BY: name)
}

type counters struct {
	evaluations, evalErrors                                 atomic.Int64
	sent, deduped, silenced, inhibited, dropped, lockErrors atomic.Int64
	refused                                                 atomic.Int64
	saveErrors                                              atomic.Int64
	lastEval, lastDuration                                  atomic.Int64 // Unix ns, ns
	lockDownUntil                                           atomic.Int64 // Unix ns; the Locker is not asked before it
}

// New checks opts and returns an engine. Call Start to load the saved
// state and run the evaluation loop.
func New(opts Options) (*Engine, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		opts:     opts,
		clock:    opts.Clock,
		log:      opts.Logger.With("component", "alert"),
		warns:    loglimit.New(time.Minute),
		sets:     newRuleSets(),
		caches:   map[string]*rangeCache{},
		rate:     newRateAlerts(),
		groups:   newEventGroups(),
		resolved: newResolvedAlerts(opts.MaxResolved, opts.KeepResolved),
		silences: newSilenceRegistry(),
		subs:     newSubscribers(),
		owed:     newOwedNotes(),
		queue:    make(chan handover, opts.QueueLen),
		wake:     make(chan struct{}, 1),
		saveReq:  make(chan struct{}, 1),
		life:     lifecycle.Group{Name: "alert"},
	}
	if opts.Rules != nil {
		e.SetRules("", opts.Rules)
	}
	return e, nil
}

// Start loads the saved state and starts the evaluation loop (every
// Interval on the clock) and the goroutine that delivers event-rule
// notifications and closes group windows. It returns once they run.
// They run until Stop (docs/architecture.md, "Lifecycle").
func (e *Engine) Start(ctx context.Context) error {
	return e.life.Start(ctx, func(context.Context) error {
		if !e.restored {
			if _, err := e.load(ctx); err != nil {
				return err
			}
		}
		tick := e.clock.NewTicker(e.opts.Interval)
		e.life.Go(func(ctx context.Context) error { e.runEvents(ctx); return nil })
		e.life.Go(func(ctx context.Context) error { e.runSaves(ctx); return nil })
		e.life.Go(func(ctx context.Context) error { e.runLoop(ctx, tick); return nil })
		return nil
	})
}

// Stop ends the loops, hands what event notifications were queued to the
// Sender, waits, and saves the state; it returns the save's error. It
// may be called any number of times; every call returns after the loops
// ended, or when ctx ends. Stop the bus before the engine (no more Apply)
// and the Sender after it (the last notifications are delivered).
func (e *Engine) Stop(ctx context.Context) error {
	return e.life.StopThen(ctx, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return e.save(ctx)
	})
}

func (e *Engine) runLoop(ctx context.Context, tick apollo.Ticker) {
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			// The clock, not the tick's time: a fake clock that jumps
			// delivers one stale tick.
			if err := e.Evaluate(ctx, e.clock.Now()); err != nil && ctx.Err() == nil {
				if ok, n := e.warns.Allow("eval", e.clock.Now()); ok {
					e.log.Warn("alert: evaluation failed; the rules it could not evaluate keep their state", "err", err, "suppressed", n)
				}
			}
		}
	}
}

// save writes the state if it changed since the last save, and returns
// (and logs) the error of a failed one.
func (e *Engine) save(ctx context.Context) error {
	if !e.dirty.Load() {
		return nil
	}
	err := e.persist(ctx)
	if err != nil {
		if ok, n := e.warns.Allow("save", e.clock.Now()); ok {
			e.log.Error("alert: saving the alert state failed; a restart may notify again", "err", err, "suppressed", n)
		}
	}
	return err
}

// snapshot copies everything a StateStore keeps.
func (e *Engine) snapshot() State {
	var s State
	e.rate.each(func(en *entry) { s.Alerts = append(s.Alerts, en.StoredAlert) })
	s.Alerts = e.groups.appendStored(s.Alerts)
	s.Alerts = e.resolved.appendStored(s.Alerts)
	s.Silences = e.silences.all()
	// After the alerts: a mark they carry was made with its notification
	// owed, so the notification is here unless the Sender has it already.
	s.Owed = e.owed.list()
	return s
}

// load installs a saved state: alerts carry on where they were, with
// their marks, so nothing already sent is sent again.
func (e *Engine) load(ctx context.Context) (State, error) {
	s, err := e.opts.State.Load(ctx)
	if err != nil {
		return State{}, fmt.Errorf("alert: start: %w", err)
	}
	now := e.clock.Now()
	for _, a := range s.Alerts {
		switch {
		case a.State == apollo.AlertResolved:
			e.resolved.remember(a.Alert)
		case a.Event:
			e.groups.load(a)
		default:
			e.rate.load(a)
		}
	}
	e.resolved.sortLoaded()
	kept := e.silences.install(s.Silences, now)
	for _, o := range s.Owed {
		e.carried = append(e.carried, e.owed.add(o.Notification, o.LockAsked))
	}
	e.log.Info("alert: state loaded", "alerts", len(s.Alerts), "silences", kept, "owed", len(s.Owed))
	return s, nil
}

// deliver takes the dedup lock for each notification and hands the
// winners to the Sender. A lock that cannot be asked does not stop the
// notification: a rare duplicate is better than a lost alert. A
// notification is owed until the Sender has it (or another engine sent
// it); then the state is marked changed, so that the next save no longer
// lists it as owed. With an OwedStore it is recorded there before its
// lock is asked: a process that takes the lock and dies before the Sender
// has the notification leaves it where another process takes it over.
func (e *Engine) deliver(hs []handover) {
	for _, h := range hs {
		// One owed by the process before, that asked for its lock,
		// does not ask again: that process may hold it.
		if e.opts.DedupWindow > 0 && !e.owed.ask(h.id) {
			e.record(e.owed.get(h.id))
			if !e.lock(&h.n) {
				e.st.deduped.Add(1)
				e.settle(h.id)
				e.dirty.Store(true)
				continue
			}
		}
		e.opts.Sender.Send(h.n)
		e.settle(h.id)
		e.dirty.Store(true)
		e.st.sent.Add(1)
	}
}

// lock takes n's dedup lock and reports whether n may go out.
func (e *Engine) lock(n *apollo.Notification) bool { return e.lockFrom(n, nil) }

// lockFrom is lock for a notification taken over from the dead processes
// from: a lock one of them holds is taken over too (TakeOverLocker).
// After a failure the Locker is left alone for lockBackoff, and
// notifications go out unlocked meanwhile (counted in Stats.LockErrors).
func (e *Engine) lockFrom(n *apollo.Notification, from []string) bool {
	now := e.clock.Now()
	if now.UnixNano() < e.st.lockDownUntil.Load() {
		e.st.lockErrors.Add(1)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	key := LockKeyPrefix + keypart.Escape(n.Alert.Tenant) + ":" + n.DedupKey
	var ok bool
	var err error
	if tl, can := e.opts.Locker.(TakeOverLocker); can && len(from) > 0 {
		ok, err = tl.AcquireFrom(ctx, key, e.opts.DedupWindow, from)
	} else {
		ok, err = e.opts.Locker.Acquire(ctx, key, e.opts.DedupWindow)
	}
	cancel()
	if err == nil {
		return ok
	}
	e.st.lockErrors.Add(1)
	e.st.lockDownUntil.Store(now.Add(lockBackoff).UnixNano())
	if allow, sup := e.warns.Allow("lock", now); allow {
		e.log.Warn("alert: dedup lock failed; sending without it for a while", "err", err, "for", lockBackoff, "suppressed", sup)
	}
	return true
}

// Stats are counters about the engine, for monitoring.
type Stats struct {
	LastEvaluation   time.Time                 `json:"lastEvaluation,omitzero"`
	LastDuration     time.Duration             `json:"lastDuration"` // wall time of the last cycle
	Evaluations      int64                     `json:"evaluations"`
	EvaluationErrors int64                     `json:"evaluationErrors"`
	RateRules        int                       `json:"rateRules"`
	EventRules       int                       `json:"eventRules"`
	Alerts           map[apollo.AlertState]int `json:"alerts"`
	Sent             int64                     `json:"sent"`       // handed to the Sender
	Deduped          int64                     `json:"deduped"`    // another engine (or this one) held the lock
	Silenced         int64                     `json:"silenced"`   // held back by a silence
	Inhibited        int64                     `json:"inhibited"`  // held back as the echo of another job's trouble (Options.Holder)
	Dropped          int64                     `json:"dropped"`    // event notifications over QueueLen
	Refused          int64                     `json:"refused"`    // alerts not opened: their tenant had MaxAlerts open
	LockErrors       int64                     `json:"lockErrors"` // sent without the lock: it failed or was failing
	SaveErrors       int64                     `json:"saveErrors"`
	// Owed: notifications decided (their alerts marked told) and not yet
	// handed to the Sender. It stays near 0; one that grows means the
	// dispatcher or the dedup lock does not keep up.
	Owed int `json:"owed"`
}

// Stats returns the counters and the alerts by state.
func (e *Engine) Stats() Stats {
	s := Stats{
		Evaluations: e.st.evaluations.Load(), EvaluationErrors: e.st.evalErrors.Load(),
		LastDuration: time.Duration(e.st.lastDuration.Load()),
		Sent:         e.st.sent.Load(), Deduped: e.st.deduped.Load(), Silenced: e.st.silenced.Load(), Inhibited: e.st.inhibited.Load(),
		Dropped: e.st.dropped.Load(), Refused: e.st.refused.Load(), LockErrors: e.st.lockErrors.Load(), SaveErrors: e.st.saveErrors.Load(),
		Alerts: map[apollo.AlertState]int{}, Owed: e.owed.len(),
	}
	if ns := e.st.lastEval.Load(); ns != 0 {
		s.LastEvaluation = time.Unix(0, ns)
	}
	for _, set := range e.sets.all() {
		s.RateRules += len(set.rate)
		s.EventRules += set.nEvent
	}
	e.rate.each(func(en *entry) { s.Alerts[en.State]++ })
	s.Alerts[apollo.AlertFiring] += e.groups.count()
	s.Alerts[apollo.AlertResolved] += e.resolved.count()
	return s
}

// newID returns a random alert or silence ID.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
