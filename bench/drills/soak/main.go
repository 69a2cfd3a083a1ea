// Command soak is the soak drill: the real apollo server takes a steady
// -rate (2000 events/s) from agent SDK clients for -duration (30 min), with
// task churn: every run has a new task ID, starts (pending, running),
// finishes about a second later (success, or failed for one in four), and
// leaves memory after retention.finished (30 s); its tombstone after
// retention.dedup (2 min). Deadlines stay armed until they would fire, so
// the runs' timeout and lateness missed_after are 2 min as well. Shorter
// soaks scale these down (duration/60 and duration/15, at least 1 s and
// 8 s) so that warm-up stays in the first third. Every -every (10 s) the drill samples RSS,
// threads and open files from /proc, and go_goroutines, process_open_fds,
// apollo_tasks and apollo_tombstones from GET /metrics.
//
// Flat means: the mean of the last third of the samples against the mean of
// the second third (the first third is warm-up: tasks and tombstones reach
// their steady count within retention.dedup + a few seconds, well inside
// 10 minutes) is
//
//   - RSS: no more than 10% and no more than 20 MiB higher. Between the
//     two means lie 10 minutes, 1.2 million events at the default rate, so
//     20 MiB catches a leak of 17 bytes an event; 10% leaves room for the
//     garbage collector, whose heap swings up to twice the live data, and
//     for allocator fragmentation, which means over 60 samples smooth out.
//   - go_goroutines: within ±10% (and at least ±5: a handful of HTTP
//     connection goroutines come and go with the clients' keep-alives).
//   - process_open_fds: within ±5 (the same connections, the log segment
//     and the archive's files rolling over).
//
// The -short form (15 s, a sample a second, retentions of 1 s and 8 s)
// runs every code path and the
// correctness check; its thirds are seconds long, so its flatness verdict
// is printed but does not decide the result.
// Correctness, in both forms: the clients flush with nothing rejected or
// dropped and GET /api/v1/metrics counts exactly the runs reported.
//
//	go run ./drills/soak                         # 30 minutes
//	go run ./drills/soak -duration 2m -csv soak.csv
//	go run ./drills/soak -short
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/bench/internal/harness"
)

// sample is one observation of the server.
type sample struct {
	at                       time.Duration
	rss                      int64
	threads, fds             int
	goroutines, promFDs      float64
	promRSS, tasks, tombs    float64
	deadlines, heap          float64 // apollo_deadlines, go_memstats_heap_inuse_bytes
	sent, accepted, buffered uint64
}

func main() {
	short := flag.Bool("short", false, "smoke form: 15 s, a sample a second")
	dur := flag.Duration("duration", 30*time.Minute, "how long the soak lasts")
	rate := flag.Int("rate", 2000, "events a second")
	every := flag.Duration("every", 10*time.Second, "sampling interval")
	csvPath := flag.String("csv", "", "write every sample to this file")
	flag.Parse()
	cmdline := "go run ./drills/soak"
	if *short {
		*dur, *every = 15*time.Second, time.Second
		cmdline += " -short"
	}
	// Warm-up must end well inside the first third: 30 s and 2 min for the
	// 30-minute soak, shorter for shorter ones (8 s is the shortest dedup
	// retention a tombstone generation allows).
	finished := min(max(*dur/60, time.Second), 30*time.Second)
	dedup := min(max(*dur/15, 8*time.Second), 2*time.Minute)
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "short" {
			cmdline += " -" + f.Name + " " + f.Value.String()
		}
	})
	ok, err := soak(cmdline, *dur, *every, *rate, finished, dedup, *csvPath, *short)
	switch {
	case err != nil:
		fmt.Printf("\nResult: FAIL — %v\n", err)
		os.Exit(1)
	case !ok:
		fmt.Printf("\nResult: FAIL — not flat (see the verdict above)\n")
		os.Exit(1)
	}
	fmt.Println("\nResult: PASS")
}

func soak(cmdline string, dur, every time.Duration, rate int, finished, dedup time.Duration, csvPath string, short bool) (bool, error) {
	// Deadlines (the runs' timeout, a pending run's missed start) stay
	// armed until they would fire, so they count as state too and get the
	// dedup retention's length.
	retention := fmt.Sprintf("retention:\n  finished: %v\n  dedup: %v\nlateness:\n  - prefix: \"\"\n    missed_after: %v\n", finished, dedup, dedup)
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "apollo-soak-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	bin, err := harness.Build(ctx, "..", tmp)
	if err != nil {
		return false, err
	}
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: retention})
	if err != nil {
		return false, err
	}
	defer func() { srv.Kill(); srv.Remove() }()

	clients := make([]*agent.Client, 2)
	for i := range clients {
		if clients[i], err = agent.New(srv.URL(), agent.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
			return false, err
		}
		defer clients[i].Close(context.Background())
	}
	loadCtx, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var wg sync.WaitGroup
	counts := make([]jobCounts, len(clients))
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i], errs[i] = churn(loadCtx, c, i, float64(rate)/float64(len(clients)), dedup)
		}()
	}

	var samples []sample
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	rowEvery := max(1, min(int(time.Minute/every), int(dur/every)/5)) // a row a minute; at least 5 rows in short runs
	fmt.Fprintf(os.Stderr, "| t | RSS | heap in use | go_goroutines | process_open_fds | threads | apollo_tasks | apollo_tombstones | apollo_deadlines | events sent |\n")
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-loadCtx.Done():
			done = true
			if len(samples) > 0 && time.Since(start)-samples[len(samples)-1].at < every/2 {
				continue // sampled a moment ago
			}
		}
		s, err := take(srv, clients)
		if err != nil {
			return false, err
		}
		s.at = time.Since(start)
		samples = append(samples, s)
		if len(samples)%rowEvery == 0 || done {
			fmt.Fprintln(os.Stderr, row(s))
		}
	}
	wg.Wait()
	for i, c := range clients {
		if errs[i] != nil {
			return false, errs[i]
		}
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := c.Flush(fctx)
		cancel()
		if st := c.Stats(); err != nil || st.Rejected != 0 || st.Dropped != 0 {
			return false, fmt.Errorf("client %d: flush %v, stats %+v: nothing may be rejected or dropped", i, err, st)
		}
	}
	if err := checkMetrics(srv.URL(), counts); err != nil {
		return false, err
	}
	if csvPath != "" {
		if err := writeCSV(csvPath, samples); err != nil {
			return false, err
		}
	}

	fmt.Println("## Soak drill")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", cmdline)
	var events int64
	for _, jc := range counts {
		for _, c := range jc {
			events += 3 * c[0]
		}
	}
	fmt.Printf("Two agent SDK clients reported %d events a second for %v with task churn: every run a new task ID, "+
		"pending and running, then success or failed about a second later; finished tasks left memory after "+
		"`retention.finished` (%v), their tombstones after `retention.dedup` (%v). The server was sampled every %v "+
		"(/proc and GET /metrics); the table shows one sample a minute (at least five rows). Flat compares the mean of the last third of the samples "+
		"with the second third. At the end every client flushed (0 rejected, 0 dropped) and GET /api/v1/metrics counted "+
		"exactly the %d runs (%d events) reported.\n\n", rate, dur, finished, dedup, every, events/3, events)
	fmt.Println("| t | RSS | heap in use | go_goroutines | process_open_fds | threads | apollo_tasks | apollo_tombstones | apollo_deadlines | events sent |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for i, s := range samples {
		if (i+1)%rowEvery == 0 || i == len(samples)-1 {
			fmt.Println(row(s))
		}
	}
	ok, verdict := flat(samples, dur)
	fmt.Println()
	fmt.Println(verdict)
	fmt.Println()
	state := "met"
	if !ok {
		state = "MISSED"
	}
	fmt.Printf("Target: flat RSS over a 30-minute soak with churn — %s (%s)\n", state, verdict)
	if !ok {
		fmt.Println("A growing RSS with flat apollo_tasks, apollo_tombstones and apollo_deadlines points at a leak outside the task table " +
			"(metrics series, stream buffers, the archive); a heap profile (GET /debug/pprof/heap, if enabled) of the two thirds would name it.")
	}
	if short {
		fmt.Println("\n(-short: the thirds are seconds long and the retentions have not settled; the flatness verdict is informational.)")
		return true, nil
	}
	return ok, nil
}

func row(s sample) string {
	return fmt.Sprintf("| %v | %s | %s | %.0f | %.0f | %d | %.0f | %.0f | %.0f | %d |", s.at.Round(time.Second), harness.MiB(s.rss),
		harness.MiB(int64(s.heap)), s.goroutines, s.promFDs, s.threads, s.tasks, s.tombs, s.deadlines, s.sent)
}

// take samples /proc and /metrics.
func take(srv *harness.Proc, clients []*agent.Client) (sample, error) {
	u, err := harness.Sample(srv.PID())
	if err != nil {
		return sample{}, err
	}
	m, err := harness.Scrape(srv.URL())
	if err != nil {
		return sample{}, err
	}
	s := sample{rss: u.RSS, threads: u.Threads, fds: u.FDs,
		goroutines: m["go_goroutines"], promFDs: m["process_open_fds"], promRSS: m["process_resident_memory_bytes"],
		tasks: m["apollo_tasks"], tombs: m["apollo_tombstones"], deadlines: m["apollo_deadlines"], heap: m["go_memstats_heap_inuse_bytes"]}
	for _, c := range clients {
		st := c.Stats()
		s.sent += st.Sent
		s.accepted += st.Accepted
		s.buffered += uint64(st.Buffered)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes"} {
		if _, ok := m[name]; !ok {
			return s, fmt.Errorf("GET /metrics has no %s", name)
		}
	}
	return s, nil
}

// flat compares the second and the last third of the samples.
func flat(samples []sample, dur time.Duration) (bool, string) {
	var a, b []sample
	for _, s := range samples {
		switch {
		case s.at >= 2*dur/3:
			b = append(b, s)
		case s.at >= dur/3:
			a = append(a, s)
		}
	}
	if len(a) == 0 || len(b) == 0 {
		return false, "too few samples to compare"
	}
	mean := func(xs []sample, f func(sample) float64) float64 {
		t := 0.0
		for _, x := range xs {
			t += f(x)
		}
		return t / float64(len(xs))
	}
	rss := func(s sample) float64 { return float64(s.rss) }
	gor := func(s sample) float64 { return s.goroutines }
	fds := func(s sample) float64 { return s.promFDs }
	ra, rb := mean(a, rss), mean(b, rss)
	ga, gb := mean(a, gor), mean(b, gor)
	fa, fb := mean(a, fds), mean(b, fds)
	rssOK := rb-ra <= 0.10*ra && rb-ra <= 20<<20
	gorOK := math.Abs(gb-ga) <= max(0.10*ga, 5)
	fdsOK := math.Abs(fb-fa) <= 5
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "NOT FLAT"
	}
	return rssOK && gorOK && fdsOK, fmt.Sprintf("RSS %s → %s (%+.1f%%, bound +10%% and +20 MiB) %s; go_goroutines %.0f → %.0f (bound ±10%%, at least ±5) %s; process_open_fds %.1f → %.1f (bound ±5) %s",
		harness.MiB(int64(ra)), harness.MiB(int64(rb)), 100*(rb-ra)/ra, mark(rssOK), ga, gb, mark(gorOK), fa, fb, mark(fdsOK))
}
