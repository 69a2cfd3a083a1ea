package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/redisstore/redistest"
)

// While the bus of the three processes cannot reach Redis, GET
// /api/v1/alerts, /silences and /rules answer 503 unavailable, not an
// empty list: before, they answered 200 with no alerts, no silences and
// no rules, so the dashboard showed nothing firing during an outage, and
// a client that reads the rules, edits them and puts them back (the
// dashboard's editor) would have put back a file without the others.
// Once Redis answers again, every tenant's are shown as before.
func TestBusSaysWhenRedisCannotBeRead(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d, p := firingBehindAProxy(t)
	paths := []string{"/api/v1/alerts", "/api/v1/silences", "/api/v1/rules"}
	before := map[string]string{}
	for _, tenant := range tenants {
		d.firingAlert(tenant, tenant+"_failed")
		for _, path := range paths {
			var v json.RawMessage
			d.do(tenant, "GET", path, "", &v, 200)
			before[tenant+path] = string(v)
		}
	}

	p.SetBroken(true)
	for _, tenant := range tenants {
		for _, path := range paths {
			d.unavailable(tenant, "GET", path, "")
		}
	}
	p.SetBroken(false)
	for _, tenant := range tenants {
		for _, path := range paths {
			eventually(t, 10*time.Second, "GET "+path+" as "+tenant+" as before", func() bool {
				var v json.RawMessage
				d.do(tenant, "GET", path, "", &v, 200)
				return string(v) == before[tenant+path]
			})
		}
	}
}

// firingBehindAProxy starts the three processes, the bus reaching Redis
// through a proxy the test can cut, with each tenant's event rule, acme's
// silenced, and an alert of each firing (globex's told).
func firingBehindAProxy(t *testing.T) (*deployment, *redistest.Proxy) {
	t.Helper()
	d, h, p := busBehindAProxy(t)

	d.setEventRules()
	d.silence("acme", `"rule":"acme_failed"`)
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"globex": "globex_failed"})
	for _, tenant := range tenants {
		d.firingAlert(tenant, tenant+"_failed")
	}
	return d, p
}

// unavailable sends a request as tenant and fails the test unless it is
// answered 503 unavailable.
func (d *deployment) unavailable(tenant, method, path, body string) {
	d.t.Helper()
	req, _ := http.NewRequest(method, "http://"+d.api.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.tokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	if method == "PUT" {
		req.Header.Set("Content-Type", "text/plain")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct{ Error struct{ Code string } }
	if json.Unmarshal(b, &got) != nil || resp.StatusCode != http.StatusServiceUnavailable || got.Error.Code != "unavailable" {
		d.t.Errorf("%s %s as %s with Redis cut off: %d %s; want 503 unavailable", method, path, tenant, resp.StatusCode, b)
	}
}

// While the bus cannot reach Redis, a write that goes to the alert
// processes (an ack, a silence added or removed, the rules) is answered
// 503 unavailable, as apollo server answers a write it could not save.
// Before, an ack was answered 404 "no alert" (the bus read no alerts) and
// a silence 500 internal error. Once Redis answers, the same writes are
// taken, and act.
func TestBusWritesWithoutRedisAreUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d, p := firingBehindAProxy(t)
	acme := d.firingAlert("acme", "acme_failed")
	globex := d.firingAlert("globex", "globex_failed")
	var sils struct{ Silences []struct{ ID string } }
	d.do("acme", "GET", "/api/v1/silences", "", &sils, 200)
	before := d.rulesOf("acme")
	rules := "RULE acme_other task_prefix: \"acme_\" ON: failed NOTIFY: hook\n"

	p.SetBroken(true)
	d.unavailable("acme", "POST", "/api/v1/alerts/"+acme.ID+"/ack", "")
	d.unavailable("globex", "POST", "/api/v1/alerts/"+globex.ID+"/ack", "")
	d.unavailable("globex", "POST", "/api/v1/silences", `{"rule":"globex_failed","duration":"1h","comment":"c"}`)
	d.unavailable("acme", "DELETE", "/api/v1/silences/"+sils.Silences[0].ID, "")
	d.unavailable("acme", "PUT", "/api/v1/rules", rules)
	p.SetBroken(false)

	eventually(t, 10*time.Second, "the bus reaches Redis again", func() bool {
		return d.status("acme", "GET", "/api/v1/alerts") == 200
	})
	if got := d.rulesOf("acme"); got != before {
		t.Errorf("acme's rules after a PUT refused while Redis was away: %q, want %q", got, before)
	}
	// The bus's subscription to the replies comes back a moment after its
	// commands can be sent: the first reply may be missed, and the write
	// answered 503 "no alert process answered" though it was made. An ack
	// is safe to send again; a removal sent again finds no silence.
	eventually(t, 10*time.Second, "globex's ack taken", func() bool {
		return d.status("globex", "POST", "/api/v1/alerts/"+globex.ID+"/ack") == 200
	})
	eventually(t, 10*time.Second, "acme's silence removed", func() bool {
		st := d.status("acme", "DELETE", "/api/v1/silences/"+sils.Silences[0].ID)
		return st == 200 || st == 404
	})
	eventually(t, 10*time.Second, "globex's alert shown acknowledged", func() bool {
		return d.firingAlert("globex", "globex_failed").AckedBy != ""
	})
	d.do("acme", "GET", "/api/v1/silences", "", &sils, 200)
	if len(sils.Silences) != 0 {
		t.Errorf("acme's silences after the removal: %+v, want none", sils.Silences)
	}
}

// status is the status of a request as tenant.
func (d *deployment) status(tenant, method, path string) int {
	req, _ := http.NewRequest(method, "http://"+d.api.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+d.tokens[tenant])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// busBehindAProxy starts the three processes with the bus reaching Redis
// through a proxy the test can cut.
func busBehindAProxy(t *testing.T) (*deployment, *hook, *redistest.Proxy) {
	t.Helper()
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{})
	u, err := url.Parse(redistest.URLFor(t, d.prefix))
	if err != nil {
		t.Fatal(err)
	}
	p := redistest.NewProxy(t, u.Host)
	u.Host = p.Addr()
	d.args = append(d.args, "--redis", u.String())
	d.start()
	t.Cleanup(d.logOnFailure)
	return d, h, p
}
