package main

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/config"
)

//go:embed demo/jobs.yaml
var demoJobs []byte

//go:embed demo/rules.txt
var demoRules []byte

//go:embed demo/expectations.yaml
var demoExpectations []byte

func newDemoCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a server with sample jobs, rules and notifications, to look around",
		Long: `Start the all-in-one server with the scheduler running sample jobs (some
succeed, one fails often, one hangs until its timeout), a legacy cron that
starts late, a backup expected every 30 s that never runs (missed, and
the failures it causes held as its echoes), sample alert rules (the seed's among them) and channels that
print to this terminal, one line a message naming its channel. Open the
dashboard it prints; an alert fires within a minute. Ctrl-C stops it
cleanly.

The data directory is temporary unless --data is given. A demo that
fails to start takes back the sample files it wrote there.`,
		Example: `  apollo demo
  apollo demo --listen 127.0.0.1:8080 --data ./demo-data`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load(cmd)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("data") && f.configFile == "" {
				dir, err := os.MkdirTemp("", "apollo-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				cfg.Data = dir
			}
			made, written, err := setUpDemo(&cfg)
			if err != nil {
				undoDemo(made, written)
				return err
			}
			out := cmd.OutOrStdout()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			started := false // ready runs on this goroutine, before serving
			err = runServer(ctx, cfg, serverDeps{log: log, out: out, ready: func(addr string) {
				started = true
				fmt.Fprintf(out, `
  Dashboard:  http://%[1]s
  Terminal:   apollo tui --server http://%[1]s
  API:        curl -s http://%[1]s/api/v1/metrics | head
  Jobs:       %[2]s    Rules: %[3]s
  Expectations: %[4]s (a backup that never runs: missed, and the
              failures it causes held as "inhibited by backup_nightly")

  Notifications print below, one line each, naming the channel they are
  for; the dashboard shows each alert whole, with its history. Ctrl-C to stop.

`, addr, cfg.Jobs, cfg.Rules, cfg.Expectations)
				go legacyCron(ctx, "http://"+addr)
			}})
			if err != nil && !started {
				undoDemo(made, written)
			}
			return err
		},
	}
	f.register(cmd, "(default: a temporary directory, removed when the demo stops; with --config, the file's data:)")
	return cmd
}

// setUpDemo writes the sample jobs, rules and expectations into the data directory and
// adds channels that print to the terminal. It returns the directory it
// made ("" when the data directory was there) and the files it wrote, for
// undoDemo.
func setUpDemo(cfg *config.Config) (made string, written []string, err error) {
	if made, err = makeDataDir(cfg.Data); err != nil {
		return "", nil, fmt.Errorf("data directory %s: %w (choose another --data that this user can write)", cfg.Data, err)
	}
	write := func(name string, body []byte) (string, error) {
		p := filepath.Join(cfg.Data, name)
		// The user's alone, as everything the server makes in the data
		// directory: group or other bits would set off its warning
		// that the directory is open (warnOpenDataDir).
		if err := os.WriteFile(p, body, 0o600); err != nil {
			return "", err
		}
		written = append(written, p)
		return p, nil
	}
	if cfg.Jobs == "" {
		if cfg.Jobs, err = write("demo-jobs.yaml", demoJobs); err != nil {
			return made, written, err
		}
	}
	if cfg.Rules == "" {
		if cfg.Rules, err = write("demo-rules.txt", demoRules); err != nil {
			return made, written, err
		}
	}
	if cfg.Expectations == "" {
		if cfg.Expectations, err = write("demo-expectations.yaml", demoExpectations); err != nil {
			return made, written, err
		}
	}
	if cfg.Channels == nil {
		cfg.Channels = map[string]map[string]any{}
	}
	// The dingtalk and email of the sample rules print here too, a line a
	// message: the terminal stays readable for the banner above.
	for _, name := range []string{"console", "dingtalk", "email"} {
		if _, ok := cfg.Channels[name]; !ok {
			cfg.Channels[name] = map[string]any{"type": "console", "body": "line"}
		}
	}
	cfg.Alert.Interval = config.Duration(5 * time.Second)
	return made, written, nil
}

// undoDemo takes back what setUpDemo did for a demo that did not start:
// the sample files, and the directory it made unless something worth
// keeping is in it. Whatever a failed start of the demo left in a
// directory made for it is the demo's own, so its log counts as empty.
func undoDemo(made string, written []string) {
	for _, p := range written {
		os.Remove(p)
	}
	removeUnusedDataDir(made, true)
}

// legacyCron plays an external cron that reports through the SDK and
// starts its runs 90 s after they were due: late starts.
func legacyCron(ctx context.Context, server string) {
	c, err := agent.New(server, agent.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return
	}
	defer c.Close(context.Background())
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for n := 1; ; n++ {
		due := time.Now().Add(-90 * time.Second)
		t := c.Task(fmt.Sprintf("legacy_sync@%d", due.Unix()), "legacy_sync")
		t.Pending(agent.ScheduledAt(due))
		t.Running()
		t.Succeed(agent.Cost(time.Duration(200+n%5*100) * time.Millisecond))
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
