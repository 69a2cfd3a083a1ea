package main

import (
	"strings"
	"testing"
	"time"
)

// A resume through the API holds after kill -9 as a pause does
// (TestPausesSurviveKill): a job paused through the API and resumed, and
// a job paused by its jobs file and resumed, show not paused after the
// restart and run on their schedule. Only the scheduler's own tenant
// (the default one) may resume them: another tenant's resume is not found
// and changes nothing.
func TestResumesSurviveKill(t *testing.T) {
	jobs := "jobs:\n" +
		"  - name: held\n    schedule: \"@every 1s\"\n    command: [\"true\"]\n" +
		"  - name: filed\n    schedule: \"@every 1s\"\n    paused: true\n    command: [\"true\"]\n"
	eachMode(t, deployOptions{jobs: jobs}, func(t *testing.T, d *deployment, h *hook) {
		d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)
		for _, tenant := range tenants {
			d.do(tenant, "POST", "/api/v1/jobs/held/resume", "", nil, 404)
			d.do(tenant, "POST", "/api/v1/jobs/filed/resume", "", nil, 404)
		}
		type job struct {
			Name, LastTaskID string
			Paused           bool
		}
		list := func() map[string]job {
			var l struct{ Jobs []job }
			d.do("", "GET", "/api/v1/jobs", "", &l, 200)
			m := map[string]job{}
			for _, j := range l.Jobs {
				m[j.Name] = j
			}
			return m
		}
		if m := list(); !m["held"].Paused || !m["filed"].Paused {
			t.Fatalf("after the other tenants' resumes: %+v; want both still paused", m)
		}
		d.do("", "POST", "/api/v1/jobs/held/resume", "", nil, 200)
		d.do("", "POST", "/api/v1/jobs/filed/resume", "", nil, 200)
		d.crash()
		restarted := time.Now()
		if m := list(); m["held"].Paused || m["filed"].Paused {
			t.Fatalf("after kill -9: %+v; want neither paused, as resumed before the kill", m)
		}
		// Both run on their schedule after the restart: a run due after it.
		for _, name := range []string{"held", "filed"} {
			eventually(t, 30*time.Second, name+" run after the restart", func() bool {
				id := list()[name].LastTaskID
				key, _, _ := strings.Cut(strings.TrimPrefix(id, name+"@"), "#")
				due, err := time.Parse("20060102T150405Z", key)
				return err == nil && due.After(restarted)
			})
		}
	})
}
