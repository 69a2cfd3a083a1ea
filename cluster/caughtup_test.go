package cluster

import (
	"testing"
	"time"
)

// The barrier of the open ping runs: a position already decided passes at
// once (a partition rebuilt starts at what the owners before decided), a
// later one passes when the apply loop decides it, and a position never
// decided gives up at the timeout.
func TestCaughtUp(t *testing.T) {
	var c caughtUp
	c.decided(7) // as openPartition records the rebuilt input position
	if !c.wait(7, 0) || !c.wait(3, 0) {
		t.Fatal("a decided position waited")
	}
	passed := make(chan bool)
	go func() { passed <- c.wait(9, time.Minute) }()
	c.decided(8)
	c.decided(9)
	if !<-passed {
		t.Fatal("the wait for 9 gave up once 9 was decided")
	}
	if c.wait(10, time.Millisecond) {
		t.Fatal("a position never decided passed")
	}
}
