package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/apollo-11/apollo/internal/testwait"
)

// runNATSAt starts a NATS server with JetStream on port (0: a free one)
// over the store in dir; the test shuts it down at its end if it still
// runs.
func runNATSAt(t *testing.T, port int, dir string) *natsserver.Server {
	t.Helper()
	if port == 0 {
		port = natsserver.RANDOM_PORT
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true})
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

// natsState is what a node's GET /api/v1/system says of its connection
// to NATS (cluster.nats).
func natsState(t *testing.T, addr, secret string) string {
	t.Helper()
	code, body := request(t, addr, secret, "GET", "/api/v1/system")
	var sys struct {
		Cluster struct {
			NATS string `json:"nats"`
		} `json:"cluster"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &sys) != nil {
		t.Fatalf("GET /api/v1/system: %d %s", code, body)
	}
	return sys.Cluster.NATS
}

// A node cut off NATS for a while says so, at once, to every client
// (an event: retry_later; a listing: 503) and in GET /api/v1/system,
// instead of waiting out its timeouts and blaming JetStream or the
// partitions' owners; an event it answered retry_later meanwhile was not
// sent. Once NATS is back it reconnects by itself, the events are taken
// again, and what it accepted before, in both tenants, is there.
// Before, an event waited 5 s for "JetStream did not answer in time"
// (and was then sent from the client's reconnect buffer, stored although
// answered retry_later), and a listing waited 2 s for "partitions 0, 1
// (2 of 2) did not answer within 2s: their owner is changing or too busy".
func TestBusNodeCutOffNATSSaysSoAndRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ns := runNATSAt(t, 0, dir)
	port := ns.Addr().(*net.TCPAddr).Port
	start, tokens := busNodesWithTenants(t, ns.ClientURL(), 2)
	p := start("cut-1")
	servedWhenReady(t, p.addr)
	event := func(seq int, status string) string {
		return fmt.Sprintf(`{"taskID":"cut-run","name":"nightly","sequence":%d,"status":%q,"ts":%d}`, seq, status, 1_764_547_200_000+seq)
	}
	for _, tenant := range tenants {
		if got := postAs(t, p.addr, tokens[tenant], event(1, "running")); !strings.Contains(got, `"accepted":1`) {
			t.Fatalf("tenant %s: %s", tenant, got)
		}
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	eventually(t, testwait.Timeout(t), "the node saying it is cut off NATS", func() bool {
		return natsState(t, p.addr, tokens["acme"]) == "reconnecting"
	})
	for _, tenant := range tenants {
		code, got := requestBody(t, p.addr, tokens[tenant], "POST", "/api/v1/events", event(3, "failed"))
		if code != 429 || !strings.Contains(got, `"retryLater":1`) || !strings.Contains(got, "cut off NATS") {
			t.Errorf("tenant %s: an event while the node is cut off NATS: %d %s", tenant, code, got)
		}
		// A listing asks every node over NATS (a task read of a
		// partition the node still holds is answered from its memory).
		code, body := request(t, p.addr, tokens[tenant], "GET", "/api/v1/tasks")
		if code != 503 || !strings.Contains(body, "cut off NATS") {
			t.Errorf("tenant %s: a listing while the node is cut off NATS: %d %s", tenant, code, body)
		}
	}

	runNATSAt(t, port, dir)
	eventually(t, testwait.Timeout(t), "the node reconnected", func() bool {
		return natsState(t, p.addr, tokens["acme"]) == "connected"
	})
	for _, tenant := range tenants {
		// As a client does with retry_later: resend until taken.
		eventually(t, testwait.Timeout(t), "the success taken", func() bool {
			_, got := requestBody(t, p.addr, tokens[tenant], "POST", "/api/v1/events", event(2, "success"))
			return strings.Contains(got, `"accepted":1`)
		})
	}
	for _, tenant := range tenants {
		var task struct {
			Tenant, Status string
			Sequence       int
			History        []struct{ Sequence int }
		}
		eventually(t, testwait.Timeout(t), "the task read back", func() bool {
			code, body := request(t, p.addr, tokens[tenant], "GET", "/api/v1/tasks/cut-run")
			return code == 200 && json.Unmarshal([]byte(body), &task) == nil && task.Sequence == 2
		})
		if task.Tenant != tenant || task.Status != "success" || len(task.History) != 2 {
			t.Errorf("tenant %s: the task after NATS came back: %+v; want its two events, and not the one answered retry_later", tenant, task)
		}
	}
}

// A node pointed at a NATS server without JetStream refuses to start and
// says what to do. Before, it said "cluster: the APOLLO_EVENTS stream:
// nats: no responders available for request", which names neither.
func TestBusNodeSaysTheNATSServerHasNoJetStream(t *testing.T) {
	t.Parallel()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	code, stderr := runBinary(t, busNodeArgs(ns.ClientURL(), "nojs")...)
	if code != 1 || !strings.Contains(stderr, "has no JetStream") || !strings.Contains(stderr, "nats-server -js") {
		t.Fatalf("a node on a NATS server without JetStream: exit %d:\n%s", code, stderr)
	}
}

// readyz is a node's GET /readyz: its status code and body.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A node cut off NATS answers GET /readyz 503, saying why, so that a load
// balancer sends its clients to another node; once it has reconnected,
// 200 again, and it takes both tenants' events. Before, /readyz answered
// 200 all along while every event was answered retry_later.
func TestBusNodeNotReadyWhileCutOffNATS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ns := runNATSAt(t, 0, dir)
	port := ns.Addr().(*net.TCPAddr).Port
	start, tokens := busNodesWithTenants(t, ns.ClientURL(), 2)
	p := start("unready-1")
	servedWhenReady(t, p.addr)

	ns.Shutdown()
	ns.WaitForShutdown()
	eventually(t, testwait.Timeout(t), "the node saying it is cut off NATS", func() bool {
		return natsState(t, p.addr, tokens["acme"]) == "reconnecting"
	})
	if code, body := readyz(t, p.addr); code != 503 || !strings.Contains(body, `"status":"unavailable"`) ||
		!strings.Contains(body, "cut off NATS") {
		t.Errorf("GET /readyz while the node is cut off NATS: %d %s; want 503 saying why", code, body)
	}

	runNATSAt(t, port, dir)
	eventually(t, testwait.Timeout(t), "GET /readyz 200 after NATS came back", func() bool {
		code, _ := readyz(t, p.addr)
		return code == 200
	})
	ts := time.Now().UnixMilli()
	for _, tenant := range tenants {
		ev := fmt.Sprintf(`{"taskID":"unready-run","name":"nightly","sequence":1,"status":"running","ts":%d}`, ts)
		eventually(t, testwait.Timeout(t), "tenant "+tenant+"'s event taken", func() bool {
			_, got := requestBody(t, p.addr, tokens[tenant], "POST", "/api/v1/events", ev)
			return strings.Contains(got, `"accepted":1`)
		})
	}
	for _, tenant := range tenants {
		eventually(t, testwait.Timeout(t), "tenant "+tenant+"'s task read back", func() bool {
			code, body := request(t, p.addr, tokens[tenant], "GET", "/api/v1/tasks/unready-run")
			return code == 200 && strings.Contains(body, `"tenant":"`+tenant+`"`) && strings.Contains(body, `"status":"running"`)
		})
	}
}
