package metrics

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// NamesID says when two tables hold the same job list: the tables of one
// moment share it, it stays while no job comes or goes, and it changes when
// one does (a new job, a job compaction forgets); tenants never share one.
// The alert engine keeps where each prefix's jobs are until it changes.
func TestTableNamesID(t *testing.T) {
	t.Parallel()
	a, clock := newTestAggregator(t, Options{})
	now := t0.UnixMilli()
	for _, tn := range []string{"", "acme"} {
		a.Apply(change(tn, "b_done", apollo.StatusNone, apollo.StatusRunning, now-2000))
		a.Apply(change(tn, "b_done", apollo.StatusRunning, apollo.StatusSuccess, now-1000))
	}
	read := func(tenant string) (uint64, []string) {
		t.Helper()
		ts, err := a.Tables(context.Background(), []Query{
			{Tenant: tenant, Window: time.Minute}, {Tenant: tenant, Window: time.Minute, Offset: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		if ts[0].NamesID != ts[1].NamesID {
			t.Fatalf("tenant %q: two tables of one moment have NamesID %d and %d", tenant, ts[0].NamesID, ts[1].NamesID)
		}
		return ts[0].NamesID, ts[0].Names
	}
	first, _ := read("")
	acme, _ := read("acme")
	if first == 0 || acme == 0 || first == acme {
		t.Fatalf("NamesID %d for the default tenant and %d for acme: want two different, not 0", first, acme)
	}
	if again, _ := read(""); again != first {
		t.Errorf("NamesID went from %d to %d with no job come or gone", first, again)
	}

	a.Apply(change("", "a_new", apollo.StatusNone, apollo.StatusPending, now))
	grown, names := read("")
	if grown == first || !slices.Equal(names, []string{"a_new", "b_done"}) {
		t.Errorf("after a new job: NamesID %d (was %d), names %q", grown, first, names)
	}
	if still, _ := read("acme"); still != acme {
		t.Errorf("acme's NamesID went from %d to %d: only the other tenant's jobs changed", acme, still)
	}

	// A day on, compaction forgets the finished job; the pending one stays.
	clock.Advance(26 * time.Hour)
	a.compact(clock.Now())
	shrunk, names := read("")
	if shrunk == grown || !slices.Equal(names, []string{"a_new"}) {
		t.Errorf("after compaction: NamesID %d (was %d), names %q", shrunk, grown, names)
	}
	if id, names := read("nobody"); id != 0 || len(names) != 0 {
		t.Errorf("a tenant with no jobs: NamesID %d, names %q; want 0 and none", id, names)
	}
}
