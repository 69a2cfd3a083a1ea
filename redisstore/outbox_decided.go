package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
)

// Decisions is the alert engine's OwedStore (alert.OwedStore) in the
// outbox: what the engine decided to send and has not handed to the
// lanes yet, in <p>:notify:{outbox}:decided:<id>, under the outbox's
// lease. The engine records a notification before it asks for its dedup
// lock and forgets it once the lanes have it (their own entries in the
// outbox) or the lock said another process tells it. So a process killed
// between the lock and the lanes leaves it recorded: the process that
// takes its outbox over hands it to its engine's TakeOver, which sends it
// unless a live process holds its lock (docs/redis.md, "The dedup lock
// and the outbox").
//
// An entry's value is the IDs of the processes whose hash it was in
// before, each followed by a space, the newest first, then a newline and
// the notification (JSON): the adoption script adds the owner it takes
// the entry from, so the lock a dead owner took for it is known as
// theirs however many times it was taken over.
type Decisions struct{ o *Outbox }

var _ alert.OwedStore = Decisions{}

// Decisions returns the engine's OwedStore in this outbox. Entries other
// processes recorded and died owing go to OnTakeOver, and those found at
// Start to TakenOver.
func (o *Outbox) Decisions() Decisions { return Decisions{o} }

// OnTakeOver has f called, beside the renewal loop (one call at a time;
// no more is taken over until it returns), with the engine's
// entries this process took over from one that stopped or died while it
// runs: the engine's TakeOver. Call it before Start.
func (o *Outbox) OnTakeOver(f func([]alert.TakenOver)) { o.onTakeOver = f }

// TakenOver returns the engine's entries Start took over, for the
// engine's TakeOver once the lanes run.
func (o *Outbox) TakenOver() []alert.TakenOver { return o.firstTaken }

// Record implements alert.OwedStore: the entry is in Redis when it
// returns.
func (d Decisions) Record(n apollo.Notification) (uint64, error) {
	o := d.o
	if o.down.Load() {
		o.fails.Add(1)
		return 0, o.downError()
	}
	b, err := json.Marshal(n)
	if err != nil {
		o.fails.Add(1)
		return 0, fmt.Errorf("redisstore: outbox: encoding the notification: %w", err)
	}
	if len(b) > o.opts.MaxEntryBytes {
		o.fails.Add(1)
		return 0, fmt.Errorf("redisstore: outbox: a notification of %d bytes, over the %d an entry may hold: not recorded", len(b), o.opts.MaxEntryBytes)
	}
	v := "\n" + string(b) // no owner before this one
	o.mu.Lock()
	if len(o.dmine) >= o.opts.MaxEntries {
		o.mu.Unlock()
		o.fails.Add(1)
		return 0, fmt.Errorf("redisstore: outbox: full (%d decided entries, outbox max entries): not recorded", o.opts.MaxEntries)
	}
	id := o.dnext
	o.dnext++
	o.dmine[id] = v
	o.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), o.opts.Timeout)
	defer cancel()
	cmds, err := o.opts.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, o.decided, strconv.FormatUint(id, 10), v)
		p.SAdd(ctx, o.owners, o.opts.ID) // as Owe does
		return nil
	})
	if err != nil {
		o.mu.Lock()
		delete(o.dmine, id)
		o.mu.Unlock()
		o.failed("record", cmds, err)
		return 0, o.callError(err)
	}
	return id, nil
}

// Forget implements alert.OwedStore. What Redis does not take is
// forgotten at the next renewal that reaches it; until then a crash
// leaves it recorded, and the process that takes it over sends it again
// unless its lock holds it back.
func (d Decisions) Forget(id uint64) error {
	o := d.o
	o.mu.Lock()
	delete(o.dmine, id)
	o.mu.Unlock()
	if o.down.Load() {
		o.keepUnforgotten(id)
		o.fails.Add(1)
		return o.downError()
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.opts.Timeout)
	defer cancel()
	if cmd := o.opts.Client.HDel(ctx, o.decided, strconv.FormatUint(id, 10)); cmd.Err() != nil {
		o.keepUnforgotten(id)
		o.failed("forget", []redis.Cmder{cmd}, cmd.Err())
		return o.callError(cmd.Err())
	}
	return nil
}

// keepUnforgotten remembers id for the next renewal, as keepUnsettled.
func (o *Outbox) keepUnforgotten(id uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.dunsettled) < o.opts.MaxEntries {
		o.dunsettled[id] = true
	}
}

// takenOver reads the values the adoption script moved from owner into
// this process's decided hash, numbered from start. A value that does
// not read is deleted and counted, as an outbox entry (unreadable).
func (o *Outbox) takenOver(ctx context.Context, owner string, start uint64, vals []string) []alert.TakenOver {
	var got []alert.TakenOver
	var bad []string
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, v := range vals {
		id := start + uint64(i)
		owners, js, ok := strings.Cut(v, "\n")
		var n apollo.Notification
		err := errors.New("no line of owners before the notification")
		if ok {
			err = json.Unmarshal([]byte(js), &n)
		}
		if err != nil {
			bad = append(bad, strconv.FormatUint(id, 10))
			o.unreadable("decided", owner, err)
			continue
		}
		o.dmine[id] = v
		got = append(got, alert.TakenOver{ID: id, Notification: n, From: strings.Fields(owners)})
	}
	if len(bad) > 0 {
		o.opts.Client.HDel(ctx, o.decided, bad...)
	}
	return got
}
