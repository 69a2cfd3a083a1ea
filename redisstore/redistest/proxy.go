package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy to Redis that a test can cut off: broken, it drops
// every connection and closes new ones as they come.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	broken bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port), stopped when the test
// ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.breakAll()
		p.wg.Wait()
	})
	return p
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.broken {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Go(func() { pipe(up, c) })
		p.wg.Go(func() { pipe(c, up) })
	}
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// SetBroken cuts every connection and refuses new ones (true), or lets
// them through again (false).
func (p *Proxy) SetBroken(b bool) {
	p.mu.Lock()
	p.broken = b
	p.mu.Unlock()
	if b {
		p.breakAll()
	}
}

func (p *Proxy) breakAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Close stops the proxy: its connections are cut and new ones refused,
// as by a Redis that is not running.
func (p *Proxy) Close() {
	p.ln.Close()
	p.SetBroken(true)
}
