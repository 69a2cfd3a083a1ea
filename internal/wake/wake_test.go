package wake

import (
	"testing"
)

func TestWake(t *testing.T) {
	var w Wake
	w.Broadcast() // nobody waits: nothing to close
	a, b := w.Next(), w.Next()
	if a != b {
		t.Fatal("two waiters before a broadcast got different channels")
	}
	select {
	case <-a:
		t.Fatal("closed before Broadcast")
	default:
	}
	w.Broadcast()
	<-a // closed: does not block
	c := w.Next()
	select {
	case <-c:
		t.Fatal("the next change's channel is closed already")
	default:
	}
	w.Broadcast()
	<-c
}
