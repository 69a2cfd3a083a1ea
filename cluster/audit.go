package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/audit"
)

const (
	// AuditStream holds the audit entries of every node, one subject per
	// tenant, apollo.audit.<tenant token>, each bounded to AuditOptions'
	// Entries (the oldest go first).
	AuditStream = "APOLLO_AUDIT"
	auditPrefix = "apollo.audit."
)

// AuditOptions configure an Audit. Conn is required.
type AuditOptions struct {
	Conn *nats.Conn
	// Entries is how many entries are kept per tenant, in the stream and
	// in each node's memory; default 10 000, as apollo server keeps.
	Entries  int
	Replicas int           // of the stream: 1, 3 or 5; default 1
	Timeout  time.Duration // bounds storing an entry and catching up before a read; default 2 s
	// PlacementWait is how long OpenAudit waits for JetStream to place
	// the stream's copies; default DefaultPlacementWait.
	PlacementWait time.Duration
	Clock         apollo.Clock
	Logger        *slog.Logger
}

// Audit is the audit log of the scale-out mode: an entry recorded through
// any node is stored in JetStream before the request that made it is
// answered, and every node reads every tenant's entries from there into a
// memory log of its own (audit.Log), which GET /api/v1/audit lists. So a
// correction made through one node is listed by every node, and outlives
// the node (kill -9 included). Failures of unknown callers stay where
// they happened: they are counted per source and minute in the node's
// memory, as the busiest entries of an attack, and are not shared.
type Audit struct {
	opts   AuditOptions
	js     jetstream.JetStream
	stream jetstream.Stream
	local  *audit.Log
	cc     jetstream.ConsumeContext
	log    *slog.Logger

	mu      sync.Mutex
	applied uint64        // the stream sequence of the last message read into local
	moved   chan struct{} // closed and replaced whenever applied grows
}

var _ interface {
	Record(e audit.Entry)
	RecordFailure(e audit.Entry)
	List(tenant string, limit int) []audit.Entry
} = (*Audit)(nil)

// OpenAudit creates or updates the stream and starts reading it. Close
// stops it.
func OpenAudit(ctx context.Context, opts AuditOptions) (*Audit, error) {
	opts.Entries = cmp.Or(opts.Entries, 10_000)
	opts.Replicas = cmp.Or(opts.Replicas, 1)
	opts.PlacementWait = cmp.Or(opts.PlacementWait, DefaultPlacementWait)
	opts.Timeout = cmp.Or(opts.Timeout, 2*time.Second)
	if opts.Clock == nil {
		opts.Clock = apollo.SystemClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	js, err := jetstream.New(opts.Conn)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var st jetstream.Stream
	err = untilPlaced(ctx, opts.Logger, opts.PlacementWait, opts.Replicas, func() (err error) {
		st, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: AuditStream, Subjects: []string{auditPrefix + ">"}, Storage: jetstream.FileStorage,
			Retention: jetstream.LimitsPolicy, MaxMsgsPerSubject: int64(opts.Entries), Discard: jetstream.DiscardOld,
			Replicas: opts.Replicas, AllowDirect: true,
			Description: "Apollo-11 audit entries, apollo.audit.<tenant>",
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: the %s stream: %w", AuditStream, err)
	}
	a := &Audit{opts: opts, js: js, stream: st, moved: make(chan struct{}),
		log:   opts.Logger.With("component", "audit"),
		local: audit.NewMemory(opts.Entries, opts.Clock)}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the %s stream: %w", AuditStream, err)
	}
	if a.cc, err = cons.Consume(a.read); err != nil {
		return nil, fmt.Errorf("cluster: reading the %s stream: %w", AuditStream, err)
	}
	return a, nil
}

// read keeps one stored entry in the memory log.
func (a *Audit) read(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	if e, err := decodeAuditEntry(m.Subject(), m.Data()); err != nil {
		a.log.Warn("an audit entry was skipped", "sequence", md.Sequence.Stream, "subject", m.Subject(), "err", err)
	} else {
		a.local.Add(e)
	}
	a.mu.Lock()
	a.applied = md.Sequence.Stream
	close(a.moved)
	a.moved = make(chan struct{})
	a.mu.Unlock()
}

// decodeAuditEntry reads a stored entry. An entry whose tenant is not
// its subject's is refused: the subject bounds a tenant's entries, and a
// tenant's list must not show another's.
func decodeAuditEntry(subject string, data []byte) (audit.Entry, error) {
	var e audit.Entry
	tok, ok := strings.CutPrefix(subject, auditPrefix)
	if !ok {
		return e, fmt.Errorf("the subject %q is not an audit subject", subject)
	}
	tenant, err := ParseTenantToken(tok)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, err
	}
	e = audit.Capped(e) // as Record stored it, on its capped tenant's subject
	switch {
	case e.Tenant != tenant:
		return e, fmt.Errorf("an entry of tenant %q on the subject of tenant %q", e.Tenant, tenant)
	case e.At.IsZero():
		return e, errors.New("an entry without a time")
	}
	return e, nil
}

// Record stores e in the stream, waiting for JetStream's acknowledgment
// (at most Timeout): the request that made it is answered after. An entry
// that cannot be stored is kept in this node's memory only, and the log
// says so.
func (a *Audit) Record(e audit.Entry) {
	if e.At.IsZero() {
		e.At = a.opts.Clock.Now()
	}
	e = audit.Capped(e)
	e.Count, e.Last = 0, time.Time{}
	data, _ := json.Marshal(e) // an Entry always marshals
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.Timeout)
	defer cancel()
	if _, err := a.js.Publish(ctx, auditPrefix+TenantToken(e.Tenant), data); err != nil {
		a.log.Error("an audit entry was not stored in NATS: this node shows it until it stops, the others never", "action", e.Action, "tenant", e.Tenant, "err", err)
		a.local.Add(e)
	}
}

// RecordFailure counts a failure of an unknown caller in this node's
// memory (audit.Log.RecordFailure).
func (a *Audit) RecordFailure(e audit.Entry) { a.local.RecordFailure(e) }

// List returns up to limit entries of a tenant, newest first, once this
// node has read the tenant's last stored entry (at most Timeout): an
// entry recorded through another node just before is listed.
func (a *Audit) List(tenant string, limit int) []audit.Entry {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.Timeout)
	defer cancel()
	last, err := a.stream.GetLastMsgForSubject(ctx, auditPrefix+TenantToken(tenant))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		a.log.Warn("the audit list may miss the newest entries of other nodes: NATS did not say which is the last", "err", err)
	default:
		if !a.waitFor(ctx, last.Sequence) {
			a.log.Warn("the audit list may miss the newest entries of other nodes: this node is behind the stream", "sequence", last.Sequence)
		}
	}
	return a.local.List(tenant, limit)
}

// waitFor reports whether the entries up to stream sequence seq were read
// before ctx ended.
func (a *Audit) waitFor(ctx context.Context, seq uint64) bool {
	for {
		a.mu.Lock()
		applied, moved := a.applied, a.moved
		a.mu.Unlock()
		if applied >= seq {
			return true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
}

// Close stops reading the stream and waits until the reading has stopped.
// It is idempotent.
func (a *Audit) Close() error {
	a.cc.Stop()
	<-a.cc.Closed()
	return a.local.Close()
}
