package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
	"github.com/apollo-11/apollo/web"
)

// busNodeFlags are the flags of `apollo bus` that select the scale-out
// mode (newBusCmd in processes.go).
type busNodeFlags struct {
	natsURL    string
	partitions int
	nodeID     string
	// replicas of the streams and buckets, the audit stream's too:
	// without it, a NATS cluster of three kept one copy of everything.
	replicas int
}

// runBusNode connects to NATS and Redis, starts the node and serves the
// API until ctx ends, then hands the partitions over.
func runBusNode(ctx context.Context, cfg config.Config, f busNodeFlags, log *slog.Logger, out io.Writer) error {
	if err := checkListen(cfg); err != nil {
		return err
	}
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	applyCollectorSettings(cfg)
	warnConfig(cfg, log)
	id := f.nodeID
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-id is needed: %w", err)
		}
		id = host
	}
	nc, err := nats.Connect(f.natsURL, nats.Name("apollo-bus "+id), nats.MaxReconnects(-1),
		// Said once each way: while cut off, the node refuses every event
		// and question at once (cluster/cutoff.go) and its leases run out.
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if !c.IsClosed() { // closed: the node is stopping
				log.Error("cut off NATS, reconnecting: events are answered retry_later and reads 503 until it is back", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("reconnected to NATS", "url", c.ConnectedUrl()) }))
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", f.natsURL, err)
	}
	defer nc.Close()
	var rdb redis.UniversalClient
	if cfg.Redis.URL != "" {
		// Checked at start, as the three-process bus does: a wrong URL
		// stops the start rather than leave the metrics unwritten.
		if rdb, err = openRedis(ctx, cfg, log); err != nil {
			return err
		}
		defer rdb.Close()
	} else {
		log.Warn("no Redis (--redis or redis.url): each partition keeps its metrics in memory, and the metrics routes answer nothing")
	}
	mo := metrics.Options{BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D()}
	opts := cluster.Options{Conn: nc, NodeID: id, Partitions: f.partitions, Replicas: f.replicas,
		Bus: partitionBusOptions(cfg, f.partitions), Metrics: mo, Logger: log}
	if rdb != nil {
		// Every partition's metrics reach Redis under the partition's
		// writer ID, so that whichever node owns it next writes on.
		opts.Sink = func(c cluster.SinkConfig) (cluster.MetricsSink, error) {
			return redisstore.NewFlusher(c.Aggregator, redisstore.Options{Client: rdb, Prefix: cfg.Redis.Prefix,
				Writer: c.Writer, Clock: c.Clock, Logger: c.Logger,
				BucketRetention: mo.BucketRetention, RollupRetention: mo.RollupRetention})
		}
	}
	var alerting *redisAlerting
	if rdb != nil {
		// As the three-process bus: the owners of the partitions tell the
		// alert processes of every live change (event rules), and the API
		// and stream reach their alerts, rules, silences and acks.
		alerting = newRedisAlerting(rdb, cfg, log, apollo.SystemClock)
		if testHoldLive != nil {
			opts.Bus.Live = append(opts.Bus.Live, testHoldLive)
		}
		// Each partition has its part of the feed, with its own mark: the
		// next owner tells what a killed one applied and had not written
		// (docs/architecture.md, "A scale-out node keeps the promise per
		// partition").
		feed := alerting.changeFeed()
		opts.Feed = func(c cluster.FeedConfig) (cluster.LiveFeed, error) {
			return feed.Part(c.Partition, c.Mark, c.Logger), nil
		}
		// Events an owner refuses were answered accepted by some node:
		// the critical self-alert tells of them (invariant 4).
		opts.Bus.OnRefused = alerting.onRefused
		if err := alerting.Start(ctx); err != nil {
			return err
		}
		// Stopped after the node (deferred first): the feed sends the
		// changes of the partitions' last moments.
		defer stopService(context.Background(), log, "alerting", alerting)
	}
	node, err := cluster.New(opts)
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for an old registration to expire
		}
		return err
	}
	defer stopService(context.Background(), log, "the cluster node", node)
	store, err := nodeMetrics(cfg, rdb)
	if err != nil {
		return err
	}
	// Shared by the nodes and durable: a correction through one node is
	// listed by every node, and outlives it.
	auditLog, err := cluster.OpenAudit(ctx, cluster.AuditOptions{Conn: nc, Replicas: opts.Replicas, Clock: apollo.SystemClock, Logger: log})
	if err != nil {
		return err
	}
	defer auditLog.Close()
	tcp, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (choose another --listen)", cfg.Listen, err)
	}
	defer tcp.Close() // the HTTP server's shutdown closes it, unless a step before it fails
	limits := connectionLimits(cfg.Limits, fileLimit(), log)
	ln := httpapi.LimitConnections(tcp, limits.conns, log, nil)
	hubOpts := stream.Options{Bus: node, Changes: nodeChanges(node, log), Logger: log, AllowedOrigins: cfg.Auth.AllowedOrigins,
		MaxClients: limits.streams, TenantClients: limits.tenantStreams}
	if store != nil {
		hubOpts.Metrics = httpapi.StreamMetrics(store, apollo.SystemClock, 10*time.Second)
	}
	if alerting != nil {
		alerting.hubOptions(&hubOpts, auditLog)
	} else {
		hubOpts.NoAckHint = nodeNoAlertingHint
	}
	hub, err := stream.New(hubOpts)
	if err != nil {
		return err
	}
	if err := hub.Start(ctx); err != nil {
		return err
	}
	defer stopService(context.Background(), log, "the stream", hub)
	api, err := busNodeAPI(cfg, nodeParts{node, hub, store, alerting, auditLog, ln}, log)
	if err != nil {
		return err
	}
	srv := apiHTTPServer(api, tlsConfig, log, apollo.SystemClock, ln)
	dm := startDeadman(cfg.Deadman, "bus", apollo.SystemClock, log)
	defer dm.stop()
	fmt.Fprintf(out, apiclient.ReadyPrefix+"%s://%s  (bus node %s, %d partitions, NATS %s)\n", apiScheme(tlsConfig), ln.Addr(), id, f.partitions, f.natsURL)
	serveErr := make(chan error, 1)
	go func() { serveErr <- serveAPI(srv, ln) }()
	stopWarning, warned := make(chan struct{}), make(chan struct{})
	go func() { defer close(warned); warnInsecure(cfg, log, apollo.SystemClock, stopWarning) }()
	defer func() { close(stopWarning); <-warned }()
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		log.Error("HTTP server stopped", "err", err)
	case <-node.Evicted():
		// Another process took this node ID while this one could not
		// renew it (paused, cut off): the node serves nothing any more.
		err = fmt.Errorf("another process runs as node %q: it registered the ID while this one could not renew it; this one stops (give each node its own --node-id)", id)
	}
	// Shutdown order: stop taking requests, then hand the partitions over
	// (deferred node.Stop), then close Redis and NATS.
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// partitionBusOptions are the limits of one partition's bus: the
// configured (per node) limits divided among the partitions, so a node
// that holds them all stays within them. A limit of 0 is the default, as
// apollo server reads it (its bus takes 0 for its default): dividing the
// 0 itself left each partition room for one.
func partitionBusOptions(cfg config.Config, partitions int) bus.Options {
	def := config.Default().Limits
	share := func(v int) int { return max(v/partitions, 1) }
	cfg.Limits.Tasks = cmp.Or(cfg.Limits.Tasks, def.Tasks)
	cfg.Limits.Queue = cmp.Or(cfg.Limits.Queue, def.Queue)
	cfg.Limits.HoldingArea = cmp.Or(cfg.Limits.HoldingArea, def.HoldingArea)
	tenants := cfg.Limits.TenantTaskLimits()
	for tenant, n := range tenants {
		tenants[tenant] = share(n)
	}
	tenantTasks := 0
	if cfg.Limits.TenantTasks > 0 {
		tenantTasks = share(cfg.Limits.TenantTasks)
	}
	return bus.Options{
		TaskQueueLen: cfg.Limits.TaskQueue, HistoryLimit: cfg.Limits.History,
		HoldLimit: share(cfg.Limits.HoldingArea), QueueLimit: share(cfg.Limits.Queue), MaxTasks: share(cfg.Limits.Tasks),
		TenantMaxTasks: tenantTasks, TenantTasks: tenants,
		Retention: cfg.Retention.Finished.D(), IdleRetention: cfg.Retention.Idle.D(),
		DedupRetention: cfg.Retention.Dedup.D(), ReorderWindow: cfg.Retention.Reorder.D(),
		Lateness: latenessFromConfig(cfg), DefaultTimeout: cfg.RunTimeout.D(),
		Workers: 2, // per partition: a node holds several
	}
}

// nodeChanges feeds the stream hub with the changes of every node of the
// cluster. A node that cannot subscribe (it is stopping) gives a feed that
// never delivers, rather than one the hub would retry in a loop.
func nodeChanges(node *cluster.Node, log *slog.Logger) func(int) stream.ChangeSubscription {
	return func(n int) stream.ChangeSubscription {
		sub, err := node.SubscribeChanges(n)
		if err != nil {
			log.Warn("the stream cannot follow the cluster's changes", "err", err)
			return deadFeed{err}
		}
		return sub
	}
}

type deadFeed struct{ err error }

func (deadFeed) C() <-chan *apollo.Change { return nil }
func (d deadFeed) Err() error             { return d.err }
func (deadFeed) Close()                   {}

// nodeMetrics is the metrics the node's API and stream read: every
// partition's, in Redis; nil without Redis.
func nodeMetrics(cfg config.Config, rdb redis.UniversalClient) (httpapi.MetricsStore, error) {
	if rdb == nil {
		return nil, nil
	}
	st, err := redisstore.NewStore(redisstore.Options{Client: rdb, Prefix: cfg.Redis.Prefix,
		BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D()})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// nodeNoAlertingHint is what a node without Redis says where alerting
// would answer: the API's alerting routes, and an ack over the stream.
const nodeNoAlertingHint = "alerting in the scale-out mode is apollo alert's, through Redis: give the nodes --redis (or redis.url) and run apollo alert with the same Redis (docs/scale-out.md)"

// nodeParts are what a node's API serves; alerting and store are nil
// without Redis.
type nodeParts struct {
	node     *cluster.Node
	hub      *stream.Hub
	store    httpapi.MetricsStore
	alerting *redisAlerting
	audit    *cluster.Audit
	conns    *httpapi.ConnLimit
}

// busNodeAPI is the HTTP API of a node: the same routes as the server,
// over the cluster, with the live stream of every node's changes and the
// alert processes' alerts.
func busNodeAPI(cfg config.Config, np nodeParts, log *slog.Logger) (*httpapi.Server, error) {
	node, hub := np.node, np.hub
	auth := httpapi.Authenticator(httpapi.OpenAuth{})
	if len(cfg.Auth.Tokens) > 0 {
		toks, err := tokensFromConfig(cfg.Auth.Tokens)
		if err != nil {
			return nil, err
		}
		auth = httpapi.NewTokenAuth(toks)
	}
	parts := selfmetrics.Parts{selfmetrics.Watch("bus", node.Stats), selfmetrics.Watch("stream", hub.Stats),
		selfmetrics.Watch("connections", np.conns.Stats)}
	opts := httpapi.Options{
		Bus: node, Stream: hub, Auth: auth, Audit: np.audit, Logger: log, Web: web.Handler(),
		AllowedHosts: allowedHosts(cfg), AllowedOrigins: cfg.Auth.AllowedOrigins,
		MaxBodyBytes: cfg.Limits.BodyBytes, IngestRate: cfg.Limits.IngestPerSec,
		Metrics: np.store, System: parts.System(), Prometheus: parts.Handler(log, httpapi.TenantOf),
		Ready: func() bool {
			select {
			case <-node.Ready():
				return true
			default:
				return false
			}
		},
		Unavailable: node.Unavailable,
	}
	opts.System["cluster"] = everyTenant(func() any { return node.NodeStats() })
	if np.alerting != nil {
		np.alerting.apiOptions(&opts)
		np.alerting.system(opts.System)
	} else {
		opts.NoAlertingHint = nodeNoAlertingHint
	}
	return httpapi.New(opts), nil
}
