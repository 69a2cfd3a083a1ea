package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

func newJobsCmd() *cobra.Command {
	var (
		a      apiCmd
		prefix string
		window time.Duration
	)
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Per-job metrics over a window: runs, failures, cost, throughput",
		Long: `Show one row of metrics per job over the last --window, and a total: runs
that finished, how many failed or timed out, the failure rate (failed and
timed out), late runs, average and longest cost, what is running and
waiting now, and finished runs per minute.

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad flags, 4 the token
may not read metrics.`,
		Example: `  apollo jobs
  apollo jobs --prefix batch_ --window 1h
  apollo jobs -o json | jq '.jobs[] | select(.failedRate > 0.05) | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.MetricsPage, error) {
				if window <= 0 {
					return apiclient.MetricsPage{}, usageError("--window %v: want a duration above zero, e.g. 5m or 24h", window)
				}
				return c.Metrics(ctx, window, prefix)
			}, printJobs)
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&prefix, "prefix", "", "only jobs whose name starts with this")
	cmd.Flags().DurationVar(&window, "window", 5*time.Minute, "how far back to count")
	return cmd
}

// printJobs prints a row per job and the total.
func printJobs(w io.Writer, ans apiclient.MetricsPage) error {
	t := newTable(w, "JOB", "RUNS", "OK", "FAILED", "TIMEOUT", "FAIL%", "LATE", "AVG", "MAX", "RUNNING", "BACKLOG", "PER MIN")
	row := func(name string, r apiclient.JobRow) {
		t.row(name, r.Count, r.Success, r.Failed, r.Timeout, fmtRate(r.FailureRate()), r.Late,
			fmtCost(r.AvgCostMs), fmtCost(float64(r.MaxCostMs)), r.Running, r.Backlog, fmt.Sprintf("%.2f", r.Throughput))
	}
	for _, r := range ans.Jobs {
		row(r.Name, r)
	}
	row(fmt.Sprintf("TOTAL (%s, %s)", plural(len(ans.Jobs), "job"), ans.Window), ans.Total)
	return t.flush()
}

func newJobCmd() *cobra.Command {
	var (
		a            apiCmd
		window, step time.Duration
	)
	cmd := &cobra.Command{
		Use:   "job NAME",
		Short: "One job's metrics over time, with sparklines; run, pause and resume scheduled jobs",
		Long: `Show one job's runs over the last --window in steps of --step: totals, and
sparklines of the finished runs per minute and of the failure rate (failed
and timed out), oldest on the left. A blank in the failure line is a step in which nothing
finished.

The subcommands talk to the scheduler running in the server (apollo server
--jobs): list its jobs, run one now, pause or resume one.

A job named like a subcommand (list, run, pause, resume, help) is shown
after --, with the flags before it: apollo job --window 24h -- list. The
subcommands take any name as it is: apollo job run list.

Exit codes: 0 ok, 1 server unreachable or failing, 2 bad flags, 3 no such
job (or no scheduler in the server), 4 the token lacks the role.`,
		Example: `  apollo job nightly_backup
  apollo job nightly_backup --window 24h --step 30m
  apollo job list
  apollo job run nightly_backup
  apollo job -o json -- list        # a job named list`,
		Args: oneJobName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.JobSeries, error) {
				if step <= 0 || window < step {
					return apiclient.JobSeries{}, usageError("--window %v --step %v: want a step above zero and a window of at least one step", window, step)
				}
				ans, err := c.JobSeries(ctx, args[0], window, step)
				if err != nil {
					return ans, err
				}
				return ans, knownJob(ctx, c, args[0], ans.Points)
			}, func(w io.Writer, ans apiclient.JobSeries) error {
				return printSeries(w, ans.Name, ans.Window, ans.Step, ans.Points)
			})
		},
	}
	a.register(cmd)
	cmd.Flags().DurationVar(&window, "window", time.Hour, "how far back to show")
	cmd.Flags().DurationVar(&step, "step", time.Minute, "the time one sparkline character covers")
	cmd.AddCommand(newJobListCmd(), newJobActionCmd("run"), newJobActionCmd("pause"), newJobActionCmd("resume"))
	return cmd
}

// oneJobName wants the one job NAME. More are most often flags written
// after a -- (which the job list's name needs: apollo job -- list), where
// they are names: say where they go.
func oneJobName(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 1:
		return nil
	case len(args) == 0:
		return errors.New("apollo job needs the job NAME")
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
	}
	return fmt.Errorf("apollo job takes one job NAME, not %d (%s): write the flags before --, as in apollo job -o json -- %s",
		len(args), strings.Join(quoted, " "), components.Escape(args[0]))
}

// knownJob returns a not-found error for a job that has never reported a
// run: the series of any name is all zeros, so an empty one asks the job
// health, which knows every job that ran lately. A server without job
// health leaves the empty series be.
func knownJob(ctx context.Context, c *apiclient.Client, name string, pts []apiclient.JobRow) error {
	for _, p := range pts {
		if p.Count+p.Started+p.Running+p.Backlog+p.Missed > 0 {
			return nil
		}
	}
	_, err := c.JobsHealth(ctx, apiclient.HealthQuery{Job: name, Limit: 1})
	var ae *apollo.Error
	if errors.As(err, &ae) && ae.Code == apollo.ENOTFOUND && ae.Field == "job" {
		return &exitError{code: exitNotFound, err: fmt.Errorf("no job %q has reported a run (apollo jobs lists the jobs that did)", name)}
	}
	return nil
}

// printSeries prints a job's totals over the points, and its sparklines.
func printSeries(w io.Writer, name, window, step string, pts []apiclient.JobRow) error {
	var sum apiclient.JobRow
	var costMs float64
	thr := make([]float64, len(pts))
	fail := make([]float64, len(pts))
	has := make([]bool, len(pts))
	for i, p := range pts {
		sum.Count += p.Count
		sum.Success += p.Success
		sum.Failed += p.Failed
		sum.Timeout += p.Timeout
		sum.Late += p.Late
		sum.MaxCostMs = max(sum.MaxCostMs, p.MaxCostMs)
		costMs += p.AvgCostMs * float64(p.Count)
		thr[i], fail[i], has[i] = p.Throughput, p.FailureRate(), p.Count > 0
	}
	t := newTable(w)
	t.row("job", name)
	t.row("window", fmt.Sprintf("%s in steps of %s (%d points)", window, step, len(pts)))
	t.row("runs", fmt.Sprintf("%d finished: %d ok, %d failed, %d timed out; %d late", sum.Count, sum.Success, sum.Failed, sum.Timeout, sum.Late))
	if sum.Count > 0 {
		t.row("failure rate", fmtRate(sum.FailureRate()))
		t.row("cost", fmt.Sprintf("avg %s, max %s", fmtCost(costMs/float64(sum.Count)), fmtCost(float64(sum.MaxCostMs))))
	}
	if len(pts) > 0 {
		t.row("from", fmtMs(pts[0].T)+" to "+fmtMs(pts[len(pts)-1].T))
	}
	t.row("per minute", fmt.Sprintf("%s  max %.2f", sparkline(thr, nil), maxOf(thr)))
	t.row("failed", fmt.Sprintf("%s  max %s", sparkline(fail, has), fmtRate(maxOf(fail))))
	return t.flush()
}

// sparks are the eight heights of a sparkline character.
var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws vals scaled to their maximum, one character each. A
// value whose has entry is false (nothing to measure) is a blank; nil has
// means every value counts. All zeros draw the lowest bar.
func sparkline(vals []float64, has []bool) string {
	top := maxOf(vals)
	var b strings.Builder
	for i, v := range vals {
		switch {
		case has != nil && !has[i]:
			b.WriteRune(' ')
		case top <= 0 || v <= 0:
			b.WriteRune(sparks[0])
		default:
			k := int(v / top * float64(len(sparks)-1))
			b.WriteRune(sparks[min(max(k, 0), len(sparks)-1)])
		}
	}
	return b.String()
}

func maxOf(vals []float64) float64 {
	m := 0.0
	for _, v := range vals {
		m = max(m, v)
	}
	return m
}

func newJobListCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the scheduler's jobs: schedule, next run, last result",
		Example: `  apollo job list
  apollo job list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.JobList, error) {
				jobs, err := c.Jobs(ctx)
				return apiclient.JobList{Jobs: jobs}, err
			}, printJobList)
		},
	}
	a.register(cmd)
	return cmd
}

// printJobList prints the scheduler's jobs.
func printJobList(w io.Writer, l apiclient.JobList) error {
	t := newTable(w, "JOB", "SCHEDULE", "NEXT", "LAST", "LAST AT", "LAST TASK", "STATE")
	for _, j := range l.Jobs {
		sch := j.Schedule
		if len(j.After) > 0 {
			sch = strings.TrimSpace(sch + " after " + strings.Join(j.After, ","))
		}

		last := "-"
		if j.LastStatus.Valid() {
			last = j.LastStatus.String()
		}
		t.row(j.Name, orDash(sch), fmtTime(j.Next), last, fmtTime(j.LastAt), orDash(j.LastTaskID), jobState(&j))
	}
	return t.flush()
}

// jobState is a scheduled job's STATE: paused or active, and its runs in
// progress (a pause stops the schedule, not the run going on).
func jobState(j *apollo.ScheduledJob) string {
	var parts []string
	if j.Paused {
		parts = append(parts, "paused")
	}
	if j.Running > 0 {
		parts = append(parts, fmt.Sprintf("running (%d)", j.Running))
	}
	if len(parts) == 0 {
		return "active"
	}
	return strings.Join(parts, ", ")
}

// jobActions are the job actions: their one-line help, and their call.
var jobActions = map[string]struct {
	help string
	call func(c *apiclient.Client, ctx context.Context, name string) (apiclient.JobAction, error)
}{
	"run":    {"Run a scheduled job now, outside its schedule", (*apiclient.Client).RunJob},
	"pause":  {"Pause a scheduled job: no scheduled runs until resumed", (*apiclient.Client).PauseJob},
	"resume": {"Resume a paused job", (*apiclient.Client).ResumeJob},
}

func newJobActionCmd(action string) *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:     action + " NAME",
		Short:   jobActions[action].help,
		Long:    jobActions[action].help + ". Needs the operator role; audited.",
		Example: "  apollo job " + action + " nightly_backup",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.JobAction, error) {
				return jobActions[action].call(c, ctx, args[0])
			}, func(w io.Writer, ans apiclient.JobAction) error {
				switch action {
				case "run":
					return say(w, "started %s\n", components.Escape(ans.TaskID))
				case "pause":
					return say(w, "paused %s\n", components.Escape(ans.Job))
				}
				return say(w, "resumed %s\n", components.Escape(ans.Job))
			})
		},
	}
	a.register(cmd)
	return cmd
}
