package httpapi

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzPingURL: whatever the job name, action and timeout of a ping, the
// server answers 200 with the run it recorded under that job, or 400 with
// the field at fault; never another status, and never a run it does not
// name.
func FuzzPingURL(f *testing.F) {
	srv, b := newTestServer(f, nil)
	// As curl in a cron line: redirects are not followed.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	f.Add("backup", "start", "30m")
	f.Add("backup", "", "")
	f.Add("etl", "3", "")
	f.Add("a@b", "fail", "")
	f.Add("x\x00y", "256", "-5m")
	f.Add(strings.Repeat("n", 300), "later", "soon")
	f.Fuzz(func(t *testing.T, name, action, timeout string) {
		path := "/ping/" + url.PathEscape(name)
		if action != "" {
			path += "/" + url.PathEscape(action)
		}
		if timeout != "" {
			path += "?timeout=" + url.QueryEscape(timeout)
		}
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			id, ok := strings.CutPrefix(strings.TrimSpace(string(body)), "OK ")
			task, err := b.Get("", id)
			if !ok || err != nil || task == nil || task.Name != name {
				t.Fatalf("%s: answered %q, but the run is %+v (%v)", path, body, task, err)
			}
		case 400:
			if !strings.Contains(string(body), `"field":`) {
				t.Fatalf("%s: 400 without the field at fault: %s", path, body)
			}
		case 404, 405:
			// A path the mux does not route: not a ping, nothing recorded.
		default:
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	})
}
