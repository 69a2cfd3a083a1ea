package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
)

// In the three-process mode the bus and the alert processes talk through
// Redis pub/sub (docs/redis.md):
//
//	<prefix>:changes        bus -> alert: applied status changes, for event rules
//	<prefix>:alerts         alert -> bus: alert changes, for the stream
//	<prefix>:alert:commands bus -> alert: acks, silences, rule updates
//	<prefix>:alert:replies  alert -> bus: their outcomes
//
// Pub/sub delivers to whoever listens at the moment: an alert process that
// is down misses changes (its event rules then miss those events), which is
// why two alert processes run side by side in production (HA).

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
	// a run too short or too often (KindTooShort, KindTooOften, with the
	// record's Reason). The alert processes make them ON: missed,
	// too_short and too_often occurrences.
	Kind   apollo.Kind `json:"k,omitempty"`
	Reason string      `json:"r,omitempty"`
}

// marks are the record kinds that go out without a new status.
func isMark(k apollo.Kind) bool {
	return k == apollo.KindMissedStart || k == apollo.KindTooShort || k == apollo.KindTooOften
}

// ChangeFeed publishes the bus's status changes in batches (one PUBLISH
// per FeedInterval, 100 ms by default). It is a bus observer and never
// blocks: past MaxQueued waiting changes it drops and counts.
type ChangeFeed struct {
	c       redis.UniversalClient
	channel string
	log     *slog.Logger
	every   time.Duration
	clock   apollo.Clock
	max     int

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
	return &ChangeFeed{c: c, channel: prefix + ":changes", log: log, every: 100 * time.Millisecond, clock: apollo.SystemClock, max: 100_000,
		life: lifecycle.Group{Name: "redisstore: change feed"}}
}

// WithClock makes the publishing loop tick on clock (default: the system
// clock). Call it before Start.
func (f *ChangeFeed) WithClock(clock apollo.Clock) *ChangeFeed {
	f.clock = clock
	return f
}

// Apply queues a status change (bus.Observer).
func (f *ChangeFeed) Apply(c *apollo.Change) {
	mark := isMark(c.Record.Kind)
	if c.Task.Status == c.Prev.Status && !mark {
		return
	}
	w := wireChange{Tenant: c.Task.Tenant, Name: c.Task.Name, TaskID: c.Task.TaskID, Status: c.Task.Status, Prev: c.Prev.Status, Ts: c.Record.Ts}
	if mark {
		w.Kind, w.Reason = c.Record.Kind, c.Record.Reason
	}
	f.mu.Lock()
	if len(f.buf) >= f.max {
		f.mu.Unlock()
		f.dropped.Add(1)
		return
	}
	f.buf = append(f.buf, w)
	f.mu.Unlock()
}

// Start publishes on the clock until Stop.
func (f *ChangeFeed) Start(ctx context.Context) error {
	return f.life.Start(ctx, func(context.Context) error {
		f.life.Tick(f.clock, f.every, func(ctx context.Context) { f.flush(ctx) })
		return nil
	})
}

// Stop publishes what is queued and stops; it returns that publish's
// error. It is idempotent.
func (f *ChangeFeed) Stop(ctx context.Context) error {
	return f.life.StopThen(ctx, func() error { return f.flush(context.Background()) })
}

func (f *ChangeFeed) flush(ctx context.Context) error {
	f.mu.Lock()
	batch := f.buf
	f.buf = nil
	f.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	data, _ := json.Marshal(batch)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := f.c.Publish(ctx, f.channel, data).Err(); err != nil {
		f.errors.Add(1)
		f.dropped.Add(int64(len(batch)))
		f.log.Warn("publishing changes to the alert processes failed; their event rules miss these", "changes", len(batch), "err", err)
		return fmt.Errorf("redisstore: publishing %d changes: %w", len(batch), err)
	}
	f.sent.Add(int64(len(batch)))
	return nil
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

// SubscribeChanges hands every change the buses publish to apply until
// stop is called (stop waits for the delivering goroutine). It returns once
// subscribed; go-redis resubscribes by itself after a lost connection.
func SubscribeChanges(ctx context.Context, c redis.UniversalClient, prefix string, apply func(*apollo.Change)) (stop func(), err error) {
	return subscribe(ctx, c, prefix+":changes", func(payload string) {
		var batch []wireChange
		if json.Unmarshal([]byte(payload), &batch) != nil {
			return
		}
		for _, w := range batch {
			apply(&apollo.Change{
				Record: apollo.Record{Event: apollo.Event{TaskID: w.TaskID, Name: w.Name, Tenant: w.Tenant, Status: w.Status, Ts: w.Ts}, Kind: w.Kind, Reason: w.Reason},
				Prev:   apollo.Before{Status: w.Prev},
				Task:   apollo.Task{TaskID: w.TaskID, Name: w.Name, Tenant: w.Tenant, Status: w.Status},
			})
		}
	})
}

// PublishAlerts publishes every alert change from alerts until it closes.
func PublishAlerts(ctx context.Context, c redis.UniversalClient, prefix string, alerts <-chan apollo.Alert) {
	for a := range alerts {
		data, _ := json.Marshal(a)
		_ = c.Publish(ctx, prefix+":alerts", data).Err() // the bus re-reads the state on reconnect
	}
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

// SubscribeAlerts implements httpapi.AlertSource.
func (f *AlertFeed) SubscribeAlerts() (<-chan apollo.Alert, func()) {
	out := make(chan apollo.Alert, 256)
	ctx, cancel := context.WithCancel(f.ctx)
	stop, err := subscribe(ctx, f.c, f.prefix+":alerts", func(payload string) {
		var a apollo.Alert
		if json.Unmarshal([]byte(payload), &a) != nil {
			return
		}
		select {
		case out <- a:
		default: // a slow reader misses alert changes; the API re-reads the state
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
