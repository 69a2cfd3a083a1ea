package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// The change log is how the alert processes hear of the bus's changes
// without losing any to a process that was down or a bus killed before it
// wrote them (docs/redis.md, "The change log"): a Redis stream, each entry
// a batch of changes with the bus's mark,
//
//	v  the entry's version (changeLogVersion); a reader passes over the
//	   entries of a version it does not know
//	e  the epoch: names the bus's log, whose LSNs the changes carry; a
//	   bus that finds the saved mark above the end of its log (a new data
//	   directory) starts a new one, and a reader forgets the LSNs it heard
//	m  the bus's live watermark read before the batch was taken: every
//	   change of a record up to it is in this entry or an earlier one
//	b  the batch, as on the channel (wireChange, with each change's LSN)
//	f  the flapping marks of the batch (KindFlapping), apart, in the same
//	   form: a reader of a release before them passes the field over (it
//	   would refuse the whole of b for a kind it does not know) and hears
//	   of flapping on <prefix>:findings; absent when there are none
//
// A reader of this release passes over a change of b or f it cannot read
// (a kind or status of a newer release) alone, and applies the rest
// (changelog_wire.go, applyRead).
//
// and a string, "<mark> <epoch>" of the last entry written, which a
// restarted bus reads to replay the changes above it into the stream
// (FeedMark). Both
// keys share a hash tag, so that one MULTI writes them in Redis Cluster.
const changeLogVersion = "1"

// changeLogLen bounds the stream, approximately (XADD MAXLEN ~): one entry
// per 100 ms of a busy bus, so about 17 minutes of one; an alert process
// down for longer misses what was trimmed (it says so in its log).
const changeLogLen = 10_000

func changeLogKey(prefix string) string  { return prefix + ":{changes}:log" }
func changeMarkKey(prefix string) string { return prefix + ":{changes}:mark" }

// FeedMark returns the mark the bus's change feed last saved: the changes
// of records above it may not be in the stream, and a restarted bus
// replays them into it (bus.Bus.ReplayLiveAfter). ok is false when none
// was saved (a bus of a release before the stream, or Redis lost it).
func FeedMark(ctx context.Context, c redis.UniversalClient, prefix string) (mark uint64, ok bool, err error) {
	mark, _, ok, err = feedMark(ctx, c, prefix)
	return mark, ok, err
}

func feedMark(ctx context.Context, c redis.UniversalClient, prefix string) (mark uint64, epoch string, ok bool, err error) {
	s, err := c.Get(ctx, changeMarkKey(prefix)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, err
	}
	n, epoch, _ := strings.Cut(s, " ")
	mark, err = strconv.ParseUint(n, 10, 64)
	if err != nil {
		return 0, "", false, nil // not ours: as if none
	}
	return mark, epoch, true, nil
}

// logEpoch is the epoch the feed writes under: the saved one, unless the
// saved mark is past the end of this bus's log (its LSNs are another
// log's: a new data directory) or none can be read.
func (f *ChangeFeed) logEpoch(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mark, epoch, ok, err := feedMark(ctx, f.c, f.prefix)
	if err == nil && ok && epoch != "" && mark <= f.mark() {
		return epoch
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ChangeFollower reads the change log from a position and hands each
// change to apply, in the order of the stream, one goroutine; it remembers
// how far it got (Mark), for the alert state saved with it.
type ChangeFollower struct {
	c       redis.UniversalClient
	stream  string
	channel string // <prefix>:changes, of a bus of a release before the log (SubscribeChannel)
	log     *slog.Logger
	logs    *loglimit.Limiter // the lines of SubscribeChannel
	clock   apollo.Clock
	apply   func(*apollo.Change)
	forget  func() // the LSNs heard are another log's

	mu    sync.Mutex
	mark  uint64 // the highest bus mark of the entries applied
	pos   string // the ID of the last entry applied
	epoch string // of the bus's log the marks and LSNs are of

	passed atomic.Int64 // changes that did not read (applyRead, fromChannel)

	cancel context.CancelFunc
	done   chan struct{}
}

// Mark returns the highest bus mark of the entries applied and where the
// follower is: the last entry's ID and the epoch, "<id>@<epoch>", what
// the alert state saves (alert.LiveMark) and Seek takes.
func (f *ChangeFollower) Mark() (uint64, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch == "" {
		return f.mark, f.pos
	}
	return f.mark, f.pos + "@" + f.epoch
}

// NewChangeFollower returns a follower of prefix's change log. forget,
// when not nil, is called before an entry of a new epoch is applied: the
// LSNs heard before are another log's (alert.Engine.ForgetHeard).
func NewChangeFollower(c redis.UniversalClient, prefix string, log *slog.Logger, apply func(*apollo.Change), forget func()) *ChangeFollower {
	if log == nil {
		log = slog.Default()
	}
	return &ChangeFollower{c: c, stream: changeLogKey(prefix), channel: prefix + ":changes", log: log,
		logs: loglimit.New(time.Minute), clock: apollo.SystemClock, apply: apply, forget: forget}
}

// WithClock gives the follower the clock its rate-limited lines go by
// (default: the system clock). Call it before SubscribeChannel.
func (f *ChangeFollower) WithClock(clock apollo.Clock) *ChangeFollower {
	f.clock = clock
	return f
}

// Seek sets where Start reads on from: after pos ("0": the whole stream;
// "$": the entries written after Seek returns), with mark the saved mark.
// Mark answers them from now on.
func (f *ChangeFollower) Seek(ctx context.Context, mark uint64, pos string) error {
	pos, epoch, _ := strings.Cut(pos, "@")
	if pos == "" {
		pos = "0"
	}
	if pos == "$" {
		last, err := f.c.XRevRangeN(ctx, f.stream, "+", "-", 1).Result()
		if err != nil {
			return err
		}
		pos = "0"
		if len(last) > 0 {
			pos = last[0].ID
		}
	}
	if pos != "0" {
		first, err := f.c.XRangeN(ctx, f.stream, "-", "+", 1).Result()
		if err == nil && len(first) > 0 && streamIDLess(pos, first[0].ID) {
			f.log.Warn("the change log was trimmed past where this process had got to: the event rules may miss changes made meanwhile",
				"from", pos, "first_kept", first[0].ID)
		}
	}
	f.mu.Lock()
	f.mark, f.pos, f.epoch = mark, pos, epoch
	f.mu.Unlock()
	return nil
}

// Start reads the entries after the position Seek set until Stop.
func (f *ChangeFollower) Start(ctx context.Context) error {
	f.mu.Lock()
	pos := f.pos
	f.mu.Unlock()
	ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.done = make(chan struct{})
	go f.run(ctx, cmp.Or(pos, "0"))
	return nil
}

// Stop ends the reading and waits for it; it is idempotent.
func (f *ChangeFollower) Stop(context.Context) error {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	return nil
}

func (f *ChangeFollower) run(ctx context.Context, pos string) {
	defer close(f.done)
	failing := false
	for ctx.Err() == nil {
		res, err := f.c.XRead(ctx, &redis.XReadArgs{Streams: []string{f.stream, pos}, Count: 100, Block: time.Second}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				f.log.Warn("reading the bus's changes from Redis failed; trying again", "err", err)
				failing = true
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // a pace for retrying Redis, not a wait on a state
			}
			continue
		}
		failing = false
		for _, s := range res {
			for _, m := range s.Messages {
				f.entry(m)
				pos = m.ID
			}
		}
	}
}

// entry applies one entry's changes, then moves the mark past it.
func (f *ChangeFollower) entry(m redis.XMessage) {
	v, _ := m.Values["v"].(string)
	mark, _ := strconv.ParseUint(str(m.Values["m"]), 10, 64)
	if v == changeLogVersion {
		if e := str(m.Values["e"]); e != "" && e != f.epoch {
			if f.epoch != "" && f.forget != nil {
				f.log.Info("the bus's change log has a new epoch (a new data directory): the changes heard before are forgotten", "epoch", e)
				f.forget()
			}
			f.mu.Lock()
			f.epoch, f.mark = e, 0
			f.mu.Unlock()
		}
		var batch, flaps []wireChange
		if err := json.Unmarshal([]byte(str(m.Values["b"])), &batch); err != nil {
			f.log.Warn("an entry of the change log does not read; passed over", "id", m.ID, "err", err)
			batch = nil
		}
		if fl := str(m.Values["f"]); fl != "" {
			if err := json.Unmarshal([]byte(fl), &flaps); err != nil {
				f.log.Warn("the flapping marks of an entry of the change log do not read; passed over", "id", m.ID, "err", err)
				flaps = nil
			}
		}
		for i := range batch {
			f.applyRead(m.ID, &batch[i])
		}
		for i := range flaps {
			f.applyRead(m.ID, &flaps[i])
		}
	}
	f.mu.Lock()
	f.pos, f.mark = m.ID, max(f.mark, mark)
	f.mu.Unlock()
}

// applyRead applies w, unless it did not read: a change of a status or
// kind this release does not know (a newer bus's, in a rolling upgrade)
// is passed over alone, the rest of its entry applied. Each is counted
// (Stats), and logged one line a minute, apart from the channel's (a
// line of one did hold back the other's first: the log's line went out
// only for the first change passed over of either).
func (f *ChangeFollower) applyRead(id string, w *wireChange) {
	if w.skip == "" {
		f.apply(w.change())
		return
	}
	f.passed.Add(1)
	if ok, held := f.logs.Allow("log", f.clock.Now()); ok {
		f.log.Warn("a change of the change log does not read and was passed over, the rest of its entry applied: a bus of a newer release writes what this alert process does not know; upgrade it. "+
			"All are counted (changes.passedOver in its heartbeat)",
			"id", id, "tenant", w.Tenant, "job", w.Name, "task", w.TaskID, "why", w.skip, "suppressed", held)
	}
}

// FollowerStats counts what a follower passed over.
type FollowerStats struct {
	// PassedOver: changes that did not read (a status or kind of a newer
	// release), of the log or of the channel, and messages of the channel
	// that are not a batch of changes at all; none was applied.
	PassedOver int64 `json:"passedOver"`
}

// Stats returns the follower's counters.
func (f *ChangeFollower) Stats() FollowerStats {
	return FollowerStats{PassedOver: f.passed.Load()}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// streamIDLess reports whether stream ID a is before b.
func streamIDLess(a, b string) bool {
	ams, aseq := splitStreamID(a)
	bms, bseq := splitStreamID(b)
	return ams < bms || ams == bms && aseq < bseq
}

func splitStreamID(id string) (ms, seq uint64) {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			ms, _ = strconv.ParseUint(id[:i], 10, 64)
			seq, _ = strconv.ParseUint(id[i+1:], 10, 64)
			return ms, seq
		}
	}
	ms, _ = strconv.ParseUint(id, 10, 64)
	return ms, 0
}
