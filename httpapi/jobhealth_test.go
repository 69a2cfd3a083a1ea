package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

// fixedSchedule is a scheduler whose jobs run next at fixed times.
type fixedSchedule map[string]time.Time

func (fixedSchedule) JobList() []apollo.ScheduledJob { return nil }
func (fixedSchedule) Trigger(string) (string, error) { return "", nil }
func (fixedSchedule) Pause(string) error             { return nil }
func (fixedSchedule) Resume(string) error            { return nil }
func (f fixedSchedule) NextRuns() map[string]time.Time {
	return f
}

// healthServer is a bus, its metrics and the API on one fake clock, with
// a viewer and an agent token in tenants a and b; the scheduler's jobs
// are tenant a's.
type healthServer struct {
	srv    *httptest.Server
	bus    *bus.Bus
	clock  *apollo.FakeClock
	tokens map[string]string // "role/tenant" -> secret
}

func newHealthServer(t *testing.T, now time.Time, next fixedSchedule) *healthServer {
	t.Helper()
	clock := apollo.NewFakeClock(now)
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.New(bus.Options{Workers: 1, Clock: clock, Logger: discardLogger, Observers: []bus.Observer{agg}})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	hs := &healthServer{bus: b, clock: clock}
	auth, tokens := tenantTokens(t, RoleAgent, RoleViewer)
	hs.tokens = tokens
	hs.srv = httptest.NewServer(New(Options{Bus: b, Metrics: agg, Scheduler: next, SchedulerTenant: "a",
		Auth: auth, Clock: clock, Logger: discardLogger}))
	t.Cleanup(hs.srv.Close)
	return hs
}

// run reports one run of job in tenant: running at start, then its end
// with status after cost ms (none for a run still running).
func (hs *healthServer) run(t *testing.T, tenant, job, id string, status apollo.Status, start time.Time, cost time.Duration) {
	t.Helper()
	evs := []string{fmt.Sprintf(`{"taskID":%q,"name":%q,"sequence":1,"status":"running","ts":%d}`, id, job, start.UnixMilli())}
	if status != apollo.StatusRunning {
		evs = append(evs, fmt.Sprintf(`{"taskID":%q,"name":%q,"sequence":2,"status":%q,"ts":%d}`, id, job, status, start.Add(cost).UnixMilli()))
	}
	st, body := callAs(t, "POST", hs.srv.URL+"/api/v1/events", hs.tokens["agent/"+tenant], "["+strings.Join(evs, ",")+"]")
	if st != 200 || strings.Count(body, `"result":"accepted"`) != len(evs) {
		t.Fatalf("reporting %s: %d %s", id, st, body)
	}
}

func (hs *healthServer) board(t *testing.T, tenant, query string) (int, apiclient.HealthBoard, string) {
	t.Helper()
	// Every change has reached the metrics.
	if err := hs.bus.Checkpoint(func(uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	st, body := callAs(t, "GET", hs.srv.URL+"/api/v1/jobs/health"+query, hs.tokens["viewer/"+tenant], "")
	var b apiclient.HealthBoard
	if st == 200 {
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
	return st, b, body
}

func names(b apiclient.HealthBoard) string {
	var out []string
	for _, j := range b.Jobs {
		out = append(out, j.Name+":"+string(j.Verdict))
	}
	return strings.Join(out, " ")
}

// The board sorts the worst first, each verdict from what the runs did;
// each tenant sees its own jobs; the scheduler's next run makes a job
// late in its tenant only.
func TestJobsHealthBoard(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Minute)
	hs := newHealthServer(t, now, fixedSchedule{"nightly": now.Add(-5 * time.Minute)})
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tn := range []string{"a", "b"} {
		// ok: succeeds every 10 minutes in about a second.
		for i := range 4 {
			hs.run(t, tn, "ok", fmt.Sprintf("ok-%d", i), apollo.StatusSuccess, ago(time.Duration(40-10*i)*time.Minute), time.Second)
		}
		// nightly: succeeded; in tenant a the scheduler says it is overdue.
		hs.run(t, tn, "nightly", "nightly-1", apollo.StatusSuccess, ago(23*time.Hour), time.Minute)
	}
	// Tenant a only: etl's last run failed; hang's runs time out; slow
	// runs for 20 minutes where it usually takes a second.
	for i, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusSuccess, apollo.StatusFailed} {
		hs.run(t, "a", "etl", fmt.Sprintf("etl-%d", i), st, ago(time.Duration(30-10*i)*time.Minute), time.Duration(2+i)*time.Second)
	}
	hs.run(t, "a", "hang", "hang-1", apollo.StatusTimeout, ago(20*time.Minute), 5*time.Minute)
	for i := range 3 {
		hs.run(t, "a", "slow", fmt.Sprintf("slow-%d", i), apollo.StatusSuccess, ago(time.Duration(50-10*i)*time.Minute), time.Second)
	}
	hs.run(t, "a", "slow", "slow-long", apollo.StatusRunning, ago(20*time.Minute), 0)

	st, a, body := hs.board(t, "a", "")
	if st != 200 {
		t.Fatalf("tenant a: %d %s", st, body)
	}
	if got, want := names(a), "etl:failing hang:timing_out slow:running_long nightly:late ok:ok"; got != want {
		t.Fatalf("tenant a's board: %s\nwant %s", got, want)
	}
	if a.Total != 5 || a.Verdicts[apollo.VerdictFailing] != 1 || a.Verdicts[apollo.VerdictOK] != 1 || a.Now != now.UnixMilli() {
		t.Errorf("tenant a's counts: total %d, verdicts %v, now %d", a.Total, a.Verdicts, a.Now)
	}
	etl := a.Jobs[0]
	if etl.LastRun == nil || etl.LastRun.TaskID != "etl-2" || etl.LastRun.Status != apollo.StatusFailed || etl.LastRun.CostMs != 4000 ||
		etl.LastRun.FinishedAt != ago(10*time.Minute).Add(4*time.Second).UnixMilli() {
		t.Errorf("etl's last run: %+v", etl.LastRun)
	}
	if etl.UsualCostMs != 3000 || etl.UsualEveryMs != 600_000 || etl.LastSuccessAt != ago(20*time.Minute).Add(3*time.Second).UnixMilli() {
		t.Errorf("etl's habits: %+v", etl)
	}
	if len(etl.Runs) != 3 || etl.Runs[0].TaskID != "etl-0" || etl.Runs[2].Status != apollo.StatusFailed || etl.Runs[1].StartedAt != ago(20*time.Minute).UnixMilli() {
		t.Errorf("etl's runs, oldest first: %+v", etl.Runs)
	}
	if slow := a.Jobs[2]; slow.Running != 1 || slow.RunningSince != ago(20*time.Minute).UnixMilli() || slow.UsualCostMs != 1000 {
		t.Errorf("slow: %+v", slow)
	}
	if n := a.Jobs[3]; n.NextRunAt != now.Add(-5*time.Minute).UnixMilli() {
		t.Errorf("nightly's next run: %d", n.NextRunAt)
	}

	// Tenant b: its own jobs only, and no schedule of tenant a's.
	_, b, _ := hs.board(t, "b", "")
	if got := names(b); got != "nightly:ok ok:ok" || b.Jobs[0].NextRunAt != 0 {
		t.Errorf("tenant b's board: %s, next run %d", got, b.Jobs[0].NextRunAt)
	}

	// Filters and limits.
	for _, tc := range []struct{ query, want string }{
		{"?prefix=s", "slow:running_long"},
		{"?prefix=nosuch", ""},
		{"?limit=2", "etl:failing hang:timing_out"},
		{"?job=ok", "ok:ok"},
	} {
		if _, got, _ := hs.board(t, "a", tc.query); names(got) != tc.want {
			t.Errorf("%s: %s, want %s", tc.query, names(got), tc.want)
		}
	}
	// No job is an empty list, not null: the board walks it.
	if _, _, body := hs.board(t, "a", "?prefix=nosuch"); !strings.Contains(body, `"jobs":[]`) {
		t.Errorf("no job under the prefix: %s", body)
	}
	if _, got, _ := hs.board(t, "a", "?limit=2"); got.Total != 5 {
		t.Errorf("a limit leaves the total of the prefix: %d", got.Total)
	}
	if _, got, _ := hs.board(t, "a", "?job=etl&runs=2"); len(got.Jobs[0].Runs) != 2 || got.Jobs[0].Runs[1].TaskID != "etl-2" {
		t.Errorf("runs=2: the newest two: %+v", got.Jobs[0].Runs)
	}
	if _, got, _ := hs.board(t, "a", "?job=etl&runs=0"); got.Jobs[0].Runs == nil || len(got.Jobs[0].Runs) != 0 {
		t.Errorf("runs=0: %+v", got.Jobs[0].Runs)
	}
	for _, tc := range []struct {
		query       string
		status      int
		field, text string
	}{
		{"?job=etl", 404, "job", `no job "etl"`}, // tenant b has none
		{"?limit=0", 400, "limit", "from 1 to 1000"},
		{"?limit=x", 400, "limit", "not a number"},
		{"?runs=201", 400, "runs", "from 0 to 200"},
		{"?job=ok&prefix=o", 400, "job", "not both"},
	} {
		st, _, body := hs.board(t, "b", tc.query)
		var eb struct{ Error apollo.Error }
		json.Unmarshal([]byte(body), &eb)
		if st != tc.status || eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, tc.text) {
			t.Errorf("%s: %d %s; want %d on %s saying %q", tc.query, st, body, tc.status, tc.field, tc.text)
		}
	}
}

// A process without the jobs' health records says so.
func TestJobsHealthNotKept(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, nil)
	st, body := call(t, "GET", srv.URL+"/api/v1/jobs/health", "", nil)
	if st != 404 || !strings.Contains(body, "keeps no job health") {
		t.Errorf("%d %s", st, body)
	}
}
