package alert

import (
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// eventGroups is the open groups of the event rules and of the
// self-alerts, with the built-in rule behind each self-alert name. Apply,
// the group timer and SelfAlert each change it in one short hold of the
// lock (a groupStep, events.go) that never waits for I/O.
type eventGroups struct {
	mu   sync.Mutex
	open map[groupKey]*entry
	byID map[string]*entry
	self map[string]*selfRuleEntry // SelfAlert name -> its rule
}

// groupKey names an event rule's group: all its matches in one tenant,
// and apart from them the matches held by the same causes (heldBy, the
// causes' names joined), which are shown and never notified.
type groupKey struct{ tenant, rule, heldBy string }

// selfRuleEntry is the built-in event rule behind one SelfAlert name.
type selfRuleEntry struct{ rule *rules.Rule }

func newEventGroups() *eventGroups {
	return &eventGroups{open: map[groupKey]*entry{}, byID: map[string]*entry{}, self: map[string]*selfRuleEntry{}}
}

// load puts a saved group back, unless its rule has one open already.
func (g *eventGroups) load(a StoredAlert) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := groupKey{a.Tenant, a.Rule, strings.Join(a.InhibitedBy, ", ")}
	if g.open[k] == nil {
		en := &entry{StoredAlert: a}
		if en.Names == nil {
			en.Names = map[string]int64{}
		}
		g.open[k], g.byID[a.ID] = en, en
	}
}

// follow puts what set's event rules say now on their open groups: an
// event rule edited under its name takes its storm along, as a rate rule
// takes its alerts (cycle.step).
func (g *eventGroups) follow(set *ruleSet) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, en := range g.open {
		if k.tenant != set.tenant {
			continue
		}
		if r := set.eventRule(k.rule); r != nil {
			en.follow(r)
		}
	}
}

// follow puts what r says now on its alert: severity, labels and
// channels. A rule edited under the same name takes its alerts along; the
// next message goes where the rule says, saying what it says.
func (en *entry) follow(r *rules.Rule) {
	en.Severity, en.Labels, en.Channels = r.Severity, r.Labels, r.Notify
}

// appendStored appends a copy of every open group, for a snapshot.
func (g *eventGroups) appendStored(out []StoredAlert) []StoredAlert {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, en := range g.open {
		a := en.StoredAlert
		a.Names = maps.Clone(en.Names)
		out = append(out, a)
	}
	return out
}

// count is how many groups are open (each is a firing alert).
func (g *eventGroups) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

// list appends the tenant's open groups as alerts, with their top names.
func (g *eventGroups) list(out []apollo.Alert, tenant string) []apollo.Alert {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, en := range g.open {
		if k.tenant == tenant {
			a := en.Alert
			a.TopNames = top(en.Names, topNames)
			out = append(out, a)
		}
	}
	return out
}

// withOpen runs f on the tenant's open group id under the lock, and
// reports whether there was one.
func (g *eventGroups) withOpen(tenant, id string, f func(*entry)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if en := g.byID[id]; en != nil && en.Tenant == tenant {
		f(en)
		return true
	}
	return false
}

// nextEnd is the earliest end of an open group's window; zero when none
// is open.
func (g *eventGroups) nextEnd() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next time.Time
	for _, en := range g.open {
		if next.IsZero() || en.GroupEnds.Before(next) {
			next = en.GroupEnds
		}
	}
	return next
}
