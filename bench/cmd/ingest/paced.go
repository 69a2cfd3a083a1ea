package main

import (
	"fmt"
	"os"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// The paced part: one event per request, sent open-loop at a fixed rate
// (harness.OpenLoop: 8 senders, each sending every 10 ms), the way cron
// lines and `apollo report` reach a server that is mostly waiting. The
// closed loop above measures what a server does flat out; this measures
// what one request costs a server that goes idle between requests, where
// every request wakes threads that went to sleep. The null handler is
// measured the same way, so the ratio of CPU per request says what is
// Apollo-11's and what is the price of waking up on this machine.

var pacedTargets = []target{
	{"null handler", "", 1}, {"apollo --fsync batch", "batch", 1}, {"apollo --fsync off", "off", 1},
}

type pacedSample struct {
	rps       float64
	p50, p99  time.Duration
	cpuPerReq float64 // server CPU µs per request
	ratio     float64 // cpuPerReq ÷ the null handler's in the same repeat
	late      int64   // ticks sent more than a tick late
	perReq    float64 // events per request: 1 unless a sender fell behind
}

func measurePaced(bin, self string, t target, rate float64, dur time.Duration) (pacedSample, error) {
	p, err := startTarget(bin, self, t.fsync)
	if err != nil {
		return pacedSample{}, err
	}
	defer p.Remove()
	defer p.Stop(10 * time.Second)
	cpu0, _ := harness.CPUTime(p.PID())
	res := harness.OpenLoop{URL: p.URL(), Rate: rate, Duration: dur, Body: harness.NewEvents("paced-")}.Run()
	cpu1, err := harness.CPUTime(p.PID())
	if err != nil {
		return pacedSample{}, err
	}
	s := pacedSample{rps: float64(res.Requests) / res.Elapsed.Seconds(), late: res.LateTicks, perReq: float64(res.Events) / float64(max(res.Requests, 1)),
		p50: res.Latency.Quantile(.5), p99: res.Latency.Quantile(.99)}
	if res.Requests > 0 {
		s.cpuPerReq = (cpu1 - cpu0).Seconds() / float64(res.Requests) * 1e6
	}
	return s, checkLoad(&res.LoadResult, dur)
}

// runPaced measures every paced target once per repeat, in order.
func runPaced(bin, self string, rate float64, dur time.Duration, repeat int) ([][]pacedSample, error) {
	samples := make([][]pacedSample, len(pacedTargets))
	for rep := range repeat {
		var null float64
		for i, t := range pacedTargets {
			s, err := measurePaced(bin, self, t, rate, dur)
			if err != nil {
				return nil, fmt.Errorf("paced %s: %w", t.name, err)
			}
			if t.fsync == "" {
				null = s.cpuPerReq
			}
			s.ratio = s.cpuPerReq / null
			samples[i] = append(samples[i], s)
			fmt.Fprintf(os.Stderr, "ingest: paced repeat %d/%d %s: %.0f requests/s, %.1f µs of server CPU per request (%.2f× null), accept p99 %v\n",
				rep+1, repeat, t.name, s.rps, s.cpuPerReq, s.ratio, s.p99)
		}
	}
	return samples, nil
}

func reportPaced(samples [][]pacedSample, rate float64, dur time.Duration, repeat int) {
	fmt.Println()
	fmt.Println("### One event per request, paced")
	fmt.Println()
	fmt.Printf("The same targets loaded open-loop instead: %.0f requests/s of one new running task each, from 8 senders "+
		"that each send one request every 10 ms whatever the answers (`harness.OpenLoop`, as the latency scenario; a sender that falls a tick behind sends what is due in one request, "+
		"hence events/request over 1), "+
		"for %v per repeat, %d repeat(s), the targets in the table's order in each. The server goes idle between "+
		"requests, so each request pays for waking the threads that serve it; the null handler pays that too. "+
		"Server CPU per request is the serving process's utime+stime over the requests; the ratio is to the null "+
		"handler's in the same repeat, median over repeats.\n\n", rate, dur, repeat)
	fmt.Println("| target | requests/s | events/request | accept p50 | accept p99 | late ticks | server CPU µs/request (median, min–max) | ÷ null handler's |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for i, t := range pacedTargets {
		ss := samples[i]
		rps, _, _ := harness.Median(pick(ss, func(s pacedSample) float64 { return s.rps }))
		p50, _, _ := harness.Median(pick(ss, func(s pacedSample) float64 { return float64(s.p50) }))
		p99, _, _ := harness.Median(pick(ss, func(s pacedSample) float64 { return float64(s.p99) }))
		cpu, clo, chi := harness.Median(pick(ss, func(s pacedSample) float64 { return s.cpuPerReq }))
		r, rlo, rhi := harness.Median(pick(ss, func(s pacedSample) float64 { return s.ratio }))
		var late int64
		for _, s := range ss {
			late += s.late
		}
		ratio := "1"
		if t.fsync != "" {
			ratio = fmt.Sprintf("%.2f× (%.2f–%.2f)", r, rlo, rhi)
		}
		per, _, _ := harness.Median(pick(ss, func(s pacedSample) float64 { return s.perReq }))
		fmt.Printf("| %s | %.0f | %.2f | %v | %v | %d | %.1f (%.1f–%.1f) | %s |\n", t.name, rps, per,
			roundD(time.Duration(p50)), roundD(time.Duration(p99)), late, cpu, clo, chi, ratio)
	}
}
