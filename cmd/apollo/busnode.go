package main

import (
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
	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/web"
)

// busNodeFlags are the flags of `apollo bus` in the scale-out mode.
type busNodeFlags struct {
	server     serverFlags // --config, --listen, --insecure-no-auth (and the rest, unused here)
	natsURL    string
	partitions int
	nodeID     string
	redisURL   string
}

func newBusCmd() *cobra.Command {
	var f busNodeFlags
	cmd := &cobra.Command{
		Use:   "bus",
		Short: "Run a bus node of the scale-out mode (events through NATS JetStream)",
		Long: `Run one bus node of the scale-out mode (docs/scale-out.md). Every node
takes events over HTTP and stores them in NATS JetStream, partitioned by
task; each node applies the partitions it holds a lease on, and takes over
the partitions of a node that stops renewing its leases. Metrics go to
Redis, one writer per partition.

An event is answered "accepted" once JetStream has stored it; duplicates
of earlier sequences and illegal transitions are decided afterwards by the
partition's owner and show in GET /api/v1/system, not in the answer.

Start every node with the same --partitions. Limits in the configuration
are per node: each partition's bus gets its share.`,
		Example: `  apollo bus --nats nats://127.0.0.1:4222 --partitions 16 --node-id bus-1 --redis redis://127.0.0.1:6379/0
  apollo bus --nats nats://nats-1:4222,nats://nats-2:4222 --partitions 16 --config apollo.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.server.load(cmd)
			if err != nil {
				return err
			}
			if f.natsURL == "" {
				return errors.New("--nats is required: the NATS server(s) with JetStream, e.g. nats://127.0.0.1:4222")
			}
			if f.partitions < 1 {
				return errors.New("--partitions is required: the same number on every node, e.g. 16 (docs/scale-out.md)")
			}
			if f.redisURL != "" {
				cfg.Redis.URL = f.redisURL
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return runBusNode(cmd.Context(), cfg, f, log, cmd.OutOrStdout())
		},
	}
	f.server.register(cmd)
	fl := cmd.Flags()
	for _, name := range []string{"data", "fsync", "rules", "jobs"} { // the server's, not a node's
		fl.MarkHidden(name)
	}
	fl.StringVar(&f.natsURL, "nats", "", "NATS server URL(s), comma-separated, with JetStream enabled")
	fl.IntVar(&f.partitions, "partitions", 0, "number of partitions (the same on every node; fixed for the cluster's life)")
	fl.StringVar(&f.nodeID, "node-id", "", "this node's name, unique in the cluster and kept across restarts (default: the host name)")
	fl.StringVar(&f.redisURL, "redis", "", "Redis URL for the shared metrics (overrides redis.url in the configuration)")
	return cmd
}

// runBusNode connects to NATS and Redis, starts the node and serves the
// API until ctx ends, then hands the partitions over.
func runBusNode(ctx context.Context, cfg config.Config, f busNodeFlags, log *slog.Logger, out io.Writer) error {
	if err := checkListen(cfg); err != nil {
		return err
	}
	id := f.nodeID
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-id is needed: %w", err)
		}
		id = host
	}
	nc, err := nats.Connect(f.natsURL, nats.Name("apollo-bus "+id), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", f.natsURL, err)
	}
	defer nc.Close()
	var rdb redis.UniversalClient
	if cfg.Redis.URL != "" {
		if rdb, err = redisstore.Open(cfg.Redis.URL); err != nil {
			return err
		}
		defer rdb.Close()
	} else {
		log.Warn("no Redis (--redis or redis.url): each partition keeps its metrics in memory, and the metrics routes answer nothing")
	}
	node, err := cluster.New(cluster.Options{
		Conn: nc, NodeID: id, Partitions: f.partitions, Redis: rdb, RedisPrefix: cfg.Redis.Prefix,
		Bus:     partitionBusOptions(cfg, f.partitions),
		Metrics: metrics.Options{BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D()},
		Logger:  log,
	})
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop()
	api, err := busNodeAPI(cfg, node, rdb, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (choose another --listen)", cfg.Listen, err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	fmt.Fprintf(out, "Apollo-11 is up: http://%s  (bus node %s, %d partitions, NATS %s)\n", ln.Addr(), id, f.partitions, f.natsURL)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		log.Error("HTTP server stopped", "err", err)
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
// that holds them all stays within them.
func partitionBusOptions(cfg config.Config, partitions int) bus.Options {
	share := func(v int) int { return max(v/partitions, 1) }
	return bus.Options{
		TaskQueueLen: cfg.Limits.TaskQueue, HistoryLimit: cfg.Limits.History,
		HoldLimit: share(cfg.Limits.HoldingArea), QueueLimit: share(cfg.Limits.Queue), MaxTasks: share(cfg.Limits.Tasks),
		Retention: cfg.Retention.Finished.D(), IdleRetention: cfg.Retention.Idle.D(),
		DedupRetention: cfg.Retention.Dedup.D(), ReorderWindow: cfg.Retention.Reorder.D(),
		Lateness: latenessFromConfig(cfg),
		Workers:  2, // per partition: a node holds several
	}
}

// busNodeAPI is the HTTP API of a node: the same routes as the server,
// over the cluster. The live stream (GET /api/v1/stream) is not served
// yet: httpapi.Hub takes a *bus.Subscription, and the cluster's changes
// come from every node (cluster.Node.SubscribeChanges).
func busNodeAPI(cfg config.Config, node *cluster.Node, rdb redis.UniversalClient, log *slog.Logger) (*httpapi.Server, error) {
	auth := httpapi.Authenticator(httpapi.OpenAuth{})
	if len(cfg.Auth.Tokens) > 0 {
		toks, err := tokensFromConfig(cfg.Auth.Tokens)
		if err != nil {
			return nil, err
		}
		auth = httpapi.NewTokenAuth(toks)
	}
	opts := httpapi.Options{
		Bus: node, Auth: auth, Logger: log, Web: web.Handler(),
		MaxBodyBytes: cfg.Limits.BodyBytes, IngestRate: cfg.Limits.IngestPerSec,
		System: map[string]func() any{"cluster": func() any { return node.NodeStats() }},
		Ready: func() bool {
			select {
			case <-node.Ready():
				return true
			default:
				return false
			}
		},
	}
	if rdb != nil {
		st, err := redisstore.NewStore(redisstore.Options{Client: rdb, Prefix: cfg.Redis.Prefix,
			BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D()})
		if err != nil {
			return nil, err
		}
		opts.Metrics = st
	}
	return httpapi.New(opts), nil
}
