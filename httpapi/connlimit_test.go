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
