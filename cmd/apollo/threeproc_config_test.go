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
	"github.com/apollo-11/apollo/notify/webhook"
)

// The layout of docs/deploy.md: the bus and the alert processes share one
// apollo.yaml, which names the rules file (as deploy/apollo.yaml does),
// and each unit starts its process with --config alone. The bus starts and
// comes back after kill -9 with the same file, the alert process takes the
// rules from it, and a failure reported to the bus is notified; --rules
// given to the bus itself is still refused.
func TestThreeProcessesShareOneConfig(t *testing.T) {
	h, dir, cfg := threeProcesses(t, "shared")
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.txt")
	shared := fmt.Sprintf("%srules: %s\nlisten: 127.0.0.1:0\ndata: %s\n", body, rules, filepath.Join(dir, "data"))
	if err := os.WriteFile(cfg, []byte(shared), 0o644); err != nil {
		t.Fatal(err)
	}

	code, stderr := runBinary(t, "bus", "--config", cfg, "--rules", rules)
	if code != 2 || !strings.Contains(stderr, "give --rules "+rules+" to apollo alert instead") {
		t.Fatalf("apollo bus --rules: exit %d, want 2 saying where the rules go:\n%s", code, stderr)
	}

	bus := startApollo(t, "bus", "--config", cfg)
	startProc(t, "apollo alert ", "alert", "--config", cfg)
	bus.kill()
	bus = startApollo(t, "bus", "--config", cfg)

	// The alert process is subscribed to the bus's changes once it says
	// it is up, so one failed run reaches its event rule.
	now := time.Now().UnixMilli()
	evs := fmt.Sprintf(`[{"taskID":"etl_shared-1","name":"etl_shared","sequence":1,"status":"running","ts":%d},`+
		`{"taskID":"etl_shared-1","sequence":2,"status":"failed","ts":%d}]`, now, now+1)
	resp, err := http.Post("http://"+bus.addr+"/api/v1/events", "application/json", strings.NewReader(evs))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("report to the bus: %s", resp.Status)
	}
	p := h.await(t, 30*time.Second, "etl_failed", func(p webhook.ApolloPayload) bool {
		return p.Alert.Rule == "etl_failed" && p.Kind == apollo.NotifyFiring
	})
	if !strings.Contains(p.Text, "etl_shared") {
		t.Errorf("notification text: %q", p.Text)
	}
}
