// Command cluster measures the scale-out mode end to end on this machine,
// beside the single server's data path, in one run: the single server (a
// bus with its write-ahead log), then an embedded NATS server with
// JetStream and 1, 2 and 3 bus nodes in one process, each loaded over HTTP
// by the same client (round-robin over the nodes). The targets take turns,
// round after round, so that a noisy machine weighs on all of them alike;
// the median round of each is reported. It prints the events/s
// acknowledged (stored) and the events/s applied by the partitions'
// owners, from the first request until the last event was applied, with
// the ratio to the first target, and the server CPU per applied event:
// the load client runs as a child process (this program with -load), so
// the CPU this process uses from the first request until the last event
// was applied is the serving side's alone (the NATS server and the nodes,
// or the single server), read from /proc at 10 ms grain.
//
//	go run ./cmd/cluster -targets server,1,2,3 -rounds 3 -duration 10s
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
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/wal"
)

func main() {
	targetsFlag := flag.String("targets", "server,1,2,3", "what to measure, comma-separated: server (one bus with its write-ahead log, in process) or a node count")
	parts := flag.Int("partitions", 12, "partitions")
	dur := flag.Duration("duration", 10*time.Second, "how long each target is loaded, each round")
	rounds := flag.Int("rounds", 2, "rounds; the targets take turns in each, and the median round is reported")
	conc := flag.Int("c", 8, "concurrent requests")
	runs := flag.Int("runs", 30, "runs per request; each reports pending, running, success")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run here, at its end")
	short := flag.Bool("short", false, "smoke run: the server and one node, 2s, one round")
	loadURLs := flag.String("load", "", "internal: be the load client for these comma-separated URLs and print what it measured as JSON")
	flag.Parse()
	if *loadURLs != "" {
		os.Exit(runLoadClient(strings.Split(*loadURLs, ","), *dur, *conc, *runs))
	}
	if *short {
		*targetsFlag, *dur, *rounds = "server,1", 2*time.Second, 1
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		defer writeAllocs(*memprofile)
	}
	// The collector runs as in apollo server and apollo bus, at their
	// default gc_percent, unless GOGC says otherwise.
	gc := "GOGC=" + os.Getenv("GOGC") + ", from the environment"
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(config.Default().GCPercent)
		gc = fmt.Sprintf("gc_percent %d, the default of apollo server and apollo bus", config.Default().GCPercent)
	}
	loadBefore := harness.LoadAvg()
	targets := strings.Split(*targetsFlag, ",")
	byTarget := make([][]result, len(targets))
	for range *rounds {
		for i, tg := range targets {
			tg = strings.TrimSpace(tg)
			var r result
			var err error
			if tg == "server" {
				r, err = measureServer(*dur, *conc, *runs)
			} else {
				n, aerr := strconv.Atoi(tg)
				if aerr != nil || n < 1 {
					fmt.Fprintf(os.Stderr, "cluster: -targets: %q is neither server nor a node count\n", tg)
					os.Exit(2)
				}
				r, err = measure(n, *parts, *dur, *conc, *runs)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "cluster:", err)
				return
			}
			byTarget[i] = append(byTarget[i], r)
		}
	}
	// CPU ratios are taken within each round (the targets ran minutes
	// apart at most, on the same machine load), then the median.
	cpuRatio := make([][]float64, len(byTarget))
	for i, rs := range byTarget {
		for r := range rs {
			cpuRatio[i] = append(cpuRatio[i], rs[r].cpuPerEvent/byTarget[0][r].cpuPerEvent)
		}
		sort.Float64s(cpuRatio[i])
	}
	var results []result
	for _, rs := range byTarget {
		sort.Slice(rs, func(i, j int) bool { return rs[i].applied < rs[j].applied })
		results = append(results, rs[len(rs)/2])
	}
	fmt.Println("## Scale-out: bus nodes behind NATS JetStream")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", strings.TrimSpace("go run ./cmd/cluster "+strings.Join(os.Args[1:], " ")))
	fmt.Printf("The single server (bus + write-ahead log, in process) beside an embedded NATS JetStream with 1..n bus nodes in one process, "+
		"each loaded over HTTP by the same client; %d round(s) of %v per target, the targets taking turns; the median round is shown. "+
		"Everything shares this machine's %d cores, so more nodes cannot add CPU here: the figures show the cost of the mode "+
		"(see docs/scale-out.md for the capacity reasoning).\n\n", *rounds, *dur, runtime.NumCPU())
	fmt.Printf("Server CPU is this process's utime+stime from /proc (10 ms grain) from the first request until the last event was applied, "+
		"over the events applied; the ratio of CPU per event is taken within each round, then the median; the load client runs in a child process and is not counted. For the nodes it includes the embedded NATS server. "+
		"The Go collector runs with %s, for the NATS server too (a nats-server of its own runs at Go's 100). "+
		"Load average before the run %s, after it %s.\n\n", gc, loadBefore, harness.LoadAvg())
	fmt.Printf("| target | events/request | stored events/s | applied events/s (end to end) | p50 request | p99 request | applied, ratio to the first | server CPU per applied event (median round) | CPU per event ÷ the first's in the same round (median, min–max) | bytes/event: events stream | bytes/event: decision log |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range results {
		name := "server (bus + WAL, fsync batch)"
		if r.nodes > 0 {
			name = fmt.Sprintf("%d node(s), %d partitions", r.nodes, *parts)
		}
		cr := cpuRatio[i]
		fmt.Printf("| %s | %d | %.0f | %.0f | %v | %v | %.2f | %.2f µs | %.2f (%.2f–%.2f) | %.0f | %.0f |\n", name, 3**runs, r.stored, r.applied, r.p50, r.p99,
			r.applied/results[0].applied, r.cpuPerEvent, cr[len(cr)/2], cr[0], cr[len(cr)-1], r.eventBytes, r.logBytes)
	}
}

type result struct {
	nodes                int
	stored, applied      float64
	p50, p99             time.Duration
	eventBytes, logBytes float64 // stored bytes per event in the two streams
	cpuPerEvent          float64 // this process's CPU µs per applied event
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
			nd.Stop(context.Background())
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
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.url)
	}
	cpu0, err := harness.CPUTime(os.Getpid())
	if err != nil {
		return result{}, err
	}
	stored, lat, took, err := loadFromChild(urls, dur, conc, runs)
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
	cpu1, err := harness.CPUTime(os.Getpid())
	if err != nil {
		return result{}, err
	}
	eb, lb, err := streamBytes(nodes[0].nc)
	if err != nil {
		return result{}, err
	}
	r := summarize(stored, lat, took, all)
	r.nodes, r.eventBytes, r.logBytes = n, float64(eb)/float64(stored), float64(lb)/float64(stored)
	r.cpuPerEvent = float64((cpu1 - cpu0).Microseconds()) / float64(stored)
	return r, nil
}

func summarize(stored int64, lat []time.Duration, took, all time.Duration) result {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return result{stored: float64(stored) / took.Seconds(), applied: float64(stored) / all.Seconds(),
		p50: lat[len(lat)/2].Round(10 * time.Microsecond), p99: lat[len(lat)*99/100].Round(10 * time.Microsecond)}
}

// measureServer loads the single server's data path in process: one bus
// whose log is the write-ahead log (fsync batch), the metrics aggregator
// as its observer, and the same HTTP API. An event is answered once it is
// durable and decided, so stored and applied are the same.
func measureServer(dur time.Duration, conc, runs int) (result, error) {
	dir, err := os.MkdirTemp("", "apollo-server-bench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := wal.Open(wal.Options{Dir: dir, Sync: wal.SyncBatch, Logger: quiet})
	if err != nil {
		return result{}, err
	}
	defer w.Close()
	agg, err := metrics.New(metrics.Options{Logger: quiet})
	if err != nil {
		return result{}, err
	}
	b, err := bus.New(bus.Options{Log: walLog{w}, Observers: []bus.Observer{agg}, Logger: quiet})
	if err != nil {
		return result{}, err
	}
	b.Start(context.Background())
	defer b.Stop(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: httpapi.New(httpapi.Options{Bus: b, Logger: quiet})}
	go srv.Serve(ln)
	defer srv.Close()
	cpu0, err := harness.CPUTime(os.Getpid())
	if err != nil {
		return result{}, err
	}
	stored, lat, took, err := loadFromChild([]string{"http://" + ln.Addr().String()}, dur, conc, runs)
	if err != nil {
		return result{}, err
	}
	cpu1, err := harness.CPUTime(os.Getpid())
	if err != nil {
		return result{}, err
	}
	r := summarize(stored, lat, took, took)
	r.cpuPerEvent = float64((cpu1 - cpu0).Microseconds()) / float64(stored)
	return r, nil
}

// walLog adapts *wal.Log to bus.Log.
type walLog struct{ l *wal.Log }

func (w walLog) Append(p []byte) (uint64, error) {
	lsn, err := w.l.Append(p)
	return uint64(lsn), err
}

func (w walLog) Wait(ctx context.Context, lsn uint64) error { return w.l.Wait(ctx, wal.LSN(lsn)) }

// streamBytes returns the bytes the events stream and the decision-log
// stream hold.
func streamBytes(nc *nats.Conn) (events, logs uint64, err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, err
	}
	for name, dst := range map[string]*uint64{cluster.EventsStream: &events, cluster.LogStream: &logs} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			return 0, 0, err
		}
		*dst = s.CachedInfo().State.Bytes
	}
	return events, logs, nil
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

// clientReport is what the load client prints.
type clientReport struct {
	Stored int64           `json:"stored"`
	Lat    []time.Duration `json:"lat"`
	Took   time.Duration   `json:"took"`
}

// loadFromChild runs load in a child process (this program with -load),
// so that the client's CPU is not counted as the server's.
func loadFromChild(urls []string, dur time.Duration, conc, runs int) (int64, []time.Duration, time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, nil, 0, err
	}
	cmd := exec.Command(exe, "-load", strings.Join(urls, ","), "-duration", dur.String(),
		"-c", strconv.Itoa(conc), "-runs", strconv.Itoa(runs))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, nil, 0, fmt.Errorf("load client: %w", err)
	}
	var rep clientReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return 0, nil, 0, fmt.Errorf("load client's report: %w", err)
	}
	if len(rep.Lat) == 0 {
		return 0, nil, 0, fmt.Errorf("load client: no request completed")
	}
	return rep.Stored, rep.Lat, rep.Took, nil
}

func runLoadClient(urls []string, dur time.Duration, conc, runs int) int {
	stored, lat, took, err := load(urls, dur, conc, runs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: load:", err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(clientReport{Stored: stored, Lat: lat, Took: took})
	return 0
}

// load posts requests of runs×3 events (each run's pending, running and
// success, in order) from conc goroutines, round-robin over the nodes,
// for dur. It returns the events stored and the request latencies.
func load(urls []string, dur time.Duration, conc, runs int) (int64, []time.Duration, time.Duration, error) {
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
				resp, err := client.Post(urls[(g+i)%len(urls)]+"/api/v1/events", "application/json", bytes.NewReader(body))
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

// writeAllocs writes the allocation profile (every allocation since the
// start, sampled) to path. The profile holds what was allocated up to the
// last collection, so it runs one first: the handover snapshots at the
// end of the run would be missing otherwise.
func writeAllocs(path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: -memprofile:", err)
	}
}
