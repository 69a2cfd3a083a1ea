package main

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// Redis restarts without persistence, or is flushed, while the three
// processes run: everything under the prefix is gone at once. The
// processes still hold it all — the bus its metrics, the alert process
// its rules, alerts, acks and silences — and write it back: the API shows
// every tenant's rules, alerts, ack and silence again, the rate rules
// keep their alerts (no "resolved", no second "firing"), and an alert
// process killed afterwards and started again finds what it needs in
// Redis: the acknowledged alert stays quiet, the silence holds, the
// rules act. Before, the alert processes read empty windows and resolved
// every rate alert, the bus showed no rules, alerts or silences, and a
// restarted alert process evaluated no API rules, forgot the silence and
// the ack, and notified every alert again.
func TestRedisEmptiedWhileRunning(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})

	src := map[string]string{}
	for _, tenant := range tenants {
		src[tenant] = fmt.Sprintf("RULE %s_rate task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n"+
			"RULE %[1]s_ev task_prefix: %[3]q ON: failed NOTIFY: hook\n", tenant, tenant+"_load", tenant+"_ev_")
		d.do(tenant, "PUT", "/api/v1/rules", src[tenant], nil, 200)
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_rate", "globex": "globex_rate"})
	acked := d.firingAlert("acme", "acme_rate")
	d.do("acme", "POST", "/api/v1/alerts/"+acked.ID+"/ack", "", nil, 200)
	quiet := d.silence("globex", `"rule":"globex_ev"`)
	eventually(t, 30*time.Second, "the ack shown", func() bool { return d.firingAlert("acme", "acme_rate").AckedBy != "" })

	rdb, _ := redistest.Client(t)
	lost := time.Now()
	if err := redistest.Delete(context.Background(), rdb, d.prefix); err != nil {
		t.Fatal(err)
	}

	// shown says whether the API shows, for both tenants, what was
	// written before the loss.
	shown := func() bool {
		for _, tenant := range tenants {
			var rs struct{ Source string }
			d.do(tenant, "GET", "/api/v1/rules", "", &rs, 200)
			var al struct{ Alerts []shownAlert }
			d.do(tenant, "GET", "/api/v1/alerts?state=firing", "", &al, 200)
			var sl struct{ Silences []struct{ ID string } }
			d.do(tenant, "GET", "/api/v1/silences", "", &sl, 200)
			// The rate alert, acknowledged for acme; after the alert
			// process's restart acme's event alert fires beside it (its
			// new leader saves it at once, where before it waited for the
			// dead one's lease).
			var rate []shownAlert
			for _, a := range al.Alerts {
				if a.Rule == tenant+"_rate" {
					rate = append(rate, a)
				} else if a.Rule != tenant+"_ev" {
					return false
				}
			}
			if rs.Source != src[tenant] || len(rate) != 1 || (rate[0].AckedBy != "") != (tenant == "acme") ||
				(len(sl.Silences) == 1 && sl.Silences[0].ID == quiet) != (tenant == "globex") {
				return false
			}
		}
		var sys struct{ Redis struct{ Refills int } }
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Redis.Refills >= 1
	}
	// onlyRepeats fails on any notification since the loss but globex's
	// repeats (and what also allows), and returns once n repeats came
	// and also is done: the alert process has evaluated its rules over
	// the refilled Redis meanwhile.
	onlyRepeats := func(what string, n int, also func(webhook.ApolloPayload) (ok, done bool)) {
		t.Helper()
		done := also == nil
		for repeats := 0; repeats < n || !done; {
			p := h.await(t, 30*time.Second, "globex's repeats "+what, func(p webhook.ApolloPayload) bool { return p.At.After(lost) })
			ok := false
			if also != nil {
				var d bool
				if ok, d = also(p); d {
					done = true
				}
			}
			switch {
			case p.Alert.Tenant == "globex" && p.Alert.Rule == "globex_rate" && p.Kind == "repeat":
				repeats++
			case ok:
			default:
				t.Fatalf("%s: a %s notification of tenant %q, rule %q (%s)", what, p.Kind, p.Alert.Tenant, p.Alert.Rule, p.Alert.Summary)
			}
		}
	}
	eventually(t, 30*time.Second, "rules, alerts, the ack and the silence shown again", shown)
	onlyRepeats("after Redis lost its data", 2, nil)

	d.alert.kill()
	d.alert = d.startAlert()
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_ev_x")
	}
	// acme's event rule fires: the restarted process read the rules
	// back; globex's is silenced. The killed process is told, rightly.
	onlyRepeats("after the alert process's restart", 3, func(p webhook.ApolloPayload) (bool, bool) {
		ev := p.Alert.Tenant == "acme" && p.Alert.Rule == "acme_ev" && p.Kind == "firing"
		return ev || p.Alert.Rule == "apollo:apollo_component_down:alert", ev
	})
	if !shown() {
		t.Fatal("after the alert process's restart the API no longer shows what was written")
	}
}

// While Redis is empty and the bus has not copied the metrics back yet
// (here: the bus is stopped with SIGSTOP, so it cannot), the alert
// process evaluates its rate rules over nothing. It must keep their
// alerts, not resolve them: before, every firing rate alert of every
// tenant was told "resolved", and told "firing" again once the bus had
// refilled Redis.
func TestRateAlertsHoldWhileRedisIsEmpty(t *testing.T) {
	d, h := startThreeProcesses(t, deployOptions{})
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_rate task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n", tenant, tenant+"_"), nil, 200)
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_rate", "globex": "globex_rate"})

	rdb, _ := redistest.Client(t)
	// evaluations reads the alert process's counters from its heartbeat.
	evaluations := func() (n, errs int64) {
		beats, err := redisstore.Alive(context.Background(), rdb, d.prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range beats {
			if b.Component != "alert" {
				continue
			}
			raw, _ := json.Marshal(b.Stats)
			var s struct{ Alert alert.Stats }
			json.Unmarshal(raw, &s)
			return s.Alert.Evaluations, s.Alert.EvaluationErrors
		}
		return 0, 0
	}
	syscall.Kill(d.api.cmd.Process.Pid, syscall.SIGSTOP)
	stopped := true
	cont := func() {
		if stopped {
			syscall.Kill(d.api.cmd.Process.Pid, syscall.SIGCONT)
			stopped = false
		}
	}
	defer cont()
	lost := time.Now()
	if err := redistest.Delete(context.Background(), rdb, d.prefix); err != nil {
		t.Fatal(err)
	}
	var from int64
	eventually(t, 30*time.Second, "the alert process's heartbeat after the loss", func() bool { from, _ = evaluations(); return from > 0 })
	eventually(t, 30*time.Second, "three evaluations over the empty Redis", func() bool { n, _ := evaluations(); return n >= from+3 })
	// told fails on a notification of a rate rule since the loss.
	told := func(p webhook.ApolloPayload) {
		if p.At.After(lost) && p.Kind != apollo.NotifySelf && p.Kind != apollo.NotifyRepeat {
			t.Fatalf("a %s notification of tenant %q, rule %q while Redis was empty (%s)", p.Kind, p.Alert.Tenant, p.Alert.Rule, p.Alert.Summary)
		}
	}
	for len(h.C) > 0 {
		told(<-h.C)
	}
	if _, errs := evaluations(); errs == 0 {
		t.Fatal("the alert process read the empty Redis without an error")
	}
	cont()
	for _, tenant := range tenants {
		d.firingAlert(tenant, tenant+"_rate")
	}
	var sys struct{ Redis struct{ Refills int } }
	eventually(t, 30*time.Second, "the bus refilling Redis", func() bool {
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Redis.Refills >= 1
	})
	// Two repeats of each alert: evaluated over the refilled Redis, still
	// firing, never resolved.
	repeats := map[string]int{}
	for repeats["acme"] < 2 || repeats["globex"] < 2 {
		p := h.await(t, 30*time.Second, "repeats after the refill", func(p webhook.ApolloPayload) bool { return p.At.After(lost) })
		told(p)
		if p.Kind == apollo.NotifyRepeat {
			repeats[p.Alert.Tenant]++
		}
	}
}
