package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
)

// The bus's side of job expectations (docs/expectations.md): what the
// evaluator finds becomes records in the tasks' histories, logged like the
// bus's own timeouts, so that metrics, rules and the job's runs show it and
// a restart replays it.

// MissedPrefix begins the task ID of every missed run; Publish refuses it
// from reporters.
const MissedPrefix = "missed:"

// MissedRunID is the task ID of the missed run of job expected at slot:
// the same for the same slot, so that recording it twice (a restart that
// judges the slot again) records it once.
func MissedRunID(job string, slot time.Time) string {
	id := MissedPrefix + job + "@" + strconv.FormatInt(slot.Unix(), 10)
	if len(id) > apollo.MaxTaskIDBytes {
		sum := sha256.Sum256([]byte(job))
		id = MissedPrefix + hex.EncodeToString(sum[:12]) + "@" + strconv.FormatInt(slot.Unix(), 10)
	}
	return id
}

// MissedSlot is the slot of a missed run's task ID (MissedRunID); false
// for any other ID.
func MissedSlot(taskID string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(taskID, MissedPrefix)
	i := strings.LastIndexByte(rest, '@')
	if !ok || i < 0 {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, 0), true
}

// Missed is one expected run that did not start: of Job, in Tenant,
// expected at Slot.
type Missed struct {
	Tenant, Job string
	Slot        time.Time
	Detail      string // why, for people: the missed-start record's reason
}

// RecordMissed records that each run in ms did not start: a pending run
// (MissedRunID) scheduled at its slot, marked as a missed start, in the
// job's history and metrics (missed). The runs are published together,
// so that one fsync covers them all; it returns once they are durable. A
// slot recorded before is not recorded again: fresh[i] says whether ms[i]
// was recorded by this call. A slot recorded before but not yet marked (a
// crash between the two records) is marked now, and not fresh.
func (b *Bus) RecordMissed(ctx context.Context, ms []Missed) (fresh []bool, err error) {
	evs := make([]apollo.Event, len(ms))
	for i, m := range ms {
		at := m.Slot.UnixMilli()
		evs[i] = apollo.Event{TaskID: MissedRunID(m.Job, m.Slot), Tenant: m.Tenant, Name: m.Job, Sequence: 1, Status: apollo.StatusPending, Ts: at, ScheduledAt: at}
	}
	out := make([]Outcome, len(evs))
	if err := b.publish(ctx, evs, out, true); err != nil {
		return nil, err
	}
	var errs []error
	fresh = make([]bool, len(ms))
	now := b.nowMs()
	for i, o := range out {
		switch o.Result {
		case Accepted:
			fresh[i] = true
		case Duplicate: // recorded before; the mark below is taken once
		default:
			errs = append(errs, fmt.Errorf("bus: recording the missed run of %s: %s: %w", ms[i].Job, o.Result, o.Err))
			continue
		}
		ev := &evs[i]
		if b.commitOwn(key{tenant: ev.Tenant, id: ev.TaskID},
			func(t *task) bool { return t.status == apollo.StatusPending && !t.late },
			func(t *task) apollo.Record {
				return apollo.Record{
					Event: apollo.Event{TaskID: ev.TaskID, Tenant: ev.Tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusPending, Ts: now},
					Kind:  apollo.KindMissedStart, ReceivedAt: now, Reason: ms[i].Detail,
				}
			}) {
			b.stats.missedStarts.Add(1)
		}
	}
	return fresh, errors.Join(errs...)
}

// Mark records a finding of job expectations on a run, without changing
// it: a record of kind (apollo.KindTooShort, KindTooOften, KindFlapping) with
// reason in the run's history, logged like the bus's own timeouts, so
// that the run shows it, a restart replays it and the observers (the
// change feed of the three-process mode) hear of it. It reports whether
// the run was there to mark and the mark was logged.
func (b *Bus) Mark(tenant, taskID string, kind apollo.Kind, reason string) bool {
	if kind != apollo.KindTooShort && kind != apollo.KindTooOften && kind != apollo.KindFlapping {
		panic("bus: Mark takes too_short, too_often or flapping, not " + kind.String())
	}
	return b.commitOwn(key{tenant: tenant, id: taskID},
		func(*task) bool { return true },
		func(t *task) apollo.Record {
			now := b.nowMs()
			return apollo.Record{
				Event: apollo.Event{TaskID: taskID, Tenant: tenant, Name: t.name, Sequence: t.seq, Status: t.status, Ts: now},
				Kind:  kind, ReceivedAt: now, Reason: reason,
			}
		})
}

// LogFailed reports whether the log has failed: from then on the bus
// refuses every event, and every record of its own (TimeOut, Mark,
// RecordMissed), until the process restarts and recovers. A caller whose
// record was refused keeps what it was for, for the next start.
func (b *Bus) LogFailed() bool { return b.logFailed.Load() != nil }

// TimeOut ends a running run as timeout, as its own deadline would: what
// a job's max_runtime does. It reports whether the run was running and
// its timeout was logged.
func (b *Bus) TimeOut(tenant, taskID string) bool {
	if !b.commitOwn(key{tenant: tenant, id: taskID},
		func(t *task) bool { return t.status == apollo.StatusRunning },
		func(t *task) apollo.Record {
			now := b.nowMs()
			return apollo.Record{
				Event: apollo.Event{TaskID: taskID, Tenant: tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusTimeout, Ts: now},
				Kind:  apollo.KindTimeout, ReceivedAt: now,
			}
		}) {
		return false
	}
	b.stats.timeouts.Add(1)
	return true
}
