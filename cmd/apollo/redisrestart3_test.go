package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/internal/testwait"
)

// privateRedis is a redis-server of the test's own, which it can kill and
// start again: nothing kept on disk, as a cache-only Redis runs.
type privateRedis struct {
	t    *testing.T
	addr string
	cmd  *exec.Cmd
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on this machine")
	}
	r := &privateRedis{t: t, addr: freeAddr(t)}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func (r *privateRedis) start() {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.t.TempDir())
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	defer c.Close()
	eventually(r.t, 0, "the private Redis answering", func() bool { return c.Ping(context.Background()).Err() == nil })
}

// kill is kill -9 of the server: what it held is gone.
func (r *privateRedis) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// Redis restarted with nothing kept on disk while the three processes
// run, two tenants with rules, alerts and an ack: the bus and the alert
// process say what happened, write back what they hold (the API shows
// each tenant's rules, alert and ack again), take commands again, and
// what fails after the restart is told for both tenants.
func TestThreeProcessRedisRestartedEmpty(t *testing.T) {
	endToEnd(t)
	rs := startPrivateRedis(t)
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{repeat: "1h"})
	path := filepath.Join(d.dir, "apollo.yaml")
	b, _ := os.ReadFile(path)
	i := strings.Index(string(b), "  url: redis")
	j := i + strings.Index(string(b[i:]), "\n")
	os.WriteFile(path, []byte(string(b[:i])+"  url: redis://"+rs.addr+"/0"+string(b[j:])), 0o600)
	d.start()
	t.Cleanup(d.logOnFailure)

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
	eventually(t, 30*time.Second, "the ack shown", func() bool { return d.firingAlert("acme", "acme_rate").AckedBy != "" })

	rs.kill()
	rs.start()

	eventually(t, testwait.Timeout(t), "each tenant's rules, alert and ack shown again", func() bool {
		for _, tenant := range tenants {
			var r struct{ Source string }
			var al struct{ Alerts []shownAlert }
			if d.status(tenant, "GET", "/api/v1/rules") != http.StatusOK || d.status(tenant, "GET", "/api/v1/alerts?state=firing") != http.StatusOK {
				return false
			}
			d.do(tenant, "GET", "/api/v1/rules", "", &r, 200)
			d.do(tenant, "GET", "/api/v1/alerts?state=firing", "", &al, 200)
			if r.Source != src[tenant] || len(al.Alerts) != 1 || (al.Alerts[0].AckedBy != "") != (tenant == "acme") {
				return false
			}
		}
		return true
	})
	// A command goes through again (the subscriptions are back): the
	// first after the restart may be answered 503, as docs/redis.md says.
	eventually(t, testwait.Timeout(t), "a silence taken after the restart", func() bool {
		req, _ := http.NewRequest("POST", "http://"+d.api.addr+"/api/v1/silences", strings.NewReader(`{"rule":"globex_other","duration":"1h","comment":"after"}`))
		req.Header.Set("Authorization", "Bearer "+d.tokens["globex"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusCreated
	})
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_ev_after")
	}
	awaitTenants(t, h, "firing", map[string]string{"acme": "acme_ev", "globex": "globex_ev"})

	d.api.kill()
	d.alert.kill()
	for _, said := range []struct {
		p    *proc
		what string
	}{
		{d.api, "Redis lost the metrics the bus wrote"},
		{d.alert, "Redis lost what the alert processes keep there"},
	} {
		if !strings.Contains(said.p.out.String(), said.what) {
			t.Errorf("%v does not say %q", said.p.cmd.Args[1], said.what)
		}
	}
}
