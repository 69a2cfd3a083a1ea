package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/tui/components"
)

func newReportCmd() *cobra.Command {
	var (
		cf                clientFlags
		task, name, state string
		seq               int64
		extra             []string
		timeout, cost     time.Duration
		scheduled         string
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Report one lifecycle event of a run, from a script",
		Long: `Report one event for a run (a task) to the server, for scripts that do not
use an SDK. Exit code 0 when the server stored it (or already had it), 2
when it rejected it (the message says why), 4 when it refused the token,
1 when it could not be reached.

--seq defaults to the step's place in a run: pending 1, running 2,
manual_blocked 3, success, failed and timeout 4. The steps of one run,
reported in that order, need no counting, and reporting a step again is a
harmless duplicate. A run reported only by its end (a single success,
failed or timeout) is recorded as a finished run with an unknown start.
A run that goes back to pending after manual_blocked needs --seq on every
report (1, 2, 3, ...).

It prints accepted, duplicate, or waiting: the server stored the event, but
an earlier event of the run is missing; it applies when that arrives, or
when the server's reorder window (30 s) ends without it.`,
		Example: `  apollo report --task backup-20261129 --name nightly_backup --status running
  apollo report --task backup-20261129 --status success --extra rows=1200 --extra host=db1
  apollo report --task report-20261129 --name nb_report --status success --cost 95s
  apollo report --task etl-7 --name etl --status pending --scheduled-at 2026-11-29T02:00:00Z --timeout 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cf.resolveCLI(); err != nil {
				return err
			}
			st, err := apollo.ParseStatus(state)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			// A --seq given is sent as given, 0 included: the server
			// refuses it as it refuses -1.
			if !cmd.Flags().Changed("seq") {
				seq = defaultSequence(st)
			}
			ev := apollo.Event{TaskID: task, Name: name, Sequence: seq, Status: st, Ts: time.Now().UnixMilli(),
				TimeoutMs: timeout.Milliseconds(), CostMs: cost.Milliseconds()}
			if scheduled != "" {
				at, err := time.Parse(time.RFC3339, scheduled)
				if err != nil {
					return &exitError{code: 2, err: fmt.Errorf("--scheduled-at: %q is not RFC 3339 (e.g. 2026-11-29T02:00:00Z)", scheduled)}
				}
				ev.ScheduledAt = at.UnixMilli()
			}
			if len(extra) > 0 {
				m := map[string]any{}
				for _, kv := range extra {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return &exitError{code: 2, err: fmt.Errorf("--extra %q: write key=value", kv)}
					}
					m[k] = v
				}
				ev.Extra, _ = json.Marshal(m)
			}
			if err := ev.Validate(); err != nil {
				return &exitError{code: 2, err: err}
			}
			return sendOne(cmd.Context(), cf, ev, cmd)
		},
	}
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&task, "task", "", "the run's task ID (required)")
	fl.StringVar(&name, "name", "", "the job name (default: the task ID)")
	fl.StringVar(&state, "status", "", "pending, running, success, failed, timeout or manual_blocked (required)")
	fl.Int64Var(&seq, "seq", 0, "sequence number (default: the step's place in a run: pending 1, running 2, manual_blocked 3, the end 4)")
	fl.StringArrayVar(&extra, "extra", nil, "key=value to keep with the event (repeatable)")
	fl.DurationVar(&timeout, "timeout", 0, "deadline of the running run; past it the server marks it timeout")
	fl.DurationVar(&cost, "cost", 0, "the run's duration (default: derived from its running event)")
	fl.StringVar(&scheduled, "scheduled-at", "", "when the run was due (RFC 3339), for lateness")
	cmd.MarkFlagRequired("task")
	cmd.MarkFlagRequired("status")
	return cmd
}

// defaultSequence numbers a step by its place in a run, so that the steps
// of one run reported in lifecycle order increase without a counter kept
// anywhere, and a step reported twice is a duplicate. (The time, the
// earlier default, made each report of a run jump far ahead of the last.)
func defaultSequence(st apollo.Status) int64 {
	switch st {
	case apollo.StatusPending:
		return 1
	case apollo.StatusRunning:
		return 2
	case apollo.StatusManualBlocked:
		return 3
	}
	return 4 // success, failed, timeout
}

// sendOne delivers one event synchronously and maps the answer to an exit code.
func sendOne(ctx context.Context, cf clientFlags, ev apollo.Event, cmd *cobra.Command) error {
	var (
		rejected *apollo.Error
		failure  lastFailure
	)
	c, err := agent.New(cf.server, agent.WithToken(cf.token), agent.WithMaxRetryElapsed(10*time.Second),
		agent.WithLogger(slog.New(&failure)), agent.WithRejectHandler(func(e *apollo.Error) { rejected = e }))
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := c.Send(ev); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ferr := c.Flush(ctx)
	c.Close(ctx)
	st := c.Stats()
	switch {
	case st.Accepted+st.Held == 1:
		fmt.Fprintln(cmd.OutOrStdout(), "accepted")
	case st.Waiting == 1:
		fmt.Fprintln(cmd.OutOrStdout(), "waiting (stored; an earlier event of this run has not arrived: it applies when that does, or when the reorder window ends)")
	case st.Duplicate == 1:
		fmt.Fprintln(cmd.OutOrStdout(), "duplicate (the server already had it)")
		if ev.Status == apollo.StatusPending && !cmd.Flags().Changed("seq") {
			// The one step a run takes again: pending after manual_blocked
			// (apollo task block says its executor releases it so). By the
			// default sequence it is a duplicate and the run stays blocked.
			fmt.Fprintf(cmd.ErrOrStderr(), "apollo: nothing changed: the server has sequence %d or a later one of run %s; a run released from manual_blocked goes back to pending with --seq above its last (apollo task %s shows it)\n",
				ev.Sequence, components.Escape(ev.TaskID), components.Escape(ev.TaskID))
		}
	case st.Rejected == 1:
		// The answer's code says whose mistake it was, as for every
		// command: the event's (2), or the token's (4).
		code := exitUsage
		if rejected != nil {
			code = exitFor(cmp.Or(rejected.Code, apollo.EINVALID))
			rejected.Hint = cliHints.Replace(rejected.Hint)
		}
		return &exitError{code: code, err: fmt.Errorf("rejected by the server: %v", rejected)}
	default:
		why, status := failure.String(), failure.answered()
		if ferr != nil {
			why = ferr.Error() + "; " + why
		}
		hint := unreachableHint(ferr)
		if status != 0 {
			hint = fmt.Sprintf("the server answered HTTP %d and did not store the event: report it again later", status)
		}
		return &exitError{code: exitServer, err: fmt.Errorf("could not report to %s: %s (%s)", cf.server, why, hint)}
	}
	return nil
}

// lastFailure is the agent's logger in apollo report: it keeps the last
// error the agent met, or else why it gave up, for the one line the
// command prints, and writes nothing.
type lastFailure struct {
	mu          sync.Mutex
	err, reason string
	status      int64 // the HTTP status of the last answer retried; 0: none
}

func (h *lastFailure) Enabled(context.Context, slog.Level) bool { return true }
func (h *lastFailure) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lastFailure) WithGroup(string) slog.Handler            { return h }

func (h *lastFailure) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "error":
			h.err = a.Value.String()
		case "reason":
			h.reason = a.Value.String()
		case "httpStatus":
			if a.Value.Kind() == slog.KindInt64 {
				h.status = a.Value.Int64()
			}
		}
		return true
	})
	return nil
}

// answered is the HTTP status of the last answer the agent retried after
// (a 429, a 5xx), or 0 when the last try got none.
func (h *lastFailure) answered() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// String says what went wrong: the last error the agent met, else why it
// gave up on the event.
func (h *lastFailure) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cmp.Or(h.err, h.reason, "no answer")
}
