// Command cluster measures the scale-out mode end to end on this machine:
// an embedded NATS server with JetStream and 1, 2, then 3 bus nodes in one
// process, loaded over HTTP by the same client, round-robin over the
// nodes. It prints, per node count, the events/s acknowledged (stored in
// JetStream) and the events/s applied by the partitions' owners, from the
// first request until the last event was applied, with the ratio to one
// node.
//
//	go run ./cmd/cluster -nodes 1,2,3 -duration 10s
//
// Everything shares the machine's cores: the NATS server, every node and
// the load client. On 2 cores more nodes cannot add CPU; the numbers show
// the cost of the mode, not the gain of more machines.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/httpapi"
)

func main() {
	nodesFlag := flag.String("nodes", "1,2,3", "node counts to measure, comma-separated")
	parts := flag.Int("partitions", 12, "partitions")
	dur := flag.Duration("duration", 10*time.Second, "how long each cluster is loaded")
	conc := flag.Int("c", 8, "concurrent requests")
	runs := flag.Int("runs", 30, "runs per request; each reports pending, running, success")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	var results []result
	for _, s := range strings.Split(*nodesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "cluster: -nodes: %q is not a node count\n", s)
			os.Exit(2)
		}
		r, err := measure(n, *parts, *dur, *conc, *runs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			return
		}
		results = append(results, r)
	}
	fmt.Printf("| nodes | partitions | events/request | stored events/s | applied events/s (end to end) | p50 request | p99 request | applied, ratio to 1 node |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %d | %d | %d | %.0f | %.0f | %v | %v | %.2f |\n", r.nodes, *parts, 3**runs, r.stored, r.applied, r.p50, r.p99, r.applied/results[0].applied)
	}
}

type result struct {
	nodes           int
	stored, applied float64
	p50, p99        time.Duration
}

type node struct {
	*cluster.Node
	nc  *nats.Conn
	url string
	srv *http.Server
}

// measure starts a fresh NATS server and n nodes, loads them for dur and
// waits until every stored event has been applied.
func measure(n, parts int, dur time.Duration, conc, runs int) (result, error) {
	dir, err := os.MkdirTemp("", "apollo-cluster-bench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return result{}, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		return result{}, fmt.Errorf("NATS did not start")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*node
	defer func() {
		for _, nd := range nodes {
			nd.srv.Close()
			nd.Stop()
			nd.nc.Close()
		}
	}()
	for i := range n {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			return result{}, err
		}
		c, err := cluster.New(cluster.Options{Conn: nc, NodeID: fmt.Sprintf("bench-%d", i+1), Partitions: parts, Logger: quiet,
			LeaseTTL: 3 * time.Second})
		if err != nil {
			return result{}, err
		}
		if err := c.Start(context.Background()); err != nil {
			return result{}, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return result{}, err
		}
		srv := &http.Server{Handler: httpapi.New(httpapi.Options{Bus: c, Logger: quiet})}
		go srv.Serve(ln)
		nodes = append(nodes, &node{Node: c, nc: nc, url: "http://" + ln.Addr().String(), srv: srv})
	}
	if err := waitServed(nodes, parts, 30*time.Second); err != nil {
		return result{}, err
	}
	stored, lat, took, err := load(nodes, dur, conc, runs)
	if err != nil {
		return result{}, err
	}
	start := time.Now().Add(-took)
	deadline := time.Now().Add(2 * time.Minute)
	for applied(nodes) < stored {
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%d nodes: only %d of %d events applied after 2 minutes", n, applied(nodes), stored)
		}
		time.Sleep(10 * time.Millisecond) // a benchmark polls; tests never do
	}
	all := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return result{nodes: n, stored: float64(stored) / took.Seconds(), applied: float64(stored) / all.Seconds(),
		p50: lat[len(lat)/2].Round(10 * time.Microsecond), p99: lat[len(lat)*99/100].Round(10 * time.Microsecond)}, nil
}

func waitServed(nodes []*node, parts int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		served := 0
		for _, nd := range nodes {
			served += len(nd.NodeStats().Partitions)
		}
		if served == parts {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d partitions served after %v", served, parts, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func applied(nodes []*node) int64 {
	var n int64
	for _, nd := range nodes {
		for _, ps := range nd.NodeStats().Partitions {
			n += ps.Bus.Accepted
		}
	}
	return n
}

// load posts requests of runs×3 events (each run's pending, running and
// success, in order) from conc goroutines, round-robin over the nodes,
// for dur. It returns the events stored and the request latencies.
func load(nodes []*node, dur time.Duration, conc, runs int) (int64, []time.Duration, time.Duration, error) {
	var stored atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr atomic.Pointer[error]
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	start := time.Now()
	stop := start.Add(dur)
	var wg sync.WaitGroup
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(stop); i++ {
				evs := make([]apollo.Event, 0, 3*runs)
				ts := time.Now().UnixMilli()
				for r := range runs {
					id := fmt.Sprintf("r-%d-%d-%d", g, i, r)
					name := fmt.Sprintf("job-%d", r%20)
					evs = append(evs,
						apollo.Event{TaskID: id, Name: name, Sequence: 1, Status: apollo.StatusPending, Ts: ts},
						apollo.Event{TaskID: id, Name: name, Sequence: 2, Status: apollo.StatusRunning, Ts: ts},
						apollo.Event{TaskID: id, Name: name, Sequence: 3, Status: apollo.StatusSuccess, Ts: ts, CostMs: 10})
				}
				body, _ := json.Marshal(evs)
				t0 := time.Now()
				resp, err := client.Post(nodes[(g+i)%len(nodes)].url+"/api/v1/events", "application/json", bytes.NewReader(body))
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				var ans struct {
					Accepted int `json:"accepted"`
				}
				json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				stored.Add(int64(ans.Accepted))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, nil, 0, *e
	}
	return stored.Load(), lat, time.Since(start), nil
}
