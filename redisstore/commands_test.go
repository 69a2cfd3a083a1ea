package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// Two alert processes run side by side (one of them just started, in a
// rolling upgrade of the alert processes): an ack of an alert the leader
// fired a moment ago reaches one that has not evaluated it yet, which
// answers "not found" first. The bus waits for the one that has it and
// answers its success, as the ack was done; before, the first reply won
// and the user was told 404 for an ack that took.
func TestCommandAnsweredByTheProcessThatHasIt(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	replies := c.Subscribe(ctx, prefix+":alert:replies")
	defer replies.Close()
	if _, err := replies.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	notFoundSent := make(chan struct{})
	go func() {
		for m := range replies.Channel() {
			if strings.Contains(m.Payload, "not_found") {
				close(notFoundSent)
				return
			}
		}
	}()
	stopNew, err := redisstore.ServeCommands(ctx, c, prefix, func(context.Context, redisstore.Command) redisstore.Reply {
		return redisstore.Reply{Err: &apollo.Error{Code: apollo.ENOTFOUND, Field: "id", Message: "no alert"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopNew()
	stopLeader, err := redisstore.ServeCommands(ctx, c, prefix, func(context.Context, redisstore.Command) redisstore.Reply {
		select {
		case <-notFoundSent:
		case <-time.After(testwait.Timeout(t)):
		}
		return redisstore.Reply{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopLeader()
	cm, err := redisstore.NewCommander(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	for _, tenant := range []string{"acme", "globex"} {
		if _, err := cm.Do(ctx, redisstore.Command{Op: "ack", Tenant: tenant, By: "x", AlertID: "a1"}); err != nil {
			t.Fatalf("tenant %s: the ack was done by the leader, the bus answered %v", tenant, err)
		}
	}
}
