package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

// maxPage is the most tasks the server returns in one page.
const maxPage = 1000

func newTasksCmd() *cobra.Command {
	var (
		a              apiCmd
		prefix, status string
		since          time.Duration
		limit          int
		all            bool
	)
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List runs (tasks), newest first",
		Long: `List the runs the server keeps in memory, newest first: by when the
server received each run's first event, then by task ID, both descending.

Without --all, at most --limit tasks are shown; when there are more, a line
on stderr says so. --all follows the server's pages to the end.

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad flags, 4 the token
may not read tasks.`,
		Example: `  apollo tasks
  apollo tasks --prefix nightly_ --status failed --since 24h
  apollo tasks --all -o json | jq '.tasks[].taskID'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.TaskPage, error) {
				if limit < 1 {
					return apiclient.TaskPage{}, usageError("--limit %d: want 1 or more", limit)
				}
				q := apiclient.TaskQuery{Prefix: prefix}
				if status != "" {
					var err error
					if q.Status, err = apollo.ParseStatus(status); err != nil {
						return apiclient.TaskPage{}, &exitError{code: exitUsage, err: err}
					}
				}
				if since < 0 {
					return apiclient.TaskPage{}, usageError("--since %v: want a duration above zero, e.g. 1h (leave it out for every task)", since)
				}
				if since > 0 {
					// Further back than 1970 is every task: the server takes
					// no time before it.
					q.Since = max(time.Now().Add(-since).UnixMilli(), 1)
				}
				want := limit
				if all {
					want = -1
				}
				tasks, next, err := listTasks(ctx, c, q, want)
				return apiclient.TaskPage{Tasks: tasks, Next: next}, err
			}, func(w io.Writer, p apiclient.TaskPage) error {
				if err := printTasks(w, p.Tasks); err != nil {
					return err
				}
				if p.Next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "(more tasks: raise --limit, or use --all)\n")
				}
				return nil
			})
		},
	}
	a.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&prefix, "prefix", "", "only tasks whose job name or task ID starts with this")
	fl.StringVar(&status, "status", "", "only tasks in this state: pending, running, success, failed, timeout, manual_blocked")
	fl.DurationVar(&since, "since", 0, "only tasks updated within this long, e.g. 1h")
	fl.IntVar(&limit, "limit", 50, "show at most this many tasks")
	fl.BoolVar(&all, "all", false, "show every matching task, following the pages")
	return cmd
}

// listTasks fetches up to want tasks (every one when want < 0), page by
// page.
func listTasks(ctx context.Context, c *apiclient.Client, q apiclient.TaskQuery, want int) ([]apollo.Task, string, error) {
	tasks := []apollo.Task{}
	for {
		q.Limit = maxPage
		if want >= 0 {
			q.Limit = min(want-len(tasks), maxPage)
		}
		page, err := c.Tasks(ctx, q)
		if err != nil {
			return nil, "", err
		}
		tasks = append(tasks, page.Tasks...)
		if page.Next == "" || (want >= 0 && len(tasks) >= want) {
			return tasks, page.Next, nil
		}
		q.Cursor = page.Next
	}
}

func printTasks(w io.Writer, tasks []apollo.Task) error {
	t := newTable(w, "TASK", "JOB", "STATUS", "UPDATED", "COST", "LATE")
	for _, tk := range tasks {
		late := ""
		if tk.Late {
			late = "late"
		}
		t.row(tk.TaskID, tk.Name, tk.Status, fmtMs(tk.UpdatedAt), fmtCost(float64(tk.CostMs)), late)
	}
	return t.flush()
}

func newTaskCmd() *cobra.Command {
	var (
		a    apiCmd
		wide bool
	)
	cmd := &cobra.Command{
		Use:   "task ID",
		Short: "Show one run: its state and the timeline of its history",
		Long: `Show one run (task): its state, and every record of its history in order:
the events its executor reported, corrections by operators, and what the
server wrote itself (a timeout, a missed start).

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad arguments, 3 no
such task, 4 the token may not read tasks.`,
		Example: `  apollo task nightly_backup@20261129T023000Z#1
  apollo task etl-7 -o json
  apollo task fix etl-7 --status success --reason "re-ran by hand, output checked"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apollo.Task, error) {
				return c.Task(ctx, args[0])
			}, func(w io.Writer, tk apollo.Task) error {
				return printTask(w, &tk, wide)
			})
		},
		ValidArgsFunction: completeTasks,
	}
	a.register(cmd)
	cmd.Flags().BoolVar(&wide, "wide", false, "do not shorten the extra column")
	cmd.AddCommand(newTaskFixCmd(), newTaskBlockCmd())
	return cmd
}

// printTask prints the state as "field value" lines, then the timeline.
func printTask(w io.Writer, tk *apollo.Task, wide bool) error {
	head := newTable(w)
	line := func(k string, v any) {
		if s := fmt.Sprint(v); s != "" && s != "-" {
			head.row(k, s)
		}
	}
	line("task", tk.TaskID)
	line("job", tk.Name)
	line("tenant", tk.Tenant)
	line("status", tk.Status)
	line("sequence", tk.Sequence)
	line("scheduled", fmtMs(tk.ScheduledAt))
	if tk.StartedAt == 0 && tk.Status.Final() {
		line("started", "unknown") // reported by its end only
	}
	line("started", fmtMs(tk.StartedAt))
	line("finished", fmtMs(tk.FinishedAt))
	line("updated", fmtMs(tk.UpdatedAt))
	line("cost", fmtCost(float64(tk.CostMs)))
	if tk.TimeoutMs > 0 {
		line("timeout", fmtCost(float64(tk.TimeoutMs)))
	}
	if tk.Late {
		line("late", "yes")
	}
	if err := head.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := newTable(w, "TIME", "KIND", "STATUS", "SEQ", "EXTRA")
	for _, r := range tk.History {
		t.row(time.UnixMilli(r.Ts).Local().Format("2006-01-02 15:04:05.000"), r.Kind, r.Status, r.Sequence, recordDetail(&r, wide))
	}
	return t.flush()
}

// recordDetail is the last column of a timeline row: who corrected and
// why, why the bus applied a gap, or the record's extra as compact JSON.
func recordDetail(r *apollo.Record, wide bool) string {
	var s string
	switch {
	case r.Kind == apollo.KindCorrection:
		s = fmt.Sprintf("by %s: %s", orDash(r.Actor), r.Reason)
	case r.Reason != "":
		s = r.Reason
	case len(r.Extra) > 0:
		s = string(r.Extra)
		var v any
		if json.Unmarshal(r.Extra, &v) == nil {
			if b, err := json.Marshal(v); err == nil {
				s = string(b)
			}
		}
	}
	if !wide {
		s = clip(s, 100)
	}
	return s
}

func newTaskFixCmd() *cobra.Command {
	var (
		a              apiCmd
		status, reason string
	)
	cmd := &cobra.Command{
		Use:   "fix ID --status S --reason R",
		Short: "Correct a run's status by hand (audited)",
		Long: `Set a run's status whatever the transition table says: for a run whose
executor died before reporting, or whose result was checked by hand. It
needs the operator role and a reason; both go to the run's history and the
audit log.

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad flags or the
server refused the change, 3 no such task, 4 the token lacks the operator
role.`,
		Example: `  apollo task fix etl-7 --status success --reason "re-ran by hand, output checked"
  apollo task fix backup@manual-1732847400000#1 --status failed --reason "host lost power"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if status == "" {
				return usageError("--status: say what the status becomes")
			}
			st, err := apollo.ParseStatus(status)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return correctTask(cmd, &a, args[0], st, reason)
		},
		ValidArgsFunction: completeTasks,
	}
	a.register(cmd)
	cmd.Flags().StringVar(&status, "status", "", "the new status (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the history and the audit log (required)")
	return cmd
}

func newTaskBlockCmd() *cobra.Command {
	var (
		a      apiCmd
		reason string
	)
	cmd := &cobra.Command{
		Use:   "block ID --reason R",
		Short: "Hold a run for a person: set it to manual_blocked (audited)",
		Long: `Set a run to manual_blocked, the state of a run that waits for a person.
The same as "apollo task fix ID --status manual_blocked". Its executor
releases it by reporting pending.

Exit codes as for "apollo task fix".`,
		Example: `  apollo task block etl-7 --reason "input files incomplete, asked the vendor"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return correctTask(cmd, &a, args[0], apollo.StatusManualBlocked, reason)
		},
		ValidArgsFunction: completeTasks,
	}
	a.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the history and the audit log (required)")
	return cmd
}

func correctTask(cmd *cobra.Command, a *apiCmd, id string, st apollo.Status, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return usageError("--reason: say why the status is changed by hand")
	}
	return runAPI(cmd, a, func(c *apiclient.Client, ctx context.Context) (apollo.Task, error) {
		return c.CorrectTask(ctx, id, apiclient.Correction{Status: st, Reason: reason})
	}, func(w io.Writer, tk apollo.Task) error {
		return say(w, "task %s is now %s\n", components.Escape(tk.TaskID), tk.Status)
	})
}

// completeTasks offers the IDs of recent tasks that start with what was
// typed. Completion must never fail loudly: errors offer nothing.
func completeTasks(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var cf clientFlags
	cf.server, _ = cmd.Flags().GetString("server")
	cf.token, _ = cmd.Flags().GetString("token")
	c, err := newAPIClient(&cf, 3*time.Second)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	tasks, _, err := listTasks(ctxOf(cmd), c, apiclient.TaskQuery{Prefix: toComplete}, 100)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	for _, tk := range tasks {
		// An ID that holds control characters cannot be typed, and would
		// put them on the command line: it is not offered.
		if strings.HasPrefix(tk.TaskID, toComplete) && components.Escape(tk.TaskID) == tk.TaskID {
			ids = append(ids, tk.TaskID+"\t"+components.Escape(tk.Name)+" "+tk.Status.String())
		}
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

// ctxOf is the command's context; completion may run without one.
func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
