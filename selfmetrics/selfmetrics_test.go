package selfmetrics_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/sched"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
	"github.com/apollo-11/apollo/wal"
)

var discardLogger = slog.New(slog.DiscardHandler)

// fixed is a component whose stats are set by the test.
func fixed[S selfmetrics.Figurer](st S) func() S { return func() S { return st } }

// fullParts are every component a process may run, each with a distinct
// value in every field, so a field mapped to the wrong metric shows.
func fullParts() selfmetrics.Parts {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return selfmetrics.Parts{
		selfmetrics.Watch("bus", fixed(bus.Stats{Accepted: 101, Duplicate: 102, Illegal: 103, Invalid: 104, Held: 105, Refused: 106, Parked: 107,
			WaitEnded: 108, Timeouts: 109, MissedStart: 110, Corrections: 111, Evicted: 112, Replayed: 113, LogErrors: 114,
			Tasks: 115, Queues: 116, Queued: 117, Holding: 118, HoldLimit: 119, Waiting: 120, Tombstones: 121, Deadlines: 122,
			Subscribers: 123, SubscribersCut: 124, LastLSN: 125})),
		selfmetrics.Watch("stream", fixed(stream.Stats{Changes: 901, Messages: 902, Resyncs: 903, Snapshots: 904, Resumes: 905,
			Accepted: 906, Refused: 907, ClosedSlow: 908, ClosedNoPong: 909, ClosedShutdown: 910, OverLimit: 911, AlertsLost: 912, AlertsCut: 913})),
		selfmetrics.Watch("connections", fixed(httpapi.ConnStats{Open: 951, Limit: 952, Waiting: 953, Accepted: 954, Evicted: 955, Refused: 956})),
		selfmetrics.Watch("wal", fixed(wal.Stats{Appends: 201, Bytes: 202, Syncs: 203, SyncLatencyLast: 204 * time.Millisecond,
			SyncLatencyMax: 205 * time.Millisecond, SyncLatencySum: 206 * time.Millisecond, Segments: 207, Repaired: 208, LastLSN: 209, DurableLSN: 210})),
		selfmetrics.Watch("metrics", fixed(metrics.Stats{Names: 301, Buckets: 302, Rollups: 303, TooOld: 304, TooNew: 305, Bytes: 306})),
		selfmetrics.Watch("notifications", fixed(notify.Stats{UnknownChannel: 401, OutboxFailures: 409, Channels: map[string]notify.ChannelStats{
			"ops": {Queued: 402, Sent: 403, Failed: 404, Retried: 405, GaveUp: 406, Dropped: 407, Coalesced: 408, QueueLen: 410}}})),
		selfmetrics.Watch("alert", fixed(alert.Stats{LastEvaluation: at, LastDuration: 501 * time.Millisecond, Evaluations: 502,
			EvaluationErrors: 503, RateRules: 504, EventRules: 505, Alerts: map[apollo.AlertState]int{apollo.AlertFiring: 506, apollo.AlertPending: 507},
			Sent: 508, Deduped: 509, Silenced: 510, Dropped: 511, LockErrors: 512, SaveErrors: 513, Owed: 514, Refused: 515})),
		selfmetrics.Watch("learner", fixed(expect.LearnerStats{Jobs: 981, Dropped: 982})),
		selfmetrics.Watch("scheduler", fixed(sched.Stats{Runs: 601, Skipped: 602, Missed: 603, ReportErrors: 604, StateErrors: 605})),
		selfmetrics.Watch("redis", fixed(redisstore.Stats{Flushes: 701, Failures: 702, FullCopies: 703, Refills: 708, Jobs: 704, Fields: 705,
			Commands: 706, Dirty: 707, LastFlush: at.Add(time.Second)})),
		selfmetrics.Watch("recovery", fixed(selfmetrics.Recovery{Duration: 801 * time.Millisecond, Events: 802})),
		selfmetrics.Watch("checkpoint", fixed(selfmetrics.Checkpoint{Taken: 811, Pause: 812 * time.Millisecond, Write: 813 * time.Millisecond,
			Bytes: 814, At: at})),
	}
}

// scrape serves GET /metrics from ps.
func scrape(t testing.TB, ps selfmetrics.Parts) string {
	t.Helper()
	rec := httptest.NewRecorder()
	ps.Handler(discardLogger, nil).ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// apolloLines are the lines of an exposition about Apollo-11's figures.
func apolloLines(exposition string) string {
	var b strings.Builder
	for line := range strings.Lines(exposition) {
		if strings.Contains(line, "apollo_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// Every field of every component's stats lands in the metric the docs
// give it; the whole apollo_ exposition is compared with a reviewed file.
func TestEveryField(t *testing.T) {
	t.Parallel()
	got := apolloLines(scrape(t, fullParts()))
	const golden = "testdata/prometheus.txt"
	if os.Getenv("APOLLO_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the apollo_ metrics differ from %s (APOLLO_UPDATE_GOLDEN=1 rewrites it; review the diff):\n%s", golden, got)
	}
}

// promlint finds nothing wrong with any metric, Apollo-11's or the
// runtime's: names, units, suffixes, help texts.
func TestLint(t *testing.T) {
	t.Parallel()
	problems, err := promlint.New(strings.NewReader(scrape(t, fullParts()))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// Only the parts watched are reported: a process lists what it runs.
func TestOnlyTheWatchedParts(t *testing.T) {
	t.Parallel()
	got := apolloLines(scrape(t, selfmetrics.Parts{selfmetrics.Watch("bus", fixed(bus.Stats{Tasks: 3}))}))
	for line := range strings.Lines(got) {
		rest, ok := strings.CutPrefix(line, "# TYPE ")
		if !ok {
			continue
		}
		name := strings.Fields(rest)[0]
		for _, absent := range []string{"apollo_wal_", "apollo_scheduler_", "apollo_stream_", "apollo_rule", "apollo_alert",
			"apollo_notification", "apollo_redis_", "apollo_metrics_", "apollo_recovery_"} {
			if strings.HasPrefix(name, absent) {
				t.Errorf("%s reported by a process that watches only its bus", name)
			}
		}
	}
	if !strings.Contains(got, "\napollo_tasks 3\n") {
		t.Errorf("the bus's apollo_tasks is missing:\n%s", got)
	}
}

// GET /api/v1/system reads the same stats: each part's, encoded as it
// always was (the recovery as seconds and events).
func TestPartStats(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		part selfmetrics.Part
		want string
	}{
		{selfmetrics.Watch("recovery", fixed(selfmetrics.Recovery{Duration: 1250 * time.Millisecond, Events: 7})), `{"seconds":1.25,"events":7}`},
		{selfmetrics.Watch("scheduler", fixed(sched.Stats{Runs: 2})), `"runs":2`},
		{selfmetrics.Watch("checkpoint", fixed(selfmetrics.Checkpoint{Taken: 3, Pause: 250 * time.Millisecond, Bytes: 9})), `{"taken":3,"pauseSeconds":0.25,"writeSeconds":0,"bytes":9,`},
	} {
		b, err := json.Marshal(tt.part.Stats(""))
		if err != nil || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %s %v, want %s", tt.part.Name, b, err, tt.want)
		}
	}
}

// docs/monitoring.md names every metric a process can report.
func TestMonitoringDocCoversEveryMetric(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(scrape(t, fullParts())) {
		rest, ok := strings.CutPrefix(line, "# TYPE apollo_")
		if !ok {
			continue
		}
		name := "apollo_" + strings.Fields(rest)[0]
		n++
		if !strings.Contains(string(doc), "`"+name+"`") && !strings.Contains(string(doc), "`"+name+"{") {
			t.Errorf("docs/monitoring.md does not describe %s", name)
		}
	}
	if n < 60 {
		t.Fatalf("only %d apollo_ families in the full exposition", n)
	}
}

// BenchmarkScrape is one GET /metrics of every part.
func BenchmarkScrape(b *testing.B) {
	h := fullParts().Handler(discardLogger, nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/metrics", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}
