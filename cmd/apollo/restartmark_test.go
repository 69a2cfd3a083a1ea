package main

import (
	"strings"
	"testing"

	"github.com/apollo-11/apollo/redisstore"
)

// A restart from a snapshot that the log after it adds nothing to (the
// kill came after a checkpoint and before the next record) knows how far
// the log went: the bus's last LSN is the snapshot's, not 0. Before, it
// was 0 until the next record, so the live mark the alert state saves
// was 0, and in three processes the change feed took the saved mark for
// another log's and started a new epoch: the alert processes forgot what
// they had heard, as if the data directory were new.
func TestRestartFromACheckpointKeepsTheLogsPosition(t *testing.T) {
	eachMode(t, deployOptions{config: "snapshot_every: 1s\n"}, func(t *testing.T, d *deployment, h *hook) {
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_etl")
		}
		d.awaitCheckpoint()
		lastLSN := func() uint64 {
			var sys struct {
				Bus struct {
					LastLSN uint64 `json:"lastLSN"`
				} `json:"bus"`
			}
			d.do("", "GET", "/api/v1/system", "", &sys, 200)
			return sys.Bus.LastLSN
		}
		before := lastLSN()
		if before == 0 {
			t.Fatal("the bus reports no LSN after two tenants' failures")
		}
		epoch := func() string {
			c, err := redisstore.Open(redisURL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			v, err := c.Get(t.Context(), d.prefix+":{changes}:mark").Result()
			if err != nil {
				t.Fatalf("the change feed's mark: %v", err)
			}
			_, e, _ := strings.Cut(v, " ")
			return e
		}
		var was string
		if d.three {
			was = epoch()
		}
		d.crash()
		if after := lastLSN(); after != before {
			t.Errorf("after kill -9 and a start from the snapshot the bus's last LSN is %d, want %d", after, before)
		}
		if d.three {
			if now := epoch(); now != was {
				t.Errorf("the change feed started a new epoch (%s, was %s): the alert processes forget what they heard", now, was)
			}
		}
	})
}
