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
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/channels"
	"github.com/apollo-11/apollo/tui/components"
)

// buildDispatcher makes the delivery pipeline for the configured channels.
// When tenants are in use (a token or a channel names one), every message
// names its tenant. turns, when several processes send to the channels,
// keeps each channel's rate limit across them.
func buildDispatcher(cfg config.Config, clock apollo.Clock, log *slog.Logger, console io.Writer, outbox notify.Outbox, turns notify.Turns) (*notify.Dispatcher, error) {
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
	return notify.NewDispatcher(chs, notify.Options{Clock: clock, Logger: log, ExternalURL: cfg.ExternalURL, Tenants: tenants, Outbox: outbox, Turns: turns})
}

func newNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "notify", Short: "Work with notification channels"}
	var (
		a          apiCmd
		configFile string
	)
	test := &cobra.Command{
		Use:   "test CHANNEL",
		Short: "Send a test message through a channel and print the outcome",
		Long: `Send one test message through one of the server's channels, right now (no
queue, no retries), and print what happened: the channel as the running
server has it, with its secrets. A tenant's token tests the tenant's own
channels and the shared ones. Needs the operator role; audited, and listed
in the delivery record.

With --config, no server is asked: the channel is built from that file on
this machine (a console channel prints here), which checks a configuration
before a server uses it, and is the way in the three-process mode, whose
alert processes serve no API.

Exit codes: 0 the channel took the message, 1 it did not (or the server
failed), 2 bad flags, 3 no such channel, 4 the token lacks the role.
Secrets are never printed.`,
		Example: `  apollo notify test oncall-ding
  apollo notify test oncall-ding --config /etc/apollo/apollo.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, out := args[0], cmd.OutOrStdout()
			var (
				at  apollo.Attempt
				err error
			)
			if configFile != "" {
				at, err = testLocalChannel(cmd.Context(), configFile, name, out)
			} else {
				var c *apiclient.Client
				if c, err = a.client(); err != nil {
					return err
				}
				at, err = c.TestChannel(cmd.Context(), name)
			}
			if err != nil {
				return err
			}
			if a.json() {
				if err := printAnswer(out, apiclient.ChannelTest{Attempt: at}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%s: %s in %v\n", components.Escape(name), at.Outcome, roundLatency(at.Latency))
			}
			if at.Outcome != notify.OutcomeSent {
				return &exitError{code: exitServer, err: fmt.Errorf("%s: %s", name, orDefault(at.Error, at.Outcome))}
			}
			return nil
		},
	}
	a.register(test)
	test.Flags().StringVarP(&configFile, "config", "c", "", "test a channel of this configuration file from here, without a server")
	cmd.AddCommand(test)
	return cmd
}

// testLocalChannel sends the test through a channel built from the
// configuration file, from this process: a failed channel is an attempt
// whose outcome says so, a channel the file lacks is not found.
func testLocalChannel(ctx context.Context, configFile, name string, console io.Writer) (apollo.Attempt, error) {
	cfg, err := config.Load(configFile, os.Getenv)
	if err != nil {
		return apollo.Attempt{}, err
	}
	d, err := buildDispatcher(cfg, apollo.SystemClock, slog.New(slog.DiscardHandler), console, nil, nil)
	if err != nil {
		return apollo.Attempt{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	at, err := d.Test(ctx, name)
	if at.ID == "" && err != nil {
		return at, &exitError{code: exitFor(apollo.ErrorCode(err)), err: fmt.Errorf("%s: %w", configFile, err)}
	}
	return at, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// roundLatency rounds a send's latency to the millisecond, or, under one,
// to the microsecond: a console channel or a hook on this host answers in
// microseconds, which to the millisecond read "sent in 0s".
func roundLatency(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
