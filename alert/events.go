package alert

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/rules"
)

// Limits of one event group.
const (
	maxGroupNames = 1000 // distinct job names counted by name; the rest only in Count
	topNames      = 5    // names a follow-up lists
)

// eventOut is what a change to the groups produced, to hand on outside
// the lock.
type eventOut struct {
	notes   []handover
	changed []apollo.Alert
	opened  bool
}

// groupStep is one change to the event groups, made with groups.mu held;
// what it decided is in out, for emit once the lock is released.
type groupStep struct {
	e   *Engine
	g   *eventGroups
	now time.Time
	out eventOut
}

// Apply implements bus.Observer for event rules: a change that moves a
// task into a status an ON rule watches, for a job under the rule's
// prefix, counts in the rule's group. The first match of a group is
// queued for delivery at once; the rest fold into one follow-up at the
// end of each group window for as long as matches keep coming. Apply
// takes one short lock and never waits for I/O. A change that keeps the status (a missed start marks a pending
// task late) is not a new match.
func (e *Engine) Apply(c *apollo.Change) {
	st := c.Task.Status
	if st == c.Prev.Status {
		return
	}
	tenant := c.Task.Tenant
	if tenant == "" {
		tenant = c.Record.Tenant
	}
	rs := e.eventRulesFor(tenant, st)
	if len(rs) == 0 {
		return
	}
	name := c.Task.Name
	if name == "" {
		name = c.Record.JobName()
	}
	if !slices.ContainsFunc(rs, func(r *rules.Rule) bool { return r.Matches(name) }) {
		return
	}
	if e.heard.before(c.LSN) {
		return // replayed after a restart, and already in the restored groups
	}
	e.heard.add(c.LSN)
	e.matchAll(tenant, rs, &matchInfo{job: name, status: st, run: c.Task.TaskID, ts: c.Record.Ts})
}

// Occurrence is something job expectations found about a job, for the
// event rules that watch it (ON: missed, too_short, too_often, flapping).
type Occurrence struct {
	Tenant string
	Job    string
	Kind   rules.Occurrence
	Run    string    // the run it is about; "" for missed and flapping
	At     time.Time // the time it is about: the expected start for missed
	Detail string    // one line for people
}

// Occur counts o in the groups of the tenant's event rules that watch its
// kind and its job, as Apply does a run's status. A flapping occurrence
// is never held by the job's own flapping.
func (e *Engine) Occur(o Occurrence) { e.OccurAt(0, o) }

// OccurAt is Occur for an occurrence the bus recorded, lsn the LSN of its
// record (a mark of job expectations on the change feed): one the
// restored state had already counted is passed over, as Apply passes
// over a change (Restore).
func (e *Engine) OccurAt(lsn uint64, o Occurrence) {
	if int(o.Kind) >= occurrenceSlots {
		return
	}
	set := e.sets.get(o.Tenant)
	if set == nil || !slices.ContainsFunc(set.byOccurrence[o.Kind], func(r *rules.Rule) bool { return r.Matches(o.Job) }) {
		return
	}
	if e.heard.before(lsn) {
		return
	}
	e.heard.add(lsn)
	summary := o.Job + " " + o.Kind.String()
	if o.Detail != "" {
		summary += ": " + o.Detail
	}
	e.matchAll(o.Tenant, set.byOccurrence[o.Kind], &matchInfo{job: o.Job, run: o.Run, ts: o.At.UnixMilli(), summary: summary,
		own: o.Kind == rules.OccurrenceFlapping})
}

// matchAll counts m in the group of every rule of rs that watches its job,
// or, when the Holder or an inhibit rule holds it, in the group of what
// holds it.
func (e *Engine) matchAll(tenant string, rs []*rules.Rule, m *matchInfo) {
	if e.opts.Holder != nil {
		m.heldBy = e.opts.Holder.HeldBy(tenant, m.job)
		if m.own {
			m.heldBy = slices.DeleteFunc(m.heldBy, func(c string) bool { return c == m.job })
		}
	}
	var held []heldMatch
	if set := e.sets.get(tenant); set != nil && len(set.inhibitTargets) > 0 {
		held = e.inhibitedMatches(tenant, set, rs, m)
	}
	s := groupStep{e: e, g: e.groups, now: e.clock.Now()}
	s.g.mu.Lock()
	for _, r := range rs {
		if r.Matches(m.job) {
			mi := m
			for _, h := range held {
				if h.r == r {
					mi = h.m
				}
			}
			s.match(tenant, r, mi)
		}
	}
	s.g.mu.Unlock()
	e.emit(&s.out)
}

// matchInfo is one match: the job, and what the first message of a
// group says about it (built only when a group opens).
type matchInfo struct {
	job     string
	status  apollo.Status
	run     string
	ts      int64  // the event's own time; 0 for self-alerts
	summary string // set for self-alerts and occurrences
	// heldBy names the jobs whose trouble holds this match (Holder); own:
	// the job's own flapping does not hold it (it is the flapping).
	heldBy []string
	own    bool
}

func (m *matchInfo) text() string {
	if m.summary != "" {
		return m.summary
	}
	s := m.job + " " + m.status.String()
	if m.run != "" && m.run != m.job {
		s += " (run " + m.run + ")"
	}
	return s
}

// match counts one match in r's group, opening the group if none is open.
func (s *groupStep) match(tenant string, r *rules.Rule, m *matchInfo) {
	job := m.job
	k := groupKey{tenant, r.Name, strings.Join(m.heldBy, ", ")}
	en := s.g.open[k]
	if en != nil && !s.now.Before(en.GroupEnds) && !s.endWindow(k, en) {
		// Its window was over, the timer had not ended it yet, and it
		// was a quiet one: this match starts a new storm.
		en = nil
	}
	if en == nil {
		s.openGroup(k, r, m)
		return
	}
	en.Count++
	en.Value = float64(en.Count)
	if _, ok := en.Names[job]; ok || len(en.Names) < maxGroupNames {
		en.Names[job]++
	}
}

func (s *groupStep) openGroup(k groupKey, r *rules.Rule, m *matchInfo) {
	now := s.now
	summary := m.text()
	if k.heldBy != "" {
		summary += " (inhibited by " + k.heldBy + ")"
	}
	en := &entry{StoredAlert: StoredAlert{
		Alert: apollo.Alert{
			ID: newID(), Tenant: k.tenant, Rule: r.Name, Group: r.Prefix, State: apollo.AlertFiring,
			Severity: r.Severity, Labels: r.Labels, Summary: summary, Expr: onText(r), Value: 1,
			Channels: r.Notify, TopNames: []string{m.job}, Count: 1, StartedAt: now, FiredAt: now,
			InhibitedBy: slices.Clone(m.heldBy),
		},
		Event: true, GroupEnds: now.Add(r.GroupWindow), FirstTs: m.ts, Names: map[string]int64{m.job: 1}, Told: 1,
	}}
	if en.FirstTs == 0 {
		en.FirstTs = now.UnixMilli()
	}
	s.g.open[k], s.g.byID[en.ID] = en, en
	s.out.opened = true
	s.out.changed = append(s.out.changed, en.Alert)
	if s.e.inhibited(&en.Alert) || s.e.silencedNow(&en.Alert, now) {
		return
	}
	en.FiringSent, en.LastSentAt = true, now
	kind := apollo.NotifyFiring
	if isSelf(r.Name) {
		kind = apollo.NotifySelf
	}
	s.note(en, kind, "")
}

// endWindow ends the group window that ended by now. If matches came in
// it, one follow-up carries their count (Count) with the whole storm's
// (Value) and its top jobs, and the group stays open for another window:
// a storm that goes on is told once per window, never more. A window with
// no match ends the storm, and the group resolves without a message. It
// reports whether the group is still open.
func (s *groupStep) endWindow(k groupKey, en *entry) bool {
	now := s.now
	// The first match is always told (or held back by a silence); state
	// saved before Told existed has it 0.
	more := en.Count - max(en.Told, 1)
	if more <= 0 {
		s.resolveGroup(k, en)
		return false
	}
	en.Told = en.Count
	r := s.e.eventRule(k)
	if r != nil {
		en.follow(r)
	}
	if !s.e.inhibited(&en.Alert) && !s.e.silencedNow(&en.Alert, now) {
		note := en.Alert
		note.Count = more
		note.TopNames = top(en.Names, topNames)
		kind := apollo.NotifyStorm
		if isSelf(en.Rule) {
			kind = apollo.NotifySelf
		}
		// Each window's follow-up has its own key; engines agree on it, as
		// the window's end is the same distance from the group's start.
		tag := "storm" + strconv.FormatInt(en.GroupEnds.Sub(en.StartedAt).Milliseconds(), 10)
		tmp := entry{StoredAlert: StoredAlert{Alert: note, FirstTs: en.FirstTs}}
		s.note(&tmp, kind, tag)
	}
	var window time.Duration
	switch {
	case isSelf(k.rule):
		window = SelfGroupWindow
	case r != nil:
		window = r.GroupWindow
	}
	if window > 0 {
		en.GroupEnds = en.GroupEnds.Add(window)
	}
	if window <= 0 || !now.Before(en.GroupEnds) {
		// The rule is gone, or the next window passed too (the engine
		// was stopped), without a match.
		s.resolveGroup(k, en)
		return false
	}
	en.TopNames = top(en.Names, topNames)
	s.out.changed = append(s.out.changed, en.Alert)
	return true
}

// resolveGroup ends a group's storm: its alert resolves, with no message
// of its own.
func (s *groupStep) resolveGroup(k groupKey, en *entry) {
	delete(s.g.open, k)
	delete(s.g.byID, en.ID)
	en.State, en.ResolvedAt = apollo.AlertResolved, s.now
	en.TopNames = top(en.Names, topNames)
	s.out.changed = append(s.out.changed, en.Alert)
	s.e.resolved.remember(en.Alert)
}

// eventRule is the tenant's event rule of a group now; nil if the rule
// is gone, or no longer an event rule.
func (e *Engine) eventRule(k groupKey) *rules.Rule {
	if set := e.sets.get(k.tenant); set != nil {
		return set.eventRule(k.rule)
	}
	return nil
}

// note owes the notification of an event group, under the groups' lock
// that marked the group (owedNotes), and hands it to emit.
func (s *groupStep) note(en *entry, kind apollo.NotificationKind, tag string) {
	for _, n := range appendNote(nil, en, kind, tag, s.now) {
		s.out.notes = append(s.out.notes, s.e.owed.add(n, false))
	}
}

// appendNote adds a notification of an event group. The key carries the
// first match's own timestamp, which every engine that saw the same
// events agrees on, so the dedup lock lets one of them send.
func appendNote(ns []apollo.Notification, en *entry, kind apollo.NotificationKind, tag string, now time.Time) []apollo.Notification {
	if len(en.Channels) == 0 {
		return ns
	}
	if tag == "" {
		tag = string(kind)
	}
	first := en.FirstTs
	if strings.HasPrefix(en.Rule, selfPrefix) {
		// A self-alert has no event time that every engine agrees on (each
		// sees the outage by its own clock): the dedup window alone keeps
		// it to one message.
		first = 0
	}
	return append(ns, apollo.Notification{
		Kind: kind, Alert: en.Alert, Channels: en.Channels, At: now,
		DedupKey: en.Rule + ":" + tag + ":" + strconv.FormatInt(first, 10) + ":" + en.Group,
	})
}

// inhibited reports whether a's notifications are held as the echo of
// another job's trouble, and counts it.
func (e *Engine) inhibited(a *apollo.Alert) bool {
	if len(a.InhibitedBy) > 0 {
		e.st.inhibited.Add(1)
		return true
	}
	return false
}

func (e *Engine) silencedNow(a *apollo.Alert, now time.Time) bool {
	if e.silences.current().silenced(a, now) {
		e.st.silenced.Add(1)
		return true
	}
	return false
}

// emit queues the notifications without waiting (a full queue drops
// them, visibly), wakes the group timer and tells subscribers. The state
// is marked changed first: the deliverer may send a message and ask for
// the save that puts its group on record before emit returns, and a save
// that found nothing changed would leave the group unsaved until the next
// evaluation.
func (e *Engine) emit(out *eventOut) {
	if len(out.changed) > 0 {
		e.dirty.Store(true)
	}
	for _, h := range out.notes {
		n := h.n
		select {
		case e.queue <- h:
		default:
			e.settle(h.id)
			e.st.dropped.Add(1)
			if ok, sup := e.warns.Allow("queue", e.clock.Now()); ok {
				e.log.Error("alert: event notification dropped: the delivery queue is full",
					"rule", n.Alert.Rule, "tenant", n.Alert.Tenant, "queueLen", e.opts.QueueLen, "suppressed", sup)
			}
		}
	}
	if out.opened {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	if len(out.changed) > 0 {
		e.publish(out.changed)
	}
}

// runEvents delivers queued event notifications and ends group windows
// when they are over. On stop it delivers what is still queued. Once the
// queue is empty it asks runSaves to save what changed: a storm's open
// group, with its first message marked sent, is then on record within
// moments of the message instead of at the next evaluation, so a process
// killed mid-storm carries the storm on after its restart rather than
// telling it again as a new one.
func (e *Engine) runEvents(ctx context.Context) {
	timer := e.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	rearm := true
	// What the process before owed first: it was decided before anything
	// this one decides.
	e.deliver(e.carried)
	e.carried = nil
	for {
		if rearm {
			e.armGroupTimer(timer)
			rearm = false
		}
		select {
		case h := <-e.queue:
			e.deliver([]handover{h})
			if len(e.queue) == 0 {
				select {
				case e.saveReq <- struct{}{}:
				default: // a save is asked for already; it takes this change too
				}
			}
		case <-e.wake:
			rearm = true
		case <-timer.C():
			e.endDue(e.clock.Now())
			rearm = true
		case <-ctx.Done():
			e.drainQueue()
			return
		}
	}
}

// runSaves saves what changed whenever runEvents asks: on a goroutine of
// its own, so that the next message is never held behind a save (an
// fsync, or a Redis that is away for go-redis's timeouts).
func (e *Engine) runSaves(ctx context.Context) {
	for {
		select {
		case <-e.saveReq:
			e.save(ctx)
		case <-ctx.Done():
			return // Stop saves once more
		}
	}
}

func (e *Engine) drainQueue() {
	for {
		select {
		case h := <-e.queue:
			e.deliver([]handover{h})
		default:
			return
		}
	}
}

// armGroupTimer sets timer to the earliest end of an open group, or stops
// it when none is open.
func (e *Engine) armGroupTimer(timer apollo.Timer) {
	next := e.groups.nextEnd()
	if next.IsZero() {
		timer.Stop()
		return
	}
	timer.Reset(max(next.Sub(e.clock.Now()), 0))
}

// endDue ends every group window that ended by now.
func (e *Engine) endDue(now time.Time) {
	s := groupStep{e: e, g: e.groups, now: now}
	s.g.mu.Lock()
	for k, en := range s.g.open {
		if !now.Before(en.GroupEnds) {
			s.endWindow(k, en)
		}
	}
	s.g.mu.Unlock()
	e.emit(&s.out)
}

// top returns up to n names with the highest counts, ties by name.
func top(counts map[string]int64, n int) []string {
	names := slices.Collect(maps.Keys(counts))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
	return names[:min(n, len(names))]
}

// onText is an event rule's condition as alerts show it: its statuses,
// then its occurrences.
func onText(r *rules.Rule) string {
	if len(r.On)+len(r.Occurrences) == 0 {
		return ""
	}
	names := make([]string, 0, len(r.On)+len(r.Occurrences))
	for _, s := range r.On {
		names = append(names, s.String())
	}
	for _, o := range r.Occurrences {
		names = append(names, o.String())
	}
	return "on " + strings.Join(names, ", ")
}

// selfPrefix starts the rule names of self-alerts; user rule names cannot
// hold a colon, so the two never meet.
const selfPrefix = "apollo:"

func isSelf(rule string) bool { return strings.HasPrefix(rule, selfPrefix) }

// SelfAlert raises an alert about Apollo-11 itself (events refused
// because the holding area is full, a component down) in the default
// tenant, to Options.SelfChannels. Calls with the same name within
// SelfGroupWindow fold like an event rule's matches: the first is sent at
// once, the rest in one follow-up with their count. It is as cheap as
// Apply, so the bus may call it for every refused event.
func (e *Engine) SelfAlert(name string, sev apollo.Severity, summary string) {
	s := groupStep{e: e, g: e.groups, now: e.clock.Now()}
	s.g.mu.Lock()
	sr := s.g.self[name]
	if sr == nil || sr.rule.Severity != sev {
		sr = &selfRuleEntry{rule: &rules.Rule{Name: selfPrefix + name, Prefix: "apollo", Severity: cmp.Or(sev, apollo.SeverityCritical),
			Notify: e.opts.SelfChannels, GroupWindow: SelfGroupWindow}}
		s.g.self[name] = sr
	}
	s.match("", sr.rule, &matchInfo{job: name, summary: cmp.Or(summary, name)})
	s.g.mu.Unlock()
	e.emit(&s.out)
}
