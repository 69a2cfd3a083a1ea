// Command notifydown is the drill "notification channel down for 5 min
// during a storm: evaluation timing unchanged, every notification delivered
// after recovery, none twice".
//
// It runs the real `apollo server` with, per prefix of a storm, one rate
// rule that fires and one event rule (plus -quiet rate rules that never
// fire, so evaluation has work), all notifying one webhook channel served by
// the drill. An agent-SDK client reports failed runs over every prefix. After
// -before of storm the webhook answers 503 to everything for -outage, then
// 200 again; the storm goes on for -control with the channel up, then stops.
// Every second the drill reads apollo_rule_evaluation_seconds from GET
// /metrics (one sample per evaluation cycle, told apart by
// apollo_rule_last_evaluation_timestamp_seconds) and compares the cycles
// during the outage, in runs as long as the baseline, with those before (the
// control's are shown beside them). It times how long after recovery the
// backlog took to go out, and waits (polling, with a deadline) until the channel has drained:
// every queued notification has a final outcome and every message the server
// recorded as sent (GET /api/v1/notifications) reached the webhook, each
// exactly once (by dedupKey and the notification's time), and every alert
// that fired (GET /api/v1/alerts) was notified.
//
//	go run ./drills/notifydown            # 5 min outage, 6.5 to 11 minutes
//	go run ./drills/notifydown -short     # 5 s outage, for CI
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/webhook"
)

type params struct {
	outage, before, control, drain, group time.Duration
	prefixes, jobs, quiet, rate           int
	short                                 bool
}

func main() {
	var p params
	flag.DurationVar(&p.outage, "outage", 5*time.Minute, "how long the webhook answers 503")
	flag.DurationVar(&p.before, "before", 30*time.Second, "storm before the outage (the evaluation baseline)")
	flag.DurationVar(&p.control, "control", 30*time.Second, "storm after the channel returns (the control)")
	flag.DurationVar(&p.drain, "drain", 6*time.Minute, "deadline for the channel to drain after recovery (the retry backoff is capped at 5 min)")
	flag.DurationVar(&p.group, "group", 30*time.Second, "GROUP_WINDOW of the event rules")
	flag.IntVar(&p.prefixes, "prefixes", 50, "prefixes of the storm: one rate rule and one event rule each")
	flag.IntVar(&p.jobs, "jobs", 10, "job names per prefix")
	flag.IntVar(&p.quiet, "quiet", 500, "extra rate rules that never fire")
	flag.IntVar(&p.rate, "rate", 100, "failed runs/s of the storm")
	flag.BoolVar(&p.short, "short", false, "smoke run: 5 s outage between 5 s and 3 s of storm, 2 s group window")
	flag.Parse()
	cmd := "go run ./drills/notifydown"
	if p.short {
		p.outage, p.before, p.control, p.drain, p.group = 5*time.Second, 5*time.Second, 3*time.Second, time.Minute, 2*time.Second
		cmd += " -short"
	} else if len(os.Args) > 1 {
		cmd += " " + strings.Join(os.Args[1:], " ")
	}
	res, err := run(p)
	if res == nil {
		fmt.Fprintln(os.Stderr, "notifydown:", err)
		os.Exit(1)
	}
	report(cmd, p, res, err)
	if err != nil {
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" notifydown: "+format+"\n", args...)
}

// hook is the webhook the channel posts to.
type hook struct {
	down     atomic.Bool
	refused  atomic.Int64
	mu       sync.Mutex
	byKey    map[string]int // dedupKey -> deliveries
	byID     map[string]int // dedupKey + notification time -> deliveries
	alertIDs map[string]bool
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.down.Load() {
		h.refused.Add(1)
		http.Error(w, "drill: channel down", http.StatusServiceUnavailable)
		return
	}
	var p webhook.ApolloPayload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ns := append([]apollo.Notification{p.Notification}, p.Notifications...) // a digest stands for its notifications
	for _, n := range ns {
		h.byKey[n.DedupKey]++
		h.byID[n.DedupKey+"@"+n.At.Format(time.RFC3339Nano)]++
		h.alertIDs[n.Alert.ID] = true
	}
}

func (h *hook) snapshot() (byKey map[string]int, dups int, delivered int, ids map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	byKey, ids = map[string]int{}, map[string]bool{}
	for k, v := range h.byKey {
		byKey[k] = v
	}
	for k := range h.alertIDs {
		ids[k] = true
	}
	for _, v := range h.byID {
		delivered++
		dups += v - 1
	}
	return byKey, dups, delivered, ids
}

type result struct {
	evalBefore, evalDuring harness.Latencies
	evalAfter              harness.Latencies // the control: storm on, channel up again
	// The outage's cycles cut into runs as long as the baseline: the
	// median of their p50s and p99s, and the spread of their p99s.
	chunks                   int
	chunkP50, chunkP99       time.Duration
	chunkP99Lo, chunkP99Hi   time.Duration
	runs                     int64
	queuedOutage, refused    int64
	queued, sent             int64
	delivered, duplicates    int
	missing, unnotified      int
	failedOutcomes           int64
	drain                    time.Duration
	alertsFired, engineDrops int
	waiting                  int
}

func run(p params) (*result, error) {
	ctx := context.Background()
	h := &hook{byKey: map[string]int{}, byID: map[string]int{}, alertIDs: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hsrv := &http.Server{Handler: h}
	go hsrv.Serve(ln)
	defer hsrv.Close()

	tmp, err := os.MkdirTemp("", "apollo-notifydown-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var rules strings.Builder
	for i := range p.prefixes {
		fmt.Fprintf(&rules, "RULE rate_%02d task_prefix: \"storm_%02d_\" WINDOW: 1m THRESHOLD: failed >= 2 NOTIFY: hook\n", i, i)
		fmt.Fprintf(&rules, "RULE ev_%02d task_prefix: \"storm_%02d_\" ON: failed GROUP_WINDOW: %s NOTIFY: hook\n", i, i, p.group)
	}
	for i := range p.quiet {
		fmt.Fprintf(&rules, "RULE quiet_%03d task_prefix: \"storm_%02d_\" WINDOW: 5m THRESHOLD: count >= 100000000 NOTIFY: hook\n", i, i%max(p.prefixes, 1))
	}
	rulesPath := filepath.Join(tmp, "rules.txt")
	if err := os.WriteFile(rulesPath, []byte(rules.String()), 0o644); err != nil {
		return nil, err
	}
	// give_up_after (default 1h) must outlast the outage plus the last
	// backoff, which is capped at 5 min: 30m is set so the drill does not
	// depend on the default. queue_size holds the whole storm's messages.
	cfg := fmt.Sprintf(`fsync: "off"
channels:
  hook:
    type: webhook
    url: http://%s/hook
    give_up_after: 30m
    queue_size: 20000
alert:
  interval: 1s
`, ln.Addr())
	logf("building apollo")
	bin, err := harness.Build(ctx, "..", tmp)
	if err != nil {
		return nil, err
	}
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server", "--rules", rulesPath}, Dir: tmp, Config: cfg})
	if err != nil {
		return nil, err
	}
	defer srv.Stop(20 * time.Second)
	logf("server up at %s; webhook at %s", srv.Addr, ln.Addr())

	cl, err := agent.New(srv.URL(), agent.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	defer cl.Close(ctx)
	res := &result{}
	var stop atomic.Bool
	var runs atomic.Int64
	stormDone := make(chan error, 1)
	go func() {
		start := time.Now()
		for i := 0; !stop.Load(); i++ {
			for float64(i) >= time.Since(start).Seconds()*float64(p.rate) && !stop.Load() {
				time.Sleep(time.Millisecond) // pacing the load generator
			}
			t := cl.Task(fmt.Sprintf("run-%d", i), fmt.Sprintf("storm_%02d_job%d", i%p.prefixes, (i/p.prefixes)%p.jobs))
			if err := t.Running(); err != nil {
				stormDone <- err
				return
			}
			if err := t.Fail(); err != nil {
				stormDone <- err
				return
			}
			runs.Add(1)
		}
		stormDone <- nil
	}()

	// Evaluation samples: one per cycle, put in a phase by when the cycle
	// ran; the first third of the storm (start-up, the first firings) is
	// left out of the baseline.
	type cycle struct {
		at  time.Time
		dur time.Duration
	}
	var cycles []cycle
	var last float64
	sample := func() {
		v, at, err := evalMetric(srv)
		if os.Getenv("NOTIFYDOWN_DEBUG") != "" {
			logf("sample %v %.3f %v", v, at, err)
		}
		if err == nil && at != last && at != 0 {
			last = at
			cycles = append(cycles, cycle{time.Unix(0, int64(at*1e9)), time.Duration(v * float64(time.Second))})
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	stormStart := time.Now()
	logf("storm at %d failed runs/s over %d prefixes for %v", p.rate, p.prefixes, p.before)
	for end := time.Now().Add(p.before); time.Now().Before(end); <-tick.C {
		sample()
	}
	q0 := chanStats(srv).Queued
	logf("webhook down for %v", p.outage)
	h.down.Store(true)
	cut := time.Now()
	for end := time.Now().Add(p.outage); time.Now().Before(end); <-tick.C {
		sample()
	}
	cs := chanStats(srv)
	res.queuedOutage = cs.Queued - q0
	h.down.Store(false)
	restored := time.Now()
	// The backlog has drained when as many notifications have their final
	// outcome as were queued when the channel came back (a lane is FIFO).
	backlog := make(chan error, 1)
	go func() {
		err := harness.Poll(p.drain, func() bool { return settled(chanStats(srv)) >= cs.Queued })
		res.drain = time.Since(restored)
		backlog <- err
	}()
	logf("webhook back; storm goes on for %v with the channel up", p.control)
	for end := time.Now().Add(p.control); time.Now().Before(end); <-tick.C {
		sample()
	}
	stop.Store(true)
	if err := <-stormDone; err != nil {
		return res, fmt.Errorf("storm: %w", err)
	}
	res.runs = runs.Load()
	res.refused = h.refused.Load()
	var before, during, after []time.Duration
	for _, c := range cycles {
		switch {
		case c.at.After(restored):
			after = append(after, c.dur)
		case c.at.After(cut):
			during = append(during, c.dur)
		case c.at.After(stormStart.Add(p.before / 3)):
			before = append(before, c.dur)
		}
	}
	res.evalBefore, res.evalDuring = harness.Summarise(slices.Clone(before)), harness.Summarise(slices.Clone(during))
	res.evalAfter = harness.Summarise(slices.Clone(after))
	res.chunkStats(len(before), during)
	logf("eval before %v, during %v, after %v", res.evalBefore, res.evalDuring, res.evalAfter)
	backlogErr := <-backlog
	logf("backlog drained %v after recovery (%v)", res.drain.Round(time.Millisecond), backlogErr)

	// Drain: every queued notification has its outcome, the webhook has
	// each message as many times as the server records it sent, and every
	// alert that fired was notified. The figures are those of the last
	// check, which reads the alerts, the counters, the webhook and the
	// record in that order, so that a message sent meanwhile cannot look
	// like a duplicate.
	check := func() bool {
		alerts, err := firedAlerts(srv)
		if err != nil {
			return false
		}
		cs := chanStats(srv)
		byKey, dups, delivered, ids := h.snapshot()
		attempts, err := listAttempts(srv)
		if err != nil {
			return false
		}
		sentBy := map[string]int{}
		for _, a := range attempts {
			if a.Outcome == notify.OutcomeSent || a.Outcome == notify.OutcomeCoalesced {
				sentBy[a.DedupKey]++
			}
		}
		res.queued, res.sent, res.failedOutcomes = cs.Queued, cs.Sent, cs.Failed+cs.GaveUp+cs.Dropped
		res.delivered, res.missing, res.unnotified = delivered, 0, 0
		excess := 0
		res.alertsFired, res.waiting = len(alerts), cs.QueueLen
		for k, n := range sentBy {
			res.missing += max(0, n-byKey[k])
		}
		for k, n := range byKey {
			excess += max(0, n-sentBy[k])
		}
		res.duplicates = max(dups, excess) // a message twice shows in both
		for _, id := range alerts {
			if !ids[id] {
				res.unnotified++
			}
		}
		return cs.QueueLen == 0 && cs.Queued == settled(cs) && res.missing == 0 && res.duplicates == 0 && res.unnotified == 0
	}
	drainErr := backlogErr
	if drainErr == nil {
		drainErr = harness.Poll(p.drain, check)
	} else {
		check()
	}
	res.engineDrops = engineDrops(srv)
	switch {
	case drainErr != nil:
		return res, fmt.Errorf("the channel did not drain within %v of recovery: %d missing at the webhook, %d duplicates, %d fired alerts never notified, %d still queued",
			p.drain, res.missing, res.duplicates, res.unnotified, res.waiting)
	case res.failedOutcomes > 0:
		return res, fmt.Errorf("%d notifications failed, gave up or were dropped", res.failedOutcomes)
	case res.missing > 0 || res.duplicates > 0 || res.unnotified > 0:
		return res, fmt.Errorf("%d missing, %d duplicates, %d fired alerts never notified", res.missing, res.duplicates, res.unnotified)
	case res.engineDrops > 0:
		return res, fmt.Errorf("the alert engine dropped %d notifications (its event-rule queue was full)", res.engineDrops)
	case res.queuedOutage == 0:
		return res, fmt.Errorf("no notification was queued during the outage: the drill did not test the channel being down")
	}
	return res, nil
}

// chunkStats compares like with like: a p99 over 280 cycles catches rare
// spikes (a GC, another process) that one over 14 cannot, so the outage's
// cycles are cut into consecutive runs of the baseline's length (the last
// one kept if at least half as long) and each run's quantiles taken.
func (r *result) chunkStats(n int, during []time.Duration) {
	n = max(n, 5)
	var p50s, p99s []float64
	for i := 0; i < len(during); i += n {
		c := during[i:min(i+n, len(during))]
		if len(c) < n/2 && len(p50s) > 0 {
			break
		}
		l := harness.Summarise(slices.Clone(c))
		p50s, p99s = append(p50s, float64(l.P50)), append(p99s, float64(l.P99))
	}
	if len(p50s) == 0 {
		return
	}
	m50, _, _ := harness.Median(p50s)
	m99, lo, hi := harness.Median(p99s)
	r.chunks = len(p50s)
	r.chunkP50, r.chunkP99 = time.Duration(m50), time.Duration(m99)
	r.chunkP99Lo, r.chunkP99Hi = time.Duration(lo), time.Duration(hi)
}

// settled is how many notifications have their final outcome.
func settled(cs notify.ChannelStats) int64 {
	return cs.Sent + cs.Coalesced + cs.Failed + cs.GaveUp + cs.Dropped
}

// getJSON reads a 200 answer of the server's API into v.
func getJSON(p *harness.Proc, path string, v any) error {
	code, err := harness.GetJSON(p.URL()+path, v)
	if err == nil && code != 200 {
		err = fmt.Errorf("GET %s: status %d", path, code)
	}
	return err
}

func chanStats(p *harness.Proc) notify.ChannelStats {
	var sys struct {
		Notifications notify.Stats `json:"notifications"`
	}
	getJSON(p, "/api/v1/system", &sys)
	return sys.Notifications.Channels["hook"]
}

func engineDrops(p *harness.Proc) int {
	var sys struct {
		Alert struct{ Dropped int } `json:"alert"`
	}
	getJSON(p, "/api/v1/system", &sys)
	return sys.Alert.Dropped
}

func listAttempts(p *harness.Proc) ([]notify.Attempt, error) {
	var out struct {
		Attempts []notify.Attempt `json:"attempts"`
	}
	err := getJSON(p, "/api/v1/notifications?channel=hook&limit=10000", &out)
	return out.Attempts, err
}

// firedAlerts is the IDs of the alerts that fired (GET /api/v1/alerts).
func firedAlerts(p *harness.Proc) ([]string, error) {
	var out struct {
		Alerts []apollo.Alert `json:"alerts"`
	}
	if err := getJSON(p, "/api/v1/alerts", &out); err != nil {
		return nil, err
	}
	var ids []string
	for _, a := range out.Alerts {
		if !a.FiredAt.IsZero() {
			ids = append(ids, a.ID)
		}
	}
	return ids, nil
}

// evalMetric reads the latest cycle's wall time and when it ran.
func evalMetric(p *harness.Proc) (secs, at float64, err error) {
	m, err := harness.Scrape(p.URL())
	if err != nil {
		return 0, 0, err
	}
	return m["apollo_rule_evaluation_seconds"], m["apollo_rule_last_evaluation_timestamp_seconds"], nil
}

// evalOK is the bound on evaluation timing: a quantile during the outage
// may be at most twice the one before, or within 5 ms of it (cycles of a
// few milliseconds vary by more than 2× with the scheduler's noise on a
// 2-core machine), and never more than 50 ms above it (half the 100 ms a
// cycle of 10 000 rules may take, docs/architecture.md).
func evalOK(before, during time.Duration) bool {
	d := during - before
	return (during <= 2*before || d <= 5*time.Millisecond) && d <= 50*time.Millisecond
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func report(cmd string, p params, r *result, failure error) {
	fmt.Println("## Drill: notification channel down during a storm")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", cmd)
	fmt.Printf("The real `apollo server` evaluates %d rate rules every second (%d that fire, one per prefix of the storm, "+
		"and %d that never do) and %d event rules (`GROUP_WINDOW: %v`), all notifying one webhook channel served by the "+
		"drill (`give_up_after: 30m`, longer than the outage plus the 5-minute cap on the retry backoff; `queue_size: 20000`). "+
		"An agent-SDK client reports %d failed runs/s over %d prefixes × %d jobs. After %v the webhook answers 503 for %v, "+
		"then 200; the storm goes on for %v more (the control) and stops. Evaluation cycles are read from `apollo_rule_evaluation_seconds` on GET /metrics "+
		"every second (one sample per cycle, placed by when it ran; the first third of the storm is left out of the baseline); "+
		"the outage's cycles are cut into runs as long as the baseline and the median of their quantiles is compared with "+
		"the baseline's, so that both sides have the same number of cycles. After recovery the drill polls until the channel has drained: every queued "+
		"notification has its outcome, and every message GET /api/v1/notifications records as sent reached the webhook "+
		"exactly once (by `dedupKey` and the notification's `at`); every alert that fired (GET /api/v1/alerts) was notified. "+
		"One run.\n\n",
		p.prefixes+p.quiet, p.prefixes, p.quiet, p.prefixes, p.group, p.rate, p.prefixes, p.jobs, p.before, p.outage, p.control)
	fmt.Println("| evaluation cycle | before the outage | during the outage | after it (control) |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| cycles sampled | %d | %d (%d runs of %d) | %d |\n", r.evalBefore.N, r.evalDuring.N, r.chunks, max(r.evalBefore.N, 5), r.evalAfter.N)
	fmt.Printf("| p50 (during: median of the runs') | %s | %s | %s |\n", ms(r.evalBefore.P50), ms(r.chunkP50), ms(r.evalAfter.P50))
	fmt.Printf("| p99 (during: median of the runs', min–max) | %s | %s (%s–%s) | %s |\n", ms(r.evalBefore.P99), ms(r.chunkP99), ms(r.chunkP99Lo), ms(r.chunkP99Hi), ms(r.evalAfter.P99))
	fmt.Printf("| p50 / p99 over all its cycles | %s / %s | %s / %s | %s / %s |\n", ms(r.evalBefore.P50), ms(r.evalBefore.P99), ms(r.evalDuring.P50), ms(r.evalDuring.P99), ms(r.evalAfter.P50), ms(r.evalAfter.P99))
	fmt.Println()
	fmt.Println("| figure | value |")
	fmt.Println("|---|---|")
	fmt.Printf("| failed runs reported | %d |\n", r.runs)
	fmt.Printf("| notifications queued during the outage | %d |\n", r.queuedOutage)
	fmt.Printf("| attempts the webhook refused (503) | %d |\n", r.refused)
	fmt.Printf("| notifications queued in all / messages sent | %d / %d |\n", r.queued, r.sent)
	fmt.Printf("| delivered to the webhook (distinct) | %d |\n", r.delivered)
	fmt.Printf("| alerts that fired / never notified | %d / %d |\n", r.alertsFired, r.unnotified)
	fmt.Printf("| missing at the webhook | %d |\n", r.missing)
	fmt.Printf("| duplicates | %d |\n", r.duplicates)
	fmt.Printf("| failed, gave up or dropped | %d |\n", r.failedOutcomes)
	fmt.Printf("| time to drain after recovery | %v |\n", r.drain.Round(100*time.Millisecond))
	fmt.Println()
	ok50 := evalOK(r.evalBefore.P50, r.chunkP50)
	ok99 := evalOK(r.evalBefore.P99, r.chunkP99)
	verdict := "met"
	if !ok50 || !ok99 {
		verdict = "MISSED"
	}
	fmt.Printf("Target: evaluation timing unchanged while a channel is down (p50 and p99 during ≤ 2× before or within 5 ms, and never 50 ms more) — %s (p50 %s → %s, p99 %s → %s)\n",
		verdict, ms(r.evalBefore.P50), ms(r.chunkP50), ms(r.evalBefore.P99), ms(r.chunkP99))
	if verdict == "MISSED" {
		ctl := "slower"
		if evalOK(r.evalAfter.P50, r.chunkP50) && evalOK(r.evalAfter.P99, r.chunkP99) {
			ctl = "as slow"
		}
		fmt.Printf("The cycles after the outage, with the channel up and the storm still on, are %s: "+
			"if as slow, the cycle grows over the run (every group window of every event rule leaves an alert the engine keeps) "+
			"or with the machine's other load, rather than with the channel; if faster, the channel being down reaches the "+
			"evaluation loop (the engine should only enqueue) and a profile of the server during an outage would show where.\n", ctl)
	}
	fmt.Println("\nThe time to drain is dominated by the retry backoff of the message at the head of the lane: full jitter up to 1 s, 2 s, 4 s, … capped at 5 minutes (notify/backoff.go), so after a long outage the next try may come up to 5 minutes after the channel returns; the messages queued behind it then go out at once.")
	if failure != nil {
		fmt.Printf("\nResult: FAIL — %v\n", failure)
		return
	}
	fmt.Println("\nResult: PASS")
}
