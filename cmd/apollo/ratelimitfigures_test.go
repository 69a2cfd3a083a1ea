package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/httpapi"
)

// Events the ingest rate limit refuses (429, before the bus) were in no
// figure of GET /api/v1/system: bus.refused counts what the bus refuses,
// and a tenant whose reporters were held back by its tokens' rate saw
// nothing. Now the "rateLimit" part counts the requests refused and their
// events, per tenant: each tenant sees its own, the operators (the
// default tenant) every tenant's by name, and the open local mode's
// requests count as anonymous. The stream's system message carries the
// same part. The clock is fake: no bucket refills while the test runs.
func TestRateLimitRefusalsInSystemFigures(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Now())
	cfg := testConfig(t)
	cfg.Limits.IngestPerSec = 5
	secrets := figureTokens(t, &cfg, "acme-agent agent acme", "globex-agent agent globex",
		"acme-viewer viewer acme", "globex-viewer viewer globex", "ops viewer")
	addr, _, _ := inProcessWith(t, cfg, clock)
	events := func(n int) string {
		var evs []string
		for range n {
			evs = append(evs, fmt.Sprintf(`{"taskID":"t-%d","name":"job","sequence":1,"status":"running","ts":%d}`, time.Now().UnixNano(), clock.Now().UnixMilli()))
		}
		return "[" + strings.Join(evs, ",") + "]"
	}
	post := func(addr, who string, n, want int) {
		t.Helper()
		if st, body := apiCall(t, addr, secrets[who], "POST", "/api/v1/events", events(n)); st != want {
			t.Fatalf("%s posts %d events: %d %s, want %d", who, n, st, body, want)
		}
	}
	// acme's bucket holds 5: 4 pass, 3 more are refused (read), 1 passes,
	// then the bucket is empty and 2 are refused unread.
	post(addr, "acme-agent", 4, http.StatusOK)
	post(addr, "acme-agent", 3, http.StatusTooManyRequests)
	post(addr, "acme-agent", 1, http.StatusOK)
	post(addr, "acme-agent", 2, http.StatusTooManyRequests)
	// globex: 5 pass, then a ping (one event) is refused.
	post(addr, "globex-agent", 5, http.StatusOK)
	if st, body := apiCall(t, addr, secrets["globex-agent"], "GET", "/ping/nightly", ""); st != http.StatusTooManyRequests {
		t.Fatalf("globex's ping past its rate: %d %s", st, body)
	}

	type figures struct {
		RateLimit httpapi.RateLimitStats `json:"rateLimit"`
	}
	read := func(addr, token string) (figures, string) {
		t.Helper()
		st, body := apiCall(t, addr, token, "GET", "/api/v1/system", "")
		if st != http.StatusOK {
			t.Fatalf("GET /api/v1/system: %d %s", st, body)
		}
		var f figures
		if err := json.Unmarshal(body, &f); err != nil {
			t.Fatal(err)
		}
		return f, string(body)
	}
	want := func(what string, got httpapi.RateRefusals, requests, events int64) {
		t.Helper()
		if got.Requests != requests || got.Events != events {
			t.Errorf("%s: %d requests and %d events refused, want %d and %d", what, got.Requests, got.Events, requests, events)
		}
	}
	acme, body := read(addr, secrets["acme-viewer"])
	want("acme's figures", acme.RateLimit.RateRefusals, 2, 3)
	if strings.Contains(body, "globex") || acme.RateLimit.Anonymous != nil {
		t.Errorf("acme's figures name another tenant or the anonymous callers:\n%s", body)
	}
	globex, body := read(addr, secrets["globex-viewer"])
	want("globex's figures", globex.RateLimit.RateRefusals, 1, 1)
	if strings.Contains(body, "acme") {
		t.Errorf("globex's figures name acme:\n%s", body)
	}
	ops, _ := read(addr, secrets["ops"])
	want("the operators' total", ops.RateLimit.RateRefusals, 3, 4)
	want("acme, to the operators", ops.RateLimit.Tenants["acme"], 2, 3)
	want("globex, to the operators", ops.RateLimit.Tenants["globex"], 1, 1)
	if s := streamSystem(t, addr, secrets["acme-viewer"]); !strings.Contains(s, `"rateLimit":{"requests":2,"events":3}`) {
		t.Errorf("acme's stream system message lacks its refusals: %s", s)
	}

	// The open local mode: no token, every caller anonymous.
	open := testConfig(t)
	open.Limits.IngestPerSec = 2
	openAddr, _, _ := inProcessWith(t, open, clock)
	secrets[""] = ""
	post(openAddr, "", 1, http.StatusOK)
	post(openAddr, "", 2, http.StatusTooManyRequests)
	local, body := read(openAddr, "")
	if local.RateLimit.Anonymous == nil {
		t.Fatalf("the open server's figures count no anonymous refusal:\n%s", body)
	}
	want("the anonymous callers", *local.RateLimit.Anonymous, 1, 2)
	want("the open server's total", local.RateLimit.RateRefusals, 1, 2)
}
