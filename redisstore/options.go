package redisstore

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// Defaults of Options.
const (
	DefaultPrefix        = "apollo"
	DefaultFlushInterval = time.Second
	DefaultMaintainEvery = time.Hour
	DefaultMaxDirty      = 100_000
)

// Options configure a Flusher and a Store. A Store reads only Client,
// Prefix, the retentions, RequireWriters and Clock.
type Options struct {
	// Client is a single node, Sentinel or Cluster client (see Open).
	Client redis.UniversalClient
	// Prefix starts every key; default "apollo". Processes that share
	// metrics use the same prefix.
	Prefix string
	// Writer identifies this flusher among several writing the same
	// prefix (scale-out: one per bus node): letters, digits, '.', '_' and
	// '-', at most 64 bytes. Each writer's numbers are kept apart and
	// summed on read, so two writers must never share an ID, and one
	// writer must keep its ID across restarts. Empty, the default, is the
	// one writer of the three-process mode, and of a bus whose log began
	// before Redis held another log's metrics (docs/redis.md, "A bus on a
	// new data directory").
	Writer string
	// Retire are writers whose gauge levels (tasks pending and running)
	// this flusher deletes from each job's key the first time it writes
	// the job after Start: writers that will never write again, whose
	// tasks nobody will finish (the bus of a log a new data directory
	// replaced). Their counts stay, summed on read until they leave
	// their windows. A live writer's levels would come back only at its
	// next write of the job.
	Retire []string
	// FlushInterval is how often changes are written; default 1s.
	FlushInterval time.Duration
	// BucketRetention and RollupRetention must be the aggregator's; the
	// defaults are metrics.DefaultBucketRetention and
	// metrics.DefaultRollupRetention.
	BucketRetention, RollupRetention time.Duration
	// MaintainEvery is how often each job's key is trimmed of expired
	// fields and has its expiry pushed back; default 1h. A key lives
	// RollupRetention + 2×MaintainEvery after its last maintenance.
	MaintainEvery time.Duration
	// MaxDirty bounds the jobs waiting to be flushed; past it the flusher
	// forgets them and copies every job instead once Redis answers.
	// Default 100 000.
	MaxDirty int
	// RequireWriters makes a Store refuse to answer (apollo.EUNAVAILABLE)
	// while no writer is announced in the prefix: no bus has flushed yet,
	// or Redis lost the metrics and the bus has not copied them again.
	// The alert processes set it, so that their rules keep their alerts
	// instead of resolving them on windows that read empty.
	RequireWriters bool
	// Clock must be the aggregator's; default apollo.SystemClock.
	Clock  apollo.Clock
	Logger *slog.Logger // default slog.Default()
}

func (o *Options) setDefaults() {
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	o.FlushInterval = cmp.Or(o.FlushInterval, DefaultFlushInterval)
	o.BucketRetention = cmp.Or(o.BucketRetention, metrics.DefaultBucketRetention)
	o.RollupRetention = cmp.Or(o.RollupRetention, metrics.DefaultRollupRetention)
	o.MaintainEvery = cmp.Or(o.MaintainEvery, DefaultMaintainEvery)
	o.MaxDirty = cmp.Or(o.MaxDirty, DefaultMaxDirty)
	if o.Clock == nil {
		o.Clock = apollo.SystemClock
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// MaxWriterBytes bounds Options.Writer.
const MaxWriterBytes = 64

func (o *Options) validate() error {
	bad := func(field, msg, hint string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: "redisstore." + field, Message: msg, Hint: hint}
	}
	switch {
	case o.Client == nil:
		return bad("Client", "no Redis client", "pass the client redisstore.Open returns")
	case strings.ContainsAny(o.Prefix, "{}") || strings.ContainsFunc(o.Prefix, needsControl):
		return bad("Prefix", fmt.Sprintf("%q holds a brace or a control character", o.Prefix), "use letters, digits and ':', e.g. apollo or apollo:staging")
	case !ValidWriter(o.Writer):
		return bad("Writer", fmt.Sprintf("%q is not up to %d letters, digits, '.', '_' or '-'", clip(o.Writer), MaxWriterBytes), "use the node's name, e.g. bus-1")
	case slices.ContainsFunc(o.Retire, func(w string) bool { return !ValidWriter(w) || w == o.Writer }):
		return bad("Retire", fmt.Sprintf("%q holds the writer itself or an ID that is not a writer's", o.Retire), "list other writers, as in <prefix>:metric:writers")
	case o.FlushInterval < 10*time.Millisecond:
		return bad("FlushInterval", fmt.Sprintf("%v is below 10ms", o.FlushInterval), "leave it unset for 1s")
	case o.BucketRetention < time.Minute || o.BucketRetention%metrics.BucketWidth != 0:
		return bad("BucketRetention", fmt.Sprintf("%v is not a multiple of 10s of at least 1m", o.BucketRetention), "use the aggregator's; unset is 1h")
	case o.RollupRetention < o.BucketRetention || o.RollupRetention%metrics.RollupWidth != 0:
		return bad("RollupRetention", fmt.Sprintf("%v is not a whole number of minutes of at least BucketRetention (%v)", o.RollupRetention, o.BucketRetention), "use the aggregator's; unset is 24h")
	case o.MaintainEvery < time.Minute:
		return bad("MaintainEvery", fmt.Sprintf("%v is below 1m", o.MaintainEvery), "leave it unset for 1h")
	case o.MaxDirty < 1:
		return bad("MaxDirty", fmt.Sprintf("%d is not positive", o.MaxDirty), "leave it unset for 100000")
	}
	return nil
}

// ValidWriter reports whether w can be an Options.Writer.
func ValidWriter(w string) bool {
	return len(w) <= MaxWriterBytes && !strings.ContainsFunc(w, notWriterChar)
}

func needsControl(r rune) bool { return r < 0x20 || r == 0x7f }

func notWriterChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

// keyTTL is how long a job's key outlives its last maintenance.
func (o *Options) keyTTL() time.Duration { return o.RollupRetention + 2*o.MaintainEvery }
