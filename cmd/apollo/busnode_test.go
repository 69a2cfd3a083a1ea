package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// TestBusNode runs `apollo bus` against an embedded NATS server and the
// test Redis: an event posted to it is applied (its change is published on
// NATS), the task is served, its partition's metrics reach Redis and are
// served from there, and SIGTERM hands the partitions over and exits 0.
func TestBusNode(t *testing.T) {
	redis := redisURL(t)
	cfg := filepath.Join(t.TempDir(), "apollo.yaml")
	_, prefix := redistest.Client(t)
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("redis:\n  url: %s\n  prefix: %s\n", redis, prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := startNATS(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	changes, err := nc.SubscribeSync("apollo.changes.>")
	if err != nil {
		t.Fatal(err)
	}

	p := startApollo(t, "bus", "--nats", ns.ClientURL(), "--partitions", "2", "--node-id", "node-a", "--listen", "127.0.0.1:0",
		"--config", cfg)
	body := `{"taskID":"bn-1","name":"busnode","sequence":1,"status":"running","ts":` + strconv.FormatInt(time.Now().UnixMilli(), 10) + `}`
	resp, err := http.Post("http://"+p.addr+"/api/v1/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST event: %d", resp.StatusCode)
	}
	m, err := changes.NextMsg(20 * time.Second) // the node claims its partitions within a renewal interval
	if err != nil {
		t.Fatalf("the event was not applied: %v\n%s", err, p.out)
	}
	// The change's wire form is the cluster package's (binary since issue
	// 20.5); the task's ID is in it as its bytes.
	if !strings.Contains(string(m.Data), "bn-1") {
		t.Fatalf("the change does not name task bn-1: %q", m.Data)
	}
	resp, err = http.Get("http://" + p.addr + "/api/v1/tasks/bn-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET task: %d", resp.StatusCode)
	}

	// The partition's flusher writes the run to Redis; the node's metrics
	// routes read it back from there.
	eventually(t, testwait.Timeout(t), "the job's metrics served from Redis", func() bool {
		var m struct{ Jobs []struct{ Name string } }
		return apiGet(t, p.addr, "/api/v1/metrics", &m) == http.StatusOK &&
			slices.ContainsFunc(m.Jobs, func(j struct{ Name string }) bool { return j.Name == "busnode" })
	})

	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", p.waitErr, p.out)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("no exit after SIGTERM\n%s", p.out)
	}
	if !strings.Contains(p.out.String(), "partition handed over") {
		t.Errorf("the node did not hand its partitions over:\n%s", p.out)
	}
}

// startNATS runs an embedded NATS server with JetStream until the test
// ends.
func startNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// A node serves its API over TLS when the configuration names a
// certificate, as apollo server does: a node once served plain HTTP
// whatever tls: said, sending tokens in the clear.
func TestBusNodeServesTLS(t *testing.T) {
	t.Parallel()
	cert, key := writeSelfSigned(t)
	cfg := filepath.Join(t.TempDir(), "apollo.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("tls:\n  cert: %s\n  key: %s\n", cert, key)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startApollo(t, "bus", "--nats", startNATS(t).ClientURL(), "--partitions", "2", "--node-id", "tls-node",
		"--listen", "127.0.0.1:0", "--config", cfg)
	_, port, _ := net.SplitHostPort(p.addr)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, cert)}}}
	resp, err := client.Get("https://localhost:" + port + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz over TLS: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatalf("plain HTTP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP on the TLS port: %d, want 400", resp.StatusCode)
	}
}

// A node started with --insecure-no-auth says so in its log, as apollo
// server does.
func TestBusNodeWarnsWithoutAuth(t *testing.T) {
	t.Parallel()
	p := startApollo(t, "bus", "--nats", startNATS(t).ClientURL(), "--partitions", "2", "--node-id", "open-node",
		"--listen", "127.0.0.1:0", "--insecure-no-auth")
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("no exit after SIGTERM\n%s", p.out)
	}
	if !strings.Contains(p.out.String(), "WITHOUT authentication") {
		t.Errorf("no warning in the node's log:\n%s", p.out)
	}
}

// A node given a Redis that does not answer stops at start with what to
// do, as the three-process bus does, instead of serving with its metrics
// going nowhere.
func TestBusNodeChecksRedisAtStart(t *testing.T) {
	t.Parallel()
	code, stderr := runBinary(t, "bus", "--nats", startNATS(t).ClientURL(), "--partitions", "2", "--node-id", "no-redis",
		"--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1/0")
	if code != 1 || !strings.Contains(stderr, "redis at redis://127.0.0.1:1/0 does not answer") || !strings.Contains(stderr, "give the right --redis") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// The scenario of every mode on two scale-out nodes beside an alert
// process, as docs/scale-out.md promises ("alerting is apollo alert's, as
// in the three-process mode"): the scheduler reports to one node; the
// event rule fires from the changes the partitions' owners publish; the
// other node shows the rate rule's alert and takes its ack over its
// stream. Before, a node published no change to Redis (the event rule
// never fired) and answered 503 "alerting is not running" to every
// alerts, rules and silences route.
func TestScenarioScaleOut(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "scale")
	url := startNATS(t).ClientURL()
	node := func(id string) *proc {
		return startApollo(t, "bus", "--nats", url, "--partitions", "4", "--node-id", id, "--listen", "127.0.0.1:0", "--config", cfg)
	}
	n1, n2 := node("scale-1"), node("scale-2")
	// Until the first node has handed the second its share, a listing
	// may find a partition between owners (503, retry): wait for that.
	eventually(t, testwait.Timeout(t), "two partitions served by each node", func() bool {
		return len(servedBy(t, n1.addr)) == 2 && len(servedBy(t, n2.addr)) == 2
	})
	startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt"))
	startProc(t, "apollo sched: ", "sched", "--jobs", filepath.Join(dir, "jobs.yaml"), "--server", "http://"+n1.addr,
		"--state", filepath.Join(dir, "sched"))
	checkScenario(t, n2.addr, h)
}

// servedBy lists the partitions a node serves (GET /api/v1/system).
func servedBy(t *testing.T, addr string) []int {
	var sys struct {
		Cluster struct{ Partitions []struct{ Partition int } }
	}
	apiGet(t, addr, "/api/v1/system", &sys)
	var ps []int
	for _, p := range sys.Cluster.Partitions {
		ps = append(ps, p.Partition)
	}
	return ps
}

// Rules and silences written through one scale-out node, as two tenants,
// are shown and act through another after the node written through and
// the alert process die with SIGKILL (invariant 9): they live in Redis, as
// in the three-process mode. Before, every such route of a node answered
// 503 "alerting is not running on this server".
func TestScaleOutWritesSurviveANode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{})
	url := startNATS(t).ClientURL()
	node := func(id string) []string {
		return []string{"bus", "--config", filepath.Join(d.dir, "apollo.yaml"), "--nats", url, "--partitions", "4",
			"--node-id", id, "--listen", "127.0.0.1:0"}
	}
	d.args = node("w-1")
	d.start()
	t.Cleanup(d.logOnFailure)
	second := startApollo(t, node("w-2")...)

	d.setEventRules()
	acme := d.silence("acme", `"rule":"acme_failed"`)
	d.alert.kill()
	d.api.kill()
	d.api, d.args = second, node("w-2")
	d.alert = startProc(t, "apollo alert ", "alert", "--config", filepath.Join(d.dir, "apollo.yaml"))

	for _, tenant := range tenants {
		var rules struct{ Source string }
		d.do(tenant, "GET", "/api/v1/rules", "", &rules, 200)
		if want := fmt.Sprintf("RULE %s_failed task_prefix: %q ON: failed NOTIFY: hook\n", tenant, tenant+"_"); rules.Source != want {
			t.Errorf("tenant %s: rules through the other node %q, want %q", tenant, rules.Source, want)
		}
		var sil struct{ Silences []struct{ ID string } }
		d.do(tenant, "GET", "/api/v1/silences", "", &sil, 200)
		if n := len(sil.Silences); (tenant == "acme") != (n == 1 && sil.Silences[0].ID == acme) || tenant != "acme" && n != 0 {
			t.Errorf("tenant %s: silences through the other node %+v, want only acme's %s", tenant, sil.Silences, acme)
		}
	}
	// Reported through the node that is left, some to partitions whose
	// owner died: globex's failure is told, acme's is held by its silence
	// and shown silenced. The alert process also tells of the dead node
	// (its heartbeat stopped), and perhaps of the alert process killed
	// before it.
	d.fail("acme", "acme_load")
	d.fail("globex", "globex_load")
	var told, nodeDown bool
	for !told || !nodeDown {
		p := h.await(t, 30*time.Second, "globex's firing and the node's death", func(webhook.ApolloPayload) bool { return true })
		switch {
		case p.Kind == apollo.NotifySelf && p.Alert.Rule == "apollo:apollo_component_down:bus" &&
			strings.Contains(p.Alert.Summary, "bus processes still running: 1"):
			nodeDown = true // and the node left is seen running
		case p.Kind == apollo.NotifySelf && p.Alert.Rule == "apollo:apollo_component_down:alert":
		case p.Kind == apollo.NotifyFiring && p.Alert.Tenant == "globex" && p.Alert.Rule == "globex_failed":
			told = true
		default:
			t.Fatalf("a %s notification of tenant %q, rule %q (%s)", p.Kind, p.Alert.Tenant, p.Alert.Rule, p.Alert.Summary)
		}
	}
	if a := d.firingAlert("acme", "acme_failed"); !slices.Equal(a.SilencedBy, []string{acme}) {
		t.Errorf("acme's alert shown %+v, want silenced by %s", a, acme)
	}
}

// A node's counters on /metrics count since the process started, as
// docs/monitoring.md says of every process: they do not go down when the
// node hands partitions to a node that joins. Before, a node summed the
// partitions it served at the scrape, so its apollo_events_total fell by
// the partitions it handed over, which Prometheus reads as a reset (rate
// and increase count the whole remaining total again).
func TestBusNodeCountersDoNotFallAtAHandover(t *testing.T) {
	t.Parallel()
	url := startNATS(t).ClientURL()
	node := func(id string) *proc {
		return startApollo(t, "bus", "--nats", url, "--partitions", "4", "--node-id", id, "--listen", "127.0.0.1:0")
	}
	first := node("count-1")
	eventually(t, testwait.Timeout(t), "the first node serving every partition", func() bool { return len(servedBy(t, first.addr)) == 4 })
	var evs []string
	now := time.Now().UnixMilli()
	for i := range 40 {
		evs = append(evs, fmt.Sprintf(`{"taskID":"count-%d","sequence":1,"status":"running","ts":%d}`, i, now))
	}
	resp, err := http.Post("http://"+first.addr+"/api/v1/events", "application/json", strings.NewReader("["+strings.Join(evs, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	accepted := func(addr string) int {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, `apollo_events_total{result="accepted"} `); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return -1
	}
	eventually(t, testwait.Timeout(t), "40 events counted", func() bool { return accepted(first.addr) == 40 })
	second := node("count-2")
	eventually(t, testwait.Timeout(t), "two partitions handed over", func() bool { return len(servedBy(t, second.addr)) == 2 })
	if n := accepted(first.addr); n != 40 {
		t.Errorf("the first node counts %d accepted events after handing two partitions over, want the 40 it decided", n)
	}
}

// A node without Redis answers the alerting routes 503 with what to do in
// its mode: give the nodes Redis and run apollo alert. Before, it said
// "start apollo server (or apollo alert)", which in this mode leads
// nowhere (a node's alerting is apollo alert's, through Redis).
func TestBusNodeWithoutRedisSaysHowToAlert(t *testing.T) {
	t.Parallel()
	p := startApollo(t, busNodeArgs(startNATS(t).ClientURL(), "no-alerts")...)
	for _, path := range []string{"/api/v1/alerts", "/api/v1/rules", "/api/v1/silences"} {
		resp, err := http.Get("http://" + p.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "give the nodes --redis") ||
			!strings.Contains(string(b), "run apollo alert") || strings.Contains(string(b), "apollo server") {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
}
