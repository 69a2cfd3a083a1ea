// Command alertmanager runs Prometheus Alertmanager and Apollo-11 side by
// side on the same storm: 300 jobs fail at once.
//
// Alertmanager gets the 300 alerts in one POST to /api/v2/alerts, routed
// by alertname to a webhook, once with group_wait 1s and once with its
// default (30s). Apollo-11 gets the 300 failures in one POST of events,
// with an event rule (`ON: failed`, GROUP_WINDOW 1s) notifying a webhook
// channel. Both webhooks point at one HTTP server in this command, which
// takes the time each notification arrives. A fresh process serves each
// storm. Reported: the time from sending the storm to the first
// notification, and, for Apollo-11, to the follow-up that counts the rest
// (its first notification is the first failure alone; Alertmanager's
// first carries the alerts that arrived within group_wait).
//
//	go run ./cmd/alertmanager -repeat 3 -alerts 300
//	go run ./cmd/alertmanager -short   # group_wait 1s only; the peer only if built already
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/bench/internal/peer"
)

// setting is one Alertmanager configuration measured.
type setting struct {
	name      string
	groupWait string // "" for its default
}

func main() {
	n := flag.Int("alerts", 300, "failures in the storm (alerts posted at once)")
	repeat := flag.Int("repeat", 3, "storms per system and setting")
	am := flag.String("alertmanager", "", "Alertmanager binary to run; empty: $APOLLO_ALERTMANAGER, else build "+peer.Alertmanager.Module+"@"+peer.Alertmanager.Version)
	bin := flag.String("apollo", "", "apollo binary to measure; empty: build ./cmd/apollo of this repository")
	short := flag.Bool("short", false, "smoke run: one storm each, group_wait 1s only (not the 30 s default); Alertmanager only if already built")
	flag.Parse()
	settings := []setting{{"`group_wait: 1s`", "1s"}, {"default `group_wait` (30s)", ""}}
	command := fmt.Sprintf("go run ./cmd/alertmanager -repeat %d -alerts %d", *repeat, *n)
	if *short {
		*repeat, settings, command = 1, settings[:1], "go run ./cmd/alertmanager -short"
	}
	ctx := context.Background()
	apolloBin, cleanup, err := harness.BuildIfEmpty(ctx, *bin, "alertmanager")
	check(err)
	defer cleanup()
	fmt.Fprintln(os.Stderr, "alertmanager: getting Alertmanager (a first build takes minutes)")
	amBin, amErr := peer.Get(ctx, peer.Alertmanager, *am, !*short)
	if amErr != nil {
		fmt.Fprintln(os.Stderr, "alertmanager:", amErr)
	}
	sink, err := harness.NewSink()
	check(err)
	defer sink.Close()

	load0 := harness.LoadAvg()
	amFirst := make([][]float64, len(settings))
	amCarried := make([][]float64, len(settings))
	var first, told, all, posted []float64
	for rep := range *repeat {
		for i, st := range settings {
			if amErr != nil {
				break
			}
			d, k, err := stormAM(amBin.Path, sink, st.groupWait, *n)
			check(err)
			amFirst[i], amCarried[i] = append(amFirst[i], d.Seconds()), append(amCarried[i], float64(k))
			fmt.Fprintf(os.Stderr, "alertmanager: repeat %d/%d, Alertmanager %s: first notification after %v, %d alerts in it\n", rep+1, *repeat, st.name, d, k)
		}
		s, err := stormApollo(apolloBin, sink, *n)
		check(err)
		first, told, all = append(first, s.first.Seconds()), append(told, float64(s.told)), append(all, s.all.Seconds())
		posted = append(posted, s.post.Seconds())
		fmt.Fprintf(os.Stderr, "alertmanager: repeat %d/%d, Apollo-11: POST answered after %v, first notification after %v, all %d counted after %v\n", rep+1, *repeat, s.post, s.first, *n, s.all)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "## Peer: Prometheus Alertmanager\n\nCommand: `%s`\n\n", command)
	fmt.Fprintf(&b, "A storm: %d jobs fail at once. **Alertmanager** gets %d firing alerts (one per job, all with `alertname: BatchJobFailed`) "+
		"in one `POST /api/v2/alerts`, routed with `group_by: [alertname]` to a webhook (`send_resolved: false`); one process, clustering off. "+
		"**Apollo-11** (`apollo server`, defaults) gets the %d runs' `running` events first, then their `failed` events in one POST, "+
		"with one event rule `RULE batch_failed task_prefix: \"load_job_\" ON: failed GROUP_WINDOW: %s NOTIFY: hook` and a `webhook` channel. "+
		"Both webhooks point at one HTTP server in this command. Measured from sending the storm (the POST of the alerts, or of the failures) "+
		"to the notification's arrival at that server. A fresh process per storm, %d storm(s) per row, median and spread. "+
		"Apollo-11's first notification is the first failure on its own, told at once; the follow-up at the end of the group window counts the "+
		"rest. Alertmanager's first notification carries every alert of the group that arrived within `group_wait`. "+
		"Load average before the run %s, after it %s (%d cores, shared with other work).\n\n",
		*n, *n, *n, groupWindow, *repeat, load0, harness.LoadAvg(), runtime.NumCPU())
	if amErr != nil {
		fmt.Fprintf(&b, "**Alertmanager was not run: %s.** Apollo-11's side is below on its own.\n\n", oneLine(amErr))
	} else {
		fmt.Fprintf(&b, "Alertmanager: `%s`, %s.\n\n", amBin.Version, amBin.From)
	}
	fmt.Fprintln(&b, "| system | setting | storm → first notification (median, min–max) | failures in it | storm → all counted |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	fm, flo, fhi := harness.Median(first)
	am1, alo, ahi := harness.Median(all)
	tm, _, _ := harness.Median(told)
	fmt.Fprintf(&b, "| Apollo-11 | event rule, `GROUP_WINDOW: %s` | %s (%s–%s) | %.0f | %s (%s–%s) |\n", groupWindow, secs(fm), secs(flo), secs(fhi), tm, secs(am1), secs(alo), secs(ahi))
	for i, st := range settings {
		if len(amFirst[i]) == 0 {
			continue
		}
		m, lo, hi := harness.Median(amFirst[i])
		k, klo, _ := harness.Median(amCarried[i])
		all := "the same (all in the first)"
		if klo < float64(*n) {
			all = "not measured: some storms needed a later notification"
		}
		fmt.Fprintf(&b, "| Alertmanager | %s | %s (%s–%s) | %.0f | %s |\n", st.name, secs(m), secs(lo), secs(hi), k, all)
	}
	pm, plo, phi := harness.Median(posted)
	fmt.Fprintf(&b, "\nApollo-11 answered the POST of the %d failures after %s (median, %s–%s), about when its first notification arrived: "+
		"the time to it is mostly that request's own (decoding, logging and applying 300 events on a shared machine).\n", *n, secs(pm), secs(plo), secs(phi))
	if amErr == nil {
		for i, st := range settings {
			m, _, _ := harness.Median(amFirst[i])
			fmt.Fprintf(&b, "With %s, Alertmanager's first notification took %s as long as Apollo-11's (%s vs %s).\n", st.name, times(m/fm), secs(m), secs(fm))
		}
	}
	fmt.Print(b.String())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "alertmanager:", err)
		os.Exit(1)
	}
}

// jobName is job i's name on both sides (as harness.AppendEvent names it).
func jobName(i int) string { return "load_job_" + strconv.Itoa(i) }

func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func secs(s float64) string { return harness.Round(time.Duration(s * float64(time.Second))).String() }

func times(f float64) string {
	if f >= 100 {
		return fmt.Sprintf("%.0f×", f)
	}
	return fmt.Sprintf("%.1f×", f)
}
