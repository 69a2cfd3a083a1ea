package tenantlock

import "sync"

// Locks is a lock for each tenant, kept while someone holds or waits for
// it. The zero value is ready.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	sync.Mutex
	users int // holding or waiting; guarded by Locks.mu
}

// Lock takes tenant's lock and returns what releases it.
func (l *Locks) Lock(tenant string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*lock{}
	}
	t := l.locks[tenant]
	if t == nil {
		t = &lock{}
		l.locks[tenant] = t
	}
	t.users++
	l.mu.Unlock()
	t.Lock()
	return func() {
		t.Unlock()
		l.mu.Lock()
		if t.users--; t.users == 0 {
			delete(l.locks, tenant)
		}
		l.mu.Unlock()
	}
}
