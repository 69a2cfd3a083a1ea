package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// TestAPIRoundTrip sends every wire type of apiclient through the real
// server, wired as "apollo server" wires it, for two tenants: each answer
// and each stream message decodes into its apiclient type with no field
// left over, and encoding that value again gives the server's bytes. A
// shape changed on one side only, or a field the client does not know,
// fails here.
func TestAPIRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	h := newHook(t)
	clk := newTickClock()
	srv := startRoundTripServer(t, h, clk)
	ctx := testCtx(t, testwait.Timeout(t))

	// The scheduler belongs to the default tenant.
	def := srv.client(t, "")
	jobs, err := def.Jobs(ctx)
	sameAnswer[apiclient.JobList](t, srv.rec, err, "GET /api/v1/jobs")
	if len(jobs) != 1 || jobs[0].Name != "nightly" {
		t.Errorf("jobs %+v", jobs)
	}
	for _, act := range []func(context.Context, string) (apiclient.JobAction, error){def.PauseJob, def.ResumeJob, def.RunJob} {
		a, err := act(ctx, "nightly")
		sameAnswer[apiclient.JobAction](t, srv.rec, err, "a job action")
		if a.Job != "nightly" {
			t.Errorf("job action %+v", a)
		}
	}
	_, err = def.Health(ctx)
	sameAnswer[apiclient.Health](t, srv.rec, err, "GET /healthz")
	_, err = def.Ready(ctx)
	sameAnswer[apiclient.Health](t, srv.rec, err, "GET /readyz")

	for _, tenant := range tenants {
		t.Run(tenant, func(t *testing.T) { roundTripTenant(t, ctx, srv, h, tenant) })
	}
	// The tenants' firing notifications went out while both ran; each
	// tenant's delivery record holds its own only.
	for _, tenant := range tenants {
		c := srv.client(t, tenant)
		attempts, err := c.Notifications(ctx, apiclient.NotificationQuery{})
		sameAnswer[apiclient.AttemptList](t, srv.rec, err, "GET /api/v1/notifications")
		if len(attempts) == 0 {
			t.Errorf("tenant %s: no delivery attempts", tenant)
		}
		for _, a := range attempts {
			if a.Tenant != tenant {
				t.Errorf("tenant %s sees an attempt of tenant %q", tenant, a.Tenant)
			}
		}
	}
}

// roundTripTenant goes through every per-tenant route and the stream as
// one tenant; its names start with the tenant's, so that a listing that
// shows another tenant's data fails.
func roundTripTenant(t *testing.T, ctx context.Context, srv *roundTripServer, h *hook, tenant string) {
	c := srv.client(t, tenant)
	rec := srv.rec
	prefix := tenant + "_"

	rules := fmt.Sprintf("RULE %sfailed task_prefix: %q ON: failed NOTIFY: hook LABELS: team=data\n", prefix, prefix)
	rs, err := c.PutRules(ctx, []byte(rules), apiclient.RulesText)
	sameAnswer[apiclient.RuleSet](t, rec, err, "PUT /api/v1/rules")
	if len(rs.Rules) != 1 || rs.Source != rules {
		t.Errorf("rules %+v", rs)
	}
	_, err = c.PutRules(ctx, []byte("RULE x task_prefix: \"x\" THRESHOLD: failed_rat > 1 NOTIFY: hook\n"), apiclient.RulesText)
	var ae *apiclient.Error
	if !errors.As(err, &ae) || len(ae.Problems) == 0 || ae.Err.Code != apollo.EINVALID {
		t.Errorf("a bad rules file: %v", err)
	}
	sameJSON[apiclient.ErrorBody](t, rec.take(), "a refused rules file")
	_, err = c.Rules(ctx)
	sameAnswer[apiclient.RuleSet](t, rec, err, "GET /api/v1/rules")

	// The stream from the start: it sees what follows.
	ws := srv.dial(t, ctx, tenant)
	ws.expect(t, apiclient.MsgHello)
	ws.send(t, apiclient.ClientMessage{Type: apiclient.MsgSubscribe, Filter: &apiclient.Filter{}})
	ws.expect(t, apiclient.MsgSnapshot)
	// The figures as they are, right after the snapshot: the stream's
	// tickers have not ticked (they tick when the test says), and the
	// tenant's metrics hold none of the other tenant's jobs.
	ws.expect(t, apiclient.MsgSystem)
	streamJobs(t, ws, tenant, prefix, false)

	now := time.Now().UnixMilli()
	srv.report(t, tenant, fmt.Sprintf(`[
		{"taskID":"%[1]sload-1","name":"%[1]sload","sequence":1,"status":"running","ts":%[2]d},
		{"taskID":"%[1]sload-1","sequence":2,"status":"failed","ts":%[3]d,"extra":{"rows":3}},
		{"taskID":"%[1]sfix-1","name":"%[1]sfix","sequence":1,"status":"pending","ts":%[2]d}]`, prefix, now, now+1))
	ws.expect(t, apiclient.MsgTasks)
	h.await(t, 30*time.Second, tenant+"'s firing", func(p webhook.ApolloPayload) bool {
		return p.Alert.Tenant == tenant && string(p.Kind) == "firing"
	})

	page, err := c.Tasks(ctx, apiclient.TaskQuery{Limit: 1})
	sameAnswer[apiclient.TaskPage](t, rec, err, "GET /api/v1/tasks, a first page")
	if page.Next == "" {
		t.Errorf("one task a page, and no next page: %+v", page)
	}
	page, err = c.Tasks(ctx, apiclient.TaskQuery{})
	sameAnswer[apiclient.TaskPage](t, rec, err, "GET /api/v1/tasks")
	for _, tk := range page.Tasks {
		if !strings.HasPrefix(tk.TaskID, prefix) {
			t.Errorf("tenant %s lists task %s", tenant, tk.TaskID)
		}
	}
	if len(page.Tasks) != 2 {
		t.Errorf("tenant %s lists %d tasks, want 2", tenant, len(page.Tasks))
	}
	_, err = c.Task(ctx, prefix+"load-1")
	sameAnswer[apollo.Task](t, rec, err, "GET /api/v1/tasks/{id}")
	_, err = c.CorrectTask(ctx, prefix+"fix-1", apiclient.Correction{Status: apollo.StatusSuccess, Reason: "checked by hand"})
	sameAnswer[apollo.Task](t, rec, err, "POST /api/v1/tasks/{id}/status")
	_, err = c.Task(ctx, "not-there")
	if apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Errorf("a task that is not there: %v", err)
	}
	sameJSON[apiclient.ErrorBody](t, rec.take(), "an error answer")

	// The metrics see the failure a moment after the bus answered.
	var mp apiclient.MetricsPage
	eventually(t, 0, tenant+"'s metrics", func() bool {
		mp, err = c.Metrics(ctx, 5*time.Minute, "")
		return err != nil || mp.Total.Failed > 0
	})
	sameAnswer[apiclient.MetricsPage](t, rec, err, "GET /api/v1/metrics")
	for _, j := range mp.Jobs {
		if !strings.HasPrefix(j.Name, prefix) {
			t.Errorf("tenant %s has metrics of job %s", tenant, j.Name)
		}
	}
	_, err = c.JobSeries(ctx, prefix+"load", 10*time.Minute, time.Minute)
	sameAnswer[apiclient.JobSeries](t, rec, err, "GET /api/v1/metrics/{name}")
	_, err = c.PrefixSeries(ctx, prefix, 10*time.Minute, time.Minute)
	sameAnswer[apiclient.PrefixSeries](t, rec, err, "GET /api/v1/series")
	board, err := c.JobsHealth(ctx, apiclient.HealthQuery{})
	sameAnswer[apiclient.HealthBoard](t, rec, err, "GET /api/v1/jobs/health")
	for _, j := range board.Jobs {
		if !strings.HasPrefix(j.Name, prefix) {
			t.Errorf("tenant %s has the health of job %s", tenant, j.Name)
		}
	}

	sil, err := c.AddSilence(ctx, apiclient.SilenceRequest{Rule: prefix + "failed", Labels: map[string]string{"team": "data"},
		Duration: "2h", Comment: "maintenance"})
	sameAnswer[apiclient.SilenceAnswer](t, rec, err, "POST /api/v1/silences")
	_, err = c.Silences(ctx)
	sameAnswer[apiclient.SilenceList](t, rec, err, "GET /api/v1/silences")
	list, err := c.Alerts(ctx, apollo.AlertFiring)
	alerts := list.Alerts
	sameAnswer[apiclient.AlertList](t, rec, err, "GET /api/v1/alerts")
	if len(alerts) != 1 || alerts[0].Rule != prefix+"failed" || alerts[0].Tenant != tenant || len(alerts[0].SilencedBy) != 1 {
		t.Fatalf("tenant %s firing alerts %+v", tenant, alerts)
	}
	_, err = c.Ack(ctx, alerts[0].ID)
	sameAnswer[apiclient.AckAnswer](t, rec, err, "POST /api/v1/alerts/{id}/ack")
	sameAnswer[apiclient.Removed](t, rec, c.RemoveSilence(ctx, sil.ID), "DELETE /api/v1/silences/{id}")
	at, err := c.TestChannel(ctx, "hook")
	sameAnswer[apiclient.ChannelTest](t, rec, err, "POST /api/v1/channels/{name}/test")
	if at.Outcome != "sent" || at.Tenant != tenant {
		t.Errorf("tenant %s: channel test %+v", tenant, at)
	}

	// The rest of the stream: the alert's changes came meanwhile; an ack
	// answered, a message refused, the system figures and a heartbeat.
	ws.expect(t, apiclient.MsgAlert)
	ws.send(t, apiclient.ClientMessage{Type: apiclient.MsgAck, Alert: alerts[0].ID})
	ws.expect(t, apiclient.MsgAckResult)
	ws.send(t, apiclient.ClientMessage{Type: "nonsense"})
	ws.expect(t, apiclient.MsgError)
	srv.clock.tick(5 * time.Second) // the system interval
	ws.expect(t, apiclient.MsgSystem)
	srv.clock.tick(15 * time.Second) // the heartbeat interval
	ws.expect(t, apiclient.MsgHeartbeat)
	// The metric interval: the tenant's jobs as GET /api/v1/metrics
	// answers them, and no other tenant's.
	srv.clock.tick(10 * time.Second)
	streamJobs(t, ws, tenant, prefix, true)
}

// streamJobs reads the stream's next metric message, which must be of
// the 5-minute window and hold only jobs under prefix (some, if some).
func streamJobs(t *testing.T, ws *streamConn, tenant, prefix string, some bool) {
	t.Helper()
	var m apiclient.Metric
	if err := json.Unmarshal(ws.expect(t, apiclient.MsgMetric), &m); err != nil {
		t.Fatal(err)
	}
	mp := sameJSON[apiclient.MetricsPage](t, m.Summaries, "the summaries of a metric message")
	if mp.Window != "5m0s" || some && len(mp.Jobs) == 0 {
		t.Errorf("tenant %s: metric message %s", tenant, m.Summaries)
	}
	for _, j := range mp.Jobs {
		if !strings.HasPrefix(j.Name, prefix) {
			t.Errorf("tenant %s has the metrics of job %s on the stream", tenant, j.Name)
		}
	}
}

// sameAnswer fails the test when the call failed (err), else decodes the
// last answer rec saw as sameJSON does.
func sameAnswer[T any](t *testing.T, rec *recorder, err error, what string) T {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return sameJSON[T](t, rec.take(), what)
}

// sameJSON decodes raw into T, refusing fields T does not have, and checks
// that T encodes back to the same bytes.
func sameJSON[T any](t *testing.T, raw []byte, what string) T {
	t.Helper()
	var v T
	sameJSONInto(t, raw, &v, what)
	return v
}

// sameJSONInto is sameJSON into v, a pointer.
func sameJSONInto(t *testing.T, raw []byte, v any, what string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("%s: the server's answer does not decode into %T: %v\n%s", what, v, err, raw)
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if got, want := bytes.TrimSpace(buf.Bytes()), bytes.TrimSpace(raw); !bytes.Equal(got, want) {
		t.Errorf("%s: %T encodes\n%s\nwhere the server sent\n%s", what, v, got, want)
	}
}

// recorder is an http.RoundTripper that keeps the body of the last
// answer, for sameAnswer.
type recorder struct {
	mu   sync.Mutex
	last []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.last = b
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) take() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.last
	r.last = nil
	return b
}

// roundTripServer is the server under test: in this process, as
// startScriptServer runs one, with a token per tenant.
type roundTripServer struct {
	addr   string
	tokens map[string]string // tenant -> admin secret
	rec    *recorder
	clock  *tickClock
}

func startRoundTripServer(t *testing.T, h *hook, clk *tickClock) *roundTripServer {
	t.Helper()
	dir := t.TempDir()
	srv := &roundTripServer{tokens: map[string]string{}, rec: &recorder{}, clock: clk}
	var y strings.Builder
	fmt.Fprintf(&y, "channels:\n  hook:\n    type: webhook\n    url: %s\n    tenants: [\"*\"]\n", h.srv.URL)
	y.WriteString("alert:\n  interval: 1s\n  dedup_window: 1s\n")
	y.WriteString("auth:\n  tokens:\n")
	for _, tenant := range append([]string{""}, tenants...) {
		secret, tok, err := httpapi.NewToken(tenant+"-admin", httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		srv.tokens[tenant] = secret
		fmt.Fprintf(&y, "    - {name: %s-admin, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	path := filepath.Join(dir, "apollo.yaml")
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs, []byte("jobs:\n  - name: nightly\n    schedule: \"0 3 * * *\"\n    command: [\"true\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data, cfg.Listen, cfg.Jobs = filepath.Join(dir, "data"), "127.0.0.1:0", jobs
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	up, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- runServer(ctx, cfg, serverDeps{log: slog.New(slog.DiscardHandler), clock: clk, ready: func(a string) { up <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case srv.addr = <-up:
	case err := <-done:
		t.Fatalf("the server did not start: %v", err)
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the server did not start in time")
	}
	return srv
}

// client is a client of the server as tenant's admin, whose answers rec
// keeps.
func (s *roundTripServer) client(t *testing.T, tenant string) *apiclient.Client {
	t.Helper()
	c, err := apiclient.New("http://"+s.addr, apiclient.WithToken(s.tokens[tenant]), apiclient.WithHTTPClient(&http.Client{Transport: s.rec}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// report sends events as tenant; ingest answers are the SDK's, not
// apiclient's.
func (s *roundTripServer) report(t *testing.T, tenant, events string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+"/api/v1/events", strings.NewReader(events))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.tokens[tenant])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || bytes.Count(b, []byte(`"result":"accepted"`)) != strings.Count(events, `"taskID"`) {
		t.Fatalf("reporting as %s: %d %s", tenant, resp.StatusCode, b)
	}
}

// streamConn is a stream connection that checks every message it reads.
type streamConn struct {
	c   *websocket.Conn
	ctx context.Context
}

func (s *roundTripServer) dial(t *testing.T, ctx context.Context, tenant string) *streamConn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, "ws://"+s.addr+"/api/v1/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + s.tokens[tenant]}}, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &streamConn{c: c, ctx: ctx}
}

func (w *streamConn) send(t *testing.T, m apiclient.ClientMessage) {
	t.Helper()
	b, _ := json.Marshal(m)
	if err := w.c.Write(w.ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// expect reads messages until one of type typ, checking each as its
// apiclient type on the way, and returns that one.
func (w *streamConn) expect(t *testing.T, typ string) []byte {
	t.Helper()
	for {
		_, data, err := w.c.Read(w.ctx)
		if err != nil {
			t.Fatalf("waiting for a %s message: %v", typ, err)
		}
		f, err := apiclient.DecodeFrame(data)
		if err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if f.Msg == nil {
			t.Errorf("a message of a type apiclient does not know: %s", data)
		} else {
			sameJSONInto(t, data, reflect.New(reflect.TypeOf(f.Msg).Elem()).Interface(), "a "+f.Type+" message")
		}
		if f.Type == typ {
			return data
		}
	}
}

// tickClock is the system clock, except that the tickers of the stream's
// system figures (5 s), metrics (10 s, as are the clients' pings) and
// heartbeats (15 s) tick when the test says.
type tickClock struct {
	apollo.Clock
	mu      sync.Mutex
	tickers map[time.Duration][]chan time.Time
}

func newTickClock() *tickClock {
	return &tickClock{Clock: apollo.SystemClock, tickers: map[time.Duration][]chan time.Time{}}
}

// settleTicker is a ticker that ticks when the test sends on c.
type settleTicker struct{ c chan time.Time }

func (t settleTicker) C() <-chan time.Time { return t.c }
func (settleTicker) Stop()                 {}
func (settleTicker) Reset(time.Duration)   {}

func (c *tickClock) NewTicker(d time.Duration) apollo.Ticker {
	if d != 5*time.Second && d != 10*time.Second && d != 15*time.Second {
		return c.Clock.NewTicker(d)
	}
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.tickers[d] = append(c.tickers[d], ch)
	c.mu.Unlock()
	return settleTicker{ch}
}

// tick ticks every ticker of period d once; a tick not taken yet is not
// doubled, as with time.Ticker.
func (c *tickClock) tick(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.tickers[d] {
		select {
		case ch <- time.Now():
		default:
		}
	}
}
