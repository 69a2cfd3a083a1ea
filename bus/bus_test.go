package bus

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	out := f.publish(t, ev("a1", 1, apollo.StatusPending), ev("a1", 2, apollo.StatusRunning), ev("a1", 3, apollo.StatusSuccess))
	for i, o := range out {
		if o.Result != Accepted {
			t.Fatalf("event %d: %v %v", i, o.Result, o.Err)
		}
	}
	got := f.get(t, "a1")
	if got.Status != apollo.StatusSuccess || got.Sequence != 3 || len(got.History) != 3 || got.Name != "job_a" {
		t.Fatalf("task = %+v", got)
	}
	if got.CostMs != 1000 { // success ts − running ts
		t.Errorf("derived cost = %d, want 1000", got.CostMs)
	}
	if got.StartedAt == 0 || got.FinishedAt == 0 {
		t.Errorf("start/finish not recorded: %+v", got)
	}
}

// A run reported only by its end is a finished run with an unknown start
// (issue 15.1, invariant 8 in docs/architecture.md), counted in the metrics like any.
func TestRunReportedOnlyByItsEnd(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *Options) { o.Observers = []Observer{rec} })
	end := ev("e1", 7, apollo.StatusFailed) // any sequence: nothing is missing before a first event
	end.CostMs = 1500
	if o := f.publish(t, end, ev("e2", 1, apollo.StatusSuccess)); o[0].Result != Accepted || o[1].Result != Accepted {
		t.Fatalf("ends reported alone: %+v", o)
	}
	got := f.get(t, "e1")
	if got.Status != apollo.StatusFailed || got.StartedAt != 0 || got.FinishedAt != end.Ts || got.CostMs != 1500 || got.Sequence != 7 {
		t.Errorf("e1 = %+v", got)
	}
	if got := f.get(t, "e2"); got.Status != apollo.StatusSuccess || got.StartedAt != 0 || got.CostMs != 0 {
		t.Errorf("e2 = %+v", got)
	}
	f.drain()
	if n := len(rec.all()); n != 2 {
		t.Errorf("%d changes delivered, want 2", n)
	}
}

func TestDuplicatesAndIllegal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.publish(t, ev("b1", 1, apollo.StatusRunning), ev("b1", 2, apollo.StatusFailed), ev("b2", 1, apollo.StatusSuccess))
	tests := []struct {
		name  string
		e     apollo.Event
		want  Result
		code  string
		field string
	}{
		{"same sequence again", ev("b1", 2, apollo.StatusFailed), Duplicate, "", ""},
		{"older sequence", ev("b1", 1, apollo.StatusRunning), Duplicate, "", ""},
		{"final to success", ev("b1", 3, apollo.StatusSuccess), Rejected, apollo.ECONFLICT, "status"},
		{"running after a run reported only by its end", ev("b2", 2, apollo.StatusRunning), Rejected, apollo.ECONFLICT, "status"},
		{"invalid sequence", ev("b3", 0, apollo.StatusPending), Rejected, apollo.EINVALID, "sequence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := f.publish(t, tt.e)[0]
			if o.Result != tt.want {
				t.Fatalf("result %v, want %v (%v)", o.Result, tt.want, o.Err)
			}
			if tt.code != "" && (o.Err == nil || o.Err.Code != tt.code || o.Err.Field != tt.field) {
				t.Fatalf("error %+v, want code %s on %s", o.Err, tt.code, tt.field)
			}
		})
	}
	st := f.bus.Stats()
	if st.Duplicate != 2 || st.Illegal != 2 || st.Invalid != 1 {
		t.Errorf("stats = %+v", st)
	}
	if got := f.get(t, "b1"); got.Status != apollo.StatusFailed || len(got.History) != 2 {
		t.Errorf("state changed by rejected events: %+v", got)
	}
}

func TestTenantsAreSeparate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a, b := ev("t1", 1, apollo.StatusRunning), ev("t1", 1, apollo.StatusPending)
	a.Tenant, b.Tenant = "acme", "globex"
	out := f.publish(t, a, b)
	if out[0].Result != Accepted || out[1].Result != Accepted {
		t.Fatalf("the same task ID in two tenants: %+v", out)
	}
	if _, err := f.bus.Get("", "t1"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Errorf("task visible without its tenant: %v", err)
	}
	ga, _ := f.bus.Get("acme", "t1")
	gb, _ := f.bus.Get("globex", "t1")
	if ga.Status != apollo.StatusRunning || gb.Status != apollo.StatusPending {
		t.Errorf("acme %v, globex %v", ga.Status, gb.Status)
	}
	list, _, _ := f.bus.List(apollo.TaskFilter{Tenant: "acme"})
	if len(list) != 1 || list[0].Tenant != "acme" {
		t.Errorf("acme lists %+v", list)
	}
}

func TestCorrection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.publish(t, ev("c1", 1, apollo.StatusRunning), ev("c1", 2, apollo.StatusFailed))
	if _, err := f.bus.Correct(t.Context(), "", "c1", apollo.StatusSuccess, "ops@example", ""); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Fatalf("a correction without a reason: %v", err)
	}
	got, err := f.bus.Correct(t.Context(), "", "c1", apollo.StatusSuccess, "ops@example", "re-ran by hand")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != apollo.StatusSuccess {
		t.Fatalf("status after correction %v", got.Status)
	}
	h := f.get(t, "c1").History
	last := h[len(h)-1]
	if last.Kind != apollo.KindCorrection || last.Actor != "ops@example" || last.Reason != "re-ran by hand" {
		t.Errorf("history does not show the correction: %+v", last)
	}
	// The executor's numbering is untouched: its next event is still judged normally.
	if o := f.publish(t, ev("c1", 3, apollo.StatusRunning))[0]; o.Result != Rejected {
		t.Errorf("event after correction: %v", o.Result)
	}
	if _, err := f.bus.Correct(t.Context(), "", "nope", apollo.StatusSuccess, "x", "y"); apollo.ErrorCode(err) != apollo.ENOTFOUND {
		t.Errorf("correcting an unknown task: %v", err)
	}
}

func TestListPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for i := range 25 {
		e := ev("p"+string(rune('a'+i)), 1, apollo.StatusRunning)
		f.clock.Advance(time.Second) // distinct updatedAt
		f.publish(t, e)
	}
	f.publish(t, ev("q1", 1, apollo.StatusPending))
	seen := map[string]bool{}
	cur := ""
	pages := 0
	var last int64 = 1 << 62
	for {
		page, next, err := f.bus.List(apollo.TaskFilter{Prefix: "p", Limit: 10, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tk := range page {
			if seen[tk.TaskID] || tk.UpdatedAt > last {
				t.Fatalf("page %d repeats or misorders %s", pages, tk.TaskID)
			}
			seen[tk.TaskID], last = true, tk.UpdatedAt
		}
		if next == "" {
			break
		}
		cur = next
	}
	if len(seen) != 25 || pages != 3 {
		t.Errorf("saw %d tasks in %d pages, want 25 in 3", len(seen), pages)
	}
	running, _, _ := f.bus.List(apollo.TaskFilter{Status: apollo.StatusPending})
	if len(running) != 1 || running[0].TaskID != "q1" {
		t.Errorf("status filter: %+v", running)
	}
	if _, _, err := f.bus.List(apollo.TaskFilter{Cursor: "!!"}); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Errorf("bad cursor: %v", err)
	}
}

// Tasks whose keys hash alike share a map slot and stay apart.
func TestShardCollisions(t *testing.T) {
	t.Parallel()
	s := &shard{tasks: map[uint64]*task{}}
	a, b, c := &task{id: "a"}, &task{id: "b", tenant: "x"}, &task{id: "c"}
	for _, tk := range []*task{a, b, c} {
		s.put(7, tk)
	}
	for _, tk := range []*task{a, b, c} {
		if got := s.get(7, tk.key()); got != tk {
			t.Fatalf("get(%v) = %v", tk.key(), got)
		}
	}
	if s.get(7, key{id: "b"}) != nil {
		t.Fatal("tenant ignored")
	}
	s.del(7, b)
	s.del(7, c)
	n := 0
	s.each(func(uint64, *task) { n++ })
	if n != 1 || s.get(7, a.key()) != a || s.get(7, c.key()) != nil {
		t.Fatalf("after deletes: %d tasks", n)
	}
	s.del(7, a)
	if len(s.tasks) != 0 {
		t.Fatal("slot not freed")
	}
}

// When the log fails, the bus refuses everything, even what would be a
// duplicate: the event it duplicates may not be on disk, and a reporter
// told "duplicate" would drop it for good.
func TestLogFailureRefusesEverything(t *testing.T) {
	t.Parallel()
	failed := make(chan error, 2)
	f := newFixture(t, func(o *Options) { o.OnLogFailed = func(err error) { failed <- err } })
	f.publish(t, ev("d1", 1, apollo.StatusRunning))
	f.log.mu.Lock()
	f.log.failWait = errors.New("no space left on device")
	f.log.mu.Unlock()
	out := make([]Outcome, 1)
	if err := f.bus.Publish(t.Context(), []apollo.Event{ev("d1", 2, apollo.StatusSuccess)}, out); err == nil {
		t.Fatal("Publish reported success with a failed log")
	}
	if err := <-failed; err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("OnLogFailed got %v", err)
	}
	for _, e := range []apollo.Event{ev("d1", 2, apollo.StatusSuccess), ev("d1", 1, apollo.StatusRunning), ev("d2", 1, apollo.StatusPending)} {
		f.bus.Publish(t.Context(), []apollo.Event{e}, out)
		if out[0].Result != RetryLater || out[0].Err.Code != apollo.EUNAVAILABLE {
			t.Errorf("%s/%d after the failure: %v", e.TaskID, e.Sequence, out[0])
		}
	}
	select {
	case <-failed:
		t.Error("OnLogFailed called twice")
	default:
	}
}

// Invalid finds the reason in a wrapped error instead of asserting its
// type (issue 15.11): a check that wraps its *apollo.Error must not panic
// the ingest path.
func TestInvalidUnwraps(t *testing.T) {
	t.Parallel()
	reason := &apollo.Error{Code: apollo.EINVALID, Field: "ts", Message: "in seconds"}
	tests := []struct {
		name  string
		err   error
		code  string
		field string
	}{
		{"the error itself", reason, apollo.EINVALID, "ts"},
		{"wrapped", fmt.Errorf("decoding event 3: %w", reason), apollo.EINVALID, "ts"},
		{"joined", errors.Join(errors.New("first"), reason), apollo.EINVALID, "ts"},
		{"not an apollo.Error", errors.New("bad input"), apollo.EINVALID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Invalid(tt.err)
			if o.Result != Rejected || o.Err == nil || o.Err.Code != tt.code || o.Err.Field != tt.field || o.Err.Message == "" {
				t.Fatalf("Invalid(%v) = %v %+v", tt.err, o.Result, o.Err)
			}
		})
	}
}

// A page's cursor comes back from the client: whatever it holds, List
// answers a page or EINVALID, never panics, and a page after a cursor it
// reads holds only the tenant's tasks listed after the cursor's key.
func FuzzListCursor(f *testing.F) {
	fx := newFixture(f, nil)
	for i := range 300 { // more than two chunks of the tenant's list
		e := ev(fmt.Sprintf("t%03d", i), 1, apollo.StatusRunning)
		if i%7 == 0 {
			e.Tenant = "other"
		}
		fx.clock.Advance(time.Duration(i%3) * time.Millisecond) // ties in createdAt
		fx.publish(f, e)
	}
	page, next, err := fx.bus.List(apollo.TaskFilter{Limit: 50})
	if err != nil || next == "" {
		f.Fatalf("first page: %d tasks, next %q, %v", len(page), next, err)
	}
	f.Add(next)
	f.Add(encodeCursor(listKey{at: math.MinInt64, id: ""}))
	f.Add(encodeCursor(listKey{at: math.MaxInt64, id: "\xff\x00:"}))
	f.Add(encodeCursor(listKey{at: -1, id: "t100"}))
	f.Add("!!")
	f.Add("")
	f.Fuzz(func(t *testing.T, cursor string) {
		k, kerr := decodeCursor(cursor)
		if kerr == nil {
			if back, err := decodeCursor(encodeCursor(k)); err != nil || back != k {
				t.Fatalf("cursor %q: key %+v reads back as %+v, %v", cursor, k, back, err)
			}
		}
		page, _, err := fx.bus.List(apollo.TaskFilter{Limit: 100, Cursor: cursor})
		if cursor != "" && (err != nil) != (kerr != nil) {
			t.Fatalf("cursor %q: List says %v, the cursor reads with %v", cursor, err, kerr)
		}
		if err != nil {
			if apollo.ErrorCode(err) != apollo.EINVALID {
				t.Fatalf("cursor %q: %v, want EINVALID", cursor, err)
			}
			return
		}
		for i := range page {
			tk := &page[i]
			if tk.Tenant != "" {
				t.Fatalf("cursor %q: a task of tenant %q in the default tenant's page", cursor, tk.Tenant)
			}
			if at := (listKey{at: tk.CreatedAt, id: tk.TaskID}); cursor != "" && !k.before(at) {
				t.Fatalf("cursor %q (key %+v): task %s at %d is not listed after it", cursor, k, tk.TaskID, tk.CreatedAt)
			}
		}
	})
}
