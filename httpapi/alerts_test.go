package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/rules"
)

// alertAPI is a server over a real alert engine whose one rule fires for
// batch_ jobs; the clock is fake and shared, so silences and acks have
// known times.
type alertAPI struct {
	srv   *httptest.Server
	eng   *alert.Engine
	clock *apollo.FakeClock
	saved map[string]string
	fail  error // SaveRules answers with it
}

func newAlertAPI(t *testing.T) *alertAPI {
	t.Helper()
	x := &alertAPI{clock: apollo.NewFakeClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)), saved: map[string]string{}}
	agg, _ := metrics.New(metrics.Options{Clock: x.clock, Logger: discardLogger})
	now := x.clock.Now().UnixMilli()
	prev := apollo.Task{TaskID: "r1", Name: "batch_a", Status: apollo.StatusRunning, StartedAt: now - 1000}
	next := prev
	next.Status, next.FinishedAt, next.CostMs = apollo.StatusFailed, now, 1000
	agg.Apply(&apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "r1", Status: apollo.StatusFailed, Ts: now}}, Prev: apollo.BeforeOf(&prev), Task: next})
	rs, err := rules.Parse("rules.txt", []byte(`RULE batch_failed task_prefix: "batch_" THRESHOLD: failed > 0 NOTIFY: ops LABELS: team=data`))
	if err != nil {
		t.Fatal(err)
	}
	x.eng, err = alert.New(alert.Options{Rules: rs, Store: agg, Sender: discardSender{}, Clock: x.clock, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.eng.Evaluate(context.Background(), x.clock.Now()); err != nil {
		t.Fatal(err)
	}
	x.srv = httptest.NewServer(New(Options{Bus: &nopBus{}, Clock: x.clock, Logger: discardLogger, Alerts: x.eng,
		Rules: rulebook.Book{Engine: x.eng, Known: func(_, name string) bool { return name == "ops" || name == "email" },
			Save: func(tenant string, src []byte) error {
				if x.fail != nil {
					return x.fail
				}
				x.saved[tenant] = string(src)
				return nil
			}}}))
	t.Cleanup(x.srv.Close)
	return x
}

// nopBus stands in for the bus: these routes never reach it.
type nopBus struct{ Bus }

func (x *alertAPI) do(t *testing.T, method, path, ctype, body string, out any) int {
	t.Helper()
	resp, b := send(t, method, x.srv.URL+path, ctype, body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type errAnswer struct {
	Error  apollo.Error            `json:"error"`
	Errors []apiclient.RuleProblem `json:"errors"`
}

func TestAlertsAckAndSilences(t *testing.T) {
	t.Parallel()
	x := newAlertAPI(t)
	var list struct{ Alerts []apiclient.Alert }
	if st := x.do(t, "GET", "/api/v1/alerts?state=firing", "", "", &list); st != 200 || len(list.Alerts) != 1 {
		t.Fatalf("firing: %d %+v", st, list)
	}
	a := list.Alerts[0]
	if a.Rule != "batch_failed" || a.Group != "batch_" || a.Summary != "failed 1 > 0 for batch_* over 1m" || len(a.SilencedBy) != 0 {
		t.Fatalf("alert %+v", a)
	}
	var bad errAnswer
	if st := x.do(t, "GET", "/api/v1/alerts?state=burning", "", "", &bad); st != 400 || bad.Error.Field != "state" {
		t.Fatalf("bad state: %d %+v", st, bad)
	}

	// A silence by label: the alert shows which silence holds it.
	var made struct{ Silence alert.Silence }
	st := x.do(t, "POST", "/api/v1/silences", "application/json", `{"labels":{"team":"data"},"duration":"2h","comment":"migration"}`, &made)
	if st != 201 || made.Silence.ID == "" || made.Silence.CreatedBy != "local" || !made.Silence.EndsAt.Equal(x.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("silence: %d %+v", st, made)
	}
	x.do(t, "GET", "/api/v1/alerts", "", "", &list)
	if len(list.Alerts) != 1 || len(list.Alerts[0].SilencedBy) != 1 || list.Alerts[0].SilencedBy[0] != made.Silence.ID {
		t.Fatalf("silenced alert %+v", list.Alerts)
	}
	for body, field := range map[string]string{
		`{"rule":"r","comment":"c"}`: "endsAt",
		`{"rule":"r","duration":"1h","endsAt":"2030-01-01T13:00:00Z","comment":"c"}`: "duration",
		`{"rule":"r","duration":"-1h","comment":"c"}`:                                "duration",
		`{"rule":"r","duration":"1h"}`:                                               "comment",
		`{"duration":"1h","comment":"c"}`:                                            "rule",
		`{"rule":"r","endsAt":"2029-01-01T00:00:00Z","comment":"c"}`:                 "endsAt",
		`{"rule":"r","duration":"1h","comment":"c","until":"x"}`:                     "",
		`{"rule":1}`: "",
	} {
		var e errAnswer
		if st := x.do(t, "POST", "/api/v1/silences", "application/json", body, &e); st != 400 || e.Error.Field != field {
			t.Errorf("%s: %d %+v, want 400 on %q", body, st, e.Error, field)
		}
	}
	var sils struct{ Silences []alert.Silence }
	if x.do(t, "GET", "/api/v1/silences", "", "", &sils); len(sils.Silences) != 1 {
		t.Fatalf("silences %+v", sils)
	}
	if st := x.do(t, "DELETE", "/api/v1/silences/"+made.Silence.ID, "", "", nil); st != 200 {
		t.Fatalf("delete: %d", st)
	}
	if st := x.do(t, "DELETE", "/api/v1/silences/"+made.Silence.ID, "", "", nil); st != 404 {
		t.Fatalf("delete again: %d", st)
	}

	// Ack: who and when; an unknown ID is 404.
	var acked struct{ Alert apiclient.Alert }
	if st := x.do(t, "POST", "/api/v1/alerts/"+a.ID+"/ack", "", "", &acked); st != 200 || acked.Alert.AckedBy != "local" || !acked.Alert.AckedAt.Equal(x.clock.Now()) {
		t.Fatalf("ack: %d %+v", st, acked)
	}
	if st := x.do(t, "POST", "/api/v1/alerts/nope/ack", "", "", nil); st != 404 {
		t.Fatalf("ack of an unknown alert: %d", st)
	}
}

func TestRulesGetAndPut(t *testing.T) {
	t.Parallel()
	x := newAlertAPI(t)
	type rulesAnswer struct {
		Rules  []apiclient.Rule
		Source string
	}
	var got rulesAnswer
	if st := x.do(t, "GET", "/api/v1/rules", "", "", &got); st != 200 || len(got.Rules) != 1 || got.Rules[0].Kind != "rate" ||
		!strings.Contains(got.Source, "RULE batch_failed") || !strings.Contains(string(got.Rules[0].JSON), `"taskPrefix":"batch_"`) {
		t.Fatalf("GET rules: %d %+v", st, got)
	}
	// A bad file: every problem with its place; nothing changes.
	src := "RULE slow task_prefix: \"etl_\" WINDOW: 15s\n  THRESHOLD: avg_cost > 1m NOTIFY: slack\n"
	var bad errAnswer
	if st := x.do(t, "PUT", "/api/v1/rules", "text/plain", src, &bad); st != 400 || len(bad.Errors) != 1 || bad.Error.Code != apollo.EINVALID {
		t.Fatalf("bad file: %d %+v", st, bad)
	}
	if p := bad.Errors[0]; p.Pos != "1:39" || p.Line != 1 || p.Col != 39 || !strings.HasPrefix(p.Message, "WINDOW 15s is not a multiple of 10s") || p.Hint == "" {
		t.Fatalf("problem %+v", p)
	}
	src = strings.Replace(src, "15s", "10m", 1)
	if st := x.do(t, "PUT", "/api/v1/rules", "text/plain", src, &bad); st != 400 || len(bad.Errors) != 1 || bad.Errors[0].Pos != "2:36" ||
		!strings.Contains(bad.Errors[0].Message, `unknown channel "slack"`) {
		t.Fatalf("unknown channel: %d %+v", st, bad)
	}
	if len(x.eng.Rules("")) != 1 || x.eng.Rules("")[0].Name != "batch_failed" || len(x.saved) != 0 {
		t.Fatal("a refused file changed the rules")
	}
	// Saving fails: the rules stay.
	src = strings.Replace(src, "slack", "email", 1)
	x.fail = errors.New("disk full")
	if st := x.do(t, "PUT", "/api/v1/rules", "text/plain", src, nil); st != 500 || x.eng.Rules("")[0].Name != "batch_failed" {
		t.Fatalf("failed save: %d", st)
	}
	x.fail = nil
	if st := x.do(t, "PUT", "/api/v1/rules", "text/plain", src, &got); st != 200 || len(got.Rules) != 1 || got.Rules[0].Name != "slow" || got.Source != src {
		t.Fatalf("PUT: %d %+v", st, got)
	}
	if x.saved[""] != src || x.eng.Rules("")[0].Name != "slow" {
		t.Fatalf("saved %q, rules %v", x.saved[""], x.eng.Rules(""))
	}
	// JSON works too; other types do not.
	if st := x.do(t, "PUT", "/api/v1/rules", "application/json", `[{"name":"j","taskPrefix":"","on":["failed"]}]`, &got); st != 200 || got.Rules[0].Kind != "event" {
		t.Fatalf("JSON PUT: %d %+v", st, got)
	}
	if st := x.do(t, "PUT", "/api/v1/rules", "application/xml", `<rules/>`, nil); st != 415 {
		t.Fatalf("xml: %d", st)
	}
}

func TestAlertRoutesWithoutEngine(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New(Options{Bus: &nopBus{}, Logger: discardLogger}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("%d, want 503", resp.StatusCode)
	}
}

// FuzzDecodeSilence: no body panics the decoder, and an accepted one has
// an end, after its start when it has one.
func FuzzDecodeSilence(f *testing.F) {
	for _, s := range []string{
		`{"rule":"r","duration":"2h","comment":"c"}`,
		`{"prefix":"batch_","labels":{"team":"data"},"startsAt":"2030-01-01T12:00:00Z","endsAt":"2030-01-01T14:00:00Z","comment":"c"}`,
		`{"rule":"r","duration":"1h","endsAt":"2030-01-01T13:00:00Z"}`, `{"duration":"9999999h"}`, `{"labels":null}`, `[]`, `{}{}`, `{"startsAt":"x"}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSilence(b, now)
		if err != nil {
			var ae *apollo.Error
			if !errors.As(err, &ae) || ae.Code != apollo.EINVALID {
				t.Fatalf("error %v is not invalid input", err)
			}
			return
		}
		if s.EndsAt.IsZero() || (!s.StartsAt.IsZero() && s.EndsAt.Before(s.StartsAt)) {
			t.Fatalf("accepted %+v", s)
		}
	})
}
