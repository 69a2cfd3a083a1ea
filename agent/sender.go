package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/apollo-11/apollo"
)

// The sender goroutine: it takes a batch (from the spool while the spool
// has unsent events, else from memory), delivers it until every event in
// it is settled, and only then takes the next. One request in flight keeps
// each task's events in order on the wire; the server makes resending safe.

func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	for c.nextBatch() && c.deliver(ctx) {
	}
	c.shutdown()
}

// nextBatch waits until a batch is due and puts it in c.inflight. A batch is
// due when batchSize events wait, when the flush interval has passed since
// the sender first saw a partial batch, or at once for Flush and Close. It
// returns false when the client stops.
func (c *Client) nextBatch() bool {
	var timer apollo.Timer
	var tick <-chan time.Time
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, tick = nil, nil
		}
	}
	defer stopTimer()
	fired := false
	for {
		select {
		case <-c.stop:
			return false
		default:
		}
		c.mu.Lock()
		took, waiting := c.takeLocked(fired)
		c.mu.Unlock()
		if took {
			return true
		}
		if !waiting {
			stopTimer()
			fired = false
		} else if timer == nil {
			timer = c.cfg.clock.NewTimer(c.interval)
			tick = timer.C()
		}
		select {
		case <-c.wake:
		case <-tick:
			fired, timer, tick = true, nil, nil
		case <-c.stop:
			return false
		}
	}
}

// takeLocked fills c.inflight if a batch is due. waiting reports a partial
// batch that waits for the interval.
func (c *Client) takeLocked(fired bool) (took, waiting bool) {
	size := c.cfg.batchSize
	for {
		pending := c.q.len()
		if c.spool != nil {
			pending += c.spool.pending(size)
		}
		if pending == 0 {
			c.caughtUpLocked()
			return false, false
		}
		if pending < size && !fired && len(c.waiters) == 0 && !c.closed {
			return false, true
		}
		if c.spool == nil || c.spool.firstUnread() == nil {
			c.inflight = c.q.take(c.inflight[:0], size)
			return true, false
		}
		items, bad, err := c.spool.read(c.inflight[:0], size)
		c.inflight = items
		if bad > 0 {
			c.n.dropped.Add(uint64(bad))
			c.logs.dropped(bad, "damaged lines in the spool directory")
		}
		if err != nil {
			c.logs.spoolError(fmt.Errorf("%w (the file is kept and skipped)", err))
		}
		if len(items) > 0 {
			return true, false
		}
		c.releaseLocked() // damaged lines may have been all Flush waited for
	}
}

// deliver sends c.inflight until every event in it is settled. It returns
// false if the client stopped first. Requests carry at most perRequest
// events once a 413 halved them.
func (c *Client) deliver(ctx context.Context) bool {
	var failingSince time.Time
	attempt := 0
	for len(c.inflight) > 0 {
		n := len(c.inflight)
		if c.perRequest > 0 {
			n = min(n, c.perRequest)
		}
		sent := c.inflight[:n]
		if attempt > 0 {
			c.n.retries.Add(1)
		}
		c.n.sent.Add(uint64(len(sent)))
		a, resend := c.post(ctx, sent), len(sent)
		wait := a.retryAfter
		switch a.kind {
		case answerStopped:
			return false
		case answerResults:
			c.adjustInterval(c.slowDownAsked())
			keep, why := c.settle(len(sent), a.status, c.resultOf)
			if keep == 0 {
				attempt, failingSince = 0, time.Time{}
				continue
			}
			// Some events were answered retry_later: resend those, and
			// say why (a tenant at its limit answers so for as long as
			// the limit holds).
			a.cause, resend = retryLaterCause(keep, why), keep
		case answerTooLarge:
			if len(sent) > 1 {
				// Kept for the client's life: the server's limit (its
				// body size, the token's rate) holds for the next batch.
				c.perRequest = max(1, len(sent)/2)
				continue
			}
			c.settle(1, a.status, rejectAll(a.err))
			continue
		case answerRejected:
			why := notTheEvents(a.status)
			if c.spool == nil || why == "" {
				if why != "" && a.err.Hint == "" {
					// A bare status: say what it means, not "HTTP 405".
					e := *a.err
					e.Hint = why
					a.err = &e
				}
				c.settle(len(sent), a.status, rejectAll(a.err))
				continue
			}
			// The token or the address, not the events, was refused: with
			// a spool they wait (on disk past spoolAfter) until the server
			// takes them, never deleted for it.
			a.cause = fmt.Errorf("%s (HTTP %d: %v); the events are kept in the spool directory and sent once the server takes them", why, a.status, a.err)
		case answerRetry:
		}
		if wait == 0 {
			wait = c.cfg.jitter(min(backoffCap, backoffBase<<min(attempt, 20)))
		}
		c.logs.retrying(a.cause, a.status, wait, resend)
		attempt++
		if failingSince.IsZero() {
			failingSince = c.cfg.clock.Now()
		}
		if !c.waitRetry(failingSince, wait) {
			return false
		}
	}
	return true
}

// slowDownAsked reports whether the answer asks reporters to send less
// often: "slowDown", or events held because their queue is full.
func (c *Client) slowDownAsked() bool {
	if c.resp.SlowDown {
		return true
	}
	for _, r := range c.resp.Results {
		if r.Result == outcomeHeld {
			return true
		}
	}
	return false
}

func (c *Client) resultOf(i int) (outcome, *apollo.Error) {
	r := c.resp.Results[i]
	return r.Result, r.Error
}

// notTheEvents says why a request refused as a whole was not refused for
// its events (a token refused: unknown, revoked, or of a role that may not
// report; an address without the events route), or "" when it was.
func notTheEvents(status int) string {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "the server refused this client's token: check the token it was given and the server's tokens"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		// Apollo-11 answers a POST to any path but its routes 405 (its
		// dashboard serves every other path, to GET only): a base URL
		// with a path the server does not have, or a proxy's prefix.
		return "no events route at this address: check the server address it sends to (and a proxy in front of the server)"
	}
	return ""
}

// retryLaterCause is why n events answered retry_later are resent: the
// server's reason for the first of them.
func retryLaterCause(n int, why *apollo.Error) error {
	if why == nil {
		return fmt.Errorf("%d events answered retry_later", n)
	}
	return fmt.Errorf("%d events answered retry_later: %w", n, why)
}

func rejectAll(e *apollo.Error) func(int) (outcome, *apollo.Error) {
	return func(int) (outcome, *apollo.Error) { return outcomeRejected, e }
}

// settle applies the answers for the first n events of c.inflight: final
// ones leave it, the others stay at its front to be resent before the
// events not yet sent. It returns how many stay, and the server's reason
// for the first of them.
func (c *Client) settle(n, status int, answer func(int) (outcome, *apollo.Error)) (keep int, why *apollo.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	settled := 0
	for i := range n {
		it := c.inflight[i]
		o, e := answer(i)
		switch o {
		case outcomeAccepted:
			c.n.accepted.Add(1)
		case outcomeHeld:
			c.n.held.Add(1)
		case outcomeWaiting:
			c.n.waiting.Add(1)
		case outcomeDuplicate:
			c.n.duplicate.Add(1)
		case outcomeRejected:
			c.n.rejected.Add(1)
			c.logs.rejected(it.data, e, status)
			if c.cfg.onRejected != nil {
				c.cfg.onRejected(e)
			}
		default: // retry_later, or a word this SDK does not know
			if keep == 0 {
				why = e
			}
			c.inflight[keep] = it
			keep++
			continue
		}
		settled++
		if it.file != nil {
			if err := c.spool.done(it.file); err != nil {
				c.logs.spoolError(err)
			}
		}
	}
	rest := copy(c.inflight[keep:], c.inflight[n:])
	clear(c.inflight[keep+rest:])
	c.inflight = c.inflight[:keep+rest]
	if settled > 0 {
		c.spilled = false // the server answers again
	}
	if len(c.inflight) == 0 && c.q.len() == 0 && (c.spool == nil || c.spool.pending(1) == 0) {
		c.caughtUpLocked()
	}
	c.releaseLocked()
	return keep, why
}

// caughtUpLocked runs when no event waits to be sent: once the spool is
// sent, new events may stay in memory again, and its last file can go.
func (c *Client) caughtUpLocked() {
	if c.spooling && !c.spilled {
		c.spool.sealTail()
		c.spooling = false
	}
}

// adjustInterval stretches the flush interval while the server asks
// reporters to slow down, and lets it return to the configured one after.
func (c *Client) adjustInterval(slowDown bool) {
	if slowDown {
		c.interval = min(2*c.interval, max(maxSlowInterval, c.cfg.flushInterval))
	} else {
		c.interval = max(c.cfg.flushInterval, c.interval/2)
	}
}

// waitRetry waits d before the next try of c.inflight. With a spool, events
// undelivered for spoolAfter, or when the client is closing, go to disk
// first; without one, a batch retried past maxRetryElapsed is dropped. It
// returns false when the client stops.
func (c *Client) waitRetry(since time.Time, d time.Duration) bool {
	elapsed := c.cfg.clock.Now().Sub(since)
	if c.spool == nil && c.cfg.maxRetryElapsed > 0 && elapsed+d > c.cfg.maxRetryElapsed {
		c.mu.Lock()
		n := len(c.inflight)
		c.inflight = c.inflight[:0]
		c.n.dropped.Add(uint64(n))
		c.releaseLocked()
		c.mu.Unlock()
		c.logs.dropped(n, fmt.Sprintf("not delivered within WithMaxRetryElapsed(%v)", c.cfg.maxRetryElapsed))
		return true
	}
	if c.spool != nil && (elapsed+d >= c.cfg.spoolAfter || c.isClosed()) {
		c.spill() // a process that exits during an outage keeps its events
	}
	t := c.cfg.clock.NewTimer(d)
	defer t.Stop()
	if c.cfg.onRetryWait != nil {
		c.cfg.onRetryWait(d)
	}
	for {
		select {
		case <-t.C():
			return true
		case <-c.stop:
			return false
		case <-c.wake:
			if c.spool != nil && c.isClosed() {
				c.spill()
			}
		}
	}
}

func (c *Client) spill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.spillLocked(); err != nil {
		c.logs.spoolError(err)
	}
}

// spillLocked writes every event that is only in memory to the spool: the
// sender's own first (they are older), then the queue. From then on new
// events go to the spool, and Flush counts spooled events as done.
func (c *Client) spillLocked() error {
	var mem []item
	for _, it := range c.inflight {
		if it.file == nil {
			mem = append(mem, it)
		}
	}
	if len(mem) > 0 {
		f, err := c.spool.appendHeld(mem)
		if err != nil {
			return err
		}
		f.outstanding = len(mem)
		for i := range c.inflight {
			if c.inflight[i].file == nil {
				c.inflight[i].file = f
			}
		}
		c.n.spooled.Add(uint64(len(mem)))
	}
	queued := c.q.len()
	if queued > 0 {
		if err := c.toSpoolLocked(c.q.buf[c.q.head:]); err != nil {
			return err
		}
		c.q.take(nil, queued)
	}
	if !c.spilled && len(mem)+queued > 0 {
		c.cfg.logger.Warn("apollo agent: the server has not taken events for a while; unsent events are in the spool directory",
			"dir", c.spool.dir)
	}
	c.spooling, c.spilled = true, true
	c.releaseLocked()
	return nil
}

// shutdown runs when the sender stops: what is still only in memory goes
// to the spool, or is dropped and counted.
func (c *Client) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.q.len()
	for _, it := range c.inflight {
		if it.file == nil {
			n++
		}
	}
	if n > 0 && c.spool != nil {
		if c.stopErr = c.spillLocked(); c.stopErr == nil {
			n = 0
		}
	}
	if n > 0 {
		c.lost = n
		c.n.dropped.Add(uint64(n))
		c.logs.dropped(n, "client closed before they were delivered")
	}
	if c.spool != nil {
		c.spool.close()
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
