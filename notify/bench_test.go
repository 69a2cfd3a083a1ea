package notify

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

const benchQueue = 4096

// benchDispatcher has n channels that are never started: the benchmark
// empties their queues itself between rounds, so it measures Send alone.
func benchDispatcher(b *testing.B, n int) (*Dispatcher, []string) {
	b.Helper()
	var chs []Channel
	var names []string
	for i := range n {
		name := "ch" + strconv.Itoa(i)
		names = append(names, name)
		chs = append(chs, Channel{Name: name, QueueSize: benchQueue,
			Notifier: NotifierFunc(func(context.Context, *Message) (bool, error) { return false, nil })})
	}
	d, err := NewDispatcher(chs, Options{Log: NewMemoryLog(1024), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return d, names
}

func drain(d *Dispatcher) {
	for _, l := range d.lanes {
		l.queue.take(l.queue.len())
	}
}

// BenchmarkSend is the alert engine's cost per notification: Send into
// the queues of one and of three channels, and Send into a full queue
// (the notification is recorded as dropped).
func BenchmarkSend(b *testing.B) {
	for _, tc := range []struct {
		name string
		n    int
		full bool
	}{{"1ch", 1, false}, {"3ch", 3, false}, {"1ch-full", 1, true}} {
		b.Run(tc.name, func(b *testing.B) {
			d, names := benchDispatcher(b, tc.n)
			note := note("a1", "k1", names...)
			if tc.full {
				for range benchQueue {
					d.Send(note)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d.Send(note)
				if i++; !tc.full && i%benchQueue == 0 {
					b.StopTimer()
					drain(d)
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkRender is what Send would cost per channel if it rendered the
// templates itself, as the design first had it; the lanes render instead.
func BenchmarkRender(b *testing.B) {
	r, err := newRenderer("oncall", LangEnglish, "https://apollo.example.com", time.UTC, nil)
	if err != nil {
		b.Fatal(err)
	}
	n := SampleNotification(apollo.NotifyFiring)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.render(n, nil); err != nil {
			b.Fatal(err)
		}
	}
}
