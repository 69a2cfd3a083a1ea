package stream

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/internal/wake"
)

// Bus is what the hub needs of the task state: listings, for snapshots.
type Bus interface {
	List(f apollo.TaskFilter) ([]apollo.Task, string, error)
}

// ChangeSubscription is a feed of applied changes that ends when the
// subscriber is too slow (Err says so) or is closed: a *bus.Subscription,
// or a scale-out node's feed of every node's changes.
type ChangeSubscription interface {
	C() <-chan *apollo.Change
	Err() error
	Close()
}

// AlertSource hands the hub every alert change (a new alert, a state
// change, an acknowledgement) until cancel is called. The alert engine
// implements it.
type AlertSource interface {
	SubscribeAlerts() (<-chan apollo.Alert, func())
}

// MetricsSource gives the summaries that the stream sends every
// MetricsInterval: the same value GET /api/v1/metrics answers for the
// tenant and prefix.
type MetricsSource interface {
	StreamSummaries(tenant, prefix string) (any, error)
}

// Acker acknowledges an alert in the caller's tenant for the caller; the
// stream's ack message calls it. It gets the whole caller, so that the
// ack is audited as one through the REST API is: by whom and from where.
type Acker interface {
	Ack(ctx context.Context, who Caller, alertID string) error
}

// Caller is who opened a connection, as the HTTP layer that mounts the
// hub authenticated it. The hub knows no roles: it shows Role in the
// hello, and lets the caller acknowledge alerts when MayAck says so.
type Caller struct {
	Name   string // the credential's name: the hello, and who acked
	Tenant string // the only tenant whose tasks and alerts it sees
	Role   string // as the hello shows it
	MayAck bool   // the role may acknowledge alerts (operator or above)
	Remote string // the client's address, as the HTTP request had it: audited with an ack
}

// Options configure a Hub. Bus and Changes are required; every other
// field has a default or is optional.
type Options struct {
	Bus Bus
	// Changes subscribes to the applied changes the hub streams: the bus's
	// Subscribe, or a scale-out node's merged feed.
	Changes func(buffer int) ChangeSubscription
	Alerts  AlertSource   // nil: no alert messages
	Metrics MetricsSource // nil: no metric messages
	Acker   Acker         // nil: ack answers "not available", and NoAckHint
	// NoAckHint, without an Acker, says what would make acks work in this
	// process (a scale-out node: give it Redis and run apollo alert).
	NoAckHint string
	// System returns Apollo-11's own health for the system message, as
	// the tenant may see it (the body of GET /api/v1/system); nil: no
	// system messages.
	System func(tenant string) any
	Clock  apollo.Clock
	Logger *slog.Logger

	// AllowedOrigins are extra origins allowed to open the stream from a
	// browser, as path.Match patterns of the host ("dash.example.com",
	// "*.example.com") or, with a scheme, of scheme://host. The page's own
	// host is always allowed; clients that send no Origin (not browsers)
	// are not checked.
	AllowedOrigins []string

	BusBuffer    int // changes the bus may queue for the hub; default 65 536
	RingSize     int // changes kept for resuming; default 10 000
	SnapshotSize int // tasks in a snapshot; default 500, at most 1 000
	// SendQueue bounds each client's outbound queue, in messages; a client
	// over it is closed as too slow. Default 256.
	SendQueue int
	// SendQueueBytes bounds the same queue in bytes; default 16 MiB.
	SendQueueBytes int
	// PendingLimit bounds the changes waiting for one unthrottled client,
	// or the tasks waiting for one coalescing group; default 10 000.
	PendingLimit int
	// MaxClients bounds the connections open at once, all tenants
	// together, and TenantClients those of one tenant (0: MaxClients).
	// Each costs a file descriptor and about 50 KB: without a bound one
	// viewer could take every descriptor the process has, and no request
	// of anyone would be accepted. Past either, Serve refuses with
	// ETOOMANY before the upgrade. Defaults 4 000 and MaxClients.
	MaxClients    int
	TenantClients int

	FlushInterval     time.Duration // coalesced updates; default 100ms
	HeartbeatInterval time.Duration // business-level heartbeat; default 15s, negative: off
	PingInterval      time.Duration // protocol ping; default 10s
	MissedPongs       int           // pings without a pong before closing; default 3
	SystemInterval    time.Duration // default 5s
	MetricsInterval   time.Duration // default 10s
	WriteTimeout      time.Duration // one message to one client; default 10s
	AckTimeout        time.Duration // one Acker call; default 10s

	// testGate, when set, runs before the dispatcher takes a batch: tests
	// block it to make the bus cut the hub off.
	testGate func()
	// testKilled, when set, is told each time the hub decides to close a
	// client, with the reason.
	testKilled func(reason string)
	// testDrain, when set, runs each time a client's writer is woken,
	// before it takes its queue: tests block it to let messages queue.
	testDrain func()
	// testPonged, when set, is told each time a client's pinger has
	// handled the answer to its ping, so a test on a fake clock can let
	// the next ping fall due only after it.
	testPonged func()
}

func (o *Options) setDefaults() {
	o.Clock = cmp.Or[apollo.Clock](o.Clock, apollo.SystemClock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.BusBuffer = cmp.Or(o.BusBuffer, 1<<16)
	o.RingSize = cmp.Or(o.RingSize, 10_000)
	o.SnapshotSize = cmp.Or(o.SnapshotSize, 500)
	o.SendQueue = cmp.Or(o.SendQueue, 256)
	o.SendQueueBytes = cmp.Or(o.SendQueueBytes, 16<<20)
	o.PendingLimit = cmp.Or(o.PendingLimit, 10_000)
	o.MaxClients = cmp.Or(o.MaxClients, 4_000)
	o.TenantClients = cmp.Or(o.TenantClients, o.MaxClients)
	o.FlushInterval = cmp.Or(o.FlushInterval, 100*time.Millisecond)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, 15*time.Second)
	o.PingInterval = cmp.Or(o.PingInterval, 10*time.Second)
	o.MissedPongs = cmp.Or(o.MissedPongs, 3)
	o.SystemInterval = cmp.Or(o.SystemInterval, 5*time.Second)
	o.MetricsInterval = cmp.Or(o.MetricsInterval, 10*time.Second)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, 10*time.Second)
	o.AckTimeout = cmp.Or(o.AckTimeout, 10*time.Second)
}

func (o *Options) validate() error {
	switch {
	case o.Bus == nil:
		return errors.New("stream hub: Options.Bus is nil; pass the *bus.Bus")
	case o.Changes == nil:
		return errors.New("stream hub: Options.Changes is nil: nothing to stream; pass the bus's Subscribe")
	case o.BusBuffer < 0, o.RingSize < 0, o.SendQueue < 0, o.SendQueueBytes < 0, o.PendingLimit < 0, o.MissedPongs < 0,
		o.MaxClients < 0, o.TenantClients < 0:
		return errors.New("stream hub: a negative limit in Options; use 0 for the default")
	case o.SnapshotSize < 0 || o.SnapshotSize > 1000:
		return fmt.Errorf("stream hub: SnapshotSize %d is outside 1..1000 (the task listing's page limit)", o.SnapshotSize)
	case o.FlushInterval < 0, o.PingInterval < 0, o.SystemInterval < 0, o.MetricsInterval < 0, o.WriteTimeout < 0, o.AckTimeout < 0:
		return errors.New("stream hub: a negative interval in Options; only HeartbeatInterval may be negative (off)")
	}
	return nil
}

// Close reasons, as the client reads them in the close frame.
const (
	reasonTooSlow  = "too slow: resubscribe with a cursor"
	reasonShutdown = "server shutting down"
	reasonNoPong   = "no pong to the last pings"
)

// Hub is the live stream behind GET /api/v1/stream. It subscribes once to
// the bus, numbers every change (the cursor), keeps the last RingSize for
// clients that come back, and fans changes out to WebSocket clients grouped
// by what they asked for, so that a message shared by many clients is built
// once. It never blocks the bus: a client that cannot keep up is closed.
type Hub struct {
	opts  Options
	log   *slog.Logger
	warns *loglimit.Limiter // a failing source, asked at every subscribe: one line a minute
	epoch string

	mu      sync.Mutex // guards everything below; lock order: mu, then client.mu (docs/architecture.md)
	cursor  uint64
	ring    *ring
	groups  map[string]*group
	tasks   map[string]*taskIndex // groups that want tasks, by tenant, for the dispatcher
	clients map[*client]struct{}
	// open counts the connections Serve has admitted and not yet ended,
	// upgraded or not, in all and by tenant: what MaxClients and
	// TenantClients bound.
	open         int
	openByTenant map[string]int
	closed       bool
	due          []*group // coalescing groups with pending changes, in due order
	// flushT fires when the first of due is due; flushArmed says it is
	// set. Only the dispatcher and the ticking goroutine touch it, under mu.
	flushT     apollo.Timer
	flushArmed bool
	// matched and touched are the dispatcher's scratch lists, kept so that
	// a batch allocates none.
	matched, touched []*group

	sub       ChangeSubscription
	stats     hubCounters
	progress  wake.Wake // broadcast after every dispatched batch and subscribe (tests wait on it)
	clientsWG sync.WaitGroup

	life lifecycle.Group // dispatch, tick, report, forwardAlerts
}

type hubCounters struct {
	changes, messages, resyncs, snapshots, resumes atomic.Uint64
	alertsLost, alertsCut                          atomic.Uint64
	closedSlow, closedNoPong, closedShutdown       atomic.Uint64
	accepted, refused, overLimit                   atomic.Uint64
}

// Stats are the hub's counters and gauges, for GET /api/v1/system and
// GET /metrics.
type Stats struct {
	Clients        int    `json:"clients"`
	Groups         int    `json:"groups"`
	Cursor         uint64 `json:"cursor"`
	Changes        uint64 `json:"changes"`    // changes received from the bus
	Messages       uint64 `json:"messages"`   // messages written to clients
	Resyncs        uint64 `json:"resyncs"`    // times the bus cut the hub off
	AlertsLost     uint64 `json:"alertsLost"` // times the alert source dropped the hub (forwardAlerts)
	AlertsCut      uint64 `json:"alertsCut"`  // times a client's queued alert messages were replaced by alerts_lost (loseAlerts)
	Snapshots      uint64 `json:"snapshots"`
	Resumes        uint64 `json:"resumes"` // subscribes served from the ring
	Accepted       uint64 `json:"accepted"`
	Refused        uint64 `json:"refused"`   // connections refused: stopped or bad origin
	OverLimit      uint64 `json:"overLimit"` // connections refused: MaxClients or TenantClients open
	ClosedSlow     uint64 `json:"closedSlow"`
	ClosedNoPong   uint64 `json:"closedNoPong"`
	ClosedShutdown uint64 `json:"closedShutdown"`
}

// New returns a Hub; Start it before serving.
func New(opts Options) (*Hub, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Hub{
		opts:         opts,
		log:          opts.Logger.With("component", "stream"),
		warns:        loglimit.New(time.Minute),
		epoch:        hex.EncodeToString(b[:]),
		ring:         newRing(opts.RingSize),
		groups:       map[string]*group{},
		tasks:        map[string]*taskIndex{},
		clients:      map[*client]struct{}{},
		openByTenant: map[string]int{},
		life:         lifecycle.Group{Name: "stream"},
	}, nil
}

// Start subscribes to the bus and starts the hub's goroutines. It returns
// at once. Tickers are armed before it returns, so a test's fake clock can
// be advanced right after.
func (h *Hub) Start(ctx context.Context) error {
	return h.life.Start(ctx, func(context.Context) error {
		h.sub = h.opts.Changes(h.opts.BusBuffer)
		// The flush timer is armed only while a coalescing group has
		// changes waiting (armFlush): an idle hub does not wake up.
		h.flushT = h.opts.Clock.NewTimer(h.opts.FlushInterval)
		h.flushT.Stop()
		var beat apollo.Ticker
		if h.opts.HeartbeatInterval > 0 {
			beat = h.opts.Clock.NewTicker(h.opts.HeartbeatInterval)
		}
		h.life.Go(func(ctx context.Context) error { h.dispatch(ctx); return nil })
		h.life.Go(func(ctx context.Context) error { h.tick(ctx, beat); return nil })
		if h.opts.System != nil || h.opts.Metrics != nil {
			sys := h.opts.Clock.NewTicker(h.opts.SystemInterval)
			met := h.opts.Clock.NewTicker(h.opts.MetricsInterval)
			h.life.Go(func(ctx context.Context) error { h.report(ctx, sys, met); return nil })
		}
		if h.opts.Alerts != nil {
			c, cancel := h.opts.Alerts.SubscribeAlerts()
			h.life.Go(func(ctx context.Context) error { h.forwardAlerts(ctx, c, cancel); return nil })
		}
		return nil
	})
}

// Stop closes every client with "server shutting down", ends the bus
// subscription and waits for every goroutine of the hub and its clients.
// It waits for ctx at most, and is idempotent.
func (h *Hub) Stop(ctx context.Context) error {
	return h.life.Stop(ctx, func(halt func()) error {
		h.mu.Lock()
		h.closed = true
		for c := range h.clients {
			c.kill(reasonShutdown)
		}
		h.mu.Unlock()
		halt()
		if h.sub != nil {
			h.sub.Close()
		}
		h.clientsWG.Wait()
		return nil
	})
}

// Stats returns the hub's counters and gauges.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	clients, groups, cursor := len(h.clients), len(h.groups), h.cursor
	h.mu.Unlock()
	s := &h.stats
	return Stats{
		Clients: clients, Groups: groups, Cursor: cursor,
		Changes: s.changes.Load(), Messages: s.messages.Load(), Resyncs: s.resyncs.Load(), AlertsLost: s.alertsLost.Load(), AlertsCut: s.alertsCut.Load(),
		Snapshots: s.snapshots.Load(), Resumes: s.resumes.Load(),
		Accepted: s.accepted.Load(), Refused: s.refused.Load(), OverLimit: s.overLimit.Load(),
		ClosedSlow: s.closedSlow.Load(), ClosedNoPong: s.closedNoPong.Load(), ClosedShutdown: s.closedShutdown.Load(),
	}
}

// maxDispatchBatch bounds the changes taken under the hub lock at once.
const maxDispatchBatch = 512

// dispatch reads the bus subscription until Stop. When the bus cuts the
// hub off for being slow, it subscribes again and makes every client
// resynchronise from a snapshot: changes were lost in between.
func (h *Hub) dispatch(ctx context.Context) {
	batch := make([]*apollo.Change, 0, maxDispatchBatch)
	for {
		if h.opts.testGate != nil {
			h.opts.testGate()
		}
		var c *apollo.Change
		var ok bool
		select {
		case c, ok = <-h.sub.C():
		case <-ctx.Done():
			return
		}
		if !ok {
			h.resubscribe()
			continue
		}
		batch = append(batch[:0], c)
	fill:
		for len(batch) < maxDispatchBatch {
			select {
			case c, ok := <-h.sub.C():
				if !ok {
					break fill // the next round sees the channel closed
				}
				batch = append(batch, c)
			default:
				break fill
			}
		}
		h.fanOut(batch)
		clear(batch)
	}
}

func (h *Hub) resubscribe() {
	err := h.sub.Err()
	h.sub = h.opts.Changes(h.opts.BusBuffer)
	h.stats.resyncs.Add(1)
	h.log.Warn("the bus cut the stream off; resubscribed, clients resynchronise from a snapshot",
		"err", err, "buffer", h.opts.BusBuffer)
	h.mu.Lock()
	h.cursor = h.ring.gap()
	for _, g := range h.groups {
		g.resync(h)
	}
	h.mu.Unlock()
	h.progress.Broadcast()
}

// tick flushes coalesced updates and sends heartbeats until Stop.
func (h *Hub) tick(ctx context.Context, beat apollo.Ticker) {
	defer h.flushT.Stop()
	var beatC <-chan time.Time
	if beat != nil {
		defer beat.Stop()
		beatC = beat.C()
	}
	for {
		select {
		case <-h.flushT.C():
			h.flush(h.opts.Clock.Now())
		case now := <-beatC:
			h.heartbeat(now)
		case <-ctx.Done():
			return
		}
	}
}

// report sends the system and metric messages until Stop. It calls the
// sources without the hub lock: they may be slow.
func (h *Hub) report(ctx context.Context, sys, met apollo.Ticker) {
	defer sys.Stop()
	defer met.Stop()
	for {
		select {
		case <-sys.C():
			if h.opts.System != nil {
				h.sendSystem()
			}
		case <-met.C():
			if h.opts.Metrics != nil {
				h.sendMetrics()
			}
		case <-ctx.Done():
			return
		}
	}
}

// forwardAlerts hands the alert source's changes to the clients until
// Stop. A source drops a subscriber that falls behind (an alert storm of
// more changes at once than its buffer holds) by closing its channel: the
// changes in between are lost. The hub then subscribes again and tells
// every client that wants alerts to read them again (MsgAlertsLost);
// before, it stopped forwarding for good, and a dashboard open through a
// storm showed none of the alerts after it until it reconnected
// (TestAlertsLostInAStormAreReadAgain).
func (h *Hub) forwardAlerts(ctx context.Context, c <-chan apollo.Alert, cancel func()) {
	for {
		select {
		case a, ok := <-c:
			if ok {
				h.sendAlert(&a)
				continue
			}
		case <-ctx.Done():
			cancel()
			return
		}
		cancel()
		c, cancel = h.opts.Alerts.SubscribeAlerts() // before the clients read again: nothing after their read is missed
		h.stats.alertsLost.Add(1)
		if ok, n := h.warns.Allow("alerts lost", h.opts.Clock.Now()); ok {
			h.log.Warn("the alert source dropped the stream for falling behind; subscribed again, clients read the alerts again",
				"suppressed", n)
		}
		h.sendAlertsLost()
	}
}
