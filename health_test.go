package apollo_test

import (
	"testing"

	"github.com/apollo-11/apollo"
)

func TestVerdict(t *testing.T) {
	t.Parallel()
	const now = 10_000_000
	const minute = 60_000
	tests := []struct {
		name string
		f    apollo.JobFacts
		want apollo.Verdict
	}{
		{"nothing known", apollo.JobFacts{}, apollo.VerdictOK},
		{"last run succeeded", apollo.JobFacts{LastStatus: apollo.StatusSuccess}, apollo.VerdictOK},
		{"last run failed", apollo.JobFacts{LastStatus: apollo.StatusFailed}, apollo.VerdictFailing},
		{"last run timed out", apollo.JobFacts{LastStatus: apollo.StatusTimeout}, apollo.VerdictTimingOut},
		{"failed while a run goes on too long: the worse shows",
			apollo.JobFacts{LastStatus: apollo.StatusFailed, RunningSince: now - 60*minute, UsualCostMs: minute}, apollo.VerdictFailing},
		{"running three times the usual and a minute more",
			apollo.JobFacts{LastStatus: apollo.StatusSuccess, RunningSince: now - 3*minute - 1, UsualCostMs: minute}, apollo.VerdictRunningLong},
		{"running exactly three times the usual",
			apollo.JobFacts{LastStatus: apollo.StatusSuccess, RunningSince: now - 3*minute, UsualCostMs: minute}, apollo.VerdictOK},
		{"a job of 100 ms running 2 s is not long: the minute's margin",
			apollo.JobFacts{RunningSince: now - 2000, UsualCostMs: 100}, apollo.VerdictOK},
		{"a job of 100 ms running over a minute is long",
			apollo.JobFacts{RunningSince: now - 100 - minute - 1, UsualCostMs: 100}, apollo.VerdictRunningLong},
		{"running with no usual duration is never long",
			apollo.JobFacts{RunningSince: 1}, apollo.VerdictOK},
		{"newest run late and unfinished", apollo.JobFacts{LastStatus: apollo.StatusSuccess, LateNow: true}, apollo.VerdictLate},
		{"next run overdue past the grace", apollo.JobFacts{NextRunAt: now - minute - 1}, apollo.VerdictLate},
		{"next run overdue within the grace", apollo.JobFacts{NextRunAt: now - minute}, apollo.VerdictOK},
		{"next run in the future", apollo.JobFacts{NextRunAt: now + 1}, apollo.VerdictOK},
		{"quiet for over three intervals",
			apollo.JobFacts{LastStatus: apollo.StatusSuccess, UsualEveryMs: 10 * minute, LastRunAt: now - 30*minute - 1}, apollo.VerdictNoRecentRuns},
		{"quiet for three intervals exactly",
			apollo.JobFacts{UsualEveryMs: 10 * minute, LastRunAt: now - 30*minute}, apollo.VerdictOK},
		{"a job of every second quiet for 10 s: under the minimum",
			apollo.JobFacts{UsualEveryMs: 1000, LastRunAt: now - 10_000}, apollo.VerdictOK},
		{"a job of every second quiet for over a minute",
			apollo.JobFacts{UsualEveryMs: 1000, LastRunAt: now - minute - 1}, apollo.VerdictNoRecentRuns},
		{"late beats quiet", apollo.JobFacts{LateNow: true, UsualEveryMs: 1000, LastRunAt: 1}, apollo.VerdictLate},
	}
	for _, tt := range tests {
		if got := tt.f.Verdict(now); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestVerdictRank(t *testing.T) {
	t.Parallel()
	vs := apollo.Verdicts()
	for i, v := range vs {
		if v.Rank() != i {
			t.Errorf("%s ranks %d, want %d", v, v.Rank(), i)
		}
	}
	if vs[0] != apollo.VerdictFailing || vs[len(vs)-1] != apollo.VerdictOK {
		t.Errorf("order %v: failing first, ok last", vs)
	}
	if r := apollo.Verdict("bogus").Rank(); r != len(vs) {
		t.Errorf("unknown ranks %d", r)
	}
}
