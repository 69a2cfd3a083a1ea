package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/metrics"
)

// GET /api/v1/alerts answers at most maxAlertRows alerts, firing and
// newest first, and how many there are: a rule with BY: name fires an
// alert per job, and with 50 000 failing jobs the answer was 13.7 MB,
// each alert also matched against every silence of the tenant (at a
// million jobs, 275 MB and a billion matches for one viewer's request).
// Tenant a has one alert more than the bound; tenant b three, read 2 at
// a time.
func TestAlertsAnswerIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var stored []alert.StoredAlert
	add := func(tenant string, n int) {
		for i := range n {
			stored = append(stored, alert.StoredAlert{Alert: apollo.Alert{ID: fmt.Sprintf("%s-%06d", tenant, i), Tenant: tenant, Rule: "r",
				Group: fmt.Sprintf("job%06d", i), State: apollo.AlertFiring, StartedAt: now.Add(time.Duration(i) * time.Millisecond), FiredAt: now}, FiringSent: true})
		}
	}
	add("a", maxAlertRows+1)
	add("b", 3)
	state := alert.NewMemoryState()
	if err := state.Save(context.Background(), alert.State{Alerts: stored}); err != nil {
		t.Fatal(err)
	}
	agg, _ := metrics.New(metrics.Options{Logger: discardLogger})
	eng, err := alert.New(alert.Options{Store: agg, Sender: discardSender{}, State: state, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	auth, tokens := tenantTokens(t, RoleViewer)
	b, _ := newMeteredBus(t)
	for mode, alerts := range map[string]AlertEngine{"engine": eng, "read from Redis": savedOrder{eng}} {
		srv := httptest.NewServer(New(Options{Bus: b, Alerts: alerts, Auth: auth, Logger: discardLogger}))
		t.Cleanup(srv.Close)
		t.Run(mode, func(t *testing.T) { checkAlertPages(t, srv.URL, tokens) })
	}
}

// savedOrder lists the alerts oldest first, as the bus of the three
// processes reads them from Redis (redisstore.RemoteAlerts).
type savedOrder struct{ *alert.Engine }

func (s savedOrder) ReadAlerts(tenant string, state apollo.AlertState) ([]apollo.Alert, []apollo.Silence, error) {
	as := s.Alerts(tenant, state)
	slices.Reverse(as)
	return as, s.Silences(tenant), nil
}

func checkAlertPages(t *testing.T, url string, tokens map[string]string) {
	get := func(tenant, query string) apiclient.AlertList {
		t.Helper()
		status, body := callAs(t, "GET", url+"/api/v1/alerts"+query, tokens["viewer/"+tenant], "")
		if status != 200 {
			t.Fatalf("tenant %s %s: %d %.300s", tenant, query, status, body)
		}
		var l apiclient.AlertList
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	all := get("a", "")
	if len(all.Alerts) != maxAlertRows || all.Total != maxAlertRows+1 || all.Alerts[0].ID != fmt.Sprintf("a-%06d", maxAlertRows) {
		t.Errorf("tenant a: %d alerts of %d, the first %s; want %d of %d, the newest first", len(all.Alerts), all.Total, all.Alerts[0].ID, maxAlertRows, maxAlertRows+1)
	}
	two := get("b", "?limit=2")
	if len(two.Alerts) != 2 || two.Total != 3 || two.Alerts[0].ID != "b-000002" || two.Alerts[1].ID != "b-000001" {
		t.Errorf("tenant b, limit 2: %+v, want its two newest of 3", two)
	}
	if l := get("b", ""); len(l.Alerts) != 3 || l.Total != 3 {
		t.Errorf("tenant b: %d alerts of %d, want its 3", len(l.Alerts), l.Total)
	}
}
