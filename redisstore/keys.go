package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/internal/keypart"
	"github.com/apollo-11/apollo/metrics"
)

// Key layout (docs/redis.md):
//
//	<prefix>[:<tenant>]:metric:{<job>}:window   hash: a job's buckets, rollups and gauges
//	<prefix>[:<tenant>]:metric:names            sorted set: job names, scored by last write (ms)
//	<prefix>:metric:writers                     sorted set: writer IDs, scored by last flush (ms)
//
// The job name sits in braces, a Redis Cluster hash tag, so each job's
// key maps to one slot and jobs spread over the cluster. Fields of the
// window hash, each with "@<writer>" appended for a named writer:
//
//	b<unix seconds>   the 10-second buckets of the 10 minutes from then (codec.go)
//	m<unix seconds>   the 1-minute rollups of the hour from then
//	g                 the gauge levels now: backlog,running
//
// Blocks rather than a field per bucket keep a job's hash small (a day is
// 6 bucket blocks and 24 rollup blocks) and a window a handful of fields:
// Redis finds a field of a small hash by scanning it.

// keyspace builds the keys of one prefix.
type keyspace struct{ prefix string }

// ns is the prefix with the tenant's segment. The tenant is escaped so
// that no tenant's keys can be read as another's or as a tenant-less key.
func (k keyspace) ns(tenant string) string {
	if tenant == "" {
		return k.prefix
	}
	return k.prefix + ":" + keypart.Escape(tenant)
}

func (k keyspace) window(tenant, name string) string {
	return k.ns(tenant) + ":metric:{" + name + "}:window"
}

func (k keyspace) names(tenant string) string { return k.ns(tenant) + ":metric:names" }

func (k keyspace) writers() string { return k.prefix + ":metric:writers" }

// Field kinds of the window hash.
const (
	kindBucket = 'b'
	kindRollup = 'm'
	kindGauge  = 'g'
)

// Entry widths and block spans, ms.
const (
	bucketMs = int64(metrics.BucketWidth / time.Millisecond)
	minuteMs = int64(metrics.RollupWidth / time.Millisecond)
)

// width is the distance between a kind's entries; span is a block's.
func width(kind byte) int64 {
	if kind == kindRollup {
		return minuteMs
	}
	return bucketMs
}

func span(kind byte) int64 { return blockSlots * width(kind) }

// blockOf is the start of the block of kind holding the entry at key.
func blockOf(kind byte, key int64) int64 { return floorTo(key, span(kind)) }

// fieldName is the hash field of the block of kind (kindBucket,
// kindRollup) starting at start (Unix ms), or of the gauges (kindGauge),
// for a writer.
func fieldName(kind byte, start int64, writer string) string {
	b := make([]byte, 0, 16+len(writer))
	b = append(b, kind)
	if kind != kindGauge {
		b = strconv.AppendInt(b, start/1000, 10)
	}
	if writer != "" {
		b = append(b, '@')
		b = append(b, writer...)
	}
	return string(b)
}

// parseField is fieldName's inverse; ok is false for a field this package
// did not write.
func parseField(f string) (kind byte, start int64, writer string, ok bool) {
	if f == "" {
		return 0, 0, "", false
	}
	kind, rest := f[0], f[1:]
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest, writer = rest[:i], rest[i+1:]
		if writer == "" {
			return 0, 0, "", false
		}
	}
	switch kind {
	case kindGauge:
		return kind, 0, writer, rest == ""
	case kindBucket, kindRollup:
		sec, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || rest[0] == '+' || sec < -1<<52 || sec > 1<<52 || sec*1000%span(kind) != 0 {
			return 0, 0, "", false
		}
		return kind, sec * 1000, writer, true
	}
	return 0, 0, "", false
}

// Writers returns the writer IDs announced under prefix, in
// <prefix>:metric:writers: those whose fields a read sums.
func Writers(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	ws, err := c.ZRange(ctx, keyspace{cmp.Or(prefix, DefaultPrefix)}.writers(), 0, -1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: reading the metrics' writers: %w", err)
	}
	return ws, nil
}
