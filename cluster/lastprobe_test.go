package cluster

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apollo-11/apollo/internal/testwait"
)

// Callers that come while a question is out share the next one, and get
// its answer, not the one out when they came (which may have been sent
// before what they must see was stored).
func TestLastProbeSharesTheNextQuestion(t *testing.T) {
	t.Parallel()
	ctx := testwait.Context(t)
	var l lastProbe
	waiters := make(chan struct{}, 16)
	l.waiting = func() { waiters <- struct{}{} }
	var asked atomic.Uint64
	release := make(chan struct{})
	ask := func(context.Context) (uint64, error) {
		n := asked.Add(1)
		if n == 1 {
			<-release
		}
		return n * 10, nil
	}
	first := make(chan uint64)
	go func() { seq, _ := l.last(ctx, ask); first <- seq }()
	for asked.Load() == 0 { // the first question is out
		select {
		case <-ctx.Done():
			t.Fatal("the first question was not sent")
		default:
			runtime.Gosched()
		}
	}
	const callers = 5
	var wg sync.WaitGroup
	got := make([]uint64, callers)
	for i := range callers {
		wg.Go(func() { got[i], _ = l.last(ctx, ask) })
	}
	for range callers {
		select {
		case <-waiters:
		case <-ctx.Done():
			t.Fatal("the callers did not wait behind the question out")
		}
	}
	close(release)
	if seq := <-first; seq != 10 {
		t.Errorf("the first caller got %d, want 10", seq)
	}
	wg.Wait()
	for i, seq := range got {
		if seq != 20 {
			t.Errorf("caller %d got %d, want the second question's 20", i, seq)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("%d questions for 1 + %d callers, want 2", n, callers)
	}
}
