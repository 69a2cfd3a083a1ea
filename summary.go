package apollo

import (
	"math"
	"time"
)

// Summary is what one job (or a group of jobs) did over one window: what
// the metrics aggregate, the rules judge and the API shows.
//
// Counters count events whose bucket lies in the window; Backlog and Running
// are gauges: the number of tasks pending and running at the window's end.
type Summary struct {
	Count   int64 // runs that finished (success + failed + timeout)
	Success int64
	Failed  int64
	Timeout int64
	Started int64 // runs that went to running
	Late    int64 // runs that became late (late starts and missed starts)
	Missed  int64 // runs that never started within their grace period
	// DueAgain counts the starts and missed marks of runs already counted
	// in Started or Missed before (a missed run that then starts): Due
	// subtracts it, so that each run is due once.
	DueAgain int64

	CostSum, CostN   int64 // ms; CostN counts finished runs with a known cost
	CostMin, CostMax int64 // ms; both 0 when CostN == 0

	Backlog, Running int64 // gauges at the window's end

	Window time.Duration
}

// FailedRate is Failed/Count, 0 when nothing finished.
func (s Summary) FailedRate() float64 { return ratio(s.Failed, s.Count) }

// TimeoutRate is Timeout/Count, 0 when nothing finished.
func (s Summary) TimeoutRate() float64 { return ratio(s.Timeout, s.Count) }

// SuccessRate is Success/Count, 0 when nothing finished.
func (s Summary) SuccessRate() float64 { return ratio(s.Success, s.Count) }

// Due is the runs that were due in the window, each counted once: those
// that started or were marked missed, less the ones counted twice (a
// missed run that started later counts where it was first counted).
func (s Summary) Due() int64 { return s.Started + s.Missed - s.DueAgain }

// LateRate is Late / Due: the share of the runs that were due that did not
// start on time (started late or missed), 0 when none was due.
func (s Summary) LateRate() float64 { return ratio(s.Late, s.Due()) }

// AvgCost is the mean cost in ms of the finished runs that reported one.
func (s Summary) AvgCost() float64 { return ratio(s.CostSum, s.CostN) }

// Throughput is finished runs per minute over the window.
func (s Summary) Throughput() float64 {
	if s.Window <= 0 {
		return 0
	}
	return float64(s.Count) / s.Window.Minutes()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Add folds o into s: counters and gauges are summed, CostMin and CostMax
// combined over the sides that have costs. A cost sum past MaxInt64 reads
// as MaxInt64 (an average too large rather than a negative one). s keeps
// its Window unless it has none.
func (s *Summary) Add(o Summary) {
	if o.CostN > 0 {
		if s.CostN > 0 {
			s.CostMin = min(s.CostMin, o.CostMin)
			s.CostMax = max(s.CostMax, o.CostMax)
		} else {
			s.CostMin, s.CostMax = o.CostMin, o.CostMax
		}
	}
	s.Count += o.Count
	s.Success += o.Success
	s.Failed += o.Failed
	s.Timeout += o.Timeout
	s.Started += o.Started
	s.Late += o.Late
	s.Missed += o.Missed
	s.DueAgain += o.DueAgain
	s.CostSum += o.CostSum
	s.CostN += o.CostN
	s.Backlog += o.Backlog
	s.Running += o.Running
	if s.CostN > 0 && s.CostSum < 0 {
		s.CostSum = math.MaxInt64
	}
	if s.Window == 0 {
		s.Window = o.Window
	}
}

// Point is one step of a series of Summaries.
type Point struct {
	T int64 // start of the step's first bucket, Unix ms
	Summary
}
