package main

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/bench/internal/peer"
)

type results struct {
	peer                  peer.Binary
	peerErr               error // Pushgateway could not be had at all
	sizes                 []*size
	loadBefore, loadAfter string
}

// size is every window at one number of jobs.
type size struct {
	n         int
	peerErr   error // Pushgateway could not be filled at this size
	peer      []window
	peerRSS   float64    // bytes per group
	apollo    [][]window // per target
	apolloRSS []float64  // bytes per job, one per server started
}

// median of f over ws, with the spread.
func median(ws []window, f func(window) float64) (med, lo, hi float64) {
	xs := make([]float64, len(ws))
	for i, w := range ws {
		xs[i] = f(w)
	}
	return harness.Median(xs)
}

// ratio is the median over repeats of f(a)/f(peer), pairing each repeat
// with the Pushgateway window of the same repeat.
func ratio(a, p []window, f func(window) float64) (med, lo, hi float64) {
	xs := make([]float64, 0, len(a))
	for i := range min(len(a), len(p)) {
		xs = append(xs, f(a[i])/f(p[i]))
	}
	return harness.Median(xs)
}

func (r *results) print(command string, o opts) {
	var b strings.Builder
	fmt.Fprintf(&b, "## Peer: Prometheus Pushgateway\n\nCommand: `%s`\n\n", command)
	fmt.Fprintf(&b, "Batch jobs reporting each result as it comes, the way they report to Prometheus: **Pushgateway** gets one push per result, "+
		"a `PUT /metrics/job/NAME` of the job's metrics (last completion time, duration, success), replacing the job's group. "+
		"**Apollo-11** gets the same results as finished runs (a `running` and a `success` event each) three ways: batched POSTs of %d results, "+
		"one event per POST (a run's start, then its end, as a cron line reports them), and `GET /ping/NAME`. "+
		"Each size starts from that many jobs that have already reported once: Pushgateway filled with its consistency check off (with it on, "+
		"each push gathers every group already there, so filling would cost O(n²)), stopped cleanly so that it writes its persistence file, "+
		"and restarted with its defaults on that file (`--persistence.interval=24h`, so it does not write during the run); Apollo-11 a fresh "+
		"`apollo server` (defaults: `--fsync batch`; ingest rate limit off) per target and repeat, filled over HTTP. "+
		"Then one client sends results across the jobs, one request at a time (so the latency is the server's time per request, "+
		"with no queue in front of it), for %v per target, at least %d requests, at most %d results (each result is a run Apollo-11 keeps); "+
		"%d repeat(s), all targets in each, medians with the spread. Server CPU per result is the serving process's utime+stime "+
		"from /proc/PID/stat (10 ms grain) over the window; ratios are taken within each repeat, median over repeats. "+
		"RSS per job is the server's RSS holding the jobs (before the timed windows) minus its RSS right after start, over the jobs. "+
		"Client and servers share the machine's %d cores. Load average before the run %s, after it %s (other work on the machine).\n\n",
		batch, o.dur, o.minReq, o.maxResults, o.repeat, runtime.NumCPU(), r.loadBefore, r.loadAfter)
	if r.peerErr != nil {
		fmt.Fprintf(&b, "**Pushgateway was not run: %s.** Apollo-11's side is below on its own.\n\n", oneLine(r.peerErr))
	} else {
		fmt.Fprintf(&b, "Pushgateway: `%s`, %s.\n\n", r.peer.Version, r.peer.From)
	}
	for _, sz := range r.sizes {
		if sz.peerErr != nil {
			fmt.Fprintf(&b, "**Pushgateway could not be run with %d groups: %s.**\n\n", sz.n, oneLine(sz.peerErr))
		}
	}
	fmt.Fprintln(&b, "| jobs | target | results/s (median, min–max) | request p50 | request p99 | server CPU per result | results/s ÷ Pushgateway's | CPU per result ÷ Pushgateway's |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|")
	rate := window.rate
	cpu := window.cpuPerResult
	p50 := func(w window) float64 { return float64(w.lat.Quantile(.5)) }
	p99 := func(w window) float64 { return float64(w.lat.Quantile(.99)) }
	row := func(n int, name string, ws, peerWs []window) {
		m, lo, hi := median(ws, rate)
		l50, _, _ := median(ws, p50)
		l99, _, _ := median(ws, p99)
		c, _, _ := median(ws, cpu)
		vs, vsCPU := "—", "—"
		if len(peerWs) > 0 {
			rm, rlo, rhi := ratio(ws, peerWs, rate)
			cm, clo, chi := ratio(ws, peerWs, cpu)
			vs, vsCPU = fmt.Sprintf("%s (%s–%s)", x(rm), x(rlo), x(rhi)), fmt.Sprintf("%s (%s–%s)", x(cm), x(clo), x(chi))
		}
		fmt.Fprintf(&b, "| %d | %s | %s (%s–%s) | %v | %v | %s | %s | %s |\n", n, name, num(m), num(lo), num(hi),
			harness.Round(time.Duration(l50)), harness.Round(time.Duration(l99)), micro(c), vs, vsCPU)
	}
	for _, sz := range r.sizes {
		if len(sz.peer) > 0 {
			row(sz.n, "Pushgateway: PUT per result", sz.peer, nil)
		}
		for t := range targets {
			row(sz.n, "Apollo-11: "+targets[t].name, sz.apollo[t], sz.peer)
		}
	}
	fmt.Fprintln(&b, "\n| jobs | Pushgateway RSS per group | Apollo-11 RSS per job (median of its servers, min–max) | Apollo-11 ÷ Pushgateway |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	for _, sz := range r.sizes {
		a, lo, hi := harness.Median(sz.apolloRSS)
		pg, vs := "—", "—"
		if len(sz.peer) > 0 {
			pg, vs = kb(sz.peerRSS), x(a/sz.peerRSS)
		}
		fmt.Fprintf(&b, "| %d | %s | %s (%s–%s) | %s |\n", sz.n, pg, kb(a), kb(lo), kb(hi), vs)
	}
	fmt.Fprintln(&b, "\nRSS per job is noise at small sizes (the Go runtime's own growth is of the same order); read it at 10 000 jobs and more.")
	r.summary(&b)
	fmt.Print(b.String())
}

// summary is the sentence a reader takes away: the largest size both
// sides ran.
func (r *results) summary(b *strings.Builder) {
	for i := len(r.sizes) - 1; i >= 0; i-- {
		sz := r.sizes[i]
		if len(sz.peer) == 0 {
			continue
		}
		bRate, _, _ := ratio(sz.apollo[0], sz.peer, window.rate)
		bCPU, _, _ := ratio(sz.apollo[0], sz.peer, window.cpuPerResult)
		push, _, _ := median(sz.peer, func(w window) float64 { return float64(w.lat.Quantile(.5)) })
		one, _, _ := median(sz.apollo[1], func(w window) float64 { return float64(w.lat.Quantile(.5)) })
		ping, _, _ := median(sz.apollo[2], func(w window) float64 { return float64(w.lat.Quantile(.5)) })
		rss, _, _ := harness.Median(sz.apolloRSS)
		fmt.Fprintf(b, "\nAt %d jobs, Apollo-11's batched POSTs carried %s Pushgateway's results per second at %s its CPU per result; "+
			"one push took %v (median), one Apollo-11 event POST %v and one ping %v; Apollo-11 held %s per job, Pushgateway %s per group.\n",
			sz.n, x(bRate), x(bCPU), harness.Round(time.Duration(push)), harness.Round(time.Duration(one)), harness.Round(time.Duration(ping)), kb(rss), kb(sz.peerRSS))
		return
	}
}

func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func x(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f×", f)
	case f >= 10:
		return fmt.Sprintf("%.1f×", f)
	case f >= 0.1:
		return fmt.Sprintf("%.2f×", f)
	case f <= 0:
		return fmt.Sprintf("%.0f×", f)
	}
	// Two significant digits, without an exponent: 0.0012×, 0.0000044×.
	return fmt.Sprintf("%.*f×", 1-int(math.Floor(math.Log10(f))), f)
}

func num(f float64) string {
	if f >= 100 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

// micro formats seconds as µs, ms or s.
func micro(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.1f µs", s*1e6)
}

func kb(bytes float64) string { return fmt.Sprintf("%.2f KB", bytes/1000) }
