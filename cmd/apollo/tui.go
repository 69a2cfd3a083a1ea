package main

import (
	"os"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/tui"
)

func newTUICmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "The terminal dashboard: tasks, jobs, alerts and the server's health, live",
		Long: `A dashboard in the terminal for the people on call. It follows the server's
live stream (the same as the web dashboard's) and its REST API:

  Tasks   every run, newest first; enter shows a run's timeline
  Jobs    each job's runs, failures, cost and backlog over 5 minutes, and
          the selected job's last hour as sparklines
  Alerts  firing, pending and resolved alerts; a acknowledges, s silences
  System  Apollo-11's own health

The header shows the connection: live, connecting, or reconnecting in Ns.
It reconnects by itself and resumes where it left off. Press ? for the keys.
Colors follow NO_COLOR.`,
		Example: `  apollo tui
  apollo tui --server https://apollo.example.com --token "$APOLLO_TOKEN"
  NO_COLOR=1 apollo tui`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cf.resolveCLI(); err != nil {
				return err
			}
			return tui.Run(cmd.Context(), tui.Options{
				Server:  cf.server,
				Token:   cf.token,
				NoColor: os.Getenv("NO_COLOR") != "",
			}, tuiProgramOptions...)
		},
	}
	cf.register(cmd)
	return cmd
}

// tuiProgramOptions are passed to the dashboard's program: none in the
// binary, which draws on the terminal; a test gives an input, an output
// and a size to drive apollo tui without one.
var tuiProgramOptions []tea.ProgramOption
