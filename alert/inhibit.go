package alert

import (
	"slices"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// Inhibit rules (INHIBIT in a rules file, docs/rules.md) hold alerts the
// way the Holder does: the causes they find join the Holder's in the
// alert's InhibitedBy, so that one path marks, holds and releases both.
// A cause found by an inhibit rule is named by the firing alert's rule.

// inhibitsOf parses the inhibit rules of a tenant's rules text. Every
// caller of SetRulesSource has checked src already (loader, API, saved
// rules, the alert process's feed), so this only reads what was accepted;
// text that does not parse gives none, and is logged.
func (e *Engine) inhibitsOf(tenant string, src []byte) []*rules.Inhibit {
	if !rules.MayHaveInhibits(src) {
		return nil
	}
	f, err := rules.ParseSaved("rules", src)
	if err != nil {
		e.log.Error("alert: the inhibit rules of a rules text that was accepted do not parse; none apply", "tenant", tenant, "err", err)
		return nil
	}
	return f.Inhibits
}

// sourceOf returns the rule of the first firing alert of the tenant that
// holds target under one of ins, "" when none does. It reads the alerts
// in place, under the rate lock (taken unless the caller, a cycle, holds
// it already: rateLocked) and then the group lock, in
// the order a cycle takes them; nothing is copied, so a tenant with
// thousands of firing alerts pays a scan, not a list.
func (e *Engine) sourceOf(ins []*rules.Inhibit, target *apollo.Alert, rateLocked bool) string {
	holds := func(a *apollo.Alert) bool {
		if a.State != apollo.AlertFiring || a.Tenant != target.Tenant {
			return false
		}
		return slices.ContainsFunc(ins, func(in *rules.Inhibit) bool { return in.Inhibits(a, target) })
	}
	if !rateLocked {
		e.rate.mu.Lock()
		defer e.rate.mu.Unlock()
	}
	if rate := e.rate.tenants[target.Tenant]; rate != nil {
		for _, en := range rate.byID {
			if holds(&en.Alert) {
				return en.Rule
			}
		}
	}
	g := e.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, en := range g.open {
		if k.tenant == target.Tenant && holds(&en.Alert) {
			return en.Rule
		}
	}
	return ""
}

// withInhibits adds to by (the Holder's causes) the source of an inhibit
// rule of set that holds target, unless it is listed already. The alerts
// are looked at only when an inhibit rule's TARGET matches target, so a
// tenant without inhibit rules, or whose inhibit rules do not aim at
// target, pays nothing.
func (e *Engine) withInhibits(by []string, set *ruleSet, target *apollo.Alert, rateLocked bool) []string {
	if set == nil || !slices.ContainsFunc(set.inhibits, func(in *rules.Inhibit) bool { return in.Targets(target) }) {
		return by
	}
	ins := slices.DeleteFunc(slices.Clone(set.inhibits), func(in *rules.Inhibit) bool { return !in.Targets(target) })
	if src := e.sourceOf(ins, target, rateLocked); src != "" && !slices.Contains(by, src) {
		by = append(slices.Clone(by), src)
	}
	return by
}

// eventTarget is the alert an event rule's match would open, as inhibit
// rules see it.
func eventTarget(tenant string, r *rules.Rule) apollo.Alert {
	return apollo.Alert{Tenant: tenant, Rule: r.Name, Group: r.Prefix, State: apollo.AlertFiring, Severity: r.Severity, Labels: r.Labels}
}

// sourcesFirst moves the rate rules that an inhibit rule names as its
// source (SOURCE: rule=NAME) before the others, keeping their order
// otherwise: a cause and its echoes that start firing in the same
// evaluation are then held as they are when the cause fired a cycle
// earlier, whatever the order of the rules file.
func sourcesFirst(set *ruleSet) {
	if len(set.inhibits) == 0 {
		return
	}
	source := func(rr rateRule) int {
		for _, in := range set.inhibits {
			if slices.ContainsFunc(in.Source, func(m rules.Matcher) bool { return m.Name == "rule" && !m.Not && m.Value == rr.Name }) {
				return 0
			}
		}
		return 1
	}
	slices.SortStableFunc(set.rate, func(a, b rateRule) int { return source(a) - source(b) })
}

// heldMatch is a match an inhibit rule holds, for one rule.
type heldMatch struct {
	r *rules.Rule
	m *matchInfo
}

// inhibitedMatches returns m marked with its source, for each rule of rs
// that an inhibit rule of set holds m under. Inhibit rules match the
// alert the match would open, which the rule alone decides, so only the
// rules some TARGET matches (set.inhibitTargets) are looked at. It runs
// before the group lock is taken for the match.
func (e *Engine) inhibitedMatches(tenant string, set *ruleSet, rs []*rules.Rule, m *matchInfo) []heldMatch {
	var held []heldMatch
	for _, r := range set.inhibitTargets {
		if !r.Matches(m.job) || !slices.Contains(rs, r) {
			continue
		}
		target := eventTarget(tenant, r)
		if by := e.withInhibits(m.heldBy, set, &target, false); len(by) != len(m.heldBy) {
			h := *m
			h.heldBy = by
			held = append(held, heldMatch{r, &h})
		}
	}
	return held
}

// inhibitTargets lists the event rules of set whose alerts some inhibit
// rule's TARGET matches.
func inhibitTargets(set *ruleSet) []*rules.Rule {
	var out []*rules.Rule
	for _, r := range set.rules {
		t := eventTarget(set.tenant, r)
		if r.IsEvent() && slices.ContainsFunc(set.inhibits, func(in *rules.Inhibit) bool { return in.Targets(&t) }) {
			out = append(out, r)
		}
	}
	return out
}
