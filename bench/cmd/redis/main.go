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
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/redisstore"
)

func main() {
	url := flag.String("redis", cmpOr(os.Getenv("APOLLO_TEST_REDIS"), "redis://127.0.0.1:6379/15"), "Redis URL")
	dur := flag.Duration("duration", 10*time.Second, "how long each design is loaded")
	jobs := flag.Int("jobs", 100, "job names the events spread over")
	workers := flag.Int("workers", 8, "goroutines producing events")
	rate := flag.Int("rate", 10_000, "events/s of the paced redisstore run, for commands per event at a steady rate (0: skip)")
	short := flag.Bool("short", false, "smoke run: 2s per design")
	flag.Parse()
	if *short {
		*dur = 2 * time.Second
	}
	if err := run(*url, *dur, *jobs, *workers, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "redis bench:", err)
		os.Exit(1)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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

func run(url string, dur time.Duration, jobs, workers, rate int) error {
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
	seed, err := runSeed(ctx, c, prefix+":seed", names, dur, workers)
	if err != nil {
		return err
	}
	ours, err := runOurs(ctx, c, prefix+":ours", names, dur, workers, 0)
	if err != nil {
		return err
	}
	results := []result{seed, ours}
	if rate > 0 {
		paced, err := runOurs(ctx, c, prefix+":paced", names, dur, 1, rate)
		if err != nil {
			return err
		}
		results = append(results, paced)
	}
	fmt.Printf("%d jobs, %d producers, %v per design, GOMAXPROCS %d\n\n", jobs, workers, dur, runtimeProcs())
	fmt.Println("| design | events | events/s | Redis commands/event (commandstats) | client commands/event |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.0f | %.4f | %.4f |\n", r.name, r.events, r.eps(), float64(r.commands)/float64(r.events), float64(r.calls)/float64(r.events))
	}
	fmt.Printf("\nratio (redisstore / seed events/s): %.1fx\n", ours.eps()/seed.eps())
	if rate > 0 {
		fmt.Printf("paced run, steady state (middle half, the flusher's own count): %.4f commands/event\n", results[2].steady)
	}
	return nil
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
	}, func() error { fl.Stop(); return nil })
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
		Prev: prev, Task: next}
}
