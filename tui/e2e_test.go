package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
)

// alertBoard stands in for the alert engine at the hub's edge: it hands
// subscribers the alerts the test publishes, and an acknowledgement
// publishes the alert again with AckedBy set, as the engine does.
type alertBoard struct {
	mu     sync.Mutex
	subs   map[chan apollo.Alert]bool
	alerts map[string]apollo.Alert
	acked  chan string
}

func (b *alertBoard) SubscribeAlerts() (<-chan apollo.Alert, func()) {
	c := make(chan apollo.Alert, 16)
	b.mu.Lock()
	b.subs[c] = true
	b.mu.Unlock()
	return c, func() {
		b.mu.Lock()
		delete(b.subs, c)
		b.mu.Unlock()
	}
}

func (b *alertBoard) publish(a apollo.Alert) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.alerts[a.ID] = a
	for c := range b.subs {
		select {
		case c <- a:
		default:
		}
	}
}

func (b *alertBoard) Ack(_ context.Context, who stream.Caller, id string) error {
	by := who.Name
	b.mu.Lock()
	a, ok := b.alerts[id]
	b.mu.Unlock()
	if !ok {
		return &apollo.Error{Code: apollo.ENOTFOUND, Message: "no alert " + id}
	}
	a.AckedBy, a.AckedAt = by, time.Now()
	b.publish(a)
	b.acked <- id
	return nil
}

type e2eTokens map[string]*httpapi.Principal

func (a e2eTokens) Authenticate(r *http.Request) (*httpapi.Principal, error) {
	tok, _ := httpapi.BearerToken(r)
	if p := a[tok]; p != nil {
		return p, nil
	}
	return nil, &apollo.Error{Code: apollo.EUNAUTHORIZED, Message: "missing or unknown token"}
}

// liveServer is a real bus, metrics aggregator, stream hub and API on a
// loopback port. The stream can be restarted while the port stays.
type liveServer struct {
	t      *testing.T
	bus    *bus.Bus
	agg    *metrics.Aggregator
	alerts *alertBoard
	srv    *httptest.Server
	api    atomic.Pointer[http.Handler]
	hub    *stream.Hub
	// hubOpts changes the hub's options at every start; nil: none.
	hubOpts func(*stream.Options)
}

func newLiveServer(t *testing.T) *liveServer { return newLiveServerWith(t, nil) }

// newLiveServerWith is newLiveServer with the hub's options changed by
// hubOpts (nil: as they are).
func newLiveServerWith(t *testing.T, hubOpts func(*stream.Options)) *liveServer {
	return newLiveServerOf(t, hubOpts, nil)
}

// newLiveServerOf is newLiveServerWith with the bus's options changed by
// busOpts (nil: as they are).
func newLiveServerOf(t *testing.T, hubOpts func(*stream.Options), busOpts func(*bus.Options)) *liveServer {
	agg, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	agg.Start(context.Background())
	t.Cleanup(func() { agg.Stop(context.Background()) })
	bo := bus.Options{Observers: []bus.Observer{agg}}
	if busOpts != nil {
		busOpts(&bo)
	}
	b, err := bus.New(bo)
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	ls := &liveServer{t: t, bus: b, agg: agg, hubOpts: hubOpts, alerts: &alertBoard{subs: map[chan apollo.Alert]bool{}, alerts: map[string]apollo.Alert{}, acked: make(chan string, 4)}}
	ls.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*ls.api.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ls.srv.Close)
	ls.startStream()
	t.Cleanup(func() { ls.hub.Stop(context.Background()) })
	return ls
}

func (ls *liveServer) startStream() {
	var api *httpapi.Server
	opts := stream.Options{Bus: ls.bus, Changes: func(n int) stream.ChangeSubscription { return ls.bus.Subscribe(n) },
		Alerts: ls.alerts, Acker: ls.alerts,
		System: func(tenant string) any { return api.SystemStats(tenant) }, SystemInterval: time.Second}
	if ls.hubOpts != nil {
		ls.hubOpts(&opts)
	}
	hub, err := stream.New(opts)
	if err != nil {
		ls.t.Fatal(err)
	}
	parts := selfmetrics.Parts{selfmetrics.Watch("bus", ls.bus.Stats), selfmetrics.Watch("stream", hub.Stats)}
	api = httpapi.New(httpapi.Options{Bus: ls.bus, Metrics: ls.agg, Stream: hub, System: parts.System(),
		Auth: e2eTokens{"op-token": {Name: "oscar", Role: httpapi.RoleOperator}, "agent-token": {Name: "runner", Role: httpapi.RoleAgent},
			"acme-view": {Name: "ann", Role: httpapi.RoleViewer, Tenant: "acme"}, "acme-agent": {Name: "acme-runner", Role: httpapi.RoleAgent, Tenant: "acme"},
			"globex-view":  {Name: "gus", Role: httpapi.RoleViewer, Tenant: "globex"},
			"globex-agent": {Name: "globex-runner", Role: httpapi.RoleAgent, Tenant: "globex"}}})
	hub.Start(context.Background())
	var h http.Handler = api
	ls.api.Store(&h)
	ls.hub = hub
}

// report posts events the way an executor does.
func (ls *liveServer) report(evs ...apollo.Event) {
	ls.t.Helper()
	ls.reportAs("agent-token", evs...)
}

// reportAs posts events with token: "acme-agent" reports as tenant acme.
func (ls *liveServer) reportAs(token string, evs ...apollo.Event) {
	ls.t.Helper()
	body, _ := json.Marshal(evs)
	req, _ := http.NewRequest(http.MethodPost, ls.srv.URL+"/api/v1/events", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ls.t.Fatal(err)
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(ans), `"accepted":`+itoa(len(evs))) {
		ls.t.Fatalf("reporting: %s %s", resp.Status, ans)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func ev(task, name string, seq int64, st apollo.Status, cost int64) apollo.Event {
	return apollo.Event{TaskID: task, Name: name, Sequence: seq, Status: st, Ts: time.Now().UnixMilli(), CostMs: cost}
}

// TestEndToEnd runs the dashboard headless against a real server: rows
// appear as events are reported, the Jobs tab fills from the metrics API,
// an alert is acknowledged over the stream, and after the stream restarts
// the dashboard is live again with what happened meanwhile.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	ls := newLiveServer(t)
	m, err := New(Options{Server: ls.srv.URL, Token: "op-token", Refresh: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	defer m.Close()
	w.untilText(t, "● live")

	ls.report(ev("e2e_ok-1", "e2e_ok", 1, apollo.StatusRunning, 0), ev("e2e_fail-1", "e2e_fail", 1, apollo.StatusRunning, 0),
		ev("e2e_slow-1", "e2e_slow", 1, apollo.StatusRunning, 0))
	ls.report(ev("e2e_ok-1", "e2e_ok", 2, apollo.StatusSuccess, 120), ev("e2e_fail-1", "e2e_fail", 2, apollo.StatusFailed, 3400))
	// The job health board, the first tab, refreshes to the failing job
	// first (the server sorts by badness).
	w.until(t, "the health board", func(sc screen) bool {
		return sc.tab == tabHealth && hasRow(sc.text, "failing", "e2e_fail", "failed", "3.4s", "█") && hasRow(sc.text, "ok", "e2e_ok", "success") &&
			strings.Index(sc.text, "e2e_fail") < strings.Index(sc.text, "e2e_ok")
	})
	tm.Send(keyMsg("2"))
	w.until(t, "the three tasks", func(sc screen) bool {
		return hasRow(sc.text, "success", "e2e_ok-1") && hasRow(sc.text, "failed", "e2e_fail-1") && hasRow(sc.text, "running", "e2e_slow-1")
	})

	tm.Send(keyMsg("3"))
	w.until(t, "the jobs", func(sc screen) bool {
		return hasRow(sc.text, "e2e_fail", "100%") && hasRow(sc.text, "e2e_ok", "0%") && strings.Contains(sc.text, "e2e_fail · last hour")
	})

	ls.alerts.publish(apollo.Alert{ID: "a-9", Rule: "e2e_failures", Group: "e2e_", State: apollo.AlertFiring,
		Severity: apollo.SeverityCritical, Summary: "failed_rate 0.5 > 0.1", StartedAt: time.Now(), FiredAt: time.Now()})
	tm.Send(keyMsg("4"))
	w.untilText(t, "e2e_failures")
	tm.Send(keyMsg("a"))
	select {
	case id := <-ls.alerts.acked:
		if id != "a-9" {
			t.Fatalf("acknowledged %s", id)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the acknowledgement never reached the server")
	}
	w.until(t, "acknowledged", func(sc screen) bool {
		return strings.Contains(sc.text, "Acknowledged e2e_failures (e2e_).") && hasRow(sc.text, "e2e_failures", "oscar")
	})

	// The stream restarts; a run finishes meanwhile.
	tm.Send(keyMsg("2"))
	ls.hub.Stop(context.Background())
	w.untilText(t, "reconnecting in")
	ls.report(ev("e2e_slow-1", "e2e_slow", 2, apollo.StatusTimeout, 0))
	ls.startStream()
	w.until(t, "live again with the timeout", func(sc screen) bool {
		return sc.state == stateLive && hasRow(sc.text, "timeout", "e2e_slow-1") && hasRow(sc.text, "success", "e2e_ok-1")
	})

	tm.Send(keyMsg("q"))
	out, err := io.ReadAll(tm.FinalOutput(t, teatest.WithFinalTimeout(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("e2e_fail-1")) {
		t.Errorf("the terminal output never showed e2e_fail-1 (%d bytes)", len(out))
	}
}

// hasRow reports whether one line of text holds every part, in order.
func hasRow(text string, parts ...string) bool {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := l, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}
