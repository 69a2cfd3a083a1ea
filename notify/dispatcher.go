package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// DefaultLogSize is how many Attempts of each tenant the default
// AttemptLog keeps.
const DefaultLogSize = 10000

// Options configure a Dispatcher. The zero value is usable.
type Options struct {
	Clock  apollo.Clock // default apollo.SystemClock
	Logger *slog.Logger // default slog.Default()
	Log    AttemptLog   // default NewMemoryLog(DefaultLogSize), per tenant
	// ExternalURL is where people reach Apollo-11's web UI; when set,
	// messages link to the alert. Optional.
	ExternalURL string
	// Location is the time zone messages show times in; default time.Local.
	Location *time.Location
	// Tenants says tenants are in use: every alert message then names its
	// tenant, the default one as "default". Without it only the messages of
	// other tenants than the default name theirs.
	Tenants bool
	// Outbox keeps what the lanes owe across a stop or a crash; Start
	// queues again what it holds. Nil: the queues live in memory only.
	// The dispatcher does not close it.
	Outbox Outbox
	// Turns keeps the rate limit of each channel that has one across
	// the processes that send to it. Nil: each dispatcher keeps its own.
	Turns Turns
}

func (o Options) withDefaults() Options {
	o.Clock = cmp.Or[apollo.Clock](o.Clock, apollo.SystemClock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Log == nil {
		o.Log = NewMemoryLog(DefaultLogSize)
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	return o
}

// Dispatcher delivers notifications to channels, one lane per channel.
type Dispatcher struct {
	opts   Options
	clock  apollo.Clock
	lanes  map[string]*lane // read-only after NewDispatcher
	order  []string
	randN  func(int64) int64
	unk    atomic.Int64
	obErrs atomic.Int64 // outbox writes that failed
	idBase string
	idSeq  atomic.Uint64
	logs   *loglimit.Limiter

	mu      sync.RWMutex // Send holds it shared; Stop exclusively
	stopped bool
	life    lifecycle.Group // one goroutine per lane
}

// NewDispatcher checks the channels (unique names, languages, limits) and
// parses their templates; every problem is reported, each naming its
// channel and field.
func NewDispatcher(chs []Channel, opts Options) (*Dispatcher, error) {
	opts = opts.withDefaults()
	var b [4]byte
	_, _ = rand.Read(b[:])
	d := &Dispatcher{opts: opts, clock: opts.Clock, lanes: make(map[string]*lane, len(chs)),
		randN: mrand.Int64N, idBase: hex.EncodeToString(b[:]) + "-", logs: loglimit.New(logEvery),
		life: lifecycle.Group{Name: "notify"}}
	var errs []error
	for i, ch := range chs {
		ch = ch.withDefaults()
		if ch.Name == "" {
			errs = append(errs, &apollo.Error{Code: apollo.EINVALID, Field: fmt.Sprintf("channels[%d].name", i),
				Message: "channel has no name", Hint: "give every channel the name rules use in NOTIFY:"})
			continue
		}
		if _, dup := d.lanes[ch.Name]; dup {
			errs = append(errs, &apollo.Error{Code: apollo.EINVALID, Field: "channels." + ch.Name,
				Message: "two channels have this name", Hint: "give each channel its own name"})
			continue
		}
		if err := ch.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		ch.Lang, _ = normalizeLang(ch.Lang)
		r, err := newRenderer(ch.Name, ch.Lang, opts.ExternalURL, opts.Location, ch.Templates)
		if err != nil {
			var ae *apollo.Error
			if errors.As(err, &ae) {
				ae.Field = "channels." + ch.Name + "." + ae.Field
			}
			errs = append(errs, err)
			continue
		}
		r.tenants = opts.Tenants
		if ch.Type == TypeEmail {
			r.shown = digestShownMail
		}
		d.lanes[ch.Name] = newLane(d, ch, r)
		d.order = append(d.order, ch.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// Start starts one goroutine per channel and returns. They run until
// Stop (docs/architecture.md, "Lifecycle").
func (d *Dispatcher) Start(ctx context.Context) error {
	return d.life.Start(ctx, func(context.Context) error {
		if d.opts.Outbox != nil {
			d.Requeue(d.opts.Outbox.Owed())
		}
		for _, name := range d.order {
			l := d.lanes[name]
			d.life.Go(func(ctx context.Context) error { l.run(ctx); return nil })
		}
		return nil
	})
}

// Stop cancels in-flight attempts, waits for every lane to finish (or for
// ctx), and records what was still queued as dropped. It is safe to call
// more than once, and before Start.
func (d *Dispatcher) Stop(ctx context.Context) error {
	return d.life.Stop(ctx, func(halt func()) error {
		d.mu.Lock()
		d.stopped = true
		d.mu.Unlock()
		halt()
		for _, name := range d.order { // never started: the lanes did not drain
			d.lanes[name].dropQueued()
		}
		return nil
	})
}

// Send hands n to the queue of each channel it names and returns at once;
// it never waits for a lane. A full queue, an unknown channel, a channel
// that does not serve n's tenant or a stopped dispatcher is recorded as a
// dropped Attempt and counted. Send keeps n: the caller must not change
// its maps or slices afterwards.
func (d *Dispatcher) Send(n apollo.Notification) {
	at := d.clock.Now()
	d.mu.RLock()
	defer d.mu.RUnlock()
	stopped := d.stopped
	for i, name := range n.Channels {
		if slices.Contains(n.Channels[:i], name) {
			continue
		}
		l := d.lanes[name]
		switch {
		case l == nil:
			d.dropUnknown(name, n, at)
		case !l.ch.Serves(n.Alert.Tenant):
			// Rules are checked against their tenant's channels when they
			// are set; this catches rules set before a channel changed hands.
			l.recordItem(item{n: n, at: at}, OutcomeDropped, fmt.Sprintf("the channel does not serve tenant %q", n.Alert.Tenant))
		case stopped:
			// What the engine tells while the process stops is owed to the
			// next one, like what was still queued.
			it := item{n: n, at: at, owed: d.owe(name, at, n)}
			l.recordItem(it, OutcomeDropped, stoppedReason("dispatcher stopped", it.owed != 0))
		default:
			it := item{n: n, at: at, owed: d.owe(name, at, n)}
			kept, out, why := l.queue.push(it)
			if kept {
				l.stats.queued.Add(1)
			}
			if out != nil { // it, or the newest of a longer queue that made room for it
				l.recordItem(*out, OutcomeDropped, why)
				d.settle(out.owed)
			}
		}
	}
}

func (d *Dispatcher) dropUnknown(name string, n apollo.Notification, at time.Time) {
	d.unk.Add(1)
	d.opts.Log.Record(Attempt{ID: d.newID(), Tenant: n.Alert.Tenant, Channel: name, AlertID: n.Alert.ID, Kind: n.Kind,
		DedupKey: n.DedupKey, At: at, Outcome: OutcomeDropped, Error: "unknown channel"})
	d.logLimited(slog.LevelWarn, "unknown", "notify: notification names an unknown channel",
		slog.String("channel", name), slog.String("rule", n.Alert.Rule))
}

// owe records in the outbox that channel owes n, before it is queued, and
// returns the entry's ID (0 without an outbox). A notification the outbox
// could not take is still sent; only a crash before it leaves loses it.
func (d *Dispatcher) owe(channel string, at time.Time, n apollo.Notification) uint64 {
	if d.opts.Outbox == nil {
		return 0
	}
	id, err := d.opts.Outbox.Owe(channel, at, n)
	if err != nil {
		d.obErrs.Add(1)
		d.logLimited(slog.LevelError, "outbox", "notify: the outbox did not take a notification; a crash before it leaves would lose it",
			slog.String("channel", channel), slog.String("error", err.Error()))
	}
	return id
}

// settle records in the outbox that the entries are no longer owed.
func (d *Dispatcher) settle(ids ...uint64) {
	ids = slices.DeleteFunc(ids, func(id uint64) bool { return id == 0 })
	if d.opts.Outbox == nil || len(ids) == 0 {
		return
	}
	if err := d.opts.Outbox.Settle(ids...); err != nil {
		d.obErrs.Add(1)
		d.logLimited(slog.LevelError, "outbox", "notify: the outbox did not record a delivery; a restart may send it again",
			slog.String("error", err.Error()))
	}
}

// Requeue queues again what an outbox says was owed: by the process that
// ran before this one (Start passes Outbox.Owed), or by another process
// that shared the outbox and died (an outbox shared by several processes
// hands those over as it takes them). The entries must be the outbox's
// own: each is settled through it when its delivery ends. A notification
// is owed from Send until its delivery ends, so these were queued, or
// under way, when that process stopped or died. One whose channel no
// longer serves it is dropped, and one taken longer ago than its
// channel's give_up_after is given up, as its lane would have. A stopped
// dispatcher leaves them owed, for whoever runs next.
func (d *Dispatcher) Requeue(owed []OwedNotification) {
	if d.opts.Outbox == nil || len(owed) == 0 {
		return
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.stopped {
		return
	}
	now := d.clock.Now()
	var queued int
	requeued := map[*lane][]item{}
	for _, e := range owed {
		n, l := e.Notification, d.lanes[e.Channel]
		it := item{n: n, at: e.At, owed: e.ID, requeued: true}
		switch {
		case l == nil:
			d.dropUnknown(e.Channel, n, now)
		case !l.ch.Serves(n.Alert.Tenant):
			l.recordItem(it, OutcomeDropped, fmt.Sprintf("the channel does not serve tenant %q", n.Alert.Tenant))
		case now.Sub(e.At) > l.ch.GiveUpAfter:
			l.recordItem(it, OutcomeGaveUp, fmt.Sprintf("owed since %s by a process that stopped: past give_up_after (%s)",
				e.At.UTC().Format(time.RFC3339), l.ch.GiveUpAfter))
		default:
			// Past the tenant's queue_size if need be: a lane owes up
			// to twice that (a digest batch and a full queue) when its
			// process dies. What was promised at least once is not
			// dropped for want of room; it takes its tenant's room
			// instead, so the tenant's new notifications are dropped
			// until it has gone, and what is owed after another
			// restart is no more (fairqueue.go).
			requeued[l] = append(requeued[l], it)
			l.stats.queued.Add(1)
			queued++
			continue
		}
		d.settle(e.ID)
	}
	for l, its := range requeued {
		l.queue.requeue(its)
	}
	d.opts.Logger.Info("notify: notifications owed by a process that stopped are sent again",
		slog.Int("owed", len(owed)), slog.Int("queued", queued))
}

// Test sends one test message to channel, without queue or retries, and
// returns its Attempt. It waits for its turn under the channel's rate
// limit (until ctx ends: an ETOOMANY error), and the queued messages after
// it wait for theirs, so the channel stays within its limit. On a channel
// with a limit, a tenant's tests take at most one turn every testEvery
// (one a minute for a robot of 20 a minute), and none that alerts are
// queued for: past either, ETOOMANY at once (testBudget).
// Test is for whoever holds the configuration (apollo notify test
// --config); TestFor is the API's.
func (d *Dispatcher) Test(ctx context.Context, channel string) (Attempt, error) {
	l := d.lanes[channel]
	if l == nil {
		return Attempt{}, noChannel(channel, "configured channels", d.order)
	}
	return d.test(ctx, l, "")
}

// TestFor is Test for a tenant: only a channel that serves the tenant
// exists for it (its own, or one shared with it), the message names the
// tenant, and the attempt joins the tenant's delivery record. A channel of
// another tenant is not found, like one that does not exist.
func (d *Dispatcher) TestFor(ctx context.Context, tenant, channel string) (Attempt, error) {
	l := d.lanes[channel]
	if l == nil || !l.ch.Serves(tenant) {
		return Attempt{}, noChannel(channel, "the channels of this tenant", d.ChannelsFor(tenant))
	}
	return d.test(ctx, l, tenant)
}

func noChannel(channel, which string, known []string) error {
	list := "none"
	if len(known) > 0 {
		list = strings.Join(known, ", ")
	}
	return &apollo.Error{Code: apollo.ENOTFOUND, Field: "channel",
		Message: fmt.Sprintf("no channel named %q", channel), Hint: which + ": " + list}
}

func (d *Dispatcher) test(ctx context.Context, l *lane, tenant string) (Attempt, error) {
	channel := l.ch.Name
	if err := l.testBudget.check(channel, tenant, d.clock.Now()); err != nil {
		return Attempt{}, err
	}
	// The test takes its turn under the rate limit: a robot API mutes a
	// sender past it (DingTalk, for ten minutes), and on a shared channel
	// that would silence every tenant's alerts.
	l.tests.Lock()
	defer l.tests.Unlock()
	if _, ok := l.waitTurn(ctx, nil, false); !ok {
		return Attempt{}, &apollo.Error{Code: apollo.ETOOMANY, Field: "channel",
			Message: fmt.Sprintf("channel %s allows %d messages a minute and had no turn before the request ended", channel, l.ch.RatePerMinute),
			Hint:    "try again in a minute"}
	}
	now := d.clock.Now()
	if l.testBudget != nil {
		if err := l.testBudget.check(channel, tenant, now); err != nil { // another test of the tenant's went while this one waited
			return Attempt{}, err
		}
		if n := l.queue.len(); n > 0 {
			return Attempt{}, &apollo.Error{Code: apollo.ETOOMANY, Field: "channel",
				Message: fmt.Sprintf("%d notifications are waiting for the turns of channel %s: a test does not take theirs", n, channel),
				Hint:    "try again once they have gone"}
		}
		l.testBudget.spend(tenant, now)
	}
	n := apollo.Notification{Kind: apollo.NotifyTest, Channels: []string{channel}, At: now,
		DedupKey: "test:" + channel,
		Alert: apollo.Alert{ID: "test-" + strconv.FormatInt(now.UnixMilli(), 10), Tenant: tenant, Rule: "apollo_test", Group: channel,
			State: apollo.AlertFiring, Severity: apollo.SeverityInfo, Summary: "Apollo-11 test message",
			StartedAt: now, FiredAt: now}}
	r := l.attempt(ctx, l.render(n, nil))
	a := Attempt{Tenant: tenant, AlertID: n.Alert.ID, Kind: n.Kind, DedupKey: n.DedupKey, At: r.start, Try: 1, Outcome: OutcomeSent, Latency: r.latency}
	if r.err != nil {
		a.Outcome, a.Error = OutcomeFailed, r.err.Error()
	}
	a = d.record(l, a)
	if r.err != nil {
		return a, fmt.Errorf("notify: test %s: %s", channel, a.Error)
	}
	return a, nil
}

// Channels returns the channel names in configuration order.
func (d *Dispatcher) Channels() []string { return slices.Clone(d.order) }

// Serves reports whether channel exists and tenant's rules may name it.
func (d *Dispatcher) Serves(tenant, channel string) bool {
	l := d.lanes[channel]
	return l != nil && l.ch.Serves(tenant)
}

// ChannelsFor returns the names of the channels that serve tenant, in
// configuration order.
func (d *Dispatcher) ChannelsFor(tenant string) []string {
	var names []string
	for _, name := range d.order {
		if d.lanes[name].ch.Serves(tenant) {
			names = append(names, name)
		}
	}
	return names
}

// Stats returns every channel's counters.
func (d *Dispatcher) Stats() Stats {
	s := Stats{Channels: make(map[string]ChannelStats, len(d.lanes)), UnknownChannel: d.unk.Load(), OutboxFailures: d.obErrs.Load()}
	for name, l := range d.lanes {
		cs := l.stats.snapshot()
		cs.QueueLen = l.queue.len()
		s.Channels[name] = cs
	}
	return s
}

// Attempts lists the delivery record.
func (d *Dispatcher) Attempts(f AttemptFilter) []Attempt { return d.opts.Log.List(f) }

// record completes a, counts it, stores it and logs what people should
// know about. It returns the completed Attempt.
func (d *Dispatcher) record(l *lane, a Attempt) Attempt {
	a.ID, a.Channel, a.Error = d.newID(), l.ch.Name, RedactText(a.Error)
	l.stats.count(a.Outcome)
	d.opts.Log.Record(a)
	level := slog.LevelDebug
	switch a.Outcome {
	case OutcomeFailed, OutcomeGaveUp, OutcomeDropped:
		level = slog.LevelWarn
	case OutcomeRetrying:
		level = slog.LevelInfo
	}
	if d.opts.Logger.Enabled(context.Background(), level) {
		d.logLimited(level, a.Outcome+":"+a.Channel, "notify: "+a.Outcome,
			slog.String("channel", a.Channel), slog.String("kind", string(a.Kind)), slog.String("alert", a.AlertID),
			slog.Int("try", a.Try), slog.String("error", a.Error))
	}
	return a
}

func (d *Dispatcher) newID() string {
	return d.idBase + strconv.FormatUint(d.idSeq.Add(1), 36)
}
