package expect

import (
	"math"
	"sync"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// SampleSize is how many starts and how many durations a Learner keeps
// per job: enough for a 99th percentile to mean something and for a
// daily job's weekdays to show, in about half a kilobyte.
const SampleSize = 64

// Learner keeps a bounded sample of every job's recent runs, so that it
// can Suggest an expectation for any of them. Per job it holds the last
// SampleSize start times (to the second) and the last SampleSize
// durations of successful runs (to the millisecond, at most 49 days), in
// fixed arrays: 512 bytes and a map entry. It watches at most MaxJobs
// jobs; the runs of further jobs are counted in Dropped, not learned,
// until Forget or ForgetBefore make room.
//
// All methods are safe for concurrent use.
type Learner struct {
	mu      sync.Mutex
	jobs    map[jobKey]*sample
	max     int
	dropped int64
}

type jobKey struct{ tenant, job string }

// sample is one job's recent runs, in two rings.
type sample struct {
	starts    [SampleSize]uint32 // Unix seconds since learnEpoch
	durations [SampleSize]uint32 // milliseconds
	ns, nd    int                // how many were ever added (the rings hold the last SampleSize)
	seen      uint32             // the latest run, Unix seconds since learnEpoch
}

// learnEpoch keeps start times in 32 bits until 2156.
var learnEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// DefaultMaxJobs is how many jobs a Learner watches unless told otherwise.
const DefaultMaxJobs = 200_000

// NewLearner returns a Learner for at most maxJobs jobs (0:
// DefaultMaxJobs).
func NewLearner(maxJobs int) *Learner {
	if maxJobs <= 0 {
		maxJobs = DefaultMaxJobs
	}
	return &Learner{jobs: map[jobKey]*sample{}, max: maxJobs}
}

func toSeconds(t time.Time) uint32 {
	return uint32(min(max(t.Unix()-learnEpoch, 0), math.MaxUint32))
}

// get returns the sample of a job, making it if there is room.
func (l *Learner) get(tenant, job string) *sample {
	k := jobKey{tenant, job}
	s := l.jobs[k]
	if s == nil {
		if unnameable(job) {
			return nil // Suggest would propose nothing for it
		}
		if len(l.jobs) >= l.max {
			l.dropped++
			return nil
		}
		s = &sample{}
		l.jobs[k] = s
	}
	return s
}

// Started records the start of a run.
func (l *Learner) Started(r Run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.get(r.Tenant, r.Job); s != nil {
		at := toSeconds(r.At)
		s.starts[s.ns%SampleSize] = at
		s.ns++
		s.seen = max(s.seen, at)
	}
}

// Finished records the duration of a successful run; other ends say
// nothing about how long the job normally takes.
func (l *Learner) Finished(r Run) {
	if r.Status != apollo.StatusSuccess {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.get(r.Tenant, r.Job); s != nil {
		s.durations[s.nd%SampleSize] = uint32(min(max(r.Duration.Milliseconds(), 0), math.MaxUint32))
		s.nd++
		s.seen = max(s.seen, toSeconds(r.At))
	}
}

// Suggest proposes an expectation for a job from its sample (see the
// function Suggest), reading wall-clock times in loc.
func (l *Learner) Suggest(tenant, job string, loc *time.Location) (Proposal, bool) {
	l.mu.Lock()
	s := l.jobs[jobKey{tenant, job}]
	var starts []time.Time
	var durations []time.Duration
	if s != nil {
		for i := range min(s.ns, SampleSize) {
			starts = append(starts, time.Unix(learnEpoch+int64(s.starts[i]), 0))
		}
		for i := range min(s.nd, SampleSize) {
			durations = append(durations, time.Duration(s.durations[i])*time.Millisecond)
		}
	}
	l.mu.Unlock()
	return Suggest(job, starts, durations, loc)
}

// Jobs lists the tenant's jobs it has runs of, in no order.
func (l *Learner) Jobs(tenant string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.jobs {
		if k.tenant == tenant {
			out = append(out, k.job)
		}
	}
	return out
}

// Forget drops what is known of a job.
func (l *Learner) Forget(tenant, job string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.jobs, jobKey{tenant, job})
}

// ForgetBefore drops every job whose latest run is before t, and returns
// how many it dropped. Call it now and then (daily, with t a few weeks
// back) so that jobs that stopped make room for new ones.
func (l *Learner) ForgetBefore(t time.Time) int {
	limit := toSeconds(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, s := range l.jobs {
		if s.seen < limit {
			delete(l.jobs, k)
			n++
		}
	}
	return n
}

// Stats says how many jobs are watched and how many runs were not learned
// for lack of room.
func (l *Learner) Stats() LearnerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LearnerStats{Jobs: len(l.jobs), Dropped: l.dropped}
}
