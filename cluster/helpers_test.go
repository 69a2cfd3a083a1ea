package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

var quiet = testLogger()

func testLogger() *slog.Logger {
	if os.Getenv("APOLLO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// runNATS starts an embedded NATS server with JetStream on a random port,
// its store in a temporary directory; it is shut down when the test ends.
func runNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testRedis returns a Redis client and a key prefix of the test's own when
// APOLLO_TEST_REDIS is set (or required), nil otherwise.
func testRedis(t testing.TB) (redis.UniversalClient, string) {
	if os.Getenv("APOLLO_TEST_REDIS") == "" && os.Getenv("APOLLO_REQUIRE_REDIS") != "1" {
		return nil, ""
	}
	c, prefix := redistest.Client(t)
	return c, prefix
}

// hookEvent is what a node's test hook heard.
type hookEvent struct {
	node  string
	event string
	p     int
	at    time.Time
}

// testNode is one in-process bus node with its own NATS connection and
// its own HTTP API.
type testNode struct {
	*Node
	id   string
	nc   *nats.Conn
	http *httptest.Server
}

// cluster is a set of nodes around one NATS server.
type testCluster struct {
	t      testing.TB
	srv    *server.Server
	rdb    redis.UniversalClient
	prefix string
	parts  int
	ttl    time.Duration
	events chan hookEvent
	nodes  []*testNode
	bus    bus.Options // every node's partition buses
}

func newTestCluster(t testing.TB, parts int, ttl time.Duration) *testCluster {
	c := &testCluster{t: t, srv: runNATS(t), parts: parts, ttl: ttl, events: make(chan hookEvent, 4096)}
	c.rdb, c.prefix = testRedis(t)
	return c
}

func (c *testCluster) options(id string, nc *nats.Conn) Options {
	var sink func(SinkConfig) (MetricsSink, error)
	if c.rdb != nil {
		sink = func(s SinkConfig) (MetricsSink, error) {
			return redisstore.NewFlusher(s.Aggregator, redisstore.Options{Client: c.rdb, Prefix: c.prefix,
				Writer: s.Writer, FlushInterval: 50 * time.Millisecond, Clock: s.Clock, Logger: s.Logger})
		}
	}
	return Options{
		Conn: nc, NodeID: id, Partitions: c.parts, Sink: sink,
		LeaseTTL: c.ttl, Logger: quiet, Bus: c.bus,
		testHook: func(event string, p int) {
			c.events <- hookEvent{node: id, event: event, p: p, at: time.Now()}
		},
	}
}

// start starts a node and its HTTP API.
func (c *testCluster) start(id string) *testNode {
	c.t.Helper()
	return c.startWith(id, nil)
}

// startWith starts a node with options changed by edit.
func (c *testCluster) startWith(id string, edit func(*Options)) *testNode {
	t := c.t
	t.Helper()
	nc := connect(t, c.srv)
	opts := c.options(id, nc)
	if edit != nil {
		edit(&opts)
	}
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tn := &testNode{Node: n, id: id, nc: nc, http: httptest.NewServer(httpapi.New(httpapi.Options{Bus: n}))}
	t.Cleanup(func() {
		tn.http.Close()
		n.Stop(context.Background())
	})
	c.nodes = append(c.nodes, tn)
	return tn
}

// waitServed waits until every partition is served by one of the nodes
// that are not in dead, reading the hooks' events. How soon is for the
// test to judge (TestKillANodeUnderLoad does); the wait is testwait's.
func (c *testCluster) waitServed(dead map[string]bool) map[int]string {
	c.t.Helper()
	return c.waitOwners(dead, "served", func(owner map[int]string) bool { return len(owner) == c.parts })
}

// waitOwners follows who serves each partition (the nodes' owned sets,
// then the hooks' events) until done says the map is as wanted.
func (c *testCluster) waitOwners(dead map[string]bool, what string, done func(owner map[int]string) bool) map[int]string {
	t := c.t
	t.Helper()
	owner := map[int]string{}
	for _, n := range c.nodes {
		if dead[n.id] {
			continue
		}
		n.mu.Lock()
		for p := range n.owned {
			owner[p] = n.id
		}
		n.mu.Unlock()
	}
	timeout := testwait.Timeout(t)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !done(owner) {
		select {
		case e := <-c.events:
			switch {
			case dead[e.node]:
			case e.event == "taken":
				owner[e.p] = e.node
			case owner[e.p] == e.node:
				delete(owner, e.p)
			}
		case <-deadline.C:
			t.Fatalf("after %v the %d partitions are not %s: %v", timeout, c.parts, what, owner)
		}
	}
	return owner
}

// waitBalanced waits until every partition is served and no node serves
// more than its share, ceil(partitions / nodes): from then on no
// partition moves until a node comes or goes. waitServed alone can return
// while the first node still holds every partition, which it gives up to
// the others a renewal later. A test that follows changes on the stream
// needs the calm: the new owner of a partition replays what the old one
// had accepted, and replayed changes are not published.
func (c *testCluster) waitBalanced() {
	c.t.Helper()
	share := (c.parts + len(c.nodes) - 1) / len(c.nodes)
	c.waitOwners(nil, "served and balanced", func(owner map[int]string) bool {
		count := map[string]int{}
		for _, id := range owner {
			count[id]++
		}
		for _, k := range count {
			if k > share {
				return false
			}
		}
		return len(owner) == c.parts
	})
}

// kill cuts a node off NATS without giving anything up, as a crash would.
func (n *testNode) kill() { n.nc.Close() }

// ingestAnswer is the part of POST /api/v1/events's answer the tests read.
type ingestAnswer struct {
	Results []struct {
		Result string        `json:"result"`
		Error  *apollo.Error `json:"error"`
	} `json:"results"`
}

// post sends events to a node's API and returns each event's result.
func post(ctx context.Context, url string, evs []apollo.Event) ([]string, error) {
	body, _ := json.Marshal(evs)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/api/v1/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ans ingestAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if len(ans.Results) != len(evs) {
		return nil, fmt.Errorf("status %d: %d results for %d events", resp.StatusCode, len(ans.Results), len(evs))
	}
	out := make([]string, len(evs))
	for i, r := range ans.Results {
		out[i] = r.Result
	}
	return out, nil
}

// getTask reads a task through a node's API.
func getTask(url, id string) (*apollo.Task, int, error) {
	resp, err := http.Get(url + "/api/v1/tasks/" + id)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, fmt.Errorf("GET task %s: %d %s", id, resp.StatusCode, b)
	}
	var task apollo.Task
	return &task, resp.StatusCode, json.NewDecoder(resp.Body).Decode(&task)
}

// seenChange is a change and the node that published it.
type seenChange struct {
	*apollo.Change
	node string
}

// changeLog records the changes published on apollo.changes.>, per task,
// with the node that applied them, and signals each arrival.
type changeLog struct {
	mu     sync.Mutex
	byTask map[string][]seenChange
	// resyncs counts the markers asking the streams to resynchronise, by
	// the subject's partition.
	resyncs map[int]int
	signal  chan struct{}
}

func recordChanges(t testing.TB, nc *nats.Conn) *changeLog {
	cl := &changeLog{byTask: map[string][]seenChange{}, resyncs: map[int]int{}, signal: make(chan struct{}, 1)}
	sub, err := nc.Subscribe(changesPrefix+">", func(m *nats.Msg) {
		if string(m.Data) == resyncMagic {
			p, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
			if err != nil {
				t.Errorf("a resync marker on %s", m.Subject)
			}
			cl.mu.Lock()
			cl.resyncs[p]++
			cl.mu.Unlock()
			select {
			case cl.signal <- struct{}{}:
			default:
			}
			return
		}
		_, err := decodeChanges(m.Data, func(c *apollo.Change) {
			cl.mu.Lock()
			cl.byTask[c.Task.TaskID] = append(cl.byTask[c.Task.TaskID], seenChange{c, m.Header.Get(hdrNode)})
			cl.mu.Unlock()
		})
		if err != nil {
			t.Errorf("a change that does not decode: %v", err)
			return
		}
		select {
		case cl.signal <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	t.Cleanup(func() { sub.Unsubscribe() })
	// Subscribe only sends the interest: until the server has it, what the
	// nodes publish does not reach this subscription. The round trip of a
	// flush comes back after the server has taken it.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitResyncs waits until every partition of ps had a resync marker, or
// testwait's time went by, and reports those that had none.
func (cl *changeLog) waitResyncs(t testing.TB, ps []int) (missing []int) {
	t.Helper()
	deadline := time.NewTimer(testwait.Timeout(t))
	defer deadline.Stop()
	for {
		cl.mu.Lock()
		missing = missing[:0]
		for _, p := range ps {
			if cl.resyncs[p] == 0 {
				missing = append(missing, p)
			}
		}
		cl.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-cl.signal:
		case <-deadline.C:
			return missing
		}
	}
}

// dump logs, for a failing test, what every node knows of a task's
// partition.
func (c *testCluster) dump(id string) {
	p := Partition(id, c.parts)
	c.t.Logf("task %s is in partition %d", id, p)
	for _, n := range c.nodes {
		st := n.NodeStats()
		for _, ps := range st.Partitions {
			if ps.Partition == p {
				b, _ := json.Marshal(ps)
				c.t.Logf("node %s serves it: %s", n.id, b)
			}
		}
		c.t.Logf("node %s holds leases %v", n.id, st.Leases)
	}
}
