package apollo

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Limits on reported events. They bound the memory one event can take.
const (
	MaxExtraBytes  = 4 << 10 // extra: at most 4 KiB of JSON
	MaxTaskIDBytes = 256
	MaxNameBytes   = 256
)

// Event is one lifecycle report for one task, as executors send it
// (docs/protocol.md). Field names and meaning follow DESIGN.md §4.
//
// Tenant is never read from a request body: the server sets it from the
// credentials that carried the event.
type Event struct {
	TaskID      string          `json:"taskID"`
	Name        string          `json:"name,omitempty"`
	Sequence    int64           `json:"sequence"`
	Status      Status          `json:"status"`
	Ts          int64           `json:"ts"`
	ScheduledAt int64           `json:"scheduledAt,omitempty"`
	TimeoutMs   int64           `json:"timeoutMs,omitempty"`
	CostMs      int64           `json:"costMs,omitempty"`
	Extra       json.RawMessage `json:"extra,omitempty"`

	Tenant string `json:"-"`
}

// JobName is the name that rules and metrics group by: Name, or TaskID when
// the executor sent no name.
func (e *Event) JobName() string {
	if e.Name != "" {
		return e.Name
	}
	return e.TaskID
}

// Validate checks the fields a server must refuse to store. It reports the
// first problem found, naming the field and what to send instead. It does
// not look at the transition: that needs the task's current state.
func (e *Event) Validate() error {
	switch {
	case e.TaskID == "":
		return &Error{Code: EINVALID, Field: "taskID", Message: "missing", Hint: "every event names its run with a non-empty taskID"}
	case len(e.TaskID) > MaxTaskIDBytes:
		return &Error{Code: EINVALID, Field: "taskID", Message: fmt.Sprintf("%d bytes, over the limit of %d", len(e.TaskID), MaxTaskIDBytes)}
	case !utf8.ValidString(e.TaskID):
		return &Error{Code: EINVALID, Field: "taskID", Message: "not valid UTF-8"}
	case len(e.Name) > MaxNameBytes:
		return &Error{Code: EINVALID, Field: "name", Message: fmt.Sprintf("%d bytes, over the limit of %d", len(e.Name), MaxNameBytes)}
	case !utf8.ValidString(e.Name):
		return &Error{Code: EINVALID, Field: "name", Message: "not valid UTF-8"}
	case e.Sequence < 1:
		return &Error{Code: EINVALID, Field: "sequence", Message: fmt.Sprintf("%d is below 1", e.Sequence), Hint: "number each task's events 1, 2, 3, ..."}
	case !e.Status.Valid():
		return &Error{Code: EINVALID, Field: "status", Message: "missing or unknown", Hint: "use one of pending, running, success, failed, timeout, manual_blocked"}
	case e.Ts <= 0:
		return &Error{Code: EINVALID, Field: "ts", Message: "missing", Hint: "send the time of the event in Unix milliseconds"}
	case e.ScheduledAt < 0:
		return &Error{Code: EINVALID, Field: "scheduledAt", Message: "negative"}
	case e.TimeoutMs < 0:
		return &Error{Code: EINVALID, Field: "timeoutMs", Message: "negative"}
	case e.CostMs < 0:
		return &Error{Code: EINVALID, Field: "costMs", Message: "negative"}
	case len(e.Extra) > MaxExtraBytes:
		return &Error{Code: EINVALID, Field: "extra", Message: fmt.Sprintf("%d bytes, over the limit of %d", len(e.Extra), MaxExtraBytes), Hint: "keep large output elsewhere and link to it"}
	}
	return nil
}

// Kind says who produced a record in a task's history.
type Kind uint8

const (
	// KindReport is an event an executor reported.
	KindReport Kind = iota
	// KindCorrection is a manual, audited status change by an operator; it
	// bypasses the transition table.
	KindCorrection
	// KindTimeout is written by the bus when a running task passes its
	// deadline: the task becomes timeout.
	KindTimeout
	// KindMissedStart is written by the bus when a pending task was not
	// started within its grace period: the task is marked late, its status
	// does not change.
	KindMissedStart
	// KindGap is an executor's event that waited for earlier ones which
	// never arrived within the reorder window: the bus applies it when the
	// window ends, and Reason says how many are missing.
	KindGap

	numKind
)

var kindNames = [numKind]string{"report", "correction", "timeout", "missed_start", "gap"}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k < numKind }

// Reported reports whether a record of kind k carries what an executor
// reported (its sequence, times and cost), rather than a status set by an
// operator or the bus.
func (k Kind) Reported() bool { return k == KindReport || k == KindGap }

func (k Kind) String() string {
	if k < numKind {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("apollo: unknown record kind %q", b)
}

// Record is one entry of a task's history and of the log: the event plus
// what the server knows about it. Records that the bus or an operator wrote
// keep the sequence of the last report, so they never use up an executor's
// sequence numbers.
type Record struct {
	Event
	Kind Kind `json:"kind"`
	// ReceivedAt is when the server accepted it, Unix milliseconds.
	ReceivedAt int64 `json:"receivedAt"`
	// Actor is set on corrections; Reason on corrections (the operator's
	// words) and on gaps (how many earlier events never arrived).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}
