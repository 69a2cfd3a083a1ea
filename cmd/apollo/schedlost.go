package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/sched"
)

// newSchedLostCmd lists, and drops, the runs a stopped scheduler's state
// file keeps: the runs a killed scheduler lost, which the next start
// settles, and among them those reported with another token, which only
// a start with that token settles. When that token is gone, this is how
// they leave the file (before, by editing it by hand).
func newSchedLostCmd() *cobra.Command {
	var (
		stateDir, token string
		drop            []string
	)
	cmd := &cobra.Command{
		Use:   "lost",
		Short: "List the runs a stopped scheduler's state file keeps, or drop some",
		Long: `List the runs in progress that the state file of a stopped scheduler keeps
(docs/scheduler.md, "Killed"): runs a killed scheduler lost, which its next
start reports failed (or skipped) with the token they were reported with.
A run reported with another token than the one the scheduler now starts
with waits in the file, and each start logs it, until a start with that
token settles it. If that token is gone: mark the run on the server
(apollo task fix TASK --status failed --reason ..., with a token of its
tenant), then drop
it from the file with --drop TASK.

Each run: its task ID, job, attempt, whether its process had started, and
the token it was reported with, as a short hash: "this token" when it is
--token's (default $APOLLO_TOKEN), which apollo sched would settle.

The scheduler must be stopped: while one runs on the directory, its runs
are in progress, not lost, and the command is refused (exit 1).`,
		Example: `  apollo sched lost --state /var/lib/apollo-sched
  apollo sched lost --state /var/lib/apollo-sched --drop 'backup@20260329T010000Z#1'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") {
				token = os.Getenv("APOLLO_TOKEN")
			}
			mine := schedOwner(token)
			out := cmd.OutOrStdout()
			if len(drop) > 0 {
				runs, err := sched.DropKeptRuns(stateDir, drop)
				if err != nil {
					return err
				}
				for _, r := range runs {
					fmt.Fprintf(out, "dropped %s (job %s, %s)\n", r.Task, r.Job, reportedWith(r.Owner, mine))
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "apollo: no scheduler settles them now: if the server still shows them running, "+
					"mark each with apollo task fix TASK --status failed --reason ..., with a token of its tenant")
				return nil
			}
			runs, err := sched.KeptRuns(stateDir)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				fmt.Fprintf(out, "no runs kept in %s\n", stateDir)
				return nil
			}
			tb := newTable(out, "TASK", "JOB", "ATTEMPT", "STARTED", "REPORTED WITH")
			for _, r := range runs {
				tb.row(r.Task, r.Job, r.Attempt, yesNo(r.Started), reportedWith(r.Owner, mine))
			}
			return tb.flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&stateDir, "state", "apollo-sched", "the scheduler's state directory (apollo sched --state; DATA/sched for apollo server --jobs)")
	fl.StringVar(&token, "token", "", "the token apollo sched starts with, to tell its runs from others' (default $APOLLO_TOKEN)")
	fl.StringArrayVar(&drop, "drop", nil, "take the run of this task ID out of the state file (repeat for several); every one must be there, or nothing changes")
	return cmd
}

// reportedWith says which token reported a run: owner is its Owner, mine
// the Owner of a scheduler with --token.
func reportedWith(owner, mine string) string {
	switch owner {
	case "":
		return "any token (kept before tokens were recorded)"
	case mine:
		return owner + " (this token)"
	}
	return owner + " (another token)"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
