package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/sched"
	"github.com/apollo-11/apollo/selfmetrics"
)

// testScheduler adapts a real scheduler to the routes, as cmd/apollo does.
type testScheduler struct{ s *sched.Scheduler }

func (a testScheduler) JobList() []apollo.ScheduledJob      { return a.s.Jobs() }
func (a testScheduler) Trigger(name string) (string, error) { return a.s.Trigger(name) }
func (a testScheduler) Pause(name string) error             { return a.s.Pause(name) }
func (a testScheduler) Resume(name string) error            { return a.s.Resume(name) }

// publicPaths are the only routes that need no credential.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true, "/": true, "/static/": true}

// secured is a server with one token per role in tenant "a", and one
// operator in tenant "b".
type secured struct {
	srv    *httptest.Server
	bus    *bus.Bus
	api    *Server
	audit  *audit.Log
	alerts *alert.Engine
	tokens map[string]string // "role/tenant" -> secret
}

// securedAlerts is an alert engine holding, in tenant "a", a firing alert
// and a silence both called "t-a", the ID the route table test puts in
// every {id}.
func securedAlerts(t *testing.T) *alert.Engine {
	t.Helper()
	clock := apollo.NewFakeClock(time.Now())
	state := alert.NewMemoryState()
	err := state.Save(context.Background(), alert.State{
		Alerts: []alert.StoredAlert{{Alert: apollo.Alert{ID: "t-a", Tenant: "a", Rule: "r", Group: "job", State: apollo.AlertFiring,
			StartedAt: clock.Now(), FiredAt: clock.Now()}, FiringSent: true}},
		Silences: []alert.Silence{securedSilence(clock.Now())},
	})
	if err != nil {
		t.Fatal(err)
	}
	agg, _ := metrics.New(metrics.Options{Clock: clock, Logger: discardLogger})
	e, err := alert.New(alert.Options{Store: agg, Sender: discardSender{}, State: state, Clock: clock, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

func securedSilence(now time.Time) alert.Silence {
	return alert.Silence{ID: "t-a", Tenant: "a", Rule: "r", StartsAt: now, EndsAt: now.Add(time.Hour), CreatedBy: "fixture", Comment: "fixture"}
}

type discardSender struct{}

func (discardSender) Send(apollo.Notification) {}

// ackedBy returns who acknowledged tenant a's alert t-a.
func (sec *secured) ackedBy() string {
	for _, a := range sec.alerts.Alerts("a", "") {
		if a.ID == "t-a" {
			return a.AckedBy
		}
	}
	return "?"
}

func newSecured(t *testing.T, rate int) *secured {
	t.Helper()
	b, agg := newMeteredBus(t)
	auth, tokens := tenantTokens(t, RoleAgent, RoleViewer, RoleOperator, RoleAdmin)
	sec := &secured{bus: b, tokens: tokens}
	sec.audit = audit.NewMemory(100, nil)
	// Tenant a's channel, named as the job so that the route table's
	// {name} finds it: tenant b tests it in vain.
	quiet := notify.NotifierFunc(func(context.Context, *notify.Message) (bool, error) { return false, nil })
	disp, err := notify.NewDispatcher([]notify.Channel{{Name: "job", Notifier: quiet, Tenants: []string{"a"}}}, notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sched.Parse("jobs.yaml", []byte("jobs:\n  - name: job\n    schedule: \"@yearly\"\n    command: [\"true\"]\n    concurrency: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sched.New(jobs, sched.Options{Reporter: sched.ReporterFunc(func(apollo.Event) error { return nil }), StateDir: t.TempDir(),
		Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	sc.Start(context.Background())
	t.Cleanup(func() { sc.Stop(context.Background()) })
	hub := newHub(t, b, nil)
	sec.alerts = securedAlerts(t)
	sec.api = New(Options{Bus: b, Alerts: sec.alerts, Rules: rulebook.Book{Engine: sec.alerts}, Metrics: agg, Deliveries: disp, Stream: hub, Scheduler: testScheduler{sc}, SchedulerTenant: "a", Expectations: newMemExpectations(), Auth: auth, Audit: sec.audit, IngestRate: rate, Logger: discardLogger,
		Prometheus: selfmetrics.Parts{selfmetrics.Watch("bus", b.Stats)}.Handler(discardLogger, TenantOf)})
	sec.srv = httptest.NewServer(sec.api)
	t.Cleanup(sec.srv.Close)
	return sec
}

func (sec *secured) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	return callAs(t, method, sec.srv.URL+path, token, body)
}

// Every route in the table needs a role unless it is public on purpose: a
// new route without one fails here.
func TestRouteTableDeclaresRoles(t *testing.T) {
	t.Parallel()
	s := New(Options{Bus: &bus.Bus{}})
	for _, rt := range s.routes() {
		if rt.role == RoleNone && !publicPaths[rt.path] {
			t.Errorf("%s %s has no role: give it one or add it to publicPaths with a reason", rt.method, rt.path)
		}
	}
}

// Every route × every role × own and other tenant: the allowed succeed,
// the rest get 401/403 and change nothing.
func TestEveryRouteEveryRole(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 0)
	// A task in tenant a to read and correct.
	st, body := sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/a"], `{"taskID":"t-a","name":"job","sequence":1,"status":"running","ts":1764400001000}`)
	if st != 200 || !strings.Contains(body, "accepted") {
		t.Fatalf("seeding: %d %s", st, body)
	}
	bodies := map[string]string{
		"/api/v1/events":            `{"taskID":"x-%s","sequence":1,"status":"pending","ts":1764400001000}`,
		"/api/v1/tasks/{id}/status": `{"status":"success","reason":"checked"}`,
		"/api/v1/silences":          `{"rule":"r","duration":"1h","comment":"test %s"}`,
		"/api/v1/rules":             `{"rules":[{"name":"r%s","taskPrefix":"x","on":["failed"]}]}`,
	}
	// before puts back what an earlier allowed request took away, so that
	// every role meets the same fixture.
	before := map[string]func(){
		"DELETE /api/v1/silences/{id}": func() {
			if _, err := sec.alerts.AddSilence("a", securedSilence(time.Now())); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, rt := range sec.api.routes() {
		if rt.role == RoleNone {
			continue
		}
		for _, tenant := range []string{"a", "b"} {
			for _, role := range []Role{RoleNone, RoleAgent, RoleViewer, RoleOperator, RoleAdmin} {
				path := strings.NewReplacer("{id}", "t-a", "{name}", "job", "{action}", "start").Replace(rt.path)
				body := bodies[rt.path]
				if strings.Contains(body, "%s") {
					body = fmt.Sprintf(body, role.String()+tenant)
				}
				token := ""
				if role != RoleNone {
					token = sec.tokens[role.String()+"/"+tenant]
				}
				name := fmt.Sprintf("%s %s as %s/%s", rt.method, path, role, tenant)
				if f := before[rt.method+" "+rt.path]; f != nil {
					f()
				}
				taskBefore, _ := sec.bus.Get("a", "t-a")
				ackBefore := sec.ackedBy()
				status, resp := sec.do(t, rt.method, path, token, body)
				taskAfter, _ := sec.bus.Get("a", "t-a")
				switch {
				case role == RoleNone:
					if status != 401 {
						t.Errorf("%s: %d, want 401", name, status)
					}
				case !role.Allows(rt.role):
					if status != 403 {
						t.Errorf("%s: %d, want 403 (%s)", name, status, resp)
					}
				case tenant == "b" && (strings.Contains(path, "t-a") || strings.HasPrefix(path, "/api/v1/jobs") && path != "/api/v1/jobs/health" ||
					strings.HasPrefix(path, "/api/v1/channels/")):
					if status != 404 {
						t.Errorf("%s: tenant b reached tenant a's task: %d %s", name, status, resp)
					}
				case rt.path == "/api/v1/stream":
					// Allowed through the guard: the handler then wants a WebSocket handshake.
					if status == 401 || status == 403 || status == 404 {
						t.Errorf("%s: allowed but got %d %s", name, status, resp)
					}
				default:
					if status >= 400 {
						t.Errorf("%s: allowed but got %d %s", name, status, resp)
					}
				}
				if status == 401 || status == 403 || tenant == "b" {
					if taskBefore.Status != taskAfter.Status || len(taskBefore.History) != len(taskAfter.History) {
						t.Fatalf("%s changed tenant a's task", name)
					}
					if sec.ackedBy() != ackBefore {
						t.Fatalf("%s acknowledged tenant a's alert", name)
					}
				}
			}
		}
	}
	// Tenant b lists nothing of tenant a.
	for _, path := range []string{"/api/v1/tasks", "/api/v1/alerts", "/api/v1/silences", "/api/v1/jobs/health"} {
		_, body = sec.do(t, "GET", path, sec.tokens["viewer/b"], "")
		if strings.Contains(body, "t-a") {
			t.Errorf("tenant b lists tenant a's things at %s: %s", path, body)
		}
	}
	if len(sec.audit.List("", 100)) == 0 {
		t.Error("failed authentications were not audited")
	}
	audited := map[string]bool{}
	for _, e := range sec.audit.List("a", 100) {
		audited[e.Action] = true
	}
	for _, action := range []string{"task.correct", "job.run", "job.pause", "job.resume", "alert.ack", "silence.add", "silence.remove", "rules.update"} {
		if !audited[action] {
			t.Errorf("%s not audited in tenant a: %v", action, audited)
		}
	}
	if by := sec.ackedBy(); by != "operator-a" {
		t.Errorf("tenant a's alert acknowledged by %q, want the first allowed caller operator-a", by)
	}
	if got := sec.alerts.Rules("b"); len(got) != 1 || got[0].Name != "radminb" {
		t.Errorf("tenant b's rules %v, want its admin's", got)
	}
}

func TestTenantFromTokenNotBody(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 0)
	sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/a"], `{"taskID":"sneaky","tenant":"b","sequence":1,"status":"running","ts":1764400000001}`)
	if _, err := sec.bus.Get("b", "sneaky"); err == nil {
		t.Fatal("the body's tenant was used")
	}
	if _, err := sec.bus.Get("a", "sneaky"); err != nil {
		t.Fatal("the token's tenant was not used")
	}
}

func TestIngestRateLimit(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 10)
	clock := apollo.NewFakeClock(time.Unix(1000, 0))
	sec.api.opts.Clock = clock
	batch := func(n int, tag string) string {
		evs := make([]string, n)
		for i := range evs {
			evs[i] = fmt.Sprintf(`{"taskID":"r%s%d","sequence":1,"status":"pending","ts":1764400000001}`, tag, i)
		}
		return "[" + strings.Join(evs, ",") + "]"
	}
	if st, body := sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/a"], batch(8, "a")); st != 200 {
		t.Fatalf("within the rate: %d %s", st, body)
	}
	req, _ := http.NewRequest("POST", sec.srv.URL+"/api/v1/events", strings.NewReader(batch(8, "b")))
	req.Header.Set("Authorization", "Bearer "+sec.tokens["agent/a"])
	resp, _ := http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the rate: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := sec.bus.Get("a", "rb0"); err == nil {
		t.Fatal("a rate-limited request stored events")
	}
	// The two events left are taken; with the bucket empty, a request is
	// refused before its body is read: garbage gets 429, not 400.
	if st, body := sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/a"], batch(2, "e")); st != 200 {
		t.Fatalf("the last two events of the second: %d %s", st, body)
	}
	if st, body := sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/a"], "{{{ not json"); st != 429 {
		t.Fatalf("an empty bucket: %d %s, want 429 before the body is decoded", st, body)
	}
	// Another token has its own bucket; after a second the first one refills.
	if st, _ := sec.do(t, "POST", "/api/v1/events", sec.tokens["admin/a"], batch(8, "c")); st != 200 {
		t.Errorf("another token: %d", st)
	}
	clock.Advance(time.Second)
	if st, _ := sec.do(t, "POST", "/api/v1/events", sec.tokens["agent/a"], batch(8, "d")); st != 200 {
		t.Errorf("after a second: %d", st)
	}
}

func TestPings(t *testing.T) {
	t.Parallel()
	srv, b := newTestServer(t, nil)
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// start, then success: one run with two events.
	st, body := get("/ping/backup/start?timeout=30m")
	if st != 200 || !strings.HasPrefix(body, "OK backup@ping-") {
		t.Fatalf("start: %d %s", st, body)
	}
	id := strings.TrimSpace(strings.TrimPrefix(body, "OK "))
	if st, body := get("/ping/backup"); st != 200 || strings.TrimSpace(strings.TrimPrefix(body, "OK ")) != id {
		t.Fatalf("end paired with %q, want %s", body, id)
	}
	task, _ := b.Get("", id)
	if task.Status != apollo.StatusSuccess || len(task.History) != 2 || task.TimeoutMs != 30*60*1000 {
		t.Errorf("paired run %+v", task)
	}
	// An exit code with no start: a run reported only by its end, its
	// start unknown (no invented start at the moment of the end).
	st, body = get("/ping/report/3")
	id2 := strings.TrimSpace(strings.TrimPrefix(body, "OK "))
	task, _ = b.Get("", id2)
	if st != 200 || task.Status != apollo.StatusFailed || len(task.History) != 1 || task.StartedAt != 0 || task.FinishedAt == 0 {
		t.Fatalf("exit code 3: %d %+v", st, task)
	}
	var extra map[string]any
	json.Unmarshal(task.History[0].Extra, &extra)
	if extra["exitCode"] != float64(3) {
		t.Errorf("extra %v", extra)
	}
	// POST body lands in extra; fail is failed.
	resp, _ := http.Post(srv.URL+"/ping/etl/fail", "text/plain", strings.NewReader("disk full"))
	resp.Body.Close()
	list, _, _ := b.List(apollo.TaskFilter{Prefix: "etl"})
	if len(list) != 1 || list[0].Status != apollo.StatusFailed {
		t.Fatalf("fail ping: %+v", list)
	}
	full, _ := b.Get("", list[0].TaskID)
	if !strings.Contains(string(full.History[0].Extra), "disk full") {
		t.Errorf("body not kept: %s", full.History[0].Extra)
	}
	// Each refusal says what is wrong.
	for bad, msg := range map[string]string{
		"/ping/x/256":   "is not start, fail or an exit code 0-255",
		"/ping/x/later": "is not start, fail or an exit code 0-255",
		"/ping/a@b":     "cannot hold @",
		"/ping/a%00b":   "a NUL byte",
		"/ping/" + strings.Repeat("n", apollo.MaxNameBytes+1): "257 bytes, over the limit of 256",
		"/ping/x/start?timeout=soon":                          `"soon" is not a duration`,
		"/ping/x/start?timeout=-5m":                           `"-5m" is not above zero`,
		"/ping/x/start?timeout=100000h":                       `"100000h" is over the limit of 366 days`,
		"/ping//0":                                            "an empty or dot segment",
		"/ping/./0":                                           "an empty or dot segment",
		"/ping/backup/":                                       "an empty or dot segment",
	} {
		st, body := get(bad)
		var ans struct{ Error apollo.Error }
		json.Unmarshal([]byte(body), &ans)
		if st != 400 || !strings.Contains(ans.Error.Message, msg) {
			t.Errorf("%s: %d %s, want 400 and %s", bad, st, body, msg)
		}
	}
}

// A start whose end never comes becomes a timeout (the bus writes it):
// at its own ?timeout=, or without one at the default deadline, which the
// run shows as its timeoutMs (issue 15.9: it stayed running with
// timeoutMs null).
func TestPingStartWithoutEndTimesOut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		query string
		after time.Duration
	}{{"?timeout=10m", 10 * time.Minute}, {"", 3 * time.Hour}} {
		clock := apollo.NewFakeClock(time.Unix(1_800_000_000, 0))
		b, _ := bus.New(bus.Options{Clock: clock, Logger: discardLogger, DefaultTimeout: 3 * time.Hour})
		b.Start(context.Background())
		defer b.Stop(context.Background())
		sub := b.Subscribe(10)
		srv := httptest.NewServer(New(Options{Bus: b, Clock: clock}))
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/ping/nightly/start" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := strings.TrimSpace(strings.TrimPrefix(string(body), "OK "))
		if task, err := b.Get("", id); err != nil || task.TimeoutMs != tt.after.Milliseconds() {
			t.Fatalf("%q: the started run %+v, %v: want its deadline shown", tt.query, task, err)
		}
		clock.Advance(tt.after + time.Second)
		c := waitTimeout(t, sub, id)
		if c.Record.Kind != apollo.KindTimeout || c.Task.FinishedAt != clock.Now().Add(-time.Second).UnixMilli() {
			t.Errorf("%q: timeout change %+v", tt.query, c)
		}
	}
}

// waitTimeout returns the change that timed task id out, or fails.
func waitTimeout(t *testing.T, sub *bus.Subscription, id string) *apollo.Change {
	t.Helper()
	timeout := time.After(testwait.Timeout(t))
	for {
		select {
		case c := <-sub.C():
			if c.Task.TaskID == id && c.Task.Status == apollo.StatusTimeout {
				return c
			}
		case <-timeout:
			t.Fatalf("%s: no timeout", id)
			return nil
		}
	}
}

func TestPingKeyLimitedToItsJobs(t *testing.T) {
	t.Parallel()
	b, _ := bus.New(bus.Options{Logger: discardLogger})
	b.Start(context.Background())
	defer b.Stop(context.Background())
	secret, tok, _ := NewToken("backup-ping", RoleAgent, "")
	tok.JobPrefix = "backup"
	srv := httptest.NewServer(New(Options{Bus: b, Auth: NewTokenAuth([]Token{tok})}))
	defer srv.Close()
	for path, want := range map[string]int{
		"/ping/backup?key=" + secret: 200, "/ping/etl?key=" + secret: 403, "/ping/backup?key=wrong": 401, "/ping/backup": 401,
	} {
		resp, _ := http.Get(srv.URL + path)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", strings.Replace(path, secret, "KEY", 1), resp.StatusCode, want)
		}
	}
}

func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer apl_x", "bearer  x", "Basic abc", "Bearer", "Bearer \x00", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		secret, ok := bearer(h)
		if ok && (secret == "" || strings.ContainsAny(secret, " \t\r\n")) {
			t.Fatalf("bearer(%q) = %q", h, secret)
		}
		a := NewTokenAuth([]Token{})
		req := httptest.NewRequest("GET", "/api/v1/tasks", nil)
		req.Header.Set("Authorization", h)
		if p, err := a.Authenticate(req); p != nil || apollo.ErrorCode(err) != apollo.EUNAUTHORIZED {
			t.Fatalf("no tokens configured, yet %q gave %v, %v", h, p, err)
		}
	})
}

func FuzzParseTokenHash(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseTokenHash(s)
		if err == nil && fmt.Sprintf("%x", h) != strings.ToLower(s) {
			t.Fatalf("%q parsed to %x", s, h)
		}
	})
}
