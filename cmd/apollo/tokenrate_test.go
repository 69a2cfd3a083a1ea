package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// Two tokens of one name (apollo token create names a token after its role
// when --name is left out) are two tokens: each keeps its own rate, in
// each tenant. The ingest bucket was keyed by tenant and name, so the
// first of them to report set the rate of both, and they shared it.
func TestTokensOfOneNameHaveTheirOwnRate(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	secrets := map[string]string{}
	for _, tc := range []struct {
		key, tenant string
		rate        int
	}{{"wide/a", "a", 0}, {"narrow/a", "a", 2}, {"wide/b", "b", 0}, {"narrow/b", "b", 2}} {
		secret, tok, err := httpapi.NewToken("agent", httpapi.RoleAgent, tc.tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tc.key] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: "agent", Role: "agent", Tenant: tc.tenant, RateMax: tc.rate, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	// A clock that stands still: a bucket refills only when the test says.
	addr, _, _ := inProcessWith(t, cfg, apollo.NewFakeClock(time.UnixMilli(1764400000000)))
	sent := 0
	post := func(key string, n int) (int, string) {
		evs := make([]string, n)
		for i := range evs {
			sent++
			evs[i] = fmt.Sprintf(`{"taskID":"t%d","name":"job","sequence":1,"status":"running","ts":1764400000001}`, sent)
		}
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/events", strings.NewReader("["+strings.Join(evs, ",")+"]"))
		req.Header.Set("Authorization", "Bearer "+secrets[key])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	wide := func(tenant string) {
		t.Helper()
		if st, body := post("wide/"+tenant, 5); st != 200 {
			t.Errorf("tenant %s, the token of the default rate, 5 events: %d %s", tenant, st, body)
		}
	}
	narrow := func(tenant string) {
		t.Helper()
		if st, body := post("narrow/"+tenant, 2); st != 200 {
			t.Errorf("tenant %s, the token of rate 2, 2 events: %d %s", tenant, st, body)
		}
		if st, body := post("narrow/"+tenant, 1); st != 429 || !strings.Contains(body, "over this token's limit of 2 events per second") {
			t.Errorf("tenant %s, the token of rate 2, a third event in the same second: %d %s, want 429", tenant, st, body)
		}
	}
	// In tenant a the token of the default rate reports first, in b the
	// one of rate 2: neither may lend its bucket to the other.
	wide("a")
	narrow("a")
	wide("a")
	narrow("b")
	wide("b")
}

// A ping is an event: it counts against its token's rate like one sent to
// POST /api/v1/events. A ping key (which travels in URLs, where proxies
// log it) reported without limit, each ping a new run written to the log.
func TestPingsCountAgainstTheTokensRate(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	secrets := map[string]string{}
	for _, tenant := range []string{"a", "b"} {
		secret, tok, err := httpapi.NewToken("backup-ping", httpapi.RoleAgent, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: "backup-ping", Role: "agent", Tenant: tenant, RateMax: 2, JobPrefix: "backup", SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	addr, _, _ := inProcessWith(t, cfg, apollo.NewFakeClock(time.UnixMilli(1764400000000)))
	ping := func(tenant, path string) (int, string, string) {
		resp, err := http.Post("http://"+addr+path+"?key="+secrets[tenant], "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
	}
	for _, tenant := range []string{"a", "b"} {
		for i, path := range []string{"/ping/backup_db/start", "/ping/backup_db"} {
			if st, _, body := ping(tenant, path); st != 200 {
				t.Fatalf("tenant %s, ping %d of 2 in a second: %d %s", tenant, i+1, st, body)
			}
		}
		st, retry, body := ping(tenant, "/ping/backup_db/fail")
		if st != 429 || retry != "1" || !strings.Contains(body, "over this token's limit of 2 events per second") {
			t.Errorf("tenant %s, a third ping in the same second: %d, Retry-After %q, %s; want 429", tenant, st, retry, body)
		}
	}
}
