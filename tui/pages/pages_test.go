package pages

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

func TestParseSilenceDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"1h", time.Hour, ""},
		{" 90m ", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"2d", 48 * time.Hour, ""},
		{"366d", 366 * 24 * time.Hour, ""},
		{"367d", 0, "at most a year"},
		{"99999999999999d", 0, "at most a year"},
		{"0s", 0, "positive"},
		{"-1h", 0, "positive"},
		{"", 0, "not a duration"},
		{"d", 0, "not a duration"},
		{"soon", 0, "not a duration"},
	}
	for _, tt := range tests {
		got, err := ParseSilenceDuration(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: err %v, want one saying %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%q = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func env() Env {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return Env{Styles: components.NewStyles(true), Now: func() time.Time { return now }}
}

// TestNotAvailable: a server without the metrics, alert or silence routes
// (404) gets a sentence saying so, not an error.
func TestNotAvailable(t *testing.T) {
	t.Parallel()
	gone := &apollo.Error{Code: apollo.ENOTFOUND, Message: "not found"}
	broken := errors.New("connection refused")

	j := NewJobs(env())
	j.SetSize(80, 20)
	j.SetJobs("", apiclient.JobRow{}, nil, gone)
	if v := ansi.Strip(j.View()); !strings.Contains(v, "not available on this server") {
		t.Errorf("jobs on a server without metrics: %q", v)
	}
	j2 := NewJobs(env())
	j2.SetSize(80, 20)
	j2.SetJobs("", apiclient.JobRow{}, nil, broken)
	if v := ansi.Strip(j2.View()); !strings.Contains(v, "Could not load the job metrics: connection refused") {
		t.Errorf("jobs when the API fails: %q", v)
	}

	a := NewAlerts(env())
	a.SetSize(80, 20)
	a.SetListed(nil, gone)
	a.SetSilences(nil, gone)
	v := ansi.Strip(a.View())
	for _, want := range []string{"This server cannot list past alerts; new ones appear here live.", "Silences are not available on this server."} {
		if !strings.Contains(v, want) {
			t.Errorf("alerts view lacks %q:\n%s", want, v)
		}
	}
	// An alert from the stream still shows.
	a.Upsert(apollo.Alert{ID: "x", Rule: "r1", Group: "g", State: apollo.AlertFiring, Summary: "s"})
	if v := ansi.Strip(a.View()); !strings.Contains(v, "r1") || a.Firing() != 1 {
		t.Errorf("a streamed alert is missing:\n%s", v)
	}
}

// TestAlertsBounded: the page keeps MaxAlerts, dropping the oldest
// resolved ones first.
func TestAlertsBounded(t *testing.T) {
	t.Parallel()
	a := NewAlerts(env())
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var listed []apollo.Alert
	for i := range MaxAlerts + 50 {
		listed = append(listed, apollo.Alert{ID: fmt.Sprintf("r%d", i), State: apollo.AlertResolved, ResolvedAt: base.Add(time.Duration(i) * time.Minute)})
	}
	a.SetListed(listed, nil)
	if len(a.byID) != MaxAlerts {
		t.Fatalf("holding %d alerts after the listing", len(a.byID))
	}
	a.Upsert(apollo.Alert{ID: "firing", State: apollo.AlertFiring, StartedAt: base})
	if len(a.byID) != MaxAlerts {
		t.Fatalf("holding %d alerts", len(a.byID))
	}
	if _, ok := a.byID["firing"]; !ok {
		t.Error("the firing alert was dropped")
	}
	if a.shown[0].ID != "firing" {
		t.Errorf("first alert %s, want the firing one", a.shown[0].ID)
	}
	for i := range 50 { // the 50 oldest resolved ones went
		if _, ok := a.byID[fmt.Sprintf("r%d", i)]; ok {
			t.Fatalf("r%d kept", i)
		}
	}
}
