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
	var out []apollo.Alert
	e.mu.Lock()
	if tr := e.rate[tenant]; tr != nil {
		for _, en := range tr.byID {
			if want(en.State) {
				out = append(out, en.Alert)
			}
		}
	}
	e.mu.Unlock()
	if want(apollo.AlertFiring) {
		e.emu.Lock()
		for k, en := range e.groups {
			if k.tenant == tenant {
				a := en.Alert
				a.TopNames = top(en.Names, topNames)
				out = append(out, a)
			}
		}
		e.emu.Unlock()
	}
	if want(apollo.AlertResolved) {
		e.hmu.Lock()
		out = append(out, e.hist[tenant]...)
		e.hmu.Unlock()
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
		e.hmu.Lock()
		resolved := slices.ContainsFunc(e.hist[tenant], func(a apollo.Alert) bool { return a.ID == id })
		e.hmu.Unlock()
		if resolved {
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
	e.mu.Lock()
	if tr := e.rate[tenant]; tr != nil {
		if en := tr.byID[id]; en != nil {
			f(en)
			e.mu.Unlock()
			return true
		}
	}
	e.mu.Unlock()
	e.emu.Lock()
	defer e.emu.Unlock()
	if en := e.groupIDs[id]; en != nil && en.Tenant == tenant {
		f(en)
		return true
	}
	return false
}

// remember keeps a resolved alert for the API.
func (e *Engine) remember(a apollo.Alert) {
	e.hmu.Lock()
	defer e.hmu.Unlock()
	list := append(e.hist[a.Tenant], a)
	if over := len(list) - e.opts.MaxResolved; over > 0 {
		list = slices.Delete(list, 0, over)
	}
	e.hist[a.Tenant] = list
}

// trimHistory forgets resolved alerts older than KeepResolved.
func (e *Engine) trimHistory(now time.Time) {
	e.hmu.Lock()
	defer e.hmu.Unlock()
	for tenant, list := range e.hist {
		i := slices.IndexFunc(list, func(a apollo.Alert) bool { return now.Sub(a.ResolvedAt) < e.opts.KeepResolved })
		switch {
		case i < 0:
			delete(e.hist, tenant)
			e.dirty.Store(true)
		case i > 0:
			e.hist[tenant] = slices.Delete(list, 0, i)
			e.dirty.Store(true)
		}
	}
}
