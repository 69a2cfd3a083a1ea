package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// writeBusConfig writes the configuration of a bus at prefix whose tokens
// have tenants, and returns its path.
func writeBusConfig(t *testing.T, url, prefix string, tenants ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "apollo.yaml")
	writeBusConfigAt(t, path, url, prefix, map[string]string{}, tenants...)
	return path
}

// writeBusConfigAt writes at path the configuration of a bus at prefix
// with an admin token for each of tenants; secrets holds each tenant's
// token: one missing is made and added.
func writeBusConfigAt(t *testing.T, path, url, prefix string, secrets map[string]string, tenants ...string) {
	t.Helper()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "alert:\n  heartbeat: 1s\nredis:\n  url: %s\n  prefix: %s\n", url, prefix)
	if len(tenants) > 0 {
		cfg.WriteString("auth:\n  tokens:\n")
	}
	for _, tenant := range tenants {
		if secrets[tenant] == "" {
			secret, _, err := httpapi.NewToken(tenant+"-admin", httpapi.RoleAdmin, tenant)
			if err != nil {
				t.Fatal(err)
			}
			secrets[tenant] = secret
		}
		fmt.Fprintf(&cfg, "    - {name: %s-admin, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, sha256.Sum256([]byte(secrets[tenant])))
	}
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// refusedBus runs a bus that must refuse to start, and returns its output.
func refusedBus(t *testing.T, cfg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "bus", "--config", cfg, "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "APOLLO_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the bus did not refuse to start (%v):\n%s", err, out)
	}
	return string(out)
}

// Two deployments in one database, one at prefix P with tenant acme, the
// other at prefix P:acme: the second's default tenant's metrics are the
// keys of the first's tenant acme, and the two buses overwrote each
// other's counts. Whichever starts second refuses, naming the other and
// what to change: a deployment at P:acme once P lists acme, and a
// deployment at P with tenant acme while one at P:acme lives. Prefixes
// that do not overlap so start side by side.
func TestThreeProcessDeploymentsWhoseKeysOverlapAreRefused(t *testing.T) {
	endToEnd(t)
	c, p := redistest.Client(t)
	url := redistest.URLFor(t, p)
	startApollo(t, "bus", "--config", writeBusConfig(t, url, p, "acme", "globex"), "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	out := refusedBus(t, writeBusConfig(t, url, p+":acme"))
	if !strings.Contains(out, fmt.Sprintf("redis.prefix %q is where the deployment at prefix %q keeps the metrics of its tenant \"acme\"", p+":acme", p)) {
		t.Errorf("the bus at P:acme says:\n%s", out)
	}
	// Beside it, at P:other (no tenant of P's), a deployment starts.
	startApollo(t, "bus", "--config", writeBusConfig(t, url, p+":other"), "--data", t.TempDir(), "--listen", "127.0.0.1:0")

	// The other order, on a second prefix Q: Q:acme runs first.
	_, q := redistest.Client(t)
	qurl := redistest.URLFor(t, q)
	startApollo(t, "bus", "--config", writeBusConfig(t, qurl, q+":acme"), "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	out = refusedBus(t, writeBusConfig(t, qurl, q, "acme"))
	if !strings.Contains(out, fmt.Sprintf("a deployment at prefix %q", q+":acme")) || !strings.Contains(out, `tenant "acme"`) {
		t.Errorf("the bus at Q with tenant acme says:\n%s", out)
	}
	if n := c.SCard(context.Background(), q+":tenants").Val(); n != 0 {
		t.Errorf("the refused bus listed its tenants (%d)", n)
	}
}
