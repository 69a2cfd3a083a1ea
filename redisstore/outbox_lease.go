package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/notify"
)

// adoptScript moves up to ARGV[3] entries of the owner ARGV[1] into this
// process's hash, oldest first, renumbered from ARGV[2], if and only if
// the owner's lease is gone or still holds ARGV[5], the value of a holder
// this process proved dead (leaseproof.go; "" when it proved none): the
// check and the move are one step, so two processes never both take an
// entry, and a lease the owner renewed meanwhile is never taken. With
// ARGV[4] "1" (the decided hash, Decisions) each value is prefixed with
// the owner and a space. It returns the values moved; the owner leaves
// the owners' set once both its hashes are empty, and a dead owner's
// lease goes with it.
//
// KEYS: the owner's lease, the owner's hash, the owners' set, this
// process's hash, the owner's other hash.
var adoptScript = redis.NewScript(`
local lease = redis.call("GET", KEYS[1])
if lease and (ARGV[5] == "" or lease ~= ARGV[5]) then return {} end
local all = redis.call("HGETALL", KEYS[2])
local es = {}
for i = 1, #all, 2 do es[#es + 1] = {tonumber(all[i]) or 0, all[i], all[i + 1]} end
table.sort(es, function(a, b) return a[1] < b[1] end)
local n = math.min(#es, tonumber(ARGV[3]))
local out = {}
for i = 1, n do
  local v = es[i][3]
  if ARGV[4] == "1" then v = ARGV[1] .. " " .. v end
  redis.call("HSET", KEYS[4], string.format("%d", tonumber(ARGV[2]) + i - 1), v)
  redis.call("HDEL", KEYS[2], es[i][2])
  out[i] = v
end
if n == #es and redis.call("HLEN", KEYS[5]) == 0 then
  redis.call("SREM", KEYS[3], ARGV[1])
  if lease then redis.call("DEL", KEYS[1]) end
end
return out
`)

// tick is the renewal loop's step: renew the lease, settle what waited
// for Redis, take over what stopped or dead processes owed.
func (o *Outbox) tick(ctx context.Context) {
	if !o.renew(ctx) {
		return
	}
	es, taken := o.adopt(ctx)
	if len(es) > 0 && o.onAdopt != nil {
		o.onAdopt(es)
	}
	if len(taken) > 0 && o.onTakeOver != nil {
		// Sending them takes Redis calls of its own for each (the lock,
		// the lanes' entry): beside the renewals, which must stay on
		// time, and one batch at a time (adopt takes no more meanwhile).
		o.taking.Store(true)
		o.life.Go(func(context.Context) error {
			defer o.taking.Store(false)
			o.onTakeOver(taken)
			return nil
		})
	}
}

// renew rewrites the lease and the registration, pushes back the keys'
// expiry and settles what waited; it reports whether Redis answered.
func (o *Outbox) renew(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, o.opts.Lease/3)
	defer cancel()
	cmds, err := o.opts.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, o.alive, o.lease, o.opts.Lease)
		p.SAdd(ctx, o.owners, o.opts.ID)
		p.Expire(ctx, o.owners, outboxKeyTTL)
		p.Expire(ctx, o.owed, outboxKeyTTL)
		p.Expire(ctx, o.decided, outboxKeyTTL)
		return nil
	})
	if err != nil {
		o.markDown("renew", cmds, err)
		return false
	}
	o.mu.Lock()
	ids := slices.Collect(maps.Keys(o.unsettled))
	dids := slices.Collect(maps.Keys(o.dunsettled))
	o.mu.Unlock()
	if len(ids) > 0 || len(dids) > 0 {
		_, err := o.opts.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			if len(ids) > 0 {
				p.HDel(ctx, o.owed, fields(ids)...)
			}
			if len(dids) > 0 {
				p.HDel(ctx, o.decided, fields(dids)...)
			}
			return nil
		})
		if err != nil {
			return false
		}
		o.mu.Lock()
		for _, id := range ids {
			delete(o.unsettled, id)
		}
		for _, id := range dids {
			delete(o.dunsettled, id)
		}
		o.mu.Unlock()
		ids = append(ids, dids...)
	}
	if o.down.Swap(false) {
		o.opts.Logger.Info("redisstore: outbox: Redis answers again; notifications are recorded before they are queued", "settled", len(ids))
	}
	return true
}

// adopt takes over the entries of every process whose lease is gone, or
// whose lease names a process this one proves dead (a kill -9 on this
// host: taken at once rather than when the lease runs out), at most
// adoptBatch from each of its hashes per call, and returns them
// renumbered as this process's, oldest first: the lanes' and the alert
// engine's (Decisions). An entry that does not read is dropped and
// counted (unreadable): it cannot be sent, and kept it would come back at
// every round.
func (o *Outbox) adopt(ctx context.Context) ([]notify.OwedNotification, []alert.TakenOver) {
	owners, err := o.opts.Client.SMembers(ctx, o.owners).Result()
	if err != nil {
		return nil, nil
	}
	owners = slices.DeleteFunc(owners, func(owner string) bool {
		return owner == o.opts.ID || !outboxID.MatchString(owner) // not a name this package writes: never a key to touch
	})
	// The owners' leases, in one round trip: the script runs only for
	// those whose lease looks gone or names a dead process (and checks
	// again). A lease Redis refuses to read (a key of another type) is
	// taken for a live one, and keeps none of the others from being
	// judged: only a Redis that did not answer ends the round.
	leases := make([]*redis.StringCmd, len(owners))
	var refused redis.Error
	if _, err := o.opts.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, owner := range owners {
			leases[i] = p.Get(ctx, o.keyAlive(owner))
		}
		return nil
	}); err != nil && !errors.As(err, &refused) { // redis.Nil is a redis.Error too
		return nil, nil
	}
	var got []notify.OwedNotification
	var taken []alert.TakenOver
	for i, owner := range owners {
		lease, ok := o.adoptable(owner, leases[i])
		if !ok {
			continue
		}
		// The engine's first: the script lets the owner go once both
		// hashes are empty. Not while the last batch is being sent.
		taking := o.taking.Load()
		o.mu.Lock()
		dstart := o.dnext
		o.dnext += adoptBatch
		start := o.next
		o.next += adoptBatch // reserved, so that Owe meanwhile takes no ID of these
		o.mu.Unlock()
		var dvals []string
		if !taking {
			dvals, err = adoptScript.Run(ctx, o.opts.Client,
				[]string{o.keyAlive(owner), o.keyDecided(owner), o.owners, o.decided, o.keyOwed(owner)}, owner, dstart, adoptBatch, "1", lease).StringSlice()
		}
		if err != nil {
			o.opts.Logger.Warn("redisstore: outbox: taking over what a stopped alert process had decided failed; trying again at the next renewal",
				"owner", owner, "err", err)
			continue
		}
		if len(dvals) > 0 {
			taken = append(taken, o.takenOver(ctx, owner, dstart, dvals)...)
			o.opts.Logger.Warn("redisstore: outbox: took over the notifications an alert process that stopped or died had decided and not queued",
				"owner", owner, "entries", len(dvals))
		}
		vals, err := adoptScript.Run(ctx, o.opts.Client,
			[]string{o.keyAlive(owner), o.keyOwed(owner), o.owners, o.owed, o.keyDecided(owner)}, owner, start, adoptBatch, "0", lease).StringSlice()
		if err != nil {
			o.opts.Logger.Warn("redisstore: outbox: taking over what a stopped alert process owed failed; trying again at the next renewal",
				"owner", owner, "err", err)
			continue
		}
		var bad []string
		for i, v := range vals {
			id := start + uint64(i)
			var e notify.OwedNotification
			if err := json.Unmarshal([]byte(v), &e); err != nil {
				bad = append(bad, strconv.FormatUint(id, 10))
				o.unreadable("owed", owner, err)
				continue
			}
			e.ID = id
			got = append(got, e)
		}
		if len(bad) > 0 {
			o.opts.Client.HDel(ctx, o.owed, bad...)
		}
		if len(vals) > 0 {
			o.opts.Logger.Warn("redisstore: outbox: took over the notifications an alert process that stopped or died owed",
				"owner", owner, "entries", len(vals))
		}
	}
	slices.SortStableFunc(got, func(a, b notify.OwedNotification) int { return a.At.Compare(b.At) })
	o.mu.Lock()
	for _, e := range got {
		o.mine[e.ID] = e
	}
	o.mu.Unlock()
	o.adopted.Add(int64(len(got) + len(taken)))
	return got, taken
}

// adoptable judges an owner's lease as adopt read it: gone ("", true),
// held by a process this one proves dead (its value, true: the script
// takes it only if it still holds that value), or anything else — a live
// or unknown holder, a key Redis does not read (false).
func (o *Outbox) adoptable(owner string, cmd *redis.StringCmd) (lease string, ok bool) {
	lease, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", true
	case err != nil:
		return "", false
	}
	holder, dead := o.proof.deadHolder(lease)
	if dead {
		o.opts.Logger.Info("redisstore: outbox: taking over the outbox of a dead alert process on this host, before its lease runs out",
			"owner", owner, "pid", holder.pid)
	}
	return lease, dead
}

// Refill writes back what this process owes, after Redis lost its data
// (the Keeper calls it): without it, a crash of this process would lose
// what its queues hold.
func (o *Outbox) Refill(ctx context.Context) error {
	o.mu.Lock()
	es := slices.Collect(maps.Values(o.mine))
	ds := maps.Clone(o.dmine)
	o.mu.Unlock()
	slices.SortFunc(es, func(a, b notify.OwedNotification) int { return cmp.Compare(a.ID, b.ID) })
	_, err := o.opts.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, o.alive, o.lease, o.opts.Lease)
		for _, e := range es {
			b, err := json.Marshal(e)
			if err != nil {
				continue // Owe encoded it once already
			}
			p.HSet(ctx, o.owed, strconv.FormatUint(e.ID, 10), b)
		}
		p.Expire(ctx, o.owed, outboxKeyTTL)
		for id, v := range ds {
			p.HSet(ctx, o.decided, strconv.FormatUint(id, 10), v)
		}
		p.Expire(ctx, o.decided, outboxKeyTTL)
		p.SAdd(ctx, o.owners, o.opts.ID)
		p.Expire(ctx, o.owners, outboxKeyTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: outbox: writing back %d owed notifications: %w", len(es), err)
	}
	o.fills.Add(1)
	return nil
}
