package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/wake"
	"github.com/apollo-11/apollo/rules"
)

// Job expectations in the three-process mode (docs/expectations.md): the
// bus process runs the evaluator, and the alert processes need two things
// of it that no run's history carries. Which jobs' alerts are held, and by
// what (an upstream job that is down, or the job's own flapping): the bus
// process writes the whole map to <p>:held whenever it changes and
// publishes it on the channel of the same name, so that an alert process
// reads it at start and follows it after (Holder). And what it found of a
// job rather than a run (flapping): the bus marks the run whose end made
// the job flap, and the change log carries the mark (the field f of its
// entries, changelog.go), so that an alert process that was down hears of
// it when it is back. It goes on <p>:findings too, marked as logged, for
// alert processes of a release before the mark; a flapping whose run the
// bus could not mark goes there alone, as before (SubscribeFindings).

// Held is, per tenant, the jobs whose alerts are held and the jobs that
// hold them (alert.Holder's answers).
type Held map[string]map[string][]string

// Equal reports whether h and o hold the same jobs by the same causes.
func (h Held) Equal(o Held) bool {
	return maps.EqualFunc(h, o, func(a, b map[string][]string) bool {
		return maps.EqualFunc(a, b, slices.Equal[[]string])
	})
}

// SaveHeld writes h as the held jobs of every tenant and tells the alert
// processes.
func SaveHeld(ctx context.Context, c redis.UniversalClient, prefix string, h Held) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	key := prefix + ":held"
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, data, 0)
		p.Publish(ctx, key, data)
		return nil
	})
	return err
}

// Holder answers alert.Holder from the held jobs the bus process writes:
// read at Watch, then followed on the channel.
type Holder struct {
	held    atomic.Pointer[Held]
	changed wake.Wake
}

// set puts v in force and wakes whoever waits on Changed.
func (h *Holder) set(v *Held) {
	h.held.Store(v)
	h.changed.Broadcast()
}

// Changed returns a channel that is closed when the held jobs next
// change: take it before looking at them, then wait on it.
func (h *Holder) Changed() <-chan struct{} { return h.changed.Next() }

// HeldBy implements alert.Holder.
func (h *Holder) HeldBy(tenant, job string) []string {
	if p := h.held.Load(); p != nil {
		return (*p)[tenant][job]
	}
	return nil
}

// Watch subscribes to the held jobs, then reads those saved, so that no
// change between the two is missed; it follows them until stop or ctx
// ends.
func (h *Holder) Watch(ctx context.Context, c redis.UniversalClient, prefix string) (stop func(), err error) {
	key := prefix + ":held"
	set := func(data []byte) {
		var v Held
		if json.Unmarshal(data, &v) == nil {
			h.set(&v)
		}
	}
	stop, err = subscribe(ctx, c, key, func(payload string) { set([]byte(payload)) })
	if err != nil {
		return nil, err
	}
	data, err := c.Get(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		stop()
		return nil, err
	default:
		if h.held.Load() == nil { // a publication since the subscription is newer
			set(data)
		}
	}
	return stop, nil
}

// wireFinding is an alert.Occurrence on the wire.
type wireFinding struct {
	Tenant string `json:"t,omitempty"`
	Job    string `json:"j"`
	Kind   string `json:"k"`
	Run    string `json:"r,omitempty"`
	At     int64  `json:"at"` // Unix ms
	Detail string `json:"d,omitempty"`
	// Logged says it is in the change log too (a flapping mark): a
	// reader of the log passes it over here; a release before ignores it.
	Logged bool `json:"x,omitempty"`
}

func findingsChannel(prefix string) string { return prefix + ":findings" }

// PublishFinding tells the alert processes of o.
func PublishFinding(ctx context.Context, c redis.UniversalClient, prefix string, o alert.Occurrence) error {
	data, err := json.Marshal(wireFinding{Tenant: o.Tenant, Job: o.Job, Kind: o.Kind.String(), Run: o.Run, At: o.At.UnixMilli(), Detail: o.Detail})
	if err != nil {
		return err
	}
	return c.Publish(ctx, findingsChannel(prefix), data).Err()
}

// Findings is a subscription to the findings the bus process publishes
// (SubscribeFindings).
type Findings struct {
	log    *slog.Logger
	occur  func(alert.Occurrence)
	passed atomic.Int64 // findings that did not read (take)
	stop   func()
}

// FindingsStats counts what a subscription to the findings passed over.
type FindingsStats struct {
	// PassedOver: findings that did not read (a kind of a newer release,
	// or not JSON at all) and were not applied.
	PassedOver int64 `json:"passedOver"`
}

// SubscribeFindings calls occur with each finding the bus process
// publishes, until Stop or ctx ends. Those in the change log too are
// passed over: the follower of the log (ChangeFollower) hears them, and
// counts them there if they do not read. A finding that does not read
// here is passed over, the first logged on log (nil: slog's default),
// every one counted (Stats), as the follower does.
func SubscribeFindings(ctx context.Context, c redis.UniversalClient, prefix string, log *slog.Logger, occur func(alert.Occurrence)) (*Findings, error) {
	f := &Findings{log: cmp.Or(log, slog.Default()), occur: occur}
	stop, err := subscribe(ctx, c, findingsChannel(prefix), f.take)
	if err != nil {
		return nil, err
	}
	f.stop = stop
	return f, nil
}

// take applies one finding, or passes it over and counts it.
func (f *Findings) take(payload string) {
	var w wireFinding
	if err := json.Unmarshal([]byte(payload), &w); err != nil {
		f.passOver(w, "not JSON: "+err.Error())
		return
	}
	if w.Logged {
		return
	}
	kind, ok := rules.ParseOccurrence(w.Kind)
	if !ok {
		f.passOver(w, "kind "+strconv.Quote(w.Kind))
		return
	}
	f.occur(alert.Occurrence{Tenant: w.Tenant, Job: w.Job, Kind: kind, Run: w.Run, At: time.UnixMilli(w.At), Detail: w.Detail})
}

// passOver counts a finding that did not read, and logs the first: one
// a flapping job would fill the log.
func (f *Findings) passOver(w wireFinding, why string) {
	if f.passed.Add(1) == 1 {
		f.log.Warn("a finding of the bus does not read and was passed over: a bus of a newer release publishes what this alert process does not know; upgrade it. "+
			"Those after are counted (findings.passedOver in its heartbeat), not logged",
			"tenant", w.Tenant, "job", w.Job, "run", w.Run, "why", why)
	}
}

// Stats returns the subscription's counters.
func (f *Findings) Stats() FindingsStats {
	return FindingsStats{PassedOver: f.passed.Load()}
}

// Stop ends the subscription and waits for its goroutine.
func (f *Findings) Stop() { f.stop() }
