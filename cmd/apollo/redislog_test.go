package main

import (
	"strings"
	"testing"
	"time"
)

// What the Redis client says of a Redis that refuses connections goes to
// the process's structured log, like every other line: before, go-redis
// wrote its own lines to stderr ("redis: 2026/12/03 22:44:30 pool.go:770:
// redis: connection pool: failed to dial after 5 attempts: ..."), a
// dozen in the first seconds of an outage, which a log pipeline that
// reads logfmt could not parse.
func TestRedisClientLogsAreStructured(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d, _, p := busBehindAProxy(t)
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_load")
	}
	p.Close()
	eventually(t, 20*time.Second, "the bus's flushes failing", func() bool {
		var sys struct{ Redis struct{ Failures int } }
		d.do("acme", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Redis.Failures >= 2
	})
	d.api.kill()
	said := false
	for line := range strings.Lines(d.api.out.String()) {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("a line of the bus's log is not structured: %q", line)
		}
		said = said || strings.Contains(line, "failed to dial")
	}
	if !said {
		t.Errorf("the bus's log does not say that Redis refused it:\n%s", d.api.out)
	}
}
