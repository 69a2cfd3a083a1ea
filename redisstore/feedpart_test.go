package redisstore_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// A scale-out node's partitions each keep their mark in the feed, with
// the LSNs above it that were written: the next owner of a partition
// replays the changes above the mark, the feed writes those it had not
// written (a change applied just before a kill -9) and passes over the
// others, and each partition's mark is its own (two tenants, two
// partitions whose LSNs overlap).
func TestFeedPartsWriteWhatTheOwnerBeforeDidNot(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	clock := apollo.NewFakeClock(time.Unix(0, 0))
	fail := func(o interface{ Apply(*apollo.Change) }, lsn uint64, tenant, id string) {
		o.Apply(&apollo.Change{LSN: lsn, Prev: apollo.Before{Status: apollo.StatusRunning},
			Task: apollo.Task{TaskID: id, Name: "etl", Tenant: tenant, Status: apollo.StatusFailed}})
	}
	var marks [2]uint64
	first := redisstore.NewChangeFeed(c, prefix, nil).WithClock(clock)
	var parts [2]*redisstore.FeedPart
	for p := range parts {
		parts[p] = first.Part(p, func() uint64 { return marks[p] }, nil)
		if from, err := parts[p].Resume(ctx); err != nil || from != math.MaxUint64 {
			t.Fatalf("partition %d before any mark: resume after %d, %v; want none", p, from, err)
		}
		parts[p].Replayed(0)
	}
	fail(parts[0], 1, "acme", "a1")
	fail(parts[0], 2, "globex", "g1") // written, above the mark
	fail(parts[1], 1, "globex", "g2")
	marks[0], marks[1] = 1, 1
	if err := parts[0].Save(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.HGetAll(ctx, prefix+":{changes}:parts").Val(); got["0"] != "1 2" || got["1"] != "1 " {
		t.Fatalf("saved marks %q, want partition 0 at 1 with 2 written, partition 1 at 1", got)
	}
	// LSN 3 of partition 0 (acme's a2) was applied and never reached the
	// feed: the node was killed. The next owner replays above the mark.
	second := redisstore.NewChangeFeed(c, prefix, nil).WithClock(clock)
	marks = [2]uint64{}
	for p := range parts {
		parts[p] = second.Part(p, func() uint64 { return marks[p] }, nil)
	}
	if from, err := parts[0].Resume(ctx); err != nil || from != 1 {
		t.Fatalf("partition 0 resumes after %d, %v; want 1", from, err)
	}
	if from, err := parts[1].Resume(ctx); err != nil || from != 1 {
		t.Fatalf("partition 1 resumes after %d, %v; want 1", from, err)
	}
	fail(parts[0], 2, "globex", "g1") // the replay: written before
	fail(parts[0], 3, "acme", "a2")   // not written
	parts[0].Replayed(3)
	parts[1].Replayed(1)
	marks = [2]uint64{3, 1}
	if err := parts[1].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.HGetAll(ctx, prefix+":{changes}:parts").Val(); got["0"] != "3 " || got["1"] != "1 " {
		t.Fatalf("saved marks %q, want partition 0 at 3, partition 1 at 1", got)
	}
	if got, want := written(t, c, prefix), []string{"acme/a1", "globex/g1", "globex/g2", "acme/a2"}; !slices.Equal(got, want) {
		t.Fatalf("the stream holds %v, want %v: each change once", got, want)
	}

	// The streams made anew: the log of partition 0 ends below its saved
	// mark, which is forgotten; its own is saved from now on.
	third := redisstore.NewChangeFeed(c, prefix, nil).WithClock(clock)
	p0 := third.Part(0, func() uint64 { return 0 }, nil)
	if from, _ := p0.Resume(ctx); from != 3 {
		t.Fatalf("resume after %d, want 3", from)
	}
	p0.Replayed(0)
	if err := p0.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.HGet(ctx, prefix+":{changes}:parts", "0").Val(); got != "0 " {
		t.Fatalf("partition 0's mark on a new log %q, want 0", got)
	}
}

// written lists the changes in the change log, tenant/task, in order.
func written(t *testing.T, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	entries, err := c.XRange(context.Background(), prefix+":{changes}:log", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		var batch []struct {
			Tenant string `json:"t"`
			TaskID string `json:"id"`
			LSN    uint64 `json:"l"`
		}
		if err := json.Unmarshal([]byte(e.Values["b"].(string)), &batch); err != nil {
			t.Fatal(err)
		}
		for _, w := range batch {
			if w.LSN != 0 {
				t.Errorf("change %s/%s went out with LSN %d: the alert processes would take it for a bus's", w.Tenant, w.TaskID, w.LSN)
			}
			out = append(out, w.Tenant+"/"+w.TaskID)
		}
	}
	return out
}
