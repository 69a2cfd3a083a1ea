package harness

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy a drill puts between a process and a service it
// depends on (Redis, a webhook) to cut the service off and bring it back.
// Cut closes every connection and the listener, so new connections are
// refused, as when the service is down; Restore listens on the same
// address again.
type Proxy struct {
	target string
	addr   string

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	accepted int64
	cuts     int
	wg       sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection
// to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.addr }

// Accepted is how many connections the proxy has taken so far.
func (p *Proxy) Accepted() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Cut or Close
			}
			p.mu.Lock()
			if p.ln != ln { // cut between Accept and here
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.accepted++
			p.conns[c] = struct{}{}
			p.mu.Unlock()
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if _, live := p.conns[c]; !live { // cut while dialling
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done // one side ended: end both
	p.drop(c)
	p.drop(up)
	<-done
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Cut closes the listener and every open connection: clients see their
// connections reset and new ones refused until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.cuts++
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as from a dead server, not a polite close
		}
		c.Close()
	}
}

// Restore listens on the proxy's address again after Cut.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return errors.New("proxy: Restore without Cut")
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close cuts the proxy for good and waits for its accept loop.
func (p *Proxy) Close() {
	p.Cut()
	p.wg.Wait()
}
