package apollo

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Limits on reported events. They bound the memory one event can take.
const (
	MaxExtraBytes  = 4 << 10 // extra: at most 4 KiB of JSON
	MaxTaskIDBytes = 256
	MaxNameBytes   = 256
	// MaxReasonBytes bounds the reason of a manual correction, which is
	// kept in the task's history and the write-ahead log.
	MaxReasonBytes = 1 << 10
	// MaxEventBytes bounds the compact JSON of an event the server
	// accepts: a task ID and a job name of control characters, six bytes
	// each escaped, extra at its limit, and 256 bytes for the keys and the
	// longest integers. A request body limit below it would refuse a valid
	// event as a whole request.
	MaxEventBytes = 6*MaxTaskIDBytes + 6*MaxNameBytes + MaxExtraBytes + 256
)

// Ranges of the integer fields (docs/protocol.md). Every value inside them
// can be stored, snapshotted, restored and added to another without
// overflow, and a time sent in seconds, microseconds or nanoseconds instead
// of milliseconds falls outside them.
const (
	// MinTs and MaxTs bound ts and scheduledAt: 2000-01-01 and 2200-01-01
	// UTC in Unix milliseconds. In seconds every date until the year 31 000
	// is below MinTs; in microseconds every date after March 1970 is above
	// MaxTs.
	MinTs = 946_684_800_000
	MaxTs = 7_258_118_400_000
	// MaxDurationMs bounds timeoutMs and costMs: 366 days.
	MaxDurationMs = 366 * 24 * 60 * 60 * 1000
	// MaxSequence is the largest integer JavaScript (the dashboard, many
	// JSON libraries) holds exactly: 2^53 - 1.
	MaxSequence = 1<<53 - 1
)

// Event is one lifecycle report for one task, as executors send it
// (docs/protocol.md, "The event", describes every field).
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
	case dotSegment(e.TaskID):
		return dotRefusal("taskID", e.TaskID)
	case len(e.Name) > MaxNameBytes:
		return &Error{Code: EINVALID, Field: "name", Message: fmt.Sprintf("%d bytes, over the limit of %d", len(e.Name), MaxNameBytes)}
	case !utf8.ValidString(e.Name):
		return &Error{Code: EINVALID, Field: "name", Message: "not valid UTF-8"}
	case dotSegment(e.Name):
		return dotRefusal("name", e.Name)
	case e.Sequence < 1:
		return &Error{Code: EINVALID, Field: "sequence", Message: fmt.Sprintf("%d is below 1", e.Sequence), Hint: "number each task's events 1, 2, 3, ..."}
	case e.Sequence > MaxSequence:
		return &Error{Code: EINVALID, Field: "sequence", Message: fmt.Sprintf("%d is over the limit of %d (2^53-1)", e.Sequence, int64(MaxSequence)), Hint: "number each task's events 1, 2, 3, ..."}
	case !e.Status.Valid():
		return &Error{Code: EINVALID, Field: "status", Message: "missing or unknown", Hint: "use one of pending, running, success, failed, timeout, manual_blocked"}
	case e.Ts == 0:
		return &Error{Code: EINVALID, Field: "ts", Message: "missing", Hint: "send the time of the event in Unix milliseconds"}
	}
	if err := checkTime("ts", e.Ts); err != nil {
		return err
	}
	if e.ScheduledAt != 0 {
		if err := checkTime("scheduledAt", e.ScheduledAt); err != nil {
			return err
		}
	}
	if err := checkDuration("timeoutMs", e.TimeoutMs); err != nil {
		return err
	}
	if err := checkDuration("costMs", e.CostMs); err != nil {
		return err
	}
	if len(e.Extra) > MaxExtraBytes {
		return &Error{Code: EINVALID, Field: "extra", Message: fmt.Sprintf("%d bytes, over the limit of %d", len(e.Extra), MaxExtraBytes), Hint: "keep large output elsewhere and link to it"}
	}
	return nil
}

// dotSegment reports whether s is "." or "..": a URL cannot name it. A
// browser (and any client that follows the URL standard) removes such a
// path segment, escaped as %2E or not, before it sends the request, so the
// dashboard's page of that task or job would be another page.
func dotSegment(s string) bool { return s == "." || s == ".." }

func dotRefusal(field, s string) error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf("%q cannot be named in a URL", s),
		Hint: "use a name with a letter or digit in it; the dashboard and the API open a run or a job by its name in the URL"}
}

// checkTime refuses a time outside [MinTs, MaxTs] and says which unit the
// value looks like when it is one.
func checkTime(field string, ms int64) error {
	bad := func(msg, hint string) error {
		return &Error{Code: EINVALID, Field: field, Message: msg, Hint: hint}
	}
	const inMs = "send Unix milliseconds between 2000-01-01 and 2200-01-01, e.g. date +%s%3N"
	switch {
	case ms < 0:
		return bad(fmt.Sprintf("%d is negative", ms), inMs)
	case ms < MinTs && ms*1000 >= MinTs && ms*1000 <= MaxTs:
		return bad(fmt.Sprintf("%d is before 2000-01-01 in milliseconds; it looks like Unix seconds (%s)", ms, utc(ms*1000)),
			fmt.Sprintf("send milliseconds: %d", ms*1000))
	case ms < MinTs:
		return bad(fmt.Sprintf("%d is before 2000-01-01", ms), inMs)
	case ms <= MaxTs:
		return nil
	}
	for _, u := range [...]struct {
		name string
		div  int64
	}{{"microseconds", 1e3}, {"nanoseconds", 1e6}} {
		if ms/u.div >= MinTs && ms/u.div <= MaxTs {
			return bad(fmt.Sprintf("%d is after 2200-01-01 in milliseconds; it looks like Unix %s (%s)", ms, u.name, utc(ms/u.div)),
				fmt.Sprintf("send milliseconds: %d", ms/u.div))
		}
	}
	return bad(fmt.Sprintf("%d is after 2200-01-01", ms), inMs)
}

func utc(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// checkDuration refuses a negative duration or one over MaxDurationMs.
func checkDuration(field string, ms int64) error {
	switch {
	case ms < 0:
		return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf("%d is negative", ms), Hint: "send a duration in milliseconds, or leave the field out"}
	case ms > MaxDurationMs:
		return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf("%d ms is over the limit of %d (366 days)", ms, MaxDurationMs),
			Hint: "send milliseconds (not microseconds or nanoseconds), or leave the field out"}
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
	// KindTooShort is written by the bus when a run succeeded in less than
	// its job's min_runtime (job expectations); KindTooOften when a run
	// started while its job had already started max_runs runs within
	// runs_window. The task does not change: the record marks the run, and
	// Reason says by how much.
	KindTooShort
	KindTooOften
	// KindFlapping is written by the bus on the run whose end made its job
	// flap (job expectations: its runs switched between success and
	// failure too often); Reason says how often. The task does not change.
	KindFlapping

	numKind
)

var kindNames = [numKind]string{"report", "correction", "timeout", "missed_start", "gap", "too_short", "too_often", "flapping"}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k < numKind }

// Mark reports whether a record of kind k marks a run without changing
// it: what job expectations found (a missed start, a run too short or too
// often, the run that made its job flap).
func (k Kind) Mark() bool {
	return k == KindMissedStart || k == KindTooShort || k == KindTooOften || k == KindFlapping
}

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

// CheckReason checks the reason of a manual correction: it must be given
// (it goes to the task's history and the audit log) and be short enough
// to keep in both.
func CheckReason(reason string) error {
	switch {
	case reason == "":
		return &Error{Code: EINVALID, Field: "reason", Message: "a correction needs a reason",
			Hint: "say why the status is changed by hand; it goes to the audit log"}
	case len(reason) > MaxReasonBytes:
		return &Error{Code: EINVALID, Field: "reason", Message: fmt.Sprintf("%d bytes, over the limit of %d", len(reason), MaxReasonBytes),
			Hint: "say why in a few lines; for a log or a long story, give a link to it"}
	}
	return nil
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
	// words), on gaps (how many earlier events never arrived) and on the
	// marks of job expectations (too_short, too_often: by how much;
	// flapping: how often).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}
