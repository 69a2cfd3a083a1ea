package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// A node reads limits of 0 as apollo server does: the default (as if the
// key were left out), shared among the partitions. Before, a node divided
// the 0 itself and gave each partition room for one task, one queued
// change and one held one: every other event waited on its partition's
// owner for ever, though answered accepted, while apollo server with the
// same file took them all.
func TestBusNodeLimitsOfZeroAreTheDefaults(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "apollo.yaml")
	if err := os.WriteFile(cfg, []byte("limits:\n  tasks: 0\n  queue: 0\n  holding_area: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startApollo(t, append(busNodeArgs(startNATS(t).ClientURL(), "zero"), "--config", cfg)...)
	servedWhenReady(t, p.addr)
	var evs []string
	now := time.Now().UnixMilli()
	for i := range 20 {
		evs = append(evs, fmt.Sprintf(`{"taskID":"zero-%d","sequence":1,"status":"running","ts":%d}`, i, now))
	}
	resp, err := http.Post("http://"+p.addr+"/api/v1/events", "application/json", strings.NewReader("["+strings.Join(evs, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	for i := range 20 {
		eventually(t, testwait.Timeout(t), fmt.Sprintf("task zero-%d applied", i), func() bool {
			var task struct{ Status string }
			return apiGet(t, p.addr, fmt.Sprintf("/api/v1/tasks/zero-%d", i), &task) == http.StatusOK && task.Status == "running"
		})
	}
}

// A negative limit is refused at start by apollo bus as by apollo server,
// naming the key. Before, a node divided it among the partitions and
// started with room for one task in each.
func TestBusNodeRefusesNegativeLimits(t *testing.T) {
	t.Parallel()
	url := startNATS(t).ClientURL()
	for _, key := range []string{"tasks", "queue", "holding_area", "task_queue", "history"} {
		cfg := filepath.Join(t.TempDir(), "apollo.yaml")
		if err := os.WriteFile(cfg, []byte("limits:\n  "+key+": -1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stderr := runBinary(t, append(busNodeArgs(url, "negative"), "--config", cfg)...)
		if code != 1 || !strings.Contains(stderr, "limits."+key+": -1") {
			t.Errorf("limits.%s: -1: exit %d:\n%s", key, code, stderr)
		}
	}
}

// Events a partition's owner refuses after its node accepted them (here:
// past limits.tasks) raise the critical self-alert through the alert
// processes, as they do in the three-process mode. Nodes did not pass
// their refusals on: the events were counted and logged, and nobody was
// told.
func TestBusNodeRefusalsRaiseSelfAlert(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "noderefuse")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, "limits:\n  tasks: 1\n"...), 0o644)
	url := startNATS(t).ClientURL()
	node := startApollo(t, "bus", "--config", cfg, "--nats", url, "--partitions", "1", "--node-id", "r-1", "--listen", "127.0.0.1:0")
	startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", filepath.Join(dir, "rules.txt"))
	eventually(t, 30*time.Second, "the node serving its partition", func() bool { return len(servedBy(t, node.addr)) == 1 })
	resp, err := http.Post("http://"+node.addr+"/api/v1/events", "application/json",
		strings.NewReader(`[{"taskID":"a","sequence":1,"status":"running","ts":1764400000001},{"taskID":"b","sequence":1,"status":"running","ts":1764400000001}]`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.await(t, 30*time.Second, "events refused", func(p webhook.ApolloPayload) bool {
		return strings.Contains(p.Alert.Rule, "apollo_events_refused") && p.Alert.Severity == apollo.SeverityCritical
	})
}
