package main

import (
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"

	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/sched"
)

// The demo's embedded files are valid, and every rule's channels exist.
func TestDemoFilesParse(t *testing.T) {
	t.Parallel()
	if _, err := sched.Parse("demo/jobs.yaml", demoJobs); err != nil {
		t.Fatalf("demo jobs: %v", err)
	}
	rs, err := rules.Parse("demo/rules.txt", demoRules)
	if err != nil {
		t.Fatalf("demo rules: %v", err)
	}
	if err := rules.CheckChannels(rs, func(n string) bool { return slices.Contains([]string{"console", "dingtalk", "email"}, n) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 {
		t.Errorf("%d rules", len(rs))
	}
}

// apollo demo shows runs, metrics and a firing alert within a minute or so.
func TestDemoShowsAFiringAlert(t *testing.T) {
	if testing.Short() {
		t.Skip("demo: skipped with -short")
	}
	t.Parallel()
	demo := startApollo(t, "demo", "--listen", "127.0.0.1:0", "--data", t.TempDir())
	eventually(t, 30*time.Second, "demo runs", func() bool {
		var tasks struct{ Tasks []apollo.Task }
		apiGet(t, demo.addr, "/api/v1/tasks?prefix=etl_extract", &tasks)
		return len(tasks.Tasks) > 0
	})
	eventually(t, 30*time.Second, "demo metrics", func() bool {
		var m struct{ Jobs []struct{ Name string } }
		apiGet(t, demo.addr, "/api/v1/metrics?window=5m", &m)
		return len(m.Jobs) >= 3
	})
	eventually(t, 90*time.Second, "a firing alert", func() bool { return firing(t, demo.addr, "batch_failing") != nil })
}
