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

// OwedStore keeps what the engine owes (decided, its alert marked told,
// not yet with the Sender) where another process finds it should this
// one die: the three-process mode's Redis (redisstore.Decisions), whose
// alert state keeps no owed list. The engine records each notification
// before it asks for its dedup lock, and before a save writes the mark
// that says it was told, and forgets it once the Sender has it or the
// lock said another process tells it. Another process takes over what a
// dead one recorded and hands it to TakeOver (docs/redis.md, "The dedup
// lock and the outbox").
type OwedStore interface {
	// Record keeps n and returns its ID for Forget. It may fail (Redis
	// away): the notification goes on, unrecorded, as it did before.
	Record(n apollo.Notification) (uint64, error)
	// Forget drops what Record kept.
	Forget(id uint64) error
}

// TakenOver is a notification another process recorded in its OwedStore
// and died before handing to its Sender.
type TakenOver struct {
	ID           uint64 // in this process's OwedStore: Forget it once sent
	Notification apollo.Notification
	// From names the processes that recorded it, all dead: a dedup lock
	// held by one of them was taken for this very notification, which
	// never went out.
	From []string
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
	m    map[uint64]*owedEntry
}

// owedEntry is one owed notification, with its record in the OwedStore.
type owedEntry struct {
	OwedNotification
	rec   sync.Once // records it in the OwedStore, at most once
	recID uint64    // its ID there, 0 if not recorded; read after rec.Do
	from  []string  // TakeOver: the dead processes that may hold its lock
}

func newOwedNotes() *owedNotes { return &owedNotes{m: map[uint64]*owedEntry{}} }

// add owes n and returns its handover.
func (o *owedNotes) add(n apollo.Notification, asked bool) handover {
	return o.addEntry(&owedEntry{OwedNotification: OwedNotification{Notification: n, LockAsked: asked}})
}

func (o *owedNotes) addEntry(en *owedEntry) handover {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.m[o.next] = en
	return handover{id: o.next, n: en.Notification}
}

// get returns id's entry, nil once it is done.
func (o *owedNotes) get(id uint64) *owedEntry {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[id]
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

// done forgets id and returns its entry (nil if it was done already):
// the Sender has it, another engine sent it, or it was dropped visibly.
func (o *owedNotes) done(id uint64) *owedEntry {
	o.mu.Lock()
	defer o.mu.Unlock()
	en := o.m[id]
	delete(o.m, id)
	return en
}

// len is how many notifications are owed.
func (o *owedNotes) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// list returns what is owed, in the order it was decided.
func (o *owedNotes) list() []OwedNotification {
	var out []OwedNotification
	for _, en := range o.entries() {
		out = append(out, en.OwedNotification)
	}
	return out
}

// entries returns the entries owed, in the order they were decided.
func (o *owedNotes) entries() []*owedEntry {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]uint64, 0, len(o.m))
	for id := range o.m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmp.Compare)
	out := make([]*owedEntry, 0, len(ids))
	for _, id := range ids {
		out = append(out, o.m[id])
	}
	return out
}

// record keeps en in the OwedStore, once: before its dedup lock is asked
// (deliver) or a save writes the mark it goes with (persist), whichever
// comes first. A failure is logged; the notification goes on.
func (e *Engine) record(en *owedEntry) {
	if e.opts.Owed == nil || en == nil {
		return
	}
	en.rec.Do(func() {
		id, err := e.opts.Owed.Record(en.Notification)
		if err != nil { // counted by the store
			if ok, n := e.warns.Allow("record", e.clock.Now()); ok {
				e.log.Warn("alert: recording an owed notification failed; a kill -9 before it is sent loses it", "err", err, "suppressed", n)
			}
			return
		}
		en.recID = id
	})
}

// recordOwed records everything owed: persist calls it before it saves
// the marks they go with.
func (e *Engine) recordOwed() {
	if e.opts.Owed == nil {
		return
	}
	for _, en := range e.owed.entries() {
		e.record(en)
	}
}

// settle is done for id, and forgets its record in the OwedStore.
func (e *Engine) settle(id uint64) {
	en := e.owed.done(id)
	if en == nil || e.opts.Owed == nil {
		return
	}
	en.rec.Do(func() {}) // waits for a record under way; stops a later one
	if en.recID == 0 {
		return
	}
	if err := e.opts.Owed.Forget(en.recID); err != nil {
		if ok, n := e.warns.Allow("forget", e.clock.Now()); ok {
			e.log.Warn("alert: forgetting a recorded notification failed; if this process dies, another may send it again", "err", err, "suppressed", n)
		}
	}
}

// TakeOver delivers what a dead process had recorded as owed (OwedStore)
// and not handed to its Sender: it goes out unless another process holds
// its dedup lock. A lock held by one of the dead processes it came from
// was taken for it, so it goes out too (TakeOverLocker). It returns when
// the Sender has them all.
func (e *Engine) TakeOver(ts []TakenOver) {
	for _, t := range ts {
		en := &owedEntry{OwedNotification: OwedNotification{Notification: t.Notification, LockAsked: true}, recID: t.ID, from: t.From}
		en.rec.Do(func() {}) // recorded already, in this process's store
		h := e.owed.addEntry(en)
		if e.opts.DedupWindow > 0 && !e.lockFrom(&h.n, t.From) {
			e.st.deduped.Add(1)
			e.settle(h.id)
			continue
		}
		e.opts.Sender.Send(h.n)
		e.settle(h.id)
		e.st.sent.Add(1)
	}
}
