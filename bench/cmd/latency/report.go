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
	fmt.Printf("Open-loop load against the real `apollo server` (default config, `--fsync %s`, ingest rate limit off, "+
		"a fresh process and data directory per point, warmed up with %v of the same load first): %d sender goroutines, each sending one request every %v, "+
		"staggered, carrying the events that fell due since its previous request (rate × %v / %d events), "+
		"whatever the answers; all events of a request share its scheduled time, and a sender still waiting for "+
		"its previous answer when the next one is due sends everything due at once and counts the ticks it missed "+
		"by more than a tick as late. Every event is a new running task. The stream clients (in the bench process) "+
		"subscribe to everything with `coalesce:false`; latency is from an event's scheduled send time to the first "+
		"`tasks` message carrying its task, over every client and event; accept is scheduled send time → HTTP 200. "+
		"Fixed rates: %v per point, median of %d repeats with the range in brackets; the maximum is found by "+
		"a step search (%v steps, doubling from %.0f/s then bisecting %d times; a step that fails is tried %d more time(s), as one stall of a busy machine fails a step) for the highest rate at which every "+
		"request is answered 200, every client receives every event, the senders stay on schedule (the median "+
		"event, over the step and over its last quarter, goes out less than a tick late; single stalls of a busy "+
		"machine make ticks late without that) and the median latency, over the step and over its last quarter, "+
		"stays under %v (no growing lag), then measured once for %v. Client, senders and server share the "+
		"machine's %d cores; load average before the run %s, after it %s (other work on the machine).\n\n",
		o.fsync, warmup, o.senders, o.tick, o.tick, o.senders, o.dur, o.repeat, o.step, o.startRate, o.steps, o.retry, o.lag, o.dur, cores(), loadBefore, harness.LoadAvg())
	fmt.Println("| clients | events/s | WS p50 | WS p99 | WS p999 | WS max | accept p50 | accept p99 | late ticks | CPU µs/event: server, bench | keeps up |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	var at10k, why10k []string
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
			ok, w := r.keepsUp(o.lag, o.tick)
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
		for i, r := range rw.rs {
			cpus[i] = r.ownCPU
		}
		own, _, _ := harness.Median(cpus)
		fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %s | %d/%d | %.1f, %.1f | %s |\n", c, rw.label,
			cell(func(r *result) time.Duration { return r.ws.Quantile(.5) }),
			cell(func(r *result) time.Duration { return r.ws.Quantile(.99) }),
			cell(func(r *result) time.Duration { return r.ws.Quantile(.999) }),
			cell(func(r *result) time.Duration { return r.ws.Latencies().Max }),
			cell(func(r *result) time.Duration { return r.open.Latency.Quantile(.5) }),
			cell(func(r *result) time.Duration { return r.open.Latency.Quantile(.99) }),
			late, ticks, cpu, own, up)
		if rw.label == "10000" {
			p99, _, _ := q(func(r *result) time.Duration { return r.ws.Quantile(.99) })
			seen = true
			met = met && p99 <= float64(5*time.Millisecond)
			at10k = append(at10k, fmt.Sprintf("%s with %d client(s)", d(p99), c))
			acc, _, _ := q(func(r *result) time.Duration { return r.open.Latency.Quantile(.99) })
			why10k = append(why10k, fmt.Sprintf("with %d client(s) at 10 000/s, accept p99 %s against WebSocket p99 %s", c, d(acc), d(p99)))
		}
	}
	fmt.Println()
	if len(notes) > 0 {
		fmt.Println("Maximum sustainable rate: " + strings.Join(notes, "; ") + ".")
	}
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
		fmt.Println("Where the time goes: " + strings.Join(why10k, "; ") + ". " +
			"When the accept p99 is close to the WebSocket p99, the tail is spent before the event reaches the stream, " +
			"in the HTTP answer itself: waiting for the log's fsync (`--fsync batch`; rerun with `-fsync off` to take " +
			"the disk out) or for a CPU, when the load average (above) is over the machine's cores. When the " +
			"WebSocket p99 is far above the accept p99, it is the fan-out: every client gets every change, " +
			"uncoalesced, and the clients parse them on the same cores (the bench CPU column), with garbage " +
			"collection pauses on a loaded machine (docs/stream.md, \"Where the tail came from\"). What would fix " +
			"it: first a machine not shared with other work (a tail already in the 1 000/s rows is not this " +
			"benchmark's load); then less CPU and allocation per change in the ingest and bus path, and stream " +
			"clients on other machines, filtered or coalescing as " +
			"dashboards are.")
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
