// Command jetstream puts Apollo-11's durable ingest beside NATS JetStream on
// the same machine, in the same run: the same event JSON (each run reports
// pending, running, success) is published to an embedded nats-server with
// file storage, with synchronous publishes (each waits for its ack) and
// asynchronous ones (PublishAsync, a bounded window of pending acks), with
// the server's default fsync policy and with sync_always (fsync every
// message); and it is reported to the real apollo binary (--fsync batch and
// --fsync off) over HTTP by the agent SDK, which batches like a real
// executor. Each target has the same number of concurrent producers; only
// acknowledged events are counted. The rows take turns in every repeat and
// the ratio Apollo-11 (fsync batch) / JetStream row is taken per repeat.
//
//	go run ./cmd/jetstream -duration 5s -repeat 3 -c 8
//
// Apollo-11 does more per event than JetStream: it runs each task's state
// machine and updates the metrics, not only appends the bytes to a log.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/bench/internal/harness"
)

type target struct {
	name   string
	kind   string // "js" or "apollo"
	async  bool   // js: PublishAsync
	always bool   // js: SyncAlways
	window int    // js async: a smaller pending window than -window, if set
	fsync  string // apollo: --fsync
}

var targets = []target{
	{name: "JetStream file, sync publish", kind: "js"},
	{name: "JetStream file, async publish", kind: "js", async: true},
	{name: "JetStream file + sync_always, sync publish", kind: "js", always: true},
	// With sync_always the server fsyncs message by message and the acks of a
	// deep window come back in one late burst: with 1000 per producer none
	// arrived within 5 s. 64 keeps them flowing.
	{name: "JetStream file + sync_always, async publish", kind: "js", async: true, always: true, window: 64},
	{name: "Apollo-11 --fsync batch (agent SDK over HTTP)", kind: "apollo", fsync: "batch"},
	{name: "Apollo-11 --fsync off (agent SDK over HTTP)", kind: "apollo", fsync: "off"},
}

const apolloBatch = 4 // index of the Apollo-11 --fsync batch row

func main() {
	dur := flag.Duration("duration", 5*time.Second, "how long each row is loaded, each repeat")
	repeat := flag.Int("repeat", 3, "repeats; rows take turns in each")
	conc := flag.Int("c", 8, "concurrent producers, for every row")
	window := flag.Int("window", 1000, "events a producer may have unacknowledged (JetStream async; Apollo-11: between Flushes)")
	batch := flag.Int("batch", 100, "agent SDK batch size (events per request)")
	only := flag.String("only", "", "debugging: run only the rows whose name contains this (ratios need the fsync batch row)")
	short := flag.Bool("short", false, "smoke run: -duration 300ms -repeat 1 -window 100")
	flag.Parse()
	if *short {
		*dur, *repeat, *window = 300*time.Millisecond, 1, 100
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "apollo-bench-js-")
	check(err)
	defer os.RemoveAll(tmp)
	bin, err := harness.Build(ctx, "..", tmp)
	check(err)

	load0 := harness.LoadAvg()
	eps := make([][]float64, len(targets))
	perCPU := make([][]float64, len(targets))
	ratios := make([][]float64, len(targets))
	for rep := range *repeat {
		got := make([]float64, len(targets))
		for i, tg := range targets {
			if *only != "" && !strings.Contains(tg.name, *only) {
				continue
			}
			var n int64
			var cpu float64
			t0 := time.Now()
			if tg.kind == "js" {
				w := *window
				if tg.window > 0 {
					w = min(w, tg.window)
				}
				n, cpu, err = runJetStream(tg, *dur, *conc, w)
			} else {
				n, cpu, err = runApollo(bin, tg.fsync, *dur, *conc, *window, *batch)
			}
			check(err)
			got[i] = float64(n) / dur.Seconds()
			eps[i] = append(eps[i], got[i])
			perCPU[i] = append(perCPU[i], float64(n)/max(cpu, 0.01))
			fmt.Fprintf(os.Stderr, "jetstream: repeat %d: %s: %.0f events/s (row took %v)\n", rep+1, tg.name, got[i], time.Since(t0).Round(time.Millisecond))
		}
		for i := range targets {
			ratios[i] = append(ratios[i], got[apolloBatch]/got[i])
		}
	}

	flags := fmt.Sprintf("-duration %v -repeat %d -c %d -window %d -batch %d", *dur, *repeat, *conc, *window, *batch)
	if *short {
		flags = "-short"
	}
	fmt.Printf("## Against NATS JetStream\n\nCommand: `go run ./cmd/jetstream %s`\n\n", flags)
	fmt.Printf("The same events (each run: pending, running, success; the JSON Apollo-11 takes) from %d concurrent producers, "+
		"%v per row, %d repeat(s), rows taking turns. JetStream: an embedded nats-server with file storage, one stream; "+
		"sync publish waits for each ack, async publish keeps up to %d acks pending per producer; sync_always makes the "+
		"server fsync every message (the durable equivalent of Apollo-11's `--fsync batch`); its async row keeps at most 64 "+
		"acks pending per producer, because the server then fsyncs message by message and the acks of a deeper window come "+
		"back in one late burst (with 1000, none arrived within 5 s). Apollo-11: the real binary "+
		"with its write-ahead log, loaded over HTTP by the agent SDK (one Client per producer, batches of %d, a Flush every %d events). "+
		"Only acknowledged events count. Ratio: Apollo-11 (fsync batch) / the row, per repeat, median. "+
		"**Apollo-11 does more work per event than JetStream**: it runs each task's state machine and updates the "+
		"aggregated metrics, where JetStream only appends the message to its log. The last column divides the acknowledged events "+
		"by the CPU time the row used (this process, which holds the producers and, for JetStream, the embedded server; plus the "+
		"apollo process): the machine is shared, and this figure moves less with its load than events/s does; rows bound by "+
		"fsync latency use little CPU, so it flatters them.\n\n",
		*conc, *dur, *repeat, *window, *batch, *window)
	fmt.Println("| target | events/s (median) | spread (min–max) | Apollo-11 fsync batch / this row | events per CPU-second, client + server (median) |")
	fmt.Println("|---|---|---|---|---|")
	for i, tg := range targets {
		m, lo, hi := harness.Median(eps[i])
		r, _, _ := harness.Median(ratios[i])
		rs := fmt.Sprintf("%.2f", r)
		if m == 0 {
			rs = "— (nothing acknowledged)"
		}
		pc, _, _ := harness.Median(perCPU[i])
		fmt.Printf("| %s | %.0f | %.0f–%.0f | %s | %.0f |\n", tg.name, m, lo, hi, rs, pc)
	}
	fmt.Printf("\nLoad average (1, 5, 15 min) before the rows: %s, after: %s (the machine is shared; the rows take turns so that load weighs on all alike).\n\n", load0, harness.LoadAvg())
}

// acceptedByServer reads apollo_events_total{result="accepted"} from GET /metrics.
func acceptedByServer(url string) (int64, error) {
	m, err := harness.Scrape(url)
	if err != nil {
		return 0, err
	}
	v, ok := m[`apollo_events_total{result="accepted"}`]
	if !ok {
		return 0, fmt.Errorf("GET /metrics: no apollo_events_total{result=\"accepted\"}")
	}
	return int64(v), nil
}

// cpuNow is the user+system CPU seconds of this process, plus those of
// process pid if it is not 0.
func cpuNow(pid int) float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	if pid == 0 {
		return t
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return t
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	if len(f) < 13 {
		return t
	}
	ut, _ := strconv.ParseFloat(f[11], 64) // utime, field 14, in 1/100 s
	kt, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return t + (ut+kt)/100
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "jetstream:", err)
		os.Exit(1)
	}
}

// eventJSON is one event as Apollo-11's protocol has it.
func eventJSON(dst []byte, id int64, step int, ts int64) []byte {
	dst = append(dst, `{"taskID":"load-`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `","name":"load_job_`...)
	dst = strconv.AppendInt(dst, id%100, 10)
	dst = append(dst, `","sequence":`...)
	dst = strconv.AppendInt(dst, int64(step+1), 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, [3]string{"pending", "running", "success"}[step]...)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, ts+int64(step), 10)
	return append(dst, `,"extra":{"host":"worker-7"}}`...)
}

// runJetStream loads a fresh embedded server for d and returns the events
// acknowledged within d.
func runJetStream(tg target, d time.Duration, c, window int) (_ int64, cpu float64, _ error) {
	dir, err := os.MkdirTemp("", "apollo-bench-nats-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true, SyncAlways: tg.always})
	if err != nil {
		return 0, 0, err
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return 0, 0, fmt.Errorf("nats-server not ready")
	}
	ctx := context.Background()
	var acked, failed atomic.Int64
	jss := make([]jetstream.JetStream, c)
	for i := range c {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			return 0, 0, err
		}
		defer nc.Close()
		jss[i], err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window),
			jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { acked.Add(1) }),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
		if err != nil {
			return 0, 0, err
		}
	}
	st, err := jss[0].CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return 0, 0, err
	}
	var seq atomic.Int64
	cpu0 := cpuNow(0)
	lctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for p := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			js := jss[p]
			subj := "events." + strconv.Itoa(p)
			var buf []byte
			for lctx.Err() == nil {
				id := seq.Add(1)
				ts := time.Now().UnixMilli()
				for step := range 3 {
					buf = eventJSON(buf[:0], id, step, ts)
					if tg.async {
						data := append([]byte(nil), buf...) // the client holds it until the ack
						if _, err := js.PublishAsync(subj, data, jetstream.WithStallWait(time.Minute)); err != nil {
							failed.Add(1)
						}
						continue
					}
					if _, err := js.Publish(lctx, subj, buf); err == nil {
						acked.Add(1)
					} else if lctx.Err() == nil {
						failed.Add(1)
					}
				}
			}
		}()
	}
	<-lctx.Done()
	n := acked.Load()
	cpu = cpuNow(0) - cpu0
	wg.Wait()
	// Every ack counted before the stream's info is asked for is a stored
	// message: the stream must hold at least that many. Acks still pending
	// are not waited for (with sync_always they drain at the fsync rate).
	a := acked.Load()
	info, err := st.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	if int64(info.State.Msgs) < a {
		return 0, 0, fmt.Errorf("%s: %d events acknowledged but the stream holds %d", tg.name, a, info.State.Msgs)
	}
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "jetstream: %s: %d publishes failed (not counted)\n", tg.name, f)
	}
	return n, cpu, nil
}

// runApollo starts the real binary and loads it with one agent Client per
// producer for d; it returns the events the server acknowledged within d.
func runApollo(bin, fsync string, d time.Duration, c, window, batch int) (_ int64, cpu float64, _ error) {
	p, err := harness.Start(bin, harness.Options{Args: []string{"server", "--fsync", fsync},
		Config: "limits:\n  ingest_per_second: 0\n  tasks: 10000000\n"})
	if err != nil {
		return 0, 0, err
	}
	defer p.Remove()
	defer p.Kill()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	clients := make([]*agent.Client, c)
	for i := range c {
		clients[i], err = agent.New(p.URL(), agent.WithBatchSize(batch), agent.WithBufferSize(2*window+3), agent.WithLogger(quiet))
		if err != nil {
			return 0, 0, err
		}
	}
	acked := func() int64 {
		var n int64
		for _, cl := range clients {
			s := cl.Stats()
			n += int64(s.Accepted + s.Held)
		}
		return n
	}
	cpu0 := cpuNow(p.PID())
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	extra := agent.Extra(map[string]any{"host": "worker-7"})
	var seq atomic.Int64
	var errs sync.Map
	var wg sync.WaitGroup
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[i]
			queued := 0
			for ctx.Err() == nil {
				id := seq.Add(1)
				t := cl.Task("load-"+strconv.FormatInt(id, 10), "load_job_"+strconv.FormatInt(id%100, 10))
				for _, report := range []func(*agent.Task, ...agent.EventOption) error{(*agent.Task).Pending, (*agent.Task).Running, (*agent.Task).Succeed} {
					if err := report(t, extra); err != nil {
						errs.Store(err.Error(), true)
					}
				}
				if queued += 3; queued >= window {
					cl.Flush(ctx)
					queued = 0
				}
			}
		}()
	}
	<-ctx.Done()
	n := acked()
	cpu = cpuNow(p.PID()) - cpu0
	wg.Wait()
	var bad []string
	for _, cl := range clients {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := cl.Close(cctx); err != nil {
			bad = append(bad, err.Error())
		}
		ccancel()
		if s := cl.Stats(); s.Rejected+s.Dropped+s.Duplicate > 0 {
			bad = append(bad, fmt.Sprintf("%d rejected, %d dropped, %d duplicate", s.Rejected, s.Dropped, s.Duplicate))
		}
	}
	errs.Range(func(k, _ any) bool { bad = append(bad, k.(string)); return true })
	if stored, err := acceptedByServer(p.URL()); err != nil {
		bad = append(bad, err.Error())
	} else if final := acked(); stored < final {
		bad = append(bad, fmt.Sprintf("the SDK saw %d events acknowledged, the server counts %d accepted", final, stored))
	}
	if len(bad) > 0 {
		return 0, 0, fmt.Errorf("apollo --fsync %s: events lost: %s", fsync, strings.Join(bad, "; "))
	}
	return n, cpu, nil
}
