package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// expectServer is the configuration of the expectations tests: a webhook
// channel serving every tenant, an admin token per tenant, the default
// tenant's rules and expectations files.
type expectServer struct {
	dir, cfg string
	hook     *hook
	tokens   map[string]string
}

const expectRules = `RULE etl task_prefix: "etl_" ON: failed, missed NOTIFY: hook
RULE sentinel task_prefix: "sentinel" ON: failed NOTIFY: hook
`

// The default tenant's expectations: etl_extract is expected every 2
// seconds and never runs; the two jobs below it depend on it.
const expectFile = `expectations:
  - job: etl_extract
    schedule: "*/2 * * * * *"
    grace: 1s
  - {job: etl_transform, upstream: [etl_extract]}
  - {job: etl_load, upstream: [etl_extract]}
`

func newExpectServer(t *testing.T) *expectServer {
	t.Helper()
	x := &expectServer{dir: t.TempDir(), hook: newHook(t), tokens: map[string]string{}}
	var y strings.Builder
	fmt.Fprintf(&y, "channels:\n  hook:\n    type: webhook\n    url: %s\n    tenants: [\"*\"]\n", x.hook.srv.URL)
	y.WriteString("alert:\n  interval: 1s\n  dedup_window: 1s\n")
	y.WriteString("auth:\n  tokens:\n")
	for _, tenant := range []string{"", "acme"} {
		secret, tok, err := httpapi.NewToken(tenant+"-admin", httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		x.tokens[tenant] = secret
		fmt.Fprintf(&y, "    - {name: %s-admin, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	fmt.Fprintf(&y, "rules: %s\nexpectations: %s\ndata: %s\n", filepath.Join(x.dir, "rules.txt"), filepath.Join(x.dir, "expect.yaml"), filepath.Join(x.dir, "data"))
	x.cfg = filepath.Join(x.dir, "apollo.yaml")
	for name, body := range map[string]string{x.cfg: y.String(), filepath.Join(x.dir, "rules.txt"): expectRules, filepath.Join(x.dir, "expect.yaml"): expectFile} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

func (x *expectServer) start(t *testing.T) *proc {
	t.Helper()
	return startApollo(t, "server", "--config", x.cfg, "--listen", "127.0.0.1:0")
}

func (x *expectServer) client(t *testing.T, p *proc, tenant string) *apiclient.Client {
	t.Helper()
	c, err := apiclient.New("http://"+p.addr, apiclient.WithToken(x.tokens[tenant]))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// callCtx returns what gives each API call of an end-to-end test its own
// context, bounded by testwait.Timeout from when the call is made. One
// context for the whole test (testCtx(t, time.Minute)) bounded the sum of
// its steps instead, each of which may wait up to testwait.Timeout: the
// expectations tests take 3 to 5 s alone and 13 to 40 s under load (14 s
// measured beside stress-ng --cpu 12 on 2 cores), so their last calls
// could end with "context deadline exceeded" once the whole passed a
// minute, though no step had waited too long.
func callCtx(t *testing.T) func() context.Context {
	return func() context.Context { return testwait.Context(t) }
}

// notes is every notification a webhook call carries: itself, or a digest.
func notes(p webhook.ApolloPayload) []apollo.Notification {
	if len(p.Notifications) > 0 {
		return p.Notifications
	}
	return []apollo.Notification{p.Notification}
}

func anyNote(pred func(n apollo.Notification) bool) func(webhook.ApolloPayload) bool {
	return func(p webhook.ApolloPayload) bool { return slices.ContainsFunc(notes(p), pred) }
}

// A job with a schedule and a grace that never runs: the server records
// the missed runs in its history and metrics and the ON: missed rule
// sends one notification naming it. The two jobs downstream of it fail
// meanwhile: their alert is held, marked "inhibited by etl_extract", and
// sends nothing. Another tenant's expectations, set through the API, act
// on their own, survive kill -9 and act again after the restart.
func TestExpectationsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := callCtx(t)

	missed := x.hook.await(t, 30*time.Second, "etl_extract missed", anyNote(func(n apollo.Notification) bool {
		return n.Alert.Rule == "etl" && n.Alert.Tenant == ""
	}))
	if first := notes(missed)[0]; !strings.HasPrefix(first.Alert.Summary, "etl_extract missed: no run started by ") || first.Kind != apollo.NotifyFiring {
		t.Fatalf("the missed run's notification: %+v", first)
	}

	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	report(t, srv.addr, x.tokens[""], `[{"taskID":"t1","name":"etl_transform","status":"failed","sequence":1,"ts":%[1]d},
{"taskID":"l1","name":"etl_load","status":"failed","sequence":1,"ts":%[1]d},
{"taskID":"s1","name":"sentinel","status":"failed","sequence":1,"ts":%[1]d}]`)
	// The sentinel's notification comes after the echoes were decided:
	// none of them may have been sent.
	x.hook.await(t, 30*time.Second, "sentinel failed", anyNote(func(n apollo.Notification) bool {
		if n.Alert.Rule == "etl" && slices.ContainsFunc(n.Alert.TopNames, func(j string) bool { return j != "etl_extract" }) {
			t.Errorf("an echo was notified: %+v", n)
		}
		return n.Alert.Rule == "sentinel"
	}))
	list, err := def.Alerts(ctx(), apollo.AlertFiring)
	if err != nil {
		t.Fatal(err)
	}
	as := list.Alerts
	var held *apiclient.Alert
	for i := range as {
		if as[i].Rule == "etl" && len(as[i].InhibitedBy) > 0 {
			held = &as[i]
		}
	}
	if held == nil || !slices.Equal(held.InhibitedBy, []string{"etl_extract"}) || held.Count != 2 ||
		!strings.Contains(held.Summary, "(inhibited by etl_extract)") {
		t.Fatalf("no held alert of the two downstream jobs: %+v", as)
	}

	// The missed runs are runs of the job: in its history and metrics.
	page, err := def.Tasks(ctx(), apiclient.TaskQuery{Prefix: "missed:etl_extract@"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) == 0 || !page.Tasks[0].Late || page.Tasks[0].Name != "etl_extract" || page.Tasks[0].Status != apollo.StatusPending {
		t.Fatalf("missed runs in the history: %+v", page.Tasks)
	}
	m, err := def.Metrics(ctx(), time.Hour, "etl_extract")
	if err != nil {
		t.Fatal(err)
	}
	if m.Total.Missed == 0 {
		t.Fatalf("no missed run in the metrics: %+v", m)
	}

	// The second tenant: its own rules and expectations, through the API.
	if _, err := acme.PutRules(ctx(), []byte(`RULE acme_missed task_prefix: "" ON: missed GROUP_WINDOW: 1s NOTIFY: hook`), apiclient.RulesText); err != nil {
		t.Fatal(err)
	}
	put, err := acme.PutExpectations(ctx(), []byte("expectations:\n  - job: acme_job\n    schedule: \"*/2 * * * * *\"\n    grace: 1s\n"))
	if err != nil || put.Count != 1 {
		t.Fatalf("%+v %v", put, err)
	}
	if _, err := acme.PutExpectations(ctx(), []byte("expectations:\n  - job: x\n    every: soon\n")); !isProblem(err, "3:12") {
		t.Fatalf("a bad file: %v", err)
	}
	if got, _ := def.Expectations(ctx()); strings.Contains(got.Source, "acme_job") || got.Count != 3 {
		t.Fatalf("the default tenant sees %+v", got)
	}
	acmeMissed := func(what string) {
		t.Helper()
		x.hook.await(t, 30*time.Second, what, anyNote(func(n apollo.Notification) bool {
			return n.Alert.Tenant == "acme" && n.Alert.Rule == "acme_missed" && strings.HasPrefix(n.Alert.Summary, "acme_job missed")
		}))
	}
	acmeMissed("acme_job missed")

	// kill -9, restart: acme's expectations are still there, and act.
	srv.kill()
	restarted := time.Now()
	srv = x.start(t)
	acme = x.client(t, srv, "acme")
	if got, err := acme.Expectations(ctx()); err != nil || got.Count != 1 || !strings.Contains(got.Source, "acme_job") {
		t.Fatalf("after kill -9: %+v %v", got, err)
	}
	eventually(t, 30*time.Second, "a missed run of acme_job after the restart", func() bool {
		page, err := acme.Tasks(ctx(), apiclient.TaskQuery{Prefix: "missed:acme_job@"})
		return err == nil && len(page.Tasks) > 0 && page.Tasks[0].ScheduledAt >= restarted.UnixMilli()
	})
}

// isProblem reports whether err is a refused file with a problem at pos.
func isProblem(err error, pos string) bool {
	var ae *apiclient.Error
	if !errors.As(err, &ae) {
		return false
	}
	return slices.ContainsFunc(ae.Problems, func(p apiclient.RuleProblem) bool { return p.Pos == pos })
}

// report posts events as the token's tenant; %[1]d in body, if there is
// one, is now in Unix ms.
func report(t *testing.T, addr, token, body string) {
	t.Helper()
	if strings.Contains(body, "%[1]d") {
		body = fmt.Sprintf(body, time.Now().UnixMilli())
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || bytes.Count(b, []byte(`"result":"accepted"`)) != strings.Count(body, `"taskID"`) {
		t.Fatalf("reporting: %d %s", resp.StatusCode, b)
	}
}

// A reporter whose clock is ahead (or a hostile ts, up to the year 2200)
// does not make the evaluator judge expected runs that have not come:
// the run counts from when the server received it. Before, a running
// event two days ahead made every expected run up to then "missed" at
// once (one missed run recorded with its slot two days ahead, 86 400 of
// them counted), and a ts in 2199 kept the server stepping the schedule
// and its memo for minutes, growing by gigabytes.
func TestARunAheadOfTheClockIsNotJudgedAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server for several seconds")
	}
	t.Parallel()
	x := newExpectServer(t)
	srv := x.start(t)
	ctx := callCtx(t)
	acme := x.client(t, srv, "acme")
	if _, err := acme.PutExpectations(ctx(), []byte("expectations:\n  - job: skewed\n    schedule: \"*/2 * * * * *\"\n    grace: 1s\n")); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(48 * time.Hour).UnixMilli()
	report(t, srv.addr, x.tokens["acme"], fmt.Sprintf(`{"taskID":"s1","name":"skewed","status":"running","sequence":1,"ts":%d}`, ahead))
	var page apiclient.TaskPage
	eventually(t, 30*time.Second, "a missed run of skewed", func() bool {
		var err error
		page, err = acme.Tasks(ctx(), apiclient.TaskQuery{Prefix: "missed:skewed@"})
		return err == nil && len(page.Tasks) > 0
	})
	now := time.Now().UnixMilli()
	for _, m := range page.Tasks {
		if m.ScheduledAt > now {
			t.Errorf("a run expected at %s, still to come, is recorded missed: %+v", time.UnixMilli(m.ScheduledAt).UTC(), m)
		}
	}
}
