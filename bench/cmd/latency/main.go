// Command latency measures event → WebSocket latency: the time from an
// event's scheduled send time to the first WebSocket message that carries
// its task's new state, at 1 000 and 10 000 events/s and at the highest
// rate the server sustains, with 1 and with 100 stream clients, each
// subscribed to every task change without coalescing (docs/stream.md). It
// also reports the HTTP accept latency (scheduled send → 200 answer).
//
// The load is open-loop (harness.OpenLoop): 8 senders, each sending one
// request every 10 ms with the events that fell due since its previous
// one, whatever the answers; every event is a new running task. Each
// point runs the real apollo binary on a fresh data directory. The
// maximum is found by a short step search (doubling, then bisecting) for
// the highest rate that keeps up: every request answered 200, senders on
// schedule, every client receives every event, no growing lag. Events
// answered 200 that a client never receives are a correctness failure
// (exit 1).
//
//	go run ./cmd/latency -duration 10s -repeat 3
//	go run ./cmd/latency -short    # a few seconds, for CI
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

type opts struct {
	bin, fsync       string
	clients          []int
	rates            []float64
	dur, step, drain time.Duration
	repeat           int
	senders          int
	tick             time.Duration
	lag              time.Duration
	startRate        float64
	steps            int // bisection steps of the search
	retry            int // extra tries of a step that does not keep up
	search           bool
}

func main() {
	var o opts
	flag.StringVar(&o.bin, "apollo", "", "apollo binary to measure; empty: build ./cmd/apollo of this repository")
	flag.StringVar(&o.fsync, "fsync", "batch", "the server's --fsync policy")
	clients := flag.String("clients", "1,100", "numbers of stream clients, comma-separated")
	rates := flag.String("rates", "1000,10000", "fixed rates in events/s, comma-separated (the maximum is searched besides)")
	flag.DurationVar(&o.dur, "duration", 10*time.Second, "length of each measured point")
	flag.DurationVar(&o.step, "step", 3*time.Second, "length of each step of the search for the maximum")
	flag.DurationVar(&o.drain, "drain", 5*time.Second, "how long after the load the last deliveries may take")
	flag.IntVar(&o.repeat, "repeat", 3, "repeats of each fixed-rate point (the maximum is measured once)")
	flag.IntVar(&o.senders, "senders", 8, "open-loop sender goroutines")
	flag.DurationVar(&o.tick, "tick", 10*time.Millisecond, "each sender's request interval")
	flag.DurationVar(&o.lag, "lag", 25*time.Millisecond, "the search's bound on the last quarter's median latency")
	flag.Float64Var(&o.startRate, "search-from", 20000, "first rate the search tries")
	flag.IntVar(&o.steps, "bisect", 3, "bisection steps of the search")
	flag.IntVar(&o.retry, "retry", 1, "extra tries of a search step that does not keep up")
	flag.BoolVar(&o.search, "search", true, "search for the maximum sustainable rate after the fixed rates")
	short := flag.Bool("short", false, "smoke run: 1 and 10 clients, 10 000/s, 0.7 s points, one repeat, a two-step search")
	flag.Parse()
	cmd := fmt.Sprintf("go run ./cmd/latency -fsync %s -clients %s -rates %s -duration %v -step %v -repeat %d -senders %d -tick %v -lag %v -search-from %.0f -bisect %d -retry %d",
		o.fsync, *clients, *rates, o.dur, o.step, o.repeat, o.senders, o.tick, o.lag, o.startRate, o.steps, o.retry)
	if !o.search {
		cmd += " -search=false"
	}
	if *short {
		*clients, *rates, o.dur, o.step, o.drain, o.repeat, o.steps, o.startRate, o.retry = "1,10", "10000", 700*time.Millisecond, 700*time.Millisecond, 3*time.Second, 1, 0, 20000, 0
		cmd = "go run ./cmd/latency -short"
	}
	var err error
	if o.clients, err = ints(*clients); err == nil {
		o.rates, err = floats(*rates)
	}
	if err == nil {
		err = run(o, cmd, *short)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
}

// row is one line of the table: a point measured repeat times.
type row struct {
	label string
	rs    []*result
}

func run(o opts, command string, short bool) error {
	if o.bin == "" {
		dir, err := os.MkdirTemp("", "apollo-latency-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "latency: building apollo")
		if o.bin, err = harness.Build(context.Background(), "..", dir); err != nil {
			return err
		}
	}
	loadBefore := harness.LoadAvg()
	var rows []row
	var notes []string
	for _, n := range o.clients {
		for _, rate := range o.rates {
			rw := row{label: strconv.FormatFloat(rate, 'f', -1, 64)}
			for range o.repeat {
				r, err := measure(o, rate, n, o.dur, o.drain)
				if err != nil {
					return err
				}
				if err := check(r, o.drain); err != nil {
					return err
				}
				rw.rs = append(rw.rs, r)
			}
			rows = append(rows, rw)
		}
		if !o.search {
			continue
		}
		best, why, err := search(o, n, short)
		if err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("%d client(s): %s", n, why))
		if best > 0 {
			r, err := measure(o, best, n, o.dur, o.drain)
			if err != nil {
				return err
			}
			if err := check(r, o.drain); err != nil {
				return err
			}
			rows = append(rows, row{label: fmt.Sprintf("max ≈ %.0f", best), rs: []*result{r}})
			if ok, why := r.keepsUp(o.lag, o.tick); !ok {
				notes[len(notes)-1] += fmt.Sprintf(", but the %v measurement at that rate did not keep up (%s): "+
					"a backlog that builds too slowly to show in a %v step, or a stall, so the sustained maximum is lower",
					o.dur, why, o.step)
			}
		}
	}
	report(o, command, rows, notes, loadBefore)
	return nil
}

// check fails the run on events that were answered 200 and then never
// reached a client that stayed connected: lost events, not slowness. A
// point whose last quarter was delivered well within the drain time
// (p99 under half of it) is not so far behind that the drain could end
// before its last events; only such points are held to it.
func check(r *result, drain time.Duration) error {
	if r.badIdx > 0 {
		return fmt.Errorf("%d clients at %.0f/s: %d tasks in messages that were never sent", r.clients, r.rate, r.badIdx)
	}
	if r.missing > 0 && r.closed == 0 && r.open.Failed == 0 && r.tail.Count() > 0 && r.tail.Quantile(.99) < drain/2 {
		return fmt.Errorf("%d clients at %.0f/s: %d deliveries of accepted events never arrived (last quarter's p99 %v, drain %v)",
			r.clients, r.rate, r.missing, r.tail.Quantile(.99), drain)
	}
	return nil
}

// search finds the highest rate that keeps up: from startRate it doubles
// while a step keeps up (halves while it does not), then bisects.
func search(o opts, clients int, short bool) (float64, string, error) {
	// A step that does not keep up is tried again (-retry times): on a
	// shared machine one stall of a few hundred ms fails a step.
	try := func(rate float64) (bool, error) {
		for i := 0; ; i++ {
			r, err := measure(o, rate, clients, o.step, 2*time.Second)
			if err != nil {
				return false, err
			}
			if err := check(r, 2*time.Second); err != nil {
				return false, err
			}
			ok, why := r.keepsUp(o.lag, o.tick)
			fmt.Fprintf(os.Stderr, "latency: search, %d clients, %.0f/s, try %d: %s\n", clients, rate, i+1, why)
			if ok || i >= o.retry {
				return ok, nil
			}
		}
	}
	lo, hi := 0.0, 0.0 // highest rate that kept up, lowest that did not
	rate := o.startRate
	limit := 6
	if short {
		limit = 2
	}
	for i := 0; i < limit && (lo == 0 || hi == 0); i++ {
		ok, err := try(rate)
		if err != nil {
			return 0, "", err
		}
		if ok {
			lo, rate = rate, rate*2
		} else {
			hi, rate = rate, rate/2
		}
	}
	for range o.steps {
		if lo == 0 || hi == 0 {
			break
		}
		mid := (lo + hi) / 2
		ok, err := try(mid)
		if err != nil {
			return 0, "", err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	switch {
	case lo == 0:
		return 0, fmt.Sprintf("no rate down to %.0f/s kept up", hi), nil
	case hi == 0:
		return lo, fmt.Sprintf("kept up at every rate tried, up to %.0f/s (the search stopped there)", lo), nil
	}
	return lo, fmt.Sprintf("keeps up at %.0f/s, not at %.0f/s", lo, hi), nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad rate %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func cores() int { return runtime.NumCPU() }
