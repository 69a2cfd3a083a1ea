package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// Keys of another type put under the prefix's names (by hand, a script,
// another program sharing the database): the heartbeat index and the
// leader lease. Before, both failed in silence: the watches kept their
// last view (a process killed then was never told) and no alert process
// led (nobody saved the alerts the bus shows), with nothing in any log.
// Now the watch reads the heartbeats without the index and says so, a
// kill -9 is told, and the alert process says why it cannot lead; once
// the keys are deleted, as the logs say, it leads again.
func TestThreeProcessKeysOfTheWrongTypeAreSaid(t *testing.T) {
	endToEnd(t)
	c, prefix := redistest.Client(t)
	h := newHook(t)
	dir := writeScenario(t, h.srv.URL, redistest.URLFor(t, prefix), prefix)
	cfg := filepath.Join(dir, "apollo.yaml")
	bus := startScenarioBus(t, dir, cfg)
	alertArgs := []string{"alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt")}
	a := startProc(t, "apollo alert ", alertArgs...)
	ctx := context.Background()
	host, _ := os.Hostname()
	id := host + "-" + strconv.Itoa(a.cmd.Process.Pid)
	leader := func() string { l, _ := redisstore.Leader(ctx, c, prefix); return l }
	eventually(t, 30*time.Second, "the alert process leading", func() bool { return leader() == id })

	index, lease := prefix+":heartbeats", prefix+":alert:leader"
	c.Del(ctx, index, lease)
	c.Set(ctx, index, "not an index", 0)
	c.HSet(ctx, lease, "not", "a lease")
	// The alert process's beat says it no longer leads once its renewal
	// met the hash.
	eventually(t, 30*time.Second, "the alert process no longer leading", func() bool {
		var b redisstore.Beat
		data, err := c.Get(ctx, prefix+":heartbeat:alert:"+id).Bytes()
		if err != nil || json.Unmarshal(data, &b) != nil {
			return false
		}
		st, _ := b.Stats.(map[string]any)
		return st["leader"] == false
	})
	a.kill()
	p := h.await(t, 30*time.Second, "the alert process's kill told by the bus", func(p webhook.ApolloPayload) bool {
		return strings.Contains(p.Alert.Rule, "apollo_component_down")
	})
	if !strings.Contains(p.Alert.Summary, id) {
		t.Fatalf("the bus told %q: want the killed alert process", p.Alert.Summary)
	}
	if out := a.out.String(); !strings.Contains(out, "Redis refuses the leader lease") || !strings.Contains(out, "redis-cli DEL "+lease) {
		t.Errorf("the alert process does not say why it cannot lead:\n%s", out)
	}

	// Deleted, as the logs say: a new alert process leads and is seen.
	c.Del(ctx, index, lease)
	a = startProc(t, "apollo alert ", alertArgs...)
	id = host + "-" + strconv.Itoa(a.cmd.Process.Pid)
	eventually(t, 30*time.Second, "the new alert process leading", func() bool { return leader() == id })
	eventually(t, 30*time.Second, "the bus seeing it", func() bool {
		var sys map[string]any
		apiGet(t, bus.addr, "/api/v1/system", &sys)
		al, _ := sys["components"].(map[string]any)["alert"].(map[string]any)
		return al["alive"] == float64(1)
	})
	eventually(t, 30*time.Second, "the heartbeat index made again by the bus's and the alert process's beats", func() bool {
		return c.ZCard(ctx, index).Val() == 2
	})
	bus.kill()
	if out := bus.out.String(); !strings.Contains(out, "the heartbeat index cannot be read") || !strings.Contains(out, "redis-cli DEL "+index) {
		t.Errorf("the bus does not say the heartbeat index is damaged:\n%s", out)
	}
}
