package alert

import (
	"slices"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// resolvedAlerts keeps each tenant's resolved alerts for the API, oldest
// first: at most limit per tenant, none older than keep. An alert that
// resolves is remembered while the lock of the rate alerts or of the event
// groups is held, so this lock comes after both.
type resolvedAlerts struct {
	mu       sync.Mutex
	limit    int
	keep     time.Duration
	byTenant map[string][]apollo.Alert
}

func newResolvedAlerts(limit int, keep time.Duration) *resolvedAlerts {
	return &resolvedAlerts{limit: limit, keep: keep, byTenant: map[string][]apollo.Alert{}}
}

// remember keeps a resolved alert, dropping the tenant's oldest past limit.
func (h *resolvedAlerts) remember(a apollo.Alert) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := append(h.byTenant[a.Tenant], a)
	if over := len(list) - h.limit; over > 0 {
		list = slices.Delete(list, 0, over)
	}
	h.byTenant[a.Tenant] = list
}

// sortLoaded puts each tenant's alerts in the order they resolved, once a
// saved state (in no particular order) is loaded.
func (h *resolvedAlerts) sortLoaded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range h.byTenant {
		slices.SortStableFunc(list, func(a, b apollo.Alert) int { return a.ResolvedAt.Compare(b.ResolvedAt) })
	}
}

// trim forgets the alerts that resolved keep or longer before now, and
// reports whether it forgot any.
func (h *resolvedAlerts) trim(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	trimmed := false
	for tenant, list := range h.byTenant {
		i := slices.IndexFunc(list, func(a apollo.Alert) bool { return now.Sub(a.ResolvedAt) < h.keep })
		switch {
		case i < 0:
			delete(h.byTenant, tenant)
			trimmed = true
		case i > 0:
			h.byTenant[tenant] = slices.Delete(list, 0, i)
			trimmed = true
		}
	}
	return trimmed
}

// appendStored appends every resolved alert, for a snapshot.
func (h *resolvedAlerts) appendStored(out []StoredAlert) []StoredAlert {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range h.byTenant {
		for _, a := range list {
			out = append(out, StoredAlert{Alert: a})
		}
	}
	return out
}

// count is how many resolved alerts are kept, over every tenant.
func (h *resolvedAlerts) count() (n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range h.byTenant {
		n += len(list)
	}
	return n
}

// list appends the tenant's resolved alerts.
func (h *resolvedAlerts) list(out []apollo.Alert, tenant string) []apollo.Alert {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append(out, h.byTenant[tenant]...)
}

// has reports whether the tenant's alert id is among the resolved.
func (h *resolvedAlerts) has(tenant, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.byTenant[tenant], func(a apollo.Alert) bool { return a.ID == id })
}
