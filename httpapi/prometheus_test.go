package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/console"
	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
	"github.com/apollo-11/apollo/wal"
)

// promTokens: an agent to report, a viewer to scrape.
var promTokens = tokenAuth{
	"agent":  {Name: "exec", Role: RoleAgent},
	"viewer": {Name: "prometheus", Role: RoleViewer},
}

// walLog adapts *wal.Log to bus.Log, as cmd/apollo does.
type walLog struct{ l *wal.Log }

func (w walLog) Append(p []byte) (uint64, error) {
	lsn, err := w.l.Append(p)
	return uint64(lsn), err
}

func (w walLog) Wait(ctx context.Context, lsn uint64) error { return w.l.Wait(ctx, wal.LSN(lsn)) }

// signalWriter tells a test each time the console channel wrote a message.
type signalWriter struct{ wrote chan string }

func (w signalWriter) Write(p []byte) (int, error) {
	w.wrote <- string(p)
	return len(p), nil
}

// promEnv is a server assembled the way the all-in-one process assembles
// it: a bus logging to a real WAL, the metrics aggregator and an alert
// engine observing it, a dispatcher with a console channel, the stream hub.
type promEnv struct {
	clock  *apollo.FakeClock
	log    *wal.Log
	bus    *bus.Bus
	agg    *metrics.Aggregator
	engine *alert.Engine
	disp   *notify.Dispatcher
	hub    *stream.Hub
	srv    *httptest.Server
	wrote  chan string
}

func newPromEnv(t *testing.T) *promEnv {
	t.Helper()
	e := &promEnv{clock: apollo.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), wrote: make(chan string, 4)}
	var err error
	if e.log, err = wal.Open(wal.Options{Dir: t.TempDir(), Logger: discardLogger}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.log.Close() })
	if e.agg, err = metrics.New(metrics.Options{Clock: e.clock, Logger: discardLogger}); err != nil {
		t.Fatal(err)
	}
	out, err := console.New(console.Config{}, notify.NotifierOptions{Output: signalWriter{e.wrote}})
	if err != nil {
		t.Fatal(err)
	}
	ch := notify.Channel{Name: "console", Type: "console", Notifier: out}
	if e.disp, err = notify.NewDispatcher([]notify.Channel{ch}, notify.Options{Clock: e.clock, Logger: discardLogger}); err != nil {
		t.Fatal(err)
	}
	rs, err := rules.Parse("rules", []byte(`RULE failures task_prefix: "job" ON: failed NOTIFY: console`))
	if err != nil {
		t.Fatal(err)
	}
	e.engine, err = alert.New(alert.Options{Rules: rs, Store: e.agg, Sender: e.disp, Clock: e.clock, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	e.bus, err = bus.New(bus.Options{Log: walLog{e.log}, Observers: []bus.Observer{e.agg, e.engine},
		Clock: e.clock, Logger: discardLogger, HoldLimit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if e.hub, err = stream.New(stream.Options{Bus: e.bus, Changes: func(n int) stream.ChangeSubscription { return e.bus.Subscribe(n) },
		Clock: e.clock, Logger: discardLogger}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, start := range []func(context.Context) error{e.disp.Start, e.engine.Start, e.bus.Start, e.agg.Start, e.hub.Start} {
		if err := start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Stopped in the server's shutdown order; each Stop is idempotent, so
	// a test may stop some earlier to settle their counters.
	t.Cleanup(func() {
		e.hub.Stop(context.Background())
		e.bus.Stop(context.Background())
		e.engine.Stop(context.Background())
		e.agg.Stop(context.Background())
		e.disp.Stop(context.Background())
	})
	parts := selfmetrics.Parts{selfmetrics.Watch("bus", e.bus.Stats), selfmetrics.Watch("stream", e.hub.Stats),
		selfmetrics.Watch("wal", e.log.Stats), selfmetrics.Watch("metrics", e.agg.Stats),
		selfmetrics.Watch("notifications", e.disp.Stats), selfmetrics.Watch("alert", e.engine.Stats),
		selfmetrics.Watch("recovery", func() selfmetrics.Recovery { return selfmetrics.Recovery{Duration: 1250 * time.Millisecond, Events: 7} })}
	api := New(Options{Bus: e.bus, Stream: e.hub, Auth: promTokens, Clock: e.clock, Logger: discardLogger,
		Prometheus: parts.Handler(discardLogger, TenantOf)})
	e.srv = httptest.NewServer(api)
	t.Cleanup(e.srv.Close)
	return e
}

// get sends GET path with a bearer token and returns the status and body.
func (e *promEnv) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	return call(t, "GET", e.srv.URL+path, "", bearerHeader(token))
}

// scrape fetches /metrics as a viewer and parses it, as Prometheus would.
func (e *promEnv) scrape(t *testing.T) prometheus.Gatherer {
	t.Helper()
	status, body := e.get(t, "/metrics", "viewer")
	if status != 200 {
		t.Fatalf("GET /metrics as a viewer: %d %s", status, body)
	}
	return parseExposition(t, body)
}

func parseExposition(t *testing.T, body string) prometheus.Gatherer {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, body)
	}
	list := make([]*dto.MetricFamily, 0, len(fams))
	for _, name := range slices.Sorted(maps.Keys(fams)) { // as a registry gathers
		list = append(list, fams[name])
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return list, nil })
}

// traffic reports, as an agent over HTTP, events with every result the
// bus gives without reaching a limit.
func (e *promEnv) traffic(t *testing.T) {
	t.Helper()
	ts := e.clock.Now().UnixMilli()
	ev := func(id, name string, seq int64, st string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":%q,"sequence":%d,"status":%q,"ts":%d}`, id, name, seq, st, ts)
	}
	body := "[" + strings.Join([]string{
		ev("a", "other", 1, "pending"), ev("a", "other", 2, "running"), ev("a", "other", 3, "success"), // 3 accepted
		ev("a", "other", 2, "running"),                                 // duplicate
		ev("a", "other", 4, "running"),                                 // illegal: a finished task cannot start again
		ev("c", "other", 1, "pending"), ev("c", "other", 3, "success"), // 1 accepted; 3 waits for its sequence 2
		ev("d", "job", 1, "running"), ev("d", "job", 2, "failed"), // 2 accepted; the rule fires
		ev("e", "other", 0, "running"),  // invalid: sequences start at 1
		`{"taskID":"f","sequence":"1"}`, // not read: the API answers it, the bus never sees it
	}, ",") + "]"
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer agent")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %d", resp.StatusCode)
	}
}

// settle waits until nothing moves: the checkpoint returns once every
// change reached the observers; the console write is the failure's
// notification; the engine and the dispatcher then stop, so their
// counters are final.
func (e *promEnv) settle(t *testing.T) {
	t.Helper()
	if err := e.bus.Checkpoint(func(uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-e.wrote:
		if !strings.Contains(msg, "job") {
			t.Fatalf("the console got %q, not the failure of job", msg)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the failure was not notified on the console")
	}
	if err := e.engine.Evaluate(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.engine.Stop(context.Background())
	e.disp.Stop(context.Background())
}

// A scrape after real traffic shows what the components did: every value
// below follows from the events sent, not from a recording.
func TestPrometheusScrapeAfterTraffic(t *testing.T) {
	t.Parallel()
	e := newPromEnv(t)
	e.traffic(t)
	e.settle(t)
	// One dashboard watching: registered before its hello arrives.
	dialStream(t, e.srv.URL, "viewer")

	g := e.scrape(t)
	console := func(outcome string) string { return `{channel="console",outcome="` + outcome + `"}` }
	want := strings.Join([]string{
		expo("apollo_events_total", `{result="accepted"} 6`, `{result="duplicate"} 1`,
			`{result="illegal"} 1`, `{result="invalid"} 1`, `{result="refused"} 0`),
		sample("apollo_events_waiting_total", 1),
		sample("apollo_events_wait_ended_total", 0),
		sample("apollo_tasks", 3),         // a, c (its sequence 3 waiting for 2) and d
		sample("apollo_queue_changes", 0), // the checkpoint drained the queues
		sample("apollo_holding_area_changes", 0),
		sample("apollo_holding_area_limit", 500),
		sample("apollo_out_of_order_waiting", 1),
		sample("apollo_bus_subscribers", 1), // the hub
		sample("apollo_stream_clients", 1),
		expo("apollo_stream_connections_total", `{result="accepted"} 1`, `{result="over_limit"} 0`, `{result="refused"} 0`),
		sample("apollo_wal_appends_total", 7), // the 6 accepted and the waiting one; refused and dropped events are not logged
		sample("apollo_wal_segments", 1),
		sample("apollo_metrics_jobs", 2),
		sample("apollo_rule_evaluations_total", 1),
		sample("apollo_rule_last_evaluation_timestamp_seconds", float64(e.clock.Now().Unix())),
		expo("apollo_alerts", `{state="firing"} 1`, `{state="inactive"} 0`, `{state="pending"} 0`, `{state="resolved"} 0`),
		expo("apollo_rules", `{kind="event"} 1`, `{kind="rate"} 0`),
		expo("apollo_notifications_total", console("coalesced")+" 0", console("dropped")+" 0",
			console("failed")+" 0", console("gave_up")+" 0", console("retrying")+" 0", console("sent")+" 1"),
		sample("apollo_recovery_seconds", 1.25),
		sample("apollo_recovery_events", 7),
	}, "")
	names := metricNames(want)
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// What depends on the disk's timing is compared with the log's own
	// account, read now that nothing moves.
	wst := e.log.Stats()
	if wst.Syncs == 0 {
		t.Fatal("acknowledged events were never fsynced")
	}
	want = expo("apollo_wal_sync_seconds", fmt.Sprintf("_sum %v", wst.SyncLatencySum.Seconds()), fmt.Sprintf("_count %d", wst.Syncs)) +
		sample("apollo_wal_sync_max_seconds", wst.SyncLatencyMax.Seconds()) + sample("apollo_wal_durable_lsn", float64(wst.DurableLSN))
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), metricNames(want)...); err != nil {
		t.Error(err)
	}
	// The soak drill (bench/drills/soak) reads these three; process_open_fds
	// comes from /proc, so only where there is one.
	procSeries := []string{"go_goroutines", "process_resident_memory_bytes"}
	if runtime.GOOS == "linux" {
		procSeries = append(procSeries, "process_open_fds")
	}
	if n, _ := testutil.GatherAndCount(g, procSeries...); n != len(procSeries) {
		t.Errorf("the Go and process collectors are missing: %d of %d samples of %v", n, len(procSeries), procSeries)
	}
}

// expo is the exposition of one family: its help and type, then a line
// per sample, each given as what follows the name (labels and value).
func expo(name string, samples ...string) string {
	f := infoOf(name)
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, f.help, name, f.kind)
	for _, s := range samples {
		b.WriteString(name + s + "\n")
	}
	return b.String()
}

// sample is the exposition of an unlabelled family with one value.
func sample(name string, v float64) string { return expo(name, fmt.Sprintf(" %v", v)) }

type familyInfo struct{ help, kind string }

// infoOf is a family's help and type, from the reviewed exposition of
// every family (package selfmetrics).
func infoOf(name string) familyInfo {
	golden, err := os.ReadFile("../selfmetrics/testdata/prometheus.txt")
	if err != nil {
		panic(err)
	}
	var f familyInfo
	for line := range strings.Lines(string(golden)) {
		if rest, ok := strings.CutPrefix(line, "# HELP "+name+" "); ok {
			f.help = strings.TrimSuffix(rest, "\n")
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "+name+" "); ok {
			f.kind = strings.TrimSuffix(rest, "\n")
		}
	}
	if f.kind == "" {
		panic("no metric family " + name)
	}
	return f
}

// metricNames lists the families an expected exposition names.
func metricNames(exposition string) []string {
	var names []string
	for line := range strings.Lines(exposition) {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	return names
}

// The viewer role scrapes; an agent token may not; without one, 401.
func TestPrometheusNeedsViewer(t *testing.T) {
	t.Parallel()
	e := newPromEnv(t)
	for _, tc := range []struct {
		token  string
		status int
	}{{"viewer", 200}, {"agent", 403}, {"", 401}} {
		if status, body := e.get(t, "/metrics", tc.token); status != tc.status {
			t.Errorf("token %q: %d, want %d: %s", tc.token, status, tc.status, body)
		}
	}
}
