package redisstore

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// A key of another type where the outbox's set of owners belongs (put
// there by hand, or by another program sharing the database): Redis
// answers, and refuses every renewal. The outbox says so, with the key
// and the fix, and so does Owe's error; before, both said that Redis did
// not answer, which an operator checks with a PING that answers. Once the
// key is deleted, what each tenant's lanes owe is recorded again.
func TestOutboxKeyOfAnotherTypeIsSaid(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	var log LockedLog
	owners := prefix + ":notify:{outbox}:owners"
	if err := c.Set(ctx, owners, "not a set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	o := newOutbox(t, c, prefix, func(opts *OutboxOptions) {
		opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
		opts.Lease = 300 * time.Millisecond
	})
	_, err := o.Owe("hook", time.Now(), owedNote("acme", "a1"))
	if err == nil || !strings.Contains(err.Error(), "refuses") || !strings.Contains(err.Error(), owners) {
		t.Errorf("Owe with the owners' key of another type: %v", err)
	}
	if got := log.String(); !strings.Contains(got, "redis-cli DEL "+owners) || strings.Contains(got, "did not answer") {
		t.Errorf("the outbox's log:\n%s", got)
	}

	if err := c.Del(ctx, owners).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testwait.Timeout(t))
	for _, tenant := range []string{"acme", "globex"} {
		for {
			if _, err := o.Owe("hook", time.Now(), owedNote(tenant, tenant+"-1")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tenant %s: not recorded after the key was deleted:\n%s", tenant, log.String())
			}
			time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
		}
	}
	if n := c.HLen(ctx, o.owed).Val(); n != 2 {
		t.Fatalf("%d entries recorded, want each tenant's", n)
	}
	if !strings.Contains(log.String(), "Redis answers again") {
		t.Errorf("the outbox does not say it records again:\n%s", log.String())
	}
}
