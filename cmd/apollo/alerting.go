package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
)

// alertSide is where a bus process's alerting lives: in the process
// (apollo server), or in alert processes reached through Redis (apollo bus).
// The server wires whichever it has the same way.
type alertSide interface {
	// observers are the bus observers for the metrics (agg) and
	// alerting: those that rebuild state from every change, the replay
	// at start included (bus.Options.Observers), and those that act on a
	// change and hear only of live ones (bus.Options.Live).
	observers(agg *metrics.Aggregator) (all, live []bus.Observer)
	// openLog learns of the bus's log, in dir and ending at lastLSN,
	// before the observers are made: the metrics in Redis are written
	// under a writer ID of the log's (metricsWriter).
	openLog(ctx context.Context, dir string, lastLSN uint64) error
	// Start and Stop (a service) run its components; Stop runs after the
	// bus has stopped, so that they see the bus's last changes.
	service
	// apiOptions fills the alerting part of the API's options.
	apiOptions(o *httpapi.Options)
	// hubOptions fills the alerting part of the stream's options; acks
	// from the stream are audited in auditLog.
	hubOptions(o *stream.Options, auditLog auditRecorder)
	// system adds what it says of itself to GET /api/v1/system.
	system(parts map[string]func(tenant string) any)
	// parts are its components, for GET /metrics and GET /api/v1/system.
	parts() selfmetrics.Parts
	// onRefused reports events the bus could not take: never silently (invariant 4).
	onRefused(r bus.Refusal)
	reload()
	// occur is where what job expectations find goes (ON: missed ...):
	// the engine in this process, or the alert processes.
	occur() func(alert.Occurrence)
	// held takes the jobs whose alerts job expectations hold, when the
	// engines are elsewhere; nil when the engine in this process asks.
	held() func(redisstore.Held)
	// restore readies the event rules, before the bus replays its log,
	// to hear of the replayed changes they had not heard of when the
	// process stopped; it returns the LSN above which those are
	// (bus.Bus.ReplayLiveAfter). mark is the bus's LiveWatermark.
	restore(ctx context.Context, mark func() uint64) (uint64, error)
	// saveMark saves how far the event rules have heard of the bus; a
	// checkpoint calls it before it keeps its snapshot.
	saveMark(ctx context.Context) error
}

// localAlerting is the engine and the dispatcher in this process.
type localAlerting struct {
	cfg    config.Config
	log    *slog.Logger
	clock  apollo.Clock
	disp   *notify.Dispatcher
	outbox *notify.FileOutbox // what the lanes owe, across a restart
	engine *alert.Engine
	loader *alert.Loader // nil without a rules file
	rules  *alert.FileRules
}

// outboxFile, in the data directory, holds the notifications the lanes
// owe: a kill -9 or a restart while a channel is down does not lose them.
const outboxFile = "outbox.jsonl"

// newLocalAlerting builds the dispatcher for the configured channels, the
// engine over the metrics with its state in the data directory, and the
// loader of the rules file.
func newLocalAlerting(cfg config.Config, log *slog.Logger, clock apollo.Clock, agg metrics.Store, console io.Writer, holder alert.Holder) (_ *localAlerting, err error) {
	l := &localAlerting{cfg: cfg, log: log, clock: clock}
	if l.outbox, err = notify.OpenFileOutbox(filepath.Join(cfg.Data, outboxFile)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.closeOutbox()
		}
	}()
	if l.disp, err = buildDispatcher(cfg, clock, log, console, l.outbox, nil); err != nil {
		return nil, err
	}
	var sender alert.Sender = l.disp
	if testHoldSend != nil {
		sender = holdingSender{l.disp, testHoldSend}
	}
	l.engine, err = alert.New(alert.Options{
		Store: agg, Sender: sender, Clock: clock, Logger: log,
		State:          alert.NewFileState(filepath.Join(cfg.Data, "alerts.json")),
		Interval:       cfg.Alert.Interval.D(),
		DedupWindow:    cfg.Alert.DedupWindow.D(),
		RepeatInterval: cfg.Alert.Repeat.D(),
		SelfChannels:   l.disp.ChannelsFor(""),
		Holder:         holder,
	})
	if err != nil {
		return nil, err
	}
	if l.loader, err = newRulesLoader(cfg, clock, log, l.disp, func(rs []*rules.Rule, src []byte) { l.engine.SetRulesSource("", rs, src) }); err != nil {
		return nil, err
	}
	l.rules = alert.NewFileRules(filepath.Join(cfg.Data, "rules"))
	if err := loadSavedRules(context.Background(), l.engine, l.rules, l.loader != nil, log); err != nil {
		return nil, err
	}
	return l, nil
}

// testHoldSend, set by the tests' TestMain in the process they start, is
// handed every notification the engine hands the dispatcher, first: it
// holds some, as a deliverer that has not handed them on yet when the
// process is killed.
var testHoldSend func(apollo.Notification)

// holdingSender calls hold before it hands a notification on.
type holdingSender struct {
	alert.Sender
	hold func(apollo.Notification)
}

func (s holdingSender) Send(n apollo.Notification) {
	s.hold(n)
	s.Sender.Send(n)
}

// testHoldLock, set like testHoldSend, is handed the key of every dedup
// lock an alert process asks for, before it is asked: it holds some, as
// an engine that decided a notification and has not asked for its lock
// yet when the process is killed.
var testHoldLock func(key string)

// holdingLocker calls hold before it asks for a lock.
type holdingLocker struct {
	*redisstore.Locker
	hold func(key string)
}

func (l holdingLocker) Acquire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	l.hold(key)
	return l.Locker.Acquire(ctx, key, ttl)
}

func (l holdingLocker) AcquireFrom(ctx context.Context, key string, ttl time.Duration, from []string) (bool, error) {
	l.hold(key)
	return l.Locker.AcquireFrom(ctx, key, ttl, from)
}

// loadSavedRules sets every tenant's rules saved through the API, except
// the default tenant's when a rules file gives them. Saved rules that no
// longer parse stop the start: running without them would show one set
// and evaluate another.
func loadSavedRules(ctx context.Context, e *alert.Engine, store alert.RuleStore, fromFile bool, log *slog.Logger) error {
	saved, err := store.Load(ctx)
	if err != nil {
		return fmt.Errorf("rules saved through the API: %w", err)
	}
	set, err := e.SyncRules(saved, func(t string) bool { return fromFile && t == "" })
	if err != nil {
		return fmt.Errorf("rules saved through the API: %w", err)
	}
	log.Info("rules saved through the API loaded", "tenants", len(set))
	return nil
}

// newRulesLoader loads the rules file (nil without one); a bad file is a
// start-up error. The file holds the default tenant's rules: they may name
// the channels that serve it.
func newRulesLoader(cfg config.Config, clock apollo.Clock, log *slog.Logger, disp *notify.Dispatcher, onLoad func([]*rules.Rule, []byte)) (*alert.Loader, error) {
	if cfg.Rules == "" {
		return nil, nil
	}
	known := func(name string) bool { return disp.Serves("", name) }
	loader, err := alert.NewLoader(alert.LoaderOptions{Path: cfg.Rules, Clock: clock, Logger: log, KnownChannel: known,
		MetricsKept: cfg.Retention.Rollups.D(), OnLoad: onLoad})
	if err != nil {
		return nil, err
	}
	if err := loader.Load(); err != nil {
		var pe *fs.PathError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w (create it, or start without --rules)", err)
		case errors.As(err, &pe):
			return nil, err // it says "rules file PATH: why"
		}
		return nil, fmt.Errorf("rules: %w", err)
	}
	return loader, nil
}

// observers: the engine hears the changes live, and the marks job
// expectations record on runs (a missed run, too_short, too_often, the
// run that made its job flap) as
// the occurrences they stand for, as the alert processes do from the
// change feed (marksFromFeed): a mark the log holds and the engine had not
// heard of when the process died is replayed to it after the restart, and
// one it had is passed over by its LSN.
func (l *localAlerting) observers(agg *metrics.Aggregator) (all, live []bus.Observer) {
	return []bus.Observer{agg}, []bus.Observer{changeFunc(marksFromFeed(l.engine.OccurAt, l.engine.Apply))}
}

// changeFunc is a function as a bus.Observer.
type changeFunc func(*apollo.Change)

func (f changeFunc) Apply(c *apollo.Change) { f(c) }

// services are its components in the order they start; they stop in
// the reverse order (the loader, the engine, then the dispatcher that
// delivers the engine's last notifications).
func (l *localAlerting) services() []namedService {
	svcs := []namedService{{"the notification lanes", l.disp}, {"the alert engine", l.engine}}
	if l.loader != nil {
		svcs = append(svcs, namedService{"the rules file loader", l.loader})
	}
	return svcs
}

func (l *localAlerting) Start(ctx context.Context) error { return startAll(ctx, l.log, l.services()) }

// Stop runs after the bus has stopped: the engine has seen its last
// changes. The outbox closes last, keeping what the lanes did not deliver.
func (l *localAlerting) Stop(ctx context.Context) error {
	err := stopAll(ctx, l.log, l.services())
	l.closeOutbox()
	return err
}

func (l *localAlerting) closeOutbox() {
	if err := l.outbox.Close(); err != nil {
		l.log.Warn("closing the notification outbox", "err", err)
	}
}

func (l *localAlerting) apiOptions(o *httpapi.Options) {
	o.Alerts, o.Deliveries = l.engine, l.disp
	o.Rules = rulebook.Book{Engine: l.engine, Known: l.disp.Serves, MetricsKept: l.cfg.Retention.Rollups.D(),
		// Saved before the engine runs them: durable once the API answers.
		Save: func(tenant string, src []byte) error {
			var err error
			if tenant == "" && l.loader != nil {
				err = l.loader.Write(src)
			} else {
				err = l.rules.Save(context.Background(), tenant, src)
			}
			return notSaved(l.log, "rules", tenant, err)
		}}
}

// notSaved answers a write through the API that could not be saved (a
// full disk, Redis away) as the alert engine and the scheduler answer
// theirs: unavailable, nothing changed, try again, with the cause in the
// log and not in the answer. Before, rules and expectations that could not
// be saved were answered 500 "internal error", which said neither whether
// anything had changed nor what to do. An *apollo.Error (an answer the
// cause already gave the caller) passes through.
func notSaved(log *slog.Logger, what, tenant string, err error) error {
	return notSavedIn("the server log", log, what, tenant, err)
}

// notSavedIn is notSaved for a process whose log is not the server's
// (an alert process's, which its hint names).
func notSavedIn(where string, log *slog.Logger, what, tenant string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*apollo.Error](err); ok {
		return err
	}
	log.Error("the "+what+" could not be saved, so they were not changed", "tenant", tenant, "err", err)
	return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the " + what + " could not be saved, so they were not changed",
		Hint: "nothing changed; " + where + " says why (the data directory or Redis); try again"}
}

func (l *localAlerting) hubOptions(o *stream.Options, auditLog auditRecorder) {
	o.Alerts, o.Acker = engineAlerts{l.engine}, engineAcker{l.engine, auditLog}
}

func (l *localAlerting) system(map[string]func(string) any) {}

func (l *localAlerting) parts() selfmetrics.Parts {
	return selfmetrics.Parts{selfmetrics.WatchFor("notifications", func(tenant string) notify.Stats { return channelStatsFor(l.disp, tenant) }), selfmetrics.Watch("alert", l.engine.Stats)}
}

func (l *localAlerting) onRefused(r bus.Refusal) {
	l.engine.SelfAlert("apollo_events_refused", apollo.SeverityCritical,
		"Apollo-11 refused events (not stored): "+r.Reason+"; reporters must resend them")
}

// occur tells the engine of a flapping job whose run could not be marked
// (no longer in memory); the rest marks a run, and the engine hears of
// the mark (observers).
func (l *localAlerting) occur() func(alert.Occurrence) {
	return func(o alert.Occurrence) {
		if o.Kind == rules.OccurrenceFlapping {
			l.engine.Occur(o)
		}
	}
}

func (l *localAlerting) held() func(redisstore.Held) { return nil }

func (l *localAlerting) openLog(context.Context, string, uint64) error { return nil }

func (l *localAlerting) restore(ctx context.Context, mark func() uint64) (uint64, error) {
	return l.engine.Restore(ctx, mark)
}

func (l *localAlerting) saveMark(ctx context.Context) error { return l.engine.Save(ctx) }

func (l *localAlerting) reload() {
	if l.loader != nil {
		l.loader.Reload()
	}
}

var _ httpapi.AlertEngine = (*alert.Engine)(nil)

// The dispatcher answers POST /api/v1/channels/{name}/test.
var _ httpapi.ChannelTester = (*notify.Dispatcher)(nil)

// engineAlerts and engineAcker connect an engine to the live stream.
type engineAlerts struct{ e *alert.Engine }

func (a engineAlerts) SubscribeAlerts() (<-chan apollo.Alert, func()) { return a.e.Subscribe() }

type engineAcker struct {
	e interface {
		Ack(context.Context, string, string, string) error
	}
	audit auditRecorder
}

// auditRecorder is where an ack over the stream is audited: the server's
// audit.Log, or a node's cluster.Audit.
type auditRecorder interface{ Record(audit.Entry) }

// Ack acknowledges as the REST API does, and audits it as the REST API
// does (with the caller's address), saying it came over the stream.
func (a engineAcker) Ack(ctx context.Context, who stream.Caller, id string) error {
	if err := a.e.Ack(ctx, who.Tenant, id, who.Name); err != nil {
		return err
	}
	a.audit.Record(audit.Entry{Tenant: who.Tenant, Actor: who.Name, Action: "alert.ack", Target: id, Detail: "from the stream", Remote: who.Remote})
	return nil
}
