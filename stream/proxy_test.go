package stream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// idleProxy is a TCP proxy like many in front of servers: it drops a connection
// that carried no data for idle, and it swallows WebSocket ping and pong
// frames, which therefore neither pass nor count as traffic. Its idle
// timers run on the test's clock, as the hub's heartbeats do, so how busy
// the machine is cannot make a connection look idle.
type idleProxy struct {
	ln        net.Listener
	target    string
	clock     apollo.Clock
	idle      time.Duration
	dropped   atomic.Int64  // connections dropped for being idle
	control   atomic.Int64  // ping/pong frames swallowed
	swallowed chan struct{} // a token after each swallowed frame
	wg        sync.WaitGroup
}

func newIdleProxy(t *testing.T, clock apollo.Clock, target string, idle time.Duration) *idleProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &idleProxy{ln: ln, target: target, clock: clock, idle: idle, swallowed: make(chan struct{}, 1)}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *idleProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		var once sync.Once
		gone := make(chan struct{})
		closeBoth := func() { once.Do(func() { in.Close(); out.Close(); close(gone) }) }
		timer := p.clock.NewTimer(p.idle)
		p.wg.Add(3)
		go func() {
			defer p.wg.Done()
			defer timer.Stop()
			select {
			case <-timer.C():
				p.dropped.Add(1)
				closeBoth()
			case <-gone:
			}
		}()
		for _, dir := range [][2]net.Conn{{in, out}, {out, in}} {
			go func() {
				defer p.wg.Done()
				defer closeBoth()
				p.pump(dir[0], dir[1], timer)
			}()
		}
	}
}

// pump copies the HTTP upgrade verbatim, then frame by frame: data frames
// pass and reset the idle timer, ping and pong frames are dropped.
func (p *idleProxy) pump(src, dst net.Conn, timer apollo.Timer) {
	r := bufio.NewReader(src)
	var head []byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		b, err := r.ReadByte()
		if err != nil {
			return
		}
		head = append(head, b)
	}
	if _, err := dst.Write(head); err != nil {
		return
	}
	for {
		frame, opcode, err := readFrame(r)
		if err != nil {
			return
		}
		if opcode == 0x9 || opcode == 0xA {
			p.control.Add(1)
			select {
			case p.swallowed <- struct{}{}:
			default:
			}
			continue
		}
		if opcode <= 0x2 { // continuation, text, binary
			timer.Reset(p.idle)
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
	}
}

// readFrame reads one whole WebSocket frame (RFC 6455 §5.2), masked or not.
func readFrame(r *bufio.Reader) (frame []byte, opcode byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, 0, err
	}
	frame = append(frame, h[:]...)
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return nil, 0, err
		}
		frame = append(frame, ext[:]...)
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return nil, 0, err
		}
		frame = append(frame, ext[:]...)
		n = binary.BigEndian.Uint64(ext[:])
	}
	if h[1]&0x80 != 0 { // masked: client to server
		n += 4
	}
	start := len(frame)
	frame = append(frame, make([]byte, n)...)
	if _, err := io.ReadFull(r, frame[start:]); err != nil {
		return nil, 0, err
	}
	return frame, h[0] & 0x0f, nil
}

// TestStreamThroughIdleProxy: behind a proxy that drops connections idle
// for N and swallows pings, the business heartbeat at N/3 keeps the
// connection up for more than 3N; with heartbeats off the proxy drops it.
// The hub and the proxy share a fake clock: each step moves it N/3 and
// waits for what the step must bring.
func TestStreamThroughIdleProxy(t *testing.T) {
	t.Parallel()
	const idle = 30 * time.Second
	t.Run("heartbeat", func(t *testing.T) {
		t.Parallel()
		// Pings are on and swallowed: the client's heartbeat echo is what
		// tells the server the client is alive (the missed-pong limit is
		// out of the way; it has its own test, TestStreamNoPong).
		clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
		e := newStreamEnv(t, func(o *Options) {
			o.Clock, o.HeartbeatInterval, o.PingInterval, o.MissedPongs = clock, idle/3, idle/10, 1000
		})
		p := newIdleProxy(t, clock, strings.TrimPrefix(e.srv.URL, "http://"), idle)
		c := dialVia(t, "ws://"+p.ln.Addr().String()+"/api/v1/stream") // the hello passed: the idle timer runs
		start := clock.Now()
		beats := 0
		for clock.Now().Sub(start) < 3*idle || beats < 12 {
			clock.Advance(idle / 3)
			m, err := c.tryRead(testwait.Timeout(t))
			if err != nil {
				t.Fatalf("dropped after %v and %d heartbeats: %v", clock.Now().Sub(start), beats, err)
			}
			if m.Type != apiclient.MsgHeartbeat {
				t.Fatalf("got %+v, want a heartbeat", m)
			}
			beats++
			c.send(sub{"type": "heartbeat"})
		}
		waitSwallowed(t, p)
		if p.dropped.Load() != 0 || p.control.Load() == 0 {
			t.Errorf("dropped %d, control frames swallowed %d", p.dropped.Load(), p.control.Load())
		}
	})
	t.Run("no heartbeat", func(t *testing.T) {
		t.Parallel()
		clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
		e := newStreamEnv(t, func(o *Options) {
			o.Clock, o.HeartbeatInterval, o.PingInterval, o.MissedPongs = clock, -1, idle/3, 1000
		})
		p := newIdleProxy(t, clock, strings.TrimPrefix(e.srv.URL, "http://"), idle)
		c := dialVia(t, "ws://"+p.ln.Addr().String()+"/api/v1/stream")
		clock.Advance(idle / 3) // a ping, swallowed: not traffic
		waitSwallowed(t, p)
		clock.Advance(idle - idle/3)
		for {
			if _, err := c.tryRead(testwait.Timeout(t)); err != nil {
				break
			}
		}
		if p.dropped.Load() != 1 || p.control.Load() == 0 {
			t.Errorf("dropped %d, control frames swallowed %d", p.dropped.Load(), p.control.Load())
		}
	})
}

// waitSwallowed waits until the proxy has swallowed a control frame.
func waitSwallowed(t *testing.T, p *idleProxy) {
	t.Helper()
	select {
	case <-p.swallowed:
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("no ping reached the proxy (%d control frames swallowed)", p.control.Load())
	}
}

func dialVia(t *testing.T, url string) *wsClient {
	conn, _, err := websocket.Dial(testwait.Context(t), url, &websocket.DialOptions{Subprotocols: subprotocols("view-a")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	c := &wsClient{t: t, conn: conn}
	c.readType(apiclient.MsgHello)
	return c
}
