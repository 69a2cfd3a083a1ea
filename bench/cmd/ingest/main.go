// Command ingest measures the HTTP ingest ceiling: the same closed-loop
// load client (bench/internal/harness) against a null HTTP handler, which
// only reads the body and answers {} (this program again, run as a child
// process with -serve-null), and against the real apollo binary
// (apollo server on a fresh data directory, ingest limits off), with
// single events and with batches of 100, under --fsync batch and
// --fsync off, all in the same run. Each repeat runs every target once,
// in the same order; the ratio to the null handler is taken within each
// repeat (same batch size) and the median of those ratios is printed. It
// also prints the serving process's CPU seconds per million events (utime
// plus stime from /proc/PID/stat), the cost figure that does not depend on
// how the two cores are shared between client and server, and the
// client's. It checks that apollo accepted every event it was sent. Then
// (-paced, paced.go) it loads the null handler and apollo open-loop with
// one event per request at a fixed rate and compares the server's CPU per
// request: what a request costs a server that is idle between requests.
//
//	go run ./cmd/ingest -duration 5s -repeat 3
//	go run ./cmd/ingest -short    # a few seconds, for CI
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// config is apollo.yaml for the measured server: no per-token rate limit,
// and room for every task the run creates.
const config = "limits:\n  ingest_per_second: 0\n  tasks: 20000000\n"

type target struct {
	name  string
	fsync string // "" for the null handler
	batch int
}

// sample is one target in one repeat.
type sample struct {
	eps, ratio float64
	p50, p99   time.Duration
	cpuPerM    float64 // server CPU seconds per million events
	clientPerM float64 // the load client's (this process's) CPU seconds per million events
}

func main() {
	bin := flag.String("apollo", "", "apollo binary to measure; empty: build ./cmd/apollo of this repository")
	conc := flag.Int("c", 8, "concurrent requests (closed loop)")
	dur := flag.Duration("duration", 5*time.Second, "how long each target is loaded, per repeat")
	repeat := flag.Int("repeat", 3, "repeats of the whole set of targets")
	lifecycle := flag.Bool("lifecycle", true, "each task reports pending, running, success; false: every event is a new running task")
	paced := flag.Float64("paced", 800, "then load each target open-loop with one event per request at this many requests/s (at most 800: 8 senders × 100/s); 0 skips")
	short := flag.Bool("short", false, "smoke run: 0.5 s per target, one repeat")
	serveNull := flag.Bool("serve-null", false, "internal: serve the null handler (run as a child process)")
	flag.Parse()
	if *serveNull {
		if err := runNull(); err != nil {
			fmt.Fprintln(os.Stderr, "ingest: null handler:", err)
			os.Exit(1)
		}
		return
	}
	if *short {
		*dur, *repeat = 500*time.Millisecond, 1
	}
	cmd := fmt.Sprintf("go run ./cmd/ingest -duration %v -repeat %d -c %d -lifecycle=%v -paced %g", *dur, *repeat, *conc, *lifecycle, *paced)
	if *short {
		cmd = "go run ./cmd/ingest -short"
	}
	if err := run(*bin, *conc, *dur, *repeat, *lifecycle, *paced, cmd); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

func run(bin string, conc int, dur time.Duration, repeat int, lifecycle bool, paced float64, command string) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "apollo-ingest-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "ingest: building apollo")
		if bin, err = harness.Build(context.Background(), "..", dir); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	targets := []target{
		{"null handler", "", 1}, {"null handler", "", 100},
		{"apollo --fsync batch", "batch", 1}, {"apollo --fsync batch", "batch", 100},
		{"apollo --fsync off", "off", 1}, {"apollo --fsync off", "off", 100},
	}
	loadBefore := harness.LoadAvg()
	samples := make([][]sample, len(targets))
	var taskSeq atomic.Int64
	for rep := range repeat {
		nullEPS := map[int]float64{}
		for i, t := range targets {
			s, err := measure(bin, self, t, conc, dur, lifecycle, &taskSeq)
			if err != nil {
				return fmt.Errorf("%s, batch %d: %w", t.name, t.batch, err)
			}
			if t.fsync == "" {
				nullEPS[t.batch] = s.eps
			}
			s.ratio = s.eps / nullEPS[t.batch]
			samples[i] = append(samples[i], s)
			fmt.Fprintf(os.Stderr, "ingest: repeat %d/%d %s batch %d: %.0f events/s, p50 %v p99 %v, ratio %.2f, %.1f CPU s/M events\n",
				rep+1, repeat, t.name, t.batch, s.eps, s.p50, s.p99, s.ratio, s.cpuPerM)
		}
	}
	var pacedSamples [][]pacedSample
	if paced > 0 {
		var err error
		if pacedSamples, err = runPaced(bin, self, paced, dur, repeat); err != nil {
			return err
		}
	}
	report(command, targets, samples, conc, dur, repeat, lifecycle, loadBefore)
	if paced > 0 {
		reportPaced(pacedSamples, paced, dur, repeat)
	}
	return nil
}

// measure loads one target once; apollo runs on a fresh data directory.
// The null handler runs in a child process (this program with
// -serve-null), like apollo, so that both get the same share of a busy
// machine and the same CPU accounting.
func measure(bin, self string, t target, conc int, dur time.Duration, lifecycle bool, seq *atomic.Int64) (sample, error) {
	p, err := startTarget(bin, self, t.fsync)
	if err != nil {
		return sample{}, err
	}
	defer p.Remove()
	defer p.Stop(10 * time.Second)
	url, pid := p.URL(), p.PID()
	cpu0, _ := harness.CPUTime(pid)
	own0, _ := harness.CPUTime(os.Getpid())
	res := harness.ClosedLoop(url, conc, t.batch, dur, func(int) *harness.EventGen {
		return &harness.EventGen{Prefix: "ingest-", Lifecycle: lifecycle, Next: seq}
	})
	s := sample{eps: res.EPS(), p50: res.Latency.Quantile(.5), p99: res.Latency.Quantile(.99)}
	own1, _ := harness.CPUTime(os.Getpid())
	cpu1, err := harness.CPUTime(pid)
	if err != nil {
		return s, err
	}
	if res.Events > 0 {
		s.cpuPerM = (cpu1 - cpu0).Seconds() / float64(res.Events) * 1e6
		s.clientPerM = (own1 - own0).Seconds() / float64(res.Events) * 1e6
	}
	return s, checkLoad(&res, dur)
}

// checkLoad says what went wrong in a load run: a failed request, no
// answer at all, or events answered but not accepted.
func checkLoad(res *harness.LoadResult, dur time.Duration) error {
	switch {
	case res.Failed > 0:
		return fmt.Errorf("%d of %d requests failed (first: %s)", res.Failed, res.Requests, res.Status)
	case res.Events == 0:
		return fmt.Errorf("no request answered within %v", dur)
	case res.Accepted != res.Events:
		return fmt.Errorf("lost events: %d sent in answered requests, %d accepted", res.Events, res.Accepted)
	}
	return nil
}

// startTarget starts apollo with fsync on a fresh data directory, or, for
// fsync "", the null handler.
func startTarget(bin, self, fsync string) (*harness.Proc, error) {
	if fsync == "" {
		return harness.Start(self, harness.Options{Args: []string{"-serve-null"}, Ready: nullReady})
	}
	return harness.Start(bin, harness.Options{Args: []string{"server", "--fsync", fsync}, Config: config})
}

const nullReady = "null handler is up: "

// runNull serves a handler that reads the body and answers {}: the
// ceiling of HTTP ingest with this client on this machine. It announces
// its address on stdout the way apollo does and serves until killed.
func runNull() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("%shttp://%s\n", nullReady, ln.Addr())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
}

func report(command string, targets []target, samples [][]sample, conc int, dur time.Duration, repeat int, lifecycle bool, loadBefore string) {
	mix := "each task reports pending, running and success (three events, in order, from one sender)"
	if !lifecycle {
		mix = "every event is a new running task"
	}
	fmt.Println("## HTTP ingest ceiling")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", command)
	fmt.Printf("One closed-loop client (%d concurrent requests, each sent when the previous is answered; %s) "+
		"loads each target for %v per repeat, %d repeats, all targets in each repeat in the table's order: "+
		"a null handler that reads the body and answers `{}` (this program again, as a child process), and the real `apollo server` "+
		"(built from this tree, fresh data directory per target, ingest rate limit off). Events/s count events in "+
		"requests answered 200 (apollo must answer every one `accepted`); request latency is per request; "+
		"the ratio is taken to the null handler with the same batch size in the same repeat, median over repeats. "+
		"Server CPU is the serving process's utime+stime from /proc per million events: client and server share the machine's %d cores, "+
		"so events/s is what both together manage, and CPU per event is the server's own cost. Load average before the run %s, after it %s (other work on the machine).\n\n", conc, mix, dur, repeat, cores(), loadBefore, harness.LoadAvg())
	fmt.Println("| target | batch | events/s (median, min–max) | request p50 | request p99 | ratio to null | server CPU s / M events | client CPU s / M events |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	var durable, durableCPU, nullCPU, clientCPU float64
	for i, t := range targets {
		eps, lo, hi := harness.Median(pick(samples[i], func(s sample) float64 { return s.eps }))
		p50, _, _ := harness.Median(pick(samples[i], func(s sample) float64 { return float64(s.p50) }))
		p99, _, _ := harness.Median(pick(samples[i], func(s sample) float64 { return float64(s.p99) }))
		ratio, rlo, rhi := harness.Median(pick(samples[i], func(s sample) float64 { return s.ratio }))
		cpu, clo, chi := harness.Median(pick(samples[i], func(s sample) float64 { return s.cpuPerM }))
		cpuCell := fmt.Sprintf("%.1f (%.1f–%.1f)", cpu, clo, chi)
		client, _, _ := harness.Median(pick(samples[i], func(s sample) float64 { return s.clientPerM }))
		ratioCell := "1"
		if t.fsync != "" {
			ratioCell = fmt.Sprintf("%.2f× (%.2f–%.2f)", ratio, rlo, rhi)
		}
		fmt.Printf("| %s | %d | %.0f (%.0f–%.0f) | %v | %v | %s | %s | %.1f |\n", t.name, t.batch, eps, lo, hi,
			roundD(time.Duration(p50)), roundD(time.Duration(p99)), ratioCell, cpuCell, client)
		if t.fsync == "" && t.batch == 100 {
			nullCPU, clientCPU = cpu, client
		}
		if t.fsync == "batch" && t.batch == 100 {
			durable, durableCPU = ratio, cpu
		}
	}
	fmt.Println()
	verdict := "met"
	if durable < 0.5 {
		verdict = "MISSED"
	}
	fmt.Printf("Target: durable batched ingest ≥ 0.5× the null handler (batch 100, --fsync batch) — %s (%.2f×)\n", verdict, durable)
	if verdict == "MISSED" {
		fmt.Println()
		fmt.Printf("The null handler does nothing per event (%.1f µs of CPU per event in its process at batch 100): its events/s is "+
			"the client's cost of building bodies plus HTTP. "+
			"Apollo decodes and validates each event, orders it per task, appends it to the log and fsyncs, applies it "+
			"and aggregates metrics: %.1f µs of server CPU per event here (batch 100, --fsync batch), on the same two cores "+
			"the client needs, so the server's CPU per event sets the ratio. What would fix it: less CPU per event in the "+
			"server's ingest path (profile the decode, log and apply steps), "+
			"and, for the ceiling itself, a load client on its own machine. While client and server share the CPUs, "+
			"events/s is about cores ÷ (client + server CPU per event), so the ratio is (client + null) ÷ (client + apollo): "+
			"with the client at %.1f µs per event (batch 100, against the null handler) 0.5× needs apollo at no more "+
			"than about %.1f µs per event and no time lost waiting for the disk.\n", nullCPU, durableCPU, clientCPU, clientCPU+2*nullCPU)
	}
}

func pick[S any](ss []S, f func(S) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func roundD(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func cores() int { return runtime.NumCPU() }
