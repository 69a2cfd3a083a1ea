package metrics

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// series is one job of one tenant.
type series struct {
	mu   sync.Mutex
	dead bool     // removed by compaction; writers look it up again
	l0   level    // 10-second buckets
	l1   level    // 1-minute rollups
	runs *jobRuns // made by the first change; nil in a series read from a snapshot without
	name string
}

// health returns the job's health record, made if needed; s.mu must be
// held.
func (s *series) health() *jobRuns {
	if s.runs == nil {
		s.runs = &jobRuns{}
	}
	return s.runs
}

// level returns l0 or l1.
func (s *series) level(i int) *level {
	if i == 0 {
		return &s.l0
	}
	return &s.l1
}

// idle reports whether s holds nothing worth keeping; s.mu must be held.
func (s *series) idle() bool {
	return len(s.l0.keys) == 0 && len(s.l1.keys) == 0 &&
		s.l1.base[fBacklog] == 0 && s.l1.base[fRunning] == 0
}

// registry finds a tenant's jobs. Apply looks a job up on every change,
// so lookups take no lock: sync.Map reads are lock-free and, unlike a
// map behind an RWMutex, do not make the cores fight over one counter.
type registry struct {
	tenants atomic.Pointer[sync.Map] // tenant name -> *tenant; replaced by ReadSnapshot
	tmu     sync.Mutex               // serializes creating tenants
}

// tenant holds one tenant's jobs and a sorted index of them for Table.
type tenant struct {
	byName sync.Map // job name -> *series
	// mu guards idx and added, and serializes creating and removing jobs.
	mu    sync.RWMutex
	idx   *nameIndex // sorted; replaced, never modified
	added []*series  // created since idx was built
}

type nameIndex struct {
	series []*series
	names  []string
	id     uint64 // Table.NamesID; 0 for emptyIndex
}

// indexIDs numbers every name index the process builds, so that equal IDs
// mean equal names (Table.NamesID).
var indexIDs atomic.Uint64

var emptyIndex = &nameIndex{}

func newTenant() *tenant { return &tenant{idx: emptyIndex} }

func (r *registry) tenantMap() *sync.Map {
	if m := r.tenants.Load(); m != nil {
		return m
	}
	r.tmu.Lock()
	defer r.tmu.Unlock()
	if r.tenants.Load() == nil {
		r.tenants.Store(new(sync.Map))
	}
	return r.tenants.Load()
}

func (r *registry) tenant(name string, create bool) *tenant {
	m := r.tenantMap()
	if v, ok := m.Load(name); ok || !create {
		t, _ := v.(*tenant)
		return t
	}
	r.tmu.Lock()
	defer r.tmu.Unlock()
	v, _ := m.LoadOrStore(cloneString(name), newTenant())
	return v.(*tenant)
}

// lockSeries returns the series for r, created if needed, locked.
func (r *registry) lockSeries(ref seriesRef) *series {
	for {
		t := r.tenant(ref.tenant, true)
		v, ok := t.byName.Load(ref.name)
		if !ok {
			v = t.create(ref.name)
		}
		s := v.(*series)
		s.mu.Lock()
		if !s.dead {
			return s
		}
		s.mu.Unlock()
	}
}

// create returns the series for name, made if no one else made it first.
func (t *tenant) create(name string) *series {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.byName.Load(name); ok {
		return v.(*series)
	}
	// Clone so the series does not pin the buffer the name was decoded
	// from.
	s := &series{name: cloneString(name)}
	t.byName.Store(s.name, s)
	t.added = append(t.added, s)
	return s
}

func cloneString(s string) string { return strings.Clone(s) }

// lookup returns the series for tenant and name, or nil.
func (r *registry) lookup(tn, name string) *series {
	t := r.tenant(tn, false)
	if t == nil {
		return nil
	}
	v, _ := t.byName.Load(name)
	s, _ := v.(*series)
	return s
}

// tenantList returns the tenants in name order.
func (r *registry) tenantList() ([]string, []*tenant) {
	var names []string
	byName := map[string]*tenant{}
	r.tenantMap().Range(func(k, v any) bool {
		names = append(names, k.(string))
		byName[k.(string)] = v.(*tenant)
		return true
	})
	slices.Sort(names)
	ts := make([]*tenant, len(names))
	for i, n := range names {
		ts[i] = byName[n]
	}
	return names, ts
}

// index returns the tenant's jobs sorted by name.
func (t *tenant) index() *nameIndex {
	t.mu.RLock()
	idx, fresh := t.idx, len(t.added) == 0
	t.mu.RUnlock()
	if fresh {
		return idx
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.added) > 0 {
		t.idx = mergeIndex(t.idx, t.added)
		t.added = nil
	}
	return t.idx
}

// remove deletes the series that are still idle and reports how many.
func (t *tenant) remove(cands []*series) int {
	if len(cands) == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range cands {
		s.mu.Lock()
		if s.idle() && !s.dead {
			s.dead = true
			t.byName.CompareAndDelete(s.name, s)
			n++
		}
		s.mu.Unlock()
	}
	if n > 0 {
		t.idx = filterIndex(t.idx)
		t.added = filterDead(t.added)
	}
	return n
}

func byName(a, b *series) int { return strings.Compare(a.name, b.name) }

func newIndex(ss []*series) *nameIndex {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.name
	}
	return &nameIndex{series: ss, names: names, id: indexIDs.Add(1)}
}

// mergeIndex returns old with added merged in, both without dead series;
// the tenant's lock must be held.
func mergeIndex(old *nameIndex, added []*series) *nameIndex {
	slices.SortFunc(added, byName)
	out := make([]*series, 0, len(old.series)+len(added))
	i, j := 0, 0
	for i < len(old.series) || j < len(added) {
		var s *series
		if j == len(added) || (i < len(old.series) && old.series[i].name < added[j].name) {
			s, i = old.series[i], i+1
		} else {
			s, j = added[j], j+1
		}
		if !s.dead {
			out = append(out, s)
		}
	}
	return newIndex(out)
}

// filterIndex returns idx without dead series; the tenant's lock must be
// held.
func filterIndex(idx *nameIndex) *nameIndex {
	return newIndex(filterDead(slices.Clone(idx.series)))
}

func filterDead(ss []*series) []*series {
	return slices.DeleteFunc(ss, func(s *series) bool { return s.dead })
}
