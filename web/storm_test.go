package web_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A storm is what the people on call meet during an incident: hundreds of
// jobs whose runs start and end about a thousand times a second, through
// the real API, bus and stream, while they use the dashboard.

// stormJob names the storm's job i; "job-1" selects a tenth of 1 000 or
// 500 of them (job-100 … job-199, job-1000 …).
func stormJob(i int) string { return fmt.Sprintf("job-%03d", i) }

// seedJobs reports runs finished runs of each of jobs jobs, an hour ago
// and before, every tenth job's last run failed: the board the page opens.
func (d *dashboard) seedJobs(jobs, runs int) {
	d.t.Helper()
	start := time.Now().Add(-time.Hour - time.Duration(runs)*time.Minute)
	var evs []string
	flush := func() {
		if len(evs) > 0 {
			d.report(evs...)
			evs = evs[:0]
		}
	}
	for i := range jobs {
		for r := range runs {
			st := "success"
			if i%10 == 0 && r == runs-1 {
				st = "failed"
			}
			evs = append(evs, run(stormJob(i), fmt.Sprintf("%s-r%d", stormJob(i), r), st, start.Add(time.Duration(r)*time.Minute), time.Second)...)
			if len(evs) >= 4000 {
				flush()
			}
		}
	}
	flush()
}

// storm reports changes over jobs jobs at about rate a second until
// end: one job after another starts a run, and the next time its turn
// comes ends it (every seventh fails).
type storm struct {
	began   time.Time
	mu      sync.Mutex
	sent    int
	waiters map[int]chan struct{} // closed when sent reaches the key
	done    chan struct{}
	err     error
	stop    chan struct{}
	stopped sync.Once
}

func (d *dashboard) storm(jobs, rate int) *storm {
	s := &storm{began: time.Now(), waiters: map[int]chan struct{}{}, done: make(chan struct{}), stop: make(chan struct{})}
	d.t.Cleanup(s.end)
	const tick = 10 * time.Millisecond
	per := max(1, rate/int(time.Second/tick))
	go func() {
		defer close(s.done)
		open := make([]int, jobs) // the run of each job going on, or -1
		for i := range open {
			open[i] = -1
		}
		next := 0
		t := time.NewTicker(tick)
		defer t.Stop()
		var body bytes.Buffer
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			body.Reset()
			body.WriteByte('[')
			now := time.Now().UnixMilli()
			for k := range per {
				j := next % jobs
				n := next / jobs
				next++
				name := stormJob(j)
				if k > 0 {
					body.WriteByte(',')
				}
				if open[j] < 0 {
					open[j] = n
					fmt.Fprintf(&body, `{"taskID":"%s-s%d","name":%q,"sequence":1,"status":"running","ts":%d}`, name, n, name, now)
				} else {
					st := "success"
					if (j+n)%7 == 0 {
						st = "failed"
					}
					fmt.Fprintf(&body, `{"taskID":"%s-s%d","name":%q,"sequence":2,"status":%q,"ts":%d}`, name, open[j], name, st, now)
					open[j] = -1
				}
			}
			body.WriteByte(']')
			resp, err := http.Post(d.srv.URL+"/api/v1/events", "application/json", &body)
			if err != nil {
				s.err = err
				return
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				s.err = fmt.Errorf("POST /api/v1/events: HTTP %d", resp.StatusCode)
				return
			}
			s.mu.Lock()
			s.sent += per
			for at, ch := range s.waiters {
				if s.sent >= at {
					close(ch)
					delete(s.waiters, at)
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// more waits until the storm has reported n more changes, or has failed.
func (s *storm) more(t testing.TB, n int) {
	t.Helper()
	s.mu.Lock()
	ch := make(chan struct{})
	s.waiters[s.sent+n] = ch
	s.mu.Unlock()
	select {
	case <-ch:
	case <-s.done:
		t.Fatalf("the storm stopped early: %v", s.err)
	}
}

// rate is the changes a second the storm reached so far.
func (s *storm) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.sent) / time.Since(s.began).Seconds()
}

// end stops the storm and waits for it.
func (s *storm) end() {
	s.stopped.Do(func() { close(s.stop) })
	<-s.done
}
