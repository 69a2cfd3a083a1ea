package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/config"
)

// serverFlags are the flags of `apollo server` (and `apollo demo`).
type serverFlags struct {
	configFile string
	listen     string
	data       string
	fsync      string
	rules      string
	expect     string
	jobs       string
	insecure   bool
}

// defaultDataHelp is what --data says of its default, except in the demo.
const defaultDataHelp = "(default ./apollo-data)"

// register adds the flags; dataDefault says what --data is when not given.
func (f *serverFlags) register(cmd *cobra.Command, dataDefault string) {
	fl := cmd.Flags()
	fl.StringVarP(&f.configFile, "config", "c", "", "configuration file (apollo.yaml); see docs/operations.md")
	fl.StringVar(&f.listen, "listen", "", "address of the API and dashboard (default 127.0.0.1:1969)")
	fl.StringVar(&f.data, "data", "", "data directory for the log and snapshots "+dataDefault)
	fl.StringVar(&f.fsync, "fsync", "", "when the log is flushed to disk: batch (default), interval or off")
	fl.StringVar(&f.rules, "rules", "", "alert rules file, reloaded when it changes")
	fl.StringVar(&f.expect, "expectations", "", "job expectations file (docs/expectations.md), reloaded when it changes")
	fl.StringVar(&f.jobs, "jobs", "", "scheduler jobs file: run the scheduler in this process")
	fl.BoolVar(&f.insecure, "insecure-no-auth", false, "allow listening beyond loopback without tokens (warns every minute)")
}

// load builds the configuration: defaults, file, environment, flags, Validate.
func (f *serverFlags) load(cmd *cobra.Command) (config.Config, error) {
	cfg := config.Default()
	if f.configFile != "" {
		var err error
		if cfg, err = config.Load(f.configFile, os.Getenv); err != nil {
			return cfg, err
		}
	}
	cfg.ApplyEnv(os.Getenv)
	fl := cmd.Flags()
	for name, dst := range map[string]*string{"listen": &cfg.Listen, "data": &cfg.Data, "fsync": &cfg.Fsync, "rules": &cfg.Rules, "expectations": &cfg.Expectations, "jobs": &cfg.Jobs} {
		if fl.Changed(name) {
			*dst, _ = fl.GetString(name)
		}
	}
	if fl.Changed("insecure-no-auth") {
		cfg.Auth.InsecureNoAuth = f.insecure
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("configuration:\n%w", err)
	}
	return cfg, nil
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the all-in-one server (no other service needed)",
		Long: `Run Apollo-11 as one process: ingest, task state, the write-ahead log,
metrics, alerting, the API and the dashboard. State lives in the data
directory; nothing else is needed.

An event is answered "accepted" only once it is on disk (with --fsync batch,
the default). On SIGTERM or Ctrl-C the server stops accepting, drains,
writes a snapshot and exits 0.`,
		Example: `  apollo server
  apollo server --listen 127.0.0.1:1969 --data /var/lib/apollo
  apollo server --config /etc/apollo/apollo.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load(cmd)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return runServer(cmd.Context(), cfg, serverDeps{log: log, out: cmd.OutOrStdout()})
		},
	}
	f.register(cmd, defaultDataHelp)
	return cmd
}
