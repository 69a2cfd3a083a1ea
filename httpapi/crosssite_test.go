package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rulebook"
)

// openServer is a server without tokens (the default mode), with a task
// "victim" that failed and an alert engine for silences.
type openServer struct {
	srv    *httptest.Server
	bus    *bus.Bus
	alerts *alert.Engine
	audit  *audit.Log
}

// newMeteredBus is a running bus with a metrics aggregator observing it.
func newMeteredBus(t *testing.T) (*bus.Bus, *metrics.Aggregator) {
	t.Helper()
	agg, err := metrics.New(metrics.Options{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.New(bus.Options{Workers: 1, Logger: discardLogger, Observers: []bus.Observer{agg}})
	if err != nil {
		t.Fatal(err)
	}
	b.Start(context.Background())
	t.Cleanup(func() { b.Stop(context.Background()) })
	return b, agg
}

// call makes a request and returns the answer's status and body; in h,
// "Host" sets the Host.
func call(t *testing.T, method, url, body string, h map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// bearerHeader is the header that carries token, or none for "".
func bearerHeader(token string) map[string]string {
	if token == "" {
		return map[string]string{}
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

// callAs makes a request with token and, if there is one, a JSON body.
func callAs(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	h := bearerHeader(token)
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	return call(t, method, url, body, h)
}

func newOpenServer(t *testing.T, auth Authenticator, edit func(*Options)) *openServer {
	t.Helper()
	b, agg := newMeteredBus(t)
	eng, err := alert.New(alert.Options{Store: agg, Sender: discardSender{}, State: alert.NewMemoryState(), Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	evs := []apollo.Event{{TaskID: "victim", Name: "payroll", Sequence: 1, Status: apollo.StatusRunning, Ts: 1_764_400_000_000},
		{TaskID: "victim", Sequence: 2, Status: apollo.StatusFailed, Ts: 1_764_400_001_000}}
	if err := b.Publish(context.Background(), evs, make([]bus.Outcome, len(evs))); err != nil {
		t.Fatal(err)
	}
	o := &openServer{bus: b, alerts: eng, audit: audit.NewMemory(100, nil)}
	opts := Options{Bus: b, Alerts: eng, Rules: rulebook.Book{Engine: eng}, Metrics: agg, Auth: auth, Audit: o.audit, Logger: discardLogger}
	if edit != nil {
		edit(&opts)
	}
	o.srv = httptest.NewServer(New(opts))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *openServer) status(t *testing.T) apollo.Status {
	t.Helper()
	task, err := o.bus.Get("", "victim")
	if err != nil {
		t.Fatal(err)
	}
	return task.Status
}

// send makes a request with the given headers ("Host" sets the Host).
func (o *openServer) send(t *testing.T, method, path, body string, h map[string]string) (int, string) {
	t.Helper()
	return call(t, method, o.srv.URL+path, body, h)
}

const (
	forgedFix     = `{"status":"success","reason":"forged"}`
	forgedSilence = `{"rule":"r","duration":"8760h","comment":"forged"}`
)

// The attacks of issue 16.6, as Chromium sends them from another site's
// page (fetch with mode "no-cors" and text/plain), are refused and change
// nothing; the server's own pages and clients that are not browsers still
// work.
func TestCrossSiteRequestsWithoutTokens(t *testing.T) {
	t.Parallel()
	o := newOpenServer(t, nil, func(o *Options) { o.AllowedOrigins = []string{"ops.example.com"} })
	self := o.srv.URL // the origin of the server's own pages
	crossSite := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain;charset=UTF-8"}
	tests := []struct {
		name, method, path, body string
		h                        map[string]string
		want                     int
	}{
		{"correction from another site", "POST", "/api/v1/tasks/victim/status", forgedFix, crossSite, 403},
		{"silence from another site", "POST", "/api/v1/silences", forgedSilence, crossSite, 403},
		{"correction from a site on the same host, another port", "POST", "/api/v1/tasks/victim/status", forgedFix,
			map[string]string{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, 403},
		{"correction from an older browser on another site", "POST", "/api/v1/tasks/victim/status", forgedFix,
			map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, 403},
		{"expiring a silence from another site", "DELETE", "/api/v1/silences/x", "", crossSite, 403},
		{"rules from another site", "PUT", "/api/v1/rules", "", crossSite, 403},
		{"ack from another site", "POST", "/api/v1/alerts/x/ack", "", crossSite, 403},
		{"events from another site", "POST", "/api/v1/events", `{"taskID":"x","sequence":1,"status":"running","ts":1764400000000}`, crossSite, 403},
		{"a ping from another site's image", "GET", "/ping/payroll/fail", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"a sandboxed page", "POST", "/api/v1/silences", forgedSilence, map[string]string{"Origin": "null", "Content-Type": "application/json"}, 403},

		{"a correction that is not JSON", "POST", "/api/v1/tasks/victim/status", forgedFix, map[string]string{"Content-Type": "text/plain"}, 415},
		{"a silence without a type", "POST", "/api/v1/silences", forgedSilence, nil, 415},

		{"reading from another site (the browser hides the answer)", "GET", "/api/v1/tasks/victim", "", crossSite, 200},
		{"a ping typed in the address bar", "GET", "/ping/other", "", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"a ping from cron (curl)", "GET", "/ping/other", "", nil, 200},
		{"events from curl -d", "POST", "/api/v1/events", `{"taskID":"y","sequence":1,"status":"running","ts":1764400000000}`,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 200},
		{"a silence from a trusted origin", "POST", "/api/v1/silences", forgedSilence,
			map[string]string{"Origin": "https://ops.example.com", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, 201},
		{"a silence with a token (a page cannot send one to another site)", "POST", "/api/v1/silences", forgedSilence,
			map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer x", "Content-Type": "application/json"}, 201},
		{"a silence from the dashboard of an older browser", "POST", "/api/v1/silences", forgedSilence,
			map[string]string{"Origin": self, "Content-Type": "application/json"}, 201},
		// Last: it changes the task the earlier cases try to change.
		{"a correction from the server's own dashboard", "POST", "/api/v1/tasks/victim/status", forgedFix,
			map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, 200},
	}
	refused := 0
	for _, tt := range tests {
		silences := len(o.alerts.Silences(""))
		st, body := o.send(t, tt.method, tt.path, tt.body, tt.h)
		if st != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, st, body, tt.want)
		}
		if tt.want == 403 {
			refused++
			if !strings.Contains(body, "may not change anything here") {
				t.Errorf("%s: the refusal does not say why: %s", tt.name, body)
			}
			if got := o.status(t); got != apollo.StatusFailed {
				t.Fatalf("%s: the task is %s", tt.name, got)
			}
			if n := len(o.alerts.Silences("")); n != silences {
				t.Fatalf("%s: %d silences, %d before", tt.name, n, silences)
			}
		}
	}
	if got := o.status(t); got != apollo.StatusSuccess {
		t.Errorf("the dashboard's forgedFix left the task %s", got)
	}
	// The refusals are in the audit log, counted, not one entry each.
	var counted int
	for _, e := range o.audit.List("", 100) {
		if e.Action == "request.refused" {
			counted += e.Count
		}
	}
	if counted != refused {
		t.Errorf("the audit log counts %d refused requests, want %d", counted, refused)
	}
}

// Without tokens the server answers only to Host names it is reached by
// (DNS rebinding: a page on evil.example that resolves to 127.0.0.1 is
// same-origin with itself, and would read and write everything). With
// tokens the Host is not checked: such a page has no token.
func TestHostNamesWithoutTokens(t *testing.T) {
	t.Parallel()
	o := newOpenServer(t, nil, func(o *Options) { o.AllowedHosts = []string{"apollo.example.com", "*.ops.example.com"} })
	_, port, _ := net.SplitHostPort(o.srv.Listener.Addr().String())
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:" + port, 200}, {"localhost:" + port, 200}, {"LocalHost.:" + port, 200}, {"[::1]:" + port, 200},
		{"dash.localhost:" + port, 200}, {"10.1.2.3", 200}, {"apollo.example.com", 200}, {"APOLLO.example.com:443", 200},
		{"a.ops.example.com", 200},
		{"evil.example:" + port, 403}, {"evil.example", 403}, {"localhost.evil.example", 403}, {"apollo.example.com.evil", 403},
		{"ops.example.com", 403},
	} {
		for _, path := range []string{"/api/v1/tasks/victim", "/healthz"} {
			st, body := o.send(t, "GET", path, "", map[string]string{"Host": tc.host})
			if st != tc.want {
				t.Errorf("GET %s with Host %q: %d %s, want %d", path, tc.host, st, body, tc.want)
			}
			if st == 403 && !strings.Contains(body, "auth.allowed_hosts") {
				t.Errorf("Host %q: the refusal does not say what to do: %s", tc.host, body)
			}
		}
	}
	st, _ := o.send(t, "POST", "/api/v1/tasks/victim/status", forgedFix,
		map[string]string{"Host": "evil.example:" + port, "Origin": "http://evil.example:" + port, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"})
	if st != 403 || o.status(t) != apollo.StatusFailed {
		t.Errorf("a rebound page's forgedFix: %d, task %s", st, o.status(t))
	}

	secret, tok, err := NewToken("ops", RoleOperator, "")
	if err != nil {
		t.Fatal(err)
	}
	withTokens := newOpenServer(t, NewTokenAuth([]Token{tok}), nil)
	if st, body := withTokens.send(t, "GET", "/api/v1/tasks/victim", "", map[string]string{"Host": "evil.example", "Authorization": "Bearer " + secret}); st != 200 {
		t.Errorf("with tokens, another Host: %d %s", st, body)
	}
}

// Every route that is not a GET changes something, and so do pings.
func TestRouteTableDeclaresEffects(t *testing.T) {
	t.Parallel()
	s := New(Options{Bus: &bus.Bus{}})
	for _, rt := range s.routes() {
		if (rt.method != "GET" || strings.HasPrefix(rt.path, "/ping/")) && rt.effect == reads {
			t.Errorf("%s %s changes state but is declared as reading", rt.method, rt.path)
		}
	}
}

// FuzzRequestChecks: any Host, Origin and Sec-Fetch-Site are judged
// without panicking, and what passes is what the rules allow.
func FuzzRequestChecks(f *testing.F) {
	f.Add("127.0.0.1:1969", "http://127.0.0.1:1969", "same-origin")
	f.Add("evil.example", "http://evil.example", "cross-site")
	f.Add("[::1", "://", "")
	f.Add("localhost.", "null", "same-site")
	s := New(Options{Bus: &bus.Bus{}, AllowedHosts: []string{"apollo.example.com"}})
	f.Fuzz(func(t *testing.T, host, origin, site string) {
		r := httptest.NewRequest("POST", "http://127.0.0.1/api/v1/events", nil)
		r.Host = host
		r.Header.Set("Origin", origin)
		r.Header.Set("Sec-Fetch-Site", site)
		if s.checkHost(r) == nil {
			h := host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				h = hh
			}
			h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
			if h != "" && net.ParseIP(h) == nil && h != "localhost" && !strings.HasSuffix(h, ".localhost") && h != "apollo.example.com" {
				t.Fatalf("Host %q accepted", host)
			}
		}
		if s.checkSite(r, changes) == nil && (site == "cross-site" || site == "same-site") {
			t.Fatalf("Sec-Fetch-Site %q with Origin %q accepted without a trusted origin", site, origin)
		}
		if s.checkSite(r, reads) != nil {
			t.Fatal("a read was refused for its site")
		}
	})
}
