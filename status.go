package apollo

import (
	"fmt"
	"strings"
)

// Status is the state of one task (one run of a job).
//
// The zero value, StatusNone, is the state of a task that has not been seen;
// it is never sent on the wire.
type Status uint8

// The six states of a task, in the seed's words.
const (
	StatusNone Status = iota
	StatusPending
	StatusRunning
	StatusSuccess
	StatusFailed
	StatusTimeout
	StatusManualBlocked

	numStatus
)

var statusNames = [numStatus]string{
	StatusNone:          "",
	StatusPending:       "pending",
	StatusRunning:       "running",
	StatusSuccess:       "success",
	StatusFailed:        "failed",
	StatusTimeout:       "timeout",
	StatusManualBlocked: "manual_blocked",
}

// Statuses lists the six reportable states in lifecycle order.
func Statuses() []Status {
	return []Status{StatusPending, StatusRunning, StatusSuccess, StatusFailed, StatusTimeout, StatusManualBlocked}
}

// transitions is the one table of legal state changes (docs/protocol.md,
// "Transitions"). A row is the current state, a column the reported one.
// Everything not marked here is illegal; success, failed and timeout have
// empty rows because they are final: only an audited manual correction
// changes them, and corrections do not consult this table.
//
// A task's first event may be any status. A first event that is final is
// a run reported only by its end (a cron line that reports once, a ping
// with no start): a finished run whose start is unknown (invariant 8 in
// docs/architecture.md).
var transitions = [numStatus][numStatus]bool{
	StatusNone: {StatusPending: true, StatusRunning: true, StatusSuccess: true, StatusFailed: true,
		StatusTimeout: true, StatusManualBlocked: true},
	StatusPending:       {StatusRunning: true, StatusFailed: true, StatusTimeout: true, StatusManualBlocked: true},
	StatusRunning:       {StatusSuccess: true, StatusFailed: true, StatusTimeout: true, StatusManualBlocked: true},
	StatusManualBlocked: {StatusPending: true},
}

// CanTransition reports whether a task in state from may move to state to.
func CanTransition(from, to Status) bool {
	if from >= numStatus || to >= numStatus {
		return false
	}
	return transitions[from][to]
}

// reachable[from][to] says whether some sequence of legal transitions leads
// from one state to the other. It is derived from transitions at start-up.
var reachable = func() (r [numStatus][numStatus]bool) {
	for from := range numStatus {
		seen := [numStatus]bool{}
		next := []Status{from}
		for len(next) > 0 {
			s := next[0]
			next = next[1:]
			for to := range numStatus {
				if transitions[s][to] && !seen[to] {
					seen[to] = true
					next = append(next, to)
				}
			}
		}
		r[from] = seen
	}
	return r
}()

// CanReach reports whether a task in state from could ever get to state
// to through legal transitions: whether waiting for missing events could
// make an out-of-order event legal. Nothing is reachable from a final state.
func CanReach(from, to Status) bool {
	if from >= numStatus || to >= numStatus {
		return false
	}
	return reachable[from][to]
}

// Valid reports whether s is one of the six reportable states.
func (s Status) Valid() bool { return s > StatusNone && s < numStatus }

// Final reports whether s ends a task's lifecycle.
func (s Status) Final() bool {
	return s == StatusSuccess || s == StatusFailed || s == StatusTimeout
}

func (s Status) String() string {
	if s < numStatus {
		if s == StatusNone {
			return "none"
		}
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// ParseStatus turns a wire name into a Status. Matching is exact: the wire
// format is lower case.
func ParseStatus(name string) (Status, error) {
	if s, ok := statusNamed(name); ok {
		return s, nil
	}
	return StatusNone, &Error{
		Code:    EINVALID,
		Field:   "status",
		Message: fmt.Sprintf("unknown status %q", name),
		Hint:    "use one of " + strings.Join(statusNames[1:], ", "),
	}
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) {
	if s == StatusNone {
		return []byte{}, nil
	}
	if !s.Valid() {
		return nil, fmt.Errorf("apollo: cannot encode %v", s)
	}
	return []byte(statusNames[s]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. The empty string is
// StatusNone, so that what MarshalText wrote reads back; Event.Validate
// refuses it where a status is required.
func (s *Status) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = StatusNone
		return nil
	}
	// Looked up without ParseStatus, whose error keeps its argument: the
	// string(b) it needs was an allocation per status read (three per
	// change a scale-out node decodes). Only an unknown name pays it.
	if v, ok := statusNamed(string(b)); ok {
		*s = v
		return nil
	}
	_, err := ParseStatus(string(b))
	return err
}

// statusNamed is the reportable status whose wire name is name.
func statusNamed(name string) (Status, bool) {
	for s := StatusPending; s < numStatus; s++ {
		if statusNames[s] == name {
			return s, true
		}
	}
	return StatusNone, false
}
