package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
)

// TestCrashUnderLoad kills the server with SIGKILL at random moments while
// an SDK client reports runs, restarts it each time, and then checks that
// every run's events are all there, in order, with legal transitions: an
// event the server acknowledged was never lost (invariant 1 in docs/architecture.md).
func TestCrashUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"server", "--data", dir, "--listen", addr}
	srv := startApollo(t, args...)

	client, err := agent.New("http://"+addr, agent.WithFlushInterval(5*time.Millisecond), agent.WithBatchSize(50),
		agent.WithBufferSize(100_000), agent.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(testCtx(t, 10*time.Second))

	type run struct {
		id     string
		events int
		final  apollo.Status
	}
	var (
		mu   sync.Mutex
		runs []run
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			pace := time.NewTicker(time.Millisecond)
			defer pace.Stop()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("crash-%d-%d", g, i)
				tk := client.Task(id, fmt.Sprintf("crash_job_%d", g))
				steps := []func(...agent.EventOption) error{tk.Pending, tk.Running}
				final := apollo.StatusSuccess
				if r.IntN(4) == 0 {
					steps, final = append(steps, tk.Fail), apollo.StatusFailed
				} else {
					steps = append(steps, tk.Succeed)
				}
				for _, step := range steps {
					if err := step(); err != nil {
						t.Errorf("reporting %s: %v", id, err)
						return
					}
				}
				mu.Lock()
				runs = append(runs, run{id: id, events: len(steps), final: final})
				mu.Unlock()
				<-pace.C // a steady load: 4 × 1000 runs a second
			}
		}()
	}

	const kills = 12
	r := rand.New(rand.NewPCG(7, 7))
	for k := range kills {
		time.Sleep(time.Duration(50+r.IntN(400)) * time.Millisecond) // a random moment under load
		srv.kill()
		srv = startApollo(t, args...)
		mu.Lock()
		n := len(runs)
		mu.Unlock()
		t.Logf("kill %d: %d runs so far, client %+v", k+1, n, client.Stats())
	}
	stop.Store(true)
	wg.Wait()
	if err := client.Flush(testCtx(t, 60*time.Second)); err != nil {
		t.Fatalf("flush after the last restart: %v (%+v)", err, client.Stats())
	}
	st := client.Stats()
	if st.Rejected != 0 || st.Dropped != 0 {
		t.Fatalf("client stats %+v: nothing may be rejected or dropped", st)
	}

	// One more crash after everything was acknowledged, then check.
	srv.kill()
	srv = startApollo(t, args...)
	mu.Lock()
	defer mu.Unlock()
	if len(runs) < 200 {
		t.Fatalf("only %d runs reported: the load did not run", len(runs))
	}
	for _, rn := range runs {
		resp, err := http.Get("http://" + srv.addr + "/api/v1/tasks/" + rn.id)
		if err != nil {
			t.Fatal(err)
		}
		var task apollo.Task
		err = json.NewDecoder(resp.Body).Decode(&task)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("run %s: status %d, %v", rn.id, resp.StatusCode, err)
		}
		if task.Status != rn.final || task.Sequence != int64(rn.events) || len(task.History) != rn.events {
			t.Fatalf("run %s: %v seq %d with %d records, want %v seq %d", rn.id, task.Status, task.Sequence, len(task.History), rn.final, rn.events)
		}
		prev := apollo.StatusNone
		for i, h := range task.History {
			if h.Sequence != int64(i+1) || !apollo.CanTransition(prev, h.Status) {
				t.Fatalf("run %s: history %d is seq %d %v after %v", rn.id, i, h.Sequence, h.Status, prev)
			}
			prev = h.Status
		}
	}
	// Metrics after all the replays equal a recount of the runs: no event
	// was counted twice (invariant 2 in docs/architecture.md).
	want := map[string][2]int64{} // job -> finished, failed
	for _, rn := range runs {
		job := "crash_job_" + strings.Split(rn.id, "-")[1]
		w := want[job]
		w[0]++
		if rn.final == apollo.StatusFailed {
			w[1]++
		}
		want[job] = w
	}
	resp, err := http.Get("http://" + srv.addr + "/api/v1/metrics?window=1h&prefix=crash_job_")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Jobs []struct {
			Name                            string
			Count, Failed, Started, Running int64
		}
	}
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if len(m.Jobs) != len(want) {
		t.Fatalf("metrics for %d jobs, want %d", len(m.Jobs), len(want))
	}
	for _, j := range m.Jobs {
		if w := want[j.Name]; j.Count != w[0] || j.Failed != w[1] || j.Started != w[0] || j.Running != 0 {
			t.Errorf("%s: count %d failed %d started %d running %d, recount says %d finished, %d failed",
				j.Name, j.Count, j.Failed, j.Started, j.Running, w[0], w[1])
		}
	}
	t.Logf("%d runs, %d events checked after %d kills; client %+v", len(runs), st.Sent, kills+1, st)
}

// A process killed in the middle of replacing one of its files (the rules,
// the alerts, the expectations, the outbox, the scheduler's state) leaves
// the temporary file it was writing, named .FILE.tmpNNN. Nothing removed
// them: each kill -9 at that moment left one more, as large as the file
// (the alerts and the outbox can be megabytes), for ever. A start removes
// those in the data directory, which only the process holding its log
// writes, and leaves every other file alone; the writes of both tenants
// made before the kill still act.
func TestStartRemovesTempFilesAKillLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{jobs: "jobs:\n  - name: held\n    schedule: \"@every 1h\"\n    command: [\"true\"]\n"})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.setEventRules()
	for _, tenant := range tenants {
		d.putExpectations(tenant, "expectations:\n  - job: "+tenant+"_nightly\n    every: 24h\n")
	}
	d.do("", "POST", "/api/v1/jobs/held/pause", "", nil, 200)
	d.api.kill()

	data := filepath.Join(d.dir, "data")
	var left, kept []string
	for _, name := range []string{"alerts.json", savedFile("rules", "acme"), savedFile("expectations", "acme"), "outbox.jsonl", "sched/sched-state.json"} {
		// What atomicfile.Write had made when the kill came.
		f, err := os.CreateTemp(filepath.Join(data, filepath.Dir(name)), "."+filepath.Base(name)+".tmp*")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"half":`)
		f.Close()
		left = append(left, f.Name())
	}
	for _, name := range []string{".notes.tmp", "rules.json.tmp123", ".rules.json.tmp12a", "archive/.x.tmp1"} {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, []byte("the operator's"), 0o600); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, p)
	}
	d.start()
	for _, p := range left {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, left by the killed process, is still there after a start (%v)", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s, not a temporary file of the server, was removed: %v", p, err)
		}
	}
	if out := d.api.out.String(); !strings.Contains(out, "removed 5 temporary files") {
		t.Errorf("the start did not say it removed the temporary files:\n%s", out)
	}
	var l struct{ Jobs []struct{ Paused bool } }
	d.do("", "GET", "/api/v1/jobs", "", &l, 200)
	if len(l.Jobs) != 1 || !l.Jobs[0].Paused {
		t.Errorf("the scheduler's jobs after the restart: %+v, want held paused", l.Jobs)
	}
	for _, tenant := range tenants {
		if got := d.expectationsOf(tenant); !strings.Contains(got, tenant+"_nightly") {
			t.Errorf("tenant %s: expectations after the restart %q", tenant, got)
		}
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
}
