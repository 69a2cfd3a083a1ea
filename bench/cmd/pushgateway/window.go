package main

import (
	"fmt"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// window is one target loaded once: a closed loop of one request at a
// time.
type window struct {
	results, requests int64
	elapsed, cpu      time.Duration // wall time; the server's CPU time over it
	lat               harness.Hist  // per request
}

func (w window) rate() float64 { return float64(w.results) / w.elapsed.Seconds() }

// cpuPerResult is the server's CPU time per result, in seconds.
func (w window) cpuPerResult() float64 { return w.cpu.Seconds() / float64(w.results) }

func (w window) String() string {
	return fmt.Sprintf("%d results in %d requests, %.0f results/s, %.1f µs CPU/result, request %v",
		w.results, w.requests, w.rate(), w.cpuPerResult()*1e6, w.lat.Latencies())
}

// load sends requests one at a time, send(k) being the k-th (from 0) and
// returning how many results it completed, until o.dur has passed and
// o.minReq requests were answered, or o.maxResults results were sent. pid
// is the server's, for its CPU time.
func load(pid int, o opts, send func(k int64) (int, error)) (window, error) {
	var w window
	cpu0, err := harness.CPUTime(pid)
	if err != nil {
		return w, err
	}
	start := time.Now()
	for k := int64(0); w.results < o.maxResults && (time.Since(start) < o.dur || w.requests < int64(o.minReq)); k++ {
		t0 := time.Now()
		n, err := send(k)
		if err != nil {
			return w, fmt.Errorf("request %d: %w", k, err)
		}
		w.lat.Record(time.Since(t0))
		w.requests++
		w.results += int64(n)
	}
	w.elapsed = time.Since(start)
	cpu1, err := harness.CPUTime(pid)
	w.cpu = cpu1 - cpu0
	if w.results == 0 {
		return w, fmt.Errorf("no result completed in %d requests", w.requests)
	}
	return w, err
}
