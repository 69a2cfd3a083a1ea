package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

var (
	// ErrBufferFull is returned when an event can be kept neither in memory
	// nor in the spool directory. The event is counted in Stats.Dropped.
	ErrBufferFull = &apollo.Error{Code: apollo.ETOOMANY, Message: "agent: event buffer full",
		Hint: "the server is slow or unreachable; set WithSpoolDir, or a larger WithBufferSize"}
	// ErrClosed is returned for events reported after Close.
	ErrClosed = &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "agent: client closed"}
)

// spoolDirs holds the spool directories in use in this process: two
// Clients on one directory would send and delete each other's files.
// (Another process is kept out by the lock openSpool takes; this process's
// own second lock of the directory would not be refused on every system.)
var spoolDirs sync.Map

// Client reports events to one Apollo-11 server. It is safe for concurrent
// use. Close it to deliver what is buffered and stop its goroutine.
type Client struct {
	cfg      config
	endpoint string

	mu       sync.Mutex
	q        fifo   // events waiting in memory, oldest first
	lastID   uint64 // id of the newest queued event
	spool    *spool // nil without WithSpoolDir
	spoolKey string
	// spooling: new events go to the spool, behind what is there. It is on
	// while the spool has unsent events, so that no event overtakes an
	// older one; the queue is empty meanwhile.
	spooling bool
	// spilled: the server was unreachable for a while and every unsent
	// event is on disk; Flush counts spooled events as done until the
	// server answers again.
	spilled bool
	closed  bool
	waiters []*flushWaiter
	// inflight holds the events the sender has taken and not settled. Only
	// the sender changes it, under mu; Flush reads it.
	inflight []item
	lost     int   // events dropped when the sender stopped
	stopErr  error // why they could not be spooled

	// Sender state, touched by the sender goroutine only.
	interval time.Duration
	// perRequest bounds the events in one request once the server
	// refused a larger one (413); 0: the batch size.
	perRequest int
	resp       response
	logs       logLimits

	wake   chan struct{} // a new event, a Flush or Close: look again
	stop   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error

	n counters
}

type counters struct {
	sent, accepted, held, waiting, duplicate, rejected, retries, spooled, dropped atomic.Uint64
}

// Stats counts what a Client did with its events since New.
type Stats struct {
	Sent      uint64 // events written into requests, resends included
	Accepted  uint64 // answered accepted
	Held      uint64 // answered held: stored, the server asked to slow down
	Waiting   uint64 // answered waiting: stored, ahead of a missing earlier event of the run
	Duplicate uint64 // answered duplicate: the server had them already
	Rejected  uint64 // answered rejected, or refused with the whole request
	Retries   uint64 // requests that resent events
	Spooled   uint64 // events written to the spool directory
	Dropped   uint64 // events refused (ErrBufferFull) or given up on
	Buffered  int    // events in memory now, sent or not yet answered
	// SpoolBytes is the size of the spool directory's files now.
	SpoolBytes int64
}

// New returns a Client that reports to the server at baseURL (for example
// "http://127.0.0.1:1969") and starts its sender goroutine. With a spool
// directory, events an earlier process left there are sent before new ones.
func New(baseURL string, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	endpoint, err := eventsURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:      cfg,
		endpoint: endpoint,
		interval: cfg.flushInterval,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		logs:     newLogLimits(cfg.logger, cfg.clock),
	}
	if cfg.spoolDir != "" {
		if err := c.openSpool(cfg.spoolDir); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(ctx)
	return c, nil
}

func (c *Client) openSpool(dir string) error {
	key, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("agent: spool dir: %w", err)
	}
	if _, taken := spoolDirs.LoadOrStore(key, true); taken {
		return &apollo.Error{Code: apollo.ECONFLICT, Field: "WithSpoolDir",
			Message: fmt.Sprintf("%s is used by another Client in this process", dir),
			Hint:    "give each Client its own directory, or Close the other one first"}
	}
	c.spool, err = openSpool(dir, c.cfg.token, c.cfg.spoolAnyToken, c.cfg.spoolLimit, c.cfg.spoolFileBytes)
	if err != nil {
		spoolDirs.Delete(key)
		return err
	}
	c.spoolKey = key
	c.spooling = len(c.spool.files) > 0
	if c.spooling {
		c.cfg.logger.Info("apollo agent: sending events left in the spool by an earlier process",
			"dir", dir, "files", len(c.spool.files), "bytes", c.spool.bytes)
	}
	if c.spool.others > 0 {
		c.cfg.logger.Warn("apollo agent: the spool holds events reported with another token; they are kept, not sent with this one: a client with their token sends them (delete the files if that token is gone for good)",
			"dir", dir, "files", c.spool.others)
	}
	return nil
}

func eventsURL(base string) (string, error) {
	u, err := url.Parse(base)
	bad := func(msg string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: "baseURL", Message: msg,
			Hint: "pass the server's address, e.g. http://127.0.0.1:1969"}
	}
	switch {
	case err != nil:
		return "", bad(err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad(fmt.Sprintf("%q: want an http or https URL", base))
	case u.Host == "":
		return "", bad(fmt.Sprintf("%q has no host", base))
	case u.RawQuery != "" || u.Fragment != "":
		return "", bad(fmt.Sprintf("%q: a base URL takes no query or fragment", base))
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/events"
	u.RawPath = ""
	return u.String(), nil
}

// Send queues one event as given: the caller sets its sequence. It never
// waits for the network. It returns the event's validation error,
// ErrBufferFull, or ErrClosed.
func (c *Client) Send(ev apollo.Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	size := 96 + len(ev.TaskID) + len(ev.Name) + len(ev.Extra)
	data, err := appendEvent(make([]byte, 0, size), &ev)
	if err != nil {
		return err
	}
	return c.enqueue(data)
}

func (c *Client) enqueue(data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	it := item{data: data, id: c.lastID + 1}
	switch {
	case c.spooling:
		one := [1]item{it}
		if err := c.toSpoolLocked(one[:]); err != nil {
			return c.refusedLocked(err)
		}
	case c.q.len() < c.cfg.bufferSize:
		c.q.push(it)
	case c.spool != nil:
		// Overflow: the queue and this event go to disk, in order, and
		// newer events follow them there until the sender catches up.
		queued := c.q.buf[c.q.head:]
		if !c.spool.fits(queued, len(data)+1) {
			return c.refusedLocked(errSpoolFull) // before copying the queue
		}
		moved := append(slices.Clip(queued), it)
		if err := c.toSpoolLocked(moved); err != nil {
			return c.refusedLocked(err)
		}
		c.q.take(nil, c.q.len())
		c.spooling = true
	default:
		c.n.dropped.Add(1)
		return ErrBufferFull
	}
	c.lastID = it.id
	c.poke()
	return nil
}

func (c *Client) refusedLocked(err error) error {
	c.n.dropped.Add(1)
	if errors.Is(err, errSpoolFull) {
		return fmt.Errorf("%w: %w", ErrBufferFull, err)
	}
	c.logs.spoolError(err)
	return fmt.Errorf("agent: event not kept: the spool directory cannot take it (free space on its disk, or fix its permissions; what it holds is kept): %w", err)
}

// toSpoolLocked appends events to the spool, behind everything there.
func (c *Client) toSpoolLocked(items []item) error {
	if err := c.spool.append(items); err != nil {
		return err
	}
	c.n.spooled.Add(uint64(len(items)))
	// Events that a pending Flush waits for may have moved from memory to
	// disk: the Flush now also waits for the spool up to them.
	if first := items[0].id; first != 0 {
		for _, w := range c.waiters {
			if first <= w.id {
				w.sord = c.spool.nextSord
			}
		}
	}
	return nil
}

func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// flushWaiter is a Flush call waiting for every event up to id (in memory)
// and before sord (in the spool) to be settled.
type flushWaiter struct {
	id   uint64
	sord uint64
	ch   chan struct{}
}

// oldest holds, for Flush, the oldest unsettled event of each kind:
// memOnly among events only in memory, mem among all events this process
// numbered, sord among events read from the spool.
type oldest struct{ memOnly, mem, sord uint64 }

func (c *Client) oldestLocked() oldest {
	o := oldest{math.MaxUint64, math.MaxUint64, math.MaxUint64}
	if id := c.q.headID(); id != 0 {
		o.memOnly = id
	}
	for _, it := range c.inflight {
		switch {
		case it.file == nil:
			o.memOnly = min(o.memOnly, it.id)
		case it.id != 0:
			o.mem = min(o.mem, it.id)
		default:
			o.sord = min(o.sord, it.sord)
		}
	}
	o.mem = min(o.mem, o.memOnly)
	if c.spool != nil {
		o.sord = min(o.sord, c.spool.nextUnreadSord())
	}
	return o
}

func (w *flushWaiter) satisfied(o oldest, spilled bool) bool {
	return o.memOnly > w.id && (spilled || (o.mem > w.id && o.sord >= w.sord))
}

// releaseLocked wakes the Flush calls whose events are all settled.
func (c *Client) releaseLocked() {
	if len(c.waiters) == 0 {
		return
	}
	o := c.oldestLocked()
	c.waiters = slices.DeleteFunc(c.waiters, func(w *flushWaiter) bool {
		if w.satisfied(o, c.spilled) {
			close(w.ch)
			return true
		}
		return false
	})
}

// Flush returns when every event queued before the call has a final answer
// (accepted, held, waiting, duplicate or rejected), or is in the spool directory
// while the server is unreachable; or when ctx ends. Partial batches are
// sent at once instead of waiting for the flush interval.
func (c *Client) Flush(ctx context.Context) error {
	c.mu.Lock()
	w := &flushWaiter{id: c.lastID}
	if c.spool != nil {
		w.sord = c.spool.nextSord
	}
	if w.satisfied(c.oldestLocked(), c.spilled) {
		c.mu.Unlock()
		return nil
	}
	w.ch = make(chan struct{})
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	c.poke()

	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		err := ctx.Err()
		c.mu.Lock()
		c.waiters = slices.DeleteFunc(c.waiters, func(x *flushWaiter) bool { return x == w })
		c.mu.Unlock()
		select {
		case <-w.ch:
			return nil // settled while we gave up
		default:
		}
		return fmt.Errorf("agent: flush: %w", err)
	case <-c.done:
		select {
		case <-w.ch:
			return nil
		default:
			return ErrClosed
		}
	}
}

// Close refuses new events, flushes with ctx, and stops the sender. With a
// spool directory, events that could not be delivered in time are written
// there for the next process and Close returns nil; without one they are
// dropped, counted, and Close returns an error saying how many. Close is
// idempotent; later calls return the first call's result.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { c.closeErr = c.close(ctx) })
	return c.closeErr
}

func (c *Client) close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	flushErr := c.Flush(ctx)
	close(c.stop)
	c.cancel() // abort a request in progress
	<-c.done
	if c.spoolKey != "" {
		spoolDirs.Delete(c.spoolKey)
	}
	if c.lost > 0 {
		return fmt.Errorf("agent: close: %d events not delivered: %w", c.lost, errors.Join(flushErr, c.stopErr))
	}
	return nil
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := Stats{
		Sent:      c.n.sent.Load(),
		Accepted:  c.n.accepted.Load(),
		Held:      c.n.held.Load(),
		Waiting:   c.n.waiting.Load(),
		Duplicate: c.n.duplicate.Load(),
		Rejected:  c.n.rejected.Load(),
		Retries:   c.n.retries.Load(),
		Spooled:   c.n.spooled.Load(),
		Dropped:   c.n.dropped.Load(),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Buffered = c.q.len()
	for _, it := range c.inflight {
		if it.file == nil {
			s.Buffered++
		}
	}
	if c.spool != nil {
		s.SpoolBytes = c.spool.bytes
	}
	return s
}
