package web_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
	"github.com/apollo-11/apollo/web"
)

// chromium finds the browser, or skips (fails with APOLLO_REQUIRE_BROWSER=1).
func chromium(t testing.TB) string {
	for _, p := range []string{os.Getenv("APOLLO_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	msg := "no Chromium: install the distribution's chromium package or set APOLLO_CHROMIUM"
	if os.Getenv("APOLLO_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// engineStream connects the real alert engine's alert changes to the
// stream, as cmd/apollo does; the engine takes the page's acks itself.
type engineStream struct {
	e     *alert.Engine
	acked func() // when set, called after an ack over the stream was made, before its answer
}

func (a engineStream) SubscribeAlerts() (<-chan apollo.Alert, func()) { return a.e.Subscribe() }

// Ack acknowledges for the stream's caller, as the server does.
func (a engineStream) Ack(ctx context.Context, who stream.Caller, id string) error {
	err := a.e.Ack(ctx, who.Tenant, id, who.Name)
	if err == nil && a.acked != nil {
		a.acked()
	}
	return err
}

type tokens map[string]*httpapi.Principal

func (a tokens) Authenticate(r *http.Request) (*httpapi.Principal, error) {
	tok, _ := httpapi.BearerToken(r)
	if p := a[tok]; p != nil {
		return p, nil
	}
	return nil, &apollo.Error{Code: apollo.EUNAUTHORIZED, Message: "missing or unknown token"}
}

// dashboard is a real bus, stream hub, API and web UI on 127.0.0.1:0. The
// API can be replaced (a restart of the stream) while the listener stays.
type dashboard struct {
	t      testing.TB
	bus    *bus.Bus
	agg    *metrics.Aggregator
	alerts *alert.Engine
	disp   *notify.Dispatcher
	srv    *httptest.Server
	api    atomic.Pointer[http.Handler]
	hub    *stream.Hub
	auth   httpapi.Authenticator // nil: no tokens
	// metrics, when set before startStream, sends the stream's metric
	// messages every 100 ms.
	metrics stream.MetricsSource
	// systemEvery, when set before startStream, is how often the stream
	// sends its system message (1 s otherwise).
	systemEvery time.Duration
	// expect, when set before startStream, serves the expectations.
	expect httpapi.Expectations
	// tenantStreams, when set before startStream, is the streams a
	// tenant may hold open (stream.Options.TenantClients).
	tenantStreams int
	// wrap, when set before startStream, wraps the API it serves.
	wrap func(http.Handler) http.Handler
	// acked, when set before startStream, is called after each ack over
	// the stream was made and before it is answered.
	acked func()
	// process, when set before startStream, is the "process" part of the
	// system figures, as the tenant may see it (the stream's and the API's).
	process func(tenant string) any
	// streamSystem, when set before startStream, is called before each
	// system message of the stream is made for tenant: the test holds it.
	streamSystem func(tenant string)
	// streamBus, when set before startStream, is what the stream lists
	// its snapshots from instead of the bus.
	streamBus stream.Bus
}

var testTokens = tokens{"admin-token": {Name: "root", Role: httpapi.RoleAdmin}}

// dashboardRules are the rules the page shows and the engine runs: a
// failure of an etl run fires etl_failures at once; the inhibit rule holds
// only report jobs' alerts (the rules page lists it).
const dashboardRules = "RULE etl_failures task_prefix: \"etl\" ON: failed SEVERITY: critical NOTIFY: console\n" +
	"INHIBIT quiet_reports SOURCE: rule=etl_failures TARGET: task_prefix=\"report_\"\n"

func newDashboard(t testing.TB, auth httpapi.Authenticator) *dashboard {
	return newDashboardWith(t, auth, nil)
}

// newDashboardWith is newDashboard with the bus's options changed by
// busOpts (nil: as they are).
func newDashboardWith(t testing.TB, auth httpapi.Authenticator, busOpts func(*bus.Options)) *dashboard {
	agg, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := notify.NewDispatcher([]notify.Channel{{Name: "console", Type: "console", Notifier: notify.NotifierFunc(
		func(context.Context, *notify.Message) (bool, error) { return false, nil })}}, notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disp.Start(context.Background())
	t.Cleanup(func() { disp.Stop(context.Background()) })
	rs, err := rules.Parse("rules.txt", []byte(dashboardRules))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := alert.New(alert.Options{Store: agg, Sender: disp})
	if err != nil {
		t.Fatal(err)
	}
	eng.SetRulesSource("", rs, []byte(dashboardRules))
	eng.Start(context.Background())
	t.Cleanup(func() { eng.Stop(context.Background()) })
	bo := bus.Options{Observers: []bus.Observer{agg, eng}}
	if busOpts != nil {
		busOpts(&bo)
	}
	b, err := bus.New(bo)
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	d := &dashboard{t: t, bus: b, agg: agg, alerts: eng, disp: disp, auth: auth}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*d.api.Load()).ServeHTTP(w, r) }))
	t.Cleanup(d.srv.Close)
	d.startStream()
	t.Cleanup(func() { d.hub.Stop(context.Background()) })
	return d
}

// startStream starts a new hub and an API that serves it.
func (d *dashboard) startStream() {
	var api *httpapi.Server
	var lister stream.Bus = d.bus
	if d.streamBus != nil {
		lister = d.streamBus
	}
	hub, err := stream.New(stream.Options{Bus: lister, Changes: func(n int) stream.ChangeSubscription { return d.bus.Subscribe(n) },
		Alerts: engineStream{e: d.alerts}, Acker: engineStream{d.alerts, d.acked}, Metrics: d.metrics, MetricsInterval: 100 * time.Millisecond,
		System: func(tenant string) any {
			if d.streamSystem != nil {
				d.streamSystem(tenant)
			}
			return api.SystemStats(tenant)
		}, SystemInterval: cmp.Or(d.systemEvery, time.Second), TenantClients: d.tenantStreams})
	if err != nil {
		d.t.Fatal(err)
	}
	parts := selfmetrics.Parts{selfmetrics.Watch("bus", d.bus.Stats), selfmetrics.Watch("stream", hub.Stats),
		selfmetrics.Watch("metrics", d.agg.Stats), selfmetrics.Watch("alert", d.alerts.Stats), selfmetrics.Watch("notifications", d.disp.Stats)}
	system := parts.System()
	if d.process != nil {
		system["process"] = d.process
	}
	api = httpapi.New(httpapi.Options{Bus: d.bus, Metrics: d.agg, Alerts: d.alerts, Deliveries: d.disp, Auth: d.auth, Stream: hub, Web: web.Handler(),
		System: system, Prometheus: parts.Handler(slog.New(slog.DiscardHandler), httpapi.TenantOf),
		Rules: rulebook.Book{Engine: d.alerts, Known: func(_, n string) bool { return n == "console" }}, Expectations: d.expect})
	hub.Start(context.Background())
	var h http.Handler = api
	if d.wrap != nil {
		h = d.wrap(h)
	}
	d.api.Store(&h)
	d.hub = hub
}

// browser drives one headless Chromium with a fresh profile.
type browser struct {
	t    testing.TB
	ctx  context.Context
	shot string // screenshot folder
	errs chan string
}

func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) *browser {
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	b := &browser{t: t, ctx: ctx, shot: artifacts(t), errs: make(chan string, 64)}
	go func() { // CSP violations and uncaught exceptions fail the test
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
				select {
				case b.errs <- m.String():
				default:
				}
			}
		}
	}()
	return b
}

// artifacts is where a test's screenshots go: $APOLLO_ARTIFACTS/<test>
// when set (CI keeps that folder), else a temporary folder of the test.
func artifacts(t testing.TB) string {
	dir := os.Getenv("APOLLO_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "web", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	select {
	case e := <-b.errs:
		b.t.Fatalf("%s: the page reported: %s", what, e)
	default:
	}
}

// until waits for a JavaScript condition to hold.
func (b *browser) until(what, expr string) { b.t.Helper(); b.untilIn(what, expr, 20*time.Second) }

// untilIn is until with its own timeout.
func (b *browser) untilIn(what, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector("#conn")?.innerText ?? "") + "\n" + document.querySelector("main")?.innerText.slice(0, 600)`))
		b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, text)
	}
}

// maxShotHeight is the tallest page screenshot keeps whole, in CSS pixels.
const maxShotHeight = 4000

func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	// A page of a thousand rows is tens of thousands of pixels tall: its
	// full-page PNG took Chromium past the timeout on a loaded machine
	// (TestManyTasksInBrowser in CI), and nobody reads it whole. Past
	// maxShotHeight only what the window shows is kept.
	height, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	shot := chromedp.FullScreenshot(100)
	if height > maxShotHeight {
		shot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shot, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	abs, _ := filepath.Abs(p)
	b.t.Logf("screenshot: %s", abs)
}

// signIn opens url, which asks for a token, signs in with token and waits
// for the stream to go live.
func (b *browser) signIn(url, token string) {
	b.t.Helper()
	b.do("load", chromedp.Navigate(url))
	b.until("the login dialog", `document.querySelector("#login")?.open === true`)
	b.do("sign in", chromedp.SendKeys(chromedp.CSS("#token-input"), token), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	b.until("the stream", `document.querySelector("#conn")?.dataset.state === "open"`)
}

// goTo follows the navigation link to a page, as a user would.
func (b *browser) goTo(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Click(chromedp.CSS(fmt.Sprintf(`nav.main a[href=%q]`, path))))
	b.until("the page "+path, fmt.Sprintf(`location.pathname === %q`, path))
}

func text(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "")`, sel)
}

func TestDashboardInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	b := newBrowser(t)
	ag, err := agent.New(d.srv.URL, agent.WithToken("admin-token"), agent.WithFlushInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close(context.Background())
	report := func(f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
		defer cancel()
		if err := ag.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Without a token the page asks for one; with it the stream goes live.
	b.signIn(d.srv.URL+"/", "admin-token")
	b.until("the principal", text("#who")+`.includes("root (admin)")`)
	b.goTo("/overview")

	// Events through the SDK move the counters.
	etl1, etl2 := ag.Task("etl-1", "etl"), ag.Task("etl-2", "etl")
	report(func() error { return errors.Join(etl1.Running(), etl2.Running()) })
	b.until("two running", text("#count-running .n")+` === "2"`)
	report(func() error {
		return errors.Join(etl1.Succeed(), etl2.Fail(agent.Extra(map[string]any{"exitCode": 3})))
	})
	b.until("one success, one failed", text("#count-success .n")+` === "1" && `+text("#count-failed .n")+` === "1"`)
	b.screenshot("overview")

	// The tasks table is live and filters.
	b.goTo("/tasks")
	b.until("two rows", `document.querySelectorAll("#tasks-table tbody tr").length === 2`)
	report(func() error { return ag.Task("web-1", "web").Pending() })
	b.until("a new row", `!!document.querySelector('tr[data-task="web-1"]')`)
	b.do("filter", chromedp.SendKeys(chromedp.CSS("#f-prefix"), "etl"))
	b.until("the filtered rows", `document.querySelectorAll("#tasks-table tbody tr").length === 2 && !document.querySelector('tr[data-task="web-1"]')`)
	b.screenshot("tasks")

	// A task's detail has its timeline.
	b.do("open etl-2", chromedp.Click(chromedp.CSS(`tr[data-task="etl-2"] a`)))
	b.until("the timeline", `document.querySelectorAll("#timeline li").length === 2 && `+text("#timeline")+`.includes("exitCode")`)
	b.screenshot("task-detail")

	// The indicator goes red when the stream stops, green when it is back.
	d.hub.Stop(context.Background())
	b.until("the red indicator", `document.querySelector("#conn")?.dataset.state === "closed"`)
	b.screenshot("disconnected")
	d.startStream()
	b.until("the green indicator", `document.querySelector("#conn")?.dataset.state === "open"`)
	report(func() error { return ag.Task("etl-3", "etl").Pending() })
	b.do("back to tasks", chromedp.Click(chromedp.CSS(`nav.main a[href="/tasks"]`)))
	b.until("updates after the reconnect", `!!document.querySelector('tr[data-task="etl-3"]')`)

	checkAlertAck(t, d, b)
	checkOtherPages(b)

	// Keyboard: "g t" opens Tasks; "?" opens the shortcuts.
	b.do("keys", chromedp.KeyEvent("g"), chromedp.KeyEvent("t"))
	b.until("tasks by keyboard", `location.pathname === "/tasks"`)
	b.do("help", chromedp.KeyEvent("?"))
	b.until("the help dialog", `document.querySelector("#help")?.open === true`)

	// A phone-sized window.
	b.do("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(d.srv.URL+"/"))
	b.until("the stream on a phone", `document.querySelector("#conn")?.dataset.state === "open"`)
	b.screenshot("overview-phone")
}

// checkAlertAck: the failure reported earlier fired etl_failures in the
// real engine; it shows on the Alerts page, and its Ack button reaches the
// engine over the stream.
func checkAlertAck(t *testing.T, d *dashboard, b *browser) {
	var id string
	for _, a := range d.alerts.Alerts("", apollo.AlertFiring) {
		if a.Rule == "etl_failures" {
			id = a.ID
		}
	}
	if id == "" {
		t.Fatalf("the failure did not fire etl_failures: %+v", d.alerts.Alerts("", ""))
	}
	row := `tr[data-alert="` + id + `"]`
	b.goTo("/alerts")
	b.until("the alert", `!!document.querySelector('`+row+` button.ack')`)
	b.screenshot("alerts")
	b.do("ack", chromedp.Click(chromedp.CSS(row+` button.ack`)))
	b.until("acknowledged", text(row+` td.acked`)+` === "by root"`)
	for _, a := range d.alerts.Alerts("", apollo.AlertFiring) {
		if a.ID == id && a.AckedBy != "root" {
			t.Fatalf("the engine has the alert acked by %q", a.AckedBy)
		}
	}
	b.goTo("/overview")
	b.until("the firing alert on the overview", text("#firing")+`.includes("etl_failures")`)
	// A page opened after the alert fired shows it too: alerts already
	// firing come from the API when the stream connects.
	b.do("reload", chromedp.Navigate(d.srv.URL+"/overview"))
	b.until("the firing alert after a reload", text("#firing")+`.includes("etl_failures")`)
}

// checkOtherPages: the jobs, rules and system pages show the server's data.
func checkOtherPages(b *browser) {
	b.goTo("/jobs")
	b.until("jobs: the etl row", `!!document.querySelector("main table") && `+text("main table")+`.includes("etl")`)
	b.screenshot("jobs")
	b.goTo("/rules")
	b.until("rules: the rules text", text("main")+`.includes("etl_failures")`)
	b.until("rules: the inhibit rule in the table", text("#rules-table")+`.includes("quiet_reports")`)
	b.screenshot("rules")
	b.goTo("/system")
	b.until("system stats", text("#sys-stream")+`.includes("clients")`)
	b.screenshot("system")
}
