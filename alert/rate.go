package alert

import (
	"sync"

	"github.com/apollo-11/apollo"
)

// rateAlerts is every tenant's rate-rule alerts that are pending or
// firing. A cycle holds its lock over one tenant's state machine; the
// tables are read before. Inactive groups have no entry, so a cycle over
// 100 000 quiet jobs keeps nothing.
type rateAlerts struct {
	mu      sync.Mutex
	tenants map[string]*tenantRate
}

// tenantRate is one tenant's rate-rule alerts: for each rule name, the
// groups that are pending or firing.
type tenantRate struct {
	tenant string
	rules  map[string]*ruleState
	byID   map[string]*entry
}

type ruleState struct {
	groups map[string]*entry // group -> its current episode
}

func newRateAlerts() *rateAlerts { return &rateAlerts{tenants: map[string]*tenantRate{}} }

// update runs f on the tenant's alerts, made if needed, under the lock.
func (r *rateAlerts) update(tenant string, f func(*tenantRate)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.tenants[tenant]
	if tr == nil {
		tr = &tenantRate{tenant: tenant, rules: map[string]*ruleState{}, byID: map[string]*entry{}}
		r.tenants[tenant] = tr
	}
	f(tr)
}

func (tr *tenantRate) ruleState(name string) *ruleState {
	rs := tr.rules[name]
	if rs == nil {
		rs = &ruleState{groups: map[string]*entry{}}
		tr.rules[name] = rs
	}
	return rs
}

// load puts a saved alert back, unless its group has one already.
func (r *rateAlerts) load(a StoredAlert) {
	r.update(a.Tenant, func(tr *tenantRate) {
		rs := tr.ruleState(a.Rule)
		if rs.groups[a.Group] == nil {
			en := &entry{StoredAlert: a}
			rs.groups[a.Group], tr.byID[a.ID] = en, en
		}
	})
}

// each calls f on every alert, under the lock.
func (r *rateAlerts) each(f func(*entry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tr := range r.tenants {
		for _, rs := range tr.rules {
			for _, en := range rs.groups {
				f(en)
			}
		}
	}
}

// list appends the tenant's alerts whose state want accepts.
func (r *rateAlerts) list(out []apollo.Alert, tenant string, want func(apollo.AlertState) bool) []apollo.Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tr := r.tenants[tenant]; tr != nil {
		for _, en := range tr.byID {
			if want(en.State) {
				out = append(out, en.Alert)
			}
		}
	}
	return out
}

// withOpen runs f on the tenant's alert id under the lock, and reports
// whether there was one.
func (r *rateAlerts) withOpen(tenant, id string, f func(*entry)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tr := r.tenants[tenant]; tr != nil {
		if en := tr.byID[id]; en != nil {
			f(en)
			return true
		}
	}
	return false
}
