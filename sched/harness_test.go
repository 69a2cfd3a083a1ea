package sched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// wait is the real-time safety net for every wait in these tests: a wait
// that takes this long has failed (testwait's rule; nothing here sleeps).
var wait = testwait.Generous()

// recorder is a Reporter that keeps every event and lets a test wait for
// the one it expects.
type recorder struct {
	mu      sync.Mutex
	events  []apollo.Event
	changed chan struct{}
	fail    atomic.Bool
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Send(ev apollo.Event) error {
	r.mu.Lock()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if r.fail.Load() {
		return errors.New("monitoring is down")
	}
	return nil
}

// find returns the last event of task with status, if any.
func (r *recorder) find(taskID string, st apollo.Status) (apollo.Event, bool, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if ev := r.events[i]; ev.TaskID == taskID && ev.Status == st {
			return ev, true, r.changed
		}
	}
	return apollo.Event{}, false, r.changed
}

// waitFor waits until task has reported status.
func (r *recorder) waitFor(t testing.TB, taskID string, st apollo.Status) apollo.Event {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		ev, ok, changed := r.find(taskID, st)
		if ok {
			return ev
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s event for %s; events so far:\n%s", st, taskID, r.dump())
		}
	}
}

func (r *recorder) all() []apollo.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]apollo.Event(nil), r.events...)
}

func (r *recorder) dump() string {
	var b strings.Builder
	for _, ev := range r.all() {
		fmt.Fprintf(&b, "  %s #%d %s sched=%d extra=%s\n", ev.TaskID, ev.Sequence, ev.Status, ev.ScheduledAt, ev.Extra)
	}
	return b.String()
}

// checkLifecycles asserts what every consumer of the events relies on:
// each task's sequences run 1, 2, 3... and every step is a legal transition
// ending in a final state or manual_blocked.
func (r *recorder) checkLifecycles(t testing.TB) {
	t.Helper()
	byTask := map[string][]apollo.Event{}
	for _, ev := range r.all() {
		if err := ev.Validate(); err != nil {
			t.Errorf("invalid event %+v: %v", ev, err)
		}
		byTask[ev.TaskID] = append(byTask[ev.TaskID], ev)
	}
	for id, evs := range byTask {
		prev := apollo.StatusNone
		for i, ev := range evs {
			if ev.Sequence != int64(i+1) {
				t.Errorf("%s: event %d has sequence %d", id, i, ev.Sequence)
			}
			if !apollo.CanTransition(prev, ev.Status) {
				t.Errorf("%s: illegal transition %v -> %v", id, prev, ev.Status)
			}
			prev = ev.Status
		}
		if !prev.Final() && prev != apollo.StatusManualBlocked {
			t.Errorf("%s: left in state %v", id, prev)
		}
	}
}

func extra(t testing.TB, ev apollo.Event) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(ev.Extra) > 0 {
		if err := json.Unmarshal(ev.Extra, &m); err != nil {
			t.Fatalf("extra of %s: %v", ev.TaskID, err)
		}
	}
	return m
}

// fakeRunner hands every started attempt to the test, which ends it.
type fakeRunner struct {
	clock   apollo.Clock
	started chan *fakeProc
	refuse  atomic.Bool // start fails
}

func newFakeRunner(c apollo.Clock) *fakeRunner {
	return &fakeRunner{clock: c, started: make(chan *fakeProc, 100)}
}

func (f *fakeRunner) start(spec *runSpec) (proc, error) {
	if f.refuse.Load() {
		return nil, errors.New("exec: no such file")
	}
	p := &fakeProc{spec: spec, clock: f.clock, doneC: make(chan struct{})}
	f.started <- p
	return p, nil
}

// next returns the next started attempt.
func (f *fakeRunner) next(t testing.TB) *fakeProc {
	t.Helper()
	select {
	case p := <-f.started:
		return p
	case <-time.After(wait):
		t.Fatal("no attempt started")
		return nil
	}
}

// none asserts that nothing was started so far.
func (f *fakeRunner) none(t testing.TB) {
	t.Helper()
	select {
	case p := <-f.started:
		t.Fatalf("unexpected start of %s", p.env("APOLLO_TASK_ID"))
	default:
	}
}

type fakeProc struct {
	spec       *runSpec
	clock      apollo.Clock
	ignoreTerm atomic.Bool
	doneC      chan struct{}
	once       sync.Once
	mu         sync.Mutex
	signals    []syscall.Signal
	res        procResult
}

func (p *fakeProc) env(key string) string {
	for _, kv := range p.spec.env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

func (p *fakeProc) task() string { return p.env("APOLLO_TASK_ID") }

func (p *fakeProc) exit(code int) {
	p.end(procResult{exitCode: code, stdout: "out\n", stderr: "err\n"})
}

func (p *fakeProc) end(res procResult) {
	p.once.Do(func() {
		res.ended = p.clock.Now()
		p.mu.Lock()
		p.res = res
		p.mu.Unlock()
		close(p.doneC)
	})
}

func (p *fakeProc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	p.signals = append(p.signals, sig)
	p.mu.Unlock()
	if sig == syscall.SIGKILL || !p.ignoreTerm.Load() {
		p.end(procResult{exitCode: -1, signaled: true})
	}
	return nil
}

func (p *fakeProc) sigs() []syscall.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]syscall.Signal(nil), p.signals...)
}

func (p *fakeProc) done() <-chan struct{} { return p.doneC }
func (p *fakeProc) exited() bool {
	select {
	case <-p.doneC:
		return true
	default:
		return false
	}
}
func (p *fakeProc) group() (int, string) { return 0, "" }
func (p *fakeProc) result() procResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

// harness is a scheduler on a fake clock with a fake runner.
type harness struct {
	t     *testing.T
	clock *apollo.FakeClock
	rec   *recorder
	run   *fakeRunner
	s     *Scheduler
	dir   string
}

var t0 = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func mustParse(t testing.TB, src string) *File {
	t.Helper()
	f, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// newHarness starts a scheduler for src at start; StateDir is dir when not
// empty.
func newHarness(t *testing.T, src string, start time.Time, dir string) *harness {
	t.Helper()
	clock := apollo.NewFakeClock(start)
	h := &harness{t: t, clock: clock, rec: newRecorder(), run: newFakeRunner(clock), dir: dir}
	h.s = h.newScheduler(mustParse(t, src))
	if err := h.s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stop()
		h.rec.checkLifecycles(t)
	})
	return h
}

func (h *harness) newScheduler(f *File) *Scheduler {
	h.t.Helper()
	s, err := newScheduler(f, Options{Clock: h.clock, Reporter: h.rec, Logger: quietLogger(), StateDir: h.dir}, h.run)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// stop stops the scheduler, killing what still runs at once.
func (h *harness) stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { _ = h.s.Stop(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		h.t.Fatal("Stop did not return")
	}
}

// fire waits for the loop (plus `others` timers of runs) to arm its timer,
// then moves the clock to the earliest next tick and returns it.
func (h *harness) fire(others int) time.Time {
	h.t.Helper()
	if !h.clock.BlockUntil(1+others, wait) {
		h.t.Fatalf("the loop armed no timer (%d armed)", h.clock.Waiters())
	}
	var next time.Time
	for _, j := range h.s.Jobs() {
		if !j.Next.IsZero() && !j.Paused && (next.IsZero() || j.Next.Before(next)) {
			next = j.Next
		}
	}
	if next.IsZero() {
		h.t.Fatal("no job has a next tick")
	}
	h.clock.Set(next)
	return next
}

// advance waits for n armed timers, then moves the clock by d.
func (h *harness) advance(n int, d time.Duration) {
	h.t.Helper()
	if !h.clock.BlockUntil(n, wait) {
		h.t.Fatalf("want %d armed timers, have %d", n, h.clock.Waiters())
	}
	h.clock.Advance(d)
}

func (h *harness) job(name string) JobStatus {
	for _, j := range h.s.Jobs() {
		if j.Name == name {
			return j
		}
	}
	h.t.Fatalf("no job %q", name)
	return JobStatus{}
}

func sid(job string, at time.Time, attempt int) string {
	return taskID(job, scheduledKey(at), attempt)
}

// started makes a scheduler of src with opts and runner and starts it;
// it is stopped when the test ends, what still runs killed at once.
func started(t *testing.T, src string, opts Options, runner *fakeRunner) *Scheduler {
	t.Helper()
	s, err := newScheduler(mustParse(t, src), opts, runner)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Stop(ctx)
	})
	return s
}

// awaitStateWithout polls the state file in dir until it does not hold
// what (polling a file: nothing to wait on).
func awaitStateWithout(t *testing.T, dir, what, why string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(filepath.Join(dir, stateFileName))
		if err == nil && !strings.Contains(string(b), what) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still in the state file %v later: %s %v", why, wait, b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
