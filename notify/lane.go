package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// errAttemptTimeout is the cause of an attempt's context when its
// per-attempt timeout (on the dispatcher's clock) ran out.
var errAttemptTimeout = errors.New("attempt timed out")

// item is a notification in a lane's queue.
type item struct {
	n    apollo.Notification
	at   time.Time // when Send took it
	owed uint64    // its outbox entry; 0: none
	// requeued says a process that stopped owed it since at: its
	// give_up_after counts from then, not from this process's first try.
	requeued bool
}

// stoppedReason is why something was not delivered when the lane
// stopped, saying whether the outbox keeps it for the next process.
func stoppedReason(why string, kept bool) string {
	if kept {
		return why + "; kept in the outbox: sent after the restart"
	}
	return why
}

// lane delivers to one channel. Its goroutine reads the queue (each
// tenant's in turn: fairqueue.go) and, for each notification, runs the
// stages in the order of this sentence: wait for the rate limit (folding
// what arrives meanwhile into a digest), then try it, and retry it with
// backoff until it is sent, fails for good, or gives up. Duplicates never
// reach a lane: the alert engine's dedup lock, keyed by tenant and shared
// by every alert process, is the one stage that removes them.
type lane struct {
	d     *Dispatcher
	ch    Channel
	r     *renderer
	queue *fairQueue // each tenant's, up to queue_size each, queue_total in all
	pace  *pacer     // nil: unlimited
	stats counters
	// tests makes test messages (Dispatcher.Test) wait for their turn
	// one at a time.
	tests sync.Mutex
	// testBudget is each tenant's allowance of tests; nil without a rate
	// limit.
	testBudget *testBudget
}

func newLane(d *Dispatcher, ch Channel, r *renderer) *lane {
	pace := newPacer(ch.RatePerMinute)
	return &lane{d: d, ch: ch, r: r, queue: newFairQueue(ch.QueueSize, ch.QueueTotal), pace: pace, testBudget: newTestBudget(pace)}
}

// next waits for the next notification: the tenant's whose turn it is.
func (l *lane) next(ctx context.Context) (item, bool) {
	for {
		if its := l.queue.take(1); len(its) == 1 {
			return its[0], true
		}
		select {
		case <-ctx.Done():
			return item{}, false
		case <-l.queue.wake:
		}
	}
}

func (l *lane) run(ctx context.Context) {
	defer l.dropQueued()
	down := false // the last delivery found the channel down
	for {
		it, ok := l.next(ctx)
		if !ok {
			return
		}
		// What waited while the channel was down goes as one digest,
		// not as a storm of messages in a row; so does what a process
		// that stopped owed (it waited, often for the same outage),
		// though this process has not seen the channel fail.
		batch, backlog := []item{it}, (down || it.requeued) && l.ch.foldsBacklog()
		if backlog {
			batch = append(batch, l.queue.take(l.ch.QueueSize-1)...)
		}
		batch, ok = l.waitTurn(ctx, batch, true)
		if !ok {
			for _, it := range batch {
				l.recordItem(it, OutcomeDropped, stoppedReason("dispatcher stopped", it.owed != 0))
			}
			return
		}
		var m *Message
		m, batch = l.compose(batch, backlog)
		var ended bool
		if ended, down = l.deliver(ctx, m, l.giveUpAt(batch)); ended {
			owed := make([]uint64, len(batch))
			for i, it := range batch {
				owed[i] = it.owed
			}
			l.d.settle(owed...)
		}
	}
}

// waitTurn is the rate-limit stage: it waits on the clock until the
// channel's pace allows another attempt. With collect set, notifications
// that arrive meanwhile join the batch, up to the queue size,
// so that one digest goes out when the turn comes instead of a backlog that
// would keep the channel over its limit. It returns false if ctx ended
// first.
func (l *lane) waitTurn(ctx context.Context, batch []item, collect bool) ([]item, bool) {
	for {
		now := l.d.clock.Now()
		delay := l.pace.delay(now)
		if delay <= 0 {
			delay = l.sharedTurn(ctx, now)
		}
		if delay <= 0 {
			return batch, true
		}
		var ok bool
		if batch, ok = l.waitCollecting(ctx, delay, batch, collect); !ok {
			return batch, false
		}
	}
}

// sharedTurn takes the channel's turn among the processes that share it
// (Options.Turns), and says how long to wait when another process has it.
// When the turns cannot be read, the lane keeps its own pace alone: a
// notification is never held back for want of Redis.
func (l *lane) sharedTurn(ctx context.Context, now time.Time) time.Duration {
	if l.pace == nil || l.d.opts.Turns == nil {
		return 0
	}
	d, err := l.d.opts.Turns.Take(ctx, l.ch.Name, l.pace.every, now)
	if err != nil {
		if ctx.Err() != nil {
			return 0 // stopping: the attempt is cancelled too
		}
		l.d.logLimited(slog.LevelWarn, "turns:"+l.ch.Name, "notify: the rate limit shared with other processes could not be read; keeping this process's own",
			slog.String("channel", l.ch.Name), slog.String("error", err.Error()))
		return 0
	}
	return d
}

func (l *lane) waitCollecting(ctx context.Context, d time.Duration, batch []item, collect bool) ([]item, bool) {
	t := l.d.clock.NewTimer(d)
	defer t.Stop()
	for {
		var wake <-chan struct{}
		if collect && len(batch) < l.ch.QueueSize {
			batch = append(batch, l.queue.take(l.ch.QueueSize-len(batch))...)
		}
		if collect && len(batch) < l.ch.QueueSize {
			wake = l.queue.wake
		}
		select {
		case <-ctx.Done():
			return batch, false
		case <-t.C():
			return batch, true
		case <-wake:
		}
	}
}

// compose renders a batch: one message, or a digest of several; backlog
// says they waited while the channel was down (DigestBacklog). It returns
// the message and the part of batch it carries: a channel whose receiver
// must learn of each (DigestCarrier) gets a digest of what one message
// carries and fits in it, and the rest goes back ahead of its tenants'
// queues for the next turn.
func (l *lane) compose(batch []item, backlog bool) (*Message, []item) {
	if len(batch) == 1 {
		return l.render(batch[0].n, nil), batch
	}
	n := apollo.Notification{Kind: KindDigest, Channels: []string{l.ch.Name}, At: l.d.clock.Now()}
	if backlog {
		n.DedupKey = DigestBacklog
	}
	items := l.renderItems(batch)
	m, items := l.fit(n, items)
	if k := len(items); k < len(batch) {
		l.queue.putBack(batch[k:])
		batch = batch[:k]
		if k == 1 {
			return items[0], batch
		}
	}
	for _, it := range batch {
		l.recordItem(it, OutcomeCoalesced, "")
	}
	return m, batch
}

// fit renders the digest n of items, or, for a DigestCarrier whose
// receiver would not take it (Fits), of the most of the first items
// that it takes, at least one: a body that grows with each notification
// a digest carries (a webhook template that repeats a large field) is
// cut to what its receiver takes, rather than refused whole. It returns
// nil for the message of a single item: that goes on its own.
func (l *lane) fit(n apollo.Notification, items []*Message) (*Message, []*Message) {
	if len(items) == 1 {
		return nil, items
	}
	m := l.render(n, items)
	c, ok := l.ch.Notifier.(DigestCarrier)
	if !ok || c.Fits(m) {
		return m, items
	}
	// The most that fits, between 1 (sent on its own, whatever its size:
	// the notifier says why it cannot be sent) and len(items)-1.
	lo, hi := 1, len(items)-1
	m = nil
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if try := l.render(n, items[:mid]); c.Fits(try) {
			lo, m = mid, try
		} else {
			hi = mid - 1
		}
	}
	clear(items[lo:]) // what is put back is rendered again on its turn
	return m, items[:lo]
}

// renderItems renders the messages of a digest of batch: all of them, or,
// for a DigestCarrier, the first that one message carries. Those it
// renders in rounds that double, so that a backlog of thousands waiting
// for a webhook's turn costs about what one digest carries each turn.
func (l *lane) renderItems(batch []item) []*Message {
	c, ok := l.ch.Notifier.(DigestCarrier)
	first := len(batch)
	if ok {
		first = min(first, 64)
	}
	items := make([]*Message, 0, len(batch))
	for want := first; ; want = min(2*want, len(batch)) {
		for _, it := range batch[len(items):want] {
			items = append(items, l.render(it.n, nil))
		}
		if !ok {
			return items
		}
		if k := min(max(c.CarriesInDigest(items), 1), len(items)); k < len(items) || want == len(batch) {
			clear(items[k:]) // what is put back is rendered again on its turn
			return items[:k]
		}
	}
}

func (l *lane) render(n apollo.Notification, items []*Message) *Message {
	m, err := l.r.render(n, items)
	if err != nil {
		l.d.logLimited(slog.LevelError, "render:"+l.ch.Name, "notify: template failed",
			slog.String("channel", l.ch.Name), slog.String("kind", string(n.Kind)), slog.String("error", err.Error()))
	}
	if m == nil { // the defaults failed too: a bug, but people still hear of the alert
		s := fmt.Sprintf("[%s] %s: %s", n.Kind, n.Alert.Rule, n.Alert.Summary)
		m = &Message{Notification: n, Title: s, Text: s, Markdown: s, Digest: items}
	}
	return m
}

// giveUpAt is when retrying batch stops: give_up_after from the first
// try, or, for a notification a stopped process owed, from when it was
// first owed, so that restarts do not stretch it. A digest gives up once
// every notification in it would have.
func (l *lane) giveUpAt(batch []item) time.Time {
	var last time.Time
	now := l.d.clock.Now()
	for _, it := range batch {
		from := now
		if it.requeued {
			from = it.at
		}
		if end := from.Add(l.ch.GiveUpAfter); end.After(last) {
			last = end
		}
	}
	return last
}

// deliver is the retry stage: it tries m until it is sent, fails for good,
// or the next try would start after deadline. Every try and every
// retryable failure takes a rate-limit token too: they reach the server.
// It reports whether the delivery ended (false: the lane stopped first,
// and what m stands for is still owed), and whether it found the channel
// down (a retryable failure: what waited meanwhile is a backlog).
func (l *lane) deliver(ctx context.Context, m *Message, deadline time.Time) (ended, down bool) {
	for try := 1; ; try++ {
		if try > 1 {
			if _, ok := l.waitTurn(ctx, nil, false); !ok {
				l.record(m, try, OutcomeDropped, stoppedReason("dispatcher stopped while retrying", l.d.opts.Outbox != nil), l.d.clock.Now(), 0)
				return false, true
			}
		}
		r := l.attempt(ctx, m)
		var wait time.Duration
		outcome, msg := OutcomeSent, ""
		if r.err != nil {
			msg = r.err.Error()
			switch {
			case ctx.Err() != nil:
				outcome, msg = OutcomeDropped, stoppedReason("dispatcher stopped: "+msg, l.d.opts.Outbox != nil)
			case !r.retryable:
				outcome = OutcomeFailed
			default:
				// The endpoint's Retry-After, when longer than the backoff:
				// retrying sooner would only be refused again, and a robot
				// API may mute a sender that does not listen.
				wait = max(backoff(try, l.d.randN), askedToWait(r.err))
				outcome = OutcomeRetrying
				if l.d.clock.Now().Add(wait).After(deadline) {
					outcome = OutcomeGaveUp
				}
			}
		}
		l.record(m, try, outcome, msg, r.start, r.latency)
		if outcome != OutcomeRetrying {
			return outcome != OutcomeDropped, try > 1 || outcome == OutcomeGaveUp
		}
		if !l.sleep(ctx, wait) {
			l.record(m, try+1, OutcomeDropped, stoppedReason("dispatcher stopped while retrying", l.d.opts.Outbox != nil), l.d.clock.Now(), 0)
			return false, true
		}
	}
}

// tried is the result of one attempt.
type tried struct {
	start     time.Time
	latency   time.Duration
	retryable bool
	err       error
}

// attempt is the last stage: one call of the notifier, cancelled when the
// per-attempt timeout passes on the dispatcher's clock or the lane stops.
func (l *lane) attempt(ctx context.Context, m *Message) tried {
	actx, cancel := context.WithCancelCause(ctx)
	timer := l.d.clock.NewTimer(l.ch.Timeout)
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		select {
		case <-timer.C():
			cancel(errAttemptTimeout)
		case <-actx.Done():
		}
	}()
	r := tried{start: l.d.clock.Now()}
	l.pace.started(r.start)
	r.retryable, r.err = l.ch.Notifier.Notify(actx, m)
	r.latency = l.d.clock.Now().Sub(r.start)
	timedOut := errors.Is(context.Cause(actx), errAttemptTimeout)
	timer.Stop()
	cancel(nil)
	<-watchdog
	if r.err != nil && timedOut {
		r.err, r.retryable = fmt.Errorf("no answer within %s: %w", l.ch.Timeout, r.err), true
	}
	return r
}

// sleep waits d on the dispatcher's clock; false if ctx ended first.
func (l *lane) sleep(ctx context.Context, d time.Duration) bool {
	t := l.d.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// dropQueued records what is left in the queue when the lane stops.
func (l *lane) dropQueued() {
	for _, it := range l.queue.take(l.queue.len()) {
		l.recordItem(it, OutcomeDropped, stoppedReason("dispatcher stopped", it.owed != 0))
	}
}

func (l *lane) recordItem(it item, outcome, msg string) {
	l.d.record(l, Attempt{Tenant: it.n.Alert.Tenant, AlertID: it.n.Alert.ID, Kind: it.n.Kind, DedupKey: it.n.DedupKey,
		At: l.d.clock.Now(), Outcome: outcome, Error: msg})
}

// record records a try of m. A digest is nobody's alert: its try is
// recorded for each tenant whose notifications it carries, in that
// tenant's delivery record (the first one counts it), so that a tenant
// learns whether what was folded into it went out, and no other tenant
// sees its channel's tries.
func (l *lane) record(m *Message, try int, outcome, msg string, at time.Time, latency time.Duration) {
	n := m.Notification
	a := Attempt{Tenant: n.Alert.Tenant, AlertID: n.Alert.ID, Kind: n.Kind, DedupKey: n.DedupKey,
		At: at, Try: try, Outcome: outcome, Error: msg, Latency: latency}
	if len(m.Digest) == 0 {
		l.d.record(l, a)
		return
	}
	var tenants []string
	for _, it := range m.Digest {
		if t := it.Notification.Alert.Tenant; !slices.Contains(tenants, t) {
			tenants = append(tenants, t)
		}
	}
	for i, t := range tenants {
		a.Tenant = t
		if i == 0 {
			a = l.d.record(l, a)
			continue
		}
		a.ID = l.d.newID()
		l.d.opts.Log.Record(a)
	}
}
