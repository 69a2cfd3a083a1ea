package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/notify/webhook"
)

// steadyDays is a run of the job steady_job every 10 minutes over the
// last 46 hours, as NDJSON: the same number of runs in every hour.
func steadyDays(now time.Time) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for i := range 46 * 6 {
		enc.Encode(apollo.Event{TaskID: "steady-" + strconv.Itoa(i), Name: "steady_job", Sequence: 1,
			Status: apollo.StatusSuccess, Ts: now.Add(-time.Duration(i)*10*time.Minute - 5*time.Second).UnixMilli(), CostMs: 1000})
	}
	return b.String()
}

// A day-over-day rule reads the day before from the metrics that
// retention.rollups keeps, in the all-in-one server and in the alert
// process alike. Before, the alert process read Redis as if the bus kept
// the default 24 hours, whatever retention the bus wrote with: with
// retention.rollups: 48h the day before read as empty there, so the rule
// fired in the server and never in the three processes.
func TestDayOverDayRuleInEveryMode(t *testing.T) {
	const rule = `RULE same_as_yesterday task_prefix: "steady_" WINDOW: 24h` +
		` THRESHOLD: pct_change(count) > -50% and pct_change(count) < 50% NOTIFY: hook` + "\n"
	setup := func(t *testing.T, dir, cfg string) string {
		t.Helper()
		f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("retention:\n  rollups: 48h\n"); err != nil {
			t.Fatal(err)
		}
		rules := filepath.Join(dir, "day.txt")
		if err := os.WriteFile(rules, []byte(rule), 0o644); err != nil {
			t.Fatal(err)
		}
		return rules
	}
	check := func(t *testing.T, addr string, h *hook) {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/api/v1/events", "application/x-ndjson", strings.NewReader(steadyDays(time.Now())))
		if err != nil {
			t.Fatal(err)
		}
		var ans struct{ Accepted int }
		json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if ans.Accepted != 46*6 {
			t.Fatalf("%d runs accepted, want %d", ans.Accepted, 46*6)
		}
		p := h.await(t, 30*time.Second, "same_as_yesterday", func(p webhook.ApolloPayload) bool {
			return p.Alert.Rule == "same_as_yesterday" && p.Kind == apollo.NotifyFiring
		})
		// 144 runs today, 132 in the 22 hours of yesterday that exist.
		if p.Alert.Value < 0.05 || p.Alert.Value > 0.15 {
			t.Errorf("fired with a change of %v, want about +9%% (144 runs against 132)", p.Alert.Value)
		}
	}

	t.Run("server", func(t *testing.T) {
		endToEnd(t)
		h := newHook(t)
		dir := writeScenario(t, h.srv.URL, "", "")
		cfg := filepath.Join(dir, "apollo.yaml")
		rules := setup(t, dir, cfg)
		srv := startApollo(t, "server", "--config", cfg, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--rules", rules)
		check(t, srv.addr, h)
	})
	t.Run("three processes", func(t *testing.T) {
		h, dir, cfg := threeProcesses(t, "day")
		rules := setup(t, dir, cfg)
		bus := startScenarioBus(t, dir, cfg)
		startProc(t, "apollo alert ", "alert", "--config", cfg, "--rules", rules)
		check(t, bus.addr, h)
	})
}

// A rule that reads further back than the metrics are kept is refused
// with its place, in both modes, and the rules before it keep running.
// Before, PUT /api/v1/rules (and the rules file, and apollo rules check)
// took a pct_change over 18h with the default day of metrics: it
// compared 18 hours with the 6 of the 18 before them that remain, and
// fired on steady traffic (+203% for a run every 10 minutes).
func TestRulesReadingPastTheMetricsAreRefused(t *testing.T) {
	const (
		good = `RULE half_day task_prefix: "steady_" WINDOW: 12h THRESHOLD: pct_change(count) < -50%` + "\n"
		bad  = "RULE long_day task_prefix: \"steady_\"\n  WINDOW: 18h THRESHOLD: pct_change(count) < -50%\n"
	)
	check := func(t *testing.T, addr string) {
		t.Helper()
		ctx := testCtx(t, 30*time.Second)
		c, err := apiclient.New("http://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutRules(ctx, []byte(good), apiclient.RulesText); err != nil {
			t.Fatalf("a 12h pct_change with a day kept: %v", err)
		}
		_, err = c.PutRules(ctx, []byte(bad), apiclient.RulesText)
		var ae *apiclient.Error
		if !isProblem(err, "2:11") || !errors.As(err, &ae) ||
			!strings.Contains(ae.Problems[0].Message, "reads 36h back, but the metrics are kept 24h (expected a WINDOW of at most 12h)") {
			t.Fatalf("an 18h pct_change with a day kept: %v, want a problem at 2:11", err)
		}
		eventually(t, 30*time.Second, "the rules before the refused file", func() bool {
			rs, err := c.Rules(ctx)
			return err == nil && len(rs.Rules) == 1 && rs.Rules[0].Name == "half_day"
		})
	}
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		addr, _, _ := inProcess(t, testConfig(t))
		check(t, addr)
	})
	t.Run("three processes", func(t *testing.T) {
		_, dir, cfg := threeProcesses(t, "reach")
		bus := startScenarioBus(t, dir, cfg)
		startProc(t, "apollo alert ", "alert", "--config", cfg)
		check(t, bus.addr)
	})
}
