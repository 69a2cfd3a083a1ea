package sched

import (
	"github.com/apollo-11/apollo/expect"
)

// Expectations are what the jobs file says of each job's runs, as job
// expectations (docs/expectations.md): a run at each tick of its schedule
// (read in its time zone, with late_after as the grace, else
// expect.DefaultGrace), none longer than its timeout plus kill_grace and
// a few seconds for the scheduler's report (serverDeadline: the scheduler
// ends it at its timeout; past that its end was lost), and the
// jobs in its after upstream of it. A paused job (by the file, or by
// Pause and not resumed) is expected to run no more; a job run only after
// others has no schedule of its own. Ask again after Pause and Resume.
func (s *Scheduler) Expectations() []expect.Expectation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]expect.Expectation, 0, len(s.set.jobs))
	for _, j := range s.set.jobs {
		e := expect.Expectation{Job: j.name, Upstream: append([]string(nil), j.after...)}
		if j.sched != nil && !s.jobs[j.name].paused {
			e.Schedule, e.Timezone = j.sched.String(), j.loc.String()
			e.Grace = j.lateAfter
			if e.Grace <= 0 {
				e.Grace = expect.DefaultGrace
			}
		}
		e.MaxRuntime = serverDeadline(j)
		out = append(out, e)
	}
	return out
}
