package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/expect"
)

// An expectation set through the API after the latest snapshot, then
// kill -9 and a restart: it expects runs from when it was set, not from
// the snapshot. Before, the restart judged every expectation from the
// time kept in the snapshot, so a new one was judged over the time
// before it existed: a once-a-year expectation whose only tick had
// passed a second before it was PUT got that tick recorded and told as
// missed after the restart, in both tenants (the default one, written
// to its file, and acme, to its file in expectations/).
func TestAnExpectationSetAfterTheSnapshotIsNotJudgedBeforeIt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	ctx := callCtx(t)

	// A clean stop: a snapshot that keeps when expectations were judged.
	srv := x.start(t)
	report(t, srv.addr, x.tokens["acme"], `{"taskID":"s1","name":"sentinel","status":"success","sequence":1,"ts":%[1]d}`)
	syscall.Kill(srv.cmd.Process.Pid, syscall.SIGTERM)
	<-srv.exited

	srv = x.start(t)
	up := time.Now()
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	missedSince := func(c *apiclient.Client, job string, since time.Time) bool {
		page, err := c.Tasks(ctx(), apiclient.TaskQuery{Prefix: "missed:" + job + "@"})
		if err != nil {
			return false
		}
		for _, m := range page.Tasks {
			if m.ScheduledAt >= since.UnixMilli() {
				return true
			}
		}
		return false
	}
	// Time passes after the start (and any snapshot it took): the
	// default tenant's etl_extract, expected every 2 s, misses runs.
	eventually(t, 30*time.Second, "a missed run of etl_extract 2 s after the start", func() bool {
		return missedSince(def, "etl_extract", up.Add(2*time.Second))
	})

	// The only tick of the year is a second ago, after the snapshot and
	// before the expectation exists.
	slot := time.Now().UTC().Add(-time.Second).Truncate(time.Second)
	yearly := fmt.Sprintf("  - job: yearly\n    schedule: \"%d %d %d %d %d *\"\n    grace: 1s\n",
		slot.Second(), slot.Minute(), slot.Hour(), slot.Day(), int(slot.Month()))
	if _, err := def.PutExpectations(ctx(), []byte(expectFile+yearly)); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.PutExpectations(ctx(), []byte("expectations:\n"+yearly)); err != nil {
		t.Fatal(err)
	}

	srv.kill()
	restarted := time.Now()
	srv = x.start(t)
	def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	for tenant, c := range map[string]*apiclient.Client{"": def, "acme": acme} {
		if got, err := c.Expectations(ctx()); err != nil || !strings.Contains(got.Source, "job: yearly") {
			t.Fatalf("tenant %q after kill -9: %+v %v", tenant, got, err)
		}
	}
	// The restart has judged what fell while it was down: etl_extract's
	// runs expected since then are missed.
	eventually(t, 30*time.Second, "a missed run of etl_extract after the restart", func() bool {
		return missedSince(def, "etl_extract", restarted)
	})
	for tenant, c := range map[string]*apiclient.Client{"": def, "acme": acme} {
		page, err := c.Tasks(ctx(), apiclient.TaskQuery{Prefix: "missed:yearly@"})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Tasks {
			t.Errorf("tenant %q: a run expected at %s, before the expectation was set, is recorded missed: %s",
				tenant, time.UnixMilli(m.ScheduledAt).UTC(), m.TaskID)
		}
	}
}

// After a restart, what was in force at the snapshot is judged from the
// snapshot (the runs missed while the server was down are found), and an
// expectation written after it from when it was written, in its tenant
// only. Two tenants: acme adds a job after the snapshot, zeta does not.
func TestArmJudgesFromTheSnapshotOnlyWhatWasInForceThen(t *testing.T) {
	t.Parallel()
	wall := time.Now().Truncate(time.Minute)
	t0 := wall.Add(-30 * time.Minute)
	saved := alert.NewFileRules(filepath.Join(t.TempDir(), "expectations"))
	k := "  - job: k\n    schedule: \"* * * * *\"\n    grace: 1s\n"
	n := "  - job: n\n    schedule: \"* * * * *\"\n    grace: 1s\n"
	for _, tenant := range []string{"acme", "zeta"} {
		if err := saved.Save(context.Background(), tenant, []byte("expectations:\n"+k)); err != nil {
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
	var state, timing bytes.Buffer
	if err := first.writeState(&state); err != nil {
		t.Fatal(err)
	}
	if err := first.writeTiming(&timing); err != nil {
		t.Fatal(err)
	}
	if err := first.put(t.Context(), "acme", []byte("expectations:\n"+k+n)); err != nil {
		t.Fatal(err)
	}

	// Restarted 10 minutes after the write, from the snapshot.
	clock.Set(wall.Add(10 * time.Minute))
	x := open()
	if err := x.readState(&state); err != nil {
		t.Fatal(err)
	}
	if err := x.readTiming(&timing); err != nil {
		t.Fatal(err)
	}
	x.arm()
	counts := map[string]int{}
	for _, ev := range x.ev.Tick(clock.Now()) {
		if ev.Kind == expect.KindMissed {
			counts[ev.Tenant+"/"+ev.Job] += ev.Count
		}
	}
	for _, tenant := range []string{"acme", "zeta"} {
		if got := counts[tenant+"/k"]; got < 39 {
			t.Errorf("tenant %s: k, in force at the snapshot 40 minutes ago, missed %d runs, want 39 or 40", tenant, got)
		}
	}
	if got := counts["acme/n"]; got < 9 || got > 10 {
		t.Errorf("acme: n, written 10 minutes ago, missed %d runs, want 9 or 10 (not the 30 before it was written)", got)
	}
	if got := counts["zeta/n"]; got != 0 {
		t.Errorf("zeta has no n, yet missed %d runs of it", got)
	}
}

// The snapshot's section of the expectations in force reads any bytes
// without panicking, and what it writes it reads back.
func FuzzExpectTiming(f *testing.F) {
	f.Add([]byte(`{"acme":{"k":"\"* * * * *\" \"\" 0 1000000000"}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"\u0000":{"\n":""}}`))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		x := &expectations{}
		if err := x.readTiming(bytes.NewReader(b)); err != nil {
			return
		}
		y := &expectations{sets: map[string]*expect.Set{}}
		for tenant, jobs := range x.snapTiming {
			var exps []expect.Expectation
			for job := range jobs {
				exps = append(exps, expect.Expectation{Job: job})
			}
			if s, err := expect.NewSet(exps); err == nil {
				y.sets[tenant] = s
			}
		}
		var out bytes.Buffer
		if err := y.writeTiming(&out); err != nil {
			t.Fatal(err)
		}
		z := &expectations{}
		if err := z.readTiming(&out); err != nil {
			t.Fatal(err)
		}
		if len(z.snapTiming) != len(y.sets) {
			t.Fatalf("%d tenants written, %d read", len(y.sets), len(z.snapTiming))
		}
	})
}
