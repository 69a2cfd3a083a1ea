package bus

import (
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// rows returns each tenant's metrics of the last hour, by job.
func rows(t *testing.T, agg *metrics.Aggregator) map[string]apollo.Summary {
	t.Helper()
	out := map[string]apollo.Summary{}
	for _, tenant := range []string{"acme", "globex"} {
		tb, err := agg.Table(t.Context(), metrics.Query{Tenant: tenant, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range tb.Names {
			out[tenant+"/"+n] = tb.Rows[i]
		}
	}
	return out
}

// A success reported more than MaxSkew ahead is not counted; an operator
// who corrects it to failed once the clock has caught up took a success
// out that was never in (the job read Success -1, Failed +1). The bus
// gives the correction's Prev when its finish was received; the metrics
// judge the finish by it, live and in the replay after a crash.
func TestCorrectionOfARunReportedAhead(t *testing.T) {
	t.Parallel()
	f, agg := newMetricsFixture(t)
	ahead := f.clock.Now().Add(metrics.MaxSkew + 5*time.Second).UnixMilli()
	var evs []apollo.Event
	for _, tenant := range []string{"acme", "globex"} {
		evs = append(evs, apollo.Event{TaskID: "a1", Name: "ahead", Tenant: tenant, Sequence: 1, Status: apollo.StatusSuccess, Ts: ahead})
	}
	f.publish(t, evs...)
	f.drain()
	f.clock.Advance(2 * time.Minute) // the finish is now within MaxSkew of the clock
	for _, tenant := range []string{"acme", "globex"} {
		if _, err := f.bus.Correct(t.Context(), tenant, "a1", apollo.StatusFailed, "ops", "it failed"); err != nil {
			t.Fatal(err)
		}
	}
	f.drain()
	live := rows(t, agg)
	for k, r := range live {
		if r.Success != 0 || r.Failed != 0 || r.Count != 0 {
			t.Errorf("%s after the correction: %+v; want nothing counted, the run never was", k, r)
		}
	}
	agg2 := newAggregator(t, f.clock)
	f.replayed(t, func(o *Options) { o.Observers = []Observer{agg2} })
	if got := rows(t, agg2); len(got) != len(live) {
		t.Errorf("after replay %+v, live %+v", got, live)
	} else {
		for k, r := range live {
			if got[k] != r {
				t.Errorf("%s after replay %+v, live %+v", k, got[k], r)
			}
		}
	}
}
