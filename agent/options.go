package agent

import (
	"cmp"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
)

// Defaults. The backoff numbers follow docs/protocol.md's advice: start
// small, never wait more than 30 s between tries.
const (
	DefaultBatchSize     = 100
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultBufferSize    = 10_000
	// DefaultSpoolLimit bounds the bytes a spool directory may hold.
	DefaultSpoolLimit = 1 << 30

	backoffBase = 100 * time.Millisecond
	backoffCap  = 30 * time.Second
	// maxRetryAfter caps a server's Retry-After so that a broken header
	// cannot park the sender for hours.
	maxRetryAfter = 5 * time.Minute
	// maxSlowInterval is how far "slowDown" answers may stretch the flush
	// interval.
	maxSlowInterval = 5 * time.Second
	// maxBatchSize keeps one request well under the server's 4 MiB body
	// limit for ordinary events.
	maxBatchSize = 5000
)

// Option configures a Client.
type Option func(*config)

type config struct {
	token           string
	httpClient      *http.Client
	batchSize       int
	flushInterval   time.Duration
	bufferSize      int
	spoolDir        string
	spoolAnyToken   bool
	maxRetryElapsed time.Duration
	logger          *slog.Logger
	clock           apollo.Clock
	onRejected      func(*apollo.Error)

	// Not options a user needs; tests in this package set them.
	spoolAfter     time.Duration                         // outage length after which memory goes to disk
	spoolLimit     int64                                 // bytes on disk
	spoolFileBytes int64                                 // a spool file is rotated past this size
	requestTimeout time.Duration                         // per request, real time
	jitter         func(max time.Duration) time.Duration // full jitter: a duration in [0, max)
	// onRetryWait, when set, is told each retry wait once its timer is
	// armed: the signal tests wait for instead of sleeping.
	onRetryWait func(time.Duration)
}

// WithRejectHandler calls f, from the sender goroutine, with the server's
// reason for every event it rejected. f must not block.
func WithRejectHandler(f func(*apollo.Error)) Option { return func(c *config) { c.onRejected = f } }

// WithToken sends token as "Authorization: Bearer <token>" on every request.
// New refuses a token with a control character (a "\r" read with it from
// a file with Windows line ends): no header can carry it.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithHTTPClient sets the client used for requests (proxies, TLS, transport
// tuning). Its Timeout, if set, applies on top of the SDK's own 10 s limit.
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// WithBatchSize sets how many events go in one request (default 100).
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithFlushInterval sets how long a partial batch may wait before it is sent
// (default 200ms).
func WithFlushInterval(d time.Duration) Option { return func(c *config) { c.flushInterval = d } }

// WithBufferSize sets how many events may wait in memory (default 10 000).
// Past it, events go to the spool directory if there is one; otherwise the
// reporting call returns ErrBufferFull.
func WithBufferSize(n int) Option { return func(c *config) { c.bufferSize = n } }

// WithSpoolDir keeps events that cannot be sent or held in memory in dir,
// and sends events left there by an earlier process first. One Client at a
// time may use a directory: New refuses a second one with a conflict error,
// in this process or (on Unix, by a lock on the directory) in another. A
// job whose runs can overlap (a cron run that outlasts its interval) gives
// each run a directory of its own, or runs under apollo exec, which takes
// a free one of its spool slots. Spooled events are sent only with the
// token they were reported with (WithToken): a client with another token
// leaves them in dir, with a warning, for a client with theirs. A token
// the server refuses (401, 403), or an address without the events route
// (404, 405), costs no event: they are kept in dir and retried until the
// server takes them (docs/protocol.md).
func WithSpoolDir(dir string) Option { return func(c *config) { c.spoolDir = dir } }

// WithSpoolOfAnyToken makes the client send, with its own token, the
// files every token left in its spool directory (WithSpoolDir), not only
// its own token's. It is for an operator handing the events of a token
// since rotated or revoked to its successor (apollo spool send --from):
// the events land in the tenant of this client's token, so give one of
// the same tenant.
func WithSpoolOfAnyToken() Option { return func(c *config) { c.spoolAnyToken = true } }

// WithMaxRetryElapsed bounds how long one batch is retried before its events
// are dropped and counted (default 0: retry forever). Events in a spool
// directory are never dropped for age: they stay on disk until sent.
func WithMaxRetryElapsed(d time.Duration) Option {
	return func(c *config) { c.maxRetryElapsed = d }
}

// WithLogger sets where the client logs rejected events, retries and spool
// activity (default slog.Default()). Lines on hot paths are rate-limited.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithClock sets the clock behind event timestamps, the flush interval and
// backoff waits. Tests pass an *apollo.FakeClock.
func WithClock(clk apollo.Clock) Option { return func(c *config) { c.clock = clk } }

func fullJitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return rand.N(max)
}

func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	c.httpClient = cmp.Or(c.httpClient, http.DefaultClient)
	c.batchSize = cmp.Or(c.batchSize, DefaultBatchSize)
	c.flushInterval = cmp.Or(c.flushInterval, DefaultFlushInterval)
	c.bufferSize = cmp.Or(c.bufferSize, DefaultBufferSize)
	c.logger = cmp.Or(c.logger, slog.Default())
	if c.clock == nil {
		c.clock = apollo.SystemClock
	}
	c.spoolAfter = cmp.Or(c.spoolAfter, 5*time.Second)
	c.spoolLimit = cmp.Or(c.spoolLimit, DefaultSpoolLimit)
	c.spoolFileBytes = cmp.Or(c.spoolFileBytes, 8<<20)
	c.requestTimeout = cmp.Or(c.requestTimeout, 10*time.Second)
	if c.jitter == nil {
		c.jitter = fullJitter
	}
	return c, c.validate()
}

func (c *config) validate() error {
	switch {
	case c.batchSize < 1 || c.batchSize > maxBatchSize:
		return fmt.Errorf("agent: WithBatchSize(%d): want 1 to %d events per request; the server refuses bodies over 4 MiB", c.batchSize, maxBatchSize)
	case c.flushInterval < 0:
		return fmt.Errorf("agent: WithFlushInterval(%v): want a positive interval, e.g. 200ms", c.flushInterval)
	case c.bufferSize < c.batchSize:
		return fmt.Errorf("agent: WithBufferSize(%d) is below the batch size %d: the buffer must hold at least one batch", c.bufferSize, c.batchSize)
	case c.maxRetryElapsed < 0:
		return fmt.Errorf("agent: WithMaxRetryElapsed(%v): want 0 (retry forever) or a positive duration", c.maxRetryElapsed)
	}
	// No HTTP header carries a control character: every request would
	// fail before it left, and be retried as if the server were down.
	if i := strings.IndexFunc(c.token, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return fmt.Errorf("agent: WithToken: the token holds a control character (%q at byte %d), which no HTTP header can carry; a line end read with it from a file? remove it", c.token[i], i)
	}
	return nil
}
