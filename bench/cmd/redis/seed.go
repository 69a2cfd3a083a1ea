package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// seedScript is the seed's UpdateMetric (section 3.3) as one atomic
// script per event: the 10-second bucket is a hash of count, sum, min and
// max expiring after 60 s (section 4.3), and a 5-minute rolling window is
// a sorted set scored by bucket end whose member is a small JSON of the
// bucket's count and totalCost, replaced on every event.
//
// KEYS[1] bucket hash, KEYS[2] rolling sorted set
// ARGV[1] cost (ms), ARGV[2] bucket end (ms), ARGV[3] bucket ttl (s),
// ARGV[4] rolling window (ms), ARGV[5] rolling ttl (s)
var seedScript = redis.NewScript(`
local count = redis.call('HINCRBY', KEYS[1], 'count', 1)
local sum = redis.call('HINCRBY', KEYS[1], 'sum', ARGV[1])
local cost = tonumber(ARGV[1])
local mn = redis.call('HGET', KEYS[1], 'min')
if not mn or cost < tonumber(mn) then redis.call('HSET', KEYS[1], 'min', cost) end
local mx = redis.call('HGET', KEYS[1], 'max')
if not mx or cost > tonumber(mx) then redis.call('HSET', KEYS[1], 'max', cost) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
local ends = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], ends, ends)
redis.call('ZADD', KEYS[2], ends, cjson.encode({['end'] = ends, count = count, totalCost = sum}))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (ends - tonumber(ARGV[4])))
redis.call('EXPIRE', KEYS[2], ARGV[5])
return count
`)

// runSeed loads the seed's design: every event is one EVALSHA, waited
// for, as the seed's bus calls UpdateMetric.
func runSeed(ctx context.Context, c redis.UniversalClient, prefix string, names []string, dur time.Duration, workers int) (result, error) {
	if err := seedScript.Load(ctx, c).Err(); err != nil {
		return result{}, err
	}
	r, err := measure(ctx, c, "seed (one Lua script per event)", dur, workers, func(w int, stop *atomic.Bool) (int64, error) {
		next := events(w, names)
		var n int64
		for !stop.Load() {
			e := next()
			bucket := e.ts / 10_000 * 10_000
			keys := []string{
				prefix + ":metric:{" + e.job + "}:window:" + strconv.FormatInt(bucket, 10),
				prefix + ":metric:{" + e.job + "}:rolling",
			}
			if err := seedScript.EvalSha(ctx, c, keys, e.cost, bucket+10_000, 60, 300_000, 360).Err(); err != nil {
				return n, fmt.Errorf("seed script: %w", err)
			}
			n++
		}
		return n, nil
	}, nil)
	if err != nil {
		return r, err
	}
	r.calls = r.events
	// Every event was counted in some bucket (those still there).
	var counted int64
	iter := c.Scan(ctx, 0, prefix+":metric:*:window:*", 1000).Iterator()
	for iter.Next(ctx) {
		n, _ := c.HGet(ctx, iter.Val(), "count").Int64()
		counted += n
	}
	if counted != r.events {
		return r, fmt.Errorf("the seed's buckets count %d events, the load made %d", counted, r.events)
	}
	return r, nil
}

func runtimeGOMAXPROCS() int { return runtime.GOMAXPROCS(0) }
