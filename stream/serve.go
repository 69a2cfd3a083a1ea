package stream

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/coder/websocket"
)

// Serve runs one stream connection (GET /api/v1/stream) until it ends.
// The caller has authenticated the request as who. An error is returned
// before the upgrade only, for the caller to answer: the hub is stopping.
// After the upgrade the connection is the hub's, and Serve returns nil.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, who Caller) error {
	if !isUpgrade(r) {
		return h.answerProbe(w, r, who)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.stats.refused.Add(1)
		return errShuttingDown()
	}
	if err := h.admit(who.Tenant); err != nil {
		h.mu.Unlock()
		h.stats.overLimit.Add(1)
		return err
	}
	h.clientsWG.Add(1)
	h.mu.Unlock()
	defer h.clientsWG.Done()
	defer h.release(who.Tenant)

	// The HTTP server's read and write timeouts are for requests; a stream
	// lives for hours and keeps itself alive with heartbeats and pings.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(largerWriteBuffer{w, rc}, r, &websocket.AcceptOptions{
		Subprotocols:   []string{streamProtocol},
		OriginPatterns: h.opts.AllowedOrigins,
	})
	if err != nil { // Accept has answered (403 for a foreign origin)
		h.stats.refused.Add(1)
		h.log.Debug("stream connection refused", "err", err, "origin", r.Header.Get("Origin"))
		return nil
	}
	conn.SetReadLimit(maxClientMessage)
	c := &client{h: h, conn: conn, who: who, wake: make(chan struct{}, 1), dead: make(chan struct{})}
	if !h.join(c) {
		conn.Close(websocket.StatusGoingAway, reasonShutdown)
		return nil
	}
	h.stats.accepted.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	// The ping ticker exists before the writer sends the hello: a test
	// that counts a fake clock's timers once it has the hello sees it.
	ping := h.opts.Clock.NewTicker(h.opts.PingInterval)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.writeLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		c.pingLoop(ctx, ping)
	}()
	c.readLoop(ctx)
	c.kill("")
	cancel()
	wg.Wait()
	conn.CloseNow()
	h.leave(c)
	return nil
}

func errShuttingDown() error {
	return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the stream is shutting down", Hint: "reconnect in a moment"}
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "websocket") {
				return true
			}
		}
	}
	return false
}

// answerProbe answers a request for the stream's address that does not
// ask for a WebSocket: what would stand in the way of one now (503, 429
// with the reason), else 426 from the WebSocket library. A browser whose
// WebSocket failed to open asks this to learn why (it is not told), so it
// is not a connection: it is not counted, and it takes no place under
// the limits, even for a moment. Counted, each refused dashboard showed
// as two streams over the limit in apollo_stream_connections_total.
func (h *Hub) answerProbe(w http.ResponseWriter, r *http.Request, who Caller) error {
	h.mu.Lock()
	closed, err := h.closed, h.overLimit(who.Tenant)
	h.mu.Unlock()
	if closed {
		return errShuttingDown()
	}
	if err != nil {
		return err
	}
	_, _ = websocket.Accept(w, r, nil) // fails, answering 426
	return nil
}

// admit counts a connection of tenant in, unless that would pass a
// limit; h.mu is held.
func (h *Hub) admit(tenant string) error {
	if err := h.overLimit(tenant); err != nil {
		return err
	}
	h.open++
	h.openByTenant[tenant]++
	return nil
}

// overLimit says which limit one more connection of tenant would pass,
// or nil; h.mu is held.
func (h *Hub) overLimit(tenant string) error {
	if n := h.openByTenant[tenant]; n >= h.opts.TenantClients {
		return &apollo.Error{Code: apollo.ETOOMANY, Message: fmt.Sprintf("tenant %q has %d streams open, its limit", tenant, n),
			Hint: "close the dashboards and terminals it does not need; the server's limits.tenant_stream_clients sets the limit"}
	}
	if h.open >= h.opts.MaxClients {
		return &apollo.Error{Code: apollo.ETOOMANY, Message: fmt.Sprintf("the server has %d streams open, its limit", h.open),
			Hint: "close the dashboards and terminals nobody needs; the server's limits.stream_clients sets the limit"}
	}
	return nil
}

// release counts out a connection that admit counted in, and tells the
// tests waiting for progress that a place is free.
func (h *Hub) release(tenant string) {
	h.mu.Lock()
	h.open--
	if h.openByTenant[tenant]--; h.openByTenant[tenant] == 0 {
		delete(h.openByTenant, tenant)
	}
	h.mu.Unlock()
	h.progress.Broadcast()
}
