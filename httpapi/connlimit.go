package httpapi

import (
	"container/list"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

// ConnLimit is a listener that holds at most a number of connections open
// (limits.connections). Every connection costs a file descriptor before
// anyone knows who opened it: without a bound, one anonymous client that
// opens connections and sends nothing, or half a header, or one request to
// /healthz and then keeps the connection, takes every descriptor the
// process may have, and no reporter's event is taken until the timeouts
// close them (two minutes for an idle one).
//
// Past the limit, a new connection closes the one that has waited longest
// for a request: a connection is waiting from its accept until a request's
// header has been read, and again from the end of each handler until the
// next header. Of the waiting ones, a connection is never closed while it
// holds a whole request header the server has not got to: read by its
// goroutine and being parsed, or still in the socket (a look at what it
// holds, without taking it: a reporter that sent its request at once, on
// a machine too busy to read it yet). When every waiting one does, the new
// connection is closed instead, as when every one is serving (a reporter
// was closed for a flood's newest connections, before:
// TestConnectionFloodLeavesRoomForReporters, in loaded runs). A connection inside a handler, or taken over by the stream,
// is never closed for another; when every connection is, the new one is
// closed instead. So a flood of idle or slow connections only ever pushes
// out its own oldest, and a client that sends its request at once is
// served. Each closing is counted (Stats) and logged, at most once a
// minute.
//
// Serve the http.Server through Watch, which hooks the server's handler
// and connection states; Accept must be called from one goroutine (the
// server's).
type ConnLimit struct {
	net.Listener
	max   int
	log   *slog.Logger
	clock apollo.Clock

	mu      sync.Mutex
	open    int
	waiting list.List  // *limitedConn not in a handler, longest waiting first
	peek    [4096]byte // what victim looks at in a socket; under mu

	accepted, evicted, refused atomic.Int64
	warned                     time.Time // last log line; under mu
	unlogged                   int64     // closings since it; under mu
}

// LimitConnections wraps ln: at most n connections open at once; clock
// (nil: the system clock) paces the log lines.
func LimitConnections(ln net.Listener, n int, log *slog.Logger, clock apollo.Clock) *ConnLimit {
	if clock == nil {
		clock = apollo.SystemClock
	}
	return &ConnLimit{Listener: ln, max: max(n, 1), log: log, clock: clock}
}

// limitedConn is one accepted connection; l.mu guards its fields.
type limitedConn struct {
	net.Conn
	l        *ConnLimit
	elem     *list.Element // in l.waiting while waiting
	busy     int           // handlers running (HTTP/2 runs several)
	parsing  atomic.Bool   // its last Read returned bytes and no Read followed: they are being parsed
	hijacked bool
	closed   bool
}

// Accept returns the next connection, closing the longest-waiting one
// when the limit is reached.
func (l *ConnLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		full := l.open >= l.max
		var victim *limitedConn
		if full {
			victim = l.victim()
		}
		l.mu.Unlock()
		// Counted before closing: whoever sees the close may read the
		// counts next.
		if full && victim == nil {
			l.refused.Add(1)
			c.Close()
			l.warn("refused a connection: every connection is serving a request or about to", c.RemoteAddr())
			continue
		}
		if victim != nil {
			l.evicted.Add(1)
			victim.Close()
			l.warn("closed the connection that waited longest for a request", victim.RemoteAddr())
		}
		lc := &limitedConn{Conn: c, l: l}
		l.mu.Lock()
		l.open++
		lc.elem = l.waiting.PushBack(lc)
		l.mu.Unlock()
		l.accepted.Add(1)
		return lc, nil
	}
}

// victim takes off the waiting list the connection to close for a new
// one: the longest waiting of those that hold no whole request header the
// server has not got to; nil when none. l.mu is held.
func (l *ConnLimit) victim() *limitedConn {
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		lc := e.Value.(*limitedConn)
		if lc.parsing.Load() || holdsRequest(lc.Conn, l.peek[:]) {
			continue
		}
		l.unwait(lc)
		return lc
	}
	return nil
}

// warn logs a closing, at most once a minute, with the count since the
// last line.
func (l *ConnLimit) warn(what string, from net.Addr) {
	now := l.clock.Now()
	l.mu.Lock()
	l.unlogged++
	if !l.warned.IsZero() && now.Sub(l.warned) < time.Minute {
		l.mu.Unlock()
		return
	}
	n := l.unlogged
	l.warned, l.unlogged = now, 0
	l.mu.Unlock()
	l.log.Warn("connections: "+l.limitText()+" reached; "+what,
		"remote", from.String(), "closed_or_refused", n,
		"hint", "many connections that send no request: a client that holds them (see apollo_http_connections_total); raise limits.connections, and the process's file limit, if they are real clients")
}

func (l *ConnLimit) limitText() string {
	return "the limit of " + strconv.Itoa(l.max) + " open connections (limits.connections)"
}

// Watch hooks srv's handler and connection states to l, so that it knows
// which connections wait for a request.
func (l *ConnLimit) Watch(srv *http.Server) {
	next, prevState := srv.Handler, srv.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if lc := unwrap(c); lc != nil {
			return context.WithValue(ctx, limitedConnKey{}, lc)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateHijacked {
			if lc := unwrap(c); lc != nil {
				l.mu.Lock()
				lc.hijacked = true
				l.unwait(lc)
				l.mu.Unlock()
			}
		}
		if prevState != nil {
			prevState(c, st)
		}
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(limitedConnKey{}).(*limitedConn)
		if lc == nil {
			next.ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		lc.busy++
		l.unwait(lc)
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			lc.busy--
			if lc.busy == 0 && !lc.hijacked && !lc.closed {
				lc.elem = l.waiting.PushBack(lc)
			}
			l.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

type limitedConnKey struct{}

// unwrap finds the limitedConn under c (a TLS connection's included).
func unwrap(c net.Conn) *limitedConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	lc, _ := c.(*limitedConn)
	return lc
}

// unwait takes lc off the waiting list; l.mu is held.
func (l *ConnLimit) unwait(lc *limitedConn) {
	if lc.elem != nil {
		l.waiting.Remove(lc.elem)
		lc.elem = nil
	}
}

// Read notes whether what the server read is being parsed: bytes came,
// and the server did not come back for more.
func (c *limitedConn) Read(p []byte) (int, error) {
	c.parsing.Store(false)
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.parsing.Store(true)
	}
	return n, err
}

// Close closes the connection once, and frees its place.
func (c *limitedConn) Close() error {
	l := c.l
	l.mu.Lock()
	if c.closed {
		l.mu.Unlock()
		return nil
	}
	c.closed = true
	l.unwait(c)
	l.open--
	l.mu.Unlock()
	return c.Conn.Close()
}

// ConnStats are the listener's counters.
type ConnStats struct {
	Open     int   `json:"open"`
	Limit    int   `json:"limit"`
	Waiting  int   `json:"waiting"`  // connections not in a handler now
	Accepted int64 `json:"accepted"` // since the start
	Evicted  int64 `json:"evicted"`  // closed to make room for a new one
	Refused  int64 `json:"refused"`  // closed at once: every connection was serving, or about to
}

// Stats reads the counters.
func (l *ConnLimit) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ConnStats{Open: l.open, Limit: l.max, Waiting: l.waiting.Len(),
		Accepted: l.accepted.Load(), Evicted: l.evicted.Load(), Refused: l.refused.Load()}
}

var (
	figConns = &apollo.Family{Name: "apollo_http_connections", Kind: apollo.FigureGauge,
		Help: "HTTP connections open now, streams included."}
	figConnsLimit = &apollo.Family{Name: "apollo_http_connections_limit", Kind: apollo.FigureGauge,
		Help: "The most HTTP connections held open at once (limits.connections, lowered to fit the file limit)."}
	figConnsTotal = &apollo.Family{Name: "apollo_http_connections_total", Kind: apollo.FigureCounter, Labels: []string{"result"},
		Help: "HTTP connections accepted; evicted: closed while waiting for a request, to make room; refused: closed at once, every connection was serving a request or about to."}
)

// Figures writes the listener's figures (GET /metrics).
func (s ConnStats) Figures(w apollo.FigureWriter) {
	w.Add(figConns, float64(s.Open))
	w.Add(figConnsLimit, float64(s.Limit))
	w.Add(figConnsTotal, float64(s.Accepted), "accepted")
	w.Add(figConnsTotal, float64(s.Evicted), "evicted")
	w.Add(figConnsTotal, float64(s.Refused), "refused")
}
