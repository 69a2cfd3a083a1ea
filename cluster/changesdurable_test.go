package cluster

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A change reaches the streams (every node's, through apollo.changes)
// only once the decision log holds its record: here the owner's log is
// held before it stores the records of two tenants' events, and the
// changes are not told until it is let go; then they are, each once.
// Before, the bus handed the change to the publisher as soon as it was
// decided and it was told at once, while its record waited (now the bus
// holds every change until its record is durable:
// bus.TestNothingIsToldBeforeItsRecordIsDurable): a kill -9 of
// the owner then could take back what every stream client had been shown
// (a correction answered failed to its asker; a decision the next owner
// makes otherwise).
func TestChangesAreToldOnceTheirDecisionIsStored(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	var hold atomic.Bool
	held, release := make(chan struct{}, 1), make(chan struct{})
	waiting := make(chan uint64, 16)
	a := c.startWith("told-1", func(o *Options) {
		o.testLogHook = func() {
			if hold.Load() {
				select {
				case held <- struct{}{}:
				default:
				}
				<-release
			}
		}
		o.testLogWait = func(lsn uint64) {
			select {
			case waiting <- lsn:
			default:
			}
		}
	})
	var let sync.Once
	letGo := func() { hold.Store(false); let.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the node stops (cleanups run last first)
	c.waitServed(nil)
	cl := recordChanges(t, connect(t, c.srv))
	ctx := testwait.Context(t)
	hold.Store(true)
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"x", "y"} {
		publishAll(t, a, []apollo.Event{{Tenant: tenant, TaskID: "told", Name: "nightly", Sequence: 1, Status: apollo.StatusRunning, Ts: now}})
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the owner's log never began to store the records")
	}
	// Either the partition's bus waits for the log before it tells the
	// change (right), or the change reaches the streams first (the
	// defect).
	told := func() int {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return len(cl.byTask["told"])
	}
	// Each record is waited for twice: by Publish, to answer, and by the
	// worker that is to tell its change. The second wait is the signal.
	waits := map[uint64]int{}
	func() {
		for {
			select {
			case lsn := <-waiting:
				if waits[lsn]++; waits[lsn] == 2 {
					return
				}
			case <-cl.signal:
				if n := told(); n > 0 {
					t.Fatalf("%d changes told while the owner's log had not stored their records", n)
				}
			case <-ctx.Done():
				t.Fatal("neither the changes told nor the bus waiting for the log")
			}
		}
	}()
	if n := told(); n > 0 {
		t.Fatalf("%d changes told while the owner's log had not stored their records", n)
	}
	letGo()
	waitChanges(t, cl, "told", 1, 2)
	for _, tenant := range []string{"x", "y"} {
		task, err := a.Get(tenant, "told")
		if err != nil || task.Tenant != tenant || task.Status != apollo.StatusRunning {
			t.Errorf("tenant %s: %+v %v", tenant, task, err)
		}
	}
}
