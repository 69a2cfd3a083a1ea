package cluster

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

// Defaults of Options.
const (
	DefaultLeaseTTL        = 10 * time.Second
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultEventsMaxAge    = 24 * time.Hour
	DefaultPublishTimeout  = 5 * time.Second
	DefaultQueryTimeout    = 2 * time.Second
	DefaultSnapshotEvery   = 5 * time.Minute
	MaxPartitions          = 1024
)

// Options configure a Node. Conn, NodeID and Partitions are required.
type Options struct {
	// Conn is the node's connection to NATS. The node does not close it;
	// it sets the connection's reconnect handler to one that calls the
	// handler set before, then resynchronises the node's change
	// listeners.
	Conn *nats.Conn
	// NodeID names the node among the others: letters, digits, '.', '_'
	// and '-', at most 64 bytes, unique in the cluster.
	NodeID string
	// Partitions is the number of partitions; every node must be started
	// with the same number (the first node records it; the others refuse
	// to start with another). It cannot change without a migration.
	Partitions int

	// Sink, when set, is built for every partition around its aggregator
	// and takes the aggregator's place as the partition bus's observer:
	// cmd/apollo gives redisstore's flusher, so that every partition's
	// metrics reach Redis under the partition's writer ID. Nil: metrics
	// stay in each partition's memory (tests, a trial without Redis).
	Sink func(SinkConfig) (MetricsSink, error)

	// Feed, when set, is built for every partition and follows Bus.Live
	// as a live observer of its bus: cmd/apollo gives a part of
	// redisstore's change feed, which tells the alert processes of the
	// partition's changes and keeps the partition's mark, so that the
	// next owner tells what a killed one had not (livefeed.go).
	Feed func(FeedConfig) (LiveFeed, error)

	// Bus is the template of every partition's bus: limits, retentions,
	// lateness, OnRefused. Log, Clock and Logger are the node's. Observers
	// given here follow the node's own on every partition, and see the
	// changes replayed when a partition is taken over as well as the live
	// ones (like observers of a recovering server); Live ones see only the
	// changes decided after the partition is taken, and those above the
	// Feed's mark that the replay hands it (livefeed.go).
	Bus bus.Options
	// Metrics sets the retentions of every partition's aggregator.
	Metrics metrics.Options

	// LeaseTTL is how long a partition stays with a node that stopped
	// renewing it: the longest a dead node's partitions wait. Default 10s.
	LeaseTTL time.Duration
	// RenewEvery is how often leases are renewed and balance is checked;
	// default LeaseTTL/5.
	RenewEvery time.Duration

	// Replicas of the streams and the bucket (1, 3 or 5); default 1.
	Replicas int
	// PlacementWait is how long Start waits for JetStream to place the
	// copies of the streams and buckets when too few of the NATS
	// cluster's servers are up; default DefaultPlacementWait.
	PlacementWait time.Duration
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values;
	// default 2m.
	DuplicateWindow time.Duration
	// EventsMaxAge and EventsMaxBytes limit the events stream; an event
	// must be decided before it ages out. Defaults 24h, unlimited.
	EventsMaxAge   time.Duration
	EventsMaxBytes int64

	// SnapshotEvery is how often each partition's state is written to the
	// snapshot store and its log trimmed; default 5m. A rebuild reads the
	// last snapshot and the log after it.
	SnapshotEvery time.Duration

	// PublishTimeout bounds waiting for JetStream to store events; default 5s.
	PublishTimeout time.Duration
	// QueryTimeout bounds a question to another node; default 2s.
	QueryTimeout time.Duration

	Clock  apollo.Clock // default apollo.SystemClock
	Logger *slog.Logger // default slog.Default()

	// testNoClaim, set by tests, keeps a node from claiming partitions.
	testNoClaim bool
	// testHook, set by tests, hears "taken", "dropped" and "released"
	// with the partition.
	testHook func(event string, p int)
	// testAckHook, set by tests, runs before the node records JetStream's
	// answer to an events message; it may block to hold the answers back.
	testAckHook func()
	// testQueuedHook, set by tests, hears that a request's events for a
	// subject wait for the message in flight (ingest.go).
	testQueuedHook func()
	// testLogHook, set by tests, runs before each message of a partition's
	// decision log is published; it may block to make the log slow.
	testLogHook func()
	// testLogWait, set by tests, runs when a partition's bus waits for
	// its decision log: to answer a Publish, or to tell changes.
	testLogWait func(lsn uint64)
	// testServeAllHook, set by tests, runs before the node serves a
	// question to every node; it may block to make the node busy.
	testServeAllHook func()
	// testServeTaskHook, set by tests, runs before the node serves a
	// question about one task; it may block to make the partition busy.
	testServeTaskHook func()
	// testStoppingHook, set by tests, runs in Stop before the node hands
	// its partitions over.
	testStoppingHook func()
	// testKV, set by tests, wraps the lease bucket (to lose answers, fail
	// reads).
	testKV func(jetstream.KeyValue) jetstream.KeyValue
}

func (o *Options) setDefaults() {
	o.LeaseTTL = cmp.Or(o.LeaseTTL, DefaultLeaseTTL)
	o.RenewEvery = cmp.Or(o.RenewEvery, o.LeaseTTL/5)
	o.Replicas = cmp.Or(o.Replicas, 1)
	o.PlacementWait = cmp.Or(o.PlacementWait, DefaultPlacementWait)
	o.DuplicateWindow = cmp.Or(o.DuplicateWindow, DefaultDuplicateWindow)
	o.EventsMaxAge = cmp.Or(o.EventsMaxAge, DefaultEventsMaxAge)
	o.PublishTimeout = cmp.Or(o.PublishTimeout, DefaultPublishTimeout)
	o.QueryTimeout = cmp.Or(o.QueryTimeout, DefaultQueryTimeout)
	o.SnapshotEvery = cmp.Or(o.SnapshotEvery, DefaultSnapshotEvery)
	o.Clock = cmp.Or[apollo.Clock](o.Clock, apollo.SystemClock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	bad := func(field, msg, hint string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: "cluster." + field, Message: msg, Hint: hint}
	}
	switch {
	case o.Conn == nil:
		return bad("Conn", "no NATS connection", "connect with nats.Connect(url) and pass the connection")
	case o.NodeID == "" || len(o.NodeID) > 64 || strings.ContainsFunc(o.NodeID, notIDChar):
		return bad("NodeID", fmt.Sprintf("%q is not 1 to 64 letters, digits, '.', '_' or '-'", o.NodeID), "name the node, e.g. bus-1, and keep the name across restarts")
	case o.Partitions < 1 || o.Partitions > MaxPartitions:
		return bad("Partitions", fmt.Sprintf("%d is not between 1 and %d", o.Partitions, MaxPartitions), "use the number the cluster was created with (docs/scale-out.md)")
	case o.LeaseTTL < time.Second:
		return bad("LeaseTTL", fmt.Sprintf("%v is below 1s", o.LeaseTTL), "leave it unset for 10s")
	case o.RenewEvery <= 0 || o.RenewEvery > o.LeaseTTL/3:
		return bad("RenewEvery", fmt.Sprintf("%v is not above 0 and at most a third of the lease TTL %v", o.RenewEvery, o.LeaseTTL), "leave it unset for a fifth of the TTL")
	case o.Replicas != 1 && o.Replicas != 3 && o.Replicas != 5:
		return bad("Replicas", fmt.Sprintf("%d is not 1, 3 or 5", o.Replicas), "use 3 on a NATS cluster of 3 servers")
	case o.DuplicateWindow < time.Second:
		return bad("DuplicateWindow", fmt.Sprintf("%v is below 1s", o.DuplicateWindow), "leave it unset for 2m")
	case o.SnapshotEvery < time.Second:
		return bad("SnapshotEvery", fmt.Sprintf("%v is below 1s", o.SnapshotEvery), "leave it unset for 5m")
	case o.EventsMaxAge < o.DuplicateWindow:
		return bad("EventsMaxAge", fmt.Sprintf("%v is below the duplicate window %v", o.EventsMaxAge, o.DuplicateWindow), "leave it unset for 24h")
	}
	return nil
}

func notIDChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

// MetricsSink is where a partition's metrics go besides its aggregator:
// it observes the partition's bus (passing every change on to the
// aggregator it was built around), runs from Start until Stop.
type MetricsSink interface {
	bus.Observer
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// SinkConfig is what Options.Sink gets for one partition.
type SinkConfig struct {
	Aggregator *metrics.Aggregator
	Writer     string // the partition's writer ID, "p0007": never the node's, so a takeover writes on
	Clock      apollo.Clock
	Logger     *slog.Logger
}

// writerID is a partition's redisstore writer: the partition, never the
// node, so that whichever node owns it writes the same absolute numbers.
func writerID(p int) string { return fmt.Sprintf("p%04d", p) }
