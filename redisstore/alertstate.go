package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// Lease makes one alert process the leader: the one that saves the shared
// alert state and the rules the bus shows. All of them evaluate and send
// (the dedup lock keeps a notification single); leadership only decides
// whose view is written down. The lease is `SET key id NX PX ttl`, renewed
// every ttl/3 with a compare-and-expire script.
//
// With WithProcessProof, the value also proves which process holds it,
// and a process on the same host takes at once a lease whose holder it
// sees is dead (leaseproof.go): an alert process restarted after a kill
// -9 leads without waiting for the ttl.
type Lease struct {
	c          redis.UniversalClient
	key, id    string
	value      string // id, or id and the proof of this process
	ttl        time.Duration
	clock      apollo.Clock
	held       atomic.Bool
	life       lifecycle.Group // the renewal loop
	proof      prover          // set by WithProcessProof
	log        *slog.Logger
	refused    *loglimit.Limiter
	tookFromMu sync.Mutex
	tookFrom   string // the last dead holder this process took the lease from
	// onGain runs in Renew when this process takes the lease (set by
	// NewAlertState, before Start).
	onGain func(ctx context.Context)
}

var renewScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)

// takeScript replaces the value ARGV[1] (a dead holder's) by ARGV[2] for
// ARGV[3] ms: the lease is taken only if the dead holder still has it.
var takeScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3]) return 1 else return 0 end`)

// NewLease returns a lease on <prefix>:alert:leader for the process id.
func NewLease(c redis.UniversalClient, prefix, id string, ttl time.Duration) *Lease {
	return &Lease{c: c, key: prefix + ":alert:leader", id: id, value: id, ttl: ttl, clock: apollo.SystemClock,
		life: lifecycle.Group{Name: "redisstore: lease"}, refused: loglimit.New(time.Minute)}
}

// WithProcessProof makes the lease's value prove which process holds it,
// and lets this process take at once a lease held by a process it sees is
// dead on the same host, boot and PID namespace.
// Where /proc gives no proof (not Linux), nothing changes. The id must
// not hold a space. Call it before Start.
func (l *Lease) WithProcessProof() *Lease {
	l.proof = newProver()
	l.value = l.proof.value(l.id)
	return l
}

// WithLogger makes the lease say when it takes a dead holder's lease, and
// when Redis refuses it (a key of another type in its place: no process
// would lead, silently), one line a minute. Call it before Start.
func (l *Lease) WithLogger(log *slog.Logger) *Lease {
	l.log = log
	return l
}

// TookFrom returns the ID of the last dead process this one took the
// lease from before its ttl ran out, "" if none.
func (l *Lease) TookFrom() string {
	l.tookFromMu.Lock()
	defer l.tookFromMu.Unlock()
	return l.tookFrom
}

// WithClock makes the renewal loop tick on clock (default: the system
// clock). Call it before Start.
func (l *Lease) WithClock(clock apollo.Clock) *Lease {
	l.clock = clock
	return l
}

// Start tries to take the lease now, then keeps renewing or retrying on
// the clock until Stop.
func (l *Lease) Start(ctx context.Context) error {
	return l.life.Start(ctx, func(run context.Context) error {
		l.Renew(run)
		l.life.Tick(l.clock, l.ttl/3, l.Renew)
		return nil
	})
}

// Renew keeps the lease if this process holds it, or takes it if it is
// free. The loop calls it every ttl/3.
func (l *Lease) Renew(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	if l.held.Load() {
		n, err := renewScript.Run(ctx, l.c, []string{l.key}, l.value, l.ttl.Milliseconds()).Int()
		l.held.Store(err == nil && n == 1)
		if err == nil && n == 1 {
			return
		}
		l.sayRefused(err)
	}
	ok, err := l.c.SetNX(ctx, l.key, l.value, l.ttl).Result()
	if err == nil && !ok && l.proof.proves {
		ok, err = l.takeFromTheDead(ctx)
	}
	l.held.Store(err == nil && ok)
	l.sayRefused(err)
	if err == nil && ok && l.onGain != nil {
		l.onGain(ctx)
	}
}

// takeFromTheDead takes the lease if its holder is a process this one
// proves dead (leaseproof.go). The holder cannot renew, so there are never
// two leaders; the take is a compare-and-set, so of two processes
// restarted at once one takes it.
func (l *Lease) takeFromTheDead(ctx context.Context) (bool, error) {
	cur, err := l.c.Get(ctx, l.key).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil // expired since: the next renewal takes it
	}
	if err != nil {
		return false, err
	}
	holder, dead := l.proof.deadHolder(cur)
	if !dead {
		return false, nil
	}
	n, err := takeScript.Run(ctx, l.c, []string{l.key}, cur, l.value, l.ttl.Milliseconds()).Int()
	if err != nil || n != 1 {
		return false, err
	}
	l.tookFromMu.Lock()
	l.tookFrom = leaseID(cur)
	l.tookFromMu.Unlock()
	if l.log != nil {
		l.log.Info("took over the leader lease of a dead process on this host, before its lease ran out",
			"dead", leaseID(cur), "pid", holder.pid)
	}
	return true, nil
}

// sayRefused logs an error Redis answered (not an outage, which the
// client's own warnings tell): a key of another type under the lease's
// name keeps every process from leading, and nothing else would say so.
func (l *Lease) sayRefused(err error) {
	var rerr redis.Error
	if l.log == nil || !errors.As(err, &rerr) {
		return
	}
	if ok, held := l.refused.Allow("", time.Now()); ok {
		l.log.Error("redisstore: Redis refuses the leader lease; no alert process saves the alerts the bus shows until it is fixed",
			"key", l.key, "err", err, "fix", "if it names WRONGTYPE: redis-cli DEL "+l.key, "suppressed", held)
	}
}

// Held reports whether this process leads now.
func (l *Lease) Held() bool { return l.held.Load() }

// Stop ends the renewals and gives the lease up, so another process leads
// at once; it returns the release's error. Idempotent.
func (l *Lease) Stop(ctx context.Context) error {
	return l.life.StopThen(ctx, func() error {
		if !l.held.Swap(false) {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := releaseScript.Run(ctx, l.c, []string{l.key}, l.value).Err(); err != nil {
			return fmt.Errorf("redisstore: giving the lease up: %w", err)
		}
		return nil
	})
}

// Leader returns the id of the leading alert process, "" if none.
func Leader(ctx context.Context, c redis.UniversalClient, prefix string) (string, error) {
	v, err := c.Get(ctx, prefix+":alert:leader").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return leaseID(v), err
}

// stateTTL keeps the shared alert state for a week after the last save:
// long enough for any outage, short enough that an abandoned prefix goes.
const stateTTL = 7 * 24 * time.Hour

// AlertState is the alert engine's StateStore in Redis. Every alert
// process loads it at start, so they begin from the same alerts. The
// alerts, which every process computes, are written by the leader only
// (<prefix>:alert:state). What people wrote — silences and acks — is
// written by every process, field by field, in hashes without a TTL
// (<prefix>:alert:silences, <prefix>:alert:acks): the process that took
// the bus's command has saved it before it replies, whether it leads or
// not (docs/architecture.md, "Writes through the API").
type AlertState struct {
	c     redis.UniversalClient
	key   string
	lease *Lease // nil: always save (tests, a single alert process)
	// The hashes as this process last read or wrote them: a save writes
	// only what changed since, so a process that missed a command never
	// deletes what another one wrote.
	silences, acks *syncedHash

	mu sync.Mutex // orders writes of the alerts
	// pending is the alerts of the last save made while another process
	// led: written when this one takes the lease, since the engine saves
	// again only after its next change.
	pending []byte
	// last is the alerts as last loaded or saved, for Refill.
	last []byte
}

var _ alert.StateStore = (*AlertState)(nil)

// NewAlertState returns the state store of prefix.
// A lease, when given, must not have started: the store writes its
// pending alerts when the lease is taken.
func NewAlertState(c redis.UniversalClient, prefix string, lease *Lease) *AlertState {
	s := &AlertState{c: c, key: prefix + ":alert:state", lease: lease,
		silences: newSyncedHash(prefix + ":alert:silences"), acks: newSyncedHash(prefix + ":alert:acks")}
	if lease != nil {
		lease.onGain = s.writePending
	}
	return s
}

// Load implements alert.StateStore.
func (s *AlertState) Load(ctx context.Context) (alert.State, error) {
	var st alert.State
	pipe := s.c.Pipeline() // one round trip: the bus loads on every API read
	blob := pipe.Get(ctx, s.key)
	sils := pipe.HGetAll(ctx, s.silences.key)
	acks := pipe.HGetAll(ctx, s.acks.key)
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for _, c := range []redis.Cmder{blob, sils, acks} {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return st, fmt.Errorf("redisstore: loading alert state: %w", err)
		}
	}
	if data, err := blob.Bytes(); err == nil {
		if err := json.Unmarshal(data, &st); err != nil {
			return st, fmt.Errorf("redisstore: alert state at %s is damaged (%v); delete the key to start over", s.key, err)
		}
		s.mu.Lock()
		s.last = data
		s.mu.Unlock()
	}
	var err error
	if st.Silences, err = s.loadSilences(st.Silences, s.silences.took(sils.Val())); err != nil {
		return st, err
	}
	if err := s.loadAcks(st.Alerts, s.acks.took(acks.Val())); err != nil {
		return st, err
	}
	return st, nil
}

// Save implements alert.StateStore.
func (s *AlertState) Save(ctx context.Context, st alert.State) error {
	sils, err := silenceFields(st.Silences)
	if err != nil {
		return err
	}
	acks, err := ackFields(st.Alerts)
	if err != nil {
		return err
	}
	// The silences have their hash. What the engine owes (st.Owed) is
	// not kept: every alert process loads this state at start, and would
	// send what the leader owes while the leader lives to send it too.
	// The mark goes with the alerts: a release before it reads past it.
	data, err := json.Marshal(alert.State{Alerts: st.Alerts, Live: st.Live})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pipe := s.c.Pipeline()
	doneS := s.silences.queue(ctx, pipe, sils)
	doneA := s.acks.queue(ctx, pipe, acks)
	leads := s.lease == nil || s.lease.Held()
	if leads {
		pipe.Set(ctx, s.key, data, stateTTL)
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("redisstore: saving alert state: %w", err)
		}
	}
	doneS()
	doneA()
	s.pending, s.last = nil, data
	if !leads {
		s.pending = data
	}
	return nil
}

// Refill writes back what this process last loaded or saved where Redis
// no longer has it, after Redis lost its data (Keeper): the silences and
// acks field by field, the alerts if this process leads (or else when it
// takes the lease). Nothing another process wrote meanwhile is
// overwritten.
func (s *AlertState) Refill(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pipe := s.c.Pipeline()
	s.silences.queueRefill(ctx, pipe)
	s.acks.queueRefill(ctx, pipe)
	if s.last != nil {
		if s.lease == nil || s.lease.Held() {
			pipe.SetNX(ctx, s.key, s.last, stateTTL)
		} else if s.pending == nil {
			s.pending = s.last
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisstore: writing the alert state back: %w", err)
	}
	return nil
}

// writePending writes the alerts saved while another process led.
func (s *AlertState) writePending(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil && s.c.Set(ctx, s.key, s.pending, stateTTL).Err() == nil {
		s.pending = nil
	}
}

// silenceFields are the silences as fields of the silences hash: the
// tenant and the ID, to the silence.
func silenceFields(list []alert.Silence) (map[string]string, error) {
	m := make(map[string]string, len(list))
	for _, sl := range list {
		v, err := json.Marshal(sl)
		if err != nil {
			return nil, err
		}
		m[fieldOf(sl.Tenant, sl.ID)] = string(v)
	}
	return m, nil
}

// loadSilences puts the silences of the hash (m) over those of the state
// key, where versions before this one kept them.
func (s *AlertState) loadSilences(old []alert.Silence, m map[string]string) ([]alert.Silence, error) {
	var out []alert.Silence
	for _, sl := range old {
		if _, ok := m[fieldOf(sl.Tenant, sl.ID)]; !ok {
			out = append(out, sl)
		}
	}
	for f, v := range m {
		var sl alert.Silence
		if err := json.Unmarshal([]byte(v), &sl); err != nil {
			return nil, fmt.Errorf("redisstore: silence %s in %s is damaged (%v); delete the field", f, s.silences.key, err)
		}
		out = append(out, sl)
	}
	return out, nil
}

// ackRecord is an acknowledgement in the acks hash, under the alert's
// tenant, rule and group: alert processes name their episodes
// independently, so the ID would not find the alert in another process.
type ackRecord struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// ackFields are the acknowledged alerts that have not resolved, as fields
// of the acks hash. An alert that resolves leaves it.
func ackFields(alerts []alert.StoredAlert) (map[string]string, error) {
	m := map[string]string{}
	for _, a := range alerts {
		if a.AckedBy == "" || a.State == apollo.AlertResolved {
			continue
		}
		v, err := json.Marshal(ackRecord{By: a.AckedBy, At: a.AckedAt})
		if err != nil {
			return nil, err
		}
		m[fieldOf(a.Tenant, a.Rule, a.Group)] = string(v)
	}
	return m, nil
}

// loadAcks marks acknowledged the alerts the acks hash (m) names: those the
// leader had not saved yet. An ack holds for the episode that was open
// when it was given, so a later episode of the same group is not taken
// for it.
func (s *AlertState) loadAcks(alerts []alert.StoredAlert, m map[string]string) error {
	for i := range alerts {
		a := &alerts[i]
		v, ok := m[fieldOf(a.Tenant, a.Rule, a.Group)]
		if !ok || a.AckedBy != "" || a.State == apollo.AlertResolved {
			continue
		}
		var r ackRecord
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return fmt.Errorf("redisstore: an ack in %s is damaged (%v); delete the field", s.acks.key, err)
		}
		if !a.StartedAt.After(r.At) {
			a.AckedBy, a.AckedAt = r.By, r.At
		}
	}
	return nil
}

// fieldOf names a hash field by its parts, unambiguously whatever they
// contain: a JSON array of strings.
func fieldOf(parts ...string) string {
	b, _ := json.Marshal(parts)
	return string(b)
}
