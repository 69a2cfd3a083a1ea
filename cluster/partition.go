package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

// applyBatch bounds how many events one bus.Publish call takes.
const applyBatch = 256

// partition is one owned partition: its bus, its metrics, its decision log
// and the goroutines that feed the bus from the events stream.
type partition struct {
	n   *Node
	id  int
	log *slog.Logger

	bus     *bus.Bus
	agg     *metrics.Aggregator
	sink    MetricsSink // nil without Options.Sink
	dlog    *decisionLog
	changes *changePublisher
	feed    LiveFeed // nil without Options.Feed

	// base is the LSN of the snapshot the partition was rebuilt from:
	// the replayed records take the LSNs after it, as they had under the
	// owner before (livefeed.go).
	base uint64

	replayed int // records replayed at start
	// unclean: the owner before did not hand the partition over (recover).
	unclean bool
	input   uint64

	// The snapshot the log's last marker names; written by recover and
	// by snapshot, which run one at a time (the loop, then stop); snapMu
	// is for the readers of stats.
	snapMu     sync.Mutex
	snapName   string
	snapCovers uint64
	// snapBuf is the last snapshot's buffer, kept for the next: its copy
	// is made under the bus's pause, and fresh memory is slow to fill
	// (cmd/apollo's snapshotBuffer says more).
	snapBuf bytes.Buffer

	cancel context.CancelFunc
	wg     sync.WaitGroup
	failed atomic.Pointer[error] // why the partition stopped on its own

	stopOnce sync.Once
	counters partCounters
	// lag is how many of the partition's messages JetStream held behind
	// the last one read: stored (answered accepted) and not decided yet.
	// A node's message is a batch of events, an agent's one event.
	lag atomic.Int64
	// caught says how far the events stream is decided (caughtup.go).
	caught caughtUp
}

type partCounters struct {
	applied, invalid, misrouted, retries, snapshots atomic.Int64
}

// openPartition rebuilds partition p from its decision log and starts
// feeding it. It returns once the partition answers queries.
func (n *Node) openPartition(ctx context.Context, p int) (*partition, error) {
	pt := &partition{n: n, id: p, log: n.log.With("partition", p)}
	var err error
	if pt.agg, err = metrics.New(n.metricsOptions()); err != nil {
		return nil, err
	}
	var obs bus.Observer = pt.agg
	if n.opts.Sink != nil {
		pt.sink, err = n.opts.Sink(SinkConfig{Aggregator: pt.agg, Writer: writerID(p), Clock: n.opts.Clock, Logger: pt.log})
		if err != nil {
			return nil, err
		}
		obs = pt.sink
	}
	pt.changes = newChangePublisher(n.opts.Conn, p, n.opts.NodeID)
	// The replay may hand the live observers changes (for the feed
	// below): the streams resynchronise after a takeover instead.
	pt.changes.quiet.Store(true)
	bo := n.opts.Bus
	bo.Clock, bo.Logger = n.opts.Clock, pt.log
	bo.Observers = append([]bus.Observer{obs}, bo.Observers...)
	bo.Live = append([]bus.Observer{pt.changes}, bo.Live...)
	if n.opts.Feed != nil {
		pt.feed, err = n.opts.Feed(FeedConfig{Partition: p, Mark: func() uint64 { return pt.bus.LiveWatermark() }, Logger: pt.log})
		if err != nil {
			pt.changes.close()
			return nil, err
		}
		bo.Live = append(bo.Live, pt.feed)
	}
	// The log is created after replay; the bus reaches it through a
	// forwarder, since bus.Options are fixed at New.
	fw := &logForwarder{}
	bo.Log = fw
	fw.testWaiting = n.opts.testLogWait
	if pt.bus, err = bus.New(bo); err != nil {
		pt.changes.close()
		return nil, err
	}
	start := n.opts.Clock.Now()
	if err := pt.recover(ctx, fw); err != nil {
		pt.changes.close()
		pt.closeFeed()
		return nil, err
	}
	pt.changes.quiet.Store(false)
	pt.caught.decided(pt.input) // the owners before decided that far
	if pt.feed != nil {
		pt.feed.Replayed(pt.base + uint64(pt.replayed))
		// Before the first event: a kill -9 from now on finds a mark.
		pt.saveFeed(ctx, "when the partition was taken; the next owner may not tell what this one applied and did not write")
	}
	pt.log.Info("partition rebuilt", "records", pt.replayed, "resumeAfter", pt.input,
		"took", n.opts.Clock.Now().Sub(start).Round(time.Millisecond))
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pt.cancel = cancel
	pt.bus.Start(runCtx)
	pt.agg.Start(runCtx)
	if pt.sink != nil {
		if err := pt.sink.Start(runCtx); err != nil {
			pt.log.Warn("the partition's metrics sink did not start; its metrics stay in memory", "err", err)
		}
	}
	msgs := make(chan jetstream.Msg, 2*applyBatch)
	cons, err := n.events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{eventsFilter(p)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    pt.input + 1,
	})
	if err != nil {
		pt.stop(false)
		return nil, fmt.Errorf("cluster: partition %d: consuming events: %w", p, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * applyBatch))
	if err != nil {
		pt.stop(false)
		return nil, fmt.Errorf("cluster: partition %d: consuming events: %w", p, err)
	}
	// The reader is not waited for when the partition stops: the
	// iterator's Next takes no context, and after a reconnect it can stay
	// blocked though the iterator was stopped (nats.go's ordered
	// consumer): a stop that waited for it hung Node.Stop for good (seen
	// once in CI, TestChangeListenersResyncAfterAReconnect). apply ends
	// with the run instead of with the reader, and the reader with the
	// connection at the latest; what it read and apply did not decide,
	// the next owner reads again.
	pt.wg.Add(3)
	go pt.snapshotLoop(runCtx)
	go func() { // Next takes no context: end the iterator when the run ends
		defer pt.wg.Done()
		<-runCtx.Done()
		it.Stop()
	}()
	go pt.read(runCtx, it, msgs)
	go pt.apply(runCtx, msgs)
	return pt, nil
}

// recover replays the decision log into the bus, then fences the log: a
// message that expects the sequence replay ended at. If another writer
// got in meanwhile, replay goes on from there and fences again.
//
// restore also finds whether the owner before handed the partition over
// (findSnapshot reads the log's end): when the log ends anywhere but at a
// handover's bookmark, the owner stopped
// without one (it died, or lost its lease), and the changes it made
// durable but had not yet published are in the log and on no stream.
// Replay publishes nothing, so pt.unclean asks open to have every node's
// stream resynchronise.
func (pt *partition) recover(ctx context.Context, fw *logForwarder) error {
	last, err := pt.restore(ctx) // sets pt.unclean and pt.base
	if err != nil {
		return fmt.Errorf("cluster: partition %d: %w", pt.id, err)
	}
	pt.resumeFeed(ctx)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			pt.unclean = true // another writer came in meanwhile
		}
		end, input, err := pt.n.replayLog(ctx, pt.id, last, func(rec []byte) error {
			pt.replayed++
			return pt.bus.Replay(pt.base+uint64(pt.replayed), rec)
		})
		if err != nil {
			return fmt.Errorf("cluster: partition %d: replaying its log: %w", pt.id, err)
		}
		last = max(last, end)
		pt.input = max(pt.input, input)
		dl := newDecisionLog(pt.n.js, pt.id, pt.n.opts.NodeID, last, pt.base+uint64(pt.replayed), pt.input, pt.n.opts.PublishTimeout)
		dl.hook = pt.n.opts.testLogHook // its loop publishes only once woken, after this
		err = dl.mark(nil)
		if err == nil {
			pt.dlog = dl
			fw.set(dl)
			return nil
		}
		dl.Close()
		if !errors.Is(err, ErrFenced) || attempt == 3 {
			return fmt.Errorf("cluster: partition %d: fencing its log: %w", pt.id, err)
		}
	}
}

// read moves messages from the consumer to the apply loop.
func (pt *partition) read(ctx context.Context, it jetstream.MessagesContext, out chan<- jetstream.Msg) {
	defer close(out)
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() == nil {
				pt.fail(fmt.Errorf("reading events: %w", err))
			}
			return
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return
		}
	}
}

// apply decides events in stream order, a batch at a time, and records
// how far it got once the batch's decisions are durable.
func (pt *partition) apply(ctx context.Context, in <-chan jetstream.Msg) {
	defer pt.wg.Done()
	evs := make([]apollo.Event, 0, applyBatch)
	out := make([]bus.Outcome, applyBatch)
	for {
		var m jetstream.Msg
		var ok bool
		select {
		case m, ok = <-in:
		case <-ctx.Done():
			return
		}
		if !ok {
			return
		}
		evs = evs[:0]
		var last uint64
		for {
			evs = pt.decode(m, evs)
			if md, err := m.Metadata(); err == nil {
				last = md.Sequence.Stream
				pt.lag.Store(int64(md.NumPending))
			}
			if len(evs) >= applyBatch {
				break
			}
			select {
			case m, ok = <-in:
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if len(out) < len(evs) {
			out = make([]bus.Outcome, len(evs))
		}
		if err := pt.publish(ctx, evs, out); err != nil {
			if ctx.Err() == nil {
				pt.fail(err)
			}
			return
		}
		pt.counters.applied.Add(int64(len(evs)))
		pt.dlog.decided(last)
		pt.caught.decided(last)
	}
}

// publish hands events to the bus until none is refused for room: a
// refused event is tried again (with the later events of its task, which
// the bus refuses with it), so that the stream's order per task holds.
//
// An event refused for its tenant's task limit is dropped (the bus counts
// it refused), as the single server refuses it: room for the tenant comes
// only as its tasks leave memory, which can take up to retention.idle,
// and until then trying it again would hold back every event of the
// partition, every tenant's (TestATenantOverItsLimitDoesNotStopTheOthers).
// The later events of its task are tried again: they are refused too
// while the tenant is at its limit.
func (pt *partition) publish(ctx context.Context, evs []apollo.Event, out []bus.Outcome) error {
	wait := 10 * time.Millisecond
	for len(evs) > 0 {
		if err := pt.bus.Publish(ctx, evs, out[:len(evs)]); err != nil {
			return err
		}
		var retry []apollo.Event
		for i := range evs {
			switch {
			case bus.OverTenantLimit(out[i]):
				pt.n.warn("event dropped: its tenant is at its task limit (limits.tenant_tasks, limits.tenants; per partition: the limit / partitions)",
					"partition", pt.id, "tenant", evs[i].Tenant, "task", evs[i].TaskID, "sequence", evs[i].Sequence)
			case out[i].Result == bus.RetryLater:
				retry = append(retry, evs[i])
			}
		}
		if len(retry) == 0 {
			return nil
		}
		pt.counters.retries.Add(int64(len(retry)))
		evs = retry
		t := pt.n.opts.Clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait = min(2*wait, time.Second)
	}
	return nil
}

// decode appends the events of one message to evs: one event (JSON, as
// an agent publishes it) or a node's batch (batch.go). What cannot be
// decided (a damaged message, an invalid event, a task of another
// partition) is counted and dropped: the publisher has had its answer
// already. In a batch, each bad event is dropped alone; a damaged batch
// keeps the events before the damage.
func (pt *partition) decode(m jetstream.Msg, evs []apollo.Event) []apollo.Event {
	tenant, p, err := parseEventSubject(m.Subject())
	if err != nil {
		pt.dropInvalid(m, err)
		return evs
	}
	if data := m.Data(); isBatch(data) {
		err := decodeBatch(data, func(ev apollo.Event) { evs = pt.keep(m, evs, ev, tenant, p) },
			func(ev apollo.Event, err error) { pt.passOver(m, err) })
		if err != nil {
			pt.dropInvalid(m, err)
		}
		return evs
	}
	var ev apollo.Event
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		pt.dropInvalid(m, err)
		return evs
	}
	return pt.keep(m, evs, ev, tenant, p)
}

// keep appends ev if it is valid, as the API checks it (checkEvent), and
// belongs to this partition.
func (pt *partition) keep(m jetstream.Msg, evs []apollo.Event, ev apollo.Event, tenant string, p int) []apollo.Event {
	if err := checkEvent(&ev); err != nil {
		pt.dropInvalid(m, err)
		return evs
	}
	if p != pt.id || Partition(ev.TaskID, pt.n.opts.Partitions) != p {
		pt.counters.misrouted.Add(1)
		pt.n.warn("event dropped: published to the wrong partition", "subject", m.Subject(), "task", ev.TaskID,
			"partition", Partition(ev.TaskID, pt.n.opts.Partitions))
		return evs
	}
	ev.Tenant = tenant
	return append(evs, ev)
}

func (pt *partition) dropInvalid(m jetstream.Msg, err error) {
	pt.counters.invalid.Add(1)
	pt.n.warn("event dropped: not a valid event", "subject", m.Subject(), "err", err)
}

// passOver counts an event of a batch whose status this build cannot
// name, as invalid, the same as an agent's single event of such a status:
// the owner cannot decide it. The warning says why and what to do, as a
// node of a newer build wrote it (decodeBatch).
func (pt *partition) passOver(m jetstream.Msg, err error) {
	pt.counters.invalid.Add(1)
	pt.n.warn("event passed over, the rest of its batch applied: its status is unknown to this node; a node of a newer build forwarded it (a rolling upgrade): upgrade this one",
		"subject", m.Subject(), "err", err)
}

// fail records why the partition stopped on its own; the lease keeper
// drops it at its next round.
func (pt *partition) fail(err error) {
	e := fmt.Errorf("cluster: partition %d: %w", pt.id, err)
	if pt.failed.CompareAndSwap(nil, &e) {
		pt.log.Error("partition stopped; it will be given up", "err", e)
		pt.n.kick()
	}
}

// Failed returns why the partition stopped on its own, or nil.
func (pt *partition) Failed() error {
	if e := pt.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// stop ends the partition. Handing over (graceful), it waits for every
// decision to be durable and leaves a bookmark in the log, so that the next
// owner reads no event twice; otherwise it stops where it is. Either way
// the bus drains to the observers and the metrics are flushed one last
// time, before the lease is given up or runs out.
func (pt *partition) stop(graceful bool) {
	pt.stopOnce.Do(func() {
		if pt.cancel != nil {
			pt.cancel()
		}
		pt.wg.Wait()
		pt.bus.Stop(context.Background()) // waits: the changes reach the observers
		pt.changes.close()
		defer pt.closeFeed() // after the snapshot's save of the mark
		if pt.dlog != nil {
			if graceful { // the next owner reads the snapshot, not the log
				ctx, cancel := context.WithTimeout(context.Background(), pt.n.opts.PublishTimeout)
				if err := pt.snapshot(ctx); err != nil {
					pt.log.Warn("no snapshot at handover; the next owner replays more of the log", "err", err)
				}
				cancel()
			}
			if graceful {
				if err := pt.dlog.mark(nats.Header{hdrHandover: {pt.n.opts.NodeID}}); err != nil && !errors.Is(err, bus.ErrClosed) {
					pt.log.Warn("could not leave a bookmark in the log; the next owner re-reads some events (they are duplicates)", "err", err)
				}
			}
			pt.dlog.Close()
		}
		if pt.sink != nil {
			if err := pt.sink.Stop(context.Background()); err != nil {
				pt.log.Warn("the partition's metrics did not all reach their sink", "err", err)
			}
		}
		pt.agg.Stop(context.Background())
	})
}

// closeFeed writes the partition's last changes and mark, and forgets it.
func (pt *partition) closeFeed() {
	if pt.feed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), pt.n.opts.PublishTimeout)
	defer cancel()
	if err := pt.feed.Close(ctx); err != nil {
		pt.log.Warn("the partition's last changes did not all reach the change feed", "err", err)
	}
}

// PartitionStats describe one owned partition.
type PartitionStats struct {
	Partition int       `json:"partition"`
	Applied   int64     `json:"applied"`   // events handed to the bus
	Invalid   int64     `json:"invalid"`   // messages that were no valid event
	Misrouted int64     `json:"misrouted"` // events on another task's partition
	Retries   int64     `json:"retries"`   // events the bus asked to resend (no room)
	Replayed  int       `json:"replayed"`  // log records replayed when it was taken (after its snapshot)
	Snapshot  string    `json:"snapshot"`  // the snapshot the log's last marker names
	Snapshots int64     `json:"snapshots"` // taken by this node
	Lag       int64     `json:"lag"`       // messages (batches or single events) stored and not read yet, as of the last one read
	Log       logStats  `json:"log"`
	Bus       bus.Stats `json:"bus"`
	Error     string    `json:"error,omitempty"`
}

func (pt *partition) stats() PartitionStats {
	s := PartitionStats{
		Partition: pt.id, Applied: pt.counters.applied.Load(), Invalid: pt.counters.invalid.Load(),
		Misrouted: pt.counters.misrouted.Load(), Retries: pt.counters.retries.Load(), Replayed: pt.replayed, Lag: pt.lag.Load(),
		Bus: pt.bus.Stats(), Snapshots: pt.counters.snapshots.Load(),
	}
	if pt.dlog != nil {
		s.Log = pt.dlog.stats()
	}
	pt.snapMu.Lock()
	s.Snapshot = pt.snapName
	pt.snapMu.Unlock()
	if err := pt.Failed(); err != nil {
		s.Error = err.Error()
	}
	return s
}

// logForwarder lets the bus be created before its log: records are only
// appended after Start, by which time set has been called.
type logForwarder struct {
	l atomic.Pointer[decisionLog]
	// testWaiting (Options.testLogWait), set by tests, hears each wait.
	testWaiting func(lsn uint64)
}

func (f *logForwarder) set(l *decisionLog) { f.l.Store(l) }

func (f *logForwarder) Append(p []byte) (uint64, error) {
	if l := f.l.Load(); l != nil {
		return l.Append(p)
	}
	return 0, errors.New("cluster: the partition's log is not open yet")
}

func (f *logForwarder) Wait(ctx context.Context, lsn uint64) error {
	if f.testWaiting != nil {
		f.testWaiting(lsn)
	}
	if l := f.l.Load(); l != nil {
		return l.Wait(ctx, lsn)
	}
	return errors.New("cluster: the partition's log is not open yet")
}
