package alert

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
)

// Alerts returns the tenant's alerts in state ("" for every state):
// firing first, then pending, then resolved; newest first within each.
// Inactive alerts are not kept, so asking for them returns none.
func (e *Engine) Alerts(tenant string, state apollo.AlertState) []apollo.Alert {
	want := func(s apollo.AlertState) bool { return state == "" || state == s }
	out := e.rate.list(nil, tenant, want)
	if want(apollo.AlertFiring) {
		out = e.groups.list(out, tenant)
	}
	if want(apollo.AlertResolved) {
		out = e.resolved.list(out, tenant)
	}
	slices.SortFunc(out, func(a, b apollo.Alert) int {
		return cmp.Or(cmp.Compare(stateOrder(a.State), stateOrder(b.State)),
			b.StartedAt.Compare(a.StartedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

func stateOrder(s apollo.AlertState) int {
	switch s {
	case apollo.AlertFiring:
		return 0
	case apollo.AlertPending:
		return 1
	}
	return 2
}

// Ack records that by looks after the alert: repeats stop until it
// resolves. Acknowledging an acknowledged alert changes nothing. A
// resolved alert is a conflict; an unknown ID (or another tenant's) is
// not found. The ack is saved before Ack returns; when it cannot be, it
// is undone and the error says so.
func (e *Engine) Ack(ctx context.Context, tenant, id, by string) error {
	if by == "" {
		return &apollo.Error{Code: apollo.EINVALID, Field: "by", Message: "missing", Hint: "say who acknowledges"}
	}
	now := e.clock.Now()
	var (
		a       apollo.Alert
		changed bool
	)
	found := e.withOpenAlert(tenant, id, func(en *entry) {
		if en.AckedBy == "" {
			en.AckedBy, en.AckedAt = by, now
			changed = true
		}
		a = en.Alert
	})
	if !found {
		if e.resolved.has(tenant, id) {
			return &apollo.Error{Code: apollo.ECONFLICT, Field: "id", Message: fmt.Sprintf("alert %s is resolved", id),
				Hint: "there is nothing left to acknowledge"}
		}
		return &apollo.Error{Code: apollo.ENOTFOUND, Field: "id", Message: fmt.Sprintf("no alert %q", id),
			Hint: "list the alerts with GET /api/v1/alerts"}
	}
	if !changed {
		return nil
	}
	err := e.persistChange("acknowledgement", func() {
		e.withOpenAlert(tenant, id, func(en *entry) {
			if en.AckedBy == by && en.AckedAt.Equal(now) {
				en.AckedBy, en.AckedAt = "", time.Time{}
			}
		})
	})
	if err != nil {
		return err
	}
	e.log.Info("alert: acknowledged", "tenant", tenant, "id", id, "rule", a.Rule, "group", a.Group, "by", by)
	e.publish([]apollo.Alert{a})
	return nil
}

// withOpenAlert runs f on the tenant's pending or firing alert id, under
// the lock that guards it, and reports whether there was one.
func (e *Engine) withOpenAlert(tenant, id string, f func(*entry)) bool {
	return e.rate.withOpen(tenant, id, f) || e.groups.withOpen(tenant, id, f)
}
