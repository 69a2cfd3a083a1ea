package expect

import (
	"fmt"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/proccpu"
)

// benchSets returns 100 000 expectations over 10 tenants, with the mix a
// server may see: cron schedules of every frequency in four zones (many
// jobs share a schedule, as real ones do, but 60 distinct hourly minutes
// and 288 distinct daily times are there too), periods, and jobs with
// runtime bounds or upstream only.
func benchSets(b *testing.B) map[string]*Set {
	zones := []string{"UTC", "Europe/Berlin", "Asia/Shanghai", "America/New_York"}
	perTenant := map[string][]Expectation{}
	for i := range 100_000 {
		tenant := fmt.Sprintf("t%d", i%10)
		e := Expectation{Job: fmt.Sprintf("job_%06d", i), Grace: 2 * time.Minute}
		switch i % 10 {
		case 0, 1:
			e.Schedule = []string{"*/5 * * * *", "*/15 * * * *", "*/10 * * * *", "0 9 * * 1-5"}[i/10%4]
		case 2, 3:
			e.Schedule = fmt.Sprintf("%d * * * *", i/10%60)
		case 4, 5:
			e.Schedule = fmt.Sprintf("%d %d * * *", i/10%12*5, i/120%24)
		case 6, 7:
			e.Every = []time.Duration{5 * time.Minute, 15 * time.Minute, time.Hour}[i/10%3]
		case 8:
			e.Grace, e.MaxRuntime, e.MinRuntime = 0, time.Hour, time.Second
		case 9:
			e.Grace, e.Upstream = 0, []string{fmt.Sprintf("job_%06d", i-1)}
		}
		if e.Schedule != "" {
			e.Timezone = zones[i/7%len(zones)]
		}
		perTenant[tenant] = append(perTenant[tenant], e)
	}
	sets := map[string]*Set{}
	for tenant, exps := range perTenant {
		s, err := NewSet(exps)
		if err != nil {
			b.Fatal(err)
		}
		sets[tenant] = s
	}
	return sets
}

// BenchmarkTick100k is the cost that expectations add to one evaluation
// cycle: one Tick every 10 s of fake time over 100 000 expected jobs. No
// run is fed, so every expected run is missed and every slot deadline
// that passes makes an event (the most work a tick can have with these
// expectations). Fake time runs ahead by 10 s per op, so the figure is
// the average over many simulated hours.
func BenchmarkTick100k(b *testing.B) {
	sets := benchSets(b)
	t0 := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	ev := NewEvaluator()
	start := time.Now()
	for tenant, s := range sets {
		ev.Set(tenant, s, t0)
	}
	set := time.Since(start)
	now := t0
	events := 0
	var cpu time.Duration
	for b.Loop() {
		if cpu == 0 {
			cpu = proccpu.Used()
		}
		now = now.Add(10 * time.Second)
		events += len(ev.Tick(now))
	}
	// After the loop: b.Loop clears metrics reported before it. CPU time
	// is the figure to trust on a shared machine, where wall time counts
	// the waits for a core.
	b.ReportMetric(float64(proccpu.Used()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(set.Milliseconds()), "set-ms")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkStartFinish is the cost per run: Started and Finished of one
// run of an expected job, with max_runtime and max_runs watched.
func BenchmarkStartFinish(b *testing.B) {
	sets := benchSets(b)
	t0 := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	ev := NewEvaluator()
	for tenant, s := range sets {
		ev.Set(tenant, s, t0)
	}
	runs := make([]Run, 100_000)
	for i := range runs {
		runs[i] = Run{Tenant: fmt.Sprintf("t%d", i%10), Job: fmt.Sprintf("job_%06d", i), TaskID: "r"}
	}
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		r := runs[i%len(runs)]
		r.At = now
		ev.Started(r)
		r.Status, r.Duration = apollo.StatusSuccess, time.Second
		ev.Finished(r)
		i++
	}
}
