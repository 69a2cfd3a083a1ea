package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/sched"
)

// The demo's embedded files are valid, and every rule's channels exist.
func TestDemoFilesParse(t *testing.T) {
	t.Parallel()
	if _, err := sched.Parse("demo/jobs.yaml", demoJobs); err != nil {
		t.Fatalf("demo jobs: %v", err)
	}
	rs, err := rules.Parse("demo/rules.txt", demoRules)
	if err != nil {
		t.Fatalf("demo rules: %v", err)
	}
	if err := rules.CheckChannels(rs, func(n string) bool { return slices.Contains([]string{"console", "dingtalk", "email"}, n) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 {
		t.Errorf("%d rules", len(rs))
	}
	if _, err := expect.Parse("demo/expectations.yaml", demoExpectations); err != nil {
		t.Fatalf("demo expectations: %v", err)
	}
}

// The demo's channels print to one terminal: a message is one line that
// names its channel, so that a few minutes of alerts do not scroll the
// banner away (issue 21).
func TestDemoConsoleIsOneLineAChannel(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	if _, _, err := setUpDemo(&cfg); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	d, err := buildDispatcher(cfg, apollo.SystemClock, slog.New(slog.DiscardHandler), &out, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"console", "dingtalk", "email"} {
		out.Reset()
		if _, err := d.Test(context.Background(), ch); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^\d\d:\d\d:\d\d ` + ch + `: \[TEST\] [^\n]+\n$`).MatchString(out.String()) {
			t.Errorf("channel %s printed %q, want one line naming it", ch, out.String())
		}
	}
}

// apollo demo shows runs, metrics and a firing alert within a minute or so.
func TestDemoShowsAFiringAlert(t *testing.T) {
	if testing.Short() {
		t.Skip("demo: skipped with -short")
	}
	t.Parallel()
	demo := startApollo(t, "demo", "--listen", "127.0.0.1:0", "--data", t.TempDir())
	// On failure, what the demo saw: its alerts, the batch jobs' figures
	// and the end of its log (read once the process has exited).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var alerts, figures json.RawMessage
		apiGet(t, demo.addr, "/api/v1/alerts", &alerts)
		apiGet(t, demo.addr, "/api/v1/metrics?window=1m&prefix=batch_", &figures)
		demo.kill()
		out := demo.out.String()
		t.Logf("alerts: %s\nbatch figures (1m): %s\nthe demo's log, last 4 KiB:\n%s", alerts, figures, out[max(0, len(out)-4096):])
	})
	eventually(t, 30*time.Second, "demo runs", func() bool {
		var tasks struct{ Tasks []apollo.Task }
		apiGet(t, demo.addr, "/api/v1/tasks?prefix=etl_extract", &tasks)
		return len(tasks.Tasks) > 0
	})
	eventually(t, 30*time.Second, "demo metrics", func() bool {
		var m struct{ Jobs []struct{ Name string } }
		apiGet(t, demo.addr, "/api/v1/metrics?window=5m", &m)
		return len(m.Jobs) >= 3
	})
	eventually(t, 90*time.Second, "a firing alert", func() bool { return firing(t, demo.addr, "batch_failing") != nil })
	// The backup that never runs is missed, and the failures below it are
	// held as its echoes.
	eventually(t, 90*time.Second, "a missed run", func() bool {
		var tasks struct{ Tasks []apollo.Task }
		apiGet(t, demo.addr, "/api/v1/tasks?prefix=missed:backup_nightly@", &tasks)
		return len(tasks.Tasks) > 0 && tasks.Tasks[0].Late
	})
	eventually(t, 90*time.Second, "an inhibited alert", func() bool {
		var l alertList
		apiGet(t, demo.addr, "/api/v1/alerts?state=firing", &l)
		return slices.ContainsFunc(l.Alerts, func(a apollo.Alert) bool {
			return a.Rule == "backup_trouble" && slices.Equal(a.InhibitedBy, []string{"backup_nightly"})
		})
	})
}

// The first line a newcomer saw from apollo demo was a warning that every
// local user could read the data directory, about the sample files the
// demo had just written there itself (0644 under the usual umask): a
// warning about nothing they did, with a chmod to run. The demo's files
// are now its user's alone, like everything else in the data directory,
// and the demo starts without the warning, in a directory it makes (the
// default, and a new --data) as in one that was there.
func TestDemoStartsWithoutWarningAboutItsOwnFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("demo: skipped with -short")
	}
	t.Parallel()
	for _, tc := range []struct {
		name string
		data func(dir string) string // "" for the default, a temporary directory
	}{
		{"default", func(string) string { return "" }},
		{"new --data", func(dir string) string { return filepath.Join(dir, "demo-data") }},
		{"existing private --data", func(dir string) string { os.Chmod(dir, 0o700); return dir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := []string{os.Args[0], "demo", "--listen", "127.0.0.1:0"}
			data := tc.data(dir)
			if data != "" {
				args = append(args, "--data", data)
			}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = []string{"TMPDIR=" + dir}
			demo := startCmd(t, cmd, apiclient.ReadyPrefix)
			if data == "" {
				made, _ := filepath.Glob(filepath.Join(dir, "apollo-demo-*"))
				if len(made) != 1 {
					t.Fatalf("temporary data directories in TMPDIR: %q", made)
				}
				data = made[0]
			}
			files, _ := filepath.Glob(filepath.Join(data, "demo-*"))
			if len(files) != 3 {
				t.Errorf("sample files in %s: %q, want jobs, rules and expectations", data, files)
			}
			for _, f := range files {
				if fi, err := os.Stat(f); err != nil || fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s: %v %v, want the user's alone", f, fi.Mode(), err)
				}
			}
			demo.kill()
			if out := demo.out.String(); strings.Contains(out, "every local user can read") {
				t.Errorf("the demo warned about its own files:\n%s", out)
			}
		})
	}
}
