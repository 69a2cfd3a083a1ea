package tui

import (
	"context"
	"io"
	"sync"

	tea "charm.land/bubbletea/v2"
)

// runner owns every command that does I/O. Bubble Tea runs commands in
// goroutines it does not wait for; the runner gives them a context that
// Close cancels, counts them so Close can wait, and closes the
// connections they opened that nobody else will (a dial whose result
// arrives after the program ended).
type runner struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	open   map[io.Closer]struct{}
}

func newRunner() *runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &runner{ctx: ctx, cancel: cancel, open: map[io.Closer]struct{}{}}
}

// cmd wraps f as a tracked command. After Close it does nothing.
func (r *runner) cmd(f func(ctx context.Context) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil
		}
		r.wg.Add(1)
		r.mu.Unlock()
		defer r.wg.Done()
		return f(r.ctx)
	}
}

// own records an open connection; it reports false (and the caller must
// close c) when the runner is already closing.
func (r *runner) own(c io.Closer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.open[c] = struct{}{}
	return true
}

// release closes c and forgets it.
func (r *runner) release(c io.Closer) {
	r.mu.Lock()
	delete(r.open, c)
	r.mu.Unlock()
	_ = c.Close()
}

// Close cancels every command, closes what they left open, and waits for
// them. It is idempotent.
func (r *runner) Close() {
	r.mu.Lock()
	r.closed = true
	open := r.open
	r.open = map[io.Closer]struct{}{}
	r.mu.Unlock()
	r.cancel()
	for c := range open {
		_ = c.Close()
	}
	r.wg.Wait()
}
