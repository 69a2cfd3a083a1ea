package redistest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The audit sees, on a real Redis, what a Redis Cluster would refuse: a
// transaction or a script over keys of two hash tags; keys of one tag
// pass, and so does a PUBLISH (a channel, not a key) in a transaction.
func TestSlotAuditFindsCrossSlotTransactionsAndScripts(t *testing.T) {
	_, p := redistest.Client(t) // the prefix, cleaned up
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	script := redis.NewScript(`redis.call("SET", KEYS[1], "1") redis.call("SET", KEYS[2], "1") return 1`)
	for _, tc := range []struct {
		name  string
		run   func() error
		cross string
	}{
		{"a transaction over one tag", func() error {
			_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, p+":{a}:1", "1", 0)
				pipe.HSet(ctx, p+":{a}:2", "f", "1")
				pipe.Publish(ctx, p+":channel", "hello")
				return nil
			})
			return err
		}, ""},
		{"a transaction over two keys", func() error {
			_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, p+":x", "1", 0)
				pipe.Set(ctx, p+":y", "1", 0)
				return nil
			})
			return err
		}, "MULTI set set EXEC"},
		{"a script over one tag", func() error { return script.Run(ctx, c, []string{p + ":{s}:1", p + ":{s}:2"}).Err() }, ""},
		{"a script over two tags", func() error { return script.Run(ctx, c, []string{p + ":{s}:1", p + ":{t}:2"}).Err() }, "evalsha"},
		{"a pipeline (not a transaction) over two keys", func() error {
			_, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, p+":x", "1", 0)
				pipe.Set(ctx, p+":y", "1", 0)
				return nil
			})
			return err
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := &redistest.SlotAudit{}
			c.AddHook(audit)
			if err := tc.run(); err != nil {
				t.Fatal(err)
			}
			got := audit.Crossed()
			if tc.cross == "" && len(got) > 0 || tc.cross != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.cross)) {
				t.Fatalf("crossed %q, want %q", got, tc.cross)
			}
		})
	}
}
