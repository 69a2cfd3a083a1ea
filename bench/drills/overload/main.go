// Command overload is the overload drill. It measures the rate the real
// apollo server sustains with agent SDK clients (or takes it from -rate),
// then starts a fresh server whose ingest limit (limits.ingest_per_second,
// docs/operations.md "Limits") is that rate and offers it -factor (10) times
// that for -duration (2 min): half from several agent SDK clients, which
// honour 429 and Retry-After, half from a raw HTTP sender that resends at
// once and never backs off. It counts the 429s, samples the server's RSS
// every second, and records the agents' retries. The RSS bound is what the
// accepted load itself costs: a first server is driven at 1× the rate (no
// overload) for -baseline, and the overload's peak may exceed that run's
// peak by at most a quarter plus 64 MiB (or -rss-limit MiB, if given): the
// refused excess must cost no memory that grows with it. Then
// the load stops: the agents must drain their buffers, and every
// acknowledged event must be there: per-job counts from
// GET /api/v1/metrics equal a recount of every acknowledged run, and a
// sample of runs read back with GET /api/v1/tasks/ID (the newest 2500 of
// each kind of sender while they are in memory, and 3 older ones from the
// archive) has every event.
//
// A second case (anon.go) floods a server with requests from callers
// without a valid token and checks that they cost neither disk (the audit
// log) nor memory, and push out no tenant's audit entries. A third
// (bigbody.go) posts hostile 4 MiB bodies, alone and four at once, and
// bounds the server's peak RSS by the bodies.
//
//	go run ./drills/overload                 # about 5 minutes
//	go run ./drills/overload -short          # 5 s of overload, 5 s of flood, each body once
//	go run ./drills/overload -short -case anon  # the flood alone
//	go run ./drills/overload -case bigbody   # the bodies alone, 3 rounds
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/bench/internal/harness"
)

// run is one acknowledged run of three events, each answered accepted,
// held or duplicate; the drill reads it back at the end.
type run = harness.Run

// recorder keeps the acknowledged runs of every sender.
type recorder struct {
	mu   sync.Mutex
	runs []run
}

func (r *recorder) add(rn run) {
	r.mu.Lock()
	r.runs = append(r.runs, rn)
	r.mu.Unlock()
}

func main() {
	short := flag.Bool("short", false, "smoke form: 2 s calibration, 5 s of overload")
	rate := flag.Int("rate", 0, "sustainable events/s; 0 measures the ceiling first and takes half")
	factor := flag.Int("factor", 10, "offered load as a multiple of the sustainable rate")
	dur := flag.Duration("duration", 2*time.Minute, "how long the overload lasts")
	agents := flag.Int("agents", 4, "agent SDK clients")
	rssLimit := flag.Int64("rss-limit", 0, "bound on the server's RSS, MiB; 0: 1.25 × the peak of the 1× baseline run + 64 MiB")
	noLimit := flag.Bool("no-memory-limit", false, "run the overloaded server without memory_limit_mib (to see the collector's own headroom)")
	baseline := flag.Duration("baseline", 45*time.Second, "how long the 1× run that sets the RSS bound lasts (retention reaches its steady state in ~20 s)")
	flood := flag.Duration("flood", time.Minute, "how long callers without a valid token flood the server")
	which := flag.String("case", "all", "which case to run: all, rate (the overload of valid events), anon (callers without a valid token) or bigbody (hostile 4 MiB bodies)")
	rounds := flag.Int("rounds", 3, "bigbody: how many times each body is measured (each on a fresh server); the worst is judged")
	bin := flag.String("bin", "", "an apollo binary to run instead of building this checkout's (to measure another commit)")
	flag.Parse()
	cmdline := "go run ./drills/overload"
	calib := 5 * time.Second
	if *short {
		*dur, calib, *baseline, *flood, *rounds = 5*time.Second, 2*time.Second, 3*time.Second, 5*time.Second, 1
		cmdline += " -short"
	}
	if *which != "all" && *which != "rate" && *which != "anon" && *which != "bigbody" {
		fmt.Fprintf(os.Stderr, "overload: -case %q: use all, rate, anon or bigbody\n", *which)
		os.Exit(2)
	}
	if *which != "all" {
		cmdline += " -case " + *which
	}
	base, memLimit = *baseline, !*noLimit
	if *noLimit {
		cmdline += " -no-memory-limit"
	}
	if *rate != 0 {
		cmdline += fmt.Sprintf(" -rate %d", *rate)
	}
	if *bin != "" {
		cmdline += " -bin " + *bin
	}
	if err := cases(cmdline, *which, *bin, map[string]func(bin string) error{
		"rate":    func(bin string) error { return drill(bin, *rate, *factor, *dur, calib, *agents, *rssLimit<<20) },
		"anon":    func(bin string) error { return anonFlood(bin, *flood) },
		"bigbody": func(bin string) error { return bigBodies(bin, *rounds) },
	}); err != nil {
		fmt.Printf("\nResult: FAIL — %v\n", err)
		os.Exit(1)
	}
	fmt.Println("\nResult: PASS")
}

// cases builds apollo (or takes bin), prints the section's head and runs
// the case asked for, or all of them in order.
func cases(cmdline, which, bin string, run map[string]func(bin string) error) error {
	bin, cleanup, err := harness.BuildIfEmpty(context.Background(), bin, "overload")
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Println("## Overload drill")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", cmdline)
	for _, name := range []string{"rate", "anon", "bigbody"} {
		if which == "all" || which == name {
			if err := run[name](bin); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawSenders is how many goroutines post for the raw sender, each one
// request at a time.
const rawSenders = 6

func fail(format string, a ...any) error { return fmt.Errorf(format, a...) }

// base is how long the 1× baseline run lasts (-baseline); memLimit gives
// the overloaded server memory_limit_mib = the bound (not -no-memory-limit).
var (
	base     time.Duration
	memLimit bool
)

func drill(bin string, rate, factor int, dur, calib time.Duration, nAgents int, rssLimit int64) error {
	ctx := context.Background()
	var err error
	measured, ceiling := rate == 0, 0
	if measured {
		if ceiling, err = calibrate(bin, calib, nAgents); err != nil {
			return err
		}
		rate = ceiling / 2
	}
	fmt.Fprintf(os.Stderr, "sustainable rate %d events/s; offering %d× for %v\n", rate, factor, dur)

	cfg := fmt.Sprintf("limits:\n  ingest_per_second: %d\nretention:\n  finished: 10s\n  dedup: 15s\n", rate)
	basePeak, baseTasks, baseAcked, err := baselineRSS(bin, cfg, rate, nAgents)
	if err != nil {
		return err
	}
	if rssLimit == 0 {
		rssLimit = basePeak*5/4 + 64<<20
	}
	fmt.Fprintf(os.Stderr, "1× baseline: peak RSS %s, %d events/s acknowledged; bound %s\n", harness.MiB(basePeak), baseAcked, harness.MiB(rssLimit))
	if memLimit {
		// What an operator does to bound memory (docs/operations.md): a
		// soft limit, so that the collector works harder near it rather
		// than let the heap grow to GOGC's target while it shares the
		// cores with ten times the traffic.
		cfg += fmt.Sprintf("memory_limit_mib: %d\n", rssLimit>>20)
	}
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: cfg})
	if err != nil {
		return err
	}
	defer func() { srv.Kill(); srv.Remove() }()

	// RSS every second, from the start of the overload to the end of the checks.
	maxRSS, stopSampling := sampleRSS(srv, true)
	defer stopSampling()

	rec := &recorder{}
	offered := float64(rate * factor)
	loadCtx, stopLoad := context.WithTimeout(ctx, dur)
	defer stopLoad()
	var wg sync.WaitGroup
	clients := make([]*agent.Client, nAgents)
	var bufferFull atomic.Int64
	for i := range clients {
		c, err := agent.New(srv.URL(), agent.WithBufferSize(20_000), agent.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		clients[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			produce(loadCtx, c, i, offered/2/float64(nAgents), rec, &bufferFull)
		}()
	}
	raw := &rawSender{url: srv.URL() + "/api/v1/events", rec: rec}
	for i := range rawSenders {
		wg.Add(1)
		go func() { defer wg.Done(); raw.run(loadCtx, i, offered/2/rawSenders) }()
	}
	start := time.Now()
	<-loadCtx.Done()
	loadTime := time.Since(start)
	wg.Wait() // the raw sender has resent everything it started
	rawDone := time.Since(start)
	if err := raw.err.Load(); err != nil {
		return err.(error)
	}
	// Read back the raw sender's newest runs now, while they are in memory
	// (retention.finished); the archive's lookup scans files.
	rec.mu.Lock()
	back := newest(rec.runs, "ovl_raw_", 2500)
	rec.mu.Unlock()
	lost, err := harness.ReadBack(srv.URL(), back)
	if err != nil {
		return err
	}
	checked := len(back)

	// The load has dropped: the agents drain what they hold.
	var st agent.Stats
	drainStart := time.Now()
	for i, c := range clients {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := c.Flush(fctx)
		cancel()
		s := c.Stats()
		if err != nil || s.Buffered != 0 {
			return fail("agent %d did not drain: %v, %+v", i, err, s)
		}
		if s.Rejected != 0 {
			return fail("agent %d: %d events rejected", i, s.Rejected)
		}
		st.Sent += s.Sent
		st.Held += s.Held
		st.Retries += s.Retries
	}
	drain := time.Since(drainStart)
	fmt.Fprintf(os.Stderr, "load over after %v; raw sender done at %v; agents drained in %v\n", loadTime.Round(time.Millisecond), rawDone.Round(time.Millisecond), drain.Round(time.Millisecond))

	back = newest(rec.runs, "ovl_agent_", 2500)
	r := rand.New(rand.NewPCG(1, 1))
	for range 3 { // and a few old ones, from the archive
		back = append(back, rec.runs[r.IntN(len(rec.runs))])
	}
	n, err := harness.ReadBack(srv.URL(), back)
	if err != nil {
		return err
	}
	lost, checked = lost+n, checked+len(back)
	if n, err = recount(srv.URL(), rec.runs); err != nil {
		return err
	}
	lost += n
	peak := maxRSS.Load()

	events := int64(3 * len(rec.runs))
	how := "half the ceiling measured for " + calib.String() + " with the agent clients and no limit: a server at its ceiling has no room left to refuse"
	if !measured {
		how = "given with -rate"
	}
	fmt.Printf("The sustainable rate (%s) became the server's `limits.ingest_per_second`; then %d× that was offered for %v: "+
		"half by %d agent SDK clients (batching, honouring 429 and Retry-After, producers waiting when the client's buffer is full), "+
		"half by a raw HTTP sender that resends every unacknowledged event at once. RSS was sampled every second and bounded by "+
		"what the accepted load costs without overload: a first server at 1× the rate for the baseline's length, its peak × 1.25 + 64 MiB; "+
		"the overloaded server runs with `memory_limit_mib` set to that bound (a soft limit, docs/operations.md; without it, on 2 shared cores, "+
		"the heap reached about 1.75× the baseline: -no-memory-limit shows it). "+
		"After the load, the agents flushed, and every acknowledged run was recounted per job against `GET /api/v1/metrics` "+
		"and the newest 2500 runs of the raw sender and of the agents, as they finished, plus 3 older ones (from the archive) read back with `GET /api/v1/tasks/ID`. Finished runs leave memory after 10 s (`retention.finished`) and their tombstones after 15 s (`retention.dedup`): at the limit's rate, the defaults (1 h, 24 h) would hold millions of accepted runs, which is memory the accepted load costs, not the overload.\n\n", how, factor, dur, nAgents)
	fmt.Println("| figure | value |\n|---|---|")
	if measured {
		fmt.Printf("| ceiling with the agent clients, no limit | %d events/s |\n", ceiling)
	}
	attempted := float64(raw.attempted.Load()+int64(st.Sent)) / loadTime.Seconds()
	fmt.Printf("| sustainable rate (the limit) | %d events/s |\n| offered: asked / achieved (sent, resends included) | %.0f / %.0f events/s |\n", rate, offered, attempted)
	fmt.Printf("| acknowledged | %d events (%.0f/s over %v) |\n", events, float64(events)/rawDone.Seconds(), rawDone.Round(time.Second))
	fmt.Printf("| raw sender: requests / 429s / events resent | %d / %d / %d |\n", raw.requests.Load(), raw.tooMany.Load(), raw.resent.Load())
	fmt.Printf("| agents: requests resent (retries) / events sent / held | %d / %d / %d |\n", st.Retries, st.Sent, st.Held)
	fmt.Printf("| agents: producer waits on a full buffer | %d |\n", bufferFull.Load())
	fmt.Printf("| agents: drain after the load | %v |\n", drain.Round(time.Millisecond))
	fmt.Printf("| 1× baseline (%v, no overload): acknowledged / peak RSS / peak tasks in memory | %d events/s / %s / %d |\n", base, baseAcked, harness.MiB(basePeak), baseTasks)
	fmt.Printf("| under overload: peak RSS (bound %s) / peak tasks in memory | %s / %d |\n", harness.MiB(rssLimit), harness.MiB(peak), maxRSS.tasks.Load())
	fmt.Printf("| runs read back / lost events | %d / %d |\n", checked, lost)
	fmt.Println()
	fmt.Printf("Target: overload is refused with 429, memory stays bounded, nothing acknowledged is lost — ")
	switch {
	case raw.tooMany.Load() == 0 || st.Retries == 0:
		fmt.Printf("MISSED (%d 429s, %d agent retries)\n", raw.tooMany.Load(), st.Retries)
		return fail("the overload produced no 429s or no agent retries: the limit was not the mechanism")
	case peak > rssLimit && base < 20*time.Second:
		// Shorter than the retention's warm-up (finished 10 s, dedup
		// 15 s), the baseline has not reached its steady state: the
		// comparison says nothing, as in -short.
		fmt.Printf("not judged: the %v baseline is shorter than the retention's warm-up (RSS %s, bound %s)\n", base, harness.MiB(peak), harness.MiB(rssLimit))
		return nil
	case peak > rssLimit:
		fmt.Printf("MISSED (RSS %s over %s)\n", harness.MiB(peak), harness.MiB(rssLimit))
		return fail("RSS %s over the bound %s", harness.MiB(peak), harness.MiB(rssLimit))
	}
	fmt.Printf("met (%d 429s, max RSS %s, 0 lost)\n", raw.tooMany.Load(), harness.MiB(peak))
	return nil
}

// produce reports runs at perSec events a second through c. When the
// client's buffer is full it waits and offers the event again, as an
// executor that must not lose its report would.
func produce(ctx context.Context, c *agent.Client, g int, perSec float64, rec *recorder, full *atomic.Int64) {
	r := rand.New(rand.NewPCG(uint64(g), 3))
	pace := time.NewTicker(time.Duration(float64(time.Second) * 30 / perSec)) // 10 runs a tick
	defer pace.Stop()
	for i := 0; ctx.Err() == nil; {
		for range 10 {
			rn := run{ID: fmt.Sprintf("ovl-a%d-%d", g, i), Job: fmt.Sprintf("ovl_agent_%d", g), Events: 3, Final: apollo.StatusSuccess}
			i++
			tk := c.Task(rn.ID, rn.Job)
			steps := []func(...agent.EventOption) error{tk.Pending, tk.Running, tk.Succeed}
			if r.IntN(4) == 0 {
				steps[2], rn.Final = tk.Fail, apollo.StatusFailed
			}
			for _, step := range steps {
				err := step()
				for ; errors.Is(err, agent.ErrBufferFull); err = step() {
					full.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "overload: reporting %s: %v\n", rn.ID, err)
					return
				}
			}
			rec.add(rn)
		}
		select {
		case <-pace.C:
		case <-ctx.Done():
		}
	}
}

// peaks are the highest RSS and tasks in memory (apollo_tasks) sampled.
type peaks struct{ rss, tasks atomic.Int64 }

func (p *peaks) Load() int64 { return p.rss.Load() }

// sampleRSS samples srv's RSS, and with tasks the tasks in memory (GET
// /metrics, which needs no token on these servers), every second until
// stop and keeps the peaks.
func sampleRSS(srv *harness.Proc, tasks bool) (peak *peaks, stop func()) {
	peak = new(peaks)
	done := make(chan struct{})
	raise := func(a *atomic.Int64, v int64) {
		if v > a.Load() {
			a.Store(v)
		}
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if u, err := harness.Sample(srv.PID()); err == nil {
				raise(&peak.rss, u.RSS)
			}
			if tasks {
				if m, err := harness.Scrape(srv.URL()); err == nil {
					raise(&peak.tasks, int64(m["apollo_tasks"]))
				}
			}
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return peak, func() { close(done) }
}

// baselineRSS runs a fresh server with cfg at 1× rate (agents only, no
// overload) for base and returns its peak RSS and the events/s it
// acknowledged: what the accepted load costs in memory.
func baselineRSS(bin, cfg string, rate, n int) (int64, int64, int, error) {
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: cfg})
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { srv.Kill(); srv.Remove() }()
	peak, stop := sampleRSS(srv, true)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), base)
	defer cancel()
	rec := &recorder{}
	var full atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		c, err := agent.New(srv.URL(), agent.WithBufferSize(20_000), agent.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return 0, 0, 0, err
		}
		defer c.Close(context.Background())
		wg.Add(1)
		go func() { defer wg.Done(); produce(ctx, c, 100+i, float64(rate)/float64(n), rec, &full) }()
	}
	wg.Wait()
	if u, err := harness.Sample(srv.PID()); err == nil && u.RSS > peak.Load() {
		peak.rss.Store(u.RSS)
	}
	return peak.Load(), peak.tasks.Load(), int(float64(3*len(rec.runs)) / base.Seconds()), nil
}

// calibrate runs the agent clients flat out against an unlimited server
// and returns the accepted events a second.
func calibrate(bin string, d time.Duration, n int) (int, error) {
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: "limits:\n  ingest_per_second: 0\n"})
	if err != nil {
		return 0, err
	}
	defer func() { srv.Kill(); srv.Remove() }()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for i := range n {
		c, err := agent.New(srv.URL(), agent.WithBufferSize(20_000), agent.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close(context.Background())
			var full atomic.Int64
			produce(ctx, c, 100+i, 1e9, &recorder{}, &full)
			accepted.Add(int64(c.Stats().Accepted))
		}()
	}
	wg.Wait()
	return int(float64(accepted.Load()) / d.Seconds()), nil
}
