package alert_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rules"
)

// printer is a Sender that prints what it is given; the server's is a
// notify.Dispatcher.
type printer struct{}

func (printer) Send(n apollo.Notification) {
	fmt.Printf("%s %s [%s] to %v: %s\n", n.Kind, n.Alert.Rule, n.Alert.Group, n.Channels, n.Alert.Summary)
}

// A rate rule and an event rule, fed by a bus whose observers are the
// metrics and (live) the engine: the first failed run fires the event rule at
// once (the second folds into it); the rate rule fires when the engine
// evaluates the window, here by hand (Start evaluates every Interval).
func Example() {
	rs, err := rules.Parse("rules.txt", []byte(`
RULE exports_failing task_prefix: "export_" WINDOW: 10m THRESHOLD: failed_rate > 50% NOTIFY: ops
RULE export_failed task_prefix: "export_" ON: failed NOTIFY: ops
`))
	if err != nil {
		panic(err)
	}
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	quiet := slog.New(slog.DiscardHandler)
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: quiet})
	if err != nil {
		panic(err)
	}
	eng, err := alert.New(alert.Options{Rules: rs, Store: agg, Sender: printer{}, Clock: clock, Logger: quiet})
	if err != nil {
		panic(err)
	}
	// The engine hears only live changes (a restart's replay is not news);
	// one delivery worker hands the runs over in the order they were
	// published, so that the output is the same on every run (with more,
	// different runs' changes arrive side by side, in no set order).
	b, err := bus.New(bus.Options{Clock: clock, Logger: quiet, Observers: []bus.Observer{agg}, Live: []bus.Observer{eng}, Workers: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		panic(err)
	}
	if err := b.Start(ctx); err != nil {
		panic(err)
	}

	// Three runs of export_daily: one succeeds, two fail.
	at := clock.Now().Add(-5 * time.Minute).UnixMilli()
	var evs []apollo.Event
	for i, st := range []apollo.Status{apollo.StatusSuccess, apollo.StatusFailed, apollo.StatusFailed} {
		id := fmt.Sprintf("export_daily-%d", i+1)
		ts := at + int64(i)*60_000
		evs = append(evs,
			apollo.Event{TaskID: id, Name: "export_daily", Sequence: 1, Status: apollo.StatusRunning, Ts: ts},
			apollo.Event{TaskID: id, Name: "export_daily", Sequence: 2, Status: st, Ts: ts + 30_000, CostMs: 30_000})
	}
	if err := b.Publish(ctx, evs, make([]bus.Outcome, len(evs))); err != nil {
		panic(err)
	}
	b.Stop(ctx)   // delivers every change to the observers, then stops
	eng.Stop(ctx) // hands the queued event notifications to the Sender

	if err := eng.Evaluate(ctx, clock.Now()); err != nil {
		panic(err)
	}
	firing := eng.Alerts("", apollo.AlertFiring)
	slices.SortFunc(firing, func(a, b apollo.Alert) int { return strings.Compare(a.Rule, b.Rule) })
	for _, a := range firing {
		fmt.Printf("firing: %s [%s] = %.2f\n", a.Rule, a.Group, a.Value)
	}
	// Output:
	// firing export_failed [export_] to [ops]: export_daily failed (run export_daily-2)
	// firing exports_failing [export_] to [ops]: failed_rate 0.667 > 50% for export_* over 10m
	// firing: export_failed [export_] = 2.00
	// firing: exports_failing [export_] = 0.67
}
