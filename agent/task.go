package agent

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
)

// Task reports the lifecycle of one run. It numbers the run's events 1, 2,
// 3, … and refuses, at the call, a step the server would reject as an
// illegal transition (docs/protocol.md). A run may be reported by its end
// alone (Succeed, Fail or Timeout as the first call): the server records a
// finished run whose start is unknown. It is safe for concurrent use;
// concurrent calls are numbered in the order they take the handle's lock.
type Task struct {
	c        *Client
	id, name string

	mu     sync.Mutex
	seq    int64
	status apollo.Status
}

// Task returns a handle for the run taskID of the job name (empty name: the
// server uses taskID). A retry of a job is a new run with a new taskID.
// Use one handle per run: two handles would reuse sequence numbers.
func (c *Client) Task(taskID, name string) *Task {
	return &Task{c: c, id: taskID, name: name}
}

// EventOption sets an optional field of a reported event.
type EventOption func(*apollo.Event) error

// ScheduledAt says when the run was due; the server uses it to detect late
// starts. A zero time (a run with no schedule) leaves it out.
func ScheduledAt(t time.Time) EventOption {
	return func(e *apollo.Event) error { e.ScheduledAt = unixMilli(t); return nil }
}

// unixMilli is t in Unix milliseconds, or 0, the field left out, for the
// zero time: sent, it would be year 1, and the event refused.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// TimeoutAfter sets the run's deadline, counted from this event; past it
// the server marks the run timeout. It is rounded up to whole
// milliseconds, as the ping URLs' ?timeout= is: cut down, a deadline
// under a millisecond became 0, no deadline at all.
func TimeoutAfter(d time.Duration) EventOption {
	return func(e *apollo.Event) error {
		e.TimeoutMs = d.Milliseconds()
		if d > 0 && d%time.Millisecond != 0 {
			e.TimeoutMs++
		}
		return nil
	}
}

// Cost reports how long the run took; without it the server derives it
// from the running event.
func Cost(d time.Duration) EventOption {
	return func(e *apollo.Event) error { e.CostMs = d.Milliseconds(); return nil }
}

// At sets when the event happened (default, and for a zero time: the
// client's clock, now).
func At(t time.Time) EventOption {
	return func(e *apollo.Event) error { e.Ts = unixMilli(t); return nil }
}

// Extra attaches free-form data shown with the run (exit code, host, log
// tail). It must encode to at most 4 KiB of JSON.
func Extra(v map[string]any) EventOption {
	return func(e *apollo.Event) error {
		b, err := json.Marshal(v)
		if err != nil {
			return &apollo.Error{Code: apollo.EINVALID, Field: "extra", Message: err.Error(),
				Hint: "use values that encoding/json can encode"}
		}
		if len(b) > apollo.MaxExtraBytes {
			return &apollo.Error{Code: apollo.EINVALID, Field: "extra",
				Message: fmt.Sprintf("%d bytes of JSON, over the limit of %d", len(b), apollo.MaxExtraBytes),
				Hint:    "keep large output elsewhere and link to it"}
		}
		e.Extra = b
		return nil
	}
}

// Pending reports that the run is scheduled and waiting to start.
func (t *Task) Pending(opts ...EventOption) error { return t.report(apollo.StatusPending, opts) }

// Running reports that the run started.
func (t *Task) Running(opts ...EventOption) error { return t.report(apollo.StatusRunning, opts) }

// Succeed reports that the run finished successfully.
func (t *Task) Succeed(opts ...EventOption) error { return t.report(apollo.StatusSuccess, opts) }

// Fail reports that the run failed.
func (t *Task) Fail(opts ...EventOption) error { return t.report(apollo.StatusFailed, opts) }

// Timeout reports that the run exceeded its deadline.
func (t *Task) Timeout(opts ...EventOption) error { return t.report(apollo.StatusTimeout, opts) }

// Block reports that the run waits for a person (manual_blocked); Pending
// releases it.
func (t *Task) Block(opts ...EventOption) error { return t.report(apollo.StatusManualBlocked, opts) }

func (t *Task) report(status apollo.Status, opts []EventOption) error {
	var ev apollo.Event
	if len(opts) > 0 {
		var err error
		if ev, err = applyOptions(opts); err != nil {
			return err
		}
	}
	ev.TaskID, ev.Name, ev.Status = t.id, t.name, status
	if ev.Ts == 0 {
		ev.Ts = t.c.cfg.clock.Now().UnixMilli()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !apollo.CanTransition(t.status, status) {
		return &apollo.Error{Code: apollo.ECONFLICT, Field: "status",
			Message: fmt.Sprintf("task %q is %s; it cannot become %s", t.id, t.status, status),
			Hint:    "a run moves pending -> running -> success|failed|timeout; success, failed and timeout end it"}
	}
	ev.Sequence = t.seq + 1
	if err := t.c.Send(ev); err != nil {
		return err
	}
	t.seq, t.status = ev.Sequence, status
	return nil
}

// applyOptions builds the optional fields on an Event of its own: handing
// report's Event to option funcs would move it to the heap on every call,
// options or not.
func applyOptions(opts []EventOption) (apollo.Event, error) {
	ev := new(apollo.Event)
	for _, o := range opts {
		if err := o(ev); err != nil {
			return apollo.Event{}, err
		}
	}
	return *ev, nil
}
