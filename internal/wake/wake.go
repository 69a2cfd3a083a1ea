// Package wake lets goroutines wait for the next change of something
// without polling: take the channel of Next before looking, then wait on
// it; Broadcast closes it. Tests use it to wait on a signal, never on time.
package wake

import "sync"

// Wake is a broadcast to everyone waiting for the next change. Its zero
// value is ready to use; it must not be copied after first use.
type Wake struct {
	mu sync.Mutex
	c  chan struct{}
}

// Next returns a channel that Broadcast closes.
func (w *Wake) Next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c == nil {
		w.c = make(chan struct{})
	}
	return w.c
}

// Broadcast wakes every waiter on the channel Next returned so far; a later
// Next gets a new one.
func (w *Wake) Broadcast() {
	w.mu.Lock()
	if w.c != nil {
		close(w.c)
		w.c = nil
	}
	w.mu.Unlock()
}
