package apollo_test

import (
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

func TestFakeClockFiresInOrder(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	c := apollo.NewFakeClock(start)
	late := c.NewTimer(3 * time.Second)
	early := c.NewTimer(1 * time.Second)
	tick := c.NewTicker(2 * time.Second)
	c.Advance(time.Second)
	select {
	case at := <-early.C():
		if !at.Equal(start.Add(time.Second)) {
			t.Errorf("early fired at %v", at)
		}
	default:
		t.Fatal("early timer did not fire")
	}
	select {
	case <-late.C():
		t.Fatal("late timer fired too soon")
	default:
	}
	c.Advance(3 * time.Second) // now start+4s: late fires, ticker fired at 2 and 4 (one buffered)
	if _, ok := <-late.C(); !ok {
		t.Fatal("late timer closed")
	}
	if at := <-tick.C(); !at.Equal(start.Add(2 * time.Second)) {
		t.Errorf("tick at %v, want start+2s", at)
	}
	if !c.Now().Equal(start.Add(4 * time.Second)) {
		t.Errorf("now = %v", c.Now())
	}
	if late.Stop() {
		t.Error("Stop of a fired timer reported active")
	}
	tick.Stop()
	if n := c.Waiters(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

func TestFakeClockBlockUntil(t *testing.T) {
	t.Parallel()
	c := apollo.NewFakeClock(time.Unix(0, 0))
	done := make(chan struct{})
	go func() {
		tm := c.NewTimer(time.Minute)
		<-tm.C()
		close(done)
	}()
	if !c.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("timer never armed")
	}
	c.Advance(time.Minute)
	<-done
}
