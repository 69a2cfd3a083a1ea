package alert

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// rangeCache remembers where each prefix's jobs are in a tenant's job
// list, by the list's Table.NamesID: the Aggregator's tables keep one ID
// until a job comes or goes, so in the steady state a cycle does no
// binary search at all (with 100 000 names each search is some 17 cache
// misses). A table whose NamesID is 0 (another store) is searched.
type rangeCache struct {
	entries map[uint64]*rangeEntry // by Table.NamesID
	off     bool                   // benchmarks compare with no cache
}

type rangeEntry struct {
	ranges map[string][2]int
	used   uint64
}

func (c *rangeCache) get(t *metrics.Table, prefix string, cycle uint64) (int, int) {
	if len(t.Names) == 0 {
		return 0, 0
	}
	if c.off || t.NamesID == 0 {
		return t.Range(prefix)
	}
	en := c.entries[t.NamesID]
	if en == nil {
		en = &rangeEntry{ranges: map[string][2]int{}}
		c.entries[t.NamesID] = en
	}
	en.used = cycle
	if r, ok := en.ranges[prefix]; ok {
		return r[0], r[1]
	}
	lo, hi := t.Range(prefix)
	en.ranges[prefix] = [2]int{lo, hi}
	return lo, hi
}

// sweep forgets the job lists no table of this cycle used.
func (c *rangeCache) sweep(cycle uint64) {
	for k, en := range c.entries {
		if en.used != cycle {
			delete(c.entries, k)
		}
	}
}

// sameNames reports whether two tables are known to list the same jobs,
// so that a row of one is the same job's row in the other.
func sameNames(a, b *metrics.Table) bool {
	return a.NamesID != 0 && a.NamesID == b.NamesID
}

// cycle is one evaluation: what it saw, what it decided to send and
// which alerts it changed.
type cycle struct {
	e        *Engine
	now      time.Time
	n        uint64
	silences silenceSet
	notes    []handover
	changed  []apollo.Alert
	refused  map[string]int // tenant -> alerts its bound kept from opening
	v        values
	// sum and psum hold a prefix's totals; c.v points at them, so they
	// live in the cycle rather than escaping once per rule.
	sum, psum apollo.Summary
	zero      apollo.Summary
}

// Evaluate runs one cycle at now: it fetches the tables the rate rules
// need, moves every (rule, group) one step through its lifecycle, drops
// expired silences and old resolved alerts, delivers the notifications
// (outside every lock) and saves the state if it changed. A table that
// cannot be read leaves its rules' alerts as they were; the error is
// returned with the others.
func (e *Engine) Evaluate(ctx context.Context, now time.Time) error {
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	began := time.Now() // wall time, for Stats only
	e.cycles++
	c := &cycle{e: e, now: now, n: e.cycles, silences: e.silences.current()}
	var errs []error
	for _, set := range e.sets.all() {
		if err := c.tenant(ctx, set); err != nil {
			errs = append(errs, err)
		}
	}
	c.tellRefused()
	if e.silences.expire(now) {
		e.dirty.Store(true)
	}
	if e.resolved.trim(now) {
		e.dirty.Store(true)
	}
	e.deliver(c.notes)
	e.publish(c.changed)
	if len(c.changed) > 0 || len(c.notes) > 0 {
		e.dirty.Store(true)
	}
	e.save(ctx)
	e.st.evaluations.Add(1)
	e.st.lastEval.Store(now.UnixNano())
	e.st.lastDuration.Store(int64(time.Since(began)))
	if err := errors.Join(errs...); err != nil {
		e.st.evalErrors.Add(1)
		return err
	}
	return nil
}

// tenant evaluates one tenant's rate rules. Tables are read before the
// lock is taken: the lock covers only the state machine.
func (c *cycle) tenant(ctx context.Context, set *ruleSet) error {
	e := c.e
	tables, errs := c.tables(ctx, set)
	cache := e.caches[set.tenant]
	if cache == nil {
		cache = &rangeCache{entries: map[uint64]*rangeEntry{}, off: e.noRangeCache}
		e.caches[set.tenant] = cache
	}
	e.rate.update(set.tenant, func(tr *tenantRate) {
		for i := range set.rate {
			rr := &set.rate[i]
			cur := tables[rr.cur]
			var prev *metrics.Table
			if rr.prev >= 0 {
				prev = tables[rr.prev]
			}
			if cur == nil || (rr.prev >= 0 && prev == nil) {
				continue // not evaluated: the state stays as it was
			}
			c.rule(tr, tr.ruleState(rr.Name), rr, cur, prev, cache)
		}
		cache.sweep(c.n)
		// Rules that are gone resolve, as do loaded alerts of rules this
		// tenant no longer has.
		for name, rs := range tr.rules {
			if !set.rateNames[name] {
				for _, en := range rs.groups {
					c.resolve(tr, rs, en, "rule removed")
				}
				delete(tr.rules, name)
			}
		}
	})
	return errors.Join(errs...)
}

// tables reads the windows the tenant's rules use: in one pass when the
// store can (metrics.Aggregator), else one at a time. A window that could
// not be read is nil, with its error.
func (c *cycle) tables(ctx context.Context, set *ruleSet) ([]*metrics.Table, []error) {
	qs := make([]metrics.Query, len(set.windows))
	for i, w := range set.windows {
		qs[i] = metrics.Query{Tenant: set.tenant, Window: w.window, Offset: w.offset, Now: c.now}
	}
	if m, ok := c.e.opts.Store.(MultiReader); ok && len(qs) > 1 {
		ts, err := m.Tables(ctx, qs)
		if err == nil {
			return ts, nil
		}
		return make([]*metrics.Table, len(qs)), []error{fmt.Errorf("alert: tenant %q, %d windows: %w", set.tenant, len(qs), err)}
	}
	tables := make([]*metrics.Table, len(qs))
	var errs []error
	for i, q := range qs {
		t, err := c.e.opts.Store.Table(ctx, q)
		if err != nil {
			errs = append(errs, fmt.Errorf("alert: tenant %q, window %v offset %v: %w", set.tenant, q.Window, q.Offset, err))
			continue
		}
		tables[i] = t
	}
	return tables, errs
}

// rule evaluates one rate rule: the prefix as a whole, or each job under
// it with BY: name.
func (c *cycle) rule(tr *tenantRate, rs *ruleState, rr *rateRule, cur, prev *metrics.Table, cache *rangeCache) {
	c.v.window = rr.Window
	lo, hi := cache.get(cur, rr.Prefix, c.n)
	if rr.By == "" {
		c.sum = cur.Sum(lo, hi)
		c.v.cur, c.v.prev = &c.sum, nil
		if prev != nil {
			plo, phi := cache.get(prev, rr.Prefix, c.n)
			c.psum = prev.Sum(plo, phi)
			c.v.prev = &c.psum
		}
		c.step(tr, rs, rr, rr.Prefix, rs.groups[rr.Prefix], rr.Expr.Eval(&c.v))
	} else {
		for i := lo; i < hi; i++ {
			c.v.cur, c.v.prev = &cur.Rows[i], c.prevRow(prev, cur, i)
			cond := rr.Expr.Eval(&c.v)
			en := rs.groups[cur.Names[i]]
			if en == nil && !cond {
				continue
			}
			c.step(tr, rs, rr, cur.Names[i], en, cond)
		}
	}
	// Episodes this cycle did not reach: a job that left the table (no
	// run within the metrics' retention) has done nothing, which is what
	// a zero Summary says, so "count == 0" keeps firing for it. A group
	// the rule no longer covers (its prefix or BY changed) resolves.
	for group, en := range rs.groups {
		if en.seen == c.n {
			continue
		}
		if rr.By == "" || !strings.HasPrefix(group, rr.Prefix) {
			c.resolve(tr, rs, en, "rule changed")
			continue
		}
		c.v.cur, c.v.prev = &c.zero, nil
		if prev != nil {
			c.v.prev = &c.zero
		}
		c.step(tr, rs, rr, group, en, rr.Expr.Eval(&c.v))
	}
}

// prevRow finds row i of cur in the previous window's table.
func (c *cycle) prevRow(prev, cur *metrics.Table, i int) *apollo.Summary {
	switch {
	case prev == nil:
		return nil
	case sameNames(prev, cur):
		return &prev.Rows[i]
	}
	name := cur.Names[i]
	j := sort.SearchStrings(prev.Names, name)
	if j < len(prev.Names) && prev.Names[j] == name {
		return &prev.Rows[j]
	}
	return &c.zero
}
