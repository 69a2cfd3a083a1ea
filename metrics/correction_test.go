package metrics_test

import (
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// A success reported more than MaxSkew ahead of its receipt is not counted;
// an operator's correction to failed, made once the clock has caught up,
// must not take that success out (before, the window of each tenant read
// Success -1, Failed +1). The correction is judged against when the finish
// was received, which its Prev carries.
func TestCorrectionTakesOutOnlyWhatWasCountedIn(t *testing.T) {
	const retention = 24 * time.Hour
	r0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).UnixMilli()
	ahead := r0 + metrics.MaxSkew.Milliseconds() + 5000
	for _, tenant := range []string{"acme", "globex"} {
		run := apollo.Task{TaskID: "t1", Name: "ahead", Tenant: tenant, Status: apollo.StatusSuccess,
			Sequence: 1, FinishedAt: ahead, CreatedAt: r0, UpdatedAt: r0, FinishReceivedAt: r0}
		report := apollo.Change{
			Record: apollo.Record{Event: apollo.Event{TaskID: "t1", Name: "ahead", Tenant: tenant, Sequence: 1, Status: apollo.StatusSuccess, Ts: ahead}, Kind: apollo.KindReport, ReceivedAt: r0},
			Task:   run,
		}
		if pl := metrics.PlanChange(&report, time.UnixMilli(r0), retention); len(pl.Parts()) != 0 || !pl.TooNew {
			t.Fatalf("tenant %s: the report ahead was planned %+v, want dropped as too new", tenant, pl.Parts())
		}
		// The correction comes two minutes later: its own receipt would
		// accept the finish.
		rc := r0 + 2*time.Minute.Milliseconds()
		corrected := run
		corrected.Status, corrected.UpdatedAt = apollo.StatusFailed, rc
		correction := apollo.Change{
			Record: apollo.Record{Event: apollo.Event{TaskID: "t1", Name: "ahead", Tenant: tenant, Sequence: 1, Status: apollo.StatusFailed, Ts: rc}, Kind: apollo.KindCorrection, ReceivedAt: rc},
			Prev:   apollo.BeforeOf(&run), Task: corrected,
		}
		for _, now := range []int64{rc, rc + time.Hour.Milliseconds()} { // live, and a replay an hour on
			pl := metrics.PlanChange(&correction, time.UnixMilli(now), retention)
			for _, p := range pl.Parts() {
				if p.Delta.Success != 0 || p.Delta.Failed != 0 || p.Delta.Count != 0 {
					t.Errorf("tenant %s, planned at +%v: the correction moves %+v, want nothing: the success was never counted", tenant, time.Duration(now-rc)*time.Millisecond, p.Delta)
				}
			}
		}
	}
}
