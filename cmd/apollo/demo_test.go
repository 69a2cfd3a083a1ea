package main

import (
	"slices"
	"testing"

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
