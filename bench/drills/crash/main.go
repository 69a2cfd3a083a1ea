// Command crash is the crash drill: the real apollo binary is killed with
// SIGKILL (its whole process group) at random moments while agent SDK
// clients report runs, and restarted on the same data directory each time.
// After the last restart the clients flush, and the drill checks that
//
//   - every run the clients reported (acknowledged: the client flushed with
//     nothing rejected or dropped) is there, every event, in order, with
//     legal transitions (GET /api/v1/tasks/ID);
//   - the write-ahead log, read back with the wal package after a last kill,
//     holds exactly those runs, and GET /api/v1/metrics?window=1h equals a
//     recount of the log per job (count, failed, started), and each task's
//     state equals the log's last record for it.
//
// It reports kills, runs, events, the time from kill to "up" per restart and
// the server's own apollo_recovery_seconds (median and max), and lost events.
//
//	go run ./drills/crash            # 50 kills, about 2 minutes
//	go run ./drills/crash -short     # 3 kills, a few seconds
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/bench/internal/harness"
)

const config = "snapshot_every: 24h\nlimits:\n  ingest_per_second: 0\n"

// run is an acknowledged run, read back after the drill.
type run = harness.Run

func main() {
	short := flag.Bool("short", false, "smoke form: 3 kills")
	kills := flag.Int("kills", 50, "SIGKILLs under load")
	producers := flag.Int("producers", 4, "goroutines reporting runs")
	rate := flag.Int("rate", 500, "runs a second per producer (3 events each)")
	seed := flag.Uint64("seed", 11, "seed for the kill moments")
	flag.Parse()
	cmdline := "go run ./drills/crash"
	if *short {
		*kills = 3
		cmdline += " -short"
	}
	if err := drill(cmdline, *kills, *producers, *rate, *seed); err != nil {
		fmt.Printf("\nResult: FAIL — %v\n", err)
		os.Exit(1)
	}
	fmt.Println("\nResult: PASS")
}

func fail(format string, a ...any) error { return fmt.Errorf(format, a...) }

func drill(cmdline string, kills, producers, rate int, seed uint64) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "apollo-crash-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := harness.Build(ctx, "..", tmp)
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	opts := harness.Options{Args: []string{"server", "--listen", addr}, Dir: tmp, Config: config}
	srv, err := harness.Start(bin, opts)
	if err != nil {
		return err
	}
	defer func() { srv.Kill() }()

	client, err := agent.New("http://"+addr, agent.WithFlushInterval(5*time.Millisecond), agent.WithBatchSize(100),
		agent.WithBufferSize(200_000), agent.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	var (
		mu      sync.Mutex
		runs    []run
		stop    atomic.Bool
		wg      sync.WaitGroup
		loadErr atomic.Value
	)
	start := time.Now()
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), seed))
			pace := time.NewTicker(time.Second / time.Duration(rate))
			defer pace.Stop()
			for i := 0; !stop.Load(); i++ {
				rn := run{ID: fmt.Sprintf("crash-%d-%d", g, i), Job: fmt.Sprintf("crash_job_%d", g)}
				tk := client.Task(rn.ID, rn.Job)
				steps := []func(...agent.EventOption) error{tk.Pending, tk.Running, tk.Succeed}
				rn.Final = apollo.StatusSuccess
				if r.IntN(4) == 0 {
					steps[2], rn.Final = tk.Fail, apollo.StatusFailed
				}
				for _, step := range steps {
					if err := step(); err != nil {
						loadErr.Store(fmt.Errorf("reporting %s: %v", rn.ID, err))
						return
					}
				}
				rn.Events = len(steps)
				mu.Lock()
				runs = append(runs, rn)
				mu.Unlock()
				<-pace.C
			}
		}()
	}

	var upTimes, recovery []float64
	var replayRate float64 // records a second, at the last restart
	r := rand.New(rand.NewPCG(seed, 7))
	for k := range kills {
		harness.WaitCtx(ctx, time.Duration(100+r.IntN(1400))*time.Millisecond) // a random moment under load
		if e := loadErr.Load(); e != nil {
			stop.Store(true)
			return e.(error)
		}
		srv.Kill()
		t0 := time.Now()
		if srv, err = harness.Start(bin, opts); err != nil {
			stop.Store(true)
			return fail("restart %d: %v", k+1, err)
		}
		upTimes = append(upTimes, time.Since(t0).Seconds())
		rec, _ := scrape(srv.URL(), "apollo_recovery_seconds")
		recovery = append(recovery, rec)
		if n, err := scrape(srv.URL(), "apollo_recovery_events"); err == nil && rec > 0 {
			replayRate = n / rec
		}
		mu.Lock()
		n := len(runs)
		mu.Unlock()
		fmt.Fprintf(os.Stderr, "kill %d/%d: up again in %v (recovery %.3fs), %d runs so far, client %+v\n",
			k+1, kills, time.Since(t0).Round(time.Millisecond), rec, n, client.Stats())
	}
	stop.Store(true)
	wg.Wait()
	loadTime := time.Since(start)
	if e := loadErr.Load(); e != nil {
		return e.(error)
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := client.Flush(fctx); err != nil {
		return fail("flush after the last restart: %v (%+v)", err, client.Stats())
	}
	st := client.Stats()
	if st.Rejected != 0 || st.Dropped != 0 {
		return fail("client stats %+v: nothing may be rejected or dropped", st)
	}
	if len(runs) < 100 {
		return fail("only %d runs reported: the load did not run", len(runs))
	}
	events := 0
	for _, rn := range runs {
		events += rn.Events
	}

	// Every acknowledged run, through the API, with every event in order.
	lost, err := harness.ReadBack(srv.URL(), runs)
	if err != nil {
		return err
	}
	if lost != 0 {
		return fail("%d acknowledged events lost", lost)
	}
	api, err := jobMetrics(srv.URL())
	if err != nil {
		return err
	}

	// One last kill, then the log itself: it must hold exactly these runs,
	// and the metrics must equal its recount.
	srv.Kill()
	logTasks, records, err := readLog(srv.Dir + "/data")
	if err != nil {
		return fail("reading the log: %v", err)
	}
	if err := compareLog(runs, logTasks, api); err != nil {
		return err
	}

	fmt.Println("## Crash drill")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", cmdline)
	fmt.Printf("The real `apollo server` (fsync batch) was killed with SIGKILL to its process group %d times at random "+
		"moments (0.1–1.5 s apart) while %d agent SDK producers reported runs (pending, running, success or failed), "+
		"and restarted on the same data directory each time. After the last restart the client flushed; every "+
		"acknowledged run was read back through `GET /api/v1/tasks/ID`; then after one more kill the write-ahead log "+
		"was read with the `wal` package and recounted per job against `GET /api/v1/metrics?window=1h`.\n\n",
		kills, producers)
	um, _, uhi := harness.Median(upTimes)
	rm, _, rhi := harness.Median(recovery)
	fmt.Println("| figure | value |\n|---|---|")
	fmt.Printf("| kills | %d |\n| load time | %v |\n| runs acknowledged | %d |\n| events acknowledged | %d |\n",
		kills, loadTime.Round(time.Second), len(runs), events)
	fmt.Printf("| log records read back | %d |\n| kill → up, median / max | %.3f s / %.3f s |\n", records, um, uhi)
	fmt.Printf("| server recovery (apollo_recovery_seconds), median / max | %.3f s / %.3f s |\n", rm, rhi)
	fmt.Printf("| log replay at the last restart, under the client's retries | %.0f records/s |\n", replayRate)
	fmt.Printf("| client retries / duplicates | %d / %d |\n| rejected / dropped | %d / %d |\n| lost | %d |\n",
		st.Retries, st.Duplicate, st.Rejected, st.Dropped, lost)
	fmt.Println()
	fmt.Printf("Target: an acknowledged event is never lost (invariant 1) — met (0 of %d lost over %d kills)\n", events, kills)
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// compareLog checks the log against the client's runs and the API's metrics.
func compareLog(runs []run, logTasks map[string]*logTask, api map[string]jobCounts) error {
	if len(logTasks) != len(runs) {
		return fail("the log holds %d tasks, the client acknowledged %d runs", len(logTasks), len(runs))
	}
	for _, rn := range runs {
		t := logTasks[rn.ID]
		if t == nil {
			return fail("run %s is not in the log", rn.ID)
		}
		if !slices.Equal(t.seqs, []int64{1, 2, 3}[:rn.Events]) || t.final() != rn.Final {
			return fail("run %s in the log: sequences %v statuses %v, want %d events ending %v", rn.ID, t.seqs, t.history, rn.Events, rn.Final)
		}
	}
	want := recount(logTasks)
	if len(api) != len(want) {
		return fail("metrics for %d jobs, the log has %d", len(api), len(want))
	}
	for job, w := range want {
		if g := api[job]; g != w {
			return fail("%s: metrics say %+v, the log's recount %+v", job, g, w)
		}
	}
	return nil
}

func jobMetrics(base string) (map[string]jobCounts, error) {
	var m struct {
		Jobs []struct {
			Name string
			jobCounts
		}
	}
	if code, err := harness.GetJSON(base+"/api/v1/metrics?window=1h&prefix=crash_job_", &m); err != nil || code != 200 {
		return nil, fail("GET metrics: %d %v", code, err)
	}
	out := map[string]jobCounts{}
	for _, j := range m.Jobs {
		out[j.Name] = j.jobCounts
	}
	return out, nil
}

// scrape reads one sample from GET /metrics.
func scrape(base, name string) (float64, error) {
	m, err := harness.Scrape(base)
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fail("%s not in /metrics", name)
	}
	return v, nil
}
