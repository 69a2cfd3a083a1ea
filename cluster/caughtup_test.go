package cluster

import (
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/internal/testwait"
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

// A node answering for several partitions waits for them all at once:
// each partition's barrier has its waiter before any has been decided.
// Before, the node asked and waited for one partition after the other
// inside the NATS callback, so the second had no waiter until the first
// was decided.
func TestCatchUpAllWaitsForThePartitionsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testwait.Context(t)
	js, err := jetstream.New(connect(t, runNATS(t)))
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{opts: Options{Clock: apollo.SystemClock}, log: testLogger(), warns: loglimit.New(time.Second)}
	if n.events, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: EventsStream, Subjects: []string{eventsPrefix + ">"}}); err != nil {
		t.Fatal(err)
	}
	parts := make([]*partition, 4)
	last := make([]uint64, len(parts))
	for i := range parts {
		parts[i] = &partition{n: n, id: i}
		for _, tenant := range []string{"acme", "globex"} {
			ack, err := js.Publish(ctx, EventSubject(tenant, i), []byte("{}"))
			if err != nil {
				t.Fatal(err)
			}
			last[i] = ack.Sequence
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); catchUpAll(parts, time.Minute) }()
	waiting := func(pt *partition) bool {
		pt.caught.mu.Lock()
		defer pt.caught.mu.Unlock()
		return pt.caught.next != nil
	}
	deadline := time.Now().Add(testwait.Timeout(t))
	for i := 0; i < len(parts); {
		if waiting(parts[i]) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d has no waiter while the others wait", i)
		}
		runtime.Gosched()
	}
	for i, pt := range parts {
		pt.caught.decided(last[i])
	}
	<-done
}
