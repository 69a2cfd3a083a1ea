package stream

import (
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// group is every client of one tenant with the same filter and mode.
// Messages for a group are built once and queued to each member.
type group struct {
	key      string
	tenant   string
	f        streamFilter
	coalesce bool
	members  map[*client]struct{}

	// pending holds changes not yet sent: for an unthrottled group only
	// during one dispatched batch; for a coalescing group, the latest
	// change of each task since the last flush (index finds a task's slot).
	pending []*entry
	index   map[string]int
	// through is the cursor of the last flush of a coalescing group: every
	// matching change up to it has been queued to the members.
	through uint64
	// due is when a coalescing group with pending changes is flushed.
	// Groups fall due at different times, so flushes do not all land on
	// one tick and delay everyone else's messages.
	due    time.Time
	queued bool // in h.due
}

// throughCursor is the cursor a member may resume from: everything up to
// it that matches has been queued to it.
func (g *group) throughCursor(h *Hub) uint64 {
	if len(g.pending) == 0 {
		return h.cursor
	}
	return g.through
}

// add takes a matching change; h.mu is held. A coalescing group's first
// pending change sets when the group is due: one flush interval later.
func (g *group) add(h *Hub, e *entry, now time.Time) {
	if !g.coalesce {
		g.pending = append(g.pending, e)
		return
	}
	if i, ok := g.index[e.taskID]; ok {
		g.pending[i] = e
		return
	}
	if len(g.pending) >= h.opts.PendingLimit {
		// More distinct tasks changed within one flush interval than a
		// message should carry: a snapshot says it more briefly.
		g.resync(h)
		return
	}
	if !g.queued {
		g.due, g.queued = now.Add(h.opts.FlushInterval), true
		h.due = append(h.due, g)
		h.armFlush(now)
	}
	g.index[e.taskID] = len(g.pending)
	g.pending = append(g.pending, e)
}

// flush queues the pending changes as one tasks message with the cursor
// the caller formatted once for every group it flushes; h.mu is held.
func (g *group) flush(h *Hub, cursor string) {
	if len(g.pending) == 0 {
		g.through = h.cursor
		return
	}
	size := 64 + len(cursor)
	for _, e := range g.pending {
		size += len(e.data()) + 1
	}
	data, at := appendTasksHead(make([]byte, 0, size), apiclient.MsgTasks, cursor, "")
	for i, e := range g.pending {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, e.data()...)
	}
	data = append(data, "]}"...)
	clear(g.pending)
	g.pending = g.pending[:0]
	clear(g.index)
	g.through = h.cursor
	g.send(queued{data: data, tasksAt: at, cursor: cursor})
}

// resync drops what is pending and has every member start again from a
// snapshot, built once for the group when the first member's writer needs
// it; h.mu is held.
func (g *group) resync(h *Hub) {
	clear(g.pending)
	g.pending = g.pending[:0]
	clear(g.index)
	g.through = h.cursor
	if g.f.types&wantTasks == 0 {
		return
	}
	s := &snapshot{tenant: g.tenant, f: g.f, cursor: formatCursor(h.epoch, h.cursor), reason: "resync"}
	g.send(queued{snap: s})
}

func (g *group) send(q queued) {
	for c := range g.members {
		c.enqueue(q)
	}
}

// fanOut numbers a batch of changes, keeps them in the ring, hands each to
// the groups that want it (found through the tenant's taskIndex) and sends
// the unthrottled groups their share at once, with one cursor string for
// the batch.
func (h *Hub) fanOut(batch []*apollo.Change) {
	entries := make([]entry, len(batch))
	for i, c := range batch {
		entries[i] = entry{tenant: c.Task.Tenant, taskID: c.Task.TaskID, name: c.Task.Name, status: statusBits(c), task: &c.Task}
	}
	now := h.opts.Clock.Now()
	h.mu.Lock()
	touched := h.touched[:0]
	for i := range entries {
		e := &entries[i]
		h.cursor++
		e.cursor = h.cursor
		h.ring.add(e)
		x := h.tasks[e.tenant]
		if x == nil {
			continue
		}
		h.matched = x.match(h.matched[:0], e.name, e.taskID, e.status)
		for _, g := range h.matched {
			if !g.coalesce && len(g.pending) == 0 {
				touched = append(touched, g)
			}
			g.add(h, e, now)
		}
		clear(h.matched)
	}
	if len(touched) > 0 {
		cursor := formatCursor(h.epoch, h.cursor)
		for _, g := range touched {
			g.flush(h, cursor)
		}
	}
	clear(touched)
	h.touched = touched[:0]
	h.mu.Unlock()
	h.stats.changes.Add(uint64(len(batch)))
	h.progress.Broadcast()
}

// flush sends the coalescing groups that are due what changed since their
// last flush, and sets the timer for the next. h.due is in the order groups
// got their first pending change, which is the order they fall due.
func (h *Hub) flush(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushArmed = false
	n := 0
	cursor := formatCursor(h.epoch, h.cursor)
	for _, g := range h.due {
		if g.due.After(now) {
			break
		}
		g.queued = false
		g.flush(h, cursor)
		n++
	}
	clear(h.due[:n])
	h.due = h.due[n:]
	if len(h.due) == 0 {
		h.due = nil
	}
	h.armFlush(now)
}

// flushGrain is the least time between two flushes: groups that fall due
// within it go out together. Each group falls due at its own time, so a
// fine grain spreads the writes of a thousand dashboards over the interval
// instead of sending them in bursts that delay everyone's messages; the
// grain bounds the timer to a thousand wake-ups a second.
func (h *Hub) flushGrain() time.Duration {
	return max(h.opts.FlushInterval/100, time.Millisecond)
}

// armFlush sets the flush timer for the first due group unless it is set
// or nothing is due; h.mu is held.
func (h *Hub) armFlush(now time.Time) {
	if h.flushArmed || len(h.due) == 0 {
		return
	}
	h.flushT.Reset(max(h.due[0].due.Sub(now), h.flushGrain()))
	h.flushArmed = true
}

// heartbeat queues a heartbeat to every client, with the cursor it may
// resume from, so that a proxy between them sees traffic (many proxies do not
// count WebSocket pings, and drop a connection idle for a minute) and a
// quiet client's cursor stays fresh.
func (h *Hub) heartbeat(now time.Time) {
	ts := now.UnixMilli()
	bare := mustJSON(apiclient.Heartbeat{Type: apiclient.MsgHeartbeat, Ts: ts})
	h.mu.Lock()
	defer h.mu.Unlock()
	perGroup := make(map[*group][]byte, len(h.groups))
	for c := range h.clients {
		data := bare
		if g := c.g; g != nil {
			if data = perGroup[g]; data == nil {
				data = mustJSON(apiclient.Heartbeat{Type: apiclient.MsgHeartbeat, Ts: ts, Cursor: formatCursor(h.epoch, g.throughCursor(h))})
				perGroup[g] = data
			}
		}
		c.enqueue(queued{data: data})
	}
}

// membersWanting lists the clients whose filter selects the kind bit, by
// group; tenant "" with all=true means every tenant.
func (h *Hub) membersWanting(bit uint8, tenant string, all bool) []*group {
	var out []*group
	for _, g := range h.groups {
		if g.f.types&bit != 0 && (all || g.tenant == tenant) {
			out = append(out, g)
		}
	}
	return out
}

// sendSystem asks the system source once per tenant that some client
// wants it for, without holding the hub lock: a tenant sees only its own
// channels in it.
func (h *Hub) sendSystem() {
	h.mu.Lock()
	clients := map[string][]*client{}
	for _, g := range h.membersWanting(wantSystem, "", true) {
		for c := range g.members {
			clients[g.tenant] = append(clients[g.tenant], c)
		}
	}
	h.mu.Unlock()
	for tenant, cs := range clients {
		h.queueFigures(h.systemMsg(tenant), cs, wantSystem, "")
	}
}

// queueFigures queues a figures message, made without the hub lock for
// the clients that wanted it then, to those of them that still want it:
// kind, and for a metric message its prefix. A client that changed its
// filter meanwhile has been sent the new filter's answer, and the message
// queued after it was taken for the new filter's
// (TestMetricOfAPrefixLeftComesNotAfterTheAnswer,
// TestSystemLeftComesNotAfterTheSubscribe). Queued under the lock, it
// comes before that answer or not at all.
func (h *Hub) queueFigures(data []byte, clients []*client, kind uint8, prefix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range clients {
		if g := c.g; g != nil && g.f.types&kind != 0 && (kind != wantMetric || g.f.prefix == prefix) {
			c.enqueue(queued{data: data})
		}
	}
}

func (h *Hub) systemMsg(tenant string) []byte {
	return mustJSON(apiclient.System{Type: apiclient.MsgSystem, Stats: mustJSON(h.opts.System(tenant))})
}

// sendFigures queues to one client that has just subscribed the system
// figures and the metrics its filter asks for, as they are now. It asks
// the sources without the hub lock, in the client's reader: a slow source
// delays that client's next message, nobody else's.
func (h *Hub) sendFigures(c *client, f *streamFilter) {
	tenant := c.who.Tenant
	if f.types&wantSystem != 0 && h.opts.System != nil {
		c.enqueue(queued{data: h.systemMsg(tenant)})
	}
	if f.types&wantMetric != 0 && h.opts.Metrics != nil {
		if data, ok := h.metricMsg(tenant, f.prefix); ok {
			c.enqueue(queued{data: data})
		}
	}
}

func (h *Hub) sendAlert(a *apollo.Alert) {
	data := mustJSON(apiclient.AlertChange{Type: apiclient.MsgAlert, Alert: a})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.membersWanting(wantAlert, a.Tenant, false) {
		g.send(queued{data: data, alert: true})
	}
}

// alertsLostMsg tells a client that alert changes were lost.
var alertsLostMsg = mustJSON(apiclient.AlertsLost{Type: apiclient.MsgAlertsLost})

// sendAlertsLost tells every client that wants alerts to read them again.
func (h *Hub) sendAlertsLost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.membersWanting(wantAlert, "", true) {
		g.send(queued{data: alertsLostMsg, alert: true})
	}
}

// sendMetrics asks the metrics source once per tenant and prefix that some
// client wants, without holding the hub lock, then queues the answers to
// the clients that still want them.
func (h *Hub) sendMetrics() {
	type want struct{ tenant, prefix string }
	h.mu.Lock()
	wants := map[want][]*client{}
	for _, g := range h.membersWanting(wantMetric, "", true) {
		w := want{g.tenant, g.f.prefix}
		for c := range g.members {
			wants[w] = append(wants[w], c)
		}
	}
	h.mu.Unlock()
	for w, clients := range wants {
		data, ok := h.metricMsg(w.tenant, w.prefix)
		if !ok {
			continue
		}
		h.queueFigures(data, clients, wantMetric, w.prefix)
	}
}

// metricMsg is the metric message of tenant's jobs under prefix; false
// when the source failed (logged).
func (h *Hub) metricMsg(tenant, prefix string) ([]byte, bool) {
	v, err := h.opts.Metrics.StreamSummaries(tenant, prefix)
	if err != nil {
		if ok, held := h.warns.Allow("metrics", h.opts.Clock.Now()); ok {
			h.log.Warn("metrics for the stream", "tenant", tenant, "prefix", prefix, "err", err, "suppressed", held)
		}
		return nil, false
	}
	return mustJSON(apiclient.Metric{Type: apiclient.MsgMetric, Prefix: prefix, Summaries: mustJSON(v)}), true
}

// join adds a connected client; it reports false once the hub is stopping.
func (h *Hub) join(c *client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.clients[c] = struct{}{}
	c.enqueue(queued{data: mustJSON(apiclient.Hello{
		Type: apiclient.MsgHello, Protocol: streamProtocol, Cursor: formatCursor(h.epoch, h.cursor),
		ServerTime: h.opts.Clock.Now().UnixMilli(), HeartbeatMs: max(h.opts.HeartbeatInterval.Milliseconds(), 0),
		FlushMs:   h.opts.FlushInterval.Milliseconds(),
		Principal: apiclient.Principal{Name: c.who.Name, Role: c.who.Role, Tenant: c.who.Tenant},
	})})
	return true
}

// leave removes a client that has ended.
func (h *Hub) leave(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	h.leaveGroup(c)
}

func (h *Hub) leaveGroup(c *client) {
	g := c.g
	if g == nil {
		return
	}
	c.g = nil
	delete(g.members, c)
	if len(g.members) > 0 {
		return
	}
	delete(h.groups, g.key)
	if x := h.tasks[g.tenant]; x != nil && g.f.types&wantTasks != 0 && x.remove(g) {
		delete(h.tasks, g.tenant)
	}
}

// subscribe moves a client to the group of its new filter and queues what
// it needs first: the changes it missed since its cursor when the ring
// still has them, or else a snapshot; then the system figures and the
// metrics, if the filter asks for them. Those came only on their timers,
// so a client that had just (re)connected or changed its filter showed
// none, or a killed process's, for up to 5 or 10 s.
func (h *Hub) subscribe(c *client, r request) {
	h.mu.Lock()
	h.joinGroup(c, r)
	h.mu.Unlock()
	h.sendFigures(c, &r.filter)
	h.progress.Broadcast()
}

// joinGroup moves c to the group of r's filter and queues the answer to
// the subscribe, if the filter asks for tasks; h.mu is held.
func (h *Hub) joinGroup(c *client, r request) {
	h.leaveGroup(c)
	tenant := c.who.Tenant
	key := r.filter.key(tenant, r.coalesce)
	g := h.groups[key]
	if g == nil {
		g = &group{key: key, tenant: tenant, f: r.filter, coalesce: r.coalesce, members: map[*client]struct{}{},
			index: map[string]int{}, through: h.cursor}
		h.groups[key] = g
		if r.filter.types&wantTasks != 0 {
			x := h.tasks[tenant]
			if x == nil {
				x = newTaskIndex()
				h.tasks[tenant] = x
			}
			x.add(g)
		}
	}
	g.members[c] = struct{}{}
	c.g = g
	cursor := formatCursor(h.epoch, h.cursor)
	if r.filter.types&wantTasks == 0 {
		return
	}
	if r.cursor != "" {
		if n, ok := parseCursor(h.epoch, r.cursor); ok {
			if missed, ok := h.ring.since(n, tenant, &r.filter); ok {
				tasks := make([][]byte, len(missed))
				for i, e := range missed {
					tasks[i] = e.data()
				}
				h.stats.resumes.Add(1)
				c.enqueue(queued{data: appendTasksMsg(nil, apiclient.MsgTasks, cursor, `"resumed":true`, tasks)}) // not merged: it says resumed
				return
			}
		}
	}
	reason := "subscribe"
	if r.cursor != "" {
		reason = "cursor too old"
	}
	c.enqueue(queued{snap: &snapshot{tenant: tenant, f: r.filter, cursor: cursor, reason: reason}})
}
