package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
	"github.com/apollo-11/apollo/tui/pages"
)

func newAlertsCmd() *cobra.Command {
	var (
		a     apiCmd
		state string
	)
	cmd := &cobra.Command{
		Use:   "alerts",
		Short: "List alerts: firing, pending, resolved",
		Long: `List the alerts the server holds: one per episode of a rule's condition for
one group (the rule's prefix, or one job with BY: name). Firing alerts come
first, then pending, then resolved; newest first within each. SINCE is when
the alert entered its state.

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad flags, 4 the token
may not read alerts.`,
		Example: `  apollo alerts
  apollo alerts --state firing
  apollo alerts -o json | jq -r '.alerts[] | select(.severity == "critical") | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.AlertList, error) {
				switch apollo.AlertState(state) {
				case "", apollo.AlertPending, apollo.AlertFiring, apollo.AlertResolved, apollo.AlertInactive:
				default:
					return apiclient.AlertList{}, usageError("--state %q: use pending, firing or resolved", state)
				}
				return c.Alerts(ctx, apollo.AlertState(state))
			}, printAlerts)
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&state, "state", "", "only alerts in this state: pending, firing or resolved")
	return cmd
}

// printAlerts prints alerts as a table: firing first, then pending, then
// resolved; newest first within each.
func printAlerts(w io.Writer, l apiclient.AlertList) error {
	slices.SortFunc(l.Alerts, func(a, b apiclient.Alert) int { return apollo.CompareAlerts(&a.Alert, &b.Alert) })
	t := newTable(w, "ID", "STATE", "SEVERITY", "RULE", "GROUP", "SINCE", "NOTE", "SUMMARY")
	for _, al := range l.Alerts {
		t.row(al.ID, al.State, al.Severity, al.Rule, al.Group, fmtTime(al.Since()), alertNote(&al), clip(al.Summary, 80))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if l.Total > len(l.Alerts) {
		return say(w, "%d of %d alerts shown, firing and newest first: the server answers at most %d; narrow with --state\n",
			len(l.Alerts), l.Total, len(l.Alerts))
	}
	return nil
}

// alertNote says who is on it, or that nobody will be told.
func alertNote(a *apiclient.Alert) string {
	var parts []string
	if a.AckedBy != "" {
		parts = append(parts, "acked by "+a.AckedBy)
	}
	if len(a.SilencedBy) > 0 {
		parts = append(parts, "silenced")
	}
	return orDash(strings.Join(parts, ", "))
}

func newAckCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:   "ack ID",
		Short: "Acknowledge an alert: someone is on it; no more repeats",
		Long: `Acknowledge a firing alert: the repeats of its notification stop until it
resolves. Needs the operator role; recorded with your token's name.

Exit codes: 0 ok, 1 server unreachable or failing, 2 the alert cannot be
acknowledged (already resolved), 3 no such alert, 4 the token lacks the
operator role.`,
		Example: `  apollo ack a4a86cd8c21818db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.AckAnswer, error) {
				acked, err := c.Ack(ctx, args[0])
				return apiclient.AckAnswer{Alert: acked}, err
			}, func(w io.Writer, _ apiclient.AckAnswer) error {
				return say(w, "acknowledged %s\n", components.Escape(args[0]))
			})
		},
	}
	a.register(cmd)
	return cmd
}

// matchers prints what a silence matches, e.g. rule=x prefix=batch_ env=prod
// or rule=x group=etl_sales.
func matchers(s *apollo.Silence) string {
	var parts []string
	if s.Rule != "" {
		parts = append(parts, "rule="+s.Rule)
	}
	if s.Group != "" {
		parts = append(parts, "group="+s.Group)
	}
	if s.Prefix != "" {
		parts = append(parts, "prefix="+s.Prefix)
	}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+s.Labels[k])
	}
	return strings.Join(parts, " ")
}

func newSilenceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "silence",
		Short: "Silence alerts for a while: add, list, rm",
		Long: `A silence stops the notifications of the alerts it matches, for a while.
Silenced alerts still change state and show in "apollo alerts".`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSilenceAddCmd(), newSilenceListCmd(), newSilenceRmCmd())
	return cmd
}

func newSilenceAddCmd() *cobra.Command {
	var (
		a                   apiCmd
		rule, group, prefix string
		comment             string
		labels              []string
		forText             string
	)
	cmd := &cobra.Command{
		Use:   "add (--rule R | --group G | --prefix P | --label k=v) --for D --comment C",
		Short: "Silence the alerts of a rule, a group, a job prefix or labels",
		Long: `Add a silence from now for --for. Give at least one matcher: --rule (a rule
name), --group (the alert's group exactly: the rule's prefix, or the job
with BY: name; the GROUP column of apollo alerts), --prefix (a prefix of
the group), --label k=v (repeatable); an alert is silenced when all of
them match. Needs the operator role; audited.

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad flags or the
server refused the silence, 4 the token lacks the operator role.`,
		Example: `  apollo silence add --rule batch_failures --for 2h --comment "vendor outage, ticket OPS-123"
  apollo silence add --rule job_failures --group etl_sales --for 1h --comment "rerun in progress"
  apollo silence add --prefix etl_ --label env=staging --for 30m --comment "load test"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The TUI's silence form reads durations so ("1d" included):
			// one that works there works here.
			var dur time.Duration
			if forText != "" {
				d, err := pages.ParseSilenceDuration(forText)
				if err != nil {
					return usageError("--for %q: %v", forText, err)
				}
				dur = d
			}
			body := apiclient.SilenceRequest{Rule: rule, Group: group, Prefix: prefix, Comment: comment, Duration: dur.String()}
			if len(labels) > 0 {
				m := map[string]string{}
				for _, kv := range labels {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usageError("--label %q: write key=value", kv)
					}
					m[k] = v
				}
				body.Labels = m
			}
			switch {
			case rule == "" && group == "" && prefix == "" && len(labels) == 0:
				return usageError("say what to silence: --rule, --group, --prefix or --label")
			case dur <= 0:
				return usageError("--for: say how long, e.g. --for 2h")
			case strings.TrimSpace(comment) == "":
				return usageError("--comment: say why, for whoever wonders later")
			}
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.SilenceAnswer, error) {
				s, err := c.AddSilence(ctx, body)
				if err == nil && rule != "" {
					warnNoRule(ctx, c, cmd.ErrOrStderr(), rule)
				}
				return apiclient.SilenceAnswer{Silence: s}, err
			}, func(w io.Writer, ans apiclient.SilenceAnswer) error {
				s := &ans.Silence
				return say(w, "silence %s: %s until %s\n", components.Escape(s.ID), components.Escape(matchers(s)), fmtTime(s.EndsAt))
			})
		},
	}
	a.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&rule, "rule", "", "silence this rule's alerts")
	fl.StringVar(&group, "group", "", "silence alerts of this group exactly (a rule's prefix, or a job with BY: name)")
	fl.StringVar(&prefix, "prefix", "", "silence alerts whose group starts with this")
	fl.StringArrayVar(&labels, "label", nil, "silence alerts with this label, key=value (repeatable)")
	fl.StringVar(&forText, "for", "", "how long, from now (required), e.g. 2h, 90m or 1d; at most a year")
	fl.StringVar(&comment, "comment", "", "why (required)")
	return cmd
}

// warnNoRule warns when no rule of the server is named rule: most likely
// a typo, though a silence may wait for a rule to come. Nothing is said
// when the rules cannot be read.
func warnNoRule(ctx context.Context, c *apiclient.Client, w io.Writer, rule string) {
	rs, err := c.Rules(ctx)
	if err != nil {
		return
	}
	names := make([]string, 0, len(rs.Rules))
	for _, r := range rs.Rules {
		if r.Name == rule {
			return
		}
		names = append(names, r.Name)
	}
	const most = 10
	list := "there are none"
	if len(names) > 0 {
		if len(names) > most {
			names = append(names[:most], "…")
		}
		list = "the rules: " + strings.Join(names, ", ")
	}
	fmt.Fprintf(w, "apollo: warning: no rule is named %q (%s; apollo rules list shows them); the silence holds all the same\n",
		rule, components.Escape(list))
}

func newSilenceListCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the silences",
		Example: `  apollo silence list`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.SilenceList, error) {
				silences, err := c.Silences(ctx)
				return apiclient.SilenceList{Silences: silences}, err
			}, func(w io.Writer, l apiclient.SilenceList) error {
				t := newTable(w, "ID", "MATCHES", "STARTS", "ENDS", "BY", "COMMENT")
				for _, s := range l.Silences {
					t.row(s.ID, matchers(&s), fmtTime(s.StartsAt), fmtTime(s.EndsAt), orDash(s.CreatedBy), clip(s.Comment, 60))
				}
				return t.flush()
			})
		},
	}
	a.register(cmd)
	return cmd
}

func newSilenceRmCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:     "rm ID",
		Short:   "Remove a silence: its alerts notify again",
		Long:    "Remove a silence. Needs the operator role; audited. Exit 3 when there is no such silence.",
		Example: `  apollo silence rm 13aa56512617bcba`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.Removed, error) {
				return apiclient.Removed{Removed: args[0]}, c.RemoveSilence(ctx, args[0])
			}, func(w io.Writer, _ apiclient.Removed) error {
				return say(w, "removed silence %s\n", components.Escape(args[0]))
			})
		},
	}
	a.register(cmd)
	return cmd
}
