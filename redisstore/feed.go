package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/rules"
)

// In the three-process mode the bus and the alert processes talk through
// Redis pub/sub (docs/redis.md):
//
//	<prefix>:{changes}:log  bus -> alert: applied status changes, for event rules (a stream)
//	<prefix>:changes        the same, for alert processes of a release before the stream
//	<prefix>:alerts         alert -> bus: alert changes, for the stream
//	<prefix>:alert:commands bus -> alert: acks, silences, rule updates
//	<prefix>:alert:replies  alert -> bus: their outcomes
//
// Pub/sub delivers to whoever listens at the moment: an alert process that
// is down misses changes. The changes therefore go to a stream too
// (changelog.go), which an alert process reads from where it had got to.

// wireChange is what an event rule needs of a change: small on the wire.
type wireChange struct {
	Tenant string        `json:"t,omitempty"`
	Name   string        `json:"n"`
	TaskID string        `json:"id"`
	Status apollo.Status `json:"s"`
	Prev   apollo.Status `json:"p,omitempty"`
	Ts     int64         `json:"ts"`
	// Kind is set on the marks of job expectations, the changes without
	// a new status that go out: a missed start (apollo.KindMissedStart),
	// a run too short or too often (KindTooShort, KindTooOften), the run
	// that made its job flap (KindFlapping), with the record's Reason.
	// The alert processes make them ON: missed, too_short, too_often and
	// flapping occurrences. Flapping marks go apart (changelog.go, field
	// f): a release before them refuses a batch with a kind it does not
	// know.
	Kind   apollo.Kind `json:"k,omitempty"`
	Reason string      `json:"r,omitempty"`
	// LSN is the bus's LSN of the record that made the change (0 from a
	// bus that keeps no mark: a scale-out node). Logged, on the channel,
	// says the change is in the stream too: a reader of the stream passes
	// it over there (a release before the stream ignores both).
	LSN    uint64 `json:"l,omitempty"`
	Logged bool   `json:"x,omitempty"`

	// part and plsn: the partition's feed a scale-out node's change came
	// through, and its LSN there (feedpart.go); not on the wire.
	part *FeedPart
	plsn uint64
	// skip says why a change read from the wire is passed over: a status
	// or kind of a newer release, or damage (changelog_wire.go); empty
	// for one to apply.
	skip string
}

// ChangeFeed writes the bus's status changes in batches (one XADD and
// one PUBLISH per FeedInterval, 100 ms by default, in one MULTI). It is a
// bus observer and never blocks: past MaxQueued waiting changes it drops
// and counts. Given the bus's mark (WithMark), it saves in the same MULTI
// the mark read before the batch was taken: every change up to it is in
// the stream, and a restarted bus replays the changes above it into the
// stream (FeedMark).
type ChangeFeed struct {
	c       redis.UniversalClient
	channel string
	prefix  string
	stream  string
	markKey string
	log     *slog.Logger
	every   time.Duration
	clock   apollo.Clock
	max     int
	maxLen  int64
	mark    func() uint64

	flushMu sync.Mutex  // one flush at a time: the loop's, a checkpoint's (SaveMark), the last
	saved   uint64      // the mark in Redis; with flushMu
	epoch   string      // names the bus's log in the stream (changelog.go); set by Start
	written bool        // saved was written by this process; with flushMu
	parts   []*FeedPart // a scale-out node's partitions (feedpart.go); with flushMu
	frozen  bool        // a change was dropped: the mark in Redis no longer moves; with mu

	mu      sync.Mutex
	buf     []wireChange
	life    lifecycle.Group // the publishing loop
	dropped atomic.Int64
	sent    atomic.Int64
	errors  atomic.Int64
}

// NewChangeFeed returns a feed publishing on <prefix>:changes.
func NewChangeFeed(c redis.UniversalClient, prefix string, log *slog.Logger) *ChangeFeed {
	if log == nil {
		log = slog.Default()
	}
	return &ChangeFeed{c: c, channel: prefix + ":changes", prefix: prefix, stream: changeLogKey(prefix), markKey: changeMarkKey(prefix),
		log: log, every: 100 * time.Millisecond, clock: apollo.SystemClock, max: 100_000, maxLen: changeLogLen,
		life: lifecycle.Group{Name: "redisstore: change feed"}}
}

// WithMark gives the feed the bus's live watermark (bus.Bus.LiveWatermark):
// the changes carry their LSN, and the feed saves the mark with each
// batch. Call it before Start. A feed of several buses (a scale-out node's
// partitions, each with its own LSNs) has none.
func (f *ChangeFeed) WithMark(mark func() uint64) *ChangeFeed {
	f.mark = mark
	return f
}

// WithClock makes the publishing loop tick on clock (default: the system
// clock). Call it before Start.
func (f *ChangeFeed) WithClock(clock apollo.Clock) *ChangeFeed {
	f.clock = clock
	return f
}

// Apply queues a status change (bus.Observer).
func (f *ChangeFeed) Apply(c *apollo.Change) {
	f.apply(c, func(w *wireChange) bool {
		if f.mark != nil {
			w.LSN = c.LSN
		}
		return true
	})
}

// apply queues c if it is a status change or a mark, and keep, called
// with mu held, says so.
func (f *ChangeFeed) apply(c *apollo.Change, keep func(*wireChange) bool) {
	mark := c.Record.Kind.Mark()
	if c.Task.Status == c.Prev.Status && !mark {
		return
	}
	w := wireChange{Tenant: c.Task.Tenant, Name: c.Task.Name, TaskID: c.Task.TaskID, Status: c.Task.Status, Prev: c.Prev.Status, Ts: c.Record.Ts}
	if mark {
		w.Kind, w.Reason = c.Record.Kind, c.Record.Reason
	}
	f.mu.Lock()
	if !keep(&w) {
		f.mu.Unlock()
		return
	}
	if len(f.buf) >= f.max {
		f.frozen = true
		f.mu.Unlock()
		f.dropped.Add(1)
		return
	}
	f.buf = append(f.buf, w)
	f.mu.Unlock()
}

// Start publishes on the clock until Stop. With a mark, it saves the mark
// first: a bus that never wrote one (the first start of this release)
// replays nothing into the stream, and from now on has one.
func (f *ChangeFeed) Start(ctx context.Context) error {
	return f.life.Start(ctx, func(ctx context.Context) error {
		if f.mark != nil {
			f.epoch = f.logEpoch(ctx)
		}
		_ = f.flush(ctx) // an error is logged; the loop tries again
		f.life.Tick(f.clock, f.every, func(ctx context.Context) { f.flush(ctx) })
		return nil
	})
}

// Stop publishes what is queued and stops; it returns that publish's
// error. It is idempotent.
func (f *ChangeFeed) Stop(ctx context.Context) error {
	return f.life.StopThen(ctx, func() error { return f.flush(context.Background()) })
}

// SaveMark writes what is queued and the mark now: a checkpoint calls it
// before it keeps its snapshot, since the next start replays only the log
// after it.
func (f *ChangeFeed) SaveMark(ctx context.Context) error { return f.flush(ctx) }

func (f *ChangeFeed) flush(ctx context.Context) error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	var mark uint64
	if f.mark != nil {
		mark = f.mark() // before the batch is taken: every change up to it is in it or sent
	}
	parts := f.partMarks() // likewise
	f.mu.Lock()
	batch := f.buf
	f.buf = nil
	frozen := f.frozen
	if frozen {
		mark = 0
	}
	f.mu.Unlock()
	save := f.mark != nil && (mark > f.saved || !f.written && mark == f.saved && !f.frozenNow())
	if frozen {
		parts = nil // the marks stop where they are: what was dropped is above them
	}
	parts = f.partSaves(parts, batch)
	saveParts := slices.ContainsFunc(parts, func(m partMark) bool { return m.value != "" && m.value != m.fp.saved })
	if len(batch) == 0 && !save && !saveParts {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	pipe := f.c.TxPipeline()
	if len(batch) > 0 {
		changes, flaps := splitFlapping(batch)
		data, _ := json.Marshal(changes)
		values := []any{"v", changeLogVersion, "e", f.epoch, "m", mark, "b", data}
		if len(flaps) > 0 {
			data, _ = json.Marshal(flaps)
			values = append(values, "f", data)
		}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: f.stream, MaxLen: f.maxLen, Approx: true, Values: values})
		if len(changes) > 0 {
			for i := range changes {
				changes[i].Logged = true
			}
			data, _ = json.Marshal(changes)
			pipe.Publish(ctx, f.channel, data)
		}
		for _, w := range flaps { // for alert processes of a release before the marks
			data, _ = json.Marshal(wireFinding{Tenant: w.Tenant, Job: w.Name, Kind: rules.OccurrenceFlapping.String(),
				At: w.Ts, Detail: w.Reason, Logged: true})
			pipe.Publish(ctx, findingsChannel(f.prefix), data)
		}
	}
	if save {
		pipe.Set(ctx, f.markKey, strconv.FormatUint(mark, 10)+" "+f.epoch, 0)
	}
	for _, m := range parts {
		if m.value != "" && m.value != m.fp.saved {
			pipe.HSet(ctx, changePartsKey(f.prefix), m.fp.name, m.value)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		f.errors.Add(1)
		f.requeue(batch)
		f.log.Warn("writing changes for the alert processes failed; kept to be written again", "changes", len(batch), "err", err)
		return fmt.Errorf("redisstore: writing %d changes: %w", len(batch), err)
	}
	if save {
		f.saved, f.written = mark, true
	}
	savedParts(parts)
	f.sent.Add(int64(len(batch)))
	return nil
}

// splitFlapping parts a batch into the changes the stream's field b and
// the channel <p>:changes carry, and the flapping marks, which go in the
// field f and on <p>:findings: a reader of a release before the flapping
// mark refuses a whole batch with a kind it does not know, and hears of
// flapping on <p>:findings.
func splitFlapping(batch []wireChange) (changes, flaps []wireChange) {
	changes = make([]wireChange, 0, len(batch))
	for _, w := range batch {
		if w.Kind == apollo.KindFlapping {
			flaps = append(flaps, w)
		} else {
			changes = append(changes, w)
		}
	}
	return changes, flaps
}

func (f *ChangeFeed) frozenNow() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

// requeue puts a batch that could not be written back in front of the
// queue; past MaxQueued it is dropped, counted, and the mark in Redis
// stops: the bus's next start replays it into the stream.
func (f *ChangeFeed) requeue(batch []wireChange) {
	for i := range batch {
		batch[i].Logged = false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(batch)+len(f.buf) > f.max {
		f.frozen = true
		f.dropped.Add(int64(len(batch)))
		return
	}
	f.buf = append(batch, f.buf...)
}

// FeedStats counts what a feed published, dropped and failed.
type FeedStats struct {
	Sent    int64 `json:"sent"`
	Dropped int64 `json:"dropped"`
	Errors  int64 `json:"errors"`
}

// Stats returns the feed's counters.
func (f *ChangeFeed) Stats() FeedStats {
	return FeedStats{Sent: f.sent.Load(), Dropped: f.dropped.Load(), Errors: f.errors.Load()}
}

// SubscribeChannel hands the follower's apply every change the buses
// publish on <prefix>:changes until stop is called (stop waits for the
// delivering goroutine). It returns once subscribed; go-redis resubscribes
// by itself after a lost connection. Those a bus also wrote to the log
// (Logged) are passed over: the follower reads them there; this hears a
// bus of a release before the log. What does not read — a message that
// is not a batch of changes, a change of a status or kind of a newer
// release — is passed over, counted with the log's (Stats:
// changes.passedOver in the alert process's heartbeat), and logged one
// line a minute with how many were held back: before, it went without a
// trace, and an alert process that heard nothing of a bus could not say
// why.
func (f *ChangeFollower) SubscribeChannel(ctx context.Context) (stop func(), err error) {
	return subscribe(ctx, f.c, f.channel, f.fromChannel)
}

// fromChannel applies one message of the channel, a batch of changes.
func (f *ChangeFollower) fromChannel(payload string) {
	var batch []wireChange
	if err := json.Unmarshal([]byte(payload), &batch); err != nil {
		f.passOverChannel("", "", "not a batch of changes: "+clip(err.Error()))
		return
	}
	for _, w := range batch {
		switch {
		case w.Logged: // in the log too
		case w.skip != "": // passed over alone, the rest of the batch applied
			f.passOverChannel(w.Tenant, w.Name, w.skip)
		default:
			f.apply(w.change())
		}
	}
}

// passOverChannel counts a change of the channel that did not read, and
// logs it unless a line went out in the last minute.
func (f *ChangeFollower) passOverChannel(tenant, job, why string) {
	f.passed.Add(1)
	if ok, held := f.logs.Allow("channel", f.clock.Now()); ok {
		f.log.Warn("a change published on "+f.channel+" does not read and was passed over: a bus of a newer release, or another program, publishes there; "+
			"upgrade this alert process, or stop what else publishes. All are counted (changes.passedOver in its heartbeat)",
			"tenant", tenant, "job", job, "why", why, "suppressed", held)
	}
}

func (w *wireChange) change() *apollo.Change {
	return &apollo.Change{
		LSN:    w.LSN,
		Record: apollo.Record{Event: apollo.Event{TaskID: w.TaskID, Name: w.Name, Tenant: w.Tenant, Status: w.Status, Ts: w.Ts}, Kind: w.Kind, Reason: w.Reason},
		Prev:   apollo.Before{Status: w.Prev},
		Task:   apollo.Task{TaskID: w.TaskID, Name: w.Name, Tenant: w.Tenant, Status: w.Status},
	}
}

// alertsLostPayload, published on <p>:alerts in place of an alert, says
// that alert changes were lost before it: the engine dropped the
// publisher for falling behind (a storm), and it subscribed again.
const alertsLostPayload = "lost"

// PublishAlerts publishes every alert change of the subscriptions it
// takes with subscribe, until stop is called; stop ends the subscription
// and waits. When the engine drops a subscription for falling behind
// (its channel closes: an alert storm), it subscribes again and
// publishes alertsLostPayload, for the buses' streams to have their
// clients read the alerts again, once save (the engine's Save: the
// leader writes the alerts to Redis) has returned. Before, it stopped
// publishing for good at the first storm
// (TestAlertsLostInAStormReachTheBusStream).
func PublishAlerts(ctx context.Context, c redis.UniversalClient, prefix string, subscribe func() (<-chan apollo.Alert, func()), save func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		alerts, unsubscribe := subscribe()
		defer func() { unsubscribe() }()
		for {
			select {
			case a, ok := <-alerts:
				if ok {
					data, _ := json.Marshal(a)
					_ = c.Publish(ctx, prefix+":alerts", data).Err() // the bus re-reads the state on reconnect
					continue
				}
			case <-ctx.Done():
				return
			}
			// Subscribed again before the save, and the save before the
			// word: a bus that reads the alerts again on it reads what the
			// changes lost made (the leader saves them to Redis), and
			// hears every change after. Before, the word went first and the
			// save came at the end of the cycle: a bus read the alerts of
			// before the storm, and never heard of the ones it lost
			// (TestTUIReadsAlertsAgainAfterAStorm, three processes); the
			// changes between the drop and the new subscription were lost
			// without a word.
			unsubscribe()
			alerts, unsubscribe = subscribe()
			if save != nil {
				_ = save(ctx) // a failed save is the engine's to log; the word goes anyway
			}
			_ = c.Publish(ctx, prefix+":alerts", alertsLostPayload).Err()
		}
	}()
	return func() { cancel(); <-done }
}

// AlertFeed gives the bus's stream the alert changes the alert processes
// publish (httpapi.AlertSource).
type AlertFeed struct {
	c      redis.UniversalClient
	prefix string
	ctx    context.Context
}

// NewAlertFeed returns a feed that lives until ctx ends.
func NewAlertFeed(ctx context.Context, c redis.UniversalClient, prefix string) *AlertFeed {
	return &AlertFeed{c: c, prefix: prefix, ctx: ctx}
}

// SubscribeAlerts implements httpapi.AlertSource. Its channel closes
// when changes were lost: the reader fell behind, or an alert process
// said it lost some (alertsLostPayload); the reader subscribes again and
// reads the alerts again (stream.Hub).
func (f *AlertFeed) SubscribeAlerts() (<-chan apollo.Alert, func()) {
	out := make(chan apollo.Alert, 256)
	ctx, cancel := context.WithCancel(f.ctx)
	lost := false // fn runs on one goroutine
	stop, err := subscribe(ctx, f.c, f.prefix+":alerts", func(payload string) {
		if lost {
			return
		}
		if payload == alertsLostPayload {
			lost = true
			close(out)
			return
		}
		var a apollo.Alert
		if json.Unmarshal([]byte(payload), &a) != nil {
			return
		}
		select {
		case out <- a:
		default:
			lost = true
			close(out)
		}
	})
	if err != nil {
		cancel()
		return out, func() {}
	}
	return out, func() { cancel(); stop() }
}

// subscribe calls fn for each message on channel, in a goroutine, until
// ctx ends or stop is called; stop waits for the goroutine. It returns once
// the subscription is confirmed.
func subscribe(ctx context.Context, c redis.UniversalClient, channel string, fn func(payload string)) (stop func(), err error) {
	ps := c.Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case m, ok := <-ch:
				if !ok {
					return
				}
				fn(m.Payload)
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}
