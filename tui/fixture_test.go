package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// t0 is the fixed "now" of the fixture: every time below is relative to it.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func ms(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

// fixtureTasks are the tasks of the fixed data set, newest first.
func fixtureTasks() []apollo.Task {
	return []apollo.Task{
		{TaskID: "batch_orders-0042", Name: "batch_orders", Status: apollo.StatusRunning, Sequence: 2, StartedAt: ms(-12 * time.Second), UpdatedAt: ms(-12 * time.Second), ScheduledAt: ms(-13 * time.Second)},
		{TaskID: "batch_invoices-0017", Name: "batch_invoices", Status: apollo.StatusFailed, Sequence: 3, StartedAt: ms(-95 * time.Second), FinishedAt: ms(-40 * time.Second), UpdatedAt: ms(-40 * time.Second), CostMs: 55_000},
		{TaskID: "etl_sales-20261129T0955", Name: "etl_sales", Status: apollo.StatusSuccess, Sequence: 3, StartedAt: ms(-5 * time.Minute), FinishedAt: ms(-2 * time.Minute), UpdatedAt: ms(-2 * time.Minute), CostMs: 181_250},
		{TaskID: "report_daily-1129", Name: "report_daily", Status: apollo.StatusTimeout, Sequence: 2, StartedAt: ms(-40 * time.Minute), UpdatedAt: ms(-10 * time.Minute), TimeoutMs: 1_800_000, Late: true},
		{TaskID: "cleanup_tmp-77", Name: "cleanup_tmp", Status: apollo.StatusPending, Sequence: 1, ScheduledAt: ms(-15 * time.Minute), UpdatedAt: ms(-15 * time.Minute), Late: true},
		{TaskID: "sync_ledger-3", Name: "sync_ledger_with_the_accounting_system_nightly", Status: apollo.StatusManualBlocked, Sequence: 2, UpdatedAt: ms(-3 * time.Hour)},
		{TaskID: "batch_orders-0041", Name: "batch_orders", Status: apollo.StatusSuccess, Sequence: 3, StartedAt: ms(-26 * time.Hour), FinishedAt: ms(-26*time.Hour + 850*time.Millisecond), UpdatedAt: ms(-26*time.Hour + 850*time.Millisecond), CostMs: 850},
	}
}

func fixtureAlerts() []apollo.Alert {
	return []apollo.Alert{
		{ID: "a-1", Rule: "batch_failures", Group: "batch_", State: apollo.AlertFiring, Severity: apollo.SeverityCritical,
			Summary: "failed_rate 0.33 > 0.05 for batch_* over 5m", StartedAt: t0.Add(-4 * time.Minute), FiredAt: t0.Add(-2 * time.Minute)},
		{ID: "a-2", Rule: "etl_slow", Group: "etl_sales", State: apollo.AlertPending, Severity: apollo.SeverityWarning,
			Summary: "avg_cost 181s > 120s for etl_sales over 15m", StartedAt: t0.Add(-30 * time.Second)},
		{ID: "a-3", Rule: "report_missing", Group: "report_", State: apollo.AlertResolved, Severity: apollo.SeverityInfo,
			Summary: "count == 0 for report_* over 1h", StartedAt: t0.Add(-3 * time.Hour), FiredAt: t0.Add(-170 * time.Minute),
			ResolvedAt: t0.Add(-1 * time.Hour), AckedBy: "alice", AckedAt: t0.Add(-2 * time.Hour)},
	}
}

const fixtureMetrics = `{"window":"5m0s","prefix":"","total":{"count":61,"success":55,"failed":5,"timeout":1,"started":62,"late":2,"missed":1,"due":63,"failedRate":0.08196,"timeoutRate":0.01639,"lateRate":0.0317,"avgCostMs":2412.5,"minCostMs":3,"maxCostMs":181250,"backlog":1,"running":1,"throughput":12.2},
"jobs":[
{"name":"batch_invoices","count":12,"success":8,"failed":4,"timeout":0,"started":12,"late":0,"missed":0,"due":12,"failedRate":0.3333,"timeoutRate":0,"lateRate":0,"avgCostMs":505,"minCostMs":498,"maxCostMs":55000,"backlog":0,"running":0,"throughput":2.4},
{"name":"batch_orders","count":30,"success":30,"failed":0,"timeout":0,"started":31,"late":0,"missed":0,"due":31,"failedRate":0,"timeoutRate":0,"lateRate":0,"avgCostMs":301,"minCostMs":290,"maxCostMs":850,"backlog":0,"running":1,"throughput":6},
{"name":"cleanup_tmp","count":14,"success":14,"failed":0,"timeout":0,"started":13,"late":1,"missed":1,"due":14,"failedRate":0,"timeoutRate":0,"lateRate":0.0714,"avgCostMs":3,"minCostMs":3,"maxCostMs":9,"backlog":1,"running":0,"throughput":2.8},
{"name":"etl_sales","count":1,"success":1,"failed":0,"timeout":0,"started":1,"late":0,"missed":0,"due":1,"failedRate":0,"timeoutRate":0,"lateRate":0,"avgCostMs":181250,"minCostMs":181250,"maxCostMs":181250,"backlog":0,"running":0,"throughput":0.2},
{"name":"report_daily","count":1,"success":0,"failed":0,"timeout":1,"started":1,"late":1,"missed":0,"due":1,"failedRate":0,"timeoutRate":1,"lateRate":1,"avgCostMs":0,"minCostMs":0,"maxCostMs":0,"backlog":0,"running":0,"throughput":0.2},
{"name":"sync_ledger_with_the_accounting_system_nightly","count":3,"success":2,"failed":1,"timeout":0,"started":4,"late":0,"missed":0,"due":4,"failedRate":0.3333,"timeoutRate":0,"lateRate":0,"avgCostMs":12000,"minCostMs":9000,"maxCostMs":15000,"backlog":0,"running":0,"throughput":0.6}]}`

// fixtureSeries is a job's last hour: a run a minute, some failing,
// nothing for the first ten minutes.
func fixtureSeries(name string) string {
	pts := make([]map[string]any, 60)
	for i := range pts {
		count, failed := 0, 0
		if i >= 10 {
			count = 1 + i%4
			if i%9 == 0 {
				failed = 1
			}
		}
		rate := 0.0
		if count > 0 {
			rate = float64(failed) / float64(count)
		}
		pts[i] = map[string]any{"t": t0.Add(time.Duration(i-60) * time.Minute).UnixMilli(), "count": count, "failed": failed, "failedRate": rate}
	}
	b, _ := json.Marshal(map[string]any{"name": name, "window": "1h0m0s", "step": "1m0s", "points": pts})
	return string(b)
}

// fixtureHealth is GET /api/v1/jobs/health for the fixture's jobs, worst
// first: a strip of runs a minute apart for each, newest last.
func fixtureHealth() apiclient.HealthBoard {
	strip := func(n int, pattern ...apollo.Status) []apiclient.Run {
		rs := make([]apiclient.Run, n)
		for i := range rs {
			at := ms(time.Duration(i-n) * time.Minute)
			rs[i] = apiclient.Run{TaskID: fmt.Sprintf("run-%d", i), Status: pattern[i%len(pattern)], ReportedAt: at, StartedAt: at}
		}
		return rs
	}
	last := func(st apollo.Status, ago time.Duration, cost int64) *apiclient.Run {
		return &apiclient.Run{TaskID: "last", Status: st, ReportedAt: ms(-ago) - cost, FinishedAt: ms(-ago), CostMs: cost}
	}
	ok, failed, timeout := apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusTimeout
	return apiclient.HealthBoard{Now: t0.UnixMilli(), Total: 6,
		Verdicts: map[apollo.Verdict]int{apollo.VerdictFailing: 1, apollo.VerdictTimingOut: 1, apollo.VerdictLate: 1,
			apollo.VerdictNoRecentRuns: 1, apollo.VerdictOK: 2},
		Jobs: []apiclient.JobHealth{
			{Name: "batch_invoices", Verdict: apollo.VerdictFailing, LastRun: last(failed, 40*time.Second, 55_000),
				UsualCostMs: 505, UsualEveryMs: 30_000, NextRunAt: ms(20 * time.Second), LastSuccessAt: ms(-70 * time.Second),
				LastRunAt: ms(-95 * time.Second), Runs: strip(50, ok, ok, ok, failed, ok, ok, ok, ok, failed)},
			{Name: "report_daily", Verdict: apollo.VerdictTimingOut, LastRun: last(timeout, 10*time.Minute, 0),
				UsualCostMs: 1_200, UsualEveryMs: 3_600_000, LastSuccessAt: ms(-25 * time.Hour), Runs: strip(4, ok, timeout)},
			{Name: "cleanup_tmp", Verdict: apollo.VerdictLate, LastRun: last(ok, 16*time.Minute, 3),
				UsualCostMs: 3, UsualEveryMs: 60_000, NextRunAt: ms(-15 * time.Minute), LastSuccessAt: ms(-16 * time.Minute),
				Runs: append(strip(30, ok), apiclient.Run{TaskID: "cleanup_tmp-77", Status: apollo.StatusPending, Late: true, ReportedAt: ms(-15 * time.Minute)})},
			{Name: "sync_ledger_with_the_accounting_system_nightly", Verdict: apollo.VerdictNoRecentRuns, LastRun: last(failed, 3*time.Hour, 15_000),
				UsualCostMs: 12_000, UsualEveryMs: 1_800_000, LastSuccessAt: ms(-4 * time.Hour), Runs: strip(6, ok, ok, failed)},
			{Name: "batch_orders", Verdict: apollo.VerdictOK, LastRun: last(ok, 26*time.Hour, 850),
				UsualCostMs: 301, UsualEveryMs: 10_000, Running: 1, RunningSince: ms(-12 * time.Second), LastSuccessAt: ms(-26 * time.Hour),
				Runs: append(strip(49, ok), apiclient.Run{TaskID: "batch_orders-0042", Status: apollo.StatusRunning, ReportedAt: ms(-12 * time.Second)})},
			{Name: "etl_sales", Verdict: apollo.VerdictOK, LastRun: last(ok, 2*time.Minute, 181_250),
				UsualCostMs: 180_000, UsualEveryMs: 300_000, LastSuccessAt: ms(-2 * time.Minute), Runs: strip(12, ok)},
		}}
}

const fixtureSystem = `{"bus":{"accepted":120345,"duplicate":12,"illegal":3,"refused":0,"tasks":1842,"queued":0,"holding":0,"holdLimit":10000,"lastLSN":120360},
"stream":{"clients":2,"groups":2,"cursor":98001,"changes":98001,"messages":40210,"resyncs":0},
"wal":{"segments":3,"bytes":10485760,"lastSync":"2026-11-29T09:59:59Z"},
"notifications":{"channels":{"console":{"queueLen":0,"queued":3,"sent":3},"dingtalk":{"queueLen":1,"queued":1,"sent":0}},"unknownChannel":0}}`

const fixtureSilences = `{"silences":[{"id":"s-1","rule":"etl_slow","prefix":"etl_","endsAt":"2026-11-29T14:00:00Z","createdBy":"oscar","comment":"backfill running until 14:00"}]}`

// fixtureTask is GET /api/v1/tasks/batch_invoices-0017: the task with
// its timeline.
func fixtureTask() apollo.Task {
	t := fixtureTasks()[1]
	t.History = []apollo.Record{
		{Event: apollo.Event{TaskID: t.TaskID, Name: t.Name, Sequence: 1, Status: apollo.StatusPending, Ts: ms(-100 * time.Second)}, Kind: apollo.KindReport},
		{Event: apollo.Event{TaskID: t.TaskID, Name: t.Name, Sequence: 2, Status: apollo.StatusRunning, Ts: ms(-95 * time.Second)}, Kind: apollo.KindReport},
		{Event: apollo.Event{TaskID: t.TaskID, Name: t.Name, Sequence: 3, Status: apollo.StatusFailed, Ts: ms(-40 * time.Second),
			Extra: json.RawMessage(`{"exit":2,"stderr":"invoice 991: missing currency"}`)}, Kind: apollo.KindReport},
	}
	return t
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func helloJSON(cursor string) string {
	return `{"type":"hello","protocol":"apollo.v1","cursor":"` + cursor + `","serverTime":` + fmt.Sprint(t0.UnixMilli()) +
		`,"heartbeatMs":15000,"flushMs":100,"principal":{"name":"oscar","role":"operator"}}`
}

func snapshotJSON(cursor string, ts []apollo.Task) string {
	return `{"type":"snapshot","cursor":"` + cursor + `","reason":"subscribe","tasks":` + mustJSON(ts) + `}`
}

func alertJSON(a apollo.Alert) string { return `{"type":"alert","alert":` + mustJSON(a) + `}` }

// fakeServer is the edge of the dashboard: a WebSocket endpoint the test
// drives message by message, and the REST routes answering the fixture.
type fakeServer struct {
	t     *testing.T
	srv   *httptest.Server
	conns chan *serverConn
	reqs  chan recorded
	// routes answers "METHOD /path" (no query); a missing route is 404.
	mu     sync.Mutex
	routes map[string]string
	open   []*serverConn
	down   atomic.Bool // the stream answers 503
	// revoked refuses the token, as a server restarted without it does.
	revoked atomic.Bool
	// dials counts the attempts to open the stream.
	dials chan struct{}
}

type recorded struct {
	method, path, query, body string
}

// serverConn is one stream connection, seen from the server.
type serverConn struct {
	t    *testing.T
	c    *websocket.Conn
	in   chan string   // what the client sent
	gone chan struct{} // closed when the connection ends
}

func newFakeServer(t *testing.T) *fakeServer {
	fs := &fakeServer{t: t, conns: make(chan *serverConn, 4), reqs: make(chan recorded, 64), dials: make(chan struct{}, 64), routes: map[string]string{
		"GET /api/v1/jobs/health":               mustJSON(fixtureHealth()),
		"GET /api/v1/metrics":                   fixtureMetrics,
		"GET /api/v1/alerts":                    `{"alerts":` + mustJSON(fixtureAlerts()) + `}`,
		"GET /api/v1/silences":                  fixtureSilences,
		"GET /api/v1/system":                    fixtureSystem,
		"GET /api/v1/tasks/batch_invoices-0017": mustJSON(fixtureTask()),
		"POST /api/v1/silences":                 `{"id":"s-2"}`,
		"POST /api/v1/alerts/a-1/ack":           `{}`,
	}}
	fs.srv = httptest.NewServer(http.HandlerFunc(fs.serve))
	t.Cleanup(func() {
		fs.mu.Lock()
		for _, c := range fs.open {
			c.c.CloseNow()
		}
		fs.mu.Unlock()
		fs.srv.Close()
	})
	return fs
}

func (fs *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/v1/stream" {
		fs.stream(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	select {
	case fs.reqs <- recorded{r.Method, r.URL.Path, r.URL.RawQuery, string(body)}:
	default:
	}
	fs.mu.Lock()
	ans, ok := fs.routes[r.Method+" "+r.URL.Path]
	fs.mu.Unlock()
	if !ok && strings.HasPrefix(r.URL.Path, "/api/v1/metrics/") {
		ans, ok = fixtureSeries(strings.TrimPrefix(r.URL.Path, "/api/v1/metrics/")), true
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, ans)
}

func (fs *fakeServer) stream(w http.ResponseWriter, r *http.Request) {
	select {
	case fs.dials <- struct{}{}:
	default:
	}
	if fs.down.Load() {
		http.Error(w, "stopping", http.StatusServiceUnavailable)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer test-token" || fs.revoked.Load() {
		http.Error(w, `{"error":{"code":"unauthorized","message":"bad token"}}`, http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		return
	}
	sc := &serverConn{t: fs.t, c: c, in: make(chan string, 64), gone: make(chan struct{})}
	defer close(sc.gone)
	fs.mu.Lock()
	fs.open = append(fs.open, sc)
	fs.mu.Unlock()
	fs.conns <- sc
	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			return
		}
		sc.in <- string(data)
	}
}

// accept waits for the dashboard to connect.
func (fs *fakeServer) accept() *serverConn {
	fs.t.Helper()
	select {
	case c := <-fs.conns:
		return c
	case <-time.After(testwait.Timeout(fs.t)):
		fs.t.Fatal("the dashboard did not connect")
		return nil
	}
}

// request waits for a REST request matching "METHOD /path".
func (fs *fakeServer) request(route string) recorded {
	fs.t.Helper()
	deadline := time.After(testwait.Timeout(fs.t))
	for {
		select {
		case r := <-fs.reqs:
			if r.method+" "+r.path == route {
				return r
			}
		case <-deadline:
			fs.t.Fatalf("no request %s", route)
			return recorded{}
		}
	}
}

func (c *serverConn) send(msg string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(c.t))
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		c.t.Fatalf("sending %s: %v", msg, err)
	}
}

// expect waits for the next client message that is not a heartbeat echo.
func (c *serverConn) expect() map[string]any {
	c.t.Helper()
	for {
		select {
		case s := <-c.in:
			var m map[string]any
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				c.t.Fatalf("client sent %q: %v", s, err)
			}
			if m["type"] != "heartbeat" {
				return m
			}
		case <-time.After(testwait.Timeout(c.t)):
			c.t.Fatal("the client sent nothing")
			return nil
		}
	}
}

// screen is what the test sees after an update: the text on the screen
// and a few facts that the text does not show plainly.
type screen struct {
	text     string
	tab      tab
	state    connState
	selected string // the selected task
	detail   string
}

// watched is the dashboard with a window for the test: after every
// update it publishes the screen, replacing one the test has not read.
type watched struct {
	*Model
	screens chan screen
}

func watch(m *Model) watched { return watched{Model: m, screens: make(chan screen, 1)} }

func (w watched) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := w.Model.Update(msg)
	sel, _ := w.tasks.Selected()
	s := screen{text: ansi.Strip(w.render()), tab: w.tab, state: w.conn.state, selected: sel.TaskID, detail: w.tasks.Detail()}
	select {
	case w.screens <- s:
	default:
		select {
		case <-w.screens:
		default:
		}
		w.screens <- s
	}
	return w, cmd
}

// until waits for a screen that satisfies ok and returns it.
func (w watched) until(t *testing.T, what string, ok func(screen) bool) screen {
	t.Helper()
	deadline := time.After(testwait.Timeout(t))
	var last screen
	for {
		select {
		case s := <-w.screens:
			if ok(s) {
				return s
			}
			last = s
		case <-deadline:
			t.Fatalf("waiting for %s; the screen was:\n%s", what, last.text)
		}
	}
}

func (w watched) untilText(t *testing.T, text string) screen {
	t.Helper()
	return w.until(t, strings.TrimSpace(text), func(s screen) bool { return strings.Contains(s.text, text) })
}
