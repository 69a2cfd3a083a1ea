package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/httpapi"
)

// burst posts n new runs of tenant's token in one request and returns how
// many the server answered retry_later, as it says in its answer.
func (d *dashboard) burst(token, prefix string, n int) int {
	d.t.Helper()
	evs := make([]string, n)
	for i := range evs {
		evs[i] = fmt.Sprintf(`{"taskID":"%s-%d","name":%q,"sequence":1,"status":"running","ts":%d}`, prefix, i, prefix, time.Now().UnixMilli())
	}
	req, err := http.NewRequest("POST", d.srv.URL+"/api/v1/events", strings.NewReader("["+strings.Join(evs, ",")+"]"))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var ans struct {
		Accepted   int `json:"accepted"`
		RetryLater int `json:"retryLater"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Accepted+ans.RetryLater != n {
		d.t.Fatalf("the answer to %d events (HTTP %d): %v %s", n, resp.StatusCode, err, body)
	}
	return ans.RetryLater
}

// TestRefusalsAsTheServerCountsThemInBrowser: globex goes over its limit
// of tasks in memory in a burst, and acme's System page shows as many
// events refused as the server answered retry_later (its own figure, a
// count over every tenant), without saying why they were when it cannot
// know: the page said "the holding area was full" of every refusal, and
// here it was empty; an operator went looking for a slow consumer that
// was not there.
func TestRefusalsAsTheServerCountsThemInBrowser(t *testing.T) {
	auth := tokens{
		"acme-admin":   {Name: "ann", Role: httpapi.RoleAdmin, Tenant: "acme"},
		"acme-agent":   {Name: "acme-runner", Role: httpapi.RoleAgent, Tenant: "acme"},
		"globex-agent": {Name: "globex-runner", Role: httpapi.RoleAgent, Tenant: "globex"},
	}
	d := newDashboardWith(t, auth, func(o *bus.Options) { o.TenantTasks = map[string]int{"globex": 5} })
	refused := d.burst("globex-agent", "globex_load", 40) + d.burst("acme-agent", "acme_load", 10)
	if refused != 35 {
		t.Fatalf("the server answered %d events retry_later, want globex's 35 over its limit of 5", refused)
	}
	if s := d.bus.Stats(); s.Refused != int64(refused) || s.Holding != 0 {
		t.Fatalf("the bus counts %d refused with %d held, the answers said %d", s.Refused, s.Holding, refused)
	}
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/system", "acme-admin")
	b.until("the bus's figures", text("#sys-bus")+`.includes("accepted")`)
	b.until("the server's count of refusals", fmt.Sprintf(`[...document.querySelectorAll("#sys-bus dl.facts div")].some((e) => e.querySelector("dt").textContent.startsWith("refused") && e.querySelector("dd").textContent === %q)`, fmt.Sprint(refused)))
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("#sys-bus").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("#sys-bus ul.notes")?.innerText ?? ""`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "no room") || strings.Contains(notes, "holding area") {
		t.Errorf("the page gives the holding area as the reason while it held nothing:\n%s", got)
	}
	if !strings.Contains(notes, fmt.Sprintf("%d events refused", refused)) || !strings.Contains(notes, "not stored") {
		t.Errorf("the page does not say that %d events were refused and not stored:\n%s", refused, notes)
	}
	b.screenshot("system-refused")
}
