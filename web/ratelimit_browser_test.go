package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// Requests the ingest rate limit refuses (429) never reach the bus, so
// bus.refused does not count them and the System page showed nothing of
// them. Now it has an "Ingest rate limit" component: tenant b's admin
// sees b's refusals and nothing of tenant a; the operators see both
// tenants by name.
func TestRateLimitRefusalsOnSystemPageInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"a-token":     {Name: "alice", Tenant: "acme", Role: httpapi.RoleAdmin, Rate: 1},
		"b-token":     {Name: "bob", Tenant: "globex", Role: httpapi.RoleAdmin, Rate: 1},
	}
	d := newDashboard(t, auth)
	post := func(token string, want int) {
		t.Helper()
		ev := run("etl", "etl-"+token+time.Now().Format("150405.000000000"), "success", time.Now(), time.Second)[0]
		req, _ := http.NewRequest(http.MethodPost, d.srv.URL+"/api/v1/events", strings.NewReader("["+ev+"]"))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: %d, want %d", token, resp.StatusCode, want)
		}
	}
	// A bucket of one a second: the first event passes, the next ones
	// (well within the second) are refused.
	post("a-token", http.StatusOK)
	post("a-token", http.StatusTooManyRequests)
	post("a-token", http.StatusTooManyRequests)
	post("b-token", http.StatusOK)
	post("b-token", http.StatusTooManyRequests)

	b := newBrowser(t)
	b.signIn(d.srv.URL+"/system", "b-token")
	b.untilIn("globex's refusals", text("#sys-rateLimit")+`.includes("1 request refused with 429")`, 30*time.Second)
	shown, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(shown, "acme") {
		t.Errorf("globex's System page names acme:\n%s", shown)
	}
	b.screenshot("ratelimit-globex")

	b = newBrowser(t)
	b.signIn(d.srv.URL+"/system", "admin-token")
	b.untilIn("both tenants' refusals", text("#sys-rateLimit")+`.includes("3 requests refused with 429") && `+
		text("#sys-rateLimit")+`.includes("tenant acme") && `+text("#sys-rateLimit")+`.includes("tenant globex")`, 30*time.Second)
	b.screenshot("ratelimit-operators")
}
