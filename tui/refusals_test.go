package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// burst posts n new runs with token in one request and returns how many
// the server answered retry_later, as its answer counts them.
func (ls *liveServer) burst(token, prefix string, n int) int {
	ls.t.Helper()
	evs := make([]apollo.Event, n)
	for i := range evs {
		evs[i] = ev(fmt.Sprintf("%s-%d", prefix, i), prefix, 1, apollo.StatusRunning, 0)
	}
	body, _ := json.Marshal(evs)
	req, _ := http.NewRequest(http.MethodPost, ls.srv.URL+"/api/v1/events", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ls.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct{ Accepted, RetryLater int }
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || ans.Accepted+ans.RetryLater != n {
		ls.t.Fatalf("the answer to %d events (HTTP %d): %+v %v", n, resp.StatusCode, ans, err)
	}
	return ans.RetryLater
}

// TestRefusalsAsTheServerCountsThem: after a burst in which the server
// refuses another tenant's events (over its share of tasks), the System
// tab of acme shows the server's own count of refusals, the sum of the
// answers' retryLater, and the count of accepted events, not figures of
// its own making.
func TestRefusalsAsTheServerCountsThem(t *testing.T) {
	t.Parallel()
	ls := newLiveServerOf(t, nil, func(o *bus.Options) { o.TenantTasks = map[string]int{"globex": 5} })
	m, err := New(Options{Server: ls.srv.URL, Token: "acme-view", Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	w := watch(m)
	tm := teatest.NewTestModel(t, w, teatest.WithInitialTermSize(120, 40))
	w.untilText(t, "● live")
	refused := ls.burst("globex-agent", "globex_load", 40) + ls.burst("acme-agent", "acme_load", 10)
	if refused != 35 {
		t.Fatalf("the server answered %d events retry_later, want globex's 35", refused)
	}
	s := ls.bus.Stats()
	if s.Refused != int64(refused) || s.Accepted != 15 {
		t.Fatalf("the bus counts %d refused and %d accepted; the answers said %d and 15", s.Refused, s.Accepted, refused)
	}
	tm.Send(keyMsg("5"))
	// The bus's row of counters (the stream's has its own "refused").
	counter := func(name string, n int64) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^(.* )?` + name + ` +` + strconv.FormatInt(n, 10) + `( |$)`)
	}
	w.until(t, "the server's counts on the System tab", func(sc screen) bool {
		return sc.tab == tabSystem && counter("refused", s.Refused).MatchString(sc.text) && counter("accepted", s.Accepted).MatchString(sc.text)
	})
}
