package alert_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
)

// stamped is a Sender that notes when each notification arrived, on the
// real clock.
type stamped struct {
	mu  sync.Mutex
	at  map[string]time.Time // rule -> when Send was called
	got chan struct{}
}

func (s *stamped) Send(n apollo.Notification) {
	s.mu.Lock()
	s.at[n.Alert.Rule] = time.Now()
	s.mu.Unlock()
	s.got <- struct{}{}
}

// The first failure of an event rule reaches the Sender well within the
// 1 s the design promises: measured on the real clock, from Apply to
// Send, with the dedup lock taken, for 500 groups opened in a burst. A
// measurement: not parallel, so the package's other tests do not share its
// second, and skipped under -short (the race detector's pass).
func TestEventNotificationLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("a latency measurement on the real clock; run without -short")
	}
	const groups = 500
	var src strings.Builder
	for i := range groups {
		fmt.Fprintf(&src, "RULE ev%d task_prefix: \"job_%03d_\" ON: failed NOTIFY: ops\n", i, i)
	}
	sink := &stamped{at: map[string]time.Time{}, got: make(chan struct{}, groups)}
	e, err := alert.New(alert.Options{Rules: parse(t, src.String()), Store: newTable(), Sender: sink, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	sent := make([]time.Time, groups)
	for i := range groups {
		c := finish(nil, "", fmt.Sprintf("job_%03d_x", i), fmt.Sprint("r", i), apollo.StatusFailed, time.Now().UnixMilli(), 10)
		sent[i] = time.Now()
		e.Apply(&c)
	}
	for range groups {
		select {
		case <-sink.got:
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("not every first failure was notified")
		}
	}
	lat := make([]time.Duration, groups)
	sink.mu.Lock()
	for i := range groups {
		lat[i] = sink.at[fmt.Sprint("ev", i)].Sub(sent[i])
	}
	sink.mu.Unlock()
	slices.Sort(lat)
	p50, p99, worst := lat[groups/2], lat[groups*99/100], lat[groups-1]
	t.Logf("event → Sender.Send over %d groups: p50 %v, p99 %v, max %v", groups, p50, p99, worst)
	if worst > time.Second {
		t.Fatalf("the slowest first notification took %v, over 1s", worst)
	}
}

// BenchmarkApply: the bus calls Apply for every change. Most changes
// match no event rule ("miss"); a match in an open group only counts.
func BenchmarkApply(b *testing.B) {
	var src strings.Builder
	for i := range 100 {
		fmt.Fprintf(&src, "RULE ev%d task_prefix: \"job_%03d_\" ON: failed, timeout NOTIFY: ops\n", i, i)
	}
	e, err := alert.New(alert.Options{Rules: parse(b, src.String()), Store: newTable(), Sender: alerttestSink(), Logger: quiet,
		Clock: apollo.NewFakeClock(t0)})
	if err != nil {
		b.Fatal(err)
	}
	miss := finish(nil, "", "job_007_x", "r1", apollo.StatusSuccess, t0.UnixMilli(), 10)
	hit := finish(nil, "", "job_007_x", "r2", apollo.StatusFailed, t0.UnixMilli(), 10)
	e.Apply(&hit) // the group is open
	for _, bc := range []struct {
		name string
		c    *apollo.Change
	}{{"miss", &miss}, {"hit", &hit}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e.Apply(bc.c)
				}
			})
		})
	}
}
