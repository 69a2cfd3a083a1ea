package tui

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// maxFrame bounds one server message: a snapshot of 1 000 tasks with their
// extra fields is well under it.
const maxFrame = 32 << 20

// wsConn is one stream connection. Close is safe to call more than once
// and from any goroutine.
type wsConn struct {
	c *websocket.Conn
	// last is closed when the newest write asked for has ended (nil:
	// none asked). Only the dashboard's Update touches it: each write
	// waits for the one asked before it (Model.send).
	last chan struct{}
}

func (w *wsConn) Close() error { return w.c.CloseNow() }

// dialStream opens the stream. The token goes in the Authorization header
// (non-browser clients may; docs/stream.md). A refusal of the token is an
// EUNAUTHORIZED *apollo.Error, which the dashboard does not retry.
func dialStream(ctx context.Context, url, token string, hc *http.Client) (*wsConn, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				return nil, &apollo.Error{Code: apollo.EUNAUTHORIZED, Message: "the server refused the token", Hint: "pass a viewer token with --token or APOLLO_TOKEN"}
			case http.StatusForbidden:
				return nil, &apollo.Error{Code: apollo.EFORBIDDEN, Message: "the server refused the stream (403)", Hint: "check the token's role and the server's allowed origins"}
			}
			if e := refusal(resp); e != nil {
				return nil, e
			}
			return nil, fmt.Errorf("opening the stream: the server answered %s", resp.Status)
		}
		return nil, unreachable(err)
	}
	c.SetReadLimit(maxFrame)
	return &wsConn{c: c}, nil
}

// refusal is the API's reason for not opening the stream, from the body
// of its answer (the dial keeps its first KiB): a 429 says which limit
// was reached and what to do, which the status alone does not. nil when
// the body is not the API's error.
func refusal(resp *http.Response) *apollo.Error {
	if resp.Body == nil {
		return nil
	}
	var body struct {
		Error *apollo.Error `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if json.Unmarshal(raw, &body) != nil || body.Error == nil || body.Error.Message == "" {
		return nil
	}
	e := *body.Error
	e.Code = cmp.Or(e.Code, apiclient.CodeOf(resp.StatusCode))
	e.Message = "the server refused the stream (" + strconv.Itoa(resp.StatusCode) + "): " + e.Message
	return &e
}

// errIdle says the server went quiet for longer than its heartbeats allow.
var errIdle = errors.New("no message from the server in time")

// read waits for the next message. When idle > 0 and nothing arrives for
// that long on clock, the connection is treated as dead: the server sends
// a heartbeat every few seconds, so silence means a network that dropped
// the connection without telling either end.
func (w *wsConn) read(ctx context.Context, clock apollo.Clock, idle time.Duration) ([]byte, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := func() bool { return false }
	if idle > 0 {
		stop = watchdog(clock, idle, cancel)
	}
	typ, data, err := w.c.Read(rctx)
	if stop() {
		return nil, errIdle
	}
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("connection lost: %w", err)
	}
	if typ != websocket.MessageText {
		return nil, errors.New("the server sent a binary message, which is not part of the protocol")
	}
	return data, nil
}

// watchdog calls cancel when d passes on clock. stop disarms it, waits for
// its goroutine, and reports whether it fired.
func watchdog(clock apollo.Clock, d time.Duration, cancel context.CancelFunc) (stop func() bool) {
	t := clock.NewTimer(d)
	done := make(chan struct{})
	exited := make(chan struct{})
	var fired atomic.Bool
	go func() {
		defer close(exited)
		select {
		case <-t.C():
			fired.Store(true)
			cancel()
		case <-done:
		}
	}()
	return func() bool {
		close(done)
		<-exited
		t.Stop()
		return fired.Load()
	}
}

// write sends one message.
func (w *wsConn) write(ctx context.Context, data []byte) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return w.c.Write(wctx, websocket.MessageText, data)
}

// closeReason is what to tell the user about a connection that ended.
func closeReason(err error) string {
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce) && ce.Reason != "":
		return ce.Reason
	case errors.As(err, &ce):
		return "closed by the server (" + ce.Code.String() + ")"
	case errors.Is(err, errIdle):
		return err.Error()
	}
	var ae *apollo.Error
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return err.Error()
}

// unreachable shortens a failure to connect to what a person needs: the
// dial's own reason (connection refused, no such host, a timeout) rather
// than every layer that wrapped it.
func unreachable(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return fmt.Errorf("cannot reach the server: %w", op.Err)
	}
	return err
}
