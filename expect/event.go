package expect

import (
	"fmt"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// Run is one run of a job as the server saw it start or finish: what the
// bus tells the evaluator and the learner.
type Run struct {
	Tenant string
	Job    string
	TaskID string
	// At is when the run started (Started) or finished (Finished).
	At time.Time
	// Received, for Started, is when the caller learnt of the start (the
	// server's clock); zero: At. max_runtime counts from it, as a
	// timeoutMs does in the bus: a reporter's clock that is behind, or a
	// start delivered late, must not make a run too long at once.
	Received time.Time
	// Status and Duration are set on finished runs: success, failed or
	// timeout, and how long the run took.
	Status   apollo.Status
	Duration time.Duration
	// Seq, for Finished, orders the ends of runs that ended in the same
	// millisecond (At), for flapping: the order the server accepted them
	// in (its log position, the same in a replay). Zero: none, the order
	// they are told in.
	Seq uint64
}

// Kind is what an Event reports.
type Kind uint8

// The kinds of Event. Their names are also the words rules use (ON:
// missed, too_short, too_often, flapping); too_long becomes a timeout of
// the run, and stable ends a flapping alert.
const (
	// KindMissed: no run started by the expected time plus grace.
	KindMissed Kind = iota + 1
	// KindTooLong: a run is still running past max_runtime. The caller
	// times the run out.
	KindTooLong
	// KindTooShort: a run succeeded in less than min_runtime.
	KindTooShort
	// KindTooOften: a run started when max_runs runs had already started
	// within runs_window.
	KindTooOften
	// KindFlapping: the job's runs switched between success and failure
	// flapping.changes times within flapping.window.
	KindFlapping
	// KindStable: a flapping job went flapping.hold without a switch.
	KindStable

	numKinds
)

var kindNames = [numKinds]string{"", "missed", "too_long", "too_short", "too_often", "flapping", "stable"}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	for _, kk := range Kinds() {
		if kk.String() == string(b) {
			*k = kk
			return nil
		}
	}
	return fmt.Errorf("unknown kind %q", b)
}

// Kinds lists every kind, in order.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := KindMissed; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Event is one thing the evaluator found about a job.
type Event struct {
	Kind   Kind
	Tenant string
	Job    string
	// TaskID is the run the event is about (too_long, too_short,
	// too_often; for flapping, the run whose end made the job flap);
	// empty for the others.
	TaskID string
	// Slot is the time the event is about: for missed, when the run was
	// expected (the last one, when Count > 1); for too_long, too_short and
	// too_often, when the run started; for flapping and stable, the switch
	// that started or last prolonged the flapping.
	Slot time.Time
	// At is when the evaluator found it: the run's time for events of
	// Started and Finished, the deadline that passed for events of Tick.
	At time.Time
	// Count is how many expected runs a missed event stands for: 1, or
	// more when Tick was not called for a while; 1 for other kinds.
	Count int
	// Detail is one line for people.
	Detail string
}

// Problem is why a job counts as down for inhibition.
type Problem uint8

// The problems, from a job's latest run or deadline. A successful run
// clears them.
const (
	ProblemNone    Problem = iota
	ProblemFailed          // its latest run failed
	ProblemTimeout         // its latest run timed out, or is running past max_runtime
	ProblemMissed          // its latest expected run did not start
)

var problemNames = [...]string{"none", "failed", "timeout", "missed"}

func (p Problem) String() string {
	if int(p) < len(problemNames) {
		return problemNames[p]
	}
	return fmt.Sprintf("Problem(%d)", uint8(p))
}

// Cause is an upstream job whose trouble holds another job's alerts: the
// root cause that they are echoes of.
type Cause struct {
	Job     string
	Problem Problem
	Since   time.Time
}

func (c Cause) String() string { return fmt.Sprintf("%s (%s)", c.Job, c.Problem) }
