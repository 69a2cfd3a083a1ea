package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/apollo-11/apollo"
)

// The bus's side of job expectations (docs/expectations.md): what the
// evaluator finds becomes records in the tasks' histories, logged like the
// bus's own timeouts, so that metrics, rules and the job's runs show it and
// a restart replays it.

// MissedRunID is the task ID of the missed run of job expected at slot:
// the same for the same slot, so that recording it twice (a restart that
// judges the slot again) records it once.
func MissedRunID(job string, slot time.Time) string {
	id := "missed:" + job + "@" + strconv.FormatInt(slot.Unix(), 10)
	if len(id) > apollo.MaxTaskIDBytes {
		sum := sha256.Sum256([]byte(job))
		id = "missed:" + hex.EncodeToString(sum[:12]) + "@" + strconv.FormatInt(slot.Unix(), 10)
	}
	return id
}

// RecordMissed records that the run of job expected at slot did not
// start: a pending run (MissedRunID) scheduled at slot, marked as a missed
// start, in the job's history and metrics (missed). It returns the run's
// ID once the record is durable; a slot recorded before is not recorded
// again.
func (b *Bus) RecordMissed(ctx context.Context, tenant, job string, slot time.Time) (string, error) {
	id := MissedRunID(job, slot)
	ms := slot.UnixMilli()
	evs := []apollo.Event{{TaskID: id, Tenant: tenant, Name: job, Sequence: 1, Status: apollo.StatusPending, Ts: ms, ScheduledAt: ms}}
	out := make([]Outcome, 1)
	if err := b.Publish(ctx, evs, out); err != nil {
		return "", err
	}
	switch out[0].Result {
	case Accepted, Duplicate:
	default:
		if out[0].Err != nil {
			return "", fmt.Errorf("bus: recording the missed run of %s: %w", job, out[0].Err)
		}
		return "", fmt.Errorf("bus: recording the missed run of %s: %s", job, out[0].Result)
	}
	now := b.nowMs()
	b.commitOwn(key{tenant: tenant, id: id},
		func(t *task) bool { return t.status == apollo.StatusPending && !t.late },
		func(t *task) apollo.Record {
			b.stats.missedStarts.Add(1)
			return apollo.Record{
				Event: apollo.Event{TaskID: id, Tenant: tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusPending, Ts: now},
				Kind:  apollo.KindMissedStart, ReceivedAt: now,
			}
		})
	return id, nil
}

// TimeOut ends a running run as timeout, as its own deadline would: what
// a job's max_runtime does. It reports whether the run was running (and
// is now timed out).
func (b *Bus) TimeOut(tenant, taskID string) bool {
	done := false
	b.commitOwn(key{tenant: tenant, id: taskID},
		func(t *task) bool { return t.status == apollo.StatusRunning },
		func(t *task) apollo.Record {
			b.stats.timeouts.Add(1)
			done = true
			now := b.nowMs()
			return apollo.Record{
				Event: apollo.Event{TaskID: taskID, Tenant: tenant, Name: t.name, Sequence: t.seq, Status: apollo.StatusTimeout, Ts: now},
				Kind:  apollo.KindTimeout, ReceivedAt: now,
			}
		})
	return done
}
