package alert

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apollo-11/apollo"
)

// missedEvaluations is how many Intervals may pass between two
// evaluations of a pending alert before its DURATION starts again: the
// condition must hold on every evaluation, and one that did not happen
// (the process was down, a table failed) proves nothing.
const missedEvaluations = 3

// held is how long something has held at this evaluation, in evaluation
// time: the wall time since it began, rounded to whole intervals. Ticks
// arrive a few milliseconds early or late; measured exactly, a DURATION of
// 2m fails at the twelfth evaluation when it is 3 ms short and the alert
// fires a whole interval late.
func (c *cycle) held(since time.Time) time.Duration {
	return c.now.Sub(since).Round(c.e.opts.Interval)
}

// step moves one group of a rate rule by one evaluation (docs/rules.md):
// inactive → pending when cond is true; pending → firing once cond has
// held on every evaluation for DURATION, and back to inactive on one
// false evaluation; firing → resolved once cond has been false for KEEP.
func (c *cycle) step(tr *tenantRate, rs *ruleState, rr *rateRule, group string, en *entry, cond bool) {
	if en == nil {
		if !cond {
			return
		}
		if len(tr.byID) >= c.e.opts.MaxAlerts {
			c.refuse(tr.tenant)
			return
		}
		en = c.open(tr, rs, rr, group)
	}
	gap := !en.LastEval.IsZero() && c.now.Sub(en.LastEval) > missedEvaluations*c.e.opts.Interval
	en.LastEval, en.seen = c.now, c.n
	en.follow(rr.Rule)
	if cond {
		// The summary follows the value; formatting it only when the
		// value moved keeps a cycle over thousands of firing alerts cheap.
		if v := rr.Expr.Observe(&c.v); v != en.Value || en.Summary == "" || en.Expr != rr.expr {
			en.Value, en.Expr = v, rr.expr
			en.Summary = describe(rr, group, v)
		}
		en.FalseSince = time.Time{}
	}
	switch en.State {
	case apollo.AlertPending:
		if !cond {
			c.drop(tr, rs, en)
			return
		}
		if gap {
			en.StartedAt = c.now
		}
		if c.held(en.StartedAt) >= rr.Duration {
			c.fire(en, rr)
		}
	case apollo.AlertFiring:
		if cond {
			c.remind(en, rr)
			return
		}
		if en.FalseSince.IsZero() {
			en.FalseSince = c.now
		}
		if c.held(en.FalseSince) >= rr.Keep {
			c.resolve(tr, rs, en, "")
		}
	}
}

// refuse counts an alert the tenant's bound (Options.MaxAlerts) kept from
// opening; the cycle tells of it once it ends (tellRefused).
func (c *cycle) refuse(tenant string) {
	c.e.st.refused.Add(1)
	if c.refused == nil {
		c.refused = map[string]int{}
	}
	c.refused[tenant]++
}

// tellRefused logs, once a minute for each tenant, and raises a self-alert
// for the tenants whose alerts this cycle did not open: a bound that
// holds alerts back silently would look like jobs in good health.
func (c *cycle) tellRefused() {
	for _, tenant := range slices.Sorted(maps.Keys(c.refused)) {
		n := c.refused[tenant]
		if ok, sup := c.e.warns.Allow("max alerts "+tenant, c.now); ok {
			c.e.log.Error("alert: alerts not opened: the tenant has the most open alerts it may have",
				"tenant", tenant, "notOpened", n, "maxAlerts", c.e.opts.MaxAlerts, "suppressed", sup)
		}
		c.e.SelfAlert("apollo_alerts_over_limit", apollo.SeverityCritical, fmt.Sprintf(
			"tenant %q has %d open alerts, the most it may have: %d more were not opened; its rules (BY: name over many jobs) open too many",
			tenant, c.e.opts.MaxAlerts, n))
	}
}

// open starts a new episode: a new alert ID, pending.
func (c *cycle) open(tr *tenantRate, rs *ruleState, rr *rateRule, group string) *entry {
	en := &entry{StoredAlert: StoredAlert{Alert: apollo.Alert{
		ID: newID(), Tenant: tr.tenant, Rule: rr.Name, Group: group, State: apollo.AlertPending,
		Severity: rr.Severity, Labels: rr.Labels, Channels: rr.Notify, StartedAt: c.now,
	}}}
	rs.groups[group] = en
	tr.byID[en.ID] = en
	c.changed = append(c.changed, en.Alert)
	return en
}

func (c *cycle) fire(en *entry, rr *rateRule) {
	en.State, en.FiredAt = apollo.AlertFiring, c.now
	c.changed = append(c.changed, en.Alert)
	c.notifyFiring(en)
}

// notifyFiring sends the firing notification unless a silence holds it
// back; then the next evaluation tries again, so an alert that outlives
// its silence is still told.
func (c *cycle) notifyFiring(en *entry) {
	if c.heldBack(en) {
		return
	}
	en.FiringSent, en.LastSentAt = true, c.now
	c.send(en, apollo.NotifyFiring)
}

// remind handles a firing alert whose condition still holds: a firing
// notification a silence held back, or a repeat if nobody acknowledged.
func (c *cycle) remind(en *entry, rr *rateRule) {
	if !en.FiringSent {
		c.notifyFiring(en)
		return
	}
	repeat := c.e.opts.RepeatInterval
	// Measured exactly, unlike DURATION: a repeat that comes one interval
	// late after hours is harmless, one that comes early could still find
	// the dedup lock of the last one held.
	if repeat <= 0 || en.AckedBy != "" || len(en.Channels) == 0 || c.now.Sub(en.LastSentAt) < repeat {
		return
	}
	if c.heldBack(en) {
		return
	}
	en.LastSentAt = c.now
	c.send(en, apollo.NotifyRepeat)
}

// resolve ends an episode. The resolution is notified once, and only if
// the firing was: people are told an alert is over only if they were told
// it began. reason, when set, is added to the summary (rule removed).
func (c *cycle) resolve(tr *tenantRate, rs *ruleState, en *entry, reason string) {
	delete(rs.groups, en.Group)
	delete(tr.byID, en.ID)
	en.State, en.ResolvedAt = apollo.AlertResolved, c.now
	if reason != "" {
		en.Summary += " (" + reason + ")"
	}
	if en.FiringSent && !en.ResolvedSent && !c.heldBack(en) {
		en.ResolvedSent = true
		c.send(en, apollo.NotifyResolved)
	}
	c.changed = append(c.changed, en.Alert)
	c.e.resolved.remember(en.Alert)
}

// drop ends a pending episode that did not last: it goes back to
// inactive, and is forgotten.
func (c *cycle) drop(tr *tenantRate, rs *ruleState, en *entry) {
	delete(rs.groups, en.Group)
	delete(tr.byID, en.ID)
	en.State = apollo.AlertInactive
	c.changed = append(c.changed, en.Alert)
}

// heldBack reports whether the Holder (for the alert of one job: the
// group is a job name with BY: name), an inhibit rule or a silence holds en's
// notifications, and counts it. An inhibited alert is marked with its
// causes; like a silenced one, it is told once it is no longer held.
func (c *cycle) heldBack(en *entry) bool {
	var by []string
	if h := c.e.opts.Holder; h != nil {
		by = h.HeldBy(en.Tenant, en.Group)
	}
	// The cycle holds the rate lock: the tenant's rate alerts are read
	// from under it.
	by = c.e.withInhibits(by, c.e.sets.get(en.Tenant), &en.Alert, true)
	if !slices.Equal(by, en.InhibitedBy) {
		en.InhibitedBy = by
		c.changed = append(c.changed, en.Alert)
	}
	if c.e.inhibited(&en.Alert) {
		return true
	}
	if c.silences.silenced(&en.Alert, c.now) {
		c.e.st.silenced.Add(1)
		return true
	}
	return false
}

// send queues a notification of en for delivery after the cycle. An
// alert without channels is only shown, never sent.
func (c *cycle) send(en *entry, kind apollo.NotificationKind) {
	if len(en.Channels) == 0 {
		return
	}
	// Owed under the rate lock that marked en (owedNotes).
	c.notes = append(c.notes, c.e.owed.add(apollo.Notification{
		Kind: kind, Alert: en.Alert, Channels: en.Channels, At: c.now,
		// The same for every engine evaluating the same rule, so that
		// the dedup lock lets only one of them send (invariant 6).
		DedupKey: en.Rule + ":" + string(kind) + ":" + en.Group,
	}, false))
}
