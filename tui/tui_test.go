package tui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/tui/pages"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   Options
		stream string
		field  string
	}{
		{"defaults", Options{}, "ws://127.0.0.1:1969/api/v1/stream", ""},
		{"https becomes wss", Options{Server: "https://apollo.example.com/"}, "wss://apollo.example.com/api/v1/stream", ""},
		{"behind a path", Options{Server: "http://h:80/apollo?x=1"}, "ws://h:80/apollo/api/v1/stream", ""},
		{"no scheme", Options{Server: "127.0.0.1:1969"}, "", "server"},
		{"ws is not an API URL", Options{Server: "ws://h"}, "", "server"},
		{"window under a bucket", Options{MetricsWindow: time.Second}, "", "MetricsWindow"},
		{"reversed backoff", Options{ReconnectMin: time.Minute, ReconnectMax: time.Second}, "", "ReconnectMax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.opts)
			if tt.field != "" {
				ae, ok := err.(*apollo.Error)
				if !ok || ae.Field != tt.field || ae.Code != apollo.EINVALID {
					t.Fatalf("err %v, want an invalid %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.opts.streamURL(); got != tt.stream {
				t.Errorf("stream URL %s, want %s", got, tt.stream)
			}
		})
	}
}

// TestRunStops: cancelling Run's context ends the program, and Run returns
// only after every command has ended and the connection is closed.
func TestRunStops(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Server: srv.srv.URL, Token: "test-token", Clock: apollo.NewFakeClock(t0)},
			tea.WithInput(nil), tea.WithOutput(io.Discard), tea.WithWindowSize(80, 24))
	}()
	conn := srv.accept()
	conn.send(helloJSON("c.1"))
	conn.expect() // subscribed: the read chain is running
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("Run did not return after its context ended")
	}
	select {
	case <-conn.gone:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the stream connection is still open after Run returned")
	}
}

// TestCloseIdempotent: Close may be called twice, and commands made after
// it do nothing.
func TestCloseIdempotent(t *testing.T) {
	t.Parallel()
	m, err := New(Options{Clock: apollo.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	m.Close()
	if msg := m.fetchMetrics()(); msg != nil {
		t.Errorf("a command after Close returned %v", msg)
	}
	if !strings.HasPrefix(m.conn.label(t0), "connecting") {
		t.Errorf("state %q", m.conn.label(t0))
	}
}

// TestAckWithoutStream: with no live stream, acknowledging goes through
// POST /api/v1/alerts/{id}/ack, as the web dashboard does, and the row
// shows the alert as the answer has it, acknowledged (before, the notice
// said acknowledged and the row said not, until the next listing).
func TestAckWithoutStream(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t)
	acked := fixtureAlerts()[0]
	acked.AckedBy, acked.AckedAt = "oscar", t0
	srv.mu.Lock()
	srv.routes["POST /api/v1/alerts/a-1/ack"] = `{"alert":` + mustJSON(acked) + `}`
	srv.mu.Unlock()
	m, err := New(Options{Server: srv.srv.URL, Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(alertsMsg{alerts: fixtureAlerts()})
	m.tab = tabAlerts
	a := fixtureAlerts()[0]
	_, cmd := m.Update(pages.AckAlert{Alert: a})
	msg := cmd()
	if r := srv.request("POST /api/v1/alerts/a-1/ack"); r.method != "POST" {
		t.Fatal(r)
	}
	m.Update(msg)
	if !strings.Contains(m.render(), "Acknowledged batch_failures (batch_).") {
		t.Errorf("no notice:\n%s", m.render())
	}
	if out := ansi.Strip(m.render()); !hasRow(out, "firing", "batch_failures", "oscar") {
		t.Errorf("the row does not show the acknowledgement:\n%s", out)
	}
	// An alert without a group is named by its rule alone, not "rule ()"
	// (issue 21).
	bare := a
	bare.Rule, bare.Group = "hung_runs", ""
	_, cmd = m.Update(pages.AckAlert{Alert: bare})
	m.Update(cmd())
	if r := m.render(); !strings.Contains(r, "Acknowledged hung_runs.") {
		t.Errorf("no notice for an alert without a group:\n%s", r)
	}
	// A server without the route says so.
	a.ID = "a-404"
	_, cmd = m.Update(pages.AckAlert{Alert: a})
	m.Update(cmd())
	if !strings.Contains(m.render(), "Could not acknowledge batch_failures: POST /api/v1/alerts/a-404/ack: the server answered 404") {
		t.Errorf("no error notice:\n%s", m.render())
	}
}

// TestUnreachable: a server that is not there is said in a few words, by
// the stream and by the API alike.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ln := httptest.NewServer(http.NotFoundHandler())
	url := ln.URL
	ln.Close() // nothing listens there now
	_, err := dialStream(context.Background(), "ws"+strings.TrimPrefix(url, "http")+"/api/v1/stream", "", http.DefaultClient)
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach the server: ") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("stream: %v", err)
	}
	m, err := New(Options{Server: url, Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if msg := m.fetchMetrics()().(metricsMsg); msg.err == nil || !strings.HasPrefix(msg.err.Error(), "cannot reach "+url+": ") || !strings.Contains(msg.err.Error(), "refused") {
		t.Errorf("API: %v", msg.err)
	}
}

// TestOpenJobNotOnJobsTab: enter on the Health tab opens the job on the
// Jobs tab. A job the Jobs tab hides behind its filter is shown (the
// filter goes); a job with no run in the Jobs tab's window is not listed
// there, and the notice says so. Before, the Jobs tab opened on whatever
// job was selected before, its sparklines titled with that job's name,
// and nothing said that the job asked for was not there.
func TestOpenJobNotOnJobsTab(t *testing.T) {
	t.Parallel()
	m := newLoaded(t, 120, 40, true)
	m.tab = tabJobs
	for _, k := range []string{"/", "b", "a", "t", "enter"} {
		m.Update(keyMsg(k))
	}
	if got := m.jobs.Selected(); !strings.HasPrefix(got, "bat") {
		t.Fatalf("the filter selects %q", got)
	}
	m.tab = tabHealth
	m.Update(pages.OpenJob{Name: "cleanup_tmp"})
	if m.tab != tabJobs || m.jobs.Selected() != "cleanup_tmp" {
		t.Errorf("opened tab %d on %q, want the Jobs tab on cleanup_tmp", m.tab, m.jobs.Selected())
	}

	m.tab = tabHealth
	m.Update(pages.OpenJob{Name: "legacy_sync"})
	// The Jobs tab reads the jobs when it opens (TestJobsReadOnlyWhileTheirTabShows):
	// their answer says whether the job ran.
	var mp apiclient.MetricsPage
	if err := json.Unmarshal([]byte(fixtureMetrics), &mp); err != nil {
		t.Fatal(err)
	}
	m.Update(metricsMsg{page: mp})
	out := ansi.Strip(m.render())
	if m.tab != tabJobs || !strings.Contains(out, "legacy_sync had no run in the last 5m") {
		t.Errorf("opening a job with no run in the window does not say so:\n%s", out)
	}
}
