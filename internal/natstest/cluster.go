// Package natstest starts NATS servers with JetStream for tests: one, or
// a cluster of several whose servers can be stopped and started again
// with their stores.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/apollo-11/apollo/internal/testwait"
)

// Cluster is a NATS cluster of servers with JetStream on 127.0.0.1.
type Cluster struct {
	t       testing.TB
	opts    []*server.Options
	Servers []*server.Server // nil where stopped
}

// NewCluster starts n servers clustered with each other, each with its
// own store, and waits until their JetStream has a leader that hears
// every other server (WaitReady). They are shut down when the test ends.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := NewClusterStarting(t, n, n)
	c.WaitReady()
	return c
}

// NewClusterStarting is NewCluster with only the first running servers
// started, and no wait: a cluster that is forming, whose other servers
// Start starts later.
func NewClusterStarting(t testing.TB, n, running int) *Cluster {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &Cluster{t: t, Servers: make([]*server.Server, n)}
	for i, p := range ports {
		c.opts = append(c.opts, &server.Options{ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "apollo-test", Host: "127.0.0.1", Port: p}, Routes: routes})
	}
	t.Cleanup(func() {
		for i := range c.Servers {
			c.Stop(i)
		}
	})
	for i := range running {
		c.start(i)
	}
	return c
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	// The options of a server that ran once are its own again: a copy.
	o := *c.opts[i]
	ns, err := server.NewServer(&o)
	if err != nil {
		c.t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		c.t.Fatalf("NATS server n%d did not start", i)
	}
	c.Servers[i] = ns
}

// Start starts server i again, with its store, after Stop.
func (c *Cluster) Start(i int) { c.t.Helper(); c.start(i) }

// Stop shuts server i down and waits until it is gone.
func (c *Cluster) Stop(i int) {
	if ns := c.Servers[i]; ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		c.Servers[i] = nil
	}
}

// URLs are the client URLs of the running servers.
func (c *Cluster) URLs() []string {
	var urls []string
	for _, ns := range c.Servers {
		if ns != nil {
			urls = append(urls, ns.ClientURL())
		}
	}
	return urls
}

// WaitReady waits until a running server leads JetStream and sees every
// other running server current, and every stopped one offline: until
// then a stream's copies cannot be placed.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(testwait.Timeout(c.t))
	for !c.ready() {
		if time.Now().After(deadline) {
			c.t.Fatalf("the NATS cluster's JetStream not ready within %s", testwait.Timeout(c.t))
		}
		time.Sleep(20 * time.Millisecond) // polled: the server has no signal to wait on
	}
}

func (c *Cluster) ready() bool {
	for _, ns := range c.Servers {
		if ns == nil || !ns.JetStreamIsLeader() {
			continue
		}
		jsz, err := ns.Jsz(nil)
		if err != nil || jsz.Meta == nil {
			return false
		}
		running := map[string]bool{}
		for _, other := range c.Servers {
			if other != nil {
				running[other.Name()] = true
			}
		}
		seen := 0
		for _, p := range jsz.Meta.Replicas {
			switch {
			case running[p.Name] && (!p.Current || p.Offline):
				return false
			case !running[p.Name] && !p.Offline:
				return false
			case running[p.Name]:
				seen++
			}
		}
		return seen == len(running)-1
	}
	return false
}

// Leader is the index of the running server that leads JetStream, or -1.
func (c *Cluster) Leader() int {
	for i, ns := range c.Servers {
		if ns != nil && ns.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// StopAllBut stops every server but server i.
func (c *Cluster) StopAllBut(i int) {
	for j := range c.Servers {
		if j != i {
			c.Stop(j)
		}
	}
}
