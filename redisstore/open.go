package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// Open returns a client for a Redis URL:
//
//	redis://[user:password@]host:6379[/db][?dial_timeout=3s&...]   one server
//	rediss://...                                                   the same over TLS
//	unix:///run/redis.sock[?db=0]                                  a local socket
//	redis-sentinel://[user:password@]host:26379[/db]?master_name=mymaster[&addr=host2:26379...]
//	rediss-sentinel://...                                          Sentinel, TLS to the servers
//	redis-cluster://[user:password@]host:7000[?addr=host2:7000...] Redis Cluster
//	rediss-cluster://...                                           Cluster over TLS
//
// Query parameters are go-redis options in snake case (dial_timeout,
// read_timeout, pool_size, ...); a Sentinel's own password goes in
// sentinel_password... see docs/redis.md. Open does not connect: the
// first command does.
func Open(rawURL string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, badURL(rawURL, "it has no scheme")
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, badURL(rawURL, err.Error())
		}
		return redis.NewClient(o), nil
	case "redis-sentinel", "rediss-sentinel":
		o, err := redis.ParseFailoverURL(strings.TrimSuffix(scheme, "-sentinel") + "://" + rest)
		if err != nil {
			return nil, badURL(rawURL, err.Error())
		}
		if o.MasterName == "" {
			return nil, badURL(rawURL, "it names no master_name")
		}
		return redis.NewFailoverClient(o), nil
	case "redis-cluster", "rediss-cluster":
		o, err := redis.ParseClusterURL(strings.TrimSuffix(scheme, "-cluster") + "://" + rest)
		if err != nil {
			return nil, badURL(rawURL, err.Error())
		}
		return redis.NewClusterClient(o), nil
	}
	return nil, badURL(rawURL, fmt.Sprintf("the scheme %q is not one of redis, rediss, unix, redis-sentinel, rediss-sentinel, redis-cluster, rediss-cluster", scheme))
}

const urlHint = "e.g. redis://127.0.0.1:6379/0, redis-sentinel://host:26379?master_name=mymaster or redis-cluster://host:7000?addr=host2:7000"

// badURL is Open's error. The URL's user information never reaches it: a
// library's message may quote the URL, so it is cut out of that too.
func badURL(raw, why string) error {
	info := userinfo(raw)
	// Hide before clipping: a clipped URL may hold half the password.
	msg := clip(hideSecret(raw, info)) + ": " + hideSecret(why, info)
	return &apollo.Error{Code: apollo.EINVALID, Field: "redis", Message: msg, Hint: urlHint}
}

// hideSecret replaces the user information, and the password wherever it
// appears when it is long enough not to be mistaken for other text.
func hideSecret(s, info string) string {
	if info == "" {
		return s
	}
	s = strings.ReplaceAll(s, info, "xxxxx")
	if _, pw, _ := strings.Cut(info, ":"); len(pw) >= 4 {
		s = strings.ReplaceAll(s, pw, "xxxxx")
	}
	return s
}

// userinfo returns the "user:password" part of a URL as written, or "".
func userinfo(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at <= 0 {
		return ""
	}
	return rest[:at]
}

// LogTo sends what the Redis client itself reports (a connection pool
// that cannot dial, a subscription that reconnects) to log, one line a
// minute with how many it held back: go-redis otherwise writes its own
// lines to stderr, which a log pipeline reading the structured log cannot
// parse, a dozen a second while Redis refuses connections. go-redis has
// one logger for the process: the last call wins.
func LogTo(log *slog.Logger, clock apollo.Clock) {
	redis.SetLogger(clientLog{log: log, clock: clock, limit: loglimit.New(time.Minute)})
}

type clientLog struct {
	log   *slog.Logger
	clock apollo.Clock
	limit *loglimit.Limiter
}

func (c clientLog) Printf(_ context.Context, format string, v ...any) {
	if ok, held := c.limit.Allow("", c.clock.Now()); ok {
		c.log.Warn("redisstore: the Redis client says: "+strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), "suppressed", held)
	}
}
