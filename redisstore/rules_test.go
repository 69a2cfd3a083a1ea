package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"

	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The rules of every tenant are configuration: kept without a TTL (an
// earlier version's TTL is taken off), read back whole, and followed.
func TestRulesStore(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	key := prefix + ":alert:rules"
	c.HSet(ctx, key, "t:old", "RULE o task_prefix: \"o_\" ON: failed")
	c.Expire(ctx, key, time.Hour) // as versions before this one left it
	rs := redisstore.NewRules(c, prefix)
	for tenant, src := range map[string]string{"acme": `RULE a task_prefix: "a_" ON: failed`, "globex": `RULE g task_prefix: "g_" ON: failed`} {
		if err := rs.Save(ctx, tenant, []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	if ttl := c.TTL(ctx, key).Val(); ttl != -1 {
		t.Errorf("the rules key expires in %v; configuration must not", ttl)
	}
	got, err := rs.Load(ctx)
	if err != nil || len(got) != 3 || string(got["acme"]) != `RULE a task_prefix: "a_" ON: failed` || string(got["old"]) == "" {
		t.Fatalf("loaded %q, %v", got, err)
	}
	if src, err := rs.Source(ctx, "globex"); err != nil || string(src) != `RULE g task_prefix: "g_" ON: failed` {
		t.Fatalf("globex: %q, %v", src, err)
	}
	if src, err := rs.Source(ctx, "nobody"); err != nil || src != nil {
		t.Fatalf("a tenant without rules: %q, %v", src, err)
	}

	// A change made behind a process's back reaches it at the next read.
	seen := make(chan map[string][]byte, 10)
	stop := rs.Follow(ctx, 50*time.Millisecond, func(m map[string][]byte, err error) {
		if err == nil {
			seen <- m
		}
	})
	defer stop()
	rs.Save(ctx, "acme", []byte(`RULE a2 task_prefix: "a_" ON: timeout`))
	deadline := time.After(testwait.Timeout(t))
	for {
		select {
		case m := <-seen:
			if string(m["acme"]) == `RULE a2 task_prefix: "a_" ON: timeout` {
				stop()
				stop() // idempotent
				return
			}
		case <-deadline:
			t.Fatal("Follow did not hand on the change")
		}
	}
}
