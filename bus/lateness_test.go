package bus

import (
	"testing"
	"time"
)

// Each threshold comes from the job's own entry (its tenant's only), else
// the longest prefix that sets it, else the default; of two entries for
// one job the first sets each threshold.
func TestLatenessPrecedence(t *testing.T) {
	t.Parallel()
	b, err := New(Options{DefaultTimeout: 24 * time.Hour, Lateness: []Lateness{
		{Prefix: "etl", StartAfter: 2 * time.Minute, MissedAfter: 10 * time.Minute},
		{Prefix: "etl_eu", StartAfter: 3 * time.Minute},
		{Job: "etl_eu", Tenant: "acme", StartAfter: time.Hour},
		{Job: "etl_eu", Tenant: "acme", StartAfter: 5 * time.Hour, Timeout: 2 * time.Hour},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, job   string
		start, missed time.Duration
		timeout       time.Duration
	}{
		{"acme", "etl_eu", time.Hour, 10 * time.Minute, 2 * time.Hour},
		{"", "etl_eu", 3 * time.Minute, 10 * time.Minute, 24 * time.Hour},
		{"acme", "etl_eu_2", 3 * time.Minute, 10 * time.Minute, 24 * time.Hour},
		{"acme", "etl", 2 * time.Minute, 10 * time.Minute, 24 * time.Hour},
		{"acme", "other", time.Minute, 5 * time.Minute, 24 * time.Hour},
	} {
		l := b.lateness(tc.tenant, tc.job)
		if l.StartAfter != tc.start || l.MissedAfter != tc.missed || l.Timeout != tc.timeout {
			t.Errorf("tenant %q job %q: %v %v %v, want %v %v %v", tc.tenant, tc.job,
				l.StartAfter, l.MissedAfter, l.Timeout, tc.start, tc.missed, tc.timeout)
		}
	}
}
