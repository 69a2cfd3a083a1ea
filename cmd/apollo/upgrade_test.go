package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/notify/webhook"
)

// previousRelease is the commit of the release before this one: the
// upgrade tests build its binary and hand its data to this one, and back.
const previousRelease = "aa93580"

var (
	oldBinOnce sync.Once
	oldBin     string
	oldBinErr  string // why there is no old binary: the tests skip
)

// previousBinary builds the previous release from a worktree of its
// commit, once: the binary is kept in the temporary directory under the
// commit's name and used by later runs. It skips when the history is not
// there (a shallow clone, a source archive) rather than fail.
func previousBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("upgrade test: builds the previous release; skipped with -short")
	}
	oldBinOnce.Do(func() {
		kept := filepath.Join(os.TempDir(), "apollo-upgradetest-"+previousRelease)
		if fi, err := os.Stat(kept); err == nil && fi.Mode().IsRegular() {
			oldBin = kept
			return
		}
		root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			oldBinErr = "not in a git checkout: " + err.Error()
			return
		}
		repo := string(root[:len(root)-1])
		if err := exec.Command("git", "-C", repo, "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
			oldBinErr = "git history without " + previousRelease + " (a shallow clone?)"
			return
		}
		dir, err := os.MkdirTemp("", "apollo-prev-")
		if err != nil {
			oldBinErr = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		wt := filepath.Join(dir, "src")
		if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", wt, previousRelease).CombinedOutput(); err != nil {
			oldBinErr = "git worktree add: " + string(out)
			return
		}
		defer exec.Command("git", "-C", repo, "worktree", "remove", "--force", wt).Run()
		bin := filepath.Join(dir, "apollo-prev")
		build := exec.Command("go", "build", "-o", bin, "./cmd/apollo")
		build.Dir = wt
		if out, err := build.CombinedOutput(); err != nil {
			oldBinErr = "go build of " + previousRelease + ": " + string(out)
			return
		}
		// A rename, so that two test runs building at once each leave a
		// whole binary.
		if err := os.Rename(bin, kept); err != nil {
			oldBinErr = err.Error()
			return
		}
		oldBin = kept
	})
	if oldBin == "" {
		t.Skip("upgrade test: no binary of the previous release: " + oldBinErr)
	}
	return oldBin
}

// startWith starts the deployment's server or bus, alone, with the given
// binary: the previous release's, or this test binary's when bin is "".
func (d *deployment) startWith(bin string) {
	d.t.Helper()
	if bin == "" {
		d.api = startApollo(d.t, d.args...)
		return
	}
	d.api = startCmd(d.t, exec.Command(bin, d.args...), apiclient.ReadyPrefix)
}

// The data directory of the previous release opens in this one after kill
// -9, and this one's data opens in the previous release after a clean stop
// (the rollback docs/operations.md describes): rules, silences, acks and
// firing alerts of both tenants read back and act, and no firing alert is
// told resolved.
func TestUpgradeAllInOneAndBack(t *testing.T) {
	old := previousBinary(t)
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, false, h, deployOptions{})
	t.Cleanup(func() { d.logOnFailure() })

	d.startWith(old)
	d.setEventRules()
	globexSilence := d.silence("globex", `"prefix":"globex_other"`)
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
	acme := d.firingAlert("acme", "acme_failed")
	d.do("acme", "POST", "/api/v1/alerts/"+acme.ID+"/ack", `{"comment":"on it"}`, nil, 200)

	check := func(when string) {
		t.Helper()
		for _, tenant := range tenants {
			var r struct{ Source string }
			d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
			if r.Source == "" {
				t.Errorf("%s: tenant %s has no rules", when, tenant)
			}
		}
		var s struct{ Silences []struct{ ID string } }
		d.do("globex", "GET", "/api/v1/silences", "", &s, 200)
		if len(s.Silences) != 1 || s.Silences[0].ID != globexSilence {
			t.Errorf("%s: globex's silences %+v, want %s", when, s.Silences, globexSilence)
		}
		if a := d.firingAlert("acme", "acme_failed"); a.AckedBy == "" {
			t.Errorf("%s: acme's alert %+v is no longer acknowledged", when, a)
		}
		d.firingAlert("globex", "globex_failed")
	}

	// Upgrade after a crash.
	d.api.kill()
	d.startWith("")
	check("after the upgrade")
	d.fail("globex", "globex_other_load") // silenced: told to nobody
	more := "RULE acme_failed task_prefix: \"acme_\" ON: failed NOTIFY: hook\nRULE acme_more task_prefix: \"more_\" ON: failed NOTIFY: hook\n" +
		"RULE acme_later task_prefix: \"later_\" ON: failed NOTIFY: hook\n"
	d.do("acme", "PUT", "/api/v1/rules", more, nil, 200)
	d.fail("acme", "more_1")
	awaitNoResolved(t, h, "after the upgrade", "acme", "acme_more")

	// Roll back after a clean stop.
	d.api.term(t)
	d.startWith(old)
	check("after the rollback")
	var r struct{ Source string }
	d.do("acme", "GET", "/api/v1/rules", "", &r, 200)
	if r.Source != more {
		t.Errorf("after the rollback: acme's rules %q, want %q", r.Source, more)
	}
	// The rule this release saved is evaluated by the previous one.
	d.fail("globex", "later_1") // acme's prefix: nothing for globex
	d.fail("acme", "later_1")
	p := h.await(t, 30*time.Second, "acme_later, told by the previous release", func(p webhook.ApolloPayload) bool {
		if string(p.Kind) == "resolved" || p.Alert.Tenant == "globex" && p.Alert.Rule != "globex_failed" {
			t.Errorf("after the rollback: %s %s of %s", p.Kind, p.Alert.Rule, p.Alert.Tenant)
		}
		return p.Alert.Rule == "acme_later"
	})
	if p.Alert.Tenant != "acme" || p.Kind != "firing" {
		t.Errorf("after the rollback: %s of tenant %q, want acme's firing", p.Kind, p.Alert.Tenant)
	}
}

// awaitNoResolved waits for a firing notification of tenant's rule,
// failing on any resolved notification meanwhile: no alert resolves here.
func awaitNoResolved(t *testing.T, h *hook, when, tenant, rule string) {
	t.Helper()
	h.await(t, 30*time.Second, when+": "+tenant+"'s "+rule, func(p webhook.ApolloPayload) bool {
		if string(p.Kind) == "resolved" {
			t.Errorf("%s: %s's %s told resolved while it fires", when, p.Alert.Tenant, p.Alert.Rule)
		}
		return p.Alert.Tenant == tenant && p.Alert.Rule == rule && string(p.Kind) == "firing"
	})
}
