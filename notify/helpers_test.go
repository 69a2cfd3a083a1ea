package notify

import (
	"context"
	"sync"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// watchLog is an AttemptLog that also hands every Attempt to the test.
type watchLog struct {
	AttemptLog
	c chan Attempt
}

func newWatchLog() *watchLog {
	return &watchLog{AttemptLog: NewMemoryLog(100000), c: make(chan Attempt, 100000)}
}

func (w *watchLog) Record(a Attempt) { w.AttemptLog.Record(a); w.c <- a }

// next waits for the next Attempt, failing the test after testwait's
// real-time safety net.
func (w *watchLog) next(t *testing.T) Attempt {
	t.Helper()
	select {
	case a := <-w.c:
		return a
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no attempt recorded")
		return Attempt{}
	}
}

// sink is a Notifier that records what reaches it and when.
type sink struct {
	clock apollo.Clock
	mu    sync.Mutex
	got   []received
	c     chan received
}

type received struct {
	at time.Time
	m  *Message
}

func newSink(clock apollo.Clock) *sink { return &sink{clock: clock, c: make(chan received, 100000)} }

func (s *sink) Notify(_ context.Context, m *Message) (bool, error) {
	r := received{at: s.clock.Now(), m: m}
	s.mu.Lock()
	s.got = append(s.got, r)
	s.mu.Unlock()
	s.c <- r
	return false, nil
}

func (s *sink) all() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

func (s *sink) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-s.c:
		return r
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("nothing delivered")
		return received{}
	}
}

func note(id, key string, channels ...string) apollo.Notification {
	return apollo.Notification{
		Kind: apollo.NotifyFiring, Channels: channels, DedupKey: key, At: t0,
		Alert: apollo.Alert{ID: id, Rule: "batch_failures", Group: "batch_", State: apollo.AlertFiring,
			Severity: apollo.SeverityCritical, Summary: "failed_rate 0.2 > 0.05", Value: 0.2, StartedAt: t0},
	}
}

// startDispatcher builds and starts a dispatcher on a fake clock and stops
// it when the test ends.
func startDispatcher(t *testing.T, clk *apollo.FakeClock, log AttemptLog, chs ...Channel) *Dispatcher {
	t.Helper()
	d, err := NewDispatcher(chs, Options{Clock: clk, Log: log, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d
}
