package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
)

// Pings and task pages at the seam (issue 20.1, 16.11, 18.1): the real
// API over a bus whose log is kept in memory, so that it can be stopped
// and recovered (from the log alone, or a snapshot and the log after it),
// with an agent and a viewer token in tenants "a" and "b".
type tenantServer struct {
	clock  *apollo.FakeClock
	tokens map[string]string // "agent/a" -> secret
	auth   Authenticator
	log    *memLog
	bus    *bus.Bus
	srv    *httptest.Server
	down   bool
}

func newTenantServer(t *testing.T) *tenantServer {
	t.Helper()
	ts := &tenantServer{clock: apollo.NewFakeClock(surviveNow), log: &memLog{}}
	ts.auth, ts.tokens = tenantTokens(t, RoleAgent, RoleViewer)
	ts.start(t, nil, 0)
	t.Cleanup(ts.stop)
	return ts
}

// start runs a bus and the API over it: recovered from the snapshot state
// (taken at lsn) if there is one, then the log's records after lsn.
func (ts *tenantServer) start(t *testing.T, state []byte, lsn uint64) {
	t.Helper()
	b, err := bus.New(bus.Options{Log: ts.log, Clock: ts.clock, Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if state != nil {
		if err := b.ReadState(bytes.NewReader(state)); err != nil {
			t.Fatal(err)
		}
	}
	for i, rec := range ts.log.recs[lsn:] {
		if err := b.Replay(lsn+uint64(i)+1, rec); err != nil {
			t.Fatal(err)
		}
	}
	b.Start(context.Background())
	ts.bus = b
	ts.srv = httptest.NewServer(New(Options{Bus: b, Auth: ts.auth, Clock: ts.clock, Logger: discardLogger}))
	ts.down = false
}

func (ts *tenantServer) stop() {
	if !ts.down {
		ts.down = true
		ts.srv.Close()
		ts.bus.Stop(context.Background())
	}
}

// snapshot checkpoints the bus and returns its state and LSN.
func (ts *tenantServer) snapshot(t *testing.T) ([]byte, uint64) {
	t.Helper()
	var buf bytes.Buffer
	var at uint64
	if err := ts.bus.Checkpoint(func(lsn uint64) error { at = lsn; return ts.bus.WriteState(&buf) }); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), at
}

// ping requests a ping URL as tenant's agent, one millisecond after the
// last, and returns the task ID it answered.
func (ts *tenantServer) ping(t *testing.T, tenant, path string) string {
	t.Helper()
	ts.clock.Advance(time.Millisecond)
	st, body := callAs(t, "GET", ts.srv.URL+path, ts.tokens["agent/"+tenant], "")
	if st != http.StatusOK || !strings.HasPrefix(body, "OK ") {
		t.Fatalf("tenant %s, %s: %d %s", tenant, path, st, body)
	}
	return strings.TrimSpace(strings.TrimPrefix(body, "OK "))
}

// timeline reads a task as tenant's viewer: "running/1 success/2".
func (ts *tenantServer) timeline(t *testing.T, tenant, id string) string {
	t.Helper()
	st, body := callAs(t, "GET", ts.srv.URL+"/api/v1/tasks/"+id, ts.tokens["viewer/"+tenant], "")
	if st != http.StatusOK {
		return fmt.Sprint(st)
	}
	var task apollo.Task
	if err := json.Unmarshal([]byte(body), &task); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, r := range task.History {
		steps = append(steps, fmt.Sprintf("%s/%d", r.Status, r.Sequence))
	}
	return strings.Join(steps, " ")
}

// An end pairs with its own tenant's newest open run of the job; two
// tenants with the same job names never pair with each other's runs; a
// run that timed out is no longer open.
func TestPingsPairWithinTheirTenant(t *testing.T) {
	t.Parallel()
	ts := newTenantServer(t)
	a1 := ts.ping(t, "a", "/ping/backup/start")
	b1 := ts.ping(t, "b", "/ping/backup/start")
	a2 := ts.ping(t, "a", "/ping/backup/start") // overlaps a1
	if got := ts.ping(t, "b", "/ping/backup"); got != b1 {
		t.Errorf("b's end paired with %s, want b's own start %s", got, b1)
	}
	if got := ts.ping(t, "a", "/ping/backup/fail"); got != a2 {
		t.Errorf("a's end paired with %s, want a's newest open run %s", got, a2)
	}
	if got := ts.ping(t, "a", "/ping/backup"); got != a1 {
		t.Errorf("a's second end paired with %s, want the older open run %s", got, a1)
	}
	a3 := ts.ping(t, "a", "/ping/backup/3")
	b3 := ts.ping(t, "b", "/ping/backup/0")
	if slices.Contains([]string{a1, a2, b1}, a3) || slices.Contains([]string{a1, a2, b1}, b3) {
		t.Errorf("ends with no open run paired with a closed one: %s, %s", a3, b3)
	}
	for _, c := range []struct{ tenant, id, want string }{
		{"a", a1, "running/1 success/2"}, {"a", a2, "running/1 failed/2"}, {"b", b1, "running/1 success/2"},
		{"a", a3, "failed/1"}, {"b", b3, "success/1"}, {"b", a1, "404"},
	} {
		if got := ts.timeline(t, c.tenant, c.id); got != c.want {
			t.Errorf("tenant %s, %s: %s, want %s", c.tenant, c.id, got, c.want)
		}
	}

	// A start whose deadline passed is a timeout, not an open run: the end
	// that comes later is a run of its own (it used to pair and be refused).
	sub := ts.bus.Subscribe(16)
	defer sub.Close()
	e1 := ts.ping(t, "a", "/ping/etl/start?timeout=1m")
	f1 := ts.ping(t, "b", "/ping/etl/start?timeout=1h")
	ts.clock.Advance(2 * time.Minute)
	waitStatus(t, sub, e1, apollo.StatusTimeout)
	if got := ts.ping(t, "a", "/ping/etl"); got == e1 {
		t.Errorf("an end paired with a run that had timed out")
	}
	if got := ts.ping(t, "b", "/ping/etl"); got != f1 {
		t.Errorf("b's end paired with %s, want its open run %s", got, f1)
	}
}

// waitStatus waits for a change that brings task id to status.
func waitStatus(t *testing.T, sub *bus.Subscription, id string, status apollo.Status) {
	t.Helper()
	timeout := time.After(testwait.Timeout(t))
	for {
		select {
		case c := <-sub.C():
			if c.Task.TaskID == id && c.Task.Status == status {
				return
			}
		case <-timeout:
			t.Fatalf("%s never became %s", id, status)
		}
	}
}

// After a restart the open runs are found again, rebuilt from the log
// alone or from a snapshot and the log after it, for both tenants.
func TestPingsPairAfterRestart(t *testing.T) {
	t.Parallel()
	for _, fromSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", fromSnapshot), func(t *testing.T) {
			t.Parallel()
			ts := newTenantServer(t)
			a1 := ts.ping(t, "a", "/ping/nightly/start")
			b1 := ts.ping(t, "b", "/ping/nightly/start")
			h1 := ts.ping(t, "a", "/ping/hourly/start")
			done := ts.ping(t, "a", "/ping/done/start")
			ts.ping(t, "a", "/ping/done")
			state, lsn := ts.snapshot(t)
			b2 := ts.ping(t, "b", "/ping/nightly/start") // after the snapshot: only in the log
			l1 := ts.ping(t, "a", "/ping/late/start")
			ts.stop()
			if !fromSnapshot {
				state, lsn = nil, 0
			}
			ts.start(t, state, lsn)
			for _, c := range []struct{ tenant, path, want string }{
				{"b", "/ping/nightly", b2}, {"b", "/ping/nightly/fail", b1}, {"a", "/ping/nightly", a1},
				{"a", "/ping/late/1", l1}, {"a", "/ping/hourly", h1},
			} {
				if got := ts.ping(t, c.tenant, c.path); got != c.want {
					t.Errorf("tenant %s, %s after the restart: paired with %s, want %s", c.tenant, c.path, got, c.want)
				}
			}
			if got := ts.ping(t, "a", "/ping/done"); got == done {
				t.Errorf("an end paired with a run that had ended before the restart")
			}
		})
	}
}

// Paging through a tenant's tasks while tasks are added and changed, in
// both tenants, lists every task that was there at the start exactly once,
// nothing twice, in listing order, and nothing of the other tenant. (With
// the order by update time, a task changed before its page came moved
// ahead of the cursor and was never listed.)
func TestTaskPagesWhileChanging(t *testing.T) {
	t.Parallel()
	ts := newTenantServer(t)
	post := func(tenant string, evs []string) error {
		body := "[" + strings.Join(evs, ",") + "]"
		req, _ := http.NewRequest("POST", ts.srv.URL+"/api/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+ts.tokens["agent/"+tenant])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var ans struct{ Accepted int }
		json.NewDecoder(resp.Body).Decode(&ans)
		if resp.StatusCode != 200 || ans.Accepted != len(evs) {
			return fmt.Errorf("tenant %s: %d, %d of %d accepted", tenant, resp.StatusCode, ans.Accepted, len(evs))
		}
		return nil
	}
	event := func(id string, seq int64, st string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":"job_%s","sequence":%d,"status":%q,"ts":%d}`, id, id[:1], seq, st, surviveNow.UnixMilli())
	}
	const n = 400
	for _, tenant := range []string{"a", "b"} {
		for i := 0; i < n; i += 100 {
			var evs []string
			for j := i; j < i+100; j++ {
				evs = append(evs, event(fmt.Sprintf("%s%04d", tenant, j), 1, "running"))
			}
			if err := post(tenant, evs); err != nil {
				t.Fatal(err)
			}
			ts.clock.Advance(time.Millisecond)
		}
	}

	// A writer adds tasks in both tenants, and ends the newer half of the
	// first ones, until the paging is over; between pages, the test ends
	// tasks of the older half, which the listing reaches last.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, tenant := range []string{"a", "b"} {
				evs := []string{event(fmt.Sprintf("%snew%05d", tenant, i), 1, "running")}
				if i < n/2 {
					evs = append(evs, event(fmt.Sprintf("%s%04d", tenant, n/2+i), 2, "success"))
				}
				if err := post(tenant, evs); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	seen := map[string]int{}
	cursor, pages, next := "", 0, 0
	var last apollo.Task
	for {
		st, body := callAs(t, "GET", ts.srv.URL+"/api/v1/tasks?limit=30&cursor="+cursor, ts.tokens["viewer/a"], "")
		var page struct {
			Tasks []apollo.Task
			Next  string
		}
		if st != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("page %d: %d %s", pages, st, body)
		}
		pages++
		for _, task := range page.Tasks {
			seen[task.TaskID]++
			if task.Tenant != "a" || !strings.HasPrefix(task.TaskID, "a") {
				t.Errorf("tenant a's listing shows %s of tenant %q", task.TaskID, task.Tenant)
			}
			if last.TaskID != "" && (task.CreatedAt > last.CreatedAt || task.CreatedAt == last.CreatedAt && task.TaskID > last.TaskID) {
				t.Errorf("page %d: %s (created %d) after %s (created %d)", pages, task.TaskID, task.CreatedAt, last.TaskID, last.CreatedAt)
			}
			last = task
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
		var evs []string
		for range 5 {
			if next < n/2 {
				evs = append(evs, event(fmt.Sprintf("a%04d", next), 3, "success"))
				next++
			}
		}
		if len(evs) > 0 {
			if err := post("a", evs); err != nil {
				t.Fatal(err)
			}
		}
		ts.clock.Advance(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for i := range n {
		if id := fmt.Sprintf("a%04d", i); seen[id] != 1 {
			t.Errorf("%s listed %d times, want once", id, seen[id])
		}
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("%s listed %d times", id, k)
		}
	}
	if next == 0 || pages < n/30 {
		t.Fatalf("%d pages, %d tasks ended between them: the test did not page while changing", pages, next)
	}
}
