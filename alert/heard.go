package alert

import (
	"context"
	"math"
	"slices"
	"sync"
)

// LiveMark is how far the engine had heard of the bus's changes when it
// saved its state (bus.Bus.LiveWatermark): every change up to Watermark,
// and above it the changes of Heard, the LSNs of those that counted in an
// event group. After a crash the bus replays the changes above Watermark
// to the engine (bus.Bus.ReplayLiveAfter); those in Heard are already in
// the saved groups and are not counted twice.
type LiveMark struct {
	Watermark uint64   `json:"watermark"`
	Heard     []uint64 `json:"heard,omitempty"`
	// Feed is where in the bus's change log the engine had got to, in the
	// three-process mode (opaque here: the stream entry and the epoch of
	// the bus's log, redisstore.ChangeFollower): it reads on from there
	// after a restart (RestoreFeed).
	Feed string `json:"feed,omitempty"`
}

// heardLog is the engine's side of the LiveMark.
type heardLog struct {
	mark func() (uint64, string) // the bus's LiveWatermark, and a feed's position; nil: no mark is kept

	mu sync.Mutex
	// What the restored state had heard of: written before the replay,
	// and forgotten when the feed starts a new log (ForgetHeard).
	savedMark uint64
	saved     map[uint64]struct{}
	lsns      map[uint64]struct{} // changes that counted, above the last mark saved
}

// before reports whether the change of lsn was heard of before the
// restart: it is in the restored state.
func (h *heardLog) before(lsn uint64) bool {
	if lsn == 0 || h.mark == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.saved[lsn]
	return lsn <= h.savedMark || ok
}

// ForgetHeard forgets the LSNs of the changes heard so far, for a feed
// whose bus started a new log (a new data directory): its LSNs start over,
// and a change of the new log is not one heard before.
func (e *Engine) ForgetHeard() {
	h := &e.heard
	h.mu.Lock()
	defer h.mu.Unlock()
	h.savedMark, h.saved = 0, nil
	clear(h.lsns)
}

// add notes that the change of lsn counted in an event group.
func (h *heardLog) add(lsn uint64) {
	if lsn == 0 || h.mark == nil {
		return
	}
	h.mu.Lock()
	h.lsns[lsn] = struct{}{}
	h.mu.Unlock()
}

// at returns the mark to save, nil when none is kept; it forgets the
// changes the mark now covers.
func (h *heardLog) at() *LiveMark {
	if h.mark == nil {
		return nil
	}
	m := &LiveMark{}
	m.Watermark, m.Feed = h.mark()
	h.mu.Lock()
	for lsn := range h.lsns {
		if lsn <= m.Watermark {
			delete(h.lsns, lsn)
		} else {
			m.Heard = append(m.Heard, lsn)
		}
	}
	h.mu.Unlock()
	slices.Sort(m.Heard)
	return m
}

// Restore loads the saved state ahead of Start, for an engine whose event
// rules are to hear, from the bus's replay of its log, the changes they
// had not heard of when the process stopped: a change accepted just before
// a kill -9 still reaches them. mark is the bus's LiveWatermark, saved
// with the state from now on. Restore returns the LSN above which the
// replay's changes are news to the engine (for bus.Bus.ReplayLiveAfter):
// the saved mark; 0 for no saved state at all; math.MaxUint64 for a state
// saved without a mark (by a version that did not keep one, which heard
// of every change it was handed before it stopped). Start then does not
// load the state again.
func (e *Engine) Restore(ctx context.Context, mark func() uint64) (uint64, error) {
	m, err := e.restore(ctx, func() (uint64, string) { return mark(), "" })
	return m.Watermark, err
}

// RestoreFeed is Restore for an engine that hears the bus through a
// change log it reads from a position (the three-process mode): mark
// returns the bus's mark of the last entry read and that entry's
// position. It returns the saved mark, whose Feed is where to read on
// from: "0" (the whole log) for no saved state at all, "$" (what is
// written from now on) for a state saved without a mark.
func (e *Engine) RestoreFeed(ctx context.Context, mark func() (uint64, string)) (LiveMark, error) {
	m, err := e.restore(ctx, mark)
	switch {
	case err != nil:
	case m.Watermark == math.MaxUint64:
		m.Watermark, m.Feed = 0, "$"
	case m.Feed == "":
		m.Feed = "0"
	}
	return m, err
}

// restore loads the state and returns its mark; a Watermark of
// math.MaxUint64 for a state without one (Restore).
func (e *Engine) restore(ctx context.Context, mark func() (uint64, string)) (LiveMark, error) {
	s, err := e.load(ctx)
	if err != nil {
		return LiveMark{}, err
	}
	e.restored = true
	h := &e.heard
	h.mark, h.lsns = mark, map[uint64]struct{}{}
	switch {
	case s.Live != nil:
		h.savedMark, h.saved = s.Live.Watermark, map[uint64]struct{}{}
		for _, lsn := range s.Live.Heard {
			h.saved[lsn] = struct{}{}
			h.lsns[lsn] = struct{}{} // saved again until a mark covers it
		}
		return LiveMark{Watermark: s.Live.Watermark, Feed: s.Live.Feed}, nil
	case len(s.Alerts) == 0 && len(s.Silences) == 0:
		return LiveMark{}, nil
	default:
		return LiveMark{Watermark: math.MaxUint64}, nil
	}
}

// Save writes the state now, with the bus's mark: a checkpoint calls it
// before its snapshot is kept, since the replay after it starts at the
// snapshot.
func (e *Engine) Save(ctx context.Context) error { return e.persist(ctx) }
