package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "apollo",
		Short: "Apollo-11: monitoring and alerting for scheduled jobs",
		Long: `Apollo-11 keeps the true state of every run of your scheduled jobs, aggregates
metrics in 10-second windows, evaluates alert rules and notifies DingTalk,
WeCom, Feishu, Slack, email and webhooks without alert storms.

Start here:
  apollo demo            a server with sample jobs, rules and a firing alert
  apollo server          the all-in-one server (no other service needed)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newServerCmd(), newDemoCmd(), newBusCmd(), newAlertCmd(), newSchedCmd(), newTokenCmd(), newReportCmd(), newExecCmd(), newSpoolCmd(),
		newNotifyCmd(), newRulesCmd(), newExpectCmd(),
		newTasksCmd(), newTaskCmd(), newJobsCmd(), newJobCmd(), newAlertsCmd(), newAckCmd(), newSilenceCmd(),
		newStatusCmd(), newCompletionCmd(), newTUICmd())
	addRulesServerCmds(root)
	return cliCmd(root)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			fmt.Fprintln(cmd.OutOrStdout(), "apollo", v)
			return nil
		},
	}
}
