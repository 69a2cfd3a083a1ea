package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
)

// connLimitServer serves h on a loopback listener limited to n
// connections.
func connLimitServer(t *testing.T, n int, h http.Handler) (*ConnLimit, string) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConnections(tcp, n, discardLogger, nil)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	l.Watch(srv)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, tcp.Addr().String()
}

// closedByServer reports whether the server closed c: a read ends in EOF
// (or a reset) rather than waiting.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testwait.Timeout(t)))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// At the limit a new connection closes the one that has waited longest
// for a request, never one inside a handler; when every connection is in
// a handler, the new one is refused. Each is counted.
func TestConnLimitClosesTheLongestWaiting(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	l, addr := connLimitServer(t, 3, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	request := func(c net.Conn, path string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}

	busy := dial() // in a handler until released
	request(busy, "/block")
	<-entered
	slow := dial() // half a header: waiting
	io.WriteString(slow, "GET / HTTP/1.1\r\n")
	idle := dial() // served once, kept alive: waiting, since later
	request(idle, "/")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// The fourth closes slow, the longest waiting; then the fifth closes idle.
	fourth := dial()
	if !closedByServer(t, slow) {
		t.Fatal("the half-header connection was not closed for the new one")
	}
	request(fourth, "/block")
	<-entered
	fifth := dial()
	if !closedByServer(t, idle) {
		t.Fatal("the idle connection was not closed for the new one")
	}
	request(fifth, "/block")
	<-entered
	// Every connection is in a handler now: the next is refused.
	if !closedByServer(t, dial()) {
		t.Fatal("a connection past the limit, with every one serving, was not refused")
	}
	close(release)
	for _, c := range []net.Conn{busy, fourth, fifth} {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a connection in a handler was closed: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if strings.TrimSpace(string(b)) != "ok" {
			t.Fatalf("answer %q", b)
		}
	}
	st := l.Stats()
	if st.Limit != 3 || st.Evicted != 2 || st.Refused != 1 || st.Accepted != 5 {
		t.Errorf("stats %+v, want limit 3, 5 accepted, 2 evicted, 1 refused", st)
	}
}

// At the limit, of the waiting connections the one closed for a new one is
// the longest waiting that the server has read from, not an older one it
// has not read yet: that one may hold a whole request its goroutine has
// not got to on a busy machine (a reporter's, behind a flood).
func TestConnLimitSparesConnectionsNotReadYet(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConnections(tcp, 2, discardLogger, nil)
	t.Cleanup(func() { l.Close() })
	accept := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Close() })
		return sc
	}
	unread := accept() // its request may be on its way: not read yet
	flood := accept()  // read from, nothing whole in it
	flood.SetReadDeadline(time.Now())
	if _, err := flood.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read of the flood connection: %v", err)
	}
	accept() // past the limit
	if _, err := flood.Write([]byte("x")); err == nil {
		t.Error("the connection read from was not closed for the new one")
	}
	if _, err := unread.Write([]byte("x")); err != nil {
		t.Errorf("the connection not read yet was closed for the new one: %v", err)
	}
	if st := l.Stats(); st.Evicted != 1 {
		t.Errorf("stats %+v, want 1 evicted", st)
	}
}
