package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo/expect"
)

// A jobs file gives each job's expectation: its schedule in its zone with
// late_after (or the default) as grace, its timeout plus kill_grace as
// max_runtime, its after as upstream; a paused job has no schedule.
func TestSchedulerExpectations(t *testing.T) {
	t.Parallel()
	f, err := Parse("jobs.yaml", []byte(`defaults: {timezone: Europe/Berlin}
jobs:
  - {name: extract, schedule: "30 2 * * *", command: ["true"], timeout: 1h, kill_grace: 10s, late_after: 10m}
  - {name: load, command: ["true"], after: [extract]}
  - {name: old, schedule: "@hourly", command: ["true"], paused: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(f, Options{StateDir: t.TempDir(), Reporter: newRecorder(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	exps := s.Expectations()
	if len(exps) != 3 {
		t.Fatalf("%+v", exps)
	}
	ex, load, old := exps[0], exps[1], exps[2]
	if ex.Schedule != "30 2 * * *" || ex.Timezone != "Europe/Berlin" || ex.Grace != 10*time.Minute || ex.MaxRuntime != time.Hour+15*time.Second {
		t.Errorf("extract: %+v", ex)
	}
	if load.Schedule != "" || !slices.Equal(load.Upstream, []string{"extract"}) {
		t.Errorf("load: %+v", load)
	}
	if old.Schedule != "" || old.Grace != 0 {
		t.Errorf("paused: %+v", old)
	}
	if _, err := expect.NewSet(exps); err != nil {
		t.Fatalf("the expectations do not check: %v", err)
	}
}

// A job paused at run time is expected to run no more until it is
// resumed, as a job paused in the file.
func TestPausedJobIsNotExpected(t *testing.T) {
	t.Parallel()
	f, err := Parse("jobs.yaml", []byte("jobs:\n  - {name: a, schedule: \"@hourly\", command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := New(f, Options{StateDir: dir, Reporter: newRecorder(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause("a"); err != nil {
		t.Fatal(err)
	}
	if e := s.Expectations()[0]; e.Schedule != "" || e.Grace != 0 {
		t.Errorf("paused: %+v", e)
	}
	// A scheduler made on the same state directory knows of the pause
	// before it starts: a server puts its expectations in force then.
	again, err := New(f, Options{StateDir: dir, Reporter: newRecorder(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if e := again.Expectations()[0]; e.Schedule != "" {
		t.Errorf("paused, after a restart: %+v", e)
	}
	if err := s.Resume("a"); err != nil {
		t.Fatal(err)
	}
	if e := s.Expectations()[0]; e.Schedule != "@hourly" || e.Grace != expect.DefaultGrace {
		t.Errorf("resumed: %+v", e)
	}
}
