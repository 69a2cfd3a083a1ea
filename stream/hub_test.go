package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

var (
	pending = apollo.StatusPending
	running = apollo.StatusRunning
	success = apollo.StatusSuccess
	failed  = apollo.StatusFailed
)

func taskIDs(ts []apollo.Task) string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.TaskID+"="+t.Status.String())
	}
	return strings.Join(ids, ",")
}

func TestStreamSubscribeFilters(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	e.publish(ev("a", "etl-1", "etl", 1, running), ev("a", "web-1", "web", 1, running))
	e.waitCursor(2)
	tests := []struct {
		name     string
		filter   sub
		snapshot string // tasks in the first snapshot, newest first
		live     string // tasks in the live updates, sorted
	}{
		{"everything", nil, "web-1=running,etl-1=running", "etl-2=pending,web-1=failed"},
		{"prefix", sub{"prefix": "etl"}, "etl-1=running", "etl-2=pending"},
		{"prefix matches the task ID too", sub{"prefix": "web-"}, "web-1=running", "web-1=failed"},
		{"status", sub{"status": []string{"failed"}}, "", "web-1=failed"},
		{"two statuses", sub{"status": []string{"pending", "failed"}}, "", "etl-2=pending,web-1=failed"},
		{"no tasks type", sub{"types": []string{"alert"}}, "-", ""},
	}
	clients := make([]*wsClient, len(tests))
	for i, tt := range tests {
		c := e.dial("view-a")
		clients[i] = c
		s := sub{"type": "subscribe", "coalesce": false}
		if tt.filter != nil {
			s["filter"] = map[string]any(tt.filter)
		}
		if tt.snapshot == "-" {
			c.subscribeQuiet(s)
			continue
		}
		m := c.subscribe(s)
		// Tasks first reported at the same time are listed by task ID,
		// descending (docs/protocol.md, "Reading state").
		if m.Type != apiclient.MsgSnapshot || taskIDs(m.Tasks) != tt.snapshot {
			t.Errorf("%s: snapshot %s %q, want %q", tt.name, m.Type, taskIDs(m.Tasks), tt.snapshot)
		}
	}
	e.publish(ev("a", "etl-2", "etl", 1, pending))
	e.publish(ev("a", "web-1", "web", 2, failed))
	for i, tt := range tests {
		c := clients[i]
		var got []apollo.Task
		for n := strings.Count(tt.live, "="); len(got) < n; {
			got = append(got, c.readType(apiclient.MsgTasks).Tasks...)
		}
		slices.SortFunc(got, func(a, b apollo.Task) int { return strings.Compare(a.TaskID, b.TaskID) })
		if taskIDs(got) != tt.live {
			t.Errorf("%s: updates %q, want %q", tt.name, taskIDs(got), tt.live)
		}
		// Nothing else was queued: the next message answers a round trip
		// (an ack, which has no Acker here).
		c.send(sub{"type": "ack", "alert": "x"})
		if m := c.readType(apiclient.MsgAckResult); m.OK || m.Error == "" {
			t.Errorf("%s: after the updates %+v", tt.name, m)
		}
	}
}

func TestStreamBadMessages(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	c := e.dial("view-a")
	for _, tt := range []struct{ msg, field string }{
		{`{"type":"subscribe","filter":{"status":["done"]}}`, "filter.status"},
		{`{"type":"subscribe","filter":{"types":["everything"]}}`, "filter.types"},
		{`{"type":"dance"}`, "type"},
		{`{"type":"ack"}`, "alert"},
		{`[1,2]`, ""},
	} {
		c.conn.Write(context.Background(), websocket.MessageText, []byte(tt.msg))
		m := c.readType(apiclient.MsgError)
		if m.Field != tt.field || m.Message == "" {
			t.Errorf("%s: error %+v, want field %q", tt.msg, m, tt.field)
		}
	}
}

func TestStreamTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	e.publish(ev("a", "same-id", "job", 1, running), ev("b", "same-id", "job", 1, pending), ev("b", "only-b", "job", 1, pending))
	e.waitCursor(3)
	ca, cb := e.dial("view-a"), e.dial("view-b")
	if m := ca.subscribe(sub{"type": "subscribe", "coalesce": false}); taskIDs(m.Tasks) != "same-id=running" {
		t.Errorf("tenant a snapshot %q", taskIDs(m.Tasks))
	}
	if m := cb.subscribe(sub{"type": "subscribe", "coalesce": false}); taskIDs(m.Tasks) != "same-id=pending,only-b=pending" {
		t.Errorf("tenant b snapshot %q", taskIDs(m.Tasks))
	}
	e.publish(ev("b", "same-id", "job", 2, running), ev("a", "same-id", "job", 2, success))
	for _, x := range []struct {
		c      *wsClient
		tenant string
		want   string
	}{{ca, "a", "same-id=success"}, {cb, "b", "same-id=running"}} {
		m := x.c.readType(apiclient.MsgTasks)
		if taskIDs(m.Tasks) != x.want || m.Tasks[0].Tenant != x.tenant {
			t.Errorf("tenant %s got %+v", x.tenant, m.Tasks)
		}
	}
	// Neither sees the other's change: the next message each gets is the
	// answer to a round trip, not a task.
	for _, c := range []*wsClient{ca, cb} {
		c.send(sub{"type": "ack", "alert": "x"})
		if m := c.read(); m.Type != apiclient.MsgAckResult {
			t.Errorf("leaked %s: %+v", m.Type, m.Tasks)
		}
	}
}

// TestStreamCoalescing sends 10 000 changes over one (fake) second to a
// coalescing client: it gets one message per flush, ten in all, and the
// final state of every task.
func TestStreamCoalescing(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
	e := newStreamEnv(t, func(o *Options) { o.Clock = clock; o.HeartbeatInterval = -1 })
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe"})
	const tasks, rounds = 500, 10
	seq := map[string]int64{}
	want := map[string]apollo.Status{}
	got := map[string]apollo.Task{}
	sent := 0
	for r := range rounds {
		var evs []apollo.Event
		for len(evs) < 1000 {
			id := fmt.Sprintf("t%03d", (r*1000+len(evs))%tasks)
			seq[id]++
			var st apollo.Status
			switch {
			case seq[id] == 1:
				st = pending
			case seq[id] == 2:
				st = running
			default:
				// Keep the task moving: running -> blocked -> pending -> running.
				st = []apollo.Status{apollo.StatusManualBlocked, pending, running}[(seq[id]-3)%3]
			}
			want[id] = st
			evs = append(evs, ev("a", id, "job", seq[id], st))
		}
		e.publish(evs...)
		sent += len(evs)
		e.waitCursor(uint64(sent))
		clock.Advance(100 * time.Millisecond)
		m := c.readType(apiclient.MsgTasks)
		if len(m.Tasks) > tasks {
			t.Fatalf("round %d: %d tasks in one message, more than the %d that exist", r, len(m.Tasks), tasks)
		}
		latest(got, m.Tasks)
	}
	for id, st := range want {
		if got[id].Status != st || got[id].Sequence != seq[id] {
			t.Errorf("%s: %v seq %d, want %v seq %d", id, got[id].Status, got[id].Sequence, st, seq[id])
		}
	}
	// Nothing more was sent: no flush without changes.
	clock.Advance(time.Second)
	c.send(sub{"type": "ack", "alert": "x"})
	if m := c.read(); m.Type != apiclient.MsgAckResult {
		t.Errorf("extra %s message after the last flush", m.Type)
	}
	if n := e.hub.Stats().Messages; n > rounds+3 { // hello, snapshot, ten flushes, ack_result
		t.Errorf("%d messages written for %d changes", n, sent)
	}
}

func TestStreamUnthrottledDeliversEveryChange(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe", "coalesce": false})
	var want []string
	for i := range 50 {
		id := fmt.Sprintf("u%02d", i)
		e.publish(ev("a", id, "job", 1, pending))
		e.publish(ev("a", id, "job", 2, running))
		e.publish(ev("a", id, "job", 3, success))
		want = append(want, id+"=pending", id+"=running", id+"=success")
	}
	var got []string
	for len(got) < len(want) {
		m := c.readType(apiclient.MsgTasks)
		for _, t := range m.Tasks {
			got = append(got, t.TaskID+"="+t.Status.String())
		}
	}
	// Different tasks may interleave; each task's changes come in order.
	perTask := map[string][]string{}
	for _, g := range got {
		id, _, _ := strings.Cut(g, "=")
		perTask[id] = append(perTask[id], g)
	}
	for i := range 50 {
		id := fmt.Sprintf("u%02d", i)
		if w := strings.Join(want[3*i:3*i+3], ","); strings.Join(perTask[id], ",") != w {
			t.Errorf("%s: got %v, want %s", id, perTask[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d updates, want %d", len(got), len(want))
	}
}

func TestStreamResumeFromCursor(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe", "coalesce": false, "filter": map[string]any{"prefix": "r"}})
	e.publish(ev("a", "r1", "r", 1, running))
	m := c.readType(apiclient.MsgTasks)
	cursor := m.Cursor
	c.conn.Close(websocket.StatusNormalClosure, "")

	// Missed while away: r1 twice (only the last counts), r2, and tasks of
	// another prefix and another tenant that the filter excludes.
	e.publish(ev("a", "r1", "r", 2, failed), ev("a", "r2", "r", 1, pending), ev("a", "x1", "x", 1, pending), ev("b", "r3", "r", 1, pending))
	e.publish(ev("a", "r2", "r", 2, running))
	e.waitCursor(6)
	c = e.dial("view-a")
	m = c.subscribe(sub{"type": "subscribe", "coalesce": false, "cursor": cursor, "filter": map[string]any{"prefix": "r"}})
	slices.SortFunc(m.Tasks, func(a, b apollo.Task) int { return strings.Compare(a.TaskID, b.TaskID) })
	if m.Type != apiclient.MsgTasks || !m.Resumed || taskIDs(m.Tasks) != "r1=failed,r2=running" {
		t.Fatalf("resume: %s resumed=%v %q", m.Type, m.Resumed, taskIDs(m.Tasks))
	}
	if s := e.hub.Stats(); s.Resumes != 1 {
		t.Errorf("stats %+v", s)
	}
	// The cursor of the resume answer resumes to nothing.
	c2 := e.dial("view-a")
	if m2 := c2.subscribe(sub{"type": "subscribe", "cursor": m.Cursor, "filter": map[string]any{"prefix": "r"}}); !m2.Resumed || len(m2.Tasks) != 0 {
		t.Errorf("resume from the newest cursor: %+v", m2)
	}
}

func TestStreamOldCursorGetsSnapshot(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, func(o *Options) { o.RingSize = 8 })
	c := e.dial("view-a")
	first := c.subscribe(sub{"type": "subscribe"})
	for i := range 20 {
		e.publish(ev("a", fmt.Sprintf("o%02d", i), "job", 1, pending))
	}
	e.waitCursor(20)
	for _, tt := range []struct{ name, cursor string }{
		{"older than the ring", first.Cursor},
		{"another epoch", "feedfacefeed.3"},
		{"from the future", e.hub.epoch + ".999"},
		{"garbage", "nope"},
	} {
		m := e.dial("view-a").subscribe(sub{"type": "subscribe", "cursor": tt.cursor})
		if m.Type != apiclient.MsgSnapshot || m.Reason != "cursor too old" || len(m.Tasks) != 20 {
			t.Errorf("%s: %s %q with %d tasks", tt.name, m.Type, m.Reason, len(m.Tasks))
		}
	}
}

// TestStreamResyncAfterCutOff blocks the hub so the bus cuts it off; the
// hub subscribes again and every client gets a fresh snapshot.
func TestStreamResyncAfterCutOff(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var blocked sync.Mutex
	blocked.Lock() // held while the test wants the dispatcher stuck
	e := newStreamEnv(t, func(o *Options) {
		o.BusBuffer = 2
		o.testGate = func() {
			select {
			case <-gate:
				blocked.Lock()
				blocked.Unlock()
			default:
			}
		}
	})
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe", "coalesce": false})
	close(gate) // the dispatcher stops before its next batch
	e.publish(ev("a", "k1", "job", 1, pending))
	for i := range 10 {
		e.publish(ev("a", fmt.Sprintf("k%d", i+2), "job", 1, pending))
	}
	e.publish(ev("a", "k1", "job", 2, running))
	// Every change reaches the (cut-off) subscription before the
	// dispatcher moves on; otherwise the resubscription after the resync
	// could overflow again on the rest and count a second resync.
	if err := e.bus.WaitDrained(testwait.Context(t)); err != nil {
		t.Fatalf("bus still has %d changes queued: %v", e.bus.Stats().Queued, err)
	}
	blocked.Unlock()
	got := map[string]apollo.Task{}
	for {
		m := c.read()
		if m.Type == apiclient.MsgSnapshot {
			if m.Reason != "resync" {
				t.Fatalf("snapshot reason %q", m.Reason)
			}
			latest(got, m.Tasks)
			break
		}
		latest(got, m.Tasks)
	}
	if len(got) != 11 || got["k1"].Status != running {
		t.Errorf("after resync: %d tasks, k1 %v", len(got), got["k1"].Status)
	}
	if s := e.hub.Stats(); s.Resyncs != 1 {
		t.Errorf("resyncs %d", s.Resyncs)
	}
	// Cursors from before the gap no longer resume.
	e.publish(ev("a", "k1", "job", 3, success))
	m := c.readType(apiclient.MsgTasks)
	if taskIDs(m.Tasks) != "k1=success" {
		t.Errorf("after the resync: %q", taskIDs(m.Tasks))
	}
}

type fakeAcker struct {
	mu   sync.Mutex
	got  []string
	fail error
}

func (f *fakeAcker) Ack(_ context.Context, who Caller, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.got = append(f.got, who.Name+":"+id)
	return nil
}

func TestStreamAck(t *testing.T) {
	t.Parallel()
	acker := &fakeAcker{}
	e := newStreamEnv(t, func(o *Options) { o.Acker = acker })
	op, viewer := e.dial("op-a"), e.dial("view-a")
	op.send(sub{"type": "ack", "alert": "al-1"})
	if m := op.readType(apiclient.MsgAckResult); !m.OK || m.Alert == nil && m.Error != "" {
		t.Errorf("operator ack: %+v", m)
	}
	viewer.send(sub{"type": "ack", "alert": "al-2"})
	if m := viewer.readType(apiclient.MsgAckResult); m.OK || !strings.Contains(m.Error, "operator") {
		t.Errorf("viewer ack: %+v", m)
	}
	acker.mu.Lock()
	acker.fail = &apollo.Error{Code: apollo.ENOTFOUND, Message: "no alert al-3"}
	acker.mu.Unlock()
	op.send(sub{"type": "ack", "alert": "al-3"})
	if m := op.readType(apiclient.MsgAckResult); m.OK || m.Error != "no alert al-3" {
		t.Errorf("failed ack: %+v", m)
	}
	acker.mu.Lock()
	acker.fail = errors.New("disk on fire")
	acker.mu.Unlock()
	op.send(sub{"type": "ack", "alert": "al-4"})
	if m := op.readType(apiclient.MsgAckResult); m.OK || m.Error != "internal error" {
		t.Errorf("internal failure leaks: %+v", m)
	}
	if strings.Join(acker.got, ",") != "oscar:al-1" {
		t.Errorf("acker saw %v", acker.got)
	}
}

func TestStreamOrigin(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, func(o *Options) { o.AllowedOrigins = []string{"*.example.com"} })
	host := strings.TrimPrefix(e.srv.URL, "http://")
	for _, tt := range []struct {
		origin string
		ok     bool
	}{
		{"", true}, // not a browser
		{"http://" + host, true},
		{"https://dash.example.com", true},
		{"https://evil.example.org", false},
		{"http://example.com.evil.org", false},
	} {
		h := http.Header{}
		if tt.origin != "" {
			h.Set("Origin", tt.origin)
		}
		conn, resp, err := websocket.Dial(testwait.Context(t), e.url, &websocket.DialOptions{Subprotocols: subprotocols("view-a"), HTTPHeader: h})
		if (err == nil) != tt.ok {
			t.Errorf("origin %q: err %v, want ok=%v", tt.origin, err, tt.ok)
		}
		if err == nil {
			if conn.Subprotocol() != streamProtocol {
				t.Errorf("subprotocol %q", conn.Subprotocol())
			}
			conn.CloseNow()
		} else if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %q: response %v, want 403", tt.origin, resp)
		}
	}
	if s := e.hub.Stats(); s.Refused != 2 {
		t.Errorf("refused %d", s.Refused)
	}
}

// TestStreamHeartbeat moves a fake clock: a heartbeat arrives at each
// interval, stamped with the clock and carrying a resumable cursor.
func TestStreamHeartbeat(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	clock := apollo.NewFakeClock(start)
	e := newStreamEnv(t, func(o *Options) {
		o.Clock = clock
		o.HeartbeatInterval = 15 * time.Second
		o.PingInterval = time.Hour
	})
	c := e.dial("view-a")
	m := c.subscribe(sub{"type": "subscribe"})
	for i := 1; i <= 3; i++ {
		clock.Advance(15 * time.Second)
		hb := c.read()
		if hb.Type != apiclient.MsgHeartbeat || hb.Ts != start.Add(time.Duration(i)*15*time.Second).UnixMilli() || hb.Cursor != m.Cursor {
			t.Fatalf("heartbeat %d: %+v", i, hb)
		}
	}
}

// TestStreamNoPong closes a client that does not answer pings (it never
// reads), and keeps one that does. Pings fall due on a fake clock, each
// only after the answering client's pong to the last one was handled: a
// loaded machine that delays the pong cannot make it look mute.
func TestStreamNoPong(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
	closed := make(chan string, 4)
	ponged := make(chan struct{}, 1) // one pong per ping, read before the next
	e := newStreamEnv(t, func(o *Options) {
		o.Clock, o.HeartbeatInterval, o.PingInterval = clock, -1, time.Second
		o.testKilled = func(reason string) { closed <- reason }
		o.testPonged = func() {
			select {
			case ponged <- struct{}{}:
			default:
			}
		}
	})
	idle := clock.Waiters() // the hub's own timers
	good := e.dial("view-a")
	readErr := make(chan error, 1)
	go func() { // reads, and so answers pings, until the test ends
		for {
			if _, _, err := good.conn.Read(context.Background()); err != nil {
				readErr <- err
				return
			}
		}
	}()
	mute, _, err := websocket.Dial(testwait.Context(t), e.url, &websocket.DialOptions{Subprotocols: subprotocols("view-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer mute.CloseNow()
	if !clock.BlockUntil(idle+2, testwait.Timeout(t)) {
		t.Fatal("the two clients' ping tickers were never armed")
	}
	deadline := time.After(testwait.Timeout(t))
	for pings := 1; ; pings++ {
		clock.Advance(time.Second)
		select {
		case <-ponged:
		case err := <-readErr:
			t.Fatalf("the answering client was closed: %v", err)
		case <-deadline:
			t.Fatalf("ping %d: the mute client is still open, or the answering client's pong never came", pings)
		}
		select {
		case r := <-closed:
			if r != reasonNoPong {
				t.Fatalf("closed for %q", r)
			}
		default:
			continue
		}
		break
	}
	select {
	case err := <-readErr:
		t.Fatalf("the answering client was closed too: %v", err)
	default:
	}
	if s := e.hub.Stats(); s.ClosedNoPong != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestStreamStopClosesClients(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe"})
	done := make(chan struct{})
	go func() { e.hub.Stop(context.Background()); close(done) }()
	_, err := c.tryRead(testwait.Timeout(t))
	for err == nil {
		_, err = c.tryRead(testwait.Timeout(t))
	}
	if websocket.CloseStatus(err) != websocket.StatusGoingAway || !strings.Contains(err.Error(), reasonShutdown) {
		t.Errorf("close: %v", err)
	}
	<-done
	e.hub.Stop(context.Background()) // idempotent
	_, resp, err := websocket.Dial(testwait.Context(t), e.url, &websocket.DialOptions{Subprotocols: subprotocols("view-a")})
	if err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("dial after stop: %v %v", err, resp)
	}
}

type fakeMetrics struct{}

func (fakeMetrics) StreamSummaries(tenant, prefix string) (any, error) {
	return map[string]string{"tenant": tenant, "prefix": prefix}, nil
}

type chanAlerts chan apollo.Alert

func (c chanAlerts) SubscribeAlerts() (<-chan apollo.Alert, func()) { return c, func() {} }

// TestStreamMetricSystemAlert: the periodic messages come at their
// intervals (a fake clock), per tenant and prefix; alerts only to their
// tenant; and a client that wants only some types gets only those.
func TestStreamMetricSystemAlert(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
	alerts := make(chanAlerts, 4)
	e := newStreamEnv(t, func(o *Options) {
		o.Clock, o.HeartbeatInterval, o.PingInterval = clock, -1, time.Hour
		o.Metrics, o.Alerts = fakeMetrics{}, alerts
		o.System = func(tenant string) any { return map[string]any{"answer": 42, "tenant": tenant} }
	})
	a := e.dial("view-a")
	a.subscribe(sub{"type": "subscribe", "filter": map[string]any{"prefix": "etl"}})
	// The figures as they are at the subscribe (TestStreamFiguresOnSubscribe).
	if m, n := a.read(), a.read(); m.Type != apiclient.MsgSystem || n.Type != apiclient.MsgMetric {
		t.Fatalf("after the snapshot: %s, %s", m.Type, n.Type)
	}
	b := e.dial("view-b")
	// Nothing answers a subscription without tasks; the round trip after it
	// makes sure the hub has it before the alert b must receive.
	b.subscribeQuiet(sub{"type": "subscribe", "filter": map[string]any{"types": []string{"alert"}}})

	clock.Advance(5 * time.Second) // system
	if m := a.read(); m.Type != apiclient.MsgSystem || string(m.Stats) != `{"answer":42,"tenant":"a"}` {
		t.Fatalf("system: %+v", m)
	}
	clock.Advance(5 * time.Second) // system and metric, in either order
	var got []string
	for range 2 {
		m := a.read()
		got = append(got, m.Type)
		if m.Type == apiclient.MsgMetric && string(m.Summaries) != `{"prefix":"etl","tenant":"a"}` {
			t.Errorf("metric: %s", m.Summaries)
		}
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "metric,system" {
		t.Errorf("after 10 s: %v", got)
	}
	alerts <- apollo.Alert{ID: "x-a", Tenant: "a", Rule: "r", State: apollo.AlertFiring}
	alerts <- apollo.Alert{ID: "x-b", Tenant: "b", Rule: "r", State: apollo.AlertFiring}
	if m := a.read(); m.Type != apiclient.MsgAlert || !strings.Contains(string(m.Alert), `"id":"x-a"`) {
		t.Errorf("tenant a: %+v", m)
	}
	a.send(sub{"type": "ack", "alert": "x-a"})
	if m := a.read(); m.Type != apiclient.MsgAckResult {
		t.Errorf("tenant a got another tenant's %s", m.Type)
	}
	// b asked for alerts only: no snapshot, system or metric came first.
	if m := b.read(); m.Type != apiclient.MsgAlert || !strings.Contains(string(m.Alert), `"id":"x-b"`) {
		t.Errorf("tenant b: %+v", m)
	}
}

// Without an Acker an ack says it is not available here, and what would
// make it so when the process knows (a scale-out node without Redis).
func TestAckWithoutAckerSaysWhatToDo(t *testing.T) {
	t.Parallel()
	for _, hint := range []string{"", "give the nodes --redis and run apollo alert"} {
		e := newStreamEnv(t, func(o *Options) { o.NoAckHint = hint })
		c := e.dial("op-a")
		c.send(sub{"type": "ack", "alert": "x"})
		m := c.readType(apiclient.MsgAckResult)
		if m.OK || !strings.Contains(m.Error, "not available on this server") || !strings.Contains(m.Error, hint) {
			t.Errorf("hint %q: ack answered %+v", hint, m)
		}
	}
}

// A client that keeps some statuses hears of a task that leaves them, in
// its new state, live and on a resume; a task that never had one of them
// stays away. It heard only of changes into its statuses, so a run it
// showed as running stayed running for it once finished.
func TestStreamTaskLeavesTheStatusFilter(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, nil)
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe", "coalesce": false, "filter": map[string]any{"status": []string{"running"}}})
	e.publish(ev("a", "r1", "r", 1, running))
	if m := c.readType(apiclient.MsgTasks); taskIDs(m.Tasks) != "r1=running" {
		t.Fatalf("into the filter: %q", taskIDs(m.Tasks))
	}
	e.publish(ev("a", "p1", "p", 1, pending), ev("b", "r9", "r", 1, running))
	e.publish(ev("a", "r1", "r", 2, failed))
	m := c.readType(apiclient.MsgTasks)
	if taskIDs(m.Tasks) != "r1=failed" {
		t.Fatalf("out of the filter: %q", taskIDs(m.Tasks))
	}
	cursor := m.Cursor
	c.conn.Close(websocket.StatusNormalClosure, "")

	e.publish(ev("a", "r2", "r", 1, running), ev("a", "p1", "p", 2, running))
	e.publish(ev("a", "r2", "r", 2, success), ev("a", "p2", "p", 1, pending))
	e.waitCursor(8)
	c = e.dial("view-a")
	m = c.subscribe(sub{"type": "subscribe", "coalesce": false, "cursor": cursor, "filter": map[string]any{"status": []string{"running"}}})
	slices.SortFunc(m.Tasks, func(a, b apollo.Task) int { return strings.Compare(a.TaskID, b.TaskID) })
	if !m.Resumed || taskIDs(m.Tasks) != "p1=running,r2=success" {
		t.Fatalf("resume: resumed=%v %q", m.Resumed, taskIDs(m.Tasks))
	}
}
