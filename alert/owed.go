package alert

import (
	"cmp"
	"slices"
	"sync"

	"github.com/apollo-11/apollo"
)

// OwedNotification is a notification the engine had decided to send, and
// marked its alert for (FiringSent, ResolvedSent, Told, LastSentAt), but
// had not yet handed to the Sender when its state was saved. Load hands it
// to the Sender again: the mark alone would say it went out.
type OwedNotification struct {
	Notification apollo.Notification `json:"n"`
	// LockAsked: the dedup lock was asked for it, so the process that
	// saved it may hold the lock: it goes out without asking again. One
	// that was not asked for yet asks, as it would have.
	LockAsked bool `json:"lockAsked,omitempty"`
}

// handover is a notification on its way from a decision to the Sender;
// id names it among what the engine owes.
type handover struct {
	id uint64
	n  apollo.Notification
}

// owedNotes is what the engine decided to send and has not handed to the
// Sender yet. A notification is added under the lock that marks its alert
// (rate.mu or groups.mu), and the snapshot reads it after the alerts: a
// saved mark is thus either in the saved list or already with the Sender.
// Its lock is taken last.
type owedNotes struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*OwedNotification
}

func newOwedNotes() *owedNotes { return &owedNotes{m: map[uint64]*OwedNotification{}} }

// add owes n and returns its handover.
func (o *owedNotes) add(n apollo.Notification, asked bool) handover {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.m[o.next] = &OwedNotification{Notification: n, LockAsked: asked}
	return handover{id: o.next, n: n}
}

// ask notes that the dedup lock is about to be asked for id, before it
// is: a save from then on says so. It reports whether it was asked
// already (by the process before, which saved it owed).
func (o *owedNotes) ask(id uint64) (before bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	en := o.m[id]
	if en == nil {
		return false
	}
	before, en.LockAsked = en.LockAsked, true
	return before
}

// done forgets id: the Sender has it, another engine sent it, or it was
// dropped visibly.
func (o *owedNotes) done(id uint64) {
	o.mu.Lock()
	delete(o.m, id)
	o.mu.Unlock()
}

// len is how many notifications are owed.
func (o *owedNotes) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// list returns what is owed, in the order it was decided.
func (o *owedNotes) list() []OwedNotification {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]uint64, 0, len(o.m))
	for id := range o.m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmp.Compare)
	var out []OwedNotification
	for _, id := range ids {
		out = append(out, *o.m[id])
	}
	return out
}
