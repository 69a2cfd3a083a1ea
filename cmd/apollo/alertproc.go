package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/rules"
)

func newAlertCmd() *cobra.Command {
	var (
		configFile, rulesFile, redisURL string
	)
	cmd := &cobra.Command{
		Use:   "alert",
		Short: "Run an alert process of the three-process mode (rules, evaluation, notifications)",
		Long: `Run an alert process: it evaluates the rules over the metrics the bus
flushes to Redis, fires event rules on the changes the bus publishes, and
sends notifications through the configured channels. Run two of them for
high availability: both evaluate, a Redis lock makes each notification go
out once, and if one dies the other carries on. One of them (the leader)
writes the alerts the dashboard shows.

It watches the bus's heartbeat: when no bus has beaten for three intervals
it raises apollo_component_down. SIGHUP reloads the rules file.`,
		Example: `  apollo alert --redis redis://127.0.0.1:6379/0 --rules /etc/apollo/rules.txt --config /etc/apollo/apollo.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if configFile != "" {
				var err error
				if cfg, err = config.Load(configFile, os.Getenv); err != nil {
					return err
				}
			}
			cfg.ApplyEnv(os.Getenv)
			if cmd.Flags().Changed("redis") {
				cfg.Redis.URL = redisURL
			}
			if cmd.Flags().Changed("rules") {
				cfg.Rules = rulesFile
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("configuration:\n%w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("process", "alert")
			c, err := openRedis(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer c.Close()
			return runAlertProcess(cmd.Context(), cfg, c, log, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&configFile, "config", "c", "", "configuration file: channels, alert settings, redis")
	fl.StringVar(&rulesFile, "rules", "", "alert rules file, reloaded when it changes and on SIGHUP")
	fl.StringVar(&redisURL, "redis", "", "Redis URL, the same the bus uses")
	return cmd
}

// alertProcess is one `apollo alert`, assembled.
type alertProcess struct {
	cfg    config.Config
	c      redis.UniversalClient
	log    *slog.Logger
	clock  apollo.Clock // every loop of the process ticks on it
	id     string
	lease  *redisstore.Lease
	engine *alert.Engine
	disp   *notify.Dispatcher
	outbox *redisstore.Outbox
	loader *alert.Loader
	rules  *redisstore.Rules
	// rulesMu orders a rules change from the bus (saved, then set) and a
	// catch-up read of the saved rules, so the read cannot set rules
	// older than the change.
	rulesMu sync.Mutex
	// unread keeps a Redis outage from logging every alert.interval that
	// the saved rules cannot be read (catchUpRules).
	unread *loglimit.Limiter
	stops  []func() // in reverse order at shutdown
}

// runAlertProcess runs until ctx ends.
func runAlertProcess(ctx context.Context, cfg config.Config, c redis.UniversalClient, log *slog.Logger, out interface{ Write([]byte) (int, error) }) error {
	p := newAlertProcess(cfg, c, log, apollo.SystemClock)
	warnConfig(cfg, log)
	defer p.stop()
	if err := p.start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "apollo alert %s: %d channels, rules from %s, Redis %s\n", p.id, len(cfg.Channels), orDefault(cfg.Rules, "the API"), redactURL(cfg.Redis.URL))
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			if p.loader != nil {
				p.loader.Reload()
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func newAlertProcess(cfg config.Config, c redis.UniversalClient, log *slog.Logger, clock apollo.Clock) *alertProcess {
	return &alertProcess{cfg: cfg, c: c, log: log, clock: clock, id: processID(), unread: loglimit.New(time.Minute)}
}

func (p *alertProcess) onStop(f func()) { p.stops = append(p.stops, f) }

// startService starts svc and has stop stop it.
func (p *alertProcess) startService(ctx context.Context, name string, svc service) error {
	if err := svc.Start(ctx); err != nil {
		return err
	}
	p.onStop(func() { stopService(context.Background(), p.log, name, svc) })
	return nil
}

func (p *alertProcess) stop() {
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
}

func (p *alertProcess) start(ctx context.Context) error {
	cfg, prefix := p.cfg, p.cfg.Redis.Prefix
	ctx = context.WithoutCancel(ctx) // the process's own lifetime; stop() ends it
	ctx, cancel := context.WithCancel(ctx)
	p.onStop(cancel)

	// The retentions are the bus's: a window reads the buckets and
	// rollups the bus wrote, which it keeps as long as they say. With no
	// bus's writes in Redis (it lost them) the rules keep their alerts
	// rather than resolve them on empty windows.
	store, err := redisstore.NewStore(redisstore.Options{Client: p.c, Prefix: prefix, Logger: p.log,
		BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D(), RequireWriters: true})
	if err != nil {
		return err
	}
	// What the lanes owe is kept in Redis, owned by this run of the
	// process (its ID is new at every start, so a restarted process never
	// takes the entries of its last run for its own): another alert
	// process, or the next one, takes them over once this one stopped or
	// its lease ran out (docs/notifications.md, "Across a restart or a crash").
	owner := outboxOwner(p.id)
	p.outbox, err = redisstore.NewOutbox(redisstore.OutboxOptions{Client: p.c, Prefix: prefix, ID: owner,
		Clock: p.clock, Logger: p.log})
	if err != nil {
		return err
	}
	disp, err := buildDispatcher(cfg, p.clock, p.log, os.Stdout, p.outbox, redisstore.NewTurns(p.c, prefix))
	if err != nil {
		return err
	}
	p.disp = disp
	p.outbox.OnAdopt(disp.Requeue)
	// A restart after a kill -9 on the same host leads at once: the lease
	// proves which process holds it (docs/redis.md, "The leader lease").
	p.lease = redisstore.NewLease(p.c, prefix, p.id, 15*time.Second).WithClock(p.clock).WithLogger(p.log).WithProcessProof()
	lockPrefix := ""
	if prefix != "apollo" {
		lockPrefix = prefix + ":" // the engine's lock keys start with "apollo:"
	}
	// The jobs whose alerts job expectations hold: the bus process works
	// them out and writes them to Redis.
	holder := &redisstore.Holder{}
	stopHeld, err := holder.Watch(ctx, p.c, prefix)
	if err != nil {
		return fmt.Errorf("reading the jobs held by job expectations: %w", err)
	}
	p.onStop(stopHeld)
	state := redisstore.NewAlertState(p.c, prefix, p.lease)
	var sender alert.Sender = disp
	if testHoldSend != nil {
		sender = holdingSender{disp, testHoldSend}
	}
	// The locks name this run of the process, as its outbox does: a
	// process that takes over what this one recorded and did not queue
	// knows the locks it took for it (docs/redis.md, "The dedup lock and
	// the outbox").
	var locker alert.Locker = redisstore.NewLocker(p.c, lockPrefix).WithOwner(owner)
	if testHoldLock != nil {
		locker = holdingLocker{locker.(*redisstore.Locker), testHoldLock}
	}
	p.engine, err = alert.New(alert.Options{
		Store: store, Sender: sender, Clock: p.clock, Logger: p.log, Holder: holder,
		Locker:         locker,
		State:          state,
		Owed:           p.outbox.Decisions(),
		Interval:       cfg.Alert.Interval.D(),
		DedupWindow:    cfg.Alert.DedupWindow.D(),
		RepeatInterval: cfg.Alert.Repeat.D(),
		SelfChannels:   disp.ChannelsFor(""),
	})
	if err != nil {
		return err
	}
	p.outbox.OnTakeOver(p.engine.TakeOver)
	p.rules = redisstore.NewRules(p.c, prefix).WithClock(p.clock)
	p.loader, err = newRulesLoader(cfg, p.clock, p.log, disp, func(rs []*rules.Rule, src []byte) {
		p.engine.SetRulesSource("", rs, src)
		if err := p.rules.Save(ctx, "", src); err != nil {
			p.log.Warn("recording the rules in Redis for the dashboard", "err", err)
		}
	})
	if err != nil {
		return err
	}
	if err := loadSavedRules(ctx, p.engine, p.rules, p.loader != nil, p.log); err != nil {
		return err
	}
	// The state saved with how far it had heard of the bus's changes: the
	// changes after that are read again, those already counted passed over.
	changes := redisstore.NewChangeFollower(p.c, prefix, p.log, marksFromFeed(p.engine.OccurAt, p.engine.Apply), p.engine.ForgetHeard)
	saved, err := p.engine.RestoreFeed(ctx, changes.Mark)
	if err != nil {
		return err
	}
	if err := changes.Seek(ctx, saved.Watermark, saved.Feed); err != nil {
		return fmt.Errorf("reading the bus's changes from Redis: %w", err)
	}

	if err := p.startService(ctx, "the leader lease", p.lease); err != nil {
		return err
	}
	// Before the lanes, which queue what it took over at its start; it
	// stops after them, and gives its lease up then, with what they still
	// owe in it.
	if err := p.startService(ctx, "the notification outbox", p.outbox); err != nil {
		return err
	}
	if err := p.startService(ctx, "the notification lanes", disp); err != nil {
		return err
	}
	if err := p.startService(ctx, "the alert engine", p.engine); err != nil {
		return err
	}
	// What processes that stopped or died had decided and not queued,
	// taken over at the outbox's start, once the lanes run.
	p.engine.TakeOver(p.outbox.TakenOver())
	if p.loader != nil {
		if err := p.startService(ctx, "the rules file loader", p.loader); err != nil {
			return err
		}
	}
	p.onStop(p.rules.Follow(ctx, cfg.Alert.Interval.D(), p.catchUpRules))
	// Redis that lost its data while this process runs gets back what
	// this process holds (docs/redis.md, "When Redis loses its data").
	keeper := redisstore.NewKeeper(p.c, prefix, p.id, cfg.Alert.Interval.D(), p.log, func(ctx context.Context) error {
		return errors.Join(state.Refill(ctx), p.rules.Refill(ctx, p.engine.RulesSources()), p.outbox.Refill(ctx))
	}).WithClock(p.clock)
	if err := p.startService(ctx, "the keeper of what Redis holds", keeper); err != nil {
		return err
	}
	// The bus's changes: from the change log, on from where the saved
	// state had got to; from the channel, those of a bus of a release
	// before the log.
	if err := p.startService(ctx, "the reader of the bus's changes", changes); err != nil {
		return err
	}
	stopChanges, err := changes.SubscribeChannel(ctx)
	if err != nil {
		return fmt.Errorf("subscribing to the bus's changes: %w", err)
	}
	p.onStop(stopChanges)
	findings, err := redisstore.SubscribeFindings(ctx, p.c, prefix, p.log, p.engine.Occur)
	if err != nil {
		return fmt.Errorf("subscribing to the findings of job expectations: %w", err)
	}
	p.onStop(findings.Stop)
	p.onStop(redisstore.PublishAlerts(ctx, p.c, prefix, p.engine.Subscribe, p.engine.Save))
	stopCommands, err := redisstore.ServeCommands(ctx, p.c, prefix, func(ctx context.Context, cmd redisstore.Command) redisstore.Reply {
		return redisstore.HandleCommand(ctx, p.engine, cmd, p.saveRules, p.log)
	})
	if err != nil {
		return fmt.Errorf("subscribing to commands: %w", err)
	}
	p.onStop(stopCommands)
	beat := redisstore.NewHeartbeat(p.c, prefix, "alert", p.id, cfg.Alert.Heartbeat.D()).WithClock(p.clock).WithStats(func() any {
		return map[string]any{"leader": p.lease.Held(), "alert": p.engine.Stats(), "notifications": disp.Stats(), "outbox": p.outbox.Stats(),
			"changes": changes.Stats(), "findings": findings.Stats()}
	})
	if err := p.startService(ctx, "the heartbeat", beat); err != nil {
		return err
	}
	w := startComponentWatch(ctx, p.c, prefix, cfg.Alert.Heartbeat.D(), p.log, func(kind, summary string, _ map[string]int) {
		p.engine.SelfAlert(componentDown(kind), apollo.SeverityCritical, summary)
	})
	p.onStop(w.stop)
	dm := startDeadman(cfg.Deadman, "alert", p.clock, p.log)
	p.onStop(dm.stop)
	return nil
}

// outboxOwner names this run of the process in the notification outbox:
// its process ID, reduced to the characters a Redis key part of the
// outbox may hold (a host name may have others), and a random suffix, so
// that a restart that gets the same host name and PID (PID 1 in a
// container) is still a new owner.
func outboxOwner(id string) string {
	id = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, id)
	var b [4]byte
	_, _ = rand.Read(b[:])
	return id[:min(len(id), 100)] + "." + hex.EncodeToString(b[:])
}

// saveRules checks rules sent through the bus's API (rs, parsed from src
// by HandleCommand) against this process's channels that serve the
// tenant, and saves them before HandleCommand sets them: in Redis, where
// every alert process reads them at start and the bus shows them, and the
// default tenant's in the rules file too, when there is one.
func (p *alertProcess) saveRules(tenant string, rs []*rules.Rule, src []byte) error {
	if err := rules.CheckChannels(rs, func(n string) bool { return p.disp.Serves(tenant, n) }); err != nil {
		return err
	}
	if err := rules.CheckReach(rs, p.cfg.Retention.Rollups.D()); err != nil {
		return err
	}
	p.rulesMu.Lock()
	defer p.rulesMu.Unlock()
	var before []byte // the file's rules, put back if Redis refuses the new ones
	if tenant == "" && p.loader != nil {
		before = p.loader.Applied()
		if err := p.loader.Write(src); err != nil {
			return notSavedIn("the alert process's log", p.log, "rules", tenant, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.rules.Save(ctx, tenant, src)
	if err != nil && before != nil {
		// Answered "not changed": the file, which every alert process
		// reads at start, must not hold them either.
		if werr := p.loader.Write(before); werr != nil {
			p.log.Error("the rules file holds rules Redis refused and could not be put back; fix it by hand", "file", p.cfg.Rules, "err", werr)
		}
	}
	return notSavedIn("the alert process's log", p.log, "rules", tenant, err)
}

// catchUpRules sets the rules saved in Redis that differ from the ones
// this process runs: a change it missed while it was reconnecting.
func (p *alertProcess) catchUpRules(saved map[string][]byte, err error) {
	if err != nil {
		if ok, held := p.unread.Allow("", p.clock.Now()); ok {
			p.log.Warn("reading the saved rules from Redis; the rules in force keep running", "err", err, "suppressed", held)
		}
		return
	}
	p.rulesMu.Lock()
	defer p.rulesMu.Unlock()
	set, err := p.engine.SyncRules(saved, func(t string) bool { return t == "" && p.loader != nil })
	if len(set) > 0 {
		p.log.Warn("rules changed in Redis without reaching this process; now in force", "tenants", set)
	}
	if err != nil {
		p.log.Error("saved rules refused; the rules in force keep running", "err", err)
	}
}

// marksFromFeed makes the marks the bus records for job expectations
// occurrences of an engine, before apply sees the change: a missed run
// (bus.RecordMissed: a run missed:JOB@SLOT, marked as a missed start) is
// ON: missed, a run marked too short or too often (bus.Mark) ON:
// too_short or too_often, the run that made its job flap ON: flapping,
// each with the mark's reason. The alert processes hear the marks from
// the change feed, the all-in-one server's engine from its bus
// (localAlerting.observers): in both, the log is where a finding becomes
// news, so one the engine had not heard of at a crash (or while an alert
// process was down) is replayed to it, and one it had is passed over by
// its LSN. A flapping whose run could not be marked (no longer in
// memory) goes as before: to the engine directly in the all-in-one, as a
// finding on <p>:findings from the bus process
// (redisstore.SubscribeFindings).
func marksFromFeed(occur func(uint64, alert.Occurrence), apply func(*apollo.Change)) func(*apollo.Change) {
	return func(c *apollo.Change) {
		switch c.Record.Kind {
		case apollo.KindMissedStart:
			if slot, ok := bus.MissedSlot(c.Task.TaskID); ok {
				detail := c.Record.Reason // the evaluator's words; an older bus wrote none
				if detail == "" {
					detail = "no run started (expected " + slot.UTC().Format("2006-01-02 15:04:05 MST") + ")"
				}
				occur(c.LSN, alert.Occurrence{Tenant: c.Task.Tenant, Job: c.Task.Name, Kind: rules.OccurrenceMissed, At: slot, Detail: detail})
			}
		case apollo.KindTooShort, apollo.KindTooOften: // named as the rules name them
			kind, _ := rules.ParseOccurrence(c.Record.Kind.String())
			occur(c.LSN, alert.Occurrence{Tenant: c.Task.Tenant, Job: c.Task.Name, Kind: kind, Run: c.Task.TaskID,
				At: time.UnixMilli(c.Record.Ts), Detail: c.Record.Reason})
		case apollo.KindFlapping: // of the job: the run is where it was marked
			occur(c.LSN, alert.Occurrence{Tenant: c.Task.Tenant, Job: c.Task.Name, Kind: rules.OccurrenceFlapping,
				At: time.UnixMilli(c.Record.Ts), Detail: c.Record.Reason})
		}
		apply(c)
	}
}
