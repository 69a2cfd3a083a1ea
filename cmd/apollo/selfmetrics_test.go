package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server reports the components it runs, and only those, in
// GET /metrics and GET /api/v1/system alike: the scheduler only with
// jobs, the Redis flusher only in the three-process bus. cmd/apollo lists
// the parts (selfmetrics.Parts); nothing finds them by reflection.
func TestSelfMetricsOfTheComponentsItRuns(t *testing.T) {
	t.Parallel()
	for _, withJobs := range []bool{false, true} {
		cfg := testConfig(t)
		if withJobs {
			cfg.Jobs = filepath.Join(t.TempDir(), "jobs.yaml")
			if err := os.WriteFile(cfg.Jobs, []byte("jobs:\n  - name: nightly\n    schedule: \"0 3 * * *\"\n    command: [\"true\"]\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		addr, _, stop := inProcess(t, cfg)
		exposition := scrape(t, addr)
		var system map[string]json.RawMessage
		apiGet(t, addr, "/api/v1/system", &system)
		for part, family := range map[string]string{
			"bus": "apollo_tasks", "stream": "apollo_stream_clients", "wal": "apollo_wal_appends_total",
			"metrics": "apollo_metrics_jobs", "alert": "apollo_rule_evaluations_total",
			"notifications": "apollo_notifications_unknown_channel_total", "recovery": "apollo_recovery_seconds",
			"scheduler": "apollo_scheduler_runs_total", "redis": "apollo_redis_flushes_total",
			"learner": "apollo_learner_runs_dropped_total",
		} {
			want := part != "redis" && (part != "scheduler" || withJobs)
			_, inSystem := system[part]
			inMetrics := strings.Contains(exposition, "\n"+family+" ")
			if inSystem != want || inMetrics != want {
				t.Errorf("jobs %v: %s in /api/v1/system %v, %s in /metrics %v; want %v", withJobs, part, inSystem, family, inMetrics, want)
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}
