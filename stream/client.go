package stream

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// streamProtocol is the WebSocket subprotocol of the stream; a client
// offers it, with its token as "bearer.<token>" (see BearerToken).
const streamProtocol = apiclient.StreamProtocol

// queued is one outbound message: ready bytes (often shared by a group),
// or a snapshot that the writer builds when it gets to it, so that the
// listing happens after every change queued before it.
type queued struct {
	data []byte
	snap *snapshot
	// tasksAt is set on plain tasks messages, which a writer that is behind
	// may merge: data[tasksAt:len(data)-2] is the content of their tasks
	// array, and cursor their cursor.
	tasksAt int
	cursor  string
	// alert is set on alert and alerts_lost messages: past the queue's
	// limits they are replaced by one alerts_lost (loseAlerts) instead
	// of the client being closed.
	alert bool
}

// client is one WebSocket connection. Its reader runs in the HTTP handler's
// goroutine; its writer drains the queue. The hub never writes to the
// connection itself: it queues, and a full queue closes the client.
type client struct {
	h    *Hub
	conn *websocket.Conn
	who  Caller
	g    *group // guarded by h.mu

	mu     sync.Mutex
	q      []queued
	qBytes int
	killed bool
	reason string
	wake   chan struct{} // one token: the queue is not empty, the client was killed or its context ended
	// heard is set by the reader on every client message: like a pong, it
	// proves the client is there (behind proxies that drop ping frames).
	heard atomic.Bool
	// writing is set while the writer is in a message write, which the
	// end of the connection's context interrupts.
	writing atomic.Bool
	dead    chan struct{} // closed by kill
}

// mergeBufs holds the buffers writers merge tasks messages into, so that
// clients that keep falling a little behind do not allocate a message
// each time they catch up. They are shared, not one per client: only
// writers merging at the same moment hold one.
var mergeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxMergeBuffer is the largest merge buffer put back in mergeBufs; a
// larger one, from catching up after a long stall, is left to the
// collector.
const maxMergeBuffer = 256 << 10

// enqueue adds a message; a client over its queue limits is closed as too
// slow, so that nobody else waits for it. Alert messages past the limits
// are replaced by one alerts_lost instead (loseAlerts).
func (c *client) enqueue(m queued) {
	c.mu.Lock()
	if c.killed {
		c.mu.Unlock()
		return
	}
	if c.full(len(m.data)) {
		if m.alert && c.loseAlerts() {
			c.mu.Unlock()
			c.h.stats.alertsCut.Add(1)
			c.poke()
			return
		}
		c.mu.Unlock()
		if c.kill(reasonTooSlow) {
			c.h.stats.closedSlow.Add(1)
		}
		return
	}
	c.q = append(c.q, m)
	c.qBytes += len(m.data)
	c.mu.Unlock()
	c.poke()
}

// full reports whether a message of n bytes would take the queue past
// its limits. A message bigger than the byte limit still goes through an
// empty queue: the limit is on lag, not on the size of one batch. Called
// with c.mu held.
func (c *client) full(n int) bool {
	return len(c.q) >= c.h.opts.SendQueue || len(c.q) > 0 && c.qBytes+n > c.h.opts.SendQueueBytes
}

// loseAlerts replaces the alert messages queued, and the one that did not
// fit, by one alerts_lost at the end of the queue: the client reads the
// alerts again when it gets there, after every change it was not sent.
// An alert storm (a BY: name rule over hundreds of failing jobs fires an
// alert each at once) fills any client's queue faster than its writer
// empties it; closing the client as too slow cut every dashboard's
// stream in a storm (TestAlertStormClosesNoClient). It reports false
// when the queue holds too much else for even that. Called with c.mu
// held.
func (c *client) loseAlerts() bool {
	kept, n := c.q[:0], 0
	for _, m := range c.q {
		if !m.alert {
			kept = append(kept, m)
			n += len(m.data)
		}
	}
	clear(c.q[len(kept):])
	c.q, c.qBytes = kept, n
	if c.full(len(alertsLostMsg)) {
		return false
	}
	c.q = append(c.q, queued{data: alertsLostMsg, alert: true})
	c.qBytes += len(alertsLostMsg)
	return true
}

// kill asks the writer to close the connection with reason ("" when the
// reader has already ended) and drops the queue. It never blocks. It
// reports whether this call killed the client: a client is closed once,
// and counted once, however many of its goroutines find it at fault.
func (c *client) kill(reason string) bool {
	c.mu.Lock()
	if c.killed {
		c.mu.Unlock()
		return false
	}
	c.killed, c.reason = true, reason
	c.q, c.qBytes = nil, 0
	close(c.dead)
	c.mu.Unlock()
	c.poke()
	if c.h.opts.testKilled != nil && reason != "" {
		c.h.opts.testKilled(reason)
	}
	return true
}

// popAll takes every queued message. The slice the writer has finished
// with becomes the next queue, so a busy client does not allocate one per
// message.
func (c *client) popAll(done []queued) []queued {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		return nil
	}
	q := c.q
	clear(done)
	c.q, c.qBytes = done[:0], 0
	return q
}

// readLoop handles the client's messages until the connection ends.
func (c *client) readLoop(ctx context.Context) {
	for {
		typ, data, err := c.conn.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.sendError(&apollo.Error{Code: apollo.EINVALID, Message: "binary messages are not part of the protocol", Hint: "send JSON text messages"})
			continue
		}
		c.heard.Store(true)
		req, err := decodeRequest(data)
		if err != nil {
			c.sendError(err)
			continue
		}
		switch req.typ {
		case apiclient.MsgSubscribe:
			c.h.subscribe(c, req)
		case apiclient.MsgAck:
			c.ack(ctx, req.alert)
		}
	}
}

func (c *client) sendError(err error) {
	m := apiclient.StreamError{Type: apiclient.MsgError, Message: apollo.ErrorMessage(err), Code: apollo.ErrorCode(err)}
	var e *apollo.Error
	if errors.As(err, &e) {
		m.Message, m.Field, m.Hint = e.Message, e.Field, e.Hint
	}
	c.enqueue(queued{data: mustJSON(m)})
}

// ack acknowledges an alert for the client and answers ack_result.
func (c *client) ack(ctx context.Context, id string) {
	res := apiclient.AckResult{Type: apiclient.MsgAckResult, Alert: id}
	switch {
	case c.h.opts.Acker == nil:
		res.Error = "acknowledging alerts is not available on this server"
		if h := c.h.opts.NoAckHint; h != "" {
			res.Error += " (" + h + ")"
		}
	case !c.who.MayAck:
		res.Error = "acknowledging needs the operator role; the token has " + c.who.Role
	default:
		actx, cancel := context.WithTimeout(ctx, c.h.opts.AckTimeout)
		err := c.h.opts.Acker.Ack(actx, c.who, id)
		cancel()
		if err != nil {
			if apollo.ErrorCode(err) == apollo.EINTERNAL {
				c.h.log.Error("acknowledging an alert", "alert", id, "by", c.who.Name, "err", err)
			}
			res.Error = apollo.ErrorMessage(err)
		} else {
			res.OK = true
		}
	}
	c.enqueue(queued{data: mustJSON(res)})
}

// writeLoop writes queued messages, and closes the connection when the
// client is killed. It waits on wake alone: kill and the end of ctx send
// on it too. A select over the queue, the pings and both ends cost a lock
// of every channel at each wake-up, about 8% of a server's CPU with 100
// clients at 10 000 events/s; the pings have their own goroutine
// (pingLoop).
func (c *client) writeLoop(ctx context.Context) {
	h := c.h
	// One timer for every write instead of a context per write: a context
	// with a deadline, and the cancel hook the WebSocket library hangs on
	// it, cost several allocations and timer operations per message, and
	// the garbage set the pace of collections. Writes are given a context
	// that never ends; the timer closes a connection whose write is stuck.
	stuck := time.AfterFunc(time.Hour, func() { c.conn.CloseNow() })
	stuck.Stop()
	defer stuck.Stop()
	// The end of ctx (the reader has ended) interrupts a write in progress,
	// and wakes the writer when it waits.
	defer context.AfterFunc(ctx, func() {
		if c.writing.Load() {
			c.conn.CloseNow()
		}
		c.poke()
	})()
	var done []queued
	for {
		<-c.wake
		select {
		case <-c.dead:
			c.close()
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		if h.opts.testDrain != nil {
			h.opts.testDrain()
		}
		var err error
		if done, err = c.drain(ctx, done, stuck); err != nil {
			c.kill("")
			return
		}
	}
}

// poke wakes the writer, if it is not already due to wake.
func (c *client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pingLoop pings the client at every tick of ping and kills it when
// MissedPongs intervals in a row went by without a pong or a message from
// it, until the client is killed or ctx ends. It stops ping.
func (c *client) pingLoop(ctx context.Context, ping apollo.Ticker) {
	h := c.h
	defer ping.Stop()
	pctx, pcancel := context.WithCancel(ctx)
	var pings sync.WaitGroup
	defer func() { pcancel(); pings.Wait() }()
	pongs := make(chan error, 1)
	pinging, missed := false, 0
	for {
		select {
		case <-ping.C():
			if c.heard.Swap(false) {
				missed = 0
			}
			if pinging {
				// The loop may see one more tick before it sees the client
				// killed: the count is the kill's, not the tick's.
				if missed++; missed >= h.opts.MissedPongs && c.kill(reasonNoPong) {
					h.stats.closedNoPong.Add(1)
				}
				continue
			}
			pinging = true
			pings.Add(1)
			go func() {
				defer pings.Done()
				pongs <- c.conn.Ping(pctx)
			}()
		case err := <-pongs:
			pinging = false
			if err == nil {
				missed = 0
			}
			if h.opts.testPonged != nil {
				h.opts.testPonged()
			}
		case <-c.dead:
			return
		case <-ctx.Done():
			return
		}
	}
}

// close ends the connection for the reason the client was killed.
func (c *client) close() {
	c.mu.Lock()
	reason := c.reason
	c.mu.Unlock()
	switch reason {
	case "": // the reader ended: nothing to say
	case reasonNoPong: // the peer does not answer: no handshake to wait for
		c.conn.CloseNow()
	case reasonShutdown:
		c.h.stats.closedShutdown.Add(1)
		c.conn.Close(websocket.StatusGoingAway, reason)
	default:
		c.conn.Close(websocket.StatusTryAgainLater, reason)
	}
}

// drain writes what is queued and returns the batch it took, for popAll
// to reuse. Consecutive tasks messages go out as one, so a client that
// fell behind catches up in fewer, larger writes.
func (c *client) drain(ctx context.Context, done []queued, stuck *time.Timer) ([]queued, error) {
	q := c.popAll(done)
	for i := 0; i < len(q); i++ {
		m := q[i]
		data := m.data
		var buf *[]byte // from mergeBufs
		switch {
		case m.snap != nil:
			data = m.snap.build(c.h)
		case m.tasksAt > 0 && i+1 < len(q) && q[i+1].tasksAt > 0:
			j := i + 1
			for j < len(q) && q[j].tasksAt > 0 {
				j++
			}
			buf = mergeBufs.Get().(*[]byte)
			*buf = mergeTasks((*buf)[:0], q[i:j])
			data = *buf
			i = j - 1
		}
		err := c.write(ctx, data, stuck)
		if buf != nil && cap(*buf) <= maxMergeBuffer {
			mergeBufs.Put(buf)
		}
		if err != nil {
			return q, err
		}
		select {
		case <-c.dead: // killed meanwhile: stop writing
			return q, nil
		default:
		}
	}
	return q, nil
}

// mergeTasks appends to dst one tasks message made of several, with the
// last one's cursor.
func mergeTasks(dst []byte, ms []queued) []byte {
	last := ms[len(ms)-1]
	size := 64 + len(last.cursor)
	for _, m := range ms {
		size += len(m.data) - m.tasksAt
	}
	data, at := appendTasksHead(slices.Grow(dst, size), apiclient.MsgTasks, last.cursor, "")
	for _, m := range ms {
		tasks := m.data[m.tasksAt : len(m.data)-2]
		if len(tasks) == 0 {
			continue
		}
		if len(data) > at {
			data = append(data, ',')
		}
		data = append(data, tasks...)
	}
	return append(data, "]}"...)
}

// write writes one message. WriteTimeout bounds it through stuck, and the
// end of ctx through writing: ctx is checked after writing is set, so an
// end that the AfterFunc missed is seen here.
func (c *client) write(ctx context.Context, data []byte, stuck *time.Timer) error {
	c.writing.Store(true)
	defer c.writing.Store(false)
	if err := ctx.Err(); err != nil {
		return err
	}
	stuck.Reset(c.h.opts.WriteTimeout)
	err := c.conn.Write(context.Background(), websocket.MessageText, data)
	stuck.Stop()
	if err != nil {
		return err
	}
	c.h.stats.messages.Add(1)
	return nil
}

// snapshot is the latest tasks matching a filter, listed when a writer
// first needs it and shared by every client queued the same snapshot.
type snapshot struct {
	tenant string
	f      streamFilter
	cursor string
	reason string

	once sync.Once
	data []byte
}

func (s *snapshot) build(h *Hub) []byte {
	s.once.Do(func() {
		h.stats.snapshots.Add(1)
		tasks, err := h.latestTasks(s.tenant, &s.f)
		extra := `"reason":` + strconv.Quote(s.reason)
		if err != nil {
			h.log.Error("listing tasks for a stream snapshot", "err", err)
			extra += `,"error":"the task listing failed; the server log has the details"`
		}
		enc := make([][]byte, len(tasks))
		size := 128
		for i := range tasks {
			enc[i], _ = json.Marshal(&tasks[i])
			size += len(enc[i]) + 1
		}
		s.data = appendTasksMsg(make([]byte, 0, size), apiclient.MsgSnapshot, s.cursor, extra, enc)
	})
	return s.data
}

// latestTasks lists the newest SnapshotSize tasks that match f (in the
// listing's order: first reported newest first): one listing per selected
// status, merged.
func (h *Hub) latestTasks(tenant string, f *streamFilter) ([]apollo.Task, error) {
	limit := h.opts.SnapshotSize
	statuses := f.statusList()
	if statuses == nil {
		statuses = []apollo.Status{apollo.StatusNone}
	}
	var all []apollo.Task
	var errs []error
	for _, st := range statuses {
		ts, _, err := h.opts.Bus.List(apollo.TaskFilter{Tenant: tenant, Prefix: f.prefix, Status: st, Limit: limit})
		errs = append(errs, err)
		all = append(all, ts...)
	}
	slices.SortFunc(all, func(a, b apollo.Task) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.TaskID, a.TaskID))
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all, errors.Join(errs...)
}

// writeBuffer is the size of each connection's write buffer. The WebSocket
// library writes a message's header and payload into the buffer it is
// given at the upgrade and flushes it at the end of the message; with the
// 4 KiB buffer that net/http hands over, a longer message took two or
// three write system calls, each a TCP segment and a wake-up of the
// reader, instead of one. At 100 clients and 10 000 events/s the server
// made 29% fewer writes with this buffer (docs/stream.md).
const writeBuffer = 16 << 10

// largerWriteBuffer is the stream's response writer for the upgrade: its
// Hijack gives the connection a writeBuffer-sized write buffer.
type largerWriteBuffer struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (w largerWriteBuffer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := w.rc.Hijack()
	if err != nil {
		return conn, brw, err
	}
	if err := brw.Writer.Flush(); err != nil { // empty after a hijack; never lose a byte
		return conn, brw, err
	}
	return conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(conn, writeBuffer)), nil
}
