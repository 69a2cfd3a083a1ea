package alert

import (
	"maps"
	"sync"
	"sync/atomic"
)

// ruleSets is every tenant's rule set. Readers load the map without a
// lock; writers take turns under mu and replace it.
type ruleSets struct {
	mu     sync.Mutex
	byName atomic.Pointer[map[string]*ruleSet] // tenant -> its rules
}

func newRuleSets() *ruleSets {
	r := &ruleSets{}
	r.byName.Store(&map[string]*ruleSet{})
	return r
}

// all returns every tenant's set; the map must not be modified.
func (r *ruleSets) all() map[string]*ruleSet { return *r.byName.Load() }

// get returns the tenant's set, nil if it has none.
func (r *ruleSets) get(tenant string) *ruleSet { return r.all()[tenant] }

// put replaces set's tenant's set.
func (r *ruleSets) put(set *ruleSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.all())
	next[set.tenant] = set
	r.byName.Store(&next)
}
