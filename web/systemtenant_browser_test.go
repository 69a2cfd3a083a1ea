package web_test

import (
	"cmp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// The System page of a tab whose token changed (a sign-in in another tab)
// shows the new tenant's figures or none, never the last tenant's: the
// stream's last system message and the page's last read of the API were
// kept and shown under the new principal until the new tenant's came,
// and a tenant sees its own notification channels in them
// (docs/security.md). Here the stream's message of the new tenant is held
// back, which left the other tenant's on screen for as long.
func TestSystemPageOfOneTenantOnlyInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	d.streamSystem = func(tenant string) {
		if tenant == "b" {
			<-release
		}
	}
	d.process = func(tenant string) any {
		return map[string]any{"mode": "of tenant " + cmp.Or(tenant, "default"), "listen": "127.0.0.1:0", "data": "/tmp"}
	}
	d.hub.Stop(t.Context())
	d.startStream() // with the process part
	first := newBrowser(t)
	first.signIn(d.srv.URL+"/system", "admin-token")
	first.until("the default tenant's figures", text("#sys-process")+`.includes("of tenant default")`)

	ctx, cancel := chromedp.NewContext(first.ctx) // a second tab of the same browser
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	second := &browser{t: t, ctx: ctx, shot: first.shot, errs: make(chan string, 1)}
	second.do("open the site in a second tab", chromedp.Navigate(d.srv.URL+"/"))
	second.until("signed in with the browser's token", `document.querySelector("#conn")?.dataset.state === "open"`)
	// Another token put in place of the first at once, as a sign-in in
	// the second tab does when its dialog is answered.
	second.do("sign in as b", chromedp.Evaluate[chromedp.Void](`localStorage.setItem("apollo.token", "b-token")`))

	first.until("the first tab follows", text("#who")+` === "bob (admin)"`)
	first.until("the stream of b, and b's figures read from the API", `document.querySelector("#conn")?.dataset.state === "open" && !!document.querySelector("#sys-bus")`)
	shown, err := chromedp.Run(first.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(shown, "of tenant default") {
		t.Errorf("bob's System page shows the default tenant's figures:\n%s", shown)
	}
	first.screenshot("system-of-b-waiting")
	once.Do(func() { close(release) })
	first.until("b's figures", text("#sys-process")+`.includes("of tenant b")`)
	first.screenshot("system-of-b")
}
