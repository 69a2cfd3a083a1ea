package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A server without tokens behind a proxy that asks for HTTP Basic
// credentials (nginx auth_basic, passing Authorization on as it does by
// default): the browser that signed in attaches the credentials to every
// request to that origin, a form another site posts there included. The
// cross-site check let any request with an Authorization header through,
// taking it for a token a page cannot send; such a form reported runs and
// events. Only a Bearer token says the request is not a page's.
func TestBrowsersBasicCredentialsAreNoToken(t *testing.T) {
	t.Parallel()
	addr, _, _ := inProcess(t, testConfig(t))
	basic := "Basic b3BzOnMzY3JldA==" // what the browser adds after the proxy's sign-in
	send := func(method, path, body string, h map[string]string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	form := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site",
		"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/ping/payroll/fail", ""},
		{"POST", "/api/v1/events", `{"taskID":"forged","name":"payroll","sequence":1,"status":"failed","ts":1764400000000}`},
		{"POST", "/api/v1/alerts/x/ack", ""},
	} {
		if st, body := send(tc.method, tc.path, tc.body, form); st != 403 || !strings.Contains(body, "may not change anything here") {
			t.Errorf("%s %s from another site's form, with the browser's Basic credentials: %d %s, want 403", tc.method, tc.path, st, body)
		}
	}
	// An image on another site, with no Origin.
	if st, body := send("GET", "/ping/payroll", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": basic}); st != 403 {
		t.Errorf("a ping from another site's image, with the browser's Basic credentials: %d %s, want 403", st, body)
	}
	if st, body := send("GET", "/api/v1/tasks?prefix=payroll", "", nil); st != 200 || strings.Contains(body, "payroll") {
		t.Errorf("the forged runs were recorded: %d %s", st, body)
	}
	// The dashboard behind the proxy, and curl with the proxy's credentials,
	// still change things; a Bearer token (which no page can send to another
	// site) is not asked where it comes from.
	for _, h := range []map[string]string{
		{"Origin": "http://" + addr, "Sec-Fetch-Site": "same-origin", "Authorization": basic},
		{"Authorization": basic},
		{"Origin": "https://evil.example", "Authorization": "Bearer apl_whatever"},
	} {
		if st, body := send("POST", "/ping/payroll", "", h); st != 200 {
			t.Errorf("a ping with %v: %d %s", h, st, body)
		}
	}
}
