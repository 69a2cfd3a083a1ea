package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// smallBuffers shrinks the kernel buffers of accepted connections, so that
// a client that stops reading blocks the server's writes after a few KiB
// instead of a few MiB.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStreamSlowClientClosed: a client that stops reading is closed with
// the reason while a fast client on the same hub gets every change.
func TestStreamSlowClientClosed(t *testing.T) {
	t.Parallel()
	killed := make(chan string, 4)
	e := newStreamEnv(t, func(o *Options) {
		o.SendQueueBytes = 512 << 10
		// The slow client's writer blocks on full buffers from early on
		// until the test reads again; on a loaded machine that can take
		// longer than the default 10 s, and the write timeout would cut
		// the connection before its close frame can say why.
		o.WriteTimeout = 2 * testwait.Timeout(t)
		o.testKilled = func(reason string) { killed <- reason }
	})
	// A second server on the same hub whose connections have small buffers.
	slowSrv := httptest.NewUnstartedServer(e.srv.Config.Handler)
	slowSrv.Listener = smallBuffers{slowSrv.Listener}
	slowSrv.Start()
	t.Cleanup(slowSrv.Close)
	dialer := &net.Dialer{Control: nil}
	httpc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4096)
		}
		return c, err
	}}}
	slowConn, _, err := websocket.Dial(testwait.Context(t), "ws"+strings.TrimPrefix(slowSrv.URL, "http")+"/api/v1/stream",
		&websocket.DialOptions{Subprotocols: subprotocols("view-a"), HTTPClient: httpc})
	if err != nil {
		t.Fatal(err)
	}
	defer slowConn.CloseNow()
	slowConn.SetReadLimit(64 << 20)
	slow := &wsClient{t: t, conn: slowConn}
	slow.readType(apiclient.MsgHello)
	slow.subscribe(sub{"type": "subscribe", "coalesce": false})
	fast := e.dial("view-a")
	fast.subscribe(sub{"type": "subscribe", "coalesce": false})

	const n, chunk = 4000, 200
	extra := strings.Repeat("x", 200) // names make messages bigger
	seen := make(chan int, n)
	fastErr := make(chan error, 1)
	go func() { // counts tasks without decoding them
		total := 0
		for total < n {
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
			_, data, err := fast.conn.Read(ctx)
			cancel()
			if err != nil {
				fastErr <- fmt.Errorf("after %d changes: %w", total, err)
				return
			}
			total += bytes.Count(data, []byte(`"taskID":`))
			seen <- total
		}
		fastErr <- nil
	}()
	// The publisher waits for the fast client after each chunk, so the fast
	// one is never far behind however the test is scheduled, while the slow
	// one falls behind by everything.
	for i := 0; i < n; {
		for range chunk {
			e.publish(ev("a", fmt.Sprintf("s%04d", i), "job-"+extra, 1, apollo.StatusPending))
			i++
		}
		for got := 0; got < i; {
			select {
			case got = <-seen:
			case err := <-fastErr:
				if err != nil {
					t.Fatalf("fast client: %v", err)
				}
				// It saw all n: its last count and its nil were both
				// ready, and select took the nil. Keep it for below.
				got, fastErr = n, closedNil()
			}
		}
	}
	select {
	case r := <-killed:
		if r != reasonTooSlow {
			t.Fatalf("killed for %q", r)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the slow client was never closed")
	}
	if err := <-fastErr; err != nil {
		t.Fatalf("fast client: %v", err)
	}
	// The slow client, reading again, drains what was in flight and then
	// reads the reason.
	for {
		_, err := slow.tryRead(testwait.Timeout(t))
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater || ce.Reason != reasonTooSlow {
			t.Fatalf("slow client ended with %v", err)
		}
		break
	}
	if s := e.hub.Stats(); s.ClosedSlow != 1 {
		t.Errorf("closedSlow %d", s.ClosedSlow)
	}
}

// closedNil is a channel that yields nil, as many times as asked.
func closedNil() chan error {
	c := make(chan error)
	close(c)
	return c
}
