package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/channels"
)

// buildDispatcher makes the delivery pipeline for the configured channels.
// When tenants are in use (a token or a channel names one), every message
// names its tenant.
func buildDispatcher(cfg config.Config, clock apollo.Clock, log *slog.Logger, console io.Writer) (*notify.Dispatcher, error) {
	var chs []notify.Channel
	var errs []error
	tenants := slices.ContainsFunc(cfg.Auth.Tokens, func(t config.Token) bool { return t.Tenant != "" })
	for _, name := range slices.Sorted(maps.Keys(cfg.Channels)) {
		raw := cfg.Channels[name]
		if _, ok := raw["tenants"]; ok {
			tenants = true
		}
		typ, _ := raw["type"].(string)
		ch, err := channels.Build(name, typ, raw, channels.BuildOptions{NotifierOptions: notify.NotifierOptions{
			Clock: clock, ExternalURL: cfg.ExternalURL, Output: console}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		chs = append(chs, ch)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("channels:\n%w", err)
	}
	return notify.NewDispatcher(chs, notify.Options{Clock: clock, Logger: log, ExternalURL: cfg.ExternalURL, Tenants: tenants})
}

func newNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "notify", Short: "Work with notification channels"}
	var configFile string
	test := &cobra.Command{
		Use:   "test CHANNEL",
		Short: "Send a test message through a channel and print the outcome",
		Long: `Send one test message through a channel configured in apollo.yaml, right now
(no queue, no retries), and print what happened. Exit code 0 when the channel
accepted it, 1 otherwise. Secrets in the configuration are never printed.`,
		Example: `  apollo notify test oncall-ding --config /etc/apollo/apollo.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := config.Default()
			if configFile != "" {
				var err error
				if cfg, err = config.Load(configFile, os.Getenv); err != nil {
					return err
				}
			}
			d, err := buildDispatcher(cfg, apollo.SystemClock, slog.New(slog.DiscardHandler), cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !slices.Contains(d.Channels(), args[0]) {
				return fmt.Errorf("no channel %q in %s (channels: %v)", args[0], orDefault(configFile, "the defaults"), d.Channels())
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			a, err := d.Test(ctx, args[0])
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s in %v\n", args[0], a.Outcome, a.Latency.Round(time.Millisecond))
			if a.Outcome != "sent" {
				return &exitError{code: 1, err: fmt.Errorf("%s: %s", args[0], a.Error)}
			}
			return nil
		},
	}
	test.Flags().StringVarP(&configFile, "config", "c", "", "configuration file with the channels")
	cmd.AddCommand(test)
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
