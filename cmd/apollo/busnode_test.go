package main

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
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

	"github.com/apollo-11/apollo/internal/testwait"
)

// TestBusNode runs `apollo bus` against an embedded NATS server and the
// test Redis: an event posted to it is applied (its change is published on
// NATS), the task is served, its partition's metrics reach Redis and are
// served from there, and SIGTERM hands the partitions over and exits 0.
func TestBusNode(t *testing.T) {
	redis := redisURL(t)
	cfg := filepath.Join(t.TempDir(), "apollo.yaml")
	prefix := fmt.Sprintf("apollotest:busnode:%08x", rand.Uint32())
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
