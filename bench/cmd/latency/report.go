package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

func report(o opts, command string, rows []row, notes []string, loadBefore string) {
	fmt.Println("## Event → WebSocket latency")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", command)
	fmt.Printf("Open-loop load against the real `apollo server` (default config, `--fsync batch`, ingest rate limit off, "+
		"a fresh process and data directory per point, warmed up with %v of the same load first): %d sender goroutines, each sending one request every %v, "+
		"staggered, carrying the events that fell due since its previous request (rate × %v / %d events), "+
		"whatever the answers; all events of a request share its scheduled time, and a sender still waiting for "+
		"its previous answer when the next one is due sends everything due at once and counts the ticks it missed "+
		"by more than a tick as late. Every event is a new running task. The stream clients (in the bench process) "+
		"subscribe to everything with `coalesce:false`; latency is from an event's scheduled send time to the first "+
		"`tasks` message carrying its task, over every client and event; accept is scheduled send time → HTTP 200. "+
		"Fixed rates: %v per point, median of %d repeats with the range in brackets; the maximum is found by "+
		"a step search (%v steps, doubling from %.0f/s then bisecting %d times) for the highest rate at which every "+
		"request is answered 200, at most 1%% of ticks are late, every client receives every event and the last "+
		"quarter's median latency stays under %v, then measured once for %v. Client, senders and server share the "+
		"machine's %d cores; load average before the run %s, after it %s (other work on the machine).\n\n",
		warmup, o.senders, o.tick, o.tick, o.senders, o.dur, o.repeat, o.step, o.startRate, o.steps, o.lag, o.dur, cores(), loadBefore, harness.LoadAvg())
	fmt.Println("| clients | events/s | WS p50 | WS p99 | WS p999 | WS max | accept p50 | accept p99 | late ticks | server CPU µs/event | keeps up |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	var at10k []string
	met := true
	seen := false
	for _, rw := range rows {
		q := func(f func(r *result) time.Duration) (float64, float64, float64) {
			xs := make([]float64, len(rw.rs))
			for i, r := range rw.rs {
				xs[i] = float64(f(r))
			}
			return harness.Median(xs)
		}
		cell := func(f func(r *result) time.Duration) string {
			m, lo, hi := q(f)
			if len(rw.rs) == 1 {
				return d(m)
			}
			return fmt.Sprintf("%s [%s–%s]", d(m), d(lo), d(hi))
		}
		var late, ticks int64
		ups := 0
		var why string
		for _, r := range rw.rs {
			late += r.open.LateTicks
			ticks += r.open.Ticks
			ok, w := r.keepsUp(o.lag)
			if ok {
				ups++
			} else if why == "" {
				why = w
			}
		}
		up := fmt.Sprintf("%d/%d", ups, len(rw.rs))
		if why != "" {
			up += " (" + why + ")"
		}
		c := rw.rs[0].clients
		cpus := make([]float64, len(rw.rs))
		for i, r := range rw.rs {
			cpus[i] = r.cpu
		}
		cpu, _, _ := harness.Median(cpus)
		fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %s | %d/%d | %.1f | %s |\n", c, rw.label,
			cell(func(r *result) time.Duration { return r.ws.Quantile(.5) }),
			cell(func(r *result) time.Duration { return r.ws.Quantile(.99) }),
			cell(func(r *result) time.Duration { return r.ws.Quantile(.999) }),
			cell(func(r *result) time.Duration { return r.ws.Latencies().Max }),
			cell(func(r *result) time.Duration { return r.open.Latency.Quantile(.5) }),
			cell(func(r *result) time.Duration { return r.open.Latency.Quantile(.99) }),
			late, ticks, cpu, up)
		if rw.label == "10000" {
			p99, _, _ := q(func(r *result) time.Duration { return r.ws.Quantile(.99) })
			seen = true
			met = met && p99 <= float64(5*time.Millisecond)
			at10k = append(at10k, fmt.Sprintf("%s with %d client(s)", d(p99), c))
		}
	}
	fmt.Println()
	fmt.Println("Maximum sustainable rate: " + strings.Join(notes, "; ") + ".")
	fmt.Println()
	if !seen {
		fmt.Println("Target: event → WebSocket client p99 ≤ 5 ms at 10 000 events/s — not measured (no 10000 in -rates)")
		return
	}
	verdict := "met"
	if !met {
		verdict = "MISSED"
	}
	fmt.Printf("Target: event → WebSocket client p99 ≤ 5 ms at 10 000 events/s — %s (p99 %s)\n", verdict, strings.Join(at10k, ", "))
	if !met {
		fmt.Println()
		fmt.Println("The tail is set by the shared 2-core machine: the senders, the stream clients and the server " +
			"run on the same cores, every client gets every change (no filter, no coalescing), and a garbage " +
			"collection cycle or a descheduled thread stalls delivery for milliseconds (docs/stream.md, " +
			"\"Where the tail came from\"). What would fix it: less allocation per change in the server's ingest " +
			"and bus path (fewer collections), and clients on another machine; compare the accept column, which " +
			"is the HTTP part alone.")
	}
}

// d formats nanoseconds held in a float64.
func d(ns float64) string {
	x := time.Duration(ns)
	switch {
	case x >= time.Second:
		return x.Round(time.Millisecond).String()
	case x >= time.Millisecond:
		return x.Round(10 * time.Microsecond).String()
	}
	return x.Round(time.Microsecond).String()
}
