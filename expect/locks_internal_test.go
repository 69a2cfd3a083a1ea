package expect

import (
	apollo "github.com/apollo-11/apollo"
	"testing"
	"time"
)

// deadlines is how many deadlines every tenant's heap holds.
func (e *Evaluator) deadlines() int {
	n := 0
	for _, ts := range e.states() {
		ts.mu.Lock()
		n += len(ts.due)
		ts.mu.Unlock()
	}
	return n
}

// memoLen is how many schedule steps the tenant with the most memoized.
func (e *Evaluator) memoLen() int {
	n := 0
	for _, ts := range e.states() {
		ts.mu.Lock()
		n = max(n, len(ts.memo))
		ts.mu.Unlock()
	}
	return n
}

// One tenant's Set holds up that tenant alone: while acme's Set is in
// progress (held inside it, with its lock, until the test lets it go),
// globex's runs are told, its ticks find its missed runs, and its
// upstream and flapping are asked, each at once. Before, one mutex for
// every tenant was held for the whole Set, and a Set of a file of 4 MiB
// paused every tenant's evaluation.
func TestOneTenantsSetHoldsUpNoOtherTenant(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	set, err := NewSet([]Expectation{{Job: "j", Every: time.Minute, Grace: time.Second, Upstream: []string{"up"}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvaluator()
	ev.Set("globex", set, t0)
	inSet, release := make(chan struct{}), make(chan struct{})
	testInSet = func(tenant string) {
		if tenant == "acme" {
			close(inSet)
			<-release
		}
	}
	t.Cleanup(func() { testInSet = nil })
	setDone := make(chan struct{})
	go func() {
		defer close(setDone)
		ev.Set("acme", set, t0)
	}()
	<-inSet

	globexDone := make(chan []Event)
	go func() {
		var out []Event
		out = append(out, ev.Started(Run{Tenant: "globex", Job: "j", TaskID: "r1", At: t0.Add(time.Minute)})...)
		out = append(out, ev.Finished(Run{Tenant: "globex", Job: "j", TaskID: "r1", At: t0.Add(time.Minute + time.Second), Status: apollo.StatusSuccess})...)
		ev.InhibitedBy("globex", "j")
		ev.Flapping("globex", "j")
		out = append(out, ev.Tick(t0.Add(10*time.Minute))...)
		globexDone <- out
	}()
	select {
	case out := <-globexDone:
		missed := 0
		for _, e := range out {
			if e.Tenant == "globex" && e.Kind == KindMissed {
				missed++
			}
		}
		if missed != 1 {
			t.Errorf("globex's tick during acme's Set found %+v, want its missed runs", out)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("globex's runs and tick waited for acme's Set")
	}
	close(release)
	<-setDone
	if out := ev.Tick(t0.Add(10 * time.Minute)); len(out) != 1 || out[0].Tenant != "acme" {
		t.Errorf("acme's tick after its Set: %+v, want its missed runs", out)
	}
}
