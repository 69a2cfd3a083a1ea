package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
)

// holdCheck, in the server the tests start (APOLLO_TEST_HOLD_CHECK),
// holds the check of a tenant's PUT of expectations while the file
// <tenant>.hold is in dir (the default tenant's name is "-"): it says so
// by the file <tenant>.checking, and lets it go when the test removes
// the hold or the put's context is done. How a held put ended is then
// written in <tenant>.ended: "ok", or the error.
type holdCheck string

func holdFile(dir, tenant, what string) string {
	return filepath.Join(dir, cmp.Or(tenant, "-")+"."+what)
}

func (h holdCheck) check(ctx context.Context, tenant string) func(error) {
	dir := string(h)
	if !exists(holdFile(dir, tenant, "hold")) {
		return func(error) {}
	}
	os.WriteFile(holdFile(dir, tenant, "checking"), nil, 0o600)
	tick := time.NewTicker(5 * time.Millisecond) // the test's file is the signal; this only looks for it
	defer tick.Stop()
	for exists(holdFile(dir, tenant, "hold")) {
		select {
		case <-ctx.Done():
			return h.ended(tenant)
		case <-tick.C:
		}
	}
	return h.ended(tenant)
}

func (h holdCheck) ended(tenant string) func(error) {
	return func(err error) {
		msg := "ok"
		if err != nil {
			msg = err.Error()
		}
		os.WriteFile(holdFile(string(h), tenant, "ended"), []byte(msg), 0o600)
	}
}

// startHeldCheck starts the server of x with its checks held through dir.
func (x *expectServer) startHeldCheck(t *testing.T, dir string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "server", "--config", x.cfg, "--listen", "127.0.0.1:0")
	cmd.Env = []string{"APOLLO_TEST_HOLD_CHECK=" + dir}
	return startCmd(t, cmd, apiclient.ReadyPrefix)
}

// bigExpectations is a valid file of n expectations.
func bigExpectations(n int) []byte {
	var b strings.Builder
	b.WriteString("expectations:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - job: big_%06d\n    schedule: \"*/5 * * * *\"\n    max_runtime: 1h\n", i)
	}
	return []byte(b.String())
}

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// While one tenant's large PUT of expectations is being checked, another
// tenant's PUT and GET are answered. Before, one lock for every tenant
// was held from each check to its save: a tenant's file of 4 MiB, checked
// for seconds, held every other tenant's expectation writes as long.
// Both are in force after kill -9 and a restart.
func TestOneTenantsExpectationCheckHoldsUpNoOther(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server twice")
	}
	t.Parallel()
	x := newExpectServer(t)
	hold := t.TempDir()
	srv := x.startHeldCheck(t, hold)
	ctx := testCtx(t, time.Minute)
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	if err := os.WriteFile(holdFile(hold, "acme", "hold"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 40_000
	big := bigExpectations(n)
	acmeDone := make(chan error, 1)
	go func() {
		_, err := acme.PutExpectations(ctx, big)
		acmeDone <- err
	}()
	eventually(t, 30*time.Second, "acme's check begins", func() bool { return exists(holdFile(hold, "acme", "checking")) })

	mine := "expectations:\n  - job: mine\n    every: 1h\n"
	got, err := def.PutExpectations(ctx, []byte(mine))
	if err != nil || got.Count != 1 {
		t.Fatalf("the default tenant's PUT while acme's is checked: %+v %v", got, err)
	}
	if got, err := def.Expectations(ctx); err != nil || got.Source != mine {
		t.Fatalf("the default tenant's GET while acme's is checked: %+v %v", got, err)
	}
	if exists(holdFile(hold, "acme", "ended")) {
		t.Fatal("acme's check ended before the other tenant was answered: the test shows nothing")
	}
	if err := os.Remove(holdFile(hold, "acme", "hold")); err != nil {
		t.Fatal(err)
	}
	if err := <-acmeDone; err != nil {
		t.Fatalf("acme's PUT: %v", err)
	}

	srv.kill()
	srv = x.start(t)
	def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	for c, want := range map[*apiclient.Client]int{def: 1, acme: n} {
		if got, err := c.Expectations(ctx); err != nil || got.Count != want {
			t.Fatalf("after kill -9: %d expectations, %v; want %d", got.Count, err, want)
		}
	}
}

// A client that hangs up while its PUT of expectations is being checked
// changes nothing, and the server stops checking. Before, the check ran
// to its end for nobody, and the file was then saved and put in force.
func TestAHungUpExpectationsPutChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server twice")
	}
	t.Parallel()
	x := newExpectServer(t)
	hold := t.TempDir()
	srv := x.startHeldCheck(t, hold)
	ctx := testCtx(t, time.Minute)
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	before := "expectations:\n  - job: acme_job\n    every: 1h\n"
	if _, err := acme.PutExpectations(ctx, []byte(before)); err != nil {
		t.Fatal(err)
	}
	defSrc, err := def.Expectations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(holdFile(hold, "acme", "hold"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	putCtx, hangUp := context.WithCancel(ctx)
	putDone := make(chan error, 1)
	go func() {
		_, err := acme.PutExpectations(putCtx, bigExpectations(40_000))
		putDone <- err
	}()
	eventually(t, 30*time.Second, "acme's check begins", func() bool { return exists(holdFile(hold, "acme", "checking")) })
	hangUp()
	if err := <-putDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's PUT after it hung up: %v", err)
	}
	var ended string
	eventually(t, 30*time.Second, "acme's put ends", func() bool {
		b, err := os.ReadFile(holdFile(hold, "acme", "ended"))
		ended = string(b)
		return err == nil
	})
	if !strings.Contains(ended, "context canceled") {
		t.Fatalf("the put of a client that hung up ended with %q, want it stopped", ended)
	}
	for restarted := range 2 {
		if got, err := acme.Expectations(ctx); err != nil || got.Source != before {
			t.Fatalf("acme's (restarted: %d) after a hung-up PUT: %d expectations, %v; want the one before", restarted, got.Count, err)
		}
		if got, err := def.Expectations(ctx); err != nil || got.Source != defSrc.Source {
			t.Fatalf("the default tenant's (restarted: %d): %+v %v", restarted, got, err)
		}
		srv.kill()
		srv = x.start(t)
		def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	}
}

// holdSet, in the server the tests start (APOLLO_TEST_HOLD_SET), holds
// the putting in force of a tenant's expectations (the evaluator's Set
// of a put) while the file <tenant>.sethold is in dir, and says so by the
// file <tenant>.setting. Set in init, before TestMain: the server the
// tests start is this binary.
func init() {
	if dir := os.Getenv("APOLLO_TEST_HOLD_SET"); dir != "" && os.Getenv("APOLLO_TEST_MAIN") == "1" {
		testSettingExpectations = func(tenant string) {
			if !exists(holdFile(dir, tenant, "sethold")) {
				return
			}
			os.WriteFile(holdFile(dir, tenant, "setting"), nil, 0o600)
			tick := time.NewTicker(5 * time.Millisecond) // the test's file is the signal; this only looks for it
			defer tick.Stop()
			for exists(holdFile(dir, tenant, "sethold")) {
				<-tick.C
			}
		}
	}
}

// While one tenant's expectations are being put in force (the
// evaluator's Set, held here), another tenant's PUT and GET of
// expectations are answered. Before, the process's one lock, which the
// bus's workers take too, was held around the Set: a tenant's Set of a
// large file held every other tenant's expectations. Both are in force
// after kill -9 and a restart.
func TestOneTenantsExpectationSetHoldsUpNoOther(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server twice")
	}
	t.Parallel()
	x := newExpectServer(t)
	hold := t.TempDir()
	cmd := exec.Command(os.Args[0], "server", "--config", x.cfg, "--listen", "127.0.0.1:0")
	cmd.Env = []string{"APOLLO_TEST_HOLD_SET=" + hold}
	srv := startCmd(t, cmd, apiclient.ReadyPrefix)
	ctx := testCtx(t, time.Minute)
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	if err := os.WriteFile(holdFile(hold, "acme", "sethold"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	acmeSrc := "expectations:\n  - job: acme_nightly\n    every: 24h\n"
	acmeDone := make(chan error, 1)
	go func() {
		_, err := acme.PutExpectations(ctx, []byte(acmeSrc))
		acmeDone <- err
	}()
	eventually(t, 30*time.Second, "acme's expectations being put in force", func() bool { return exists(holdFile(hold, "acme", "setting")) })

	mine := "expectations:\n  - job: mine\n    every: 1h\n"
	defDone := make(chan error, 1)
	go func() {
		got, err := def.PutExpectations(ctx, []byte(mine))
		if err == nil && got.Count != 1 {
			err = fmt.Errorf("%d expectations in force, want 1", got.Count)
		}
		if err == nil {
			var cur apiclient.Expectations
			if cur, err = def.Expectations(ctx); err == nil && cur.Source != mine {
				err = fmt.Errorf("GET answered %q", cur.Source)
			}
		}
		defDone <- err
	}()
	select {
	case err := <-defDone:
		if err != nil {
			t.Fatalf("the default tenant's PUT and GET while acme's are put in force: %v", err)
		}
	case err := <-acmeDone:
		t.Fatalf("acme's PUT ended (%v) while held: the test shows nothing", err)
	case <-ctx.Done():
		t.Fatal("the default tenant's PUT and GET waited for acme's expectations to be put in force")
	}
	if err := os.Remove(holdFile(hold, "acme", "sethold")); err != nil {
		t.Fatal(err)
	}
	if err := <-acmeDone; err != nil {
		t.Fatalf("acme's PUT: %v", err)
	}

	srv.kill()
	srv = x.start(t)
	def, acme = x.client(t, srv, ""), x.client(t, srv, "acme")
	for c, want := range map[*apiclient.Client]string{def: mine, acme: acmeSrc} {
		if got, err := c.Expectations(ctx); err != nil || got.Source != want || got.Count != 1 {
			t.Fatalf("after kill -9: %+v, %v; want %q in force", got, err, want)
		}
	}
}
