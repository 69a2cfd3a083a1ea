package alert_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
)

// journal is an OwedStore, a Locker and a Sender that write what they are
// asked, in order, as "<op> <tenant>".
type journal struct {
	mu    sync.Mutex
	lines []string
	kept  map[uint64]apollo.Notification
	next  uint64
	lock  *alert.MemoryLocker
}

func newJournal(clock apollo.Clock) *journal {
	return &journal{kept: map[uint64]apollo.Notification{}, lock: alert.NewMemoryLocker(clock)}
}

func (j *journal) log(op string, n apollo.Notification) {
	j.mu.Lock()
	j.lines = append(j.lines, op+" "+n.Alert.Tenant)
	j.mu.Unlock()
}

func (j *journal) Record(n apollo.Notification) (uint64, error) {
	j.log("record", n)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	j.kept[j.next] = n
	return j.next, nil
}

func (j *journal) Forget(id uint64) error {
	j.mu.Lock()
	n := j.kept[id]
	delete(j.kept, id)
	j.mu.Unlock()
	j.log("forget", n)
	return nil
}

func (j *journal) Acquire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ok, err := j.lock.Acquire(ctx, key, ttl)
	tenant, _, _ := strings.Cut(strings.TrimPrefix(key, alert.LockKeyPrefix), ":")
	j.log(fmt.Sprintf("lock=%v", ok), apollo.Notification{Alert: apollo.Alert{Tenant: tenant}})
	return ok, err
}

func (j *journal) Send(n apollo.Notification) { j.log("send", n) }

func (j *journal) of(tenant string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, l := range j.lines {
		if op, ok := strings.CutSuffix(l, " "+tenant); ok {
			out = append(out, op)
		}
	}
	return out
}

func (j *journal) recorded() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.kept)
}

// With an OwedStore (the three-process mode's Redis), a notification is
// recorded before its dedup lock is asked and forgotten once the Sender
// has it, or once the lock says another engine tells it: a process
// killed holding the lock leaves it recorded for another to take over.
// Before, the lock came first and nothing recorded it.
func TestOwedAreRecordedBeforeTheirLock(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	j := newJournal(clock)
	store := newTable()
	store.set("batch_load", failing(9, 10))
	rule := parse(t, `RULE batch_failed task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed_rate > 0.5 NOTIFY: hook`)
	for range 2 {
		e, err := alert.New(alert.Options{Store: store, Sender: j, Locker: j, Owed: j, Clock: clock, Logger: quiet,
			DedupWindow: time.Hour, RepeatInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, tenant := range []string{"team-a", "team-b"} {
			e.SetRules(tenant, rule)
		}
		if err := e.Evaluate(bg, clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// The second engine, sharing the lock, is held back by it.
	want := []string{"record", "lock=true", "send", "forget", "record", "lock=false", "forget"}
	for _, tenant := range []string{"team-a", "team-b"} {
		if got := j.of(tenant); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tenant, got, want)
		}
	}
	if n := j.recorded(); n != 0 {
		t.Errorf("%d still recorded", n)
	}
}

// A state saved while notifications are decided and not yet with the
// Sender (nor recorded: the one waiting behind the first has not reached
// its lock) records them first: an OwedStore-backed state (Redis) keeps
// no owed list, and a kill -9 after the save would otherwise lose the
// notification its saved mark says was told.
func TestSaveRecordsWhatIsOwed(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(t0)
	j := newJournal(clock)
	store := newTable()
	store.set("batch_load", failing(9, 10))
	rule := parse(t, `RULE batch_failed task_prefix: "batch_" WINDOW: 1m THRESHOLD: failed_rate > 0.5 NOTIFY: hook`)
	gate := &gateSender{entered: make(chan apollo.Notification, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(gate.release) })
	e, err := alert.New(alert.Options{Store: store, Sender: gate, Locker: j, Owed: j, Clock: clock, Logger: quiet,
		DedupWindow: time.Hour, RepeatInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"team-a", "team-b"} {
		e.SetRules(tenant, rule)
	}
	go e.Evaluate(bg, clock.Now())
	select {
	case <-gate.entered: // one is in the Sender, the other waits before its lock
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no notification reached the Sender")
	}
	if n := j.recorded(); n != 1 {
		t.Fatalf("%d recorded before the save, want the one whose lock was asked", n)
	}
	if err := e.Save(bg); err != nil {
		t.Fatal(err)
	}
	if n := j.recorded(); n != 2 {
		t.Fatalf("%d recorded after the save, want both", n)
	}
}
