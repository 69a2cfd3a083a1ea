package bus

import (
	"context"
	"fmt"

	"github.com/apollo-11/apollo"
)

// Correct sets a task's status whatever the transition table says: a
// manual, audited correction by an operator. It returns the task after the
// change, once the correction is durable.
func (b *Bus) Correct(ctx context.Context, tenant, taskID string, to apollo.Status, actor, reason string) (*apollo.Task, error) {
	if !to.Valid() {
		return nil, &apollo.Error{Code: apollo.EINVALID, Field: "status", Message: "missing or unknown status", Hint: "use one of pending, running, success, failed, timeout, manual_blocked"}
	}
	if err := apollo.CheckReason(reason); err != nil {
		return nil, err
	}
	k := key{tenant: tenant, id: taskID}
	b.pause.RLock()
	if b.closed.Load() {
		b.pause.RUnlock()
		return nil, ErrClosed
	}
	s, h := b.locate(k)
	s.mu.Lock()
	t := s.get(h, k)
	if t == nil {
		s.mu.Unlock()
		b.pause.RUnlock()
		return nil, &apollo.Error{Code: apollo.ENOTFOUND, Field: "taskID", Message: fmt.Sprintf("no task %q in memory", taskID),
			Hint: "corrections apply to tasks still in memory (finished less than the retention ago)"}
	}
	now := b.nowMs()
	err := b.endWaits(s, k, t, now)
	r := apollo.Record{
		Event: apollo.Event{TaskID: taskID, Name: t.name, Tenant: tenant, Sequence: t.seq, Status: to, Ts: now},
		Kind:  apollo.KindCorrection, ReceivedAt: now, Actor: actor, Reason: reason,
	}
	var lsn uint64
	if err == nil && b.opts.Log != nil {
		lsn, err = b.append(&r, nil)
	}
	if err == nil {
		s.lsn = lsn
		b.applyLocked(s, k, t, &r, nil)
		b.unpark(s, k, t) // as replay does after every record
		b.stats.corrections.Add(1)
	}
	view := t.view(k)
	s.mu.Unlock()
	b.pause.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("bus: correcting %s: %w", taskID, err)
	}
	if lsn > 0 {
		if err := b.opts.Log.Wait(ctx, lsn); err != nil {
			return nil, fmt.Errorf("bus: correcting %s: %w", taskID, err)
		}
	}
	return &view, nil
}
