package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/apollo-11/apollo/agent"
)

// jobCounts is, per job name, the runs finished, failed and started.
type jobCounts map[string]*[3]int64

// churn reports runs at perSec events a second until ctx ends: each tick
// starts new runs (pending, running) and finishes those started a second
// ago. At the end it finishes the runs still open.
func churn(ctx context.Context, c *agent.Client, g int, perSec float64, timeout time.Duration) (jobCounts, error) {
	counts := jobCounts{}
	r := rand.New(rand.NewPCG(uint64(g), 5))
	type open struct {
		t       *agent.Task
		job     string
		started time.Time
	}
	var inFlight []open
	const tick = 50 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	finish := func(o open) error {
		c := counts[o.job]
		if c == nil {
			c = &[3]int64{}
			counts[o.job] = c
		}
		c[0]++
		c[2]++
		if r.IntN(4) == 0 {
			c[1]++
			return o.t.Fail()
		}
		return o.t.Succeed()
	}
	due, n := 0.0, 0
	for ctx.Err() == nil {
		now := time.Now()
		for due += perSec / 3 * tick.Seconds(); due >= 1; due-- {
			job := fmt.Sprintf("soak_job_%d_%d", g, n%10)
			tk := c.Task(fmt.Sprintf("soak-%d-%d", g, n), job)
			n++
			if err := tk.Pending(); err != nil {
				return counts, err
			}
			if err := tk.Running(agent.TimeoutAfter(timeout)); err != nil {
				return counts, err
			}
			inFlight = append(inFlight, open{tk, job, now})
		}
		for len(inFlight) > 0 && now.Sub(inFlight[0].started) >= time.Second {
			if err := finish(inFlight[0]); err != nil {
				return counts, err
			}
			inFlight = inFlight[1:]
		}
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	for _, o := range inFlight {
		if err := finish(o); err != nil {
			return counts, err
		}
	}
	return counts, nil
}

// checkMetrics compares GET /api/v1/metrics with what the clients reported.
func checkMetrics(base string, all []jobCounts) error {
	want := jobCounts{}
	for _, counts := range all {
		for job, c := range counts {
			want[job] = c
		}
	}
	resp, err := http.Get(base + "/api/v1/metrics?window=1h&prefix=soak_job_")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var m struct {
		Jobs []struct {
			Name                            string
			Count, Failed, Started, Running int64
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return fmt.Errorf("GET /api/v1/metrics: %v", err)
	}
	if len(m.Jobs) != len(want) {
		return fmt.Errorf("metrics for %d jobs, %d reported", len(m.Jobs), len(want))
	}
	for _, j := range m.Jobs {
		w := want[j.Name]
		if w == nil || j.Count != w[0] || j.Failed != w[1] || j.Started != w[2] || j.Running != 0 {
			return fmt.Errorf("%s: metrics count %d failed %d started %d running %d, reported %v", j.Name, j.Count, j.Failed, j.Started, j.Running, w)
		}
	}
	return nil
}

func writeCSV(path string, samples []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"seconds", "rss_bytes", "threads", "proc_fds", "go_goroutines", "process_open_fds",
		"process_resident_memory_bytes", "apollo_tasks", "apollo_tombstones", "apollo_deadlines", "go_memstats_heap_inuse_bytes", "events_sent", "events_accepted", "events_buffered"})
	for _, s := range samples {
		w.Write([]string{strconv.FormatFloat(s.at.Seconds(), 'f', 1, 64), strconv.FormatInt(s.rss, 10), strconv.Itoa(s.threads),
			strconv.Itoa(s.fds), fmt.Sprint(s.goroutines), fmt.Sprint(s.promFDs), fmt.Sprint(s.promRSS), fmt.Sprint(s.tasks),
			fmt.Sprint(s.tombs), fmt.Sprint(s.deadlines), fmt.Sprint(s.heap), strconv.FormatUint(s.sent, 10), strconv.FormatUint(s.accepted, 10), strconv.FormatUint(s.buffered, 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
