package cluster

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// recordingFeed is a LiveFeed that keeps what it is handed.
type recordingFeed struct {
	from uint64 // what Resume answers

	mu       sync.Mutex
	lsn      map[string]uint64 // task ID -> LSN of its failure
	replayed uint64            // Replayed's end
	saves    int
	more     chan struct{}
}

func newRecordingFeed(from uint64) *recordingFeed {
	return &recordingFeed{from: from, lsn: map[string]uint64{}, more: make(chan struct{}, 1)}
}

func (f *recordingFeed) Apply(c *apollo.Change) {
	if c.Task.Status != apollo.StatusFailed {
		return
	}
	f.mu.Lock()
	f.lsn[c.Task.TaskID] = c.LSN
	f.mu.Unlock()
	select {
	case f.more <- struct{}{}:
	default:
	}
}

func (f *recordingFeed) Resume(context.Context) (uint64, error) { return f.from, nil }
func (f *recordingFeed) Replayed(end uint64)                    { f.mu.Lock(); f.replayed = end; f.mu.Unlock() }
func (f *recordingFeed) Save(context.Context) error {
	f.mu.Lock()
	f.saves++
	f.mu.Unlock()
	return nil
}
func (f *recordingFeed) Close(context.Context) error { return nil }

func (f *recordingFeed) failures() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]uint64, len(f.lsn))
	for k, v := range f.lsn {
		out[k] = v
	}
	return out
}

// A partition's LSNs are the same under every owner, across a snapshot:
// the next owner's replay hands the feed the changes above the mark
// Resume read, each with the LSN the owner before gave it, and none at
// or below the mark; the feed is told where the replay ended and saves
// once the partition is taken. Before, a new owner numbered the records
// from 1 after the snapshot, and a mark meant nothing to it.
func TestLiveFeedHearsTheReplayAboveItsMark(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	first := newRecordingFeed(math.MaxUint64)
	a := c.startWith("feed-1", func(o *Options) { o.Feed = func(FeedConfig) (LiveFeed, error) { return first, nil } })
	c.waitServed(nil)
	now := time.Now().UnixMilli()
	var before, after []apollo.Event
	for i := range 40 {
		id := fmt.Sprintf("f-%02d", i)
		before = append(before, apollo.Event{TaskID: id, Name: "feed", Sequence: 1, Status: apollo.StatusRunning, Ts: now})
		after = append(after, apollo.Event{TaskID: id, Name: "feed", Sequence: 2, Status: apollo.StatusFailed, Ts: now + 1000})
	}
	publishAll(t, a, before)
	publishAll(t, a, after[:10])
	if err := a.local(0).snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	publishAll(t, a, after[10:])
	deadline := time.After(testwait.Timeout(t))
	for len(first.failures()) < len(after) {
		select {
		case <-first.more:
		case <-deadline:
			t.Fatalf("the first owner's feed heard %d of %d failures", len(first.failures()), len(after))
		}
	}
	told := first.failures()
	mark := told[after[25].TaskID] // the 26th failure's record: 40 starts and 26 failures
	if mark != 66 {
		t.Fatalf("the 26th failure has LSN %d, want 66", mark)
	}
	// Killed once its decisions are durable: what this test reads is the
	// replay of durable records. The feed hears a change before its
	// record is in JetStream, and a kill just after the feed had heard
	// the last failure lost, now and then on a loaded machine, the log's
	// last batch: the next owner decided those events again, live, and
	// its feed heard them at or below the mark (seen once in a whole
	// package run).
	info, err := a.events.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !a.local(0).caught.wait(info.State.LastSeq, testwait.Timeout(t)) {
		t.Fatalf("the first owner has not made its decisions up to event %d durable", info.State.LastSeq)
	}
	second := newRecordingFeed(mark)
	c.startWith("feed-2", func(o *Options) { o.Feed = func(FeedConfig) (LiveFeed, error) { return second, nil } })
	a.kill()
	c.waitServed(map[string]bool{a.id: true})
	got := second.failures()
	for _, ev := range after {
		lsn, ok := got[ev.TaskID]
		switch want := told[ev.TaskID]; {
		case want <= mark && ok:
			t.Errorf("%s (LSN %d, at or below the mark %d) replayed to the feed", ev.TaskID, want, mark)
		case want > mark && lsn != want:
			t.Errorf("%s replayed with LSN %d, want %d (ok %v)", ev.TaskID, lsn, want, ok)
		}
	}
	second.mu.Lock()
	defer second.mu.Unlock()
	if second.replayed != 80 || second.saves == 0 {
		t.Errorf("the feed heard the replay end at %d and was saved %d times; want 80, at least once", second.replayed, second.saves)
	}
}
