package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/metrics"
)

// Node is one bus node of the scale-out mode. It is what httpapi calls
// (Publish, Get, List, Correct): any node answers for every task.
type Node struct {
	opts     Options
	log      *slog.Logger
	instance string // this process's, in its registration (register.go)

	js     jetstream.JetStream
	ejs    jetstream.JetStream // publishes events (ingest.go): its answers go to published
	events jetstream.Stream
	logs   jetstream.Stream
	kv     jetstream.KeyValue
	snaps  jetstream.ObjectStore
	fan    *fanIn
	starts recentStarts // ping.go

	mu     sync.Mutex
	owned  map[int]*partition // serving
	leases map[int]*lease     // held, serving or being rebuilt
	// openFails are the partitions this node failed to rebuild, not
	// claimed again before their retry time (openretry.go).
	openFails map[int]*openFailure
	// counted are the partitions whose bus counters Stats adds to left's,
	// the counters of those that stopped here: a partition leaves counted
	// only when its bus has stopped, and its last counts go into left at
	// once, so the node's counters never go down (the process's, as
	// docs/monitoring.md says of every counter).
	counted map[int]*partition
	left    bus.Stats
	// listSub is the subscription to apollo.rpc.list; stopAnsweringAll
	// ends the goroutine answering its questions (listing.go, listen).
	listSub          *nats.Subscription
	stopAnsweringAll context.CancelFunc

	questions *questionQueue // to every node, heard and not yet answered (listing.go)
	// answering counts the goroutines answering questions: those about
	// the partitions' tasks, one a partition (open), each ending when its
	// partition leaves the node, and the one answering questions to
	// every node (listen), ending after the partitions have left at Stop.
	// Stop waits for them.
	answering     sync.WaitGroup
	lateQuestions atomic.Uint64 // skipped: their askers had stopped waiting
	logForeign    atomic.Uint64 // messages on the logs no owner wrote, passed over (logreplay.go)

	queuesMu  sync.Mutex
	queues    map[string]*subjectQueue // subject → the group commit of requests using it
	flightsMu sync.Mutex
	flights   map[*nats.Msg]*flight // events messages sent and not answered

	viewMu sync.Mutex
	view   map[string]seen // lease-bucket keys, when last seen written and by whom (watch)

	regRev    uint64        // the revision of this node's last registration; the keeper's
	evicted   chan struct{} // closed by giveWay
	evictOnce sync.Once

	kickc chan struct{}
	warns *loglimit.Limiter // keyed by the warning's message

	life   lifecycle.Group // the watcher, the keeper and Ready's waiter
	ctx    context.Context // of queries; cancelled by Stop
	cancel context.CancelFunc
	stop   chan struct{} // closed when Stop begins: Publish refuses

	readyMu   sync.Mutex    // taken before mu and viewMu, never under them
	firstDone bool          // the first round's claims are rebuilt
	ready     chan struct{} // closed by checkReady (ready.go)
}

var _ interface {
	Publish(ctx context.Context, evs []apollo.Event, out []bus.Outcome) error
	Get(tenant, taskID string) (*apollo.Task, error)
	JobOf(tenant, taskID string) (string, error)
	List(f apollo.TaskFilter) ([]apollo.Task, string, error)
	Ping(ctx context.Context, p apollo.Ping) (apollo.Event, bus.Outcome, error)
	Correct(ctx context.Context, tenant, taskID string, to apollo.Status, actor, reason string) (*apollo.Task, error)
} = (*Node)(nil)

// New checks the options and returns a node; Start connects it to the
// streams and the lease bucket.
func New(opts Options) (*Node, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(opts.Conn) // events go through ejs, below: nothing here publishes asynchronously
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{
		opts: opts, log: opts.Logger.With("component", "cluster", "node", opts.NodeID), js: js,
		instance:  newInstanceID(),
		owned:     map[int]*partition{},
		counted:   map[int]*partition{},
		leases:    map[int]*lease{},
		openFails: map[int]*openFailure{},
		view:      map[string]seen{},
		queues:    map[string]*subjectQueue{},
		flights:   map[*nats.Msg]*flight{},
		kickc:     make(chan struct{}, 1),
		questions: newQuestionQueue(),
		evicted:   make(chan struct{}),
		stop:      make(chan struct{}),
		ready:     make(chan struct{}),
		life:      lifecycle.Group{Name: "cluster"},
	}
	// Every message sent to the events stream is answered through these
	// handlers, within PublishTimeout at most (the timeout, a lost
	// connection and a refusal are answers too): a subject's next message
	// waits for the last one's answer (ingest.go).
	n.ejs, err = jetstream.New(opts.Conn, jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncTimeout(opts.PublishTimeout),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) { n.published(m, ack, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { n.published(m, nil, err) }))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.warns = loglimit.New(time.Second)
	n.fan = newFanIn(opts.Conn, opts.Clock, n.warn)
	// Core NATS keeps nothing for a connection that is away: the changes
	// the owners published during a break never reach this node's
	// listeners, which must resynchronise once it is back
	// (TestChangeListenersResyncAfterAReconnect). The handler the
	// connection had runs first.
	prev := opts.Conn.Opts.ReconnectedCB
	opts.Conn.SetReconnectHandler(func(c *nats.Conn) {
		if prev != nil {
			prev(c)
		}
		n.fan.reconnected()
	})
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n, nil
}

// Start creates or checks the streams and the lease bucket, registers the
// node, and starts claiming partitions. It returns once the node is
// registered; partitions are rebuilt in the background (Ready). A live
// registration of this node ID by another process is waited out, up to a
// lease TTL (a restart after kill -9 finds its own); Start refuses if it
// is renewed meanwhile (two processes with one ID).
func (n *Node) Start(ctx context.Context) error {
	return n.life.Start(ctx, func(context.Context) error { return n.start(ctx) })
}

func (n *Node) start(ctx context.Context) error {
	if err := untilPlaced(ctx, n.log, n.opts.PlacementWait, n.opts.Replicas, func() error { return n.ensure(ctx) }); err != nil {
		return err
	}
	if err := n.listen(); err != nil {
		return err
	}
	if err := n.join(ctx); err != nil {
		n.stopListening() // a later Start listens again
		return err
	}
	return nil
}

// join registers the node and starts watching the lease bucket and
// keeping leases.
func (n *Node) join(ctx context.Context) error {
	if err := n.register(ctx); err != nil {
		return err
	}
	w, err := n.kv.WatchAll(n.ctx)
	if err != nil {
		return fmt.Errorf("cluster: watching the %s bucket: %w", LeaseBucket, err)
	}
	n.life.Go(func(ctx context.Context) error { n.watch(ctx, w); return nil })
	n.life.Go(func(ctx context.Context) error { n.keep(ctx); return nil })
	return nil
}

// ensure creates the streams and the bucket, or checks them, and checks
// that the cluster's partition count is this node's.
func (n *Node) ensure(ctx context.Context) error {
	o := &n.opts
	if err := n.checkJetStream(ctx); err != nil {
		return err
	}
	if err := n.checkPartitionCount(ctx); err != nil {
		return err
	}
	var err error
	n.events, err = n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: EventsStream, Subjects: []string{eventsPrefix + ">"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxAge: o.EventsMaxAge, MaxBytes: cmpOrNeg(o.EventsMaxBytes),
		Duplicates: o.DuplicateWindow, Replicas: o.Replicas, Discard: jetstream.DiscardOld,
		Description: "Apollo-11 reported events, apollo.events.<tenant>.<partition>",
		Metadata:    map[string]string{partitionsMeta: strconv.Itoa(o.Partitions)},
	})
	if err != nil {
		return fmt.Errorf("cluster: the %s stream: %w", EventsStream, err)
	}
	n.logs, err = n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: LogStream, Subjects: []string{logPrefix + ">"}, Storage: jetstream.FileStorage,
		// No age limit: a log is trimmed after each snapshot, and an idle
		// partition's last snapshot marker must never age out.
		Retention: jetstream.LimitsPolicy, Replicas: o.Replicas,
		Description: "Apollo-11 decision logs, apollo.log.<partition>",
	})
	if err != nil {
		return fmt.Errorf("cluster: the %s stream: %w", LogStream, err)
	}
	kvCfg := jetstream.KeyValueConfig{
		Bucket: LeaseBucket, TTL: o.LeaseTTL, History: 1, Storage: jetstream.FileStorage, Replicas: o.Replicas,
		Description: "Apollo-11 partition leases (p.<n>) and node heartbeats (node.<id>)",
		// An expiry leaves a marker, which watchers see: a dead node's
		// partitions are claimed as soon as their leases expire.
		LimitMarkerTTL: o.LeaseTTL,
	}
	n.kv, err = n.js.CreateOrUpdateKeyValue(ctx, kvCfg)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		// A server before 2.11: without markers, a key unwritten for a TTL
		// counts as gone at the next round (bucketView).
		n.log.Info("the NATS server sends no expiry markers (before 2.11): takeovers wait up to one renewal interval more")
		kvCfg.LimitMarkerTTL = 0
		n.kv, err = n.js.CreateOrUpdateKeyValue(ctx, kvCfg)
	}
	if err != nil {
		return fmt.Errorf("cluster: the %s bucket: %w", LeaseBucket, err)
	}
	if o.testKV != nil {
		n.kv = o.testKV(n.kv)
	}
	n.snaps, err = n.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: SnapshotBucket, Storage: jetstream.FileStorage, Replicas: o.Replicas,
		Description: "Apollo-11 partition snapshots, p<partition>-<log sequence>",
	})
	if err != nil {
		return fmt.Errorf("cluster: the %s store: %w", SnapshotBucket, err)
	}
	return nil
}

// checkJetStream refuses a NATS server (or account) without JetStream,
// saying so: every JetStream request there is answered by no one, and the
// first one's "no responders available for request" named neither the
// cause nor the cure.
func (n *Node) checkJetStream(ctx context.Context) error {
	_, err := n.js.AccountInfo(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders):
		return &apollo.Error{Code: apollo.EINVALID, Field: "--nats",
			Message: fmt.Sprintf("the NATS server at %s has no JetStream for this connection's account (%v)", n.opts.Conn.ConnectedUrl(), err),
			Hint:    "start it with JetStream (nats-server -js, or jetstream {} in its configuration) and give the account JetStream (docs/scale-out.md)"}
	}
	return fmt.Errorf("cluster: asking NATS for JetStream: %w", err)
}

// partitionsMeta is the events stream's metadata key that records the
// cluster's partition count.
const partitionsMeta = "apollo_partitions"

func cmpOrNeg(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}

// checkPartitionCount refuses a node started with another partition count
// than the cluster's. The first node to start records its count in the
// settings bucket, created if need be (an atomic create: of two first
// nodes started at once, one records and the other compares); every other
// node compares. Clusters made before the bucket recorded the count in the
// events stream's metadata, which NATS servers before 2.10 drop without a
// word: that is read too, where it is.
func (n *Node) checkPartitionCount(ctx context.Context) error {
	want := strconv.Itoa(n.opts.Partitions)
	s, err := n.js.Stream(ctx, EventsStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return fmt.Errorf("cluster: the %s stream: %w", EventsStream, err)
	default:
		if got, ok := s.CachedInfo().Config.Metadata[partitionsMeta]; ok && got != want {
			return partitionCountError(want, got)
		}
	}
	kv, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: SettingsBucket, History: 1, Storage: jetstream.FileStorage, Replicas: n.opts.Replicas,
		Description: "Apollo-11 cluster settings every node shares (partitions)",
	})
	if err != nil {
		return fmt.Errorf("cluster: the %s bucket: %w", SettingsBucket, err)
	}
	switch _, err = kv.Create(ctx, partitionsKey, []byte(want)); {
	case err == nil:
		return nil // the first node
	case !errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("cluster: recording the partition count in %s: %w", SettingsBucket, err)
	}
	e, err := kv.Get(ctx, partitionsKey)
	if err != nil {
		return fmt.Errorf("cluster: reading the partition count in %s: %w", SettingsBucket, err)
	}
	if got := string(e.Value()); got != want {
		return partitionCountError(want, got)
	}
	return nil
}

// partitionsKey is the settings bucket's key of the partition count.
const partitionsKey = "partitions"

func partitionCountError(want, got string) error {
	return &apollo.Error{Code: apollo.EINVALID, Field: "cluster.Partitions",
		Message: fmt.Sprintf("this node has %s partitions, the cluster %s", want, got),
		Hint:    "start every node with the same --partitions; changing it needs a migration (docs/scale-out.md)"}
}

func (n *Node) metricsOptions() metrics.Options {
	mo := n.opts.Metrics
	mo.Clock, mo.Logger = n.opts.Clock, n.log
	return mo
}

// Stop hands every partition over (its decisions durable, a bookmark in
// its log, its metrics flushed), gives up the leases and the registration,
// and waits for everything it started, or for ctx. It is idempotent, and
// returns the error of giving the registration up.
func (n *Node) Stop(ctx context.Context) error {
	return n.life.Stop(ctx, func(halt func()) error {
		close(n.stop)
		n.cancel()
		halt()
		n.fan.close()
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.PublishTimeout)
		defer cancel()
		if n.kv == nil {
			n.stopListening()
			return nil // never started
		}
		if n.opts.testStoppingHook != nil {
			n.opts.testStoppingHook()
		}
		n.releaseAll(ctx)
		n.stopListening()  // listings were answered for what was left
		n.answering.Wait() // every partition has left: their answerers end
		select {
		case <-n.evicted:
			return nil // the registration is the other process's
		default:
		}
		if err := n.unregister(ctx); err != nil {
			return fmt.Errorf("cluster: giving up the registration of node %s: %w", n.opts.NodeID, err)
		}
		return nil
	})
}

// unregister deletes this process's registration, and never another's of
// its ID.
func (n *Node) unregister(ctx context.Context) error {
	key := nodeKey(n.opts.NodeID)
	err := n.kv.Delete(ctx, key, jetstream.LastRevision(n.regRev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		// A renewal whose answer was lost wrote a later revision.
		e, gerr := n.kv.Get(ctx, key)
		if gerr != nil {
			return nil // gone
		}
		var r registration
		json.Unmarshal(e.Value(), &r)
		if r.Instance != n.instance {
			return nil
		}
		err = n.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// SubscribeChanges returns a subscription to the changes applied on every
// node, as bus.Bus.Subscribe does for one bus.
func (n *Node) SubscribeChanges(buffer int) (*bus.Subscription, error) {
	return n.fan.subscribe(buffer)
}

// kick makes the lease keeper run a round now.
func (n *Node) kick() {
	select {
	case n.kickc <- struct{}{}:
	default:
	}
}

// warn logs at most one warning of each kind (its message) a second (hot
// paths: every bad message would otherwise log), with the number of that
// kind left out since the last one. One limit for all let a flood of one
// kind hide the others. Every message passed is a constant or one of a
// few, so the kinds are few.
func (n *Node) warn(msg string, args ...any) {
	if ok, skipped := n.warns.Allow(msg, n.opts.Clock.Now()); ok {
		n.log.Warn(msg, append(args, "suppressed", skipped)...)
	}
}
