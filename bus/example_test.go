package bus_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// A run of a job reported in three events, one of them twice, then read
// back. Without a Log nothing is durable, which suits an example; the
// server passes its write-ahead log.
func Example() {
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	b, err := bus.New(bus.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		panic(err)
	}
	defer b.Stop(ctx)

	at := clock.Now().UnixMilli()
	evs := []apollo.Event{
		{Tenant: "acme", TaskID: "backup-1", Name: "backup", Sequence: 1, Status: apollo.StatusPending, Ts: at},
		{Tenant: "acme", TaskID: "backup-1", Name: "backup", Sequence: 2, Status: apollo.StatusRunning, Ts: at + 1000},
		{Tenant: "acme", TaskID: "backup-1", Name: "backup", Sequence: 2, Status: apollo.StatusRunning, Ts: at + 1000}, // resent
		{Tenant: "acme", TaskID: "backup-1", Name: "backup", Sequence: 3, Status: apollo.StatusSuccess, Ts: at + 61_000, CostMs: 60_000},
	}
	out := make([]bus.Outcome, len(evs))
	if err := b.Publish(ctx, evs, out); err != nil {
		panic(err)
	}
	for i, o := range out {
		fmt.Printf("event %d: %s\n", evs[i].Sequence, o.Result)
	}

	task, err := b.Get("acme", "backup-1")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s of %s: %s at sequence %d, %d ms\n", task.TaskID, task.Name, task.Status, task.Sequence, task.CostMs)
	if _, err := b.Get("globex", "backup-1"); err != nil {
		fmt.Println("another tenant:", err)
	}
	// Output:
	// event 1: accepted
	// event 2: accepted
	// event 2: duplicate
	// event 3: accepted
	// backup-1 of backup: success at sequence 3, 60000 ms
	// another tenant: taskID: no task "backup-1"
}
