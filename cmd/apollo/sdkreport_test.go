package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// sdkTenant is one tenant of a test server: an agent token to report with
// (of rate, 0 for the server's) and a viewer token to read back with.
type sdkTenant struct {
	name          string
	agent, viewer string
}

// sdkTenants adds an agent and a viewer token for each tenant to cfg.
func sdkTenants(t *testing.T, cfg *config.Config, rate int, names ...string) []sdkTenant {
	t.Helper()
	var out []sdkTenant
	for _, name := range names {
		tn := sdkTenant{name: name}
		for _, role := range []string{"agent", "viewer"} {
			r, _ := httpapi.ParseRole(role)
			secret, tok, err := httpapi.NewToken(role, r, name)
			if err != nil {
				t.Fatal(err)
			}
			ct := config.Token{Name: role, Role: role, Tenant: name, SHA256: fmt.Sprintf("%x", tok.Hash)}
			if role == "agent" {
				tn.agent, ct.RateMax = secret, rate
			} else {
				tn.viewer = secret
			}
			cfg.Auth.Tokens = append(cfg.Auth.Tokens, ct)
		}
		out = append(out, tn)
	}
	return out
}

// sdkTasks reads a tenant's tasks (up to 1000) by task ID.
func sdkTasks(t *testing.T, addr string, tn sdkTenant) map[string]apollo.Task {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/tasks?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+tn.viewer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Tasks []apollo.Task `json:"tasks"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("tenant %s: tasks: HTTP %d", tn.name, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	m := map[string]apollo.Task{}
	for _, task := range page.Tasks {
		m[task.TaskID] = task
	}
	return m
}

// checkRatedRuns checks that each tenant has its runs succeeded, each of
// its own job rated_<tenant>, and no other task.
func checkRatedRuns(t *testing.T, addr string, tenants []sdkTenant, runs int) {
	t.Helper()
	for _, tn := range tenants {
		tasks := sdkTasks(t, addr, tn)
		if len(tasks) != runs {
			t.Errorf("tenant %s: %d tasks, want %d", tn.name, len(tasks), runs)
		}
		for id, task := range tasks {
			if task.Status != apollo.StatusSuccess || task.Name != "rated_"+tn.name {
				t.Errorf("tenant %s: task %s: %s of %q", tn.name, id, task.Status, task.Name)
			}
		}
	}
}

// A token whose rate is below the SDK's batch size: the server refused
// each full batch as a whole ("100 events in one request, over this
// token's 20 per second") with 429 and Retry-After: 1, and the SDK, told
// to wait and resend, resent the same batch every second for ever: none
// of the events, nor any reported after them, ever arrived. A request
// larger than the token's burst can never be let through; it is 413 now,
// and the SDK sends fewer events at a time.
func TestSDKWithATokenRateBelowItsBatchSize(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 20, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	const runs = 30 // 60 events per tenant: three times the token's rate
	for _, tn := range tenants {
		c, err := agent.New("http://"+addr, agent.WithToken(tn.agent), agent.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range runs {
			run := c.Task(fmt.Sprintf("%s-%d", tn.name, i), "rated_"+tn.name)
			if err := run.Running(); err != nil {
				t.Fatal(err)
			}
			if err := run.Succeed(); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Flush(ctx)
		cancel()
		if err != nil {
			t.Fatalf("tenant %s: %v; %+v", tn.name, err, c.Stats())
		}
		c.Close(context.Background())
		if st := c.Stats(); st.Accepted != 2*runs || st.Rejected != 0 || st.Dropped != 0 {
			t.Errorf("tenant %s: %+v", tn.name, st)
		}
	}
	checkRatedRuns(t, addr, tenants, runs)
}

// The Python example, batching, with a token whose rate is below its
// batch: the server answers such a request 413, and the reporter took any
// 413 as the refusal of its events. flush() put the batch back at the head
// of its queue and raised, so every later flush met the same 413 and no
// event of the script ever arrived; close() logged "not reported" and the
// process exited without them. It now sends fewer events at a time, as
// the SDK does.
func TestPythonReporterSplitsABatchOverItsTokensRate(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 20, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	const runs = 30
	for _, tn := range tenants {
		out, errOut := pyLib(t, 0, `
url, token, tenant = sys.argv[1:4]
with Reporter(url, token=token, batch=True, batch_size=100, give_up_after=30) as b:
    for i in range(30):
        t = b.task("%s-%d" % (tenant, i), "rated_" + tenant)
        t.running()
        t.success()
print(json.dumps(b.stats))
`, "http://"+addr, tn.agent, tn.name)
		var stats map[string]int
		if err := json.Unmarshal([]byte(out), &stats); err != nil {
			t.Fatalf("tenant %s: %v: %s\n%s", tn.name, err, out, errOut)
		}
		if stats["accepted"] != 2*runs || stats["rejected"] != 0 || stats["dropped"] != 0 {
			t.Errorf("tenant %s: stats %v\n%s", tn.name, stats, errOut)
		}
	}
	checkRatedRuns(t, addr, tenants, runs)
}

// A tenant at its limit of tasks in memory: the server answers a new
// run's event retry_later, with the reason, for as long as the limit
// holds. The SDK resent it and said nothing (it logged only requests that
// failed as a whole), so a job's runs went missing with no line in its
// log; with a spool, the only line was "server unreachable" while the
// server answered every request. It now logs the server's reason.
func TestSDKSaysWhyTheServerAnswersRetryLater(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Limits.TenantTasks = 2
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	for _, tn := range tenants {
		logs := newWatchedOutput()
		c, err := agent.New("http://"+addr, agent.WithToken(tn.agent), agent.WithFlushInterval(time.Millisecond),
			agent.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := c.Task(fmt.Sprintf("%s-%d", tn.name, i), "capped").Running(); err != nil {
				t.Fatal(err)
			}
		}
		logs.waitFor(t, fmt.Sprintf(`not stored: tenant \"%s\" has 2 tasks in memory, its limit`, tn.name), nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c.Close(ctx) // the third run cannot be delivered: dropped, counted
		if st := c.Stats(); st.Accepted != 2 || st.Dropped != 1 {
			t.Errorf("tenant %s: %+v", tn.name, st)
		}
		if tasks := sdkTasks(t, addr, tn); len(tasks) != 2 {
			t.Errorf("tenant %s: %d tasks, want 2", tn.name, len(tasks))
		}
	}
}

// limits.body_bytes took any value from 1 KiB, "too small for one event"
// below it; but one valid event can be over 7 KB (an extra of 4 KiB, a
// task ID and a job name of 256 bytes of control characters, escaped six
// bytes each). Under such a limit the server refused the event that
// carries apollo exec's output tail as a whole request (413), the SDK
// could only give it up, and the failed run stayed running until its
// timeout. The limit must hold the largest event the server accepts.
func TestBodyLimitHoldsTheLargestEvent(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Limits.BodyBytes = 4096
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "limits.body_bytes: 4096 is smaller than the largest event") {
		t.Errorf("body_bytes 4096: %v", err)
	}
	cfg.Limits.BodyBytes = 8 << 10
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	ctl := strings.Repeat("\x01", 250)
	for _, tn := range tenants {
		var cf clientFlags
		cf.server, cf.token = "http://"+addr, tn.agent
		var warned bytes.Buffer
		id := tn.name + "-" + ctl
		rep := openExecReporter(cf, "", id, tn.name+"-"+ctl, &warned)
		r := &execRun{argv: []string{"sh", "-c", `head -c 5000 /dev/zero | tr '\0' '\1'; exit 3`}, taskID: id, name: tn.name + "-" + ctl,
			clock: apollo.SystemClock, signals: make(chan os.Signal), stdout: io.Discard, stderr: io.Discard, rep: rep}
		if code := r.run(); code != 3 {
			t.Fatalf("tenant %s: exit %d", tn.name, code)
		}
		rep.close(testwait.Timeout(t))
		if warned.Len() > 0 {
			t.Errorf("tenant %s: %s", tn.name, warned.String())
		}
		task, ok := sdkTasks(t, addr, tn)[id]
		if !ok || task.Status != apollo.StatusFailed {
			t.Errorf("tenant %s: the run is %+v", tn.name, task)
		}
	}
}

// apollo report to a server that answers but does not store the event (a
// tenant at its limit of tasks answers retry_later for as long as it
// holds) gave up after its retries with "not delivered within
// WithMaxRetryElapsed(10s) (is the server running? check --server or
// APOLLO_SERVER)": neither the server's reason nor that it had answered.
func TestReportSaysTheServerAnsweredButDidNotStore(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	cfg.Limits.TenantTasks = 1
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	type outcome struct {
		code   int
		stderr string
	}
	results := make([]chan outcome, len(tenants))
	for i, tn := range tenants {
		results[i] = make(chan outcome, 1)
		go func() {
			if code, out, errOut := cli(t, "http://"+addr, "", "report", "--token", tn.agent, "--task", tn.name+"-1", "--status", "running"); code != 0 {
				results[i] <- outcome{code, out + errOut}
				return
			}
			code, _, errOut := cli(t, "http://"+addr, "", "report", "--token", tn.agent, "--task", tn.name+"-2", "--status", "running")
			results[i] <- outcome{code, errOut}
		}()
	}
	for i, tn := range tenants {
		got := <-results[i]
		want := fmt.Sprintf(`1 events answered retry_later: not stored: tenant "%s" has 1 tasks in memory, its limit`, tn.name)
		if got.code != 1 || !strings.Contains(got.stderr, want) ||
			!strings.Contains(got.stderr, "(the server answered HTTP 429 and did not store the event: report it again later)") ||
			strings.Contains(got.stderr, "is the server running") {
			t.Errorf("tenant %s: exit %d\n%s", tn.name, got.code, got.stderr)
		}
	}
}
