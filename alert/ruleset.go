package alert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// ruleSet is one tenant's rules prepared for evaluation and for Apply. It
// is replaced, never modified, so Apply reads it without a lock.
type ruleSet struct {
	tenant string
	rules  []*rules.Rule
	source []byte // the file text the rules came from; nil if unknown

	rate      []rateRule
	rateNames map[string]bool
	windows   []windowKey // the distinct tables a cycle fetches
	// byStatus lists the event rules watching each status.
	byStatus [statusSlots][]*rules.Rule
	// byOccurrence lists the event rules watching each occurrence (ON:
	// missed ...), indexed by rules.Occurrence.
	byOccurrence [occurrenceSlots][]*rules.Rule
	nEvent       int
	// inhibits are the INHIBIT rules of the tenant's rules text;
	// inhibitTargets the event rules whose alerts they may hold.
	inhibits       []*rules.Inhibit
	inhibitTargets []*rules.Rule
}

// eventRule returns the set's event rule named name, nil if it has none.
func (set *ruleSet) eventRule(name string) *rules.Rule {
	for _, r := range set.rules {
		if r.Name == name && r.IsEvent() {
			return r
		}
	}
	return nil
}

// statusSlots bounds apollo.Status values used as indexes; larger ones
// are never watched.
const statusSlots = 8

// occurrenceSlots bounds rules.Occurrence values used as indexes.
const occurrenceSlots = 8

// windowKey is one metrics table: a window, shifted by offset for
// pct_change.
type windowKey struct{ window, offset time.Duration }

// rateRule is a THRESHOLD rule with what a cycle needs precomputed.
type rateRule struct {
	*rules.Rule
	expr      string // canonical condition, shown on alerts
	cur, prev int    // indexes into ruleSet.windows; prev is -1 without pct_change
}

func newRuleSet(tenant string, rs []*rules.Rule, src []byte) *ruleSet {
	set := &ruleSet{tenant: tenant, source: slices.Clone(src), rateNames: map[string]bool{}}
	slot := map[windowKey]int{}
	table := func(k windowKey) int {
		i, ok := slot[k]
		if !ok {
			i = len(set.windows)
			slot[k] = i
			set.windows = append(set.windows, k)
		}
		return i
	}
	for _, r := range rs {
		if r == nil {
			continue
		}
		set.rules = append(set.rules, r)
		if r.IsEvent() {
			set.nEvent++
			for _, st := range r.On {
				if int(st) < statusSlots && !slices.Contains(set.byStatus[st], r) {
					set.byStatus[st] = append(set.byStatus[st], r)
				}
			}
			for _, o := range r.Occurrences {
				if int(o) < occurrenceSlots && !slices.Contains(set.byOccurrence[o], r) {
					set.byOccurrence[o] = append(set.byOccurrence[o], r)
				}
			}
			continue
		}
		rr := rateRule{Rule: r, expr: r.Expr.String(), prev: -1}
		rr.cur = table(windowKey{window: r.Window})
		if r.Expr.UsesPrevious() {
			rr.prev = table(windowKey{window: r.Window, offset: r.Window})
		}
		set.rate = append(set.rate, rr)
		set.rateNames[r.Name] = true
	}
	return set
}

// SetRules replaces the tenant's rules at once. Alerts of rules that are
// gone, or whose prefix or BY changed, resolve at the next evaluation;
// alerts of rules that keep their name carry on.
func (e *Engine) SetRules(tenant string, rs []*rules.Rule) { e.SetRulesSource(tenant, rs, nil) }

// SetRulesSource is SetRules that also keeps the text the rules were
// parsed from, for RulesSource (the API shows and edits it), and applies
// the text's INHIBIT rules: every path that sets rules (the file and its
// reloads, the API, the saved rules at start, the alert process's feed)
// hands the engine the text, so the inhibit rules travel with it.
func (e *Engine) SetRulesSource(tenant string, rs []*rules.Rule, src []byte) {
	set := newRuleSet(tenant, rs, src)
	set.inhibits = e.inhibitsOf(tenant, src)
	sourcesFirst(set)
	set.inhibitTargets = inhibitTargets(set)
	e.sets.put(set)
	e.groups.follow(set)
	e.log.Info("alert: rules set", "tenant", tenant, "rate", len(set.rate), "event", set.nEvent, "inhibit", len(set.inhibits))
}

// Rules returns the tenant's rules, in file order.
func (e *Engine) Rules(tenant string) []*rules.Rule {
	if set := e.sets.get(tenant); set != nil {
		return slices.Clone(set.rules)
	}
	return nil
}

// RulesSource returns the text of the tenant's rules: the file they were
// set from, or their canonical text when that is unknown.
func (e *Engine) RulesSource(tenant string) []byte {
	set := e.sets.get(tenant)
	if set == nil {
		return nil
	}
	if set.source != nil {
		return slices.Clone(set.source)
	}
	var b strings.Builder
	for _, r := range set.rules {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// RulesSources returns the text of every tenant's rules, as RulesSource.
func (e *Engine) RulesSources() map[string][]byte {
	all := e.sets.all()
	out := make(map[string][]byte, len(all))
	for tenant := range all {
		out[tenant] = e.RulesSource(tenant)
	}
	return out
}

// eventRulesFor returns the event rules of tenant watching st.
func (e *Engine) eventRulesFor(tenant string, st apollo.Status) []*rules.Rule {
	if int(st) >= statusSlots {
		return nil
	}
	if set := e.sets.get(tenant); set != nil {
		return set.byStatus[st]
	}
	return nil
}

// RuleStore keeps the rules text each tenant set through the API, so that
// a restarted process runs, and shows, the rules it ran before: FileRules
// in the data directory, redisstore.Rules in the three-process mode.
// Save returns once the text is durable.
type RuleStore interface {
	Load(ctx context.Context) (map[string][]byte, error)
	Save(ctx context.Context, tenant string, src []byte) error
}

// SyncRules sets the rules of every tenant in saved whose text differs
// from what the engine runs, and returns those tenants. Tenants for which
// keep is true are left alone: their rules come from a file. Text that
// no longer parses (written by another version) is skipped and reported
// in the error, naming the tenant; the other tenants are set.
func (e *Engine) SyncRules(saved map[string][]byte, keep func(tenant string) bool) ([]string, error) {
	var (
		set  []string
		errs []error
	)
	for _, tenant := range slices.Sorted(maps.Keys(saved)) {
		src := saved[tenant]
		if keep != nil && keep(tenant) || bytes.Equal(src, e.RulesSource(tenant)) {
			continue
		}
		f, err := rules.ParseSaved("rules", src)
		if err != nil {
			errs = append(errs, fmt.Errorf("the saved rules of tenant %q: %w", tenant, err))
			continue
		}
		e.SetRulesSource(tenant, f.Rules, src)
		set = append(set, tenant)
	}
	return set, errors.Join(errs...)
}
