package sched

import (
	"sort"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// recheckEvery bounds how long the loop waits without reading the clock
// again. Its timers run on the monotonic clock, which does not follow a
// step of the wall clock (an NTP correction) and stands still while the
// host sleeps, and schedules are on the wall clock: a run that falls due
// that way starts within this, instead of when a timer armed before
// would have fired, up to a day later for a daily job.
const recheckEvery = 10 * time.Second

// loop sleeps until the earliest next tick of any job, then dispatches what
// is due. It is the only goroutine that moves ticks forward and writes the
// state file. It ends when Stop begins.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		var next time.Time
		for _, js := range s.jobs {
			if !js.next.IsZero() && (next.IsZero() || js.next.Before(next)) {
				next = js.next
			}
		}
		s.mu.Unlock()
		now := s.clock.Now()
		if !next.IsZero() && !next.After(now) {
			s.dispatch(now)
			continue
		}
		var fire <-chan time.Time
		var t apollo.Timer
		if !next.IsZero() {
			t = s.clock.NewTimer(min(next.Sub(now), recheckEvery))
			fire = t.C()
		}
		stop := false
		select {
		case <-fire:
		case <-s.wake:
		case <-s.stopC:
			stop = true
		}
		if t != nil {
			t.Stop()
		}
		if stop {
			return
		}
	}
}

// dispatch handles every job whose next tick is at or before now.
func (s *Scheduler) dispatch(now time.Time) {
	s.mu.Lock()
	due := map[time.Time][]string{}
	for _, j := range s.set.jobs {
		js := s.jobs[j.name]
		if js.next.IsZero() || js.next.After(now) {
			continue
		}
		tick := js.next
		js.next = j.sched.Next(now)
		// Normally tick is the only one due. More have passed only when the
		// clock jumped (a suspended host) or the loop was held up: treat
		// those like missed schedules after downtime.
		if latest := j.sched.Last(tick.Add(-time.Nanosecond), now); !latest.Equal(tick) {
			if j.catchup == CatchupSkip {
				s.missedLocked(js, latest)
				continue
			}
			tick = latest
		}
		js.lastTick = tick
		if !js.paused {
			due[tick] = append(due[tick], j.name)
		}
	}
	s.launchLocked(due)
	s.mu.Unlock()
	s.saveState()
}

// launchLocked starts one flow per tick time: the roots due at the same
// time share it, so a job that runs after two of them waits for both.
func (s *Scheduler) launchLocked(due map[time.Time][]string) {
	times := make([]time.Time, 0, len(due))
	for t := range due {
		times = append(times, t)
	}
	sort.Slice(times, func(a, b int) bool { return times[a].Before(times[b]) })
	for _, t := range times {
		fl := s.newFlowLocked(scheduledKey(t), t, due[t])
		for _, name := range due[t] {
			s.startLocked(fl, name, t, false)
		}
	}
}

func (s *Scheduler) missedLocked(js *jobState, latest time.Time) {
	js.lastTick = latest
	s.nMissed.Add(1)
	s.log.Info("sched: missed schedules skipped (catchup: skip)", "job", js.name, "latest", latest)
}

// catchUp sets every job's next tick at Start and, for jobs whose schedules
// passed while the scheduler was down, runs them once (catchup: once) with
// the most recent missed tick as their scheduled time, so the server sees
// the run as late. A paused job is not caught up.
func (s *Scheduler) catchUp(saved map[string]savedJob, now time.Time) {
	due := map[time.Time][]string{}
	for _, j := range s.set.jobs {
		js := s.jobs[j.name]
		js.lastTick = now
		if j.sched == nil {
			continue
		}
		js.next = j.sched.Next(now)
		last := saved[j.name].LastTick
		if last.IsZero() {
			continue
		}
		js.lastTick = last
		if last.After(now) {
			// The clock is behind the last tick handled (stepped back):
			// the ticks up to it ran, and their task IDs are taken. Wait
			// for the clock to pass it, as the loop does when the clock
			// steps back under it.
			js.next = j.sched.Next(last)
			continue
		}
		missed := j.sched.Last(last, now)
		switch {
		case missed.IsZero():
		case j.catchup == CatchupSkip:
			s.missedLocked(js, missed)
		default:
			js.lastTick = missed
			if !js.paused {
				s.log.Info("sched: catching up a missed schedule", "job", j.name, "scheduled", missed)
				due[missed] = append(due[missed], j.name)
			}
		}
	}
	s.launchLocked(due)
}
