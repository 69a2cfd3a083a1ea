package stream

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// countingListener counts the writes to the connections it accepts, and
// the bytes they carry.
type countingListener struct {
	net.Listener
	writes, bytes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	c.l.bytes.Add(int64(len(p)))
	return c.Conn.Write(p)
}

// TestStreamMessageIsOneWrite: a tasks message longer than net/http's
// 4 KiB write buffer, and shorter than the stream's, goes to the
// connection in one write. The writer is held while the changes queue, so
// that they go out as one message whatever size the bus delivers them in.
func TestStreamMessageIsOneWrite(t *testing.T) {
	t.Parallel()
	var l *countingListener
	var gate writerGate
	e := newStreamEnvListening(t, func(o *Options) {
		o.HeartbeatInterval, o.PingInterval = -1, time.Hour // nothing else to write
		gate.install(t, o)
	}, func(in net.Listener) net.Listener { l = &countingListener{Listener: in}; return l })
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe", "coalesce": false})
	gate.hold()
	writes, bytes := l.writes.Load(), l.bytes.Load()
	evs := make([]apollo.Event, 60)
	for i := range evs {
		evs[i] = ev("a", fmt.Sprintf("nightly-report-shard-%03d", i), "nightly-report", 1, pending)
	}
	e.publish(evs...)
	e.waitCursor(uint64(len(evs)))
	gate.release()
	if m := c.readType(apiclient.MsgTasks); len(m.Tasks) != len(evs) {
		t.Fatalf("a message of %d tasks, want %d", len(m.Tasks), len(evs))
	}
	n, size := l.writes.Load()-writes, l.bytes.Load()-bytes
	if size <= 4<<10 || size > writeBuffer {
		t.Fatalf("the message took %d bytes; the test needs one between 4 KiB and %d", size, writeBuffer)
	}
	if n != 1 {
		t.Fatalf("a message of %d bytes took %d writes, want 1", size, n)
	}
}
