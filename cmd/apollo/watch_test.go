package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore/redistest"

	"github.com/apollo-11/apollo/redisstore"
)

// fakeProcess beats in Redis as a process of kind would, until it is
// killed (its beat then expires) or stopped (it says so).
type fakeProcess struct {
	kill, stopped chan struct{}
}

func beatLike(t *testing.T, ctx context.Context, url, prefix, kind, id string, every time.Duration) *fakeProcess {
	c, err := redisstore.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeProcess{kill: make(chan struct{}), stopped: make(chan struct{})}
	write := func(stopped bool) {
		b, _ := json.Marshal(redisstore.Beat{Component: kind, ID: id, Host: "h", PID: 1, At: time.Now(), Every: every, Stopped: stopped})
		if err := c.Set(ctx, prefix+":heartbeat:"+kind+":"+id, b, 3*every).Err(); err != nil {
			t.Error(err)
		}
	}
	write(false)
	go func() {
		defer close(p.stopped)
		defer c.Close()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				write(false)
			case <-p.kill:
				return
			}
		}
	}()
	t.Cleanup(func() { p.die() })
	return p
}

// die stops beating as a killed process does: nothing more is written.
func (p *fakeProcess) die() {
	select {
	case <-p.kill:
	default:
		close(p.kill)
	}
	<-p.stopped
}

type notified struct {
	kind, summary string
	running       map[string]int
}

// The watch tells a process that dies among others of its kind, then a
// kind with none left, with who was lost; a scheduler that shuts down
// cleanly is not news.
func TestComponentWatch(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	_, prefix := redistest.Client(t)
	ctx := context.Background()
	const every = 300 * time.Millisecond
	bus := beatLike(t, ctx, url, prefix, "bus", "b1", every)
	a1 := beatLike(t, ctx, url, prefix, "alert", "a1", every)
	a2 := beatLike(t, ctx, url, prefix, "alert", "a2", every)
	c, err := redisstore.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s1 := redisstore.NewHeartbeat(c, prefix, "sched", "s1", every)
	s1.Start(ctx)

	got := make(chan notified, 10)
	w := startComponentWatch(ctx, c, prefix, every, slog.New(slog.DiscardHandler), func(kind, summary string, running map[string]int) {
		got <- notified{kind, summary, running}
	})
	defer w.stop()
	next := func(what string) notified {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("no notice of %s", what)
			return notified{}
		}
	}
	eventually(t, 30*time.Second, "the watch sees every process", func() bool {
		st := w.status("", nil).(map[string]any)
		return st["alert"].(map[string]any)["alive"] == 2 && st["sched"].(map[string]any)["alive"] == 1
	})

	a2.die()
	n := next("a2 lost")
	if n.kind != "alert" || !strings.Contains(n.summary, "the alert process a2 (host h, pid 1) stopped sending heartbeats without shutting down") ||
		!strings.Contains(n.summary, "alert processes still running: 1") || n.running["alert"] != 1 {
		t.Errorf("a2 lost: %+v", n)
	}

	s1.Stop(context.Background()) // a clean stop: not told
	a1.die()
	n = next("no alert process left")
	if n.kind != "alert" || !strings.HasPrefix(n.summary, "no alert process is running: the alert process a1 ") || n.running["alert"] != 0 {
		t.Errorf("no alert left: %+v", n)
	}

	bus.die()
	n = next("no bus left")
	if n.kind != "bus" || !strings.HasPrefix(n.summary, "no bus process is running: the bus process b1 ") {
		t.Errorf("no bus left: %+v", n)
	}
	st := w.status("", nil).(map[string]any)["bus"].(map[string]any)
	if st["alive"] != 0 || st["downSince"].(time.Time).IsZero() {
		t.Errorf("status of the bus: %v", st)
	}
}
