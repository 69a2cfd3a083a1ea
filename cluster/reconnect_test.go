package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// natsAt starts a NATS server with JetStream on port over the store in
// dir, as runNATS does.
func natsAt(t *testing.T, port int, dir string) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// A node's listeners of the changes (its stream's clients) are cut off
// once its connection to NATS is back after a break: core NATS kept
// nothing of what the owners published meanwhile, so they resynchronise
// from a snapshot. Before, they went on from where they were, the changes
// of the break missing, and their tasks looked stuck in the state before
// it until something else made them resynchronise.
func TestChangeListenersResyncAfterAReconnect(t *testing.T) {
	dir := t.TempDir()
	srv := natsAt(t, server.RANDOM_PORT, dir)
	port := srv.Addr().(*net.TCPAddr).Port
	c := &testCluster{t: t, srv: srv, parts: 1, ttl: 10 * time.Second, events: make(chan hookEvent, 4096)}
	a := c.start("rc-1")
	c.waitServed(nil)
	sub, err := a.SubscribeChanges(100)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publishAll(t, a, []apollo.Event{{TaskID: "before", Sequence: 1, Status: apollo.StatusRunning, Ts: time.Now().UnixMilli()}})
	deadline := time.After(testwait.Timeout(t))
	select {
	case ch := <-sub.C():
		if ch.Task.TaskID != "before" {
			t.Fatalf("got the change %+v", ch)
		}
	case <-deadline:
		t.Fatal("the change before the break never came")
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	c.srv = natsAt(t, port, dir)
	for {
		select {
		case ch, ok := <-sub.C():
			if ok {
				continue // one published before the break, delivered after it
			}
			if !errors.Is(sub.Err(), ErrChangesLost) {
				t.Fatalf("the listener was cut with %v, want ErrChangesLost", sub.Err())
			}
			_ = ch
			// Stopped here, while NATS runs: the server started last is
			// shut down first when the test ends.
			a.Stop(context.Background())
			return
		case <-deadline:
			t.Fatalf("the listener was not cut after the node reconnected to NATS (stats %+v)", a.NodeStats())
		}
	}
}
