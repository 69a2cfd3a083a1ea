package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
	"github.com/apollo-11/apollo/rules"
)

// setOnlyEngine is an alert engine that keeps nothing: what a rules
// command costs is then the alert process's own part.
type setOnlyEngine struct{ set map[string]int }

func (setOnlyEngine) Alerts(string, apollo.AlertState) []apollo.Alert   { return nil }
func (setOnlyEngine) Ack(context.Context, string, string, string) error { return nil }
func (setOnlyEngine) AddSilence(string, alert.Silence) (alert.Silence, error) {
	return alert.Silence{}, nil
}
func (setOnlyEngine) RemoveSilence(string, string) error        { return nil }
func (setOnlyEngine) SelfAlert(string, apollo.Severity, string) {}
func (e setOnlyEngine) SetRulesSource(tenant string, rs []*rules.Rule, _ []byte) {
	e.set[tenant] = len(rs)
}

// allocated is the bytes f allocates, the least of three runs.
func allocated(f func()) uint64 {
	least := ^uint64(0)
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// An alert process parses a rules file the bus sends once: the bus has
// checked it already, and each parse of a big file costs about thirty
// times its size. Before, it was parsed by the command's handler, and
// again by the save that checks it against the process's channels.
func TestARulesCommandIsParsedOnce(t *testing.T) {
	c, prefix := redistest.Client(t)
	cfg := config.Default()
	cfg.Channels = map[string]map[string]any{"ops": {"type": "console", "tenants": []any{"acme", "globex"}}}
	disp, err := buildDispatcher(cfg, apollo.SystemClock, slog.New(slog.DiscardHandler), &strings.Builder{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newAlertProcess(cfg, c, slog.New(slog.DiscardHandler), apollo.SystemClock)
	p.disp, p.rules = disp, redisstore.NewRules(c, prefix)
	eng := setOnlyEngine{set: map[string]int{}}
	for _, tenant := range tenants {
		var b strings.Builder
		for i := range 2000 {
			fmt.Fprintf(&b, "RULE r%05d task_prefix: \"%s_%05d_\" WINDOW: 5m THRESHOLD: failed_rate > 5%% NOTIFY: ops\n", i, tenant, i)
		}
		src := b.String()
		parse := allocated(func() {
			if _, err := rules.Parse("rules", []byte(src)); err != nil {
				t.Fatal(err)
			}
		})
		handle := allocated(func() {
			rep := redisstore.HandleCommand(t.Context(), eng, redisstore.Command{Op: "rules.set", Tenant: tenant, Rules: src}, p.saveRules, p.log)
			if rep.Err != nil {
				t.Fatal(rep.Err)
			}
		})
		if eng.set[tenant] != 2000 {
			t.Fatalf("tenant %s: %d rules set, want 2000", tenant, eng.set[tenant])
		}
		if handle > parse*3/2 {
			t.Errorf("tenant %s: the command allocated %d bytes, %.1f× one parse of the file (%d): parsed more than once", tenant, handle, float64(handle)/float64(parse), parse)
		}
	}
}
