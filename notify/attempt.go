package notify

import (
	"sync"

	apollo "github.com/apollo-11/apollo"
)

// Outcomes of an Attempt.
const (
	OutcomeSent      = "sent"      // the channel accepted the message
	OutcomeFailed    = "failed"    // a failure not worth retrying (bad token, rejected payload)
	OutcomeRetrying  = "retrying"  // a retryable failure; another try follows after a backoff
	OutcomeGaveUp    = "gave_up"   // a retryable failure past GiveUpAfter; no more tries
	OutcomeDropped   = "dropped"   // never tried: full queue, unknown channel, or shutdown
	OutcomeCoalesced = "coalesced" // folded into a digest while waiting for the rate limit
)

// Attempt is one entry of the delivery record (apollo.Attempt).
type Attempt = apollo.Attempt

// AttemptFilter selects attempts (apollo.AttemptFilter).
type AttemptFilter = apollo.AttemptFilter

// AttemptLog keeps the delivery record. Record is called from every lane
// and must be safe for concurrent use and quick.
type AttemptLog interface {
	Record(Attempt)
	List(f AttemptFilter) []Attempt
}

// NewMemoryLog returns an AttemptLog that keeps the last n attempts in a
// ring. List returns the newest first.
func NewMemoryLog(n int) AttemptLog {
	return &memoryLog{ring: make([]Attempt, max(n, 1))}
}

type memoryLog struct {
	mu   sync.Mutex
	ring []Attempt
	next int  // where the next Record goes
	full bool // the ring has wrapped
}

var _ AttemptLog = (*memoryLog)(nil)

func (l *memoryLog) Record(a Attempt) {
	l.mu.Lock()
	l.ring[l.next] = a
	l.next++
	if l.next == len(l.ring) {
		l.next, l.full = 0, true
	}
	l.mu.Unlock()
}

func (l *memoryLog) List(f AttemptFilter) []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	var out []Attempt
	for i := 1; i <= n; i++ {
		a := l.ring[(l.next-i+len(l.ring))%len(l.ring)]
		if a.Tenant != f.Tenant || (f.Channel != "" && a.Channel != f.Channel) || (f.AlertID != "" && a.AlertID != f.AlertID) {
			continue
		}
		out = append(out, a)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out
}
