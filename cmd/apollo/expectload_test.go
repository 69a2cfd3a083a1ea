package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/rules"
)

// newTestExpectations is newExpectations, armed as after a start with
// no snapshot.
func newTestExpectations(t *testing.T, path string, clock apollo.Clock, logs *syncBuffer) *expectations {
	t.Helper()
	x, err := newExpectations(path, alert.NewFileRules(filepath.Join(t.TempDir(), "expectations")), time.Second, clock,
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	x.arm()
	return x
}

// A bad version of the file is refused with every problem at its
// file:line:col, and the old expectations keep running; the next good
// version is in force; a change is seen by its size or time.
func TestExpectationsFileReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "expect.yaml")
	good := "expectations:\n  - job: a\n    every: 5m\n"
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	x := newTestExpectations(t, path, apollo.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), logs)
	if got := x.Expectations(""); got.Count != 1 || got.Source != good {
		t.Fatalf("%+v", got)
	}
	if x.changed() {
		t.Fatal("a file just read counts as changed")
	}
	if err := os.WriteFile(path, []byte("expectations:\n  - job: a\n    every: soon\n  - job: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !x.changed() {
		t.Fatal("a rewritten file of another size is not seen as changed")
	}
	x.reload()
	if got := x.Expectations(""); got.Source != good {
		t.Fatalf("a bad file replaced the good one: %+v", got)
	}
	if l := logs.String(); !strings.Contains(l, "expectations file refused; the old expectations keep running") || !strings.Contains(l, path+":3:12") {
		t.Fatalf("log: %s", l)
	}
	better := "expectations:\n  - job: a\n    every: 10m\n  - job: b\n    every: 1h\n"
	if err := os.WriteFile(path, []byte(better), 0o644); err != nil {
		t.Fatal(err)
	}
	x.reload()
	if got := x.Expectations(""); got.Count != 2 || got.Source != better {
		t.Fatalf("the good version is not in force: %+v", got)
	}
	// A missing or bad file at start is a start-up error that names it.
	if _, err := newExpectations(filepath.Join(dir, "nope.yaml"), alert.NewFileRules(filepath.Join(dir, "e.json")), 0, apollo.SystemClock, slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), "start without --expectations") {
		t.Fatalf("a missing file: %v", err)
	}
	os.WriteFile(path, []byte("expectations:\n  - job: a\n    every: soon\n"), 0o644)
	if _, err := newExpectations(path, alert.NewFileRules(filepath.Join(dir, "e.json")), 0, apollo.SystemClock, slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), path+":3:12") {
		t.Fatalf("a bad file: %v", err)
	}
}

// fakeExpectBus records what the expectations asked of the bus. With
// failed set its log has failed: it refuses every timeout and mark, and
// records them in refused.
type fakeExpectBus struct {
	mu       sync.Mutex
	failed   bool
	missed   []string
	timedOut []string
	marked   []string
	refused  []string
}

func (f *fakeExpectBus) LogFailed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeExpectBus) RecordMissed(_ context.Context, ms []bus.Missed) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		for _, m := range ms {
			f.refused = append(f.refused, m.Tenant+"/"+m.Job+" missed")
		}
		return nil, errors.New("the log failed")
	}
	fresh := make([]bool, len(ms))
	for i, m := range ms {
		k := m.Tenant + "/" + m.Job + "@" + m.Slot.String()
		fresh[i] = !slices.Contains(f.missed, k)
		f.missed = append(f.missed, k)
	}
	return fresh, nil
}

func (f *fakeExpectBus) TimeOut(tenant, taskID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		f.refused = append(f.refused, tenant+"/"+taskID+" timeout")
		return false
	}
	f.timedOut = append(f.timedOut, tenant+"/"+taskID)
	return true
}

func (f *fakeExpectBus) Mark(tenant, taskID string, kind apollo.Kind, reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		f.refused = append(f.refused, tenant+"/"+taskID+" "+kind.String())
		return false
	}
	f.marked = append(f.marked, tenant+"/"+taskID+" "+kind.String()+": "+reason)
	return true
}

// change is a bus change of one run from prev to st.
func change(tenant, job, id string, prev, st apollo.Status, started, finished time.Time) *apollo.Change {
	c := &apollo.Change{Prev: apollo.Before{Name: job, Status: prev},
		Task: apollo.Task{TaskID: id, Name: job, Tenant: tenant, Status: st, StartedAt: started.UnixMilli()}}
	if !finished.IsZero() {
		c.Task.FinishedAt = finished.UnixMilli()
		c.Task.CostMs = finished.Sub(started).Milliseconds()
	}
	c.Record.Ts = c.Task.StartedAt
	return c
}

// The runs the bus sees reach the evaluator, per tenant: a run past
// max_runtime is timed out, a run that succeeded too soon fires
// too_short (a success reported without a start counts as a start too),
// and what replay shows before start is not acted on when the log holds
// its mark (acted on before the crash), and is when it does not.
func TestExpectationsActOnRuns(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := apollo.NewFakeClock(t0)
	x := newTestExpectations(t, "", clock, &syncBuffer{})
	src := []byte("expectations:\n  - job: j\n    max_runtime: 1m\n    min_runtime: 10s\n")
	for _, tenant := range []string{"", "acme"} {
		if err := x.put(context.Background(), tenant, src); err != nil {
			t.Fatal(err)
		}
	}
	// Replayed before start with its mark: not acted on.
	old := change("", "j", "old", apollo.StatusNone, apollo.StatusSuccess, t0.Add(-time.Hour), t0.Add(-time.Hour+time.Second))
	x.Apply(old)
	mark := *old
	mark.Prev.Status, mark.Record.Kind = apollo.StatusSuccess, apollo.KindTooShort
	x.Apply(&mark)
	// Replayed without it: found before the crash, never acted on.
	x.Apply(change("acme", "j", "lost", apollo.StatusNone, apollo.StatusSuccess, t0.Add(-time.Hour), t0.Add(-time.Hour+time.Second)))
	b := &fakeExpectBus{}
	occ := make(chan alert.Occurrence, 10)
	if err := x.start(b, func(o alert.Occurrence) { occ <- o }, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.stopLoop)
	select {
	case o := <-occ:
		if o.Tenant != "acme" || o.Kind != rules.OccurrenceTooShort || o.Run != "lost" {
			t.Fatalf("%+v, want acme's lost run too short", o)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the replayed finding without its mark was not acted on")
	}
	b.mu.Lock()
	b.marked = nil
	b.mu.Unlock()

	x.Apply(change("acme", "j", "quick", apollo.StatusNone, apollo.StatusSuccess, t0, t0.Add(2*time.Second)))
	select {
	case o := <-occ:
		if o.Tenant != "acme" || o.Kind != rules.OccurrenceTooShort || o.Run != "quick" {
			t.Fatalf("%+v", o)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no too_short")
	}
	// The run is marked too, before the alert is told.
	b.mu.Lock()
	marked := slices.Clone(b.marked)
	b.mu.Unlock()
	if len(marked) != 1 || !strings.HasPrefix(marked[0], "acme/quick too_short: ") {
		t.Fatalf("marks %q, want acme's quick marked too_short", marked)
	}
	x.Apply(change("", "j", "slow", apollo.StatusPending, apollo.StatusRunning, t0, time.Time{}))
	if !clock.BlockUntil(2, testwait.Timeout(t)) { // the loop's tickers
		t.Fatal("the loop did not start")
	}
	clock.Advance(2 * time.Minute) // the evaluator's tick finds it past max_runtime
	eventuallyTrue(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.timedOut) == 1 && b.timedOut[0] == "/slow"
	})
	if len(occ) != 0 {
		t.Fatalf("acted on the replayed run or on the timeout: %v", <-occ)
	}
}

// eventuallyTrue waits for cond, which the loop under test makes true.
func eventuallyTrue(t *testing.T, cond func() bool) {
	t.Helper()
	eventually(t, 10*time.Second, "the expectations loop", cond)
}

// The scheduler's jobs are the default tenant's expectations (after:
// upstream), under the file's say on the same job; a jobs file whose
// after makes a cycle with the file is refused and the old ones stay.
func TestExpectationsFromJobs(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	x := newTestExpectations(t, "", apollo.NewFakeClock(t0), &syncBuffer{})
	if err := x.put(context.Background(), "", []byte("expectations:\n  - {job: report, upstream: [load]}\n")); err != nil {
		t.Fatal(err)
	}
	if err := x.setJobs([]expect.Expectation{{Job: "extract", Schedule: "0 2 * * *", Grace: time.Minute}, {Job: "load", Upstream: []string{"extract"}},
		{Job: "report", MaxRuntime: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	x.Apply(change("", "extract", "e1", apollo.StatusRunning, apollo.StatusFailed, t0, t0.Add(time.Second)))
	for _, job := range []string{"load", "report"} {
		if got := x.HeldBy("", job); !slices.Equal(got, []string{"extract"}) {
			t.Errorf("%s held by %v, want extract", job, got)
		}
	}
	if got := x.HeldBy("acme", "load"); len(got) != 0 {
		t.Errorf("another tenant's load held by %v", got)
	}
	if err := x.setJobs([]expect.Expectation{{Job: "load", Upstream: []string{"report"}}}); err == nil {
		t.Fatal("a cycle through the file was accepted")
	}
	if got := x.HeldBy("", "load"); !slices.Equal(got, []string{"extract"}) {
		t.Errorf("after a refused jobs file, load held by %v", got)
	}
}

// Runs expected while the server was down are judged after it restarts,
// from the time kept in the snapshot, and told once: a missed run that
// was recorded before (judged again after a second restart from the same
// snapshot) is not told again. Two tenants, each its own.
func TestExpectationsJudgeDowntime(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	saved := alert.NewFileRules(filepath.Join(t.TempDir(), "expectations"))
	for _, tenant := range []string{"acme", "zeta"} {
		if err := saved.Save(context.Background(), tenant, []byte("expectations:\n  - job: k_"+tenant+"\n    schedule: \"*/5 * * * *\"\n    grace: 1m\n")); err != nil {
			t.Fatal(err)
		}
	}
	clock := apollo.NewFakeClock(t0)
	open := func() *expectations {
		x, err := newExpectations("", saved, time.Second, clock, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	first := open()
	first.arm()
	var snap bytes.Buffer
	if err := first.writeState(&snap); err != nil {
		t.Fatal(err)
	}
	b := &fakeExpectBus{}
	run := func(x *expectations, want int) []alert.Occurrence {
		occ := make(chan alert.Occurrence, 10)
		if err := x.start(b, func(o alert.Occurrence) { occ <- o }, nil); err != nil {
			t.Fatal(err)
		}
		defer x.stopLoop()
		clock.Advance(time.Second) // the loop's tickers are armed by start
		eventuallyTrue(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.missed) >= want
		})
		x.stopLoop()
		close(occ)
		var out []alert.Occurrence
		for o := range occ {
			out = append(out, o)
		}
		return out
	}
	// Down from 10:00 to 10:20: the 10:05 to 10:15 runs were missed.
	clock.Set(t0.Add(20 * time.Minute))
	for i := range 2 {
		x := open()
		if err := x.readState(bytes.NewReader(snap.Bytes())); err != nil {
			t.Fatal(err)
		}
		x.arm()
		got := run(x, 2*(i+1))
		if i == 0 {
			if len(got) != 2 || got[0].Kind != rules.OccurrenceMissed || !strings.Contains(got[0].Detail, "3 expected runs did not start") {
				t.Fatalf("after the restart: %+v", got)
			}
		} else if len(got) != 0 {
			t.Fatalf("told again after a second restart: %+v", got)
		}
	}
}

// The learner's proposal, from 20 nightly runs at 02:00 Berlin time with
// jitter fed through the bus observer, is listed and accepted in one call,
// in the tenant that ran the job only. The start times are read in the
// zone of the tenant's schedules (Europe/Berlin for acme, from its
// defaults), and in UTC for a tenant without one, never in the server's
// own zone.
func TestExpectationsSuggestAndAccept(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 1, 2, 0, 0, 0, berlin)
	x := newTestExpectations(t, "", apollo.NewFakeClock(day.AddDate(0, 0, 21)), &syncBuffer{})
	if err := x.put(context.Background(), "acme", []byte(`defaults: {timezone: Europe/Berlin}
expectations:
  - {job: nightly, upstream: [extract]}
  - {job: extract, schedule: "0 1 * * *"}
`)); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "zoneless"} {
		for i := range 20 {
			start := day.AddDate(0, 0, i).Add(time.Duration(i%7) * 9 * time.Second)
			x.Apply(change(tenant, "nightly", fmt.Sprintf("n%d", i), apollo.StatusNone, apollo.StatusSuccess, start, start.Add(time.Minute+time.Duration(i)*time.Second)))
		}
	}
	if got := x.Suggestions("", "", 1000).Suggestions; len(got) != 0 {
		t.Fatalf("the default tenant has proposals: %+v", got)
	}
	got := x.Suggestions("acme", "", 1000).Suggestions
	if len(got) != 1 || got[0].Job != "nightly" || got[0].Describe != "daily at 02:00" || got[0].Schedule != "0 2 * * *" ||
		got[0].Timezone != "Europe/Berlin" || got[0].MaxRuntime == "" {
		t.Fatalf("acme: %+v", got)
	}
	// 02:00 in Berlin in November is 01:00 UTC.
	if got := x.Suggestions("zoneless", "nightly", 1000).Suggestions; len(got) != 1 || got[0].Schedule != "0 1 * * *" || got[0].Timezone != "UTC" {
		t.Fatalf("a tenant without schedules: %+v", got)
	}
	if ok, err := x.AcceptSuggestion(context.Background(), "acme", "other"); ok || err != nil {
		t.Fatalf("accepted a proposal for a job without runs: %v %v", ok, err)
	}
	if ok, err := x.AcceptSuggestion(context.Background(), "acme", "nightly"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	src := x.Expectations("acme").Source
	set, err := expect.Parse("acme", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := set.Lookup("nightly")
	if e.Schedule != "0 2 * * *" || e.Timezone != "Europe/Berlin" || e.Grace == 0 || e.MaxRuntime == 0 || !slices.Equal(e.Upstream, []string{"extract"}) {
		t.Fatalf("accepted: %+v\n%s", e, src)
	}
}

// The expectations' snapshot section reads any bytes without panicking,
// and what it writes it reads back.
func FuzzExpectState(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(make([]byte, 8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		x := &expectations{}
		if err := x.readState(bytes.NewReader(b)); err != nil {
			return
		}
		x.checked.Store(x.restored.UnixNano())
		var out bytes.Buffer
		if err := x.writeState(&out); err != nil {
			t.Fatal(err)
		}
		y := &expectations{}
		if err := y.readState(&out); err != nil || !y.restored.Equal(x.restored) {
			t.Fatalf("%v %v != %v", err, y.restored, x.restored)
		}
	})
}

// A job whose own schedule is read in UTC (no timezone) has its starts
// read in UTC, the zone of its own schedule, even when the tenant's other
// schedules are read in Europe/Berlin; and a job without one, in a tenant
// whose schedules are mostly read in UTC, is read in UTC too. Before, an
// empty timezone counted as none: the starts were read in Berlin, where
// across the end of summer time a 02:00 UTC run moved from 04:00 to
// 03:00, no cron fitted, and accepting the proposal replaced the job's
// schedule with "every 24h".
func TestSuggestReadsAJobInItsOwnSchedulesZone(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 10, 5, 2, 0, 0, 0, time.UTC) // summer time in Berlin ends on 25 October
	x := newTestExpectations(t, "", apollo.NewFakeClock(first.AddDate(0, 0, 41)), &syncBuffer{})
	files := map[string]string{
		"acme": `expectations:
  - {job: extract, schedule: "0 1 * * *", timezone: Europe/Berlin}
  - {job: load, schedule: "0 3 * * *", timezone: Europe/Berlin}
  - {job: backup, schedule: "0 2 * * *", grace: 10m}
`,
		"beta": `expectations:
  - {job: extract, schedule: "0 1 * * *", timezone: Europe/Berlin}
  - {job: load, schedule: "0 3 * * *"}
  - {job: clean, schedule: "0 4 * * *"}
`,
	}
	job := map[string]string{"acme": "backup", "beta": "report"}
	for tenant, src := range files {
		if err := x.put(context.Background(), tenant, []byte(src)); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			start := first.AddDate(0, 0, i).Add(time.Duration(i%5) * 7 * time.Second)
			x.Apply(change(tenant, job[tenant], fmt.Sprintf("b%d", i), apollo.StatusNone, apollo.StatusSuccess, start, start.Add(time.Minute)))
		}
	}
	for tenant, j := range job {
		got := x.Suggestions(tenant, j, 1000).Suggestions
		if len(got) != 1 || got[0].Schedule != "0 2 * * *" || got[0].Timezone != "UTC" {
			t.Fatalf("%s: %+v, want 0 2 * * * in UTC", tenant, got)
		}
	}
	if ok, err := x.AcceptSuggestion(context.Background(), "acme", "backup"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	set, err := expect.Parse("acme", []byte(x.Expectations("acme").Source))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := set.Lookup("backup"); e.Schedule != "0 2 * * *" || e.Timezone != "UTC" || e.Every != 0 {
		t.Fatalf("accepted: %+v", e)
	}
	if e, _ := set.Lookup("extract"); e.Timezone != "Europe/Berlin" {
		t.Fatalf("extract's zone changed: %+v", e)
	}
}
