package alert

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

// silenceSet is every tenant's silences; it is replaced, never modified,
// so Apply and delivery read it without a lock.
type silenceSet map[string][]Silence

// silenced reports whether a silence of a's tenant holds a back at now,
// and records on a the first silence that did.
func (ss silenceSet) silenced(a *apollo.Alert, now time.Time) bool {
	for i := range ss[a.Tenant] {
		s := &ss[a.Tenant][i]
		if s.Active(now) && s.Matches(a) {
			if a.SilencedAt.IsZero() {
				a.SilencedAt, a.SilenceID = now, s.ID
			}
			return true
		}
	}
	return false
}

// silenceRegistry holds the silenceSet in force. Readers load it without a
// lock; writers take turns under mu, which a person's change holds until
// it is saved.
type silenceRegistry struct {
	mu  sync.Mutex
	set atomic.Pointer[silenceSet]
}

func newSilenceRegistry() *silenceRegistry {
	r := &silenceRegistry{}
	r.set.Store(&silenceSet{})
	return r
}

// current returns the silences in force; the set must not be modified.
func (r *silenceRegistry) current() silenceSet { return *r.set.Load() }

// all returns every tenant's silences, for a snapshot.
func (r *silenceRegistry) all() []Silence {
	var out []Silence
	for _, list := range r.current() {
		out = append(out, list...)
	}
	return out
}

// update replaces the tenant's list with what f makes of a copy, and
// returns once save has made it durable. A failed save puts the old set
// back (undo); mu keeps other writers out meanwhile.
func (r *silenceRegistry) update(tenant string, f func([]Silence) ([]Silence, error), save func(undo func()) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.set.Load()
	list, err := f(slices.Clone((*old)[tenant]))
	if err != nil {
		return err
	}
	next := maps.Clone(*old)
	if len(list) == 0 {
		delete(next, tenant)
	} else {
		next[tenant] = list
	}
	r.set.Store(&next)
	return save(func() { r.set.Store(old) })
}

// install puts saved silences in force at start, except those that ended
// before now, and returns how many it kept.
func (r *silenceRegistry) install(saved []Silence, now time.Time) int {
	next := silenceSet{}
	kept := 0
	for _, s := range saved {
		if now.Before(s.EndsAt) {
			next[s.Tenant] = append(next[s.Tenant], s)
			kept++
		}
	}
	r.mu.Lock()
	r.set.Store(&next)
	r.mu.Unlock()
	return kept
}

// expire drops the silences that ended before now and reports whether
// there were any.
func (r *silenceRegistry) expire(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.current()
	var next silenceSet
	for tenant, list := range old {
		if !slices.ContainsFunc(list, func(s Silence) bool { return !now.Before(s.EndsAt) }) {
			continue
		}
		if next == nil {
			next = maps.Clone(old)
		}
		kept := slices.DeleteFunc(slices.Clone(list), func(s Silence) bool { return !now.Before(s.EndsAt) })
		if len(kept) == 0 {
			delete(next, tenant)
		} else {
			next[tenant] = kept
		}
	}
	if next == nil {
		return false
	}
	r.set.Store(&next)
	return true
}
