// Command redis measures Redis-backed metrics two ways against the same
// Redis, one after the other in one run: the seed's design (section 3.3:
// one Lua script per event that HINCRBYs the bucket's count and sum,
// updates its min and max and re-adds the bucket to a 5-minute rolling
// sorted set) and Apollo-11's (redisstore: aggregate in memory, flush the
// changed buckets as absolute values once a second). It prints events/s,
// the ratio, and Redis commands per event from INFO commandstats (commands
// run inside scripts included), and checks that both counted every event.
//
//	go run ./cmd/redis -redis redis://127.0.0.1:6379/15 -duration 10s
//	go run ./cmd/redis -short    # a few seconds, for CI
//
// It prints one markdown section (docs/benchmarks.md is made of them).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore"
)

func main() {
	url := flag.String("redis", harness.RedisURL(), "Redis URL")
	dur := flag.Duration("duration", 10*time.Second, "how long each design is loaded")
	jobs := flag.Int("jobs", 100, "job names the events spread over")
	workers := flag.Int("workers", 8, "goroutines producing events")
	rate := flag.Int("rate", 10_000, "events/s of the paced redisstore run, for commands per event at a steady rate (0: skip)")
	repeat := flag.Int("repeat", 3, "repeats; the designs take turns in each")
	short := flag.Bool("short", false, "smoke run: 2s per design, one repeat")
	flag.Parse()
	if *short {
		*dur, *repeat = 2*time.Second, 1
	}
	if err := run(*url, *dur, *jobs, *workers, *rate, max(1, *repeat)); err != nil {
		fmt.Fprintln(os.Stderr, "redis bench:", err)
		os.Exit(1)
	}
}

type result struct {
	name     string
	events   int64
	elapsed  time.Duration
	commands int64 // INFO commandstats calls, scripts' inner commands included
	calls    int64 // commands the client sent
	// steady is commands per event between a quarter and three quarters
	// of the run, without the first writes of each key and the last flush
	// (paced run only).
	steady float64
}

func (r result) eps() float64 { return float64(r.events) / r.elapsed.Seconds() }

func run(url string, dur time.Duration, jobs, workers, rate, repeat int) error {
	c, err := redisstore.Open(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	prefix := fmt.Sprintf("apollobench:%08x", rand.Uint32())
	defer cleanup(ctx, c, prefix)
	names := make([]string, jobs)
	for i := range names {
		names[i] = fmt.Sprintf("job-%03d", i)
	}
	var seeds, ours []result
	for i := range repeat {
		seed, err := runSeed(ctx, c, fmt.Sprintf("%s:seed%d", prefix, i), names, dur, workers)
		if err != nil {
			return err
		}
		our, err := runOurs(ctx, c, fmt.Sprintf("%s:ours%d", prefix, i), names, dur, workers, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "redis: repeat %d: seed %.0f events/s, redisstore %.0f events/s\n", i+1, seed.eps(), our.eps())
		seeds, ours = append(seeds, seed), append(ours, our)
	}
	var paced result
	if rate > 0 {
		var err error
		if paced, err = runOurs(ctx, c, prefix+":paced", names, dur, 1, rate); err != nil {
			return err
		}
	}
	fmt.Println("## Redis: pre-aggregated flush vs one Lua call per event")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", strings.TrimSpace("go run ./cmd/redis "+strings.Join(os.Args[1:], " ")))
	fmt.Printf("The same events (%d job names, %d producers, %v per design, GOMAXPROCS %d) counted in the same Redis two ways, "+
		"taking turns in each of %d repeats: the seed's design (one Lua script per event) and redisstore's (aggregate in memory, "+
		"flush changed buckets once a second). Both runs are checked to have counted every event. Commands per event come from "+
		"INFO commandstats (commands run inside scripts included); the paced run sends %d events/s for commands per event at a steady rate.\n\n",
		jobs, workers, dur, runtimeProcs(), repeat, rate)
	fmt.Println("| design | events/s median | spread | Redis commands/event | client commands/event |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, rs []result) {
		var eps []float64
		for _, r := range rs {
			eps = append(eps, r.eps())
		}
		med, lo, hi := median(eps)
		last := rs[len(rs)-1]
		fmt.Printf("| %s | %.0f | %.0f–%.0f | %.4f | %.4f |\n", name, med, lo, hi,
			float64(last.commands)/float64(last.events), float64(last.calls)/float64(last.events))
	}
	row(seeds[0].name, seeds)
	row(ours[0].name, ours)
	if rate > 0 {
		row(paced.name, []result{paced})
	}
	var ratios []float64
	for i := range seeds {
		ratios = append(ratios, ours[i].eps()/seeds[i].eps())
	}
	ratio, rlo, rhi := median(ratios)
	fmt.Printf("\nRatio (redisstore / seed, events/s, per repeat): median %.1f×, spread %.1f–%.1f×.\n\n", ratio, rlo, rhi)
	fmt.Printf("Target: Redis mode ≥ 5× the seed's one-Lua-call-per-event design — %s (%.1f×)\n", metOr(ratio >= 5), ratio)
	if rate > 0 {
		fmt.Printf("Target: ≤ 0.01 Redis commands/event — %s (%.4f at %d events/s, steady state)\n", metOr(paced.steady <= 0.01), paced.steady, rate)
	}
	return nil
}

func metOr(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func median(xs []float64) (med, lo, hi float64) {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[0], s[len(s)-1]
}

// commandCalls sums calls over INFO commandstats, less the INFO call
// that reads it.
func commandCalls(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for line := range strings.Lines(info) {
		_, rest, ok := strings.Cut(line, "calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("commandstats line %q: %w", line, err)
		}
		n += x
	}
	return n - 1, nil
}

// measure runs load on workers goroutines for dur and reports events and
// the commandstats delta; after (may be nil) runs before the clock stops.
func measure(ctx context.Context, c redis.UniversalClient, name string, dur time.Duration, workers int,
	load func(w int, stop *atomic.Bool) (int64, error), after func() error) (result, error) {
	before, err := commandCalls(ctx, c)
	if err != nil {
		return result{}, err
	}
	var stop atomic.Bool
	var total atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			n, err := load(w, &stop)
			total.Add(n)
			errs[w] = err
		})
	}
	timer := time.NewTimer(dur)
	<-timer.C
	stop.Store(true)
	wg.Wait()
	if after != nil {
		if err := after(); err != nil {
			return result{}, err
		}
	}
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	afterCalls, err := commandCalls(ctx, c)
	if err != nil {
		return result{}, err
	}
	return result{name: name, events: total.Load(), elapsed: elapsed, commands: afterCalls - before - 1}, nil
}

// event is one report of the load: a task of a job starting, or finishing
// with a cost.
type event struct {
	job    string
	id     string
	finish bool
	failed bool
	cost   int64
	ts     int64
}

// events yields worker w's events: each task starts, then finishes.
func events(w int, names []string) func() event {
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	i := 0
	var cur event
	return func() event {
		if !cur.finish && cur.id != "" {
			cur.finish, cur.failed, cur.cost, cur.ts = true, rng.IntN(20) == 0, 1+rng.Int64N(5000), time.Now().UnixMilli()
			return cur
		}
		i++
		cur = event{job: names[rng.IntN(len(names))], id: fmt.Sprintf("w%d-%d", w, i), ts: time.Now().UnixMilli()}
		return cur
	}
}

func cleanup(ctx context.Context, c redis.UniversalClient, prefix string) {
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 500 {
			c.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Unlink(ctx, keys...)
	}
}

var quiet = slog.New(slog.DiscardHandler)

func runtimeProcs() int { return runtimeGOMAXPROCS() }

// runOurs loads an Aggregator through a redisstore.Flusher flushing every
// second, then stops it (a last flush) and checks the store's totals.
// With rate > 0 the events come at that pace instead of as fast as Apply
// takes them.
func runOurs(ctx context.Context, c redis.UniversalClient, prefix string, names []string, dur time.Duration, workers, rate int) (result, error) {
	agg, err := metrics.New(metrics.Options{Logger: quiet})
	if err != nil {
		return result{}, err
	}
	fl, err := redisstore.NewFlusher(agg, redisstore.Options{Client: c, Prefix: prefix, Logger: quiet})
	if err != nil {
		return result{}, err
	}
	if err := fl.Start(ctx); err != nil {
		return result{}, err
	}
	var finishes, applied atomic.Int64
	var steady float64
	done := make(chan struct{})
	if rate == 0 {
		close(done)
	} else {
		sample := func() (int64, int64) { return fl.Stats().Commands, applied.Load() }
		go func() {
			defer close(done)
			time.Sleep(dur / 4)
			c0, e0 := sample()
			time.Sleep(dur / 2)
			c1, e1 := sample()
			steady = float64(c1-c0) / float64(max(e1-e0, 1))
		}()
	}
	name := "redisstore (Apply + flush every 1s)"
	if rate > 0 {
		name = fmt.Sprintf("redisstore paced at %d events/s", rate)
	}
	r, err := measure(ctx, c, name, dur, workers, func(w int, stop *atomic.Bool) (int64, error) {
		next := events(w, names)
		var n, fin int64
		start := time.Now()
		for !stop.Load() {
			if rate > 0 && n >= int64(time.Since(start).Seconds()*float64(rate)) {
				time.Sleep(time.Millisecond) // pacing a load generator, not a test
				continue
			}
			e := next()
			ch := change(e)
			fl.Apply(&ch)
			if rate > 0 {
				applied.Add(1)
			}
			n++
			if e.finish {
				fin++
			}
		}
		finishes.Add(fin)
		return n, nil
	}, func() error { fl.Stop(context.Background()); return nil })
	if err != nil {
		return r, err
	}
	<-done
	st := fl.Stats()
	r.calls = st.Commands
	r.steady = steady
	if st.Failures > 0 {
		return r, fmt.Errorf("%d flushes failed: %s", st.Failures, st.LastError)
	}
	store, err := redisstore.NewStore(redisstore.Options{Client: c, Prefix: prefix})
	if err != nil {
		return r, err
	}
	tb, err := store.Table(ctx, metrics.Query{Window: time.Hour})
	if err != nil {
		return r, err
	}
	if got := tb.Sum(0, len(tb.Rows)).Count; got != finishes.Load() {
		return r, fmt.Errorf("redisstore counted %d finishes, the load made %d", got, finishes.Load())
	}
	return r, nil
}

func change(e event) apollo.Change {
	prev := apollo.Task{TaskID: e.id, Name: e.job}
	if e.finish {
		prev.Status, prev.StartedAt, prev.Sequence, prev.UpdatedAt = apollo.StatusRunning, e.ts-e.cost, 1, e.ts-e.cost
	}
	next := prev
	next.Sequence++
	next.UpdatedAt = e.ts
	switch {
	case !e.finish:
		next.Status, next.StartedAt = apollo.StatusRunning, e.ts
	case e.failed:
		next.Status, next.FinishedAt, next.CostMs = apollo.StatusFailed, e.ts, e.cost
	default:
		next.Status, next.FinishedAt, next.CostMs = apollo.StatusSuccess, e.ts, e.cost
	}
	return apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: e.id, Name: e.job, Sequence: next.Sequence, Status: next.Status, Ts: e.ts}},
		Prev: apollo.BeforeOf(&prev), Task: next}
}
