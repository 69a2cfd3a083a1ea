//go:build unix

package httpapi

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
)

// At the limit, the connection closed for a new one is the longest
// waiting that holds no whole request header the server has not got to:
// never one whose header waits in its socket (a reporter's, on a machine
// too busy to read it yet, behind a flood) or is being parsed; when every
// waiting one holds one, the new connection is refused.
func TestConnLimitSparesRequestsNotReadYet(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConnections(tcp, 3, discardLogger, nil)
	t.Cleanup(func() { l.Close() })
	dial := func(send string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
		return c
	}
	accept := func(send string) net.Conn {
		t.Helper()
		dial(send)
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Close() })
		// What the client sent is in the server's socket before it goes on.
		deadline := time.Now().Add(testwait.Timeout(t))
		for send != "" && !holdsSome(sc) {
			if time.Now().After(deadline) {
				t.Fatal("what the client sent never reached the server")
			}
			runtime.Gosched()
		}
		return sc
	}
	closed := func(c net.Conn) bool {
		_, err := c.Write([]byte("x"))
		return err != nil
	}
	const whole, half = "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\n"
	waiting := accept(whole) // a whole header, not read yet
	parsed := accept(half)   // read by the server: being parsed
	if n, err := parsed.Read(make([]byte, 64)); n == 0 {
		t.Fatal(err)
	}
	dribble := accept(half) // half a header, not read yet
	idle := accept("")      // past the limit: closes dribble, the only one without a request
	if !closed(dribble) || closed(waiting) || closed(parsed) {
		t.Fatalf("closed for a new one: dribble %v, waiting %v, parsed %v; want dribble alone", closed(dribble), closed(waiting), closed(parsed))
	}
	last := accept(whole) // closes idle
	if !closed(idle) {
		t.Fatal("the idle connection was not closed for a new one")
	}
	// Every waiting connection holds a request now: the next is refused.
	refused := dial(whole)
	go l.Accept()
	if !closedByServer(t, refused) {
		t.Error("a connection past the limit, with a request in every waiting one, was not refused")
	}
	if closed(waiting) || closed(parsed) || closed(last) {
		t.Error("a connection with a request was closed for a newer one")
	}
	if st := l.Stats(); st.Evicted != 2 || st.Refused != 1 {
		t.Errorf("stats %+v, want 2 evicted, 1 refused", st)
	}
}

// holdsSome reports whether c's socket holds bytes not read yet.
func holdsSome(c net.Conn) bool {
	rc, err := unwrap(c).Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}
