package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
)

// apollo sched of tenant a is killed (-9) mid-run and started again on
// the same state directory with the token of tenant b (its configuration
// changed): the run it lost is not reported as tenant b's (a write into
// another tenant, which left a's run running for ever), and the log says
// what to do; its process is killed all the same. Started again with a's
// token, it settles the run as a's.
func TestSchedLostRunsStayWithTheirTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	o := newOwnedScheds(t)
	sched, taskOf, srv, secrets, dir := o.sched, o.taskOf, o.srv, o.secrets, o.dir
	task, pid := o.killedMidRun(t)

	second := sched("b")
	eventually(t, 30*time.Second, "the lost run's process killed", func() bool { return !processAlive(pid) })
	// The scheduler sends in order: once a run of b's own has ended on
	// the server, whatever it sent at its start is there too.
	eventually(t, 30*time.Second, "a run of b's ended", func() bool {
		code, body := request(t, srv.addr, secrets["b"], "GET", "/api/v1/tasks?status=success&prefix=owned_job")
		var page apiclient.TaskPage
		return code == http.StatusOK && json.Unmarshal([]byte(body), &page) == nil && len(page.Tasks) > 0
	})
	if code, tk := taskOf("b", task); code != http.StatusNotFound {
		t.Errorf("a's lost run was reported as tenant b's: %d, %s", code, tk.Status)
	}
	if _, tk := taskOf("a", task); tk.Status != apollo.StatusRunning {
		t.Errorf("a's lost run is %s, want still running until a scheduler with a's token settles it", tk.Status)
	}
	second.term(t)
	if out := second.out.String(); !strings.Contains(out, "reported with another token") || !strings.Contains(out, task) {
		t.Errorf("the scheduler with b's token does not say that it left a's run, and which:\n%s", out)
	}

	third := sched("a")
	var tk apollo.Task
	eventually(t, 30*time.Second, "a's lost run settled", func() bool {
		_, tk = taskOf("a", task)
		return tk.Status.Final()
	})
	if last := tk.History[len(tk.History)-1]; tk.Status != apollo.StatusFailed || !strings.Contains(string(last.Extra), `"lost":true`) ||
		!strings.Contains(string(last.Extra), `"killed":true`) {
		t.Errorf("a's lost run is %s with %s, want failed, lost and killed", tk.Status, last.Extra)
	}
	third.term(t)
	if b, _ := os.ReadFile(filepath.Join(dir, "sched", "sched-state.json")); strings.Contains(string(b), task) {
		t.Errorf("a's settled run is still in the state file:\n%s", b)
	}
}

// ownedScheds is a server with an admin of tenants a and b, and a jobs
// file of one job whose first run never ends: the set-up of a scheduler
// killed mid-run and started again with another tenant's token.
type ownedScheds struct {
	t         *testing.T
	dir, runs string
	srv       *proc
	secrets   map[string]string // by tenant
}

func newOwnedScheds(t *testing.T) *ownedScheds {
	t.Helper()
	o := &ownedScheds{t: t, dir: t.TempDir(), secrets: map[string]string{}}
	var cfg strings.Builder
	cfg.WriteString("auth:\n  tokens:\n")
	for _, tenant := range []string{"a", "b"} {
		secret, tok, err := httpapi.NewToken(tenant+"-admin", httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		o.secrets[tenant] = secret
		fmt.Fprintf(&cfg, "    - {name: %s-admin, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	config := filepath.Join(o.dir, "apollo.yaml")
	os.WriteFile(config, []byte(cfg.String()), 0o600)
	o.runs = filepath.Join(o.dir, "runs")
	os.WriteFile(filepath.Join(o.dir, "jobs.yaml"), []byte(`jobs:
  - name: owned_job
    schedule: "@every 1s"
    shell: "mkdir `+filepath.Join(o.dir, "lock")+` 2>/dev/null || exit 0; echo $APOLLO_TASK_ID $$ > `+o.runs+`; exec sleep 600"
`), 0o644)
	o.srv = startApollo(t, "server", "--data", filepath.Join(o.dir, "data"), "--config", config, "--listen", "127.0.0.1:0")
	return o
}

// stateDir is the schedulers' state directory.
func (o *ownedScheds) stateDir() string { return filepath.Join(o.dir, "sched") }

// sched starts apollo sched with tenant's token.
func (o *ownedScheds) sched(tenant string) *proc {
	return startProc(o.t, "apollo sched: ", "sched", "--jobs", filepath.Join(o.dir, "jobs.yaml"), "--server", "http://"+o.srv.addr,
		"--state", o.stateDir(), "--token", o.secrets[tenant])
}

// taskOf is tenant's task id on the server, and the answer's status code.
func (o *ownedScheds) taskOf(tenant, id string) (int, apollo.Task) {
	t := o.t
	var tk apollo.Task
	code, body := request(t, o.srv.addr, o.secrets[tenant], "GET", "/api/v1/tasks/"+url.PathEscape(id))
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &tk); err != nil {
			t.Fatal(err)
		}
	}
	return code, tk
}

// killedMidRun starts apollo sched with a's token, waits for its first
// run to be running on the server, and kills the scheduler (-9): the
// run's task ID, and the pid of its process, left running.
func (o *ownedScheds) killedMidRun(t *testing.T) (task string, pid int) {
	t.Helper()
	first := o.sched("a")
	eventually(t, 30*time.Second, "the first run started", func() bool {
		b, _ := os.ReadFile(o.runs)
		_, err := fmt.Sscan(string(b), &task, &pid)
		return err == nil
	})
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	eventually(t, 30*time.Second, "a's run running on the server", func() bool {
		_, tk := o.taskOf("a", task)
		return tk.Status == apollo.StatusRunning
	})
	first.kill()
	return task, pid
}
