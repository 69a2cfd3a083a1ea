package notify_test

import (
	"context"
	"fmt"
	"os"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/channels"
)

// A dispatcher with one console channel, built from its settings as
// apollo.yaml holds them, sending a test message the way
// `apollo notify test console` does.
func ExampleDispatcher_Test() {
	clock := apollo.NewFakeClock(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC))
	ch, err := channels.Build("console", "console", map[string]any{"lang": "en"},
		channels.BuildOptions{NotifierOptions: notify.NotifierOptions{Output: os.Stdout}})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := notify.NewDispatcher([]notify.Channel{ch}, notify.Options{Clock: clock, Location: time.UTC})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := d.Test(context.Background(), "console")
	fmt.Println(a.Outcome, err)
	// Output:
	// == console: [TEST] Apollo-11 test message for console ==
	// This is a test message from Apollo-11 to the channel "console".
	// If you can read it, the channel works.
	// Sent: 2025-03-04 05:06:07 UTC
	//
	// sent <nil>
}
