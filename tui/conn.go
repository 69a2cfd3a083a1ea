package tui

import (
	"context"
	"math"
	"strconv"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/cenkalti/backoff/v5"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

type connState int

const (
	stateConnecting connState = iota // dialing, or waiting for hello
	stateLive                        // hello received
	stateWaiting                     // waiting to reconnect
	stateRefused                     // the token was refused: retry on r only
)

// connection is the dashboard's side of the stream.
type connection struct {
	gen    int // which attempt; messages of older attempts are dropped
	state  connState
	ws     *wsConn
	cursor string // the last cursor received of the filter asked for last, for resuming
	// unanswered counts the subscribes sent on this connection that the
	// server has not answered yet: by a snapshot (not a resync), the
	// tasks of a resume, or an error that refuses it. It answers each in
	// order, after every message of the filter it replaces: until the
	// last answer comes, a tasks, snapshot or heartbeat message is of a
	// filter left, and neither its tasks nor its cursor are the
	// dashboard's. A cursor taken from one had the next connection resume
	// the new filter from a position it never had, and the runs that
	// matched it before that position never came.
	unanswered int
	// refused says that the server refused the last subscribe and kept
	// the filter before it, whose tasks and cursors are not the
	// dashboard's either.
	refused   bool
	idle      time.Duration
	retryAt   time.Time
	reason    string // why the last connection ended
	principal apiclient.Principal
	backoff   *backoff.ExponentialBackOff
	acks      map[string]apollo.Alert // acknowledgements sent, awaiting ack_result
}

// helloWait bounds the wait for the server's hello on a new connection:
// three heartbeat intervals of the server's default (15 s), the silence
// that ends a live connection too.
const helloWait = 3 * 15 * time.Second

// Messages of the connection; gen says which attempt they belong to.
type (
	dialedMsg struct {
		gen int
		ws  *wsConn
		err error
	}
	frameMsg struct {
		gen int
		f   apiclient.Frame
	}
	lostMsg struct {
		gen int
		err error
	}
	retryMsg struct{ gen int }
)

// label is the connection state in words.
func (c *connection) label(now time.Time) string {
	switch c.state {
	case stateLive:
		return "live"
	case stateWaiting:
		secs := int(math.Ceil(c.retryAt.Sub(now).Seconds()))
		return "reconnecting in " + strconv.Itoa(max(secs, 0)) + "s"
	case stateRefused:
		return "refused"
	}
	return "connecting"
}

// indicator is the header's connection state: a mark, the words, and why
// the last connection ended while there is no live one.
func (c *connection) indicator(st *components.Styles, now time.Time) string {
	mark := map[connState]string{stateLive: "●", stateConnecting: "◌", stateWaiting: "○", stateRefused: "✕"}[c.state]
	name := map[connState]string{stateLive: "live", stateConnecting: "connecting", stateWaiting: "reconnecting", stateRefused: "refused"}[c.state]
	s := st.State(name).Render(mark + " " + c.label(now))
	if c.state != stateLive && c.reason != "" {
		s += st.Muted.Render(" (" + components.EscapeLine(c.reason, 200) + ")")
	}
	return s
}

// dial opens the stream for the current attempt.
func (m *Model) dial() tea.Cmd {
	gen, url, token, hc := m.conn.gen, m.opts.streamURL(), m.opts.Token, m.opts.HTTPClient
	return m.run.cmd(func(ctx context.Context) tea.Msg {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ws, err := dialStream(dctx, url, token, hc)
		if err == nil && !m.run.own(ws) {
			_ = ws.Close()
			return nil
		}
		return dialedMsg{gen: gen, ws: ws, err: err}
	})
}

// read waits for the next message of the current connection.
func (m *Model) read() tea.Cmd {
	gen, ws, clock, idle := m.conn.gen, m.conn.ws, m.opts.Clock, m.conn.idle
	return m.run.cmd(func(ctx context.Context) tea.Msg {
		data, err := ws.read(ctx, clock, idle)
		if err == nil {
			var f apiclient.Frame
			if f, err = apiclient.DecodeFrame(data); err == nil {
				return frameMsg{gen: gen, f: f}
			}
		}
		m.run.release(ws)
		return lostMsg{gen: gen, err: err}
	})
}

// send writes one message on the current connection, after the ones
// sent before it: Bubble Tea runs each command in a goroutine of its own,
// and two subscribes written in the other order (a tab changed just after
// the hello, a filter typed fast) left the server with the older filter.
// A failed write is not reported: the read that is always pending fails
// too and reconnects.
func (m *Model) send(data []byte) tea.Cmd {
	ws := m.conn.ws
	if ws == nil {
		return nil
	}
	prev, done := ws.last, make(chan struct{})
	ws.last = done
	return m.run.cmd(func(ctx context.Context) tea.Msg {
		defer close(done)
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return nil
			}
		}
		_ = ws.write(ctx, data)
		return nil
	})
}

// wait schedules the next look at the reconnect deadline: at it, or in a
// second to count down in the header.
func (m *Model) wait() tea.Cmd {
	gen, clock := m.conn.gen, m.opts.Clock
	d := min(m.conn.retryAt.Sub(clock.Now()), time.Second)
	return m.run.cmd(func(ctx context.Context) tea.Msg {
		t := clock.NewTimer(max(d, 0))
		defer t.Stop()
		select {
		case <-t.C():
			return retryMsg{gen: gen}
		case <-ctx.Done():
			return nil
		}
	})
}

// redial starts a new attempt now, giving up on a connection still
// waiting for hello: its read ends when it is closed, and is dropped as of
// an older attempt.
func (m *Model) redial() tea.Cmd {
	m.conn.gen++
	m.conn.state = stateConnecting
	var drop tea.Cmd
	if ws := m.conn.ws; ws != nil {
		m.conn.ws = nil
		drop = m.run.cmd(func(context.Context) tea.Msg { m.run.release(ws); return nil })
	}
	return tea.Batch(drop, m.dial())
}

// updateConn handles the connection's messages; ok is false for others.
func (m *Model) updateConn(msg tea.Msg) (cmd tea.Cmd, ok bool) {
	c := &m.conn
	switch msg := msg.(type) {
	case dialedMsg:
		if msg.gen != c.gen {
			if ws := msg.ws; ws != nil { // an attempt given up on (r pressed meanwhile)
				return m.run.cmd(func(context.Context) tea.Msg { m.run.release(ws); return nil }), true
			}
			return nil, true
		}
		if msg.err != nil {
			return m.lost(msg.err), true
		}
		c.ws, c.unanswered, c.refused = msg.ws, 0, false
		c.idle = helloWait // until hello says how often the server speaks
		return m.read(), true
	case frameMsg:
		if msg.gen != c.gen {
			return nil, true
		}
		cmd := m.handleFrame(msg.f) // first: a hello sets how long the next read may wait
		return tea.Batch(m.read(), cmd), true
	case lostMsg:
		if msg.gen != c.gen {
			return nil, true
		}
		return m.lost(msg.err), true
	case retryMsg:
		if msg.gen != c.gen || c.state != stateWaiting {
			return nil, true
		}
		if !m.now().Before(c.retryAt) {
			return m.redial(), true
		}
		return m.wait(), true
	}
	return nil, false
}

// lost ends the current connection and schedules the next attempt, unless
// the server refused the token (trying again would not help).
func (m *Model) lost(err error) tea.Cmd {
	c := &m.conn
	c.ws = nil
	c.reason = closeReason(err)
	for id, a := range c.acks {
		// The server may have made the ack and lost only the answer: the
		// alerts read again after the reconnect say whether it did.
		m.say(true, "Acknowledging "+a.Rule+" ("+a.Group+"): the connection closed before the answer; it may have been acknowledged; the list after the reconnect shows whether it was")
		delete(c.acks, id)
	}
	switch apollo.ErrorCode(err) {
	case apollo.EUNAUTHORIZED, apollo.EFORBIDDEN:
		// The token is no longer who the last hello said (revoked, or its
		// role changed): the header stops naming it.
		c.state, c.principal = stateRefused, apiclient.Principal{}
		m.say(true, c.reason+"; press r to retry")
		return nil
	}
	c.state = stateWaiting
	c.retryAt = m.now().Add(c.backoff.NextBackOff())
	return m.wait()
}

// handleFrame applies one server message.
func (m *Model) handleFrame(f apiclient.Frame) tea.Cmd {
	c := &m.conn
	switch msg := f.Msg.(type) {
	case *apiclient.Hello:
		c.state, c.reason, c.principal = stateLive, "", msg.Principal
		c.backoff.Reset()
		c.idle = 0 // a server that sends no heartbeats may stay quiet
		if msg.HeartbeatMs > 0 {
			c.idle = 3 * time.Duration(msg.HeartbeatMs) * time.Millisecond
		}
		// The stream carries alert changes from now on; the alerts and
		// silences as they are come from the API, on every (re)connection:
		// one may have been acknowledged, resolved or forgotten, and a
		// silence added, while the stream was down.
		cmds := []tea.Cmd{m.subscribe(), m.fetchAlerts(), m.fetchSilences()}
		if c.gen > 1 {
			// Connected again (the server may have restarted): the figures
			// held are of before, perhaps of a process that is gone. They
			// are read at once rather than at the next refresh or system
			// message, and the rates start over.
			m.system.Forget()
			m.lastSystem = time.Time{}
			cmds = append(cmds, m.fetchHealth(), m.fetchJobs())
			if m.tab == tabSystem {
				cmds = append(cmds, m.fetchSystem())
			}
		}
		return tea.Batch(cmds...)
	case *apiclient.Snapshot:
		if !c.current(msg.Reason != "resync") { // a resync answers no subscribe
			break
		}
		c.cursor = msg.Cursor
		m.store.replace(msg.Tasks)
		m.paintTasks()
		if msg.Error != "" {
			m.say(true, "The server's task listing failed: "+msg.Error)
		}
	case *apiclient.Tasks:
		if !c.current(msg.Resumed) {
			break
		}
		c.cursor = msg.Cursor
		m.store.merge(msg.Tasks)
		m.paintTasks()
	case *apiclient.Heartbeat:
		if msg.Cursor != "" && c.current(false) {
			c.cursor = msg.Cursor
		}
		// Echo it: proof of life where proxies eat WebSocket pings.
		return m.send(heartbeatJSON)
	case *apiclient.AlertChange:
		m.alerts.Upsert(*msg.Alert)
	case *apiclient.AlertsLost:
		return m.fetchAlerts() // changes were lost in a storm: read them all again
	case *apiclient.System:
		if !m.subSystem {
			// Not asked for: on its way when the System tab was left, or
			// from a server that sends them to every client. Shown when
			// the tab opened, it passed for the figures of then
			// (TestSystemMessageNotAskedForIsNotTaken).
			break
		}
		m.system.SetStats(msg.Stats, m.now())
		m.lastSystem = m.now()
		if m.now().Sub(m.lastTaskPaint) >= time.Second {
			m.paintTasks() // the "updated" ages move on
		}
	case *apiclient.AckResult:
		a, ok := c.acks[msg.Alert]
		delete(c.acks, msg.Alert)
		if !ok {
			a = apollo.Alert{ID: msg.Alert, Rule: msg.Alert}
		}
		m.ackResult(a, msg.OK, msg.Error)
	case *apiclient.StreamError:
		if refusesSubscribe(msg) && c.unanswered > 0 {
			c.unanswered--
			c.refused = c.unanswered == 0
			text := "The server refused the task filter (" + msg.Field + ": " + msg.Message + ")"
			if c.refused {
				text += ": the tasks shown no longer follow the stream"
			}
			m.say(true, text)
			break
		}
		text := "The server did not take a message: " + msg.Message
		if msg.Hint != "" {
			text += " (" + msg.Hint + ")"
		}
		m.say(true, text)
	}
	return nil
}

// current reports whether a tasks, snapshot or heartbeat message is of
// the filter asked for last, and counts the answers to the subscribes
// (answer: the message is one).
func (c *connection) current(answer bool) bool {
	if answer && c.unanswered > 0 {
		c.unanswered--
	}
	return c.unanswered == 0 && !c.refused
}

func (m *Model) ackResult(a apollo.Alert, ok bool, errText string) {
	if ok {
		m.say(false, "Acknowledged "+a.Name()+".")
		return
	}
	m.say(true, "Could not acknowledge "+a.Rule+": "+errText)
}
