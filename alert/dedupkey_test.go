package alert_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/alert/alerttest"
)

// Tenants are the operator's strings and may hold ':' or anything else.
// The dedup lock key joined tenant, rule, kind and group with ':', so
// tenant "x:r"'s rule "firing" over group "g" and tenant "x"'s rule "r"
// over group "firing:g" took the same lock (in Redis, shared by every
// alert process): one tenant's notification held the other's back for
// the whole dedup window, and a tenant's admin could silence another
// tenant by naming a rule. Each must be sent.
func TestDedupKeysKeepTenantsApart(t *testing.T) {
	t.Parallel()
	const rule = `RULE %s task_prefix: %q THRESHOLD: failed > 0 NOTIFY: ops`
	type side struct{ tenant, rule, prefix, job string }
	for _, c := range []struct {
		name string
		a, b side
	}{
		// "x:r" + ":firing:firing:g" and "x" + ":r:firing:firing:g"
		{"a colon in the tenant", side{"x:r", "firing", "g", "g1"}, side{"x", "r", "firing:g", "firing:g1"}},
		// the escaped form of one tenant is not another tenant
		{"an escape in the tenant", side{"x:r", "firing", "g", "g1"}, side{"x%3Ar", "firing", "g", "g1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := apollo.NewFakeClock(t0)
			agg := newAggregator(t, clock)
			sink := alerttest.NewSink(100)
			e, err := alert.New(alert.Options{Store: agg, Sender: sink, Clock: clock, Logger: quiet,
				Locker: alert.NewMemoryLocker(clock), DedupWindow: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ts := clock.Now().UnixMilli() - 1000
			for _, sd := range []side{c.a, c.b} {
				e.SetRules(sd.tenant, parse(t, fmt.Sprintf(rule, sd.rule, sd.prefix)))
				finish(agg, sd.tenant, sd.job, "run", apollo.StatusFailed, ts, 10)
			}
			if err := e.Evaluate(bg, clock.Now()); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for len(sink.C) > 0 {
				if n := <-sink.C; n.Kind == apollo.NotifyFiring {
					got[n.Alert.Tenant] = true
				}
			}
			if !got[c.a.tenant] || !got[c.b.tenant] {
				t.Errorf("firing sent for %v, want both %q and %q", got, c.a.tenant, c.b.tenant)
			}
		})
	}
}
