// Command pushgateway runs Prometheus Pushgateway and Apollo-11 side by
// side on the same work: batch jobs reporting each result as it comes.
//
// Pushgateway gets what a batch job sends it: one push per result, a PUT
// of the job's metrics (last completion time, duration, success) to
// /metrics/job/NAME, replacing the job's group. Apollo-11 gets the same
// results three ways: batched POSTs of 100 results, one event per POST
// (a run's running event, then its success, as a cron line reports them),
// and GET /ping/NAME (one request per result). A result on Apollo-11 is a
// finished run, so it is two events.
//
// Each size N (jobs, that is Pushgateway groups) starts from N jobs that
// have already reported once: Pushgateway is filled with its consistency
// check off (with it on, filling 100 k groups one push at a time would
// take days, each push gathering every group), stopped cleanly so that it
// writes its persistence file, and restarted with its defaults on that
// file; Apollo-11 is a fresh server per target and repeat, filled over
// HTTP. Then one client (one request at a time, so the latency is the
// server's time per request and no queue) sends results across the N
// jobs for -duration per target per repeat. CPU per result is the server
// process's utime+stime from /proc/PID/stat; RSS per job is the server's
// RSS holding the N jobs minus its RSS right after start, over N.
//
//	go run ./cmd/pushgateway -sizes 100,10000,100000 -duration 3s -repeat 3
//	go run ./cmd/pushgateway -short   # small sizes; the peer only if built already
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/bench/internal/peer"
)

// opts are the command's settings.
type opts struct {
	sizes      []int
	dur        time.Duration
	repeat     int
	minReq     int   // a window lasts at least this many requests
	maxResults int64 // and stops early past this many results (each is a task kept by Apollo-11)
	short      bool
}

func main() {
	sizes := flag.String("sizes", "100,10000,100000", "jobs (Pushgateway groups) already reporting, comma-separated")
	dur := flag.Duration("duration", 3*time.Second, "how long each target is loaded, per size and repeat")
	repeat := flag.Int("repeat", 3, "repeats of every target at every size")
	minReq := flag.Int("min", 3, "a window lasts at least this many requests, however slow")
	maxResults := flag.Int64("max", 20_000, "a window ends early after this many results")
	pg := flag.String("pushgateway", "", "Pushgateway binary to run; empty: $APOLLO_PUSHGATEWAY, else build "+peer.Pushgateway.Module+"@"+peer.Pushgateway.Version)
	bin := flag.String("apollo", "", "apollo binary to measure; empty: build ./cmd/apollo of this repository")
	short := flag.Bool("short", false, "smoke run: 100 and 1000 jobs, 0.3 s windows, one repeat; Pushgateway only if already built")
	flag.Parse()
	o := opts{dur: *dur, repeat: *repeat, minReq: *minReq, maxResults: *maxResults, short: *short}
	command := fmt.Sprintf("go run ./cmd/pushgateway -sizes %s -duration %v -repeat %d -min %d -max %d", *sizes, *dur, *repeat, *minReq, *maxResults)
	if *short {
		o.sizes, o.dur, o.repeat, o.maxResults = []int{100, 1000}, 300*time.Millisecond, 1, 2000
		command = "go run ./cmd/pushgateway -short"
	} else {
		for _, f := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			check(err)
			o.sizes = append(o.sizes, n)
		}
	}
	ctx := context.Background()
	apolloBin, cleanup, err := harness.BuildIfEmpty(ctx, *bin, "pushgateway")
	check(err)
	defer cleanup()
	fmt.Fprintln(os.Stderr, "pushgateway: getting Pushgateway (a first build takes minutes)")
	pgBin, pgErr := peer.Get(ctx, peer.Pushgateway, *pg, !*short)
	if pgErr != nil {
		fmt.Fprintln(os.Stderr, "pushgateway:", pgErr)
	}
	r, err := run(apolloBin, pgBin, pgErr, o)
	check(err)
	r.print(command, o)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushgateway:", err)
		os.Exit(1)
	}
}

// run measures every size; a Pushgateway that cannot run at a size is
// recorded in the results and Apollo-11 is measured all the same.
func run(bin string, pgBin peer.Binary, pgErr error, o opts) (*results, error) {
	r := &results{peer: pgBin, peerErr: pgErr, loadBefore: harness.LoadAvg()}
	for _, n := range o.sizes {
		sz := &size{n: n, apollo: make([][]window, len(targets))}
		r.sizes = append(r.sizes, sz)
		var pg *gateway
		if pgErr == nil {
			fmt.Fprintf(os.Stderr, "pushgateway: filling Pushgateway with %d groups\n", n)
			var err error
			if pg, err = startGateway(pgBin.Path, n); err != nil {
				sz.peerErr = err
				fmt.Fprintln(os.Stderr, "pushgateway:", err)
			} else {
				sz.peerRSS = pg.rssPerGroup
			}
		}
		for rep := range o.repeat {
			if pg != nil {
				w, err := pg.measure(n, o)
				if err != nil {
					pg.stop()
					return nil, fmt.Errorf("Pushgateway, %d groups: %w", n, err)
				}
				sz.peer = append(sz.peer, w)
				fmt.Fprintf(os.Stderr, "pushgateway: %d groups, repeat %d/%d, Pushgateway: %s\n", n, rep+1, o.repeat, w)
			}
			for t := range targets {
				w, rss, err := measureApollo(bin, targets[t], n, o)
				if err != nil {
					if pg != nil {
						pg.stop()
					}
					return nil, fmt.Errorf("apollo %s, %d jobs: %w", targets[t].name, n, err)
				}
				sz.apollo[t] = append(sz.apollo[t], w)
				sz.apolloRSS = append(sz.apolloRSS, rss)
				fmt.Fprintf(os.Stderr, "pushgateway: %d jobs, repeat %d/%d, apollo %s: %s\n", n, rep+1, o.repeat, targets[t].name, w)
			}
		}
		if pg != nil {
			pg.stop()
		}
	}
	r.loadAfter = harness.LoadAvg()
	return r, nil
}
