package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/notify"
)

// takeTurnScript takes a channel's turn: KEYS[1] holds when the next one
// is free (Unix milliseconds); ARGV[1] is now, ARGV[2] the turn's length.
// It answers 0 when it took the turn, else the milliseconds left.
var takeTurnScript = redis.NewScript(`
local free = tonumber(redis.call("GET", KEYS[1]) or "0")
local now, every = tonumber(ARGV[1]), tonumber(ARGV[2])
if now < free then return free - now end
redis.call("SET", KEYS[1], now + every, "PX", every + 60000)
return 0`)

// turnTimeout bounds a Take: a lane that cannot read the turns in time
// keeps its own pace rather than hold a notification back.
const turnTimeout = time.Second

// Turns is notify.Turns in Redis, shared by the alert processes: one key
// per channel, <p>:notify:turn:<channel>, holding when its next turn is
// free, on the clocks of the processes that take them.
type Turns struct {
	c      redis.UniversalClient
	prefix string
}

var _ notify.Turns = (*Turns)(nil)

// NewTurns returns the turns of the channels under prefix.
func NewTurns(c redis.UniversalClient, prefix string) *Turns { return &Turns{c: c, prefix: prefix} }

// Take implements notify.Turns.
func (t *Turns) Take(ctx context.Context, channel string, every time.Duration, now time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	left, err := takeTurnScript.Run(ctx, t.c, []string{t.prefix + ":notify:turn:" + channel},
		now.UnixMilli(), max(every.Milliseconds(), 1)).Int64()
	if err != nil {
		return 0, fmt.Errorf("redisstore: turns of channel %s: %w", channel, err)
	}
	return time.Duration(left) * time.Millisecond, nil
}
