package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/notify"
)

// The alert processes of one prefix share an outbox (docs/redis.md, "The
// notification outbox"). Each process owns the entries it records, in a
// hash of its own, and holds a lease, a key that expires unless renewed.
// Another process takes over (adopts) a process's entries only once that
// lease is gone: the process stopped (it deletes its lease) or died (the
// lease expired). So what a dead process owed is sent by one live
// process, and two live processes never send the same entries, unless
// one of them was cut off from Redis, or paused, for longer than the
// lease: then both may send them (at least once, never not at all).
//
// Keys, all in one Redis Cluster slot (the {outbox} hash tag) so that an
// adoption is one script:
//
//	<p>:notify:{outbox}:owners       set: the IDs of processes with an outbox
//	<p>:notify:{outbox}:owed:<id>    hash: entry ID -> the entry (JSON)
//	<p>:notify:{outbox}:decided:<id> hash: entry ID -> what the alert engine owes (Decisions)
//	<p>:notify:{outbox}:alive:<id>   string: the process's lease

// Defaults of OutboxOptions.
const (
	DefaultOutboxLease      = 15 * time.Second
	DefaultOutboxMaxEntries = 10_000
	DefaultOutboxMaxBytes   = 1 << 20
	DefaultOutboxTimeout    = time.Second
)

// outboxKeyTTL keeps an outbox a week after its owner's last renewal:
// what a dead process owed waits that long for another to start, and an
// abandoned prefix goes.
const outboxKeyTTL = 7 * 24 * time.Hour

// adoptBatch bounds the entries one adoption moves: one script call stays
// short, and the rest moves at the next round.
const adoptBatch = 1000

// outboxID is what an owner's ID may be: it is part of key names.
var outboxID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// errOutboxDown is what Owe and Settle answer, at once, from a failed
// Redis command until a renewal reaches Redis again.
var errOutboxDown = errors.New("redisstore: outbox: Redis did not answer; not recorded (retrying every few seconds)")

// OutboxOptions configure an Outbox.
type OutboxOptions struct {
	Client redis.UniversalClient
	Prefix string // default "apollo"
	// ID names this process among those sharing the prefix: letters,
	// digits, '.', '_' and '-'. It must be new at every start: entries of
	// an earlier run under the same ID would be taken for this run's.
	ID string
	// Lease is how long after its last renewal a process that died keeps
	// its entries from the others; renewed every Lease/3. Default 15s.
	Lease time.Duration
	// MaxEntries bounds what the process owes at once; Owe refuses more.
	// Default 10 000: a lane owes at most twice its queue (the queue and
	// a digest being sent), so this is five channels with full default
	// queues.
	MaxEntries int
	// MaxEntryBytes bounds one entry; Owe refuses a larger one. Default
	// 1 MiB.
	MaxEntryBytes int
	// Timeout bounds each Redis call of Owe and Settle, which the alert
	// engine waits for; default 1s.
	Timeout time.Duration
	Clock   apollo.Clock // default apollo.SystemClock
	Logger  *slog.Logger // default slog.Default()
}

// OutboxStats counts what an Outbox did since it was made.
type OutboxStats struct {
	Owed      int   `json:"owed"`      // entries this process owes now
	Unsettled int   `json:"unsettled"` // settles waiting for Redis
	Decided   int   `json:"decided"`   // notifications the alert engine recorded and has not handed to the lanes yet
	Adopted   int64 `json:"adopted"`   // entries taken over from processes that stopped or died
	Failures  int64 `json:"failures"`  // Owe and Settle calls Redis did not take
	Refills   int64 `json:"refills"`   // times the entries were written back to a Redis that lost them
	Down      bool  `json:"down"`      // the last Redis call failed
	// Unreadable: entries of processes that stopped or died that did not
	// read (a newer release's, or damaged), dropped instead of taken over.
	Unreadable int64 `json:"unreadable"`
}

// Outbox is a notify.Outbox in Redis for the alert processes of the
// three-process mode.
type Outbox struct {
	opts                  OutboxOptions
	owners, owed, alive   string
	lease                 string // the lease's value: the ID and the proof of this process (leaseproof.go)
	proof                 prover
	keyOwed, keyAlive     func(id string) string
	onAdopt               func([]notify.OwedNotification)
	onTakeOver            func([]alert.TakenOver)
	taking                atomic.Bool // onTakeOver runs: adopt takes no decided entries
	keyDecided            func(id string) string
	decided               string
	logs                  *loglimit.Limiter // the lines of entries that do not read (unreadable)
	down                  atomic.Bool
	why                   atomic.Pointer[error] // why down: downError
	adopted, fails, fills atomic.Int64
	unread                atomic.Int64

	mu        sync.Mutex
	next      uint64                             // the next entry ID
	mine      map[uint64]notify.OwedNotification // what this process owes: written back if Redis loses it
	unsettled map[uint64]bool                    // settled while Redis did not answer
	first     []notify.OwedNotification          // adopted at Start
	// What the alert engine recorded (Decisions), as in Redis, its
	// entries numbered apart from the lanes'.
	dnext      uint64
	dmine      map[uint64]string
	dunsettled map[uint64]bool
	firstTaken []alert.TakenOver // taken over at Start

	life lifecycle.Group // the lease renewal
}

var _ notify.Outbox = (*Outbox)(nil)

// NewOutbox checks the options and returns an Outbox; Start takes the
// lease.
func NewOutbox(opts OutboxOptions) (*Outbox, error) {
	opts.Prefix = cmp.Or(opts.Prefix, DefaultPrefix)
	opts.Lease = cmp.Or(opts.Lease, DefaultOutboxLease)
	opts.MaxEntries = cmp.Or(opts.MaxEntries, DefaultOutboxMaxEntries)
	opts.MaxEntryBytes = cmp.Or(opts.MaxEntryBytes, DefaultOutboxMaxBytes)
	opts.Timeout = cmp.Or(opts.Timeout, DefaultOutboxTimeout)
	opts.Clock = cmp.Or[apollo.Clock](opts.Clock, apollo.SystemClock)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.Client == nil:
		return nil, errors.New("redisstore: outbox: no Redis client")
	case !outboxID.MatchString(opts.ID):
		return nil, fmt.Errorf("redisstore: outbox: process ID %q: use 1 to 128 letters, digits, '.', '_' or '-'", opts.ID)
	case opts.Lease < 30*time.Millisecond || opts.MaxEntries < 0 || opts.MaxEntryBytes < 0 || opts.Timeout < 0:
		return nil, fmt.Errorf("redisstore: outbox: lease %s (at least 30ms), max entries %d, max entry bytes %d, timeout %s: none may be negative",
			opts.Lease, opts.MaxEntries, opts.MaxEntryBytes, opts.Timeout)
	}
	base := opts.Prefix + ":notify:{outbox}:"
	o := &Outbox{opts: opts, owners: base + "owners",
		keyOwed:    func(id string) string { return base + "owed:" + id },
		keyAlive:   func(id string) string { return base + "alive:" + id },
		keyDecided: func(id string) string { return base + "decided:" + id },
		dnext:      1, dmine: map[uint64]string{}, dunsettled: map[uint64]bool{},
		logs: loglimit.New(time.Minute), next: 1,
		mine: map[uint64]notify.OwedNotification{}, unsettled: map[uint64]bool{},
		life: lifecycle.Group{Name: "redisstore: outbox"}}
	o.owed, o.alive, o.decided = o.keyOwed(opts.ID), o.keyAlive(opts.ID), o.keyDecided(opts.ID)
	o.proof = newProver()
	o.lease = o.proof.value(opts.ID)
	return o, nil
}

// OnAdopt has f called, from the renewal loop, with what this process
// took over from one that stopped or died while it runs: the
// dispatcher's Requeue. Call it before Start.
func (o *Outbox) OnAdopt(f func([]notify.OwedNotification)) { o.onAdopt = f }

// Start takes the lease, takes over what processes that stopped or died
// owed (Owed lists it), and renews the lease every Lease/3 until Stop,
// adopting at each renewal. A Redis that does not answer is logged, not
// an error: the renewals try again.
func (o *Outbox) Start(ctx context.Context) error {
	return o.life.Start(ctx, func(run context.Context) error {
		if o.renew(run) {
			o.first, o.firstTaken = o.adopt(run)
		}
		o.life.Tick(o.opts.Clock, o.opts.Lease/3, o.tick)
		return nil
	})
}

// Stop ends the renewals and deletes the lease, so that another process
// takes over what is still owed at once. Idempotent.
func (o *Outbox) Stop(ctx context.Context) error {
	return o.life.StopThen(ctx, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := o.opts.Client.Del(ctx, o.alive).Err(); err != nil {
			return fmt.Errorf("redisstore: outbox: giving up the lease: %w", err)
		}
		return nil
	})
}

// halt ends the renewals and leaves the lease to expire: what kill -9
// leaves behind (tests).
func (o *Outbox) halt() { o.life.StopThen(context.Background(), func() error { return nil }) }

// Owed implements notify.Outbox: what Start took over.
func (o *Outbox) Owed() []notify.OwedNotification { return o.first }

// Owe implements notify.Outbox: the entry is in Redis when it returns.
func (o *Outbox) Owe(channel string, at time.Time, n apollo.Notification) (uint64, error) {
	if o.down.Load() {
		o.fails.Add(1)
		return 0, o.downError()
	}
	e := notify.OwedNotification{Channel: channel, At: at, Notification: n}
	o.mu.Lock()
	if len(o.mine) >= o.opts.MaxEntries {
		o.mu.Unlock()
		o.fails.Add(1)
		return 0, fmt.Errorf("redisstore: outbox: full (%d entries, outbox max entries): not recorded", o.opts.MaxEntries)
	}
	e.ID = o.next
	o.next++
	o.mu.Unlock()
	b, err := json.Marshal(e)
	switch {
	case err != nil:
		err = fmt.Errorf("redisstore: outbox: encoding the notification: %w", err)
	case len(b) > o.opts.MaxEntryBytes:
		err = fmt.Errorf("redisstore: outbox: a notification of %d bytes, over the %d an entry may hold: not recorded", len(b), o.opts.MaxEntryBytes)
	}
	if err != nil {
		o.fails.Add(1)
		return 0, err
	}
	o.mu.Lock()
	o.mine[e.ID] = e
	o.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), o.opts.Timeout)
	defer cancel()
	cmds, err := o.opts.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, o.owed, strconv.FormatUint(e.ID, 10), b)
		// Registered with each entry: a process that lost its
		// registration (adopted while it was paused) and dies before
		// its next renewal still leaves its entries where others look.
		p.SAdd(ctx, o.owners, o.opts.ID)
		return nil
	})
	if err != nil {
		o.mu.Lock()
		delete(o.mine, e.ID)
		o.mu.Unlock()
		o.failed("owe", cmds, err)
		return 0, o.callError(err)
	}
	return e.ID, nil
}

// Settle implements notify.Outbox. What Redis does not take is kept and
// settled at the next renewal that reaches it; until then a crash leaves
// it owed, and the next process sends it again.
func (o *Outbox) Settle(ids ...uint64) error {
	if len(ids) == 0 {
		return nil
	}
	o.mu.Lock()
	for _, id := range ids {
		delete(o.mine, id)
	}
	o.mu.Unlock()
	if o.down.Load() {
		o.keepUnsettled(ids)
		o.fails.Add(1)
		return o.downError()
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.opts.Timeout)
	defer cancel()
	if cmd := o.opts.Client.HDel(ctx, o.owed, fields(ids)...); cmd.Err() != nil {
		o.keepUnsettled(ids)
		o.failed("settle", []redis.Cmder{cmd}, cmd.Err())
		return o.callError(cmd.Err())
	}
	return nil
}

// keepUnsettled remembers ids for the next renewal, as many as MaxEntries:
// past that, the oldest wait for nothing (a restart sends them again)
// rather than grow memory during a long outage.
func (o *Outbox) keepUnsettled(ids []uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		if len(o.unsettled) >= o.opts.MaxEntries {
			return
		}
		o.unsettled[id] = true
	}
}

func fields(ids []uint64) []string {
	fs := make([]string, len(ids))
	for i, id := range ids {
		fs[i] = strconv.FormatUint(id, 10)
	}
	return fs
}

// failed counts a failed call and marks Redis down.
func (o *Outbox) failed(op string, cmds []redis.Cmder, err error) {
	o.fails.Add(1)
	o.markDown(op, cmds, err)
}

// markDown makes Owe and Settle answer at once, rather than each wait for
// a Redis that does not answer, until a renewal reaches it again. When
// Redis answered with a refusal (a key of another type where one of the
// outbox's belongs, put there by hand or by another program; out of
// memory), the line and the answers say so, with the key and the fix:
// "did not answer" sent an operator to a Redis that answers PING.
func (o *Outbox) markDown(op string, cmds []redis.Cmder, err error) {
	why := errOutboxDown
	var rerr redis.Error
	if errors.As(err, &rerr) {
		key := refusedKey(cmds)
		why = fmt.Errorf("redisstore: outbox: Redis refuses key %s (%w): not recorded (retrying every few seconds; if it names WRONGTYPE: redis-cli DEL %s)", key, err, key)
	}
	o.why.Store(&why)
	if o.down.Swap(true) {
		return
	}
	if rerr != nil {
		key := refusedKey(cmds)
		o.opts.Logger.Error("redisstore: outbox: Redis refuses the outbox's keys; notifications are sent without being recorded until it is fixed (a crash meanwhile loses those still owed)",
			"op", op, "key", key, "err", err, "fix", "if it names WRONGTYPE: redis-cli DEL "+key)
		return
	}
	o.opts.Logger.Error("redisstore: outbox: Redis did not answer; notifications are sent without being recorded until it does (a crash meanwhile loses those still owed)",
		"op", op, "err", err)
}

// downError is what Owe, Settle, Record and Forget answer while Redis is
// down: why, as markDown found it.
func (o *Outbox) downError() error {
	if why := o.why.Load(); why != nil {
		return *why
	}
	return errOutboxDown
}

// callError is what the call that failed with err answers: why Redis
// refused it, or the error of a Redis that did not answer.
func (o *Outbox) callError(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return o.downError()
	}
	return fmt.Errorf("redisstore: outbox: %w", err)
}

// refusedKey is the key of the first of cmds that Redis refused.
func refusedKey(cmds []redis.Cmder) string {
	for _, cmd := range cmds {
		if cmd.Err() != nil && len(cmd.Args()) > 1 {
			return fmt.Sprint(cmd.Args()[1])
		}
	}
	return "(unknown)"
}

// Stats returns the counters.
func (o *Outbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return OutboxStats{Owed: len(o.mine), Unsettled: len(o.unsettled) + len(o.dunsettled), Decided: len(o.dmine), Adopted: o.adopted.Load(),
		Failures: o.fails.Load(), Refills: o.fills.Load(), Down: o.down.Load(), Unreadable: o.unread.Load()}
}

// unreadable counts an entry of a stopped process, of kind ("owed" or
// "decided"), that does not read and is dropped, and logs it unless a
// line of its kind went out in the last minute: a dead process of a newer
// release may leave thousands, one line each flooded the log.
func (o *Outbox) unreadable(kind, owner string, err error) {
	o.unread.Add(1)
	if ok, held := o.logs.Allow(kind, o.opts.Clock.Now()); ok {
		o.opts.Logger.Error("redisstore: outbox: an entry ("+kind+") of a stopped alert process does not read; dropped: it was written by a newer release "+
			"(upgrade this process) or damaged. Every one is counted (outbox.unreadable in the heartbeat)",
			"owner", owner, "err", err, "suppressed", held)
	}
}
