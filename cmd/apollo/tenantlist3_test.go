package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The list of a deployment's tenants, <p>:tenants, which a deployment at
// <p>:<tenant> is refused by, is true whenever a tenant can write: a
// tenant added to the configuration is listed once its token is taken
// (here at the restart: SIGHUP does not load tokens, and the test checks
// that globex's token is refused until it is listed), and after Redis
// lost its data the bus lists its tenants again within a heartbeat.
// Before, the bus listed them only at its start: after a Redis restarted
// empty, a deployment at <p>:globex started beside it and the two buses
// overwrote each other's counts.
func TestThreeProcessTenantListIsTrueWhileTenantsWrite(t *testing.T) {
	endToEnd(t)
	c, p := redistest.Client(t)
	url := redistest.URLFor(t, p)
	ctx := context.Background()
	listed := func(tenant string) bool { return c.SIsMember(ctx, p+":tenants", tenant).Val() }
	secrets := map[string]string{}
	cfg, data := filepath.Join(t.TempDir(), "apollo.yaml"), t.TempDir()
	writeBusConfigAt(t, cfg, url, p, secrets, "acme")
	bus := startApollo(t, "bus", "--config", cfg, "--data", data, "--listen", "127.0.0.1:0")
	post := func(tenant string) int {
		t.Helper()
		body := fmt.Sprintf(`{"taskID":"%s-1","sequence":1,"status":"running","ts":%d}`, tenant, time.Now().UnixMilli())
		req, _ := http.NewRequest("POST", "http://"+bus.addr+"/api/v1/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[tenant])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("acme"); code >= 300 || !listed("acme") {
		t.Fatalf("acme: POST %d, listed %v", code, listed("acme"))
	}

	// globex is added to the file, and the bus told with SIGHUP.
	writeBusConfigAt(t, cfg, url, p, secrets, "acme", "globex")
	bus.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, time.Minute, "the bus reloading", func() bool { return strings.Contains(bus.out.String(), "SIGHUP: reloading") })
	if code := post("globex"); code != http.StatusUnauthorized && !listed("globex") {
		t.Fatalf("after SIGHUP, globex writes (POST %d) and is not in %s:tenants", code, p)
	}
	// The restart takes globex's token: it is listed.
	bus.kill()
	bus = startApollo(t, "bus", "--config", cfg, "--data", data, "--listen", "127.0.0.1:0")
	if code := post("globex"); code >= 300 || !listed("globex") {
		t.Fatalf("after the restart, globex: POST %d, listed %v", code, listed("globex"))
	}

	// Redis loses the deployment's data, as a Redis restarted empty.
	keys, err := c.Keys(ctx, p+":*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the deployment's keys: %d, %v", len(keys), err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "both tenants listed again", func() bool { return listed("acme") && listed("globex") })
	out := refusedBus(t, writeBusConfig(t, url, p+":globex"))
	if !strings.Contains(out, fmt.Sprintf("redis.prefix %q is where the deployment at prefix %q keeps the metrics of its tenant \"globex\"", p+":globex", p)) {
		t.Errorf("the bus at P:globex says:\n%s", out)
	}
}
