package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
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
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{})
	u, err := url.Parse(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := redistest.NewProxy(t, u.Host)
	d.args = append(d.args, "--redis", "redis://"+p.Addr()+u.Path)
	d.start()
	t.Cleanup(d.logOnFailure)

	d.setEventRules()
	d.silence("acme", `"rule":"acme_failed"`)
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	awaitTenants(t, h, "firing", map[string]string{"globex": "globex_failed"})
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
			req, _ := http.NewRequest("GET", "http://"+d.api.addr+path, nil)
			req.Header.Set("Authorization", "Bearer "+d.tokens[tenant])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got struct{ Error struct{ Code string } }
			if json.Unmarshal(b, &got) != nil || resp.StatusCode != http.StatusServiceUnavailable || got.Error.Code != "unavailable" {
				t.Errorf("GET %s as %s with Redis cut off: %d %s; want 503 unavailable", path, tenant, resp.StatusCode, b)
			}
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
