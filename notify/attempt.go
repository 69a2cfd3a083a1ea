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

// NewMemoryLog returns an AttemptLog that keeps the last n attempts of
// each tenant in a ring of its own, so that one tenant's storm (thousands
// of notifications dropped or folded, each recorded) never pushes another
// tenant's record out. List returns the newest first.
func NewMemoryLog(n int) AttemptLog {
	return &memoryLog{n: max(n, 1), rings: map[string]*ring{}}
}

type memoryLog struct {
	n     int
	mu    sync.Mutex
	rings map[string]*ring // by tenant; tenants come from tokens and channels, a few
}

// ring holds a tenant's last attempts; it grows up to the log's n.
type ring struct {
	as   []Attempt
	next int // where the next Record goes once full
}

var _ AttemptLog = (*memoryLog)(nil)

func (l *memoryLog) Record(a Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rings[a.Tenant]
	if r == nil {
		r = &ring{}
		l.rings[a.Tenant] = r
	}
	if len(r.as) < l.n {
		r.as = append(r.as, a)
		return
	}
	r.as[r.next] = a
	r.next = (r.next + 1) % l.n
}

func (l *memoryLog) List(f AttemptFilter) []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rings[f.Tenant]
	if r == nil {
		return nil
	}
	var out []Attempt
	for i := 1; i <= len(r.as); i++ {
		a := r.as[(r.next-i+len(r.as))%len(r.as)]
		if (f.Channel != "" && a.Channel != f.Channel) || (f.AlertID != "" && a.AlertID != f.AlertID) {
			continue
		}
		out = append(out, a)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out
}
