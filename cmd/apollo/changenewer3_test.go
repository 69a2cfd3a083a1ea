package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/redisstore"
)

// Three processes in a rolling upgrade: the bus, of a newer release,
// writes to the change log a batch in which changes of a record kind and
// of a status this alert process does not know sit among failures of
// both tenants (the entry crafted in Redis as such a bus writes it). The
// alert process passes over those two alone, tells both failures, and
// counts what it passed over in its heartbeat (changes.passedOver under
// components.alert.processes in GET /api/v1/system). Before, it refused
// the whole batch: every alert process not yet upgraded lost the
// failures of each batch that held a change of a new kind. The same for
// a finding of a kind it does not know on <p>:findings, in each tenant:
// passed over, logged and counted (findings.passedOver); before, it was
// dropped without a word. And on the channel <p>:changes (a bus of a
// release before the log): a message that is no batch of changes at all
// and a change of a status it does not know, in each tenant, are passed
// over, logged and counted with the log's (changes.passedOver); before,
// they went without a count or a line.
func TestThreeProcessChangeOfANewerKindKeepsItsBatch(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})
	d.putLostRules("_failed")
	d.awaitResolvedPastDedup(d.onlySentinelsTold(h)) // the alert process reads the log

	c, err := redisstore.Open(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t, time.Minute)
	// Under the bus's epoch and mark: a new epoch would make the alert
	// process forget what it heard, which is not what this is about.
	saved, err := c.Get(ctx, d.prefix+":{changes}:mark").Result()
	if err != nil {
		t.Fatal(err)
	}
	mark, epoch, _ := strings.Cut(saved, " ")
	ts := time.Now().UnixMilli()
	batch := fmt.Sprintf(`[{"t":"acme","n":"acme_lost","id":"acme_lost-1","s":"failed","p":"running","ts":%[1]d},`+
		`{"t":"acme","n":"acme_lost","id":"acme_lost-2","s":"running","p":"running","ts":%[1]d,"k":"paused","r":"by the newer bus"},`+
		`{"t":"globex","n":"globex_lost","id":"globex_lost-2","s":"skipped","p":"pending","ts":%[1]d},`+
		`{"t":"globex","n":"globex_lost","id":"globex_lost-1","s":"failed","p":"running","ts":%[1]d}]`, ts)
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: d.prefix + ":{changes}:log",
		Values: []any{"v", "1", "e", epoch, "m", mark, "b", batch}}).Err(); err != nil {
		t.Fatal(err)
	}
	// And on <p>:findings, a finding of a kind it does not know, in
	// each tenant.
	for _, tenant := range tenants {
		finding := fmt.Sprintf(`{"t":%q,"j":"%s_lost","k":"paused_again","r":"%s_lost-9","at":%d}`, tenant, tenant, tenant, ts)
		if err := c.Publish(ctx, d.prefix+":findings", finding).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// And on <p>:changes, hostile: control characters and no batch, then
	// a change of a status it does not know in each tenant.
	for _, payload := range []string{"\x00\x1b[2J{not a batch",
		fmt.Sprintf(`[{"t":"acme","n":"acme_lost","id":"acme_lost-3","s":"skipped","p":"pending","ts":%[1]d},`+
			`{"t":"globex","n":"globex_lost","id":"globex_lost-3","s":"skipped","p":"pending","ts":%[1]d}]`, ts)} {
		if err := c.Publish(ctx, d.prefix+":changes", payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
	eventually(t, 30*time.Second, "the alert process's heartbeat counting 5 changes and 2 findings passed over", func() bool {
		var sys struct {
			Components struct {
				Alert struct {
					Processes []struct {
						Stats struct {
							Changes  redisstore.FollowerStats
							Findings redisstore.FindingsStats
						}
					}
				}
			}
		}
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		ps := sys.Components.Alert.Processes
		return len(ps) == 1 && ps[0].Stats.Changes.PassedOver == 5 && ps[0].Stats.Findings.PassedOver == 2
	})
	d.alert.kill() // its log is complete
	out := d.alert.out.String()
	if !strings.Contains(out, `why="record kind \"paused\""`) {
		t.Errorf("the alert process did not say it passed a change over:\n%s", out)
	}
	if !strings.Contains(out, `msg="a change published on `+d.prefix+`:changes does not read`) || !strings.Contains(out, `why="not a batch of changes: invalid character`) {
		t.Errorf("the alert process did not say it passed a message of the channel over:\n%s", out)
	}
	if !strings.Contains(out, `msg="a finding of the bus does not read`) || !strings.Contains(out, `why="kind \"paused_again\""`) {
		t.Errorf("the alert process did not say it passed a finding over:\n%s", out)
	}
}
