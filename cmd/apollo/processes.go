package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
)

// The three-process mode (docs/architecture.md, docs/deploy.md): `apollo bus` keeps
// the state and the log and flushes metrics to Redis; `apollo alert`
// evaluates the rules over the metrics in Redis and sends notifications;
// `apollo sched` runs jobs. They meet in Redis: metrics, alert state,
// dedup locks, pub/sub for changes, alerts and commands, and heartbeats.

// openRedis opens the configured Redis and checks it answers. What the
// Redis client itself reports goes to log.
func openRedis(ctx context.Context, cfg config.Config, log *slog.Logger) (redis.UniversalClient, error) {
	if cfg.Redis.URL == "" {
		return nil, fmt.Errorf("this mode needs Redis: pass --redis redis://host:6379/0 (or redis.url in apollo.yaml)")
	}
	redisstore.LogTo(log, apollo.SystemClock)
	c, err := redisstore.Open(cfg.Redis.URL)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w (start Redis, or give the right --redis or redis.url)", redactURL(cfg.Redis.URL), err)
	}
	return c, nil
}

func redactURL(u string) string {
	if i, j := indexByte(u, '@'), indexByte(u, ':'); i > 0 && j > 0 {
		return u[:j+1] + "//REDACTED" + u[i:]
	}
	return u
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// processID names this process in heartbeats and the leader lease.
func processID() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid())
}

// redisAlerting is the bus's alerting side in the three-process mode.
type redisAlerting struct {
	c      redis.UniversalClient
	prefix string
	log    *slog.Logger
	clock  apollo.Clock  // the server's: every loop ticks on it
	every  time.Duration // heartbeat

	flusher *redisstore.Flusher
	writer  string   // the flusher's, the log's (metricsWriter)
	retire  []string // the other logs' writers
	feed    *redisstore.ChangeFeed
	cmd     *redisstore.Commander
	remote  *redisstore.RemoteAlerts
	cfg     config.Config
	beat    *redisstore.Heartbeat
	watch   *componentWatch
	serves  func(tenant, channel string) bool // the channels of this process's configuration
	telling atomic.Bool                       // a self-alert is being published
	tellers sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

func newRedisAlerting(c redis.UniversalClient, cfg config.Config, log *slog.Logger, clock apollo.Clock) *redisAlerting {
	return &redisAlerting{c: c, prefix: cfg.Redis.Prefix, log: log, clock: clock, every: cfg.Alert.Heartbeat.D(), cfg: cfg}
}

// restore: the alert processes hear of live changes through the change
// feed, a Redis stream, which keeps with it the bus's mark: the replay
// hands the feed the changes above the mark it saved last, which a kill -9
// may have taken before they were written (docs/architecture.md, "What the
// event rules had not heard of is news after a crash"). Without a saved
// mark (the first start of this release; Redis lost it, or cannot be read)
// the replay tells them nothing, as before.
func (r *redisAlerting) restore(ctx context.Context, mark func() uint64) (uint64, error) {
	r.feed.WithMark(mark)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	from, ok, err := redisstore.FeedMark(ctx, r.c, r.prefix)
	switch {
	case err != nil:
		r.log.Warn("the change feed's mark could not be read from Redis: changes accepted just before the last stop may not reach the alert processes' event rules", "err", err)
		return math.MaxUint64, nil
	case !ok:
		return math.MaxUint64, nil
	}
	return from, nil
}

// saveMark writes what the feed holds and the bus's mark with it: a
// checkpoint calls it before it keeps its snapshot.
func (r *redisAlerting) saveMark(ctx context.Context) error { return r.feed.SaveMark(ctx) }

func (r *redisAlerting) openLog(ctx context.Context, dir string, lastLSN uint64) (err error) {
	r.writer, r.retire, err = metricsWriter(ctx, r.c, r.prefix, dir, lastLSN, r.log)
	return err
}

func (r *redisAlerting) observers(agg *metrics.Aggregator) (all, live []bus.Observer) {
	var err error
	r.flusher, err = redisstore.NewFlusher(agg, redisstore.Options{Client: r.c, Prefix: r.prefix, Clock: r.clock, Logger: r.log,
		Writer: r.writer, Retire: r.retire})
	if err != nil {
		panic(err) // options are ours and valid
	}
	return []bus.Observer{r.flusher}, []bus.Observer{r.changeFeed()}
}

// changeFeed makes the feed that tells the alert processes of every live
// change, and the heartbeat they watch the bus by. A scale-out node, whose
// metrics each partition flushes (busnode.go), has these without a flusher.
func (r *redisAlerting) changeFeed() *redisstore.ChangeFeed {
	r.feed = redisstore.NewChangeFeed(r.c, r.prefix, r.log).WithClock(r.clock)
	r.beat = redisstore.NewHeartbeat(r.c, r.prefix, "bus", processID(), r.every).WithClock(r.clock).WithTenants(r.tenants())
	return r.feed
}

// services are its loops in the order they start: they stop in the
// reverse order, the flusher last (a last flush).
func (r *redisAlerting) services() []namedService {
	var s []namedService
	if r.flusher != nil {
		s = append(s, namedService{"the metrics flusher", r.flusher})
	}
	return append(s, namedService{"the change feed", r.feed}, namedService{"the heartbeat", r.beat})
}

// tenants are those of the tokens: the tenants that can write through
// this bus, which <p>:tenants lists (redisstore.PrefixClash).
func (r *redisAlerting) tenants() []string {
	var tenants []string
	for _, t := range r.cfg.Auth.Tokens {
		tenants = append(tenants, t.Tenant)
	}
	return tenants
}

func (r *redisAlerting) Start(ctx context.Context) error {
	// Before anything is written: another deployment in the same database
	// whose keys are this one's tenants' (docs/redis.md, "Two deployments
	// in one database").
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	clash, err := redisstore.PrefixClash(cctx, r.c, r.prefix, r.tenants())
	cancel()
	switch {
	case clash != "":
		return errors.New(clash)
	case err != nil: // Redis away: the bus starts as it always did
		r.log.Warn("could not check that no other deployment in the Redis database shares this one's keys", "err", err)
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	notices, err := newSelfNotifier(r.cfg, r.log)
	if err != nil {
		r.cancel()
		return err
	}
	if r.cmd, err = redisstore.NewCommander(r.ctx, r.c, r.prefix); err != nil {
		r.cancel()
		return err
	}
	r.remote = redisstore.NewRemoteAlerts(r.c, r.prefix, r.cmd, r.log)
	if err := startAll(r.ctx, r.log, r.services()); err != nil {
		r.cmd.Close()
		r.cancel()
		return err
	}
	r.watch = startBusWatch(r.ctx, r.c, r.cfg, notices, r.log)
	r.serves = notices.disp.Serves
	return nil
}

func (r *redisAlerting) Stop(ctx context.Context) error {
	r.watch.stop()
	err := stopAll(ctx, r.log, r.services())
	r.tellers.Wait()
	r.cmd.Close()
	r.cancel()
	return err
}

func (r *redisAlerting) apiOptions(o *httpapi.Options) {
	// The channels are the alert processes': this process cannot check
	// the NOTIFY names against them (Known stays nil).
	o.Alerts, o.Rules = r.remote, rulebook.Book{Engine: r.remote, MetricsKept: r.cfg.Retention.Rollups.D(),
		Save: func(tenant string, src []byte) error {
			return notSaved(r.log, "rules", tenant, r.remote.SaveRules(tenant, src))
		}}
}

func (r *redisAlerting) hubOptions(o *stream.Options, auditLog auditRecorder) {
	// The feed lives as long as the process; the hub subscribes on demand.
	o.Alerts = redisstore.NewAlertFeed(context.Background(), r.c, r.prefix)
	o.Acker = engineAcker{remoteAcker{r}, auditLog}
}

type remoteAcker struct{ r *redisAlerting }

func (a remoteAcker) Ack(ctx context.Context, tenant, id, by string) error {
	return a.r.remote.Ack(ctx, tenant, id, by)
}

func (r *redisAlerting) system(parts map[string]func(string) any) {
	parts["changeFeed"] = func(string) any { return r.feed.Stats() }
	parts["components"] = func(tenant string) any { return r.watch.status(tenant, r.serves) }
}

func (r *redisAlerting) parts() selfmetrics.Parts {
	if r.flusher == nil {
		return nil
	}
	return selfmetrics.Parts{selfmetrics.Watch("redis", r.flusher.Stats)}
}

// onRefused asks the alert processes to raise the critical self-alert (seed
// 4.1); they deduplicate it. It must not block the bus: the publish runs
// in its own goroutine, at most one at a time, and refusals meanwhile are
// folded into it (the alert says "events refused", not how many).
func (r *redisAlerting) onRefused(ref bus.Refusal) {
	if !r.telling.CompareAndSwap(false, true) {
		return
	}
	r.tellers.Add(1)
	go func() {
		defer r.tellers.Done()
		defer r.telling.Store(false)
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		defer cancel()
		_ = r.cmd.Tell(ctx, redisstore.Command{Op: "self", Name: "apollo_events_refused",
			Summary: "the bus refused events (not stored): " + ref.Reason + "; reporters must resend them"})
	}()
}

func (r *redisAlerting) reload() {}

// occur tells the alert processes of a flapping job whose run could not
// be marked (no longer in memory), on <p>:findings, which an alert process
// that is down misses; the rest marks a run, and the change log carries
// the mark (marksFromFeed).
func (r *redisAlerting) occur() func(alert.Occurrence) {
	return func(o alert.Occurrence) {
		if o.Kind != rules.OccurrenceFlapping {
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		defer cancel()
		if err := redisstore.PublishFinding(ctx, r.c, r.prefix, o); err != nil {
			r.log.Warn("telling the alert processes of a flapping job", "tenant", o.Tenant, "job", o.Job, "err", err)
		}
	}
}

// held writes the jobs whose alerts job expectations hold, for the alert
// processes (redisstore.Holder).
func (r *redisAlerting) held() func(redisstore.Held) {
	return func(h redisstore.Held) {
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		defer cancel()
		if err := redisstore.SaveHeld(ctx, r.c, r.prefix, h); err != nil {
			r.log.Warn("writing the held jobs for the alert processes", "err", err)
		}
	}
}

func newBusCmd() *cobra.Command {
	var f serverFlags
	var nf busNodeFlags
	var redisURL string
	cmd := &cobra.Command{
		Use:   "bus",
		Short: "Run the bus: of the three-process mode (with Redis), or a node of the scale-out mode (with NATS)",
		Long: `Run the bus process: ingest, task state, metrics, the API, the stream and
the dashboard — like apollo server — with alerting in separate apollo alert
processes that meet the bus in Redis.

Three-process mode (--redis, no --nats): the bus keeps its own write-ahead
log in --data; metrics are flushed to Redis every second; status changes go
to the alert processes; their alerts come back for the dashboard; acks and
silences go to them. See docs/deploy.md.

Scale-out mode (--nats): several bus nodes take events over HTTP and store
them in NATS JetStream, partitioned by task; each node applies the
partitions it holds a lease on and takes over those of a node that stops.
An event is answered "accepted" once JetStream has stored it; duplicates and
illegal transitions are decided by the partition's owner and show in
GET /api/v1/system. Start every node with the same --partitions; limits in
the configuration are per node. Alerting is apollo alert's, through the
nodes' Redis, as in the three-process mode. See docs/scale-out.md.`,
		Example: `  apollo bus --redis redis://127.0.0.1:6379/0 --data /var/lib/apollo
  apollo alert --redis redis://127.0.0.1:6379/0 --rules rules.txt --config apollo.yaml
  apollo bus --nats nats://127.0.0.1:4222 --partitions 16 --node-id bus-1 --redis redis://127.0.0.1:6379/0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("redis") {
				cfg.Redis.URL = redisURL
			}
			// The rules of a shared apollo.yaml (or apollo.env) are the alert
			// processes' (docs/deploy.md): the bus leaves them alone. Only
			// --rules on its own command line is a mistake worth stopping for.
			if cmd.Flags().Changed("rules") {
				return &exitError{code: 2, err: fmt.Errorf("the bus does not evaluate rules: give --rules %s to apollo alert instead", cfg.Rules)}
			}
			cfg.Rules = ""
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("process", "bus")
			if nf.natsURL != "" {
				if nf.partitions < 1 {
					return &exitError{code: 2, err: fmt.Errorf("--partitions is required with --nats: the same number on every node, e.g. 16 (docs/scale-out.md)")}
				}
				if r := nf.replicas; r != 1 && r != 3 && r != 5 {
					return &exitError{code: 2, err: fmt.Errorf("--nats-replicas %d: use 1, or 3 (5) on a NATS cluster of 3 (5) servers (docs/scale-out.md)", r)}
				}
				// What a node would not do is refused, not left undone in
				// silence: nobody would learn that the jobs never ran.
				if cfg.Jobs != "" {
					return &exitError{code: 2, err: fmt.Errorf("a scale-out node does not run the scheduler: run the jobs of %s with apollo sched --jobs %[1]s --server <a node's URL> (docs/scheduler.md), and start the node without jobs", cfg.Jobs)}
				}
				if cfg.Expectations != "" {
					return &exitError{code: 2, err: fmt.Errorf("a scale-out node does not watch job expectations yet (docs/expectations.md): start the node without expectations (%s)", cfg.Expectations)}
				}
				return runBusNode(cmd.Context(), cfg, nf, log, cmd.OutOrStdout())
			}
			c, err := openRedis(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer c.Close()
			return runServer(cmd.Context(), cfg, serverDeps{log: log, out: cmd.OutOrStdout(), redis: c})
		},
	}
	f.register(cmd, defaultDataHelp)
	fl := cmd.Flags()
	fl.MarkHidden("rules") // kept only to be refused with a word about apollo alert, not offered
	fl.StringVar(&redisURL, "redis", "", "Redis URL (redis://, rediss://, redis-sentinel://, redis-cluster://)")
	fl.StringVar(&nf.natsURL, "nats", "", "scale-out mode: NATS server URL(s), comma-separated, with JetStream")
	fl.IntVar(&nf.partitions, "partitions", 0, "scale-out mode: number of partitions (the same on every node, fixed for the cluster's life)")
	fl.StringVar(&nf.nodeID, "node-id", "", "scale-out mode: this node's name, unique and kept across restarts (default: the host name)")
	fl.IntVar(&nf.replicas, "nats-replicas", 1, "scale-out mode: copies JetStream keeps of the streams and buckets: 1, or 3 (5) on a NATS cluster of 3 (5) servers; the same on every node")
	return cmd
}
