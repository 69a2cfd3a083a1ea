package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// redisURL returns the test Redis, or skips (fails with APOLLO_REQUIRE_REDIS=1).
func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("APOLLO_TEST_REDIS")
	if u == "" {
		if os.Getenv("APOLLO_REQUIRE_REDIS") == "1" {
			t.Fatal("APOLLO_TEST_REDIS is not set and APOLLO_REQUIRE_REDIS=1")
		}
		t.Skip("APOLLO_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/15)")
	}
	return u
}

// hook is a webhook receiver that hands each notification to a channel.
type hook struct {
	srv *httptest.Server
	C   chan webhook.ApolloPayload
}

func newHook(t *testing.T) *hook {
	h := &hook{C: make(chan webhook.ApolloPayload, 1000)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.ApolloPayload
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &p) == nil {
			h.C <- p
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// await returns the next notification matching pred, or fails after d
// (at least testwait's: a loaded machine delays, it does not lose).
func (h *hook) await(t *testing.T, d time.Duration, what string, pred func(webhook.ApolloPayload) bool) webhook.ApolloPayload {
	t.Helper()
	d = max(d, testwait.Timeout(t))
	deadline := time.After(d)
	for {
		select {
		case p := <-h.C:
			if pred(p) {
				return p
			}
		case <-deadline:
			t.Fatalf("no %s notification within %v", what, d)
		}
	}
}

// eventually waits, polling every 100 ms, until cond holds or d passes
// (at least testwait's): the processes under test are separate, so their
// state is read by asking.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, testwait.Timeout(t))
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		<-tick.C
	}
}

func apiGet(t *testing.T, addr, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if v != nil {
		json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}

type alertList struct {
	Alerts []apollo.Alert `json:"alerts"`
}

func firing(t *testing.T, addr, rule string) *apollo.Alert {
	var l alertList
	apiGet(t, addr, "/api/v1/alerts?state=firing", &l)
	for i := range l.Alerts {
		if l.Alerts[i].Rule == rule {
			return &l.Alerts[i]
		}
	}
	return nil
}

// writeScenario writes the configuration, rules and jobs every mode runs.
func writeScenario(t *testing.T, hookURL, redis, prefix string) (dir string) {
	dir = t.TempDir()
	cfg := fmt.Sprintf(`channels:
  hook:
    type: webhook
    url: %s
alert:
  interval: 1s
  heartbeat: 1s
  dedup_window: 30s
`, hookURL)
	if redis != "" {
		cfg += fmt.Sprintf("redis:\n  url: %s\n  prefix: %s\n", redis, prefix)
	}
	files := map[string]string{
		"apollo.yaml": cfg,
		"rules.txt": `RULE etl_failed task_prefix: "etl_" ON: failed GROUP_WINDOW: 3s NOTIFY: hook
RULE etl_rate task_prefix: "etl_" WINDOW: 1m THRESHOLD: failed >= 2 NOTIFY: hook
`,
		"jobs.yaml": `jobs:
  - name: etl_broken
    schedule: "@every 1s"
    shell: "echo 'no input' >&2; exit 2"
  - name: etl_fine
    schedule: "@every 1s"
    command: ["true"]
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ackOverStream acknowledges an alert through the WebSocket stream, as the
// dashboard does, and returns the confirmation.
func ackOverStream(t *testing.T, addr, id string) map[string]any {
	return ackOverStreamAs(t, addr, "", id)
}

// ackOverStreamAs is ackOverStream with a token ("": none).
func ackOverStreamAs(t *testing.T, addr, token, id string) map[string]any {
	t.Helper()
	ctx := testwait.Context(t)
	var opts *websocket.DialOptions
	if token != "" {
		opts = &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
			Subprotocols: []string{apiclient.StreamProtocol}}
	}
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/api/v1/stream", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	msg, _ := json.Marshal(map[string]any{"type": "ack", "alert": id})
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the ack result: %v", err)
		}
		var m map[string]any
		json.Unmarshal(data, &m)
		if m["type"] == "ack_result" {
			return m
		}
	}
}

// checkScenario runs the shared scenario against a server (all-in-one or
// the bus of the three processes) at addr.
func checkScenario(t *testing.T, addr string, h *hook) {
	t.Helper()
	// The scheduler's failing job reaches the webhook through the event rule.
	first := h.await(t, 30*time.Second, "etl_failed", func(p webhook.ApolloPayload) bool {
		return p.Alert.Rule == "etl_failed" && p.Kind == apollo.NotifyFiring
	})
	if !strings.Contains(first.Text, "etl_broken") {
		t.Errorf("first notification text: %q", first.Text)
	}
	// Runs and metrics are on the bus.
	var tasks struct{ Tasks []apollo.Task }
	apiGet(t, addr, "/api/v1/tasks?prefix=etl_broken&status=failed", &tasks)
	if len(tasks.Tasks) == 0 {
		t.Fatal("no failed etl_broken runs on the server")
	}
	// The rate rule fires and shows on the bus; acknowledge it over the stream.
	var a *apollo.Alert
	eventually(t, 30*time.Second, "etl_rate firing on the server", func() bool { a = firing(t, addr, "etl_rate"); return a != nil })
	res := ackOverStream(t, addr, a.ID)
	if res["ok"] != true {
		t.Fatalf("ack over the stream: %v", res)
	}
	eventually(t, 15*time.Second, "the ack visible on the server", func() bool {
		b := firing(t, addr, "etl_rate")
		return b != nil && b.AckedBy != ""
	})
}

// The scenario on the all-in-one server: no other service.
func TestScenarioAllInOne(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	dir := writeScenario(t, h.srv.URL, "", "")
	srv := startApollo(t, "server", "--config", filepath.Join(dir, "apollo.yaml"), "--data", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--rules", filepath.Join(dir, "rules.txt"), "--jobs", filepath.Join(dir, "jobs.yaml"))
	checkScenario(t, srv.addr, h)
}

// threeProcesses skips with -short or without Redis, and writes the
// shared scenario for a test of the three processes, under a key prefix of
// its own; with their own processes, files, prefix and webhook, such
// tests run beside each other.
func threeProcesses(t *testing.T, name string) (h *hook, dir, cfg string) {
	t.Helper()
	endToEnd(t)
	_, prefix := redistest.Client(t) // named connections, nothing left (newDeployment)
	h = newHook(t)
	dir = writeScenario(t, h.srv.URL, redistest.URLFor(t, prefix), prefix)
	return h, dir, filepath.Join(dir, "apollo.yaml")
}

// startScenarioBus starts the bus of a test of threeProcesses, on the
// scenario's data directory, and waits until it serves.
func startScenarioBus(t *testing.T, dir, cfg string) *proc {
	t.Helper()
	return startApollo(t, "bus", "--config", cfg, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
}

// The scenario on the three processes around the machine's Redis.
func TestScenarioThreeProcesses(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "3p")
	bus := startScenarioBus(t, dir, cfg)
	startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt"))
	startProc(t, "apollo sched: ", "sched", "--jobs", filepath.Join(dir, "jobs.yaml"), "--server", "http://"+bus.addr,
		"--state", filepath.Join(dir, "sched"))
	checkScenario(t, bus.addr, h)
	var sys map[string]any
	apiGet(t, bus.addr, "/api/v1/system", &sys)
	c, _ := sys["components"].(map[string]any)["alert"].(map[string]any)
	if c["alive"] != float64(1) {
		t.Fatalf("the bus does not see the alert process: %v", sys["components"])
	}
	procs, _ := c["processes"].([]any)
	stats, _ := procs[0].(map[string]any)["stats"].(map[string]any)
	if stats["leader"] != true || stats["alert"] == nil || stats["notifications"] == nil {
		t.Errorf("the alert process's heartbeat lacks its stats: %v", procs[0])
	}
}

// Two alert processes against one Redis: a storm is notified once (first
// message, then one follow-up), even when one of them is killed mid-storm.
func TestAlertHAKilledMidStorm(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "ha")
	rules := filepath.Join(dir, "storm.txt")
	os.WriteFile(rules, []byte(`RULE storm task_prefix: "batch_" ON: failed GROUP_WINDOW: 4s NOTIFY: hook`+"\n"), 0o644)
	bus := startScenarioBus(t, dir, cfg)
	a1 := startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", rules)
	startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", rules)
	storm := func(round, n int) {
		var evs []string
		now := time.Now().UnixMilli()
		for i := range n {
			id := fmt.Sprintf("r%d-%d", round, i)
			evs = append(evs, fmt.Sprintf(`{"taskID":"%s","name":"batch_%d","sequence":1,"status":"running","ts":%d}`, id, i%7, now),
				fmt.Sprintf(`{"taskID":"%s","sequence":2,"status":"failed","ts":%d}`, id, now+int64(i)))
		}
		resp, err := http.Post("http://"+bus.addr+"/api/v1/events", "application/json", strings.NewReader("["+strings.Join(evs, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var mu sync.Mutex
	counts := map[apollo.NotificationKind]int{}
	collect := func(d time.Duration) {
		deadline := time.After(d)
		for {
			select {
			case p := <-h.C:
				if p.Alert.Rule == "storm" {
					mu.Lock()
					counts[p.Kind]++
					mu.Unlock()
				}
			case <-deadline:
				return
			}
		}
	}
	storm(1, 100) // first message now
	h.await(t, 20*time.Second, "storm firing", func(p webhook.ApolloPayload) bool {
		counts[p.Kind]++
		return p.Alert.Rule == "storm" && p.Kind == apollo.NotifyFiring
	})
	storm(2, 100) // more in the same group window
	a1.kill()     // one alert process dies mid-storm
	storm(3, 100)
	// The follow-up goes out when the group window closes, however late a
	// loaded machine makes that; one more window of quiet shows it was sent
	// once.
	h.await(t, testwait.Timeout(t), "storm follow-up", func(p webhook.ApolloPayload) bool {
		if p.Alert.Rule != "storm" {
			return false
		}
		counts[p.Kind]++
		return p.Kind == apollo.NotifyStorm
	})
	collect(4 * time.Second)
	if counts[apollo.NotifyFiring] != 1 || counts[apollo.NotifyStorm] != 1 {
		t.Fatalf("notifications %v: want one first message and one follow-up, no duplicates, none lost", counts)
	}
}

// Each side watches the other: stop the bus and the alert process raises
// apollo_component_down; stop the alert processes and the bus shows it.
func TestComponentDown(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "down")
	bus := startScenarioBus(t, dir, cfg)
	alertProc := startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt"))
	bus.term(t)
	h.await(t, 30*time.Second, "component down", func(p webhook.ApolloPayload) bool {
		return strings.Contains(p.Alert.Rule, "apollo_component_down") && strings.Contains(p.Alert.Summary, "no bus process")
	})
	bus = startScenarioBus(t, dir, cfg)
	alertProc.term(t)
	eventually(t, 30*time.Second, "the bus showing the alert process down", func() bool {
		var sys map[string]any
		apiGet(t, bus.addr, "/api/v1/system", &sys)
		c, _ := sys["components"].(map[string]any)["alert"].(map[string]any)
		return c["alive"] == float64(0) && c["downSince"] != "0001-01-01T00:00:00Z"
	})
}

// term sends SIGTERM and waits for a clean exit.
func (p *proc) term(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Errorf("apollo exited with %v\n%s", p.waitErr, p.out)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("apollo did not stop\n%s", p.out)
	}
}

// Events the bus refuses (here: past limits.tasks) raise the critical
// self-alert through the alert processes.
func TestBusRefusalsRaiseSelfAlert(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "refuse")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, "limits:\n  tasks: 1\n"...), 0o644)
	bus := startScenarioBus(t, dir, cfg)
	startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt"))
	resp, err := http.Post("http://"+bus.addr+"/api/v1/events", "application/json",
		strings.NewReader(`[{"taskID":"a","sequence":1,"status":"running","ts":1764400000001},{"taskID":"b","sequence":1,"status":"running","ts":1764400000001}]`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("status %d, want 429 for the refused event", resp.StatusCode)
	}
	h.await(t, 30*time.Second, "events refused", func(p webhook.ApolloPayload) bool {
		return strings.Contains(p.Alert.Rule, "apollo_events_refused") && p.Alert.Severity == apollo.SeverityCritical
	})
}

// Every component that stops is told by a process still alive (issue
// 15.10): kill -9 the alert process and the bus tells it through its own
// channels (no alert process is left to); kill -9 the scheduler and the
// alert process tells it; kill -9 the bus and the alert process tells it.
func TestKilledComponentsAreNotified(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "killed")
	jobs := filepath.Join(dir, "quiet.yaml")
	os.WriteFile(jobs, []byte("jobs:\n  - name: hourly\n    schedule: \"@every 1h\"\n    command: [\"true\"]\n"), 0o644)
	bus := startScenarioBus(t, dir, cfg)
	alertArgs := []string{"alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt")}
	down := func(kind, from string) webhook.ApolloPayload {
		t.Helper()
		return h.await(t, 30*time.Second, kind+" down, from the "+from, func(p webhook.ApolloPayload) bool {
			return strings.Contains(p.Alert.Rule, "apollo_component_down") && strings.Contains(p.Alert.Summary, kind+" process")
		})
	}

	startProc(t, "apollo alert ", alertArgs...).kill()
	p := down("alert", "bus")
	if p.Alert.Rule != "apollo:apollo_component_down:alert" || p.Kind != apollo.NotifySelf ||
		!strings.HasPrefix(p.Alert.Summary, "no alert process is running: the alert process ") {
		t.Errorf("alert down: %+v", p)
	}

	startProc(t, "apollo alert ", alertArgs...)
	sched := startProc(t, "apollo sched: ", "sched", "--jobs", jobs, "--server", "http://"+bus.addr,
		"--state", filepath.Join(dir, "sched"), "--config", cfg)
	eventually(t, 30*time.Second, "the bus seeing the scheduler", func() bool {
		var sys map[string]any
		apiGet(t, bus.addr, "/api/v1/system", &sys)
		c, _ := sys["components"].(map[string]any)["sched"].(map[string]any)
		return c["alive"] == float64(1)
	})
	sched.kill()
	p = down("sched", "alert process")
	if p.Alert.Rule != "apollo:apollo_component_down:sched" || !strings.Contains(p.Alert.Summary, "without shutting down") {
		t.Errorf("sched down: %+v", p)
	}

	bus.kill()
	p = down("bus", "alert process")
	if p.Alert.Rule != "apollo:apollo_component_down:bus" || !strings.HasPrefix(p.Alert.Summary, "no bus process is running: the bus process ") {
		t.Errorf("bus down: %+v", p)
	}
}
