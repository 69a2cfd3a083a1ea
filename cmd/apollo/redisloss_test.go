package main

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// While Redis is empty and the bus has not copied the metrics back yet
// (here: the bus is stopped with SIGSTOP, so it cannot), the alert
// process evaluates its rate rules over nothing. It must keep their
// alerts, not resolve them: before, every firing rate alert of every
// tenant was told "resolved", and told "firing" again once the bus had
// refilled Redis.
func TestRateAlertsHoldWhileRedisIsEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{})
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_rate task_prefix: %q WINDOW: 1h THRESHOLD: failed >= 1 NOTIFY: hook\n", tenant, tenant+"_"), nil, 200)
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_rate", "globex": "globex_rate"})

	opts, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
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
