package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apollo-11/apollo"
)

// Result and Outcome are the answer to one published event: the domain's
// types (apollo.Result), named here for the bus's callers.
type (
	Result  = apollo.Result
	Outcome = apollo.Outcome
)

// The results, as the bus's callers name them.
const (
	Accepted   = apollo.ResultAccepted
	Held       = apollo.ResultHeld
	Duplicate  = apollo.ResultDuplicate
	Rejected   = apollo.ResultRejected
	RetryLater = apollo.ResultRetryLater
	Waiting    = apollo.ResultWaiting
)

// Invalid is the outcome of an event that failed a check (Event.Validate):
// rejected, with the *apollo.Error found in err's chain, so that a wrapped
// error still says what was wrong instead of panicking an assertion. Any
// other error is reported as invalid input with its text.
func Invalid(err error) Outcome {
	var e *apollo.Error
	if !errors.As(err, &e) {
		e = &apollo.Error{Code: apollo.EINVALID, Message: err.Error()}
	}
	return Outcome{Result: Rejected, Err: e}
}

// decision is the outcome of deciding one record, plus what must happen
// after the shard lock is released.
type decision struct {
	Outcome
	lsn     uint64
	refusal *Refusal
}

// Publish decides every event in evs (setting out[i] for evs[i]), and
// returns once the accepted ones are durable. Events must carry their tenant;
// Publish does not change evs. An error means the log failed: nothing in
// this call may be reported as accepted.
//
// A task ID that begins with MissedPrefix is refused: those name the
// missed runs the bus records itself (RecordMissed), and a reporter that
// took one could hide a missed run or rewrite it.
func (b *Bus) Publish(ctx context.Context, evs []apollo.Event, out []Outcome) error {
	return b.publish(ctx, evs, out, false)
}

// publish is Publish; own says the events are the bus's own (missed runs),
// which may use the reserved task IDs.
func (b *Bus) publish(ctx context.Context, evs []apollo.Event, out []Outcome, own bool) error {
	if len(out) < len(evs) {
		panic("bus: Publish needs one Outcome per event")
	}
	last, refusals := b.decideAll(evs, out, own)
	b.reportRefusals(refusals)
	return b.waitLog(ctx, last)
}

// decideAll decides every event of a Publish call and returns the highest
// LSN it appended and the refusals to report.
func (b *Bus) decideAll(evs []apollo.Event, out []Outcome, own bool) (uint64, []Refusal) {
	var last uint64
	var refusals []Refusal
	var refusedTasks map[key]struct{} // allocated only when something is refused
	rec := recPool.Get().(*[]byte)
	defer recPool.Put(rec)
	sc := scratch{rec: (*rec)[:0]}
	defer func() { *rec = sc.rec[:0] }()
	now := b.nowMs()
	b.pause.RLock()
	defer b.pause.RUnlock()
	for i := range evs {
		k := key{tenant: evs[i].Tenant, id: evs[i].TaskID}
		_, earlierRefused := refusedTasks[k]
		sc.left = len(evs) - i
		d := b.publishOne(&evs[i], now, earlierRefused, own, &sc)
		out[i] = d.Outcome
		if d.lsn > last {
			last = d.lsn
		}
		if d.Result == RetryLater {
			// Every event answered retry_later counts, not one per task:
			// the counter must say how much a reporter has to resend.
			b.stats.refused.Add(1)
			if refusedTasks == nil {
				refusedTasks = map[key]struct{}{}
			}
			refusedTasks[k] = struct{}{}
		}
		if d.refusal != nil {
			refusals = append(refusals, *d.refusal)
		}
	}
	return last, refusals
}

// waitLog returns once the log is durable up to last (0: nothing was
// appended). An error that is not the caller's patience fails the log.
func (b *Bus) waitLog(ctx context.Context, last uint64) error {
	if last == 0 || b.opts.Log == nil {
		return nil
	}
	if err := b.opts.Log.Wait(ctx, last); err != nil {
		if ctx.Err() == nil { // the log failed, not the caller's patience
			b.failLog(err)
		}
		return fmt.Errorf("bus: waiting for the log: %w", err)
	}
	return nil
}

// publishOne decides one event of a Publish call; b.pause is held for
// reading. earlierRefused says that an earlier event of its task in the
// same call was not stored; own, that the event is the bus's own.
func (b *Bus) publishOne(ev *apollo.Event, now int64, earlierRefused, own bool, sc *scratch) decision {
	switch {
	case b.closed.Load():
		return decision{Outcome: Outcome{Result: RetryLater, Err: &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the server is shutting down", Hint: "resend this event later"}}}
	case b.logFailed.Load() != nil:
		// Not even "duplicate": the event it duplicates may not be on disk.
		return decision{Outcome: Outcome{Result: RetryLater, Err: errLogFailed}}
	}
	err := ev.Validate()
	if err == nil && !own && strings.HasPrefix(ev.TaskID, MissedPrefix) {
		err = &apollo.Error{Code: apollo.EINVALID, Field: "taskID",
			Message: fmt.Sprintf("task IDs that begin with %q are Apollo-11's own: they name the missed runs of job expectations", MissedPrefix),
			Hint:    "give the run an ID of your own that does not begin with " + MissedPrefix}
	}
	if err != nil {
		b.stats.invalid.Add(1)
		return decision{Outcome: Invalid(err)}
	}
	if earlierRefused {
		// A later event of a task whose earlier event was refused must not
		// overtake it: refuse it too, so the reporter resends both in order.
		const reason = "an earlier event of this task in the request was not stored"
		return decision{
			Outcome: Outcome{Result: RetryLater, Err: &apollo.Error{Code: apollo.ETOOMANY, Message: "not stored: " + reason, Hint: "resend it after the earlier one"}},
			refusal: &Refusal{Tenant: ev.Tenant, TaskID: ev.TaskID, Reason: reason},
		}
	}
	rec := apollo.Record{Event: *ev, Kind: apollo.KindReport, ReceivedAt: now}
	return b.decide(&rec, false, sc)
}

// scratch is what the decisions of one Publish call share: the log
// encoding of one record, reused, and room for the call's changes,
// allocated a chunk at a time instead of one by one (a Change is 408
// bytes, the largest allocation of an event). A chunk lives as long as
// the last of its changes is held by an observer or subscriber: they are
// delivered together, within milliseconds.
//
// In replay, where the observers are called inline and keep nothing
// (Observer), one change is reused for every record a worker decides.
type scratch struct {
	lsn     uint64 // replay: the LSN of the record being decided
	rec     []byte
	changes []apollo.Change
	left    int            // events of the call not yet decided: a chunk needs no more room
	reuse   *apollo.Change // replay: the one change, rewritten for every record
}

// recPool keeps the log encodings of records between Publish calls: a
// call of one event regrew a fresh buffer three times to encode it.
var recPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// changeChunk bounds a chunk of changes: 80 × 408 bytes, under the 32 KiB
// above which the runtime allocates an object on its own pages.
const changeChunk = 80

// change returns room for one change: from the chunk, or, with no
// scratch (replay, the bus's own records), on its own.
func (sc *scratch) change() *apollo.Change {
	if sc == nil {
		return new(apollo.Change)
	}
	if sc.reuse != nil {
		return sc.reuse
	}
	if len(sc.changes) == 0 {
		sc.changes = make([]apollo.Change, min(max(sc.left, 1), changeChunk))
	}
	c := &sc.changes[0]
	sc.changes = sc.changes[1:]
	return c
}

// recBuf returns the record buffer to reuse, or nil without a scratch.
func (sc *scratch) recBuf() *[]byte {
	if sc == nil {
		return nil
	}
	return &sc.rec
}

var errLogFailed = &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the server's log failed; it must restart",
	Hint: "resend this event once the server is back"}

// failLog makes the bus refuse everything from now on: events accepted in
// memory since the last durable point may be lost, so answering anything
// (even "duplicate") could make a reporter drop an event for good. The
// process restarts and recovers what is on disk; reporters resend the rest.
func (b *Bus) failLog(err error) {
	if b.logFailed.CompareAndSwap(nil, &err) {
		b.log.Error("the log failed: refusing every event until the process restarts and recovers", "err", err)
		if b.opts.OnLogFailed != nil {
			b.opts.OnLogFailed(err)
		}
	}
}

func (b *Bus) reportRefusals(rs []Refusal) {
	for _, r := range rs {
		if ok, n := b.warn.Allow("", b.opts.Clock.Now()); ok {
			b.log.Warn("event refused, not stored; the reporter must resend it",
				"tenant", r.Tenant, "task", r.TaskID, "reason", r.Reason, "suppressed", n)
		}
		if b.opts.OnRefused != nil {
			b.opts.OnRefused(r)
		}
	}
}

// decide takes one record through idempotence, the transition table,
// reordering and capacity, and applies it when it may. In replay the record
// is already in the log, and capacity is not checked: it was accepted once.
func (b *Bus) decide(r *apollo.Record, replay bool, sc *scratch) decision {
	k := key{tenant: r.Tenant, id: r.TaskID}
	s, h := b.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()

	t := s.get(h, k)
	cur := apollo.StatusNone
	var seq int64
	if t != nil {
		if !replay {
			// Waits that ended before this event are settled first, and
			// logged before it: replay then sees the same state.
			if err := b.endWaits(s, k, t, r.ReceivedAt); err != nil {
				return decision{Outcome: Outcome{Result: RetryLater, Err: errLogRefused}}
			}
		}
		cur, seq = t.status, t.seq
		// Before the duplicate check: a reporter whose task ID was taken
		// by another job hears so, not "duplicate".
		if d, refused := b.checkOwner(t, r); refused {
			return d
		}
	} else if last, ok := b.tombs.get(h); ok {
		// The task finished and left memory; it is final, so nothing new applies.
		if r.Sequence <= last {
			b.stats.duplicate.Add(1)
			return decision{Outcome: Outcome{Result: Duplicate}}
		}
		return b.illegal(r, apollo.StatusSuccess, "the task finished and left memory")
	}
	if r.Sequence <= seq {
		b.stats.duplicate.Add(1)
		return decision{Outcome: Outcome{Result: Duplicate}}
	}
	if cur != apollo.StatusNone && r.Sequence-seq > MaxSequenceJump {
		b.stats.invalid.Add(1)
		return decision{Outcome: Outcome{Result: Rejected, Err: &apollo.Error{Code: apollo.EINVALID, Field: "sequence",
			Message: fmt.Sprintf("%d is %d past the task's last sequence %d, over the limit of %d", r.Sequence, r.Sequence-seq, seq, int64(MaxSequenceJump)),
			Hint:    "number a task's events 1, 2, 3, ...; one event must not use up the sequences of the task's later ones"}}}
	}
	legal := apollo.CanTransition(cur, r.Status)
	// An illegal event that skips ahead waits for the missing ones, but only
	// if they could make it legal (never from a final state).
	wait := !legal && r.Sequence > seq+1 && apollo.CanReach(cur, r.Status)
	if !legal && !wait {
		return b.illegal(r, cur, "")
	}
	if wait && t.waits(r.Sequence) {
		return decision{Outcome: Outcome{Result: Waiting}} // a resend: the first copy is on disk
	}
	if !replay {
		if d, refused := b.checkCapacity(t, r); refused {
			return d
		}
	}
	if t == nil {
		// The tenant needs no interning: a live event's is its token's
		// (one string for all), a replayed one's is interned as decoded.
		t = &task{id: k.id, tenant: k.tenant, createdAt: r.ReceivedAt}
		b.addTask(s, h, t)
	}
	var lsn uint64
	if replay {
		lsn = sc.lsn
	} else if b.opts.Log != nil {
		var err error
		if lsn, err = b.append(r, sc.recBuf()); err != nil {
			if t.status == apollo.StatusNone && len(t.waiting()) == 0 {
				b.dropTask(s, h, t)
			}
			var refused *apollo.Error
			if refusedRecord(err) && errors.As(err, &refused) {
				return decision{Outcome: Outcome{Result: Rejected, Err: refused}}
			}
			return decision{Outcome: Outcome{Result: RetryLater, Err: errLogRefused}}
		}
	}
	s.lsn = lsn
	if wait { // ahead of a missing event: wait for it
		b.park(t, r)
		b.stats.parked.Add(1)
		return decision{Outcome: Outcome{Result: Waiting}, lsn: lsn}
	}
	res := b.applyLocked(s, k, t, r, sc.change())
	b.unpark(s, k, t)
	b.stats.accepted.Add(1)
	return decision{Outcome: Outcome{Result: res}, lsn: lsn}
}

// MaxSequenceJump is how far past a live task's last sequence an event's
// may be (docs/protocol.md). It leaves room for sequences that are
// timestamps in milliseconds (34 years between two events) or microseconds
// (12 days), and keeps one event from using up a task's sequence space
// (2^63): a reporter cannot take a run's future with one huge sequence.
const MaxSequenceJump = 1 << 40

// checkOwner refuses an event that names another job than its task's: a
// task belongs to the job of its first event (issue 16.5), so that a
// reporter allowed only some jobs cannot change another job's runs. An
// event without a name belongs to its task's job.
func (b *Bus) checkOwner(t *task, r *apollo.Record) (decision, bool) {
	if r.Name == "" || t.name == "" || r.Name == t.name {
		return decision{}, false
	}
	b.stats.illegal.Add(1)
	return decision{Outcome: Outcome{Result: Rejected, Err: &apollo.Error{Code: apollo.ECONFLICT, Field: "name",
		Message: fmt.Sprintf("task %q belongs to job %q, not %q", r.TaskID, t.name, r.Name),
		Hint:    "a task belongs to the job its first event named; send that name or none, or report a run of another job under a new task ID"}}}, true
}

// refusedRecord reports whether the log refused one record for what it
// is (too large, empty) and wrote nothing: the record is refused, the log
// goes on. Every input is bounded so that no record reaches the log's
// limit; this keeps a bound forgotten from stopping the process (a long
// correction reason once did).
func refusedRecord(err error) bool {
	c := apollo.ErrorCode(err)
	return c == apollo.ETOOLARGE || c == apollo.EINVALID
}

var errLogRefused = &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the log refused the event", Hint: "resend later; the server log says why"}

// checkCapacity refuses an event when the queues or the holding area are
// full, or when a new task would exceed MaxTasks.
func (b *Bus) checkCapacity(t *task, r *apollo.Record) (decision, bool) {
	reason := ""
	switch {
	case t == nil && b.ntasks.Load() >= int64(b.opts.MaxTasks):
		reason = fmt.Sprintf("%d tasks in memory, the limit", b.opts.MaxTasks)
	case t == nil && b.tenantTasks(r.Tenant).Load() >= int64(b.tenantLimit(r.Tenant)):
		reason = fmt.Sprintf("tenant %q has %d", r.Tenant, b.tenantLimit(r.Tenant)) + tenantLimitReason
	case b.queued.Load() >= int64(b.opts.QueueLimit):
		reason = fmt.Sprintf("%d changes queued, the limit", b.opts.QueueLimit)
	case t != nil && len(t.queue()) >= b.opts.TaskQueueLen && b.held.Load() >= int64(b.opts.HoldLimit):
		reason = fmt.Sprintf("holding area full (%d changes)", b.opts.HoldLimit)
	case t != nil && len(t.waiting()) >= maxParkedPerTask && r.Sequence > t.seq+1 && !apollo.CanTransition(t.status, r.Status) && apollo.CanReach(t.status, r.Status):
		reason = fmt.Sprintf("%d out-of-order events already wait for this task", maxParkedPerTask)
	case b.parked.Load() >= int64(b.opts.HoldLimit) && (t == nil || r.Sequence > t.seq+1):
		reason = "too many out-of-order events wait in all"
	default:
		return decision{}, false
	}
	return decision{
		Outcome: Outcome{Result: RetryLater, Err: &apollo.Error{Code: apollo.ETOOMANY, Message: "not stored: " + reason, Hint: "slow down and resend this event"}},
		refusal: &Refusal{Tenant: r.Tenant, TaskID: r.TaskID, Reason: reason},
	}, true
}

// tenantLimitReason ends the reason of a refusal for the tenant's task
// limit (checkCapacity).
const tenantLimitReason = " tasks in memory, its limit"

// OverTenantLimit reports whether o refused an event because its tenant
// has as many tasks in memory as its limit allows (TenantMaxTasks,
// TenantTasks). Unlike the other refusals for room, resending soon does
// not help: room comes as the tenant's tasks leave memory.
func OverTenantLimit(o Outcome) bool {
	return o.Result == RetryLater && o.Err != nil && o.Err.Code == apollo.ETOOMANY &&
		strings.HasPrefix(o.Err.Message, "not stored: tenant ") && strings.HasSuffix(o.Err.Message, tenantLimitReason)
}

func (b *Bus) illegal(r *apollo.Record, from apollo.Status, why string) decision {
	b.stats.illegal.Add(1)
	msg := fmt.Sprintf("illegal transition %s -> %s", from, r.Status)
	if why != "" {
		msg += ": " + why
	}
	if ok, n := b.warn.Allow("", b.opts.Clock.Now()); ok {
		b.log.Warn("event dropped", "tenant", r.Tenant, "task", r.TaskID, "sequence", r.Sequence, "reason", msg, "suppressed", n)
	}
	return decision{Outcome: Outcome{Result: Rejected, Err: &apollo.Error{
		Code: apollo.ECONFLICT, Field: "status", Message: msg,
		Hint: "a task moves pending -> running -> success|failed|timeout; final states change only by manual correction",
	}}}
}

// append writes r to the log. The shard lock is held, so the log's order is
// the decision order for this task.
func (b *Bus) append(r *apollo.Record, scratch *[]byte) (uint64, error) {
	var local []byte
	if scratch == nil {
		scratch = &local
	}
	*scratch = appendRecord((*scratch)[:0], r) // the log copies it
	lsn, err := b.opts.Log.Append(*scratch)
	if err != nil {
		b.stats.logErrors.Add(1)
		if !refusedRecord(err) {
			b.failLog(err)
		}
		return 0, err
	}
	for {
		old := b.lsn.Load()
		if lsn <= old || b.lsn.CompareAndSwap(old, lsn) {
			break
		}
	}
	return lsn, nil
}

// applyLocked applies a decided record to t and queues the change, written
// into c (nil: a new one). It also arms the task's deadlines.
func (b *Bus) applyLocked(s *shard, k key, t *task, r *apollo.Record, c *apollo.Change) Result {
	late := false
	name := t.name
	if name == "" {
		name = r.JobName()
	}
	lat := b.lateness(k.tenant, name)
	if r.Kind.Reported() && r.Status == apollo.StatusRunning && t.status != apollo.StatusRunning && !t.late {
		sched := r.ScheduledAt
		if sched == 0 {
			sched = t.scheduledAt
		}
		late = sched > 0 && r.Ts-sched > lat.StartAfter.Milliseconds()
	}
	if r.Kind == apollo.KindMissedStart {
		late = !t.late
	}
	switch {
	case b.replaying && len(b.opts.Observers) == 0 && !b.live.replaysLive():
		c = nil // nobody would read it: replay hands changes to the observers only
	case c == nil:
		c = new(apollo.Change)
	}
	if t.name == "" { // the first event names the job (decide refuses another)
		t.name = b.names.string(r.JobName())
	}
	wasRunning := t.status == apollo.StatusRunning
	t.apply(c, k, r, late, lat.Timeout.Milliseconds())
	if c != nil {
		c.LSN = s.lsn
	}
	if (t.status == apollo.StatusRunning) != wasRunning {
		b.pings.track(t)
	}
	t.appendHistory(r, b.opts.HistoryLimit)
	b.armDeadlines(k, t, lat)
	return b.enqueue(s, t, c)
}

// enqueue puts c on t's queue and t on the ready list if it is not there.
// During replay, before the workers start, it hands c to the observers
// (not the live ones) directly, on the goroutine that decided it: Replay's caller, or the
// Replayer worker that owns t's shard. One task's changes thus reach the
// observers in log order, one at a time; different tasks' changes may
// arrive concurrently, as from the delivery workers in live operation.
func (b *Bus) enqueue(s *shard, t *task, c *apollo.Change) Result {
	if b.replaying { // c is nil when there are no observers
		for _, o := range b.opts.Observers {
			o.Apply(c)
		}
		if c != nil && c.LSN > b.live.from {
			for _, o := range b.opts.Live {
				o.Apply(c)
			}
		}
		return Accepted
	}
	if b.live.on {
		b.live.queued(c.LSN)
	}
	res := Accepted
	sd := s.sideOf(t)
	if len(sd.q) >= b.opts.TaskQueueLen {
		b.held.Add(1)
		b.stats.held.Add(1)
		res = Held
	}
	sd.q = append(sd.q, c)
	b.queued.Add(1)
	if !t.queued { // its queue may be empty while a worker delivers it: queued says it has one
		t.queued = true
		b.queues.Add(1)
		b.ready.push(readyTask{s: s, t: t})
	}
	return res
}

// commitOwn decides and logs a record the bus writes itself (a timeout, a
// missed start, a mark), if check still holds for the task. It reports
// whether the record was logged and applied: false when the task is gone,
// check fails, or the log refused the record (append has logged why). It
// does not wait for durability: nobody waits for the answer.
func (b *Bus) commitOwn(k key, check func(t *task) bool, build func(t *task) apollo.Record) bool {
	b.pause.RLock()
	defer b.pause.RUnlock()
	if b.closed.Load() {
		return false
	}
	s, h := b.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.get(h, k)
	if t == nil {
		return false
	}
	if err := b.endWaits(s, k, t, b.nowMs()); err != nil || !check(t) {
		return false
	}
	r := build(t)
	s.lsn = 0
	if b.opts.Log != nil {
		lsn, err := b.append(&r, nil)
		if err != nil {
			return false // the deadline is re-armed on restart
		}
		s.lsn = lsn
	}
	b.applyLocked(s, k, t, &r, nil)
	b.unpark(s, k, t)
	return true
}
