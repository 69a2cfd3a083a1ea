package tenantlock

import (
	"testing"

	"github.com/apollo-11/apollo/internal/testwait"
	"time"
)

// One tenant's lock held does not hold another's; the same tenant's
// waits for it, and a lock nobody holds or waits for is forgotten.
func TestLocks(t *testing.T) {
	t.Parallel()
	var l Locks
	unlockAcme := l.Lock("acme")
	done := make(chan struct{})
	go func() { l.Lock("globex")(); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("globex's lock waited for acme's")
	}
	second := make(chan func())
	go func() { second <- l.Lock("acme") }()
	select {
	case <-second:
		t.Fatal("acme's lock taken twice")
	default:
	}
	unlockAcme()
	(<-second)()
	l.mu.Lock()
	n := len(l.locks)
	l.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d locks kept with nobody holding them", n)
	}
}
